"""Safe derivations of ids and paths from a table's cells: a closed set of operators.

A value spec (validated by :mod:`radharmony.custom.checker`) takes its text from one source --

* ``column``: a cell as written;
* ``template``: ``"{PatientID}/{Study}/{File}.png"`` -- each ``{NAME}`` is replaced by that
  column's cell (``{{`` and ``}}`` are literal braces). Nothing inside the braces is evaluated:
  no attribute access, indexing or format specs, unlike :meth:`str.format`;
* ``regex``: ``{column, pattern, group}`` -- the capture group of the first match (a capture,
  never a substitution);
* ``constant``: the same text for every row --

then applies, in this order, ``strip_prefix`` (the first listed prefix the text starts with is
removed), ``strip_suffix`` and ``replace_extension`` (``{".jpg": ".png"}``, case-insensitive).
An empty cell, or a regex without a match, gives None (the caller names the field and row).

>>> import pandas as pd
>>> t = pd.DataFrame({"pid": ["p1", "p2"], "file": ["img/a.JPG", "img/b.jpg"]})
>>> derive({"template": "{pid}/{file}", "strip_prefix": ["p1/"],
...         "replace_extension": {".jpg": ".png"}}, t).tolist()
['img/a.png', 'p2/img/b.png']
>>> derive({"regex": {"column": "file", "pattern": r"/(\\w+)\\.", "group": 1}}, t).tolist()
['a', 'b']
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def template_fields(template: str) -> list[str]:
    """The column names a template's placeholders name, in order; raises ``ValueError`` for
    a lone or empty brace."""
    names = []
    for m in _PLACEHOLDER.finditer(template):
        tok = m.group(0)
        if tok in ("{{", "}}"):
            continue
        if m.group(1) is None:
            raise ValueError(f"a lone {tok!r} at position {m.start()}: write {tok * 2} for a "
                             "literal brace")
        if not m.group(1).strip():
            raise ValueError(f"an empty placeholder at position {m.start()}")
        names.append(m.group(1).strip())
    return names


def _render(template: str, values: dict[str, str | None]) -> str | None:
    out, missing = [], False

    def sub(m: re.Match) -> str:
        nonlocal missing
        tok = m.group(0)
        if tok == "{{":
            return "{"
        if tok == "}}":
            return "}"
        v = values[m.group(1).strip()]
        if v is None:
            missing = True
            return ""
        return v

    out = _PLACEHOLDER.sub(sub, template)
    return None if missing else out


def columns_of(spec: dict | None) -> list[str]:
    """The table columns a value spec reads."""
    if not spec:
        return []
    if "column" in spec:
        return [spec["column"]]
    if "template" in spec:
        return list(dict.fromkeys(template_fields(spec["template"])))
    if "regex" in spec:
        return [spec["regex"]["column"]]
    return []


def _cells(table: pd.DataFrame, column: str) -> np.ndarray:
    """A column as text, None where empty."""
    out = table[column].to_numpy(dtype=object).copy()
    for i, v in enumerate(out):
        if v is None or isinstance(v, float) and v != v:
            out[i] = None
        else:
            v = v if isinstance(v, str) else str(v)
            out[i] = v.strip() or None
    return out


def derive(spec: dict, table: pd.DataFrame) -> np.ndarray:
    """The value ``spec`` gives for every row of ``table`` (object array, None = missing)."""
    n = len(table)
    if "constant" in spec:
        vals = np.full(n, spec["constant"], dtype=object)
    elif "column" in spec:
        vals = _cells(table, spec["column"])
    elif "template" in spec:
        names = columns_of(spec)
        cols = {name: _cells(table, name) for name in names}
        vals = np.array([_render(spec["template"], {k: c[i] for k, c in cols.items()})
                         for i in range(n)], dtype=object).reshape(n)
    else:
        rx = re.compile(spec["regex"]["pattern"])
        group = spec["regex"]["group"]
        src = _cells(table, spec["regex"]["column"])
        vals = np.empty(n, dtype=object)
        for i, v in enumerate(src):
            m = rx.search(v) if v is not None else None
            vals[i] = (m.group(group) or None) if m else None
    prefixes, suffixes = spec.get("strip_prefix", ()), spec.get("strip_suffix", ())
    remap = {k.lower(): v for k, v in (spec.get("replace_extension") or {}).items()}
    if prefixes or suffixes or remap:
        for i, v in enumerate(vals):
            if v is None:
                continue
            for p in prefixes:
                if v.startswith(p):
                    v = v[len(p):]
                    break
            for s in suffixes:
                if v.endswith(s):
                    v = v[:-len(s)]
                    break
            for old, new in remap.items():
                if v.lower().endswith(old):
                    v = v[:len(v) - len(old)] + new
                    break
            vals[i] = v or None
    return vals
