"""Reading a config's metadata table: CSV/TSV, JSON or JSON Lines rows as text cells.

:func:`read_rows` returns the table exactly as the export holds it (nothing recoded, empty
cells are ``''``); JSON objects are flattened to dotted column names and :func:`json_rows`
finds the rows where the config's ``table.records`` / ``table.keyed_by`` say they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ..errors import MetadataError, shorten
from ..table.read_csv import read_table
from ..table.read_json import load_json, read_jsonl


def cell_text(v) -> Any:
    """A JSON value as table text: lists stay lists (label lists), None/NaN become ''."""
    if v is None or isinstance(v, float) and v != v:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return [cell_text(x) for x in v]
    if isinstance(v, dict):
        return json.dumps(v, sort_keys=True)
    return str(v)


def _flatten(obj: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in obj.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, name + "."))
        else:
            out[name] = cell_text(v)
    return out


def json_rows(data, table: dict, *, source: str) -> list[dict]:
    """The row objects of a parsed JSON file as ``table`` (records path / keyed_by) says."""
    if table["records"]:
        for part in table["records"].split("."):
            if not isinstance(data, dict) or part not in data:
                found = sorted(data)[:10] if isinstance(data, dict) else type(data).__name__
                raise MetadataError(f"{source}: no {table['records']!r} in the JSON",
                                    expected=f"an object with key {part!r} (config field "
                                    "table.records)", found=repr(found),
                                    fix="correct table.records to the key holding the rows")
            data = data[part]
    if table["keyed_by"]:
        if not isinstance(data, dict):
            raise MetadataError(f"{source}: the JSON is not keyed by id",
                                expected="an object {id: {field: value}} (table.keyed_by)",
                                found=type(data).__name__, fix="remove table.keyed_by")
        rows = []
        for k, v in data.items():
            if not isinstance(v, dict):
                raise MetadataError(f"{source}: entry {shorten(k, 60)!r} is not an object",
                                    expected="{field: value} per id", found=shorten(v, 80),
                                    fix="check table.records and table.keyed_by")
            rows.append({table["keyed_by"]: k, **v})
        data = rows
    if isinstance(data, dict):
        raise MetadataError(f"{source}: the JSON is an object, not a list of rows",
                            expected="a list of row objects", found=f"keys {sorted(data)[:10]}",
                            fix="set table.records to the key holding the rows, or "
                                "table.keyed_by when the keys are ids")
    if not isinstance(data, list):
        raise MetadataError(f"{source}: the JSON holds no rows", expected="a list of row "
                            "objects", found=type(data).__name__, fix="check table.records")
    out = []
    for i, row in enumerate(data):
        if row is None:
            continue
        if not isinstance(row, dict):
            raise MetadataError(f"{source}, row {i}: not an object", expected="{field: value}",
                                found=shorten(repr(row), 80), fix="check table.records")
        out.append(_flatten(row))
    return out


def read_rows(path: Path, table: dict, *, description: str) -> pd.DataFrame:
    """The metadata table as text cells (nothing recoded; empty cells are '')."""
    if table["format"] in ("csv", "tsv"):
        df = read_table(path, description=description, dtype=str, keep_default_na=False,
                        sep=table["delimiter"], encoding=table["encoding"])
        df.columns = [str(c).strip() for c in df.columns]
        return df
    if table["format"] == "jsonl":
        rows = [_flatten(r) if isinstance(r, dict) else r for r in read_jsonl(path)
                if r is not None]
        bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
        if bad is not None:
            raise MetadataError(f"{path}, object {bad}: not a JSON object",
                                expected="one {field: value} object per line",
                                found=shorten(repr(rows[bad]), 80), fix="check the export")
    else:
        try:
            data = load_json(path)
        except (ValueError, UnicodeDecodeError) as exc:
            raise MetadataError(f"{path} is not valid JSON", expected=description,
                                found=shorten(exc, 120), fix="check the export") from None
        rows = json_rows(data, table, source=str(path))
    df = pd.DataFrame.from_records(rows) if rows else pd.DataFrame()
    return df.astype(object).where(df.notna(), "")
