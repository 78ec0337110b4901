"""Writing CSV metadata tables for fake datasets (plain or gzip by suffix), as csv.writer does:
empty strings for missing values, no index column."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path


def write_csv(path: str | Path, header: list[str], rows: list[list], *,
              newline: str = "\r\n") -> Path:
    """Write ``header`` and ``rows``; ``newline``: the line ending (csv's ``\r\n`` by default,
    ``"\n"`` for tables pandas wrote)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", newline="") as fh:
        w = csv.writer(fh, lineterminator=newline)
        w.writerow(header)
        w.writerows(rows)
    return path
