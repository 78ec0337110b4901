"""``python -m radharmony``: the same as the ``radharmony`` command."""

from .cli import main

raise SystemExit(main())
