"""The one pinned Kokoro-82M release; the server downloads it and the Pulumi weight cache mirrors it.

Kept free of heavy imports so that the Pulumi program can read it without torch.
"""

from typing import Final

REPO_ID: Final = "hexgrad/Kokoro-82M"
# Bump deliberately, together with the S3 prefix it names (infra uploads weights under it).
REVISION: Final = "f3ff3571791e39611d31c381e3a41a3af07b4987"
CONFIG_FILE: Final = "config.json"
CHECKPOINT_FILE: Final = "kokoro-v1_0.pth"
VOICES_DIR: Final = "voices"
DEFAULT_VOICES: Final = ("af_heart", "af_bella", "am_michael", "bf_emma")
"""Voices the stack serves (each is voices/<name>.pt); the first is the default."""
LANG_CODE: Final = "a"
"""misaki/KPipeline language code: 'a' is American English."""
