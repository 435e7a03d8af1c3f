"""`python -m voicestack ...`: the same as the `voicestack` console command."""

from voicestack.cli import main

raise SystemExit(main())
