"""The ``radharmony`` command: list, inspect, harmonize, validate, cache, view, label, export,
merge and evaluate datasets, and draft configs for new ones (``radharmony --help`` lists every
subcommand).

Exit codes: 0 success, 1 problems found (validation failures, unreadable files, errors
reported by the library), 2 usage errors (bad arguments, unknown dataset key). Results go to
stdout (``--json`` for machine-readable output); progress bars and messages go to stderr.
"""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
