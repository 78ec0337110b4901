"""What every command prints: exit codes, JSON or text results on stdout, progress on stderr."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
#: how many offending paths of each kind a command lists
FIRST_N = 10


class UsageError(Exception):
    """Arguments that parse but do not fit together (exit code 2)."""


def progress(iterable: Iterable, *, total: int | None, desc: str, quiet: bool,
              unit: str = "img"):
    if quiet:  # no bar to draw: spare the import of tqdm (a tenth of a quick command's time)
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                disable=quiet, dynamic_ncols=True, leave=False)


def emit(args: argparse.Namespace, result: Any, text: Callable[[Any], str]) -> None:
    if args.json:  # ensure_ascii: lone surrogates travel as \\ud800 escapes
        print(json.dumps(result, indent=2, default=json_default))
    else:
        print(printable(text(result), sys.stdout))


def json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def printable(text: str, stream) -> str:
    """``text`` with what ``stream``'s encoding cannot write (lone surrogates) escaped."""
    enc = getattr(stream, "encoding", None) or "utf-8"
    try:
        text.encode(enc)
        return text
    except UnicodeEncodeError:
        return text.encode(enc, "backslashreplace").decode(enc)
    except LookupError:
        return text


def note(msg: str) -> None:
    print(printable(msg, sys.stderr), file=sys.stderr)


def text_table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


# -- argument types shared by the commands ------------------------------------------------------
def workers(text: str) -> int:
    """``--workers N``: 0 (in this process) or a positive count."""
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError("must be 0 (in-process) or a positive count")
    return n


def positive(text: str) -> int:
    """A positive count (``--shard-size``, ``--n-splits``)."""
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError("must be a positive count")
    return n

