"""A dataset's harmonized label columns as canonical findings (1 / 0 / -1 / NaN).

Per image, finding ``c`` and source label value ``s`` (1, 0, -1 uncertain, NaN unknown):

* ``exact``: ``s`` as is;
* ``narrower`` (the source implies ``c``): 1 gives 1, anything else unknown;
* ``broader`` (``c`` implies the source): 0 gives 0, anything else unknown;
* ``approximate``: as ``exact`` with ``approximate=True``, else unknown;
* unmapped (``None``): unknown.

The hierarchy of :func:`radharmony.vocabulary.findings` adds relations: an exact or narrower
source also implies every ancestor of its finding, an exact or broader one bounds every
descendant (see :func:`radharmony.vocabulary.mapping`). Several sources for one finding
combine as: any 1 -> 1, else any -1 -> -1, else any 0 -> 0, else NaN. Then, bottom-up, a
finding whose children partition it (``exhaustive``) is 0 when all its children are 0.

``No Finding`` is dataset-relative. Where a dataset maps a label to ``no_finding``:
``no_finding`` = 1 makes 0 every still-unknown finding of kind ``finding`` that another of
the dataset's labels declares (exact, narrower, or approximate when enabled), and every
descendant of an exact one (a normal CheXpert image has no fracture, so no rib fracture).
Never a device, never a finding the dataset reaches only through the hierarchy's ancestors
(PadChest's Cardiomegaly does not make its No Finding speak for the mediastinum), never a
finding outside its labels.
A positive such finding makes an unknown ``no_finding`` 0.
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from .table import (NO_FINDING, VocabularyError, _table, check_findings, children, descendants,
                    expanded_map, finding_ids)

_VALID = np.array([1.0, 0.0, -1.0])


def _values(table: pd.DataFrame, spec) -> np.ndarray:
    missing = [c for c in spec.label_cols if c not in table.columns]
    if missing:
        raise VocabularyError(f"dataset {spec.key!r}: the table lacks label columns",
                              expected=f"the columns {list(spec.label_cols)}",
                              found=f"missing {missing}",
                              fix="pass the dataset's harmonized table (harmonized_df)")
    try:
        v = table[list(spec.label_cols)].to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        v = None
    bad = None if v is None else ~(np.isnan(v) | np.isin(v, _VALID))
    if v is None or bad.any():
        found = "non-numeric cells" if v is None else \
            f"{int(bad.sum())} cells such as {v[bad][:3].tolist()}"
        raise VocabularyError(f"dataset {spec.key!r}: label cells are not 1 / 0 / -1 / missing",
                              expected="floats in {1, 0, -1} or NaN", found=found,
                              fix="derive from the harmonized table, before any uncertain= policy")
    return v


def _transfer(v: np.ndarray, relation: str, approximate: bool) -> np.ndarray:
    if relation == "exact" or (relation == "approximate" and approximate):
        return v
    if relation == "narrower":
        return np.where(v == 1.0, 1.0, np.nan)
    if relation == "broader":
        return np.where(v == 0.0, 0.0, np.nan)
    return np.full_like(v, np.nan)


_BY_RANK = np.array([np.nan, 0.0, -1.0, 1.0])  # precedence: 1 beats -1 beats 0 beats unknown


def _combine(cols: list[np.ndarray], n: int) -> np.ndarray:
    if not cols:
        return np.full(n, np.nan)
    if len(cols) == 1:
        return cols[0].copy()
    rank = np.zeros(n, dtype=np.int8)
    for c in cols:
        r = (c == 1.0).view(np.int8) * 3 + (c == -1.0).view(np.int8) * 2 + \
            (c == 0.0).view(np.int8)
        np.maximum(rank, r, out=rank)
    return _BY_RANK[rank]


def _own_vocabulary(spec, approximate: bool) -> set[str]:
    """The findings a dataset's No Finding speaks for: those its other labels declare exact or
    narrower (or approximate, when enabled), and the descendants of the exact ones."""
    full = {"exact"} | ({"approximate"} if approximate else set())
    own: set[str] = set()
    for pairs in spec.label_map.values():
        if not pairs or any(f == NO_FINDING for f, _ in pairs):
            continue
        for f, r in pairs:
            if r in full or r == "narrower":
                own.add(f)
            if r in full:
                own.update(descendants(f))
    return own


def derive_findings(table: pd.DataFrame, spec, *, findings: Iterable[str] | None = None,
                    approximate: bool = False) -> pd.DataFrame:
    """One float column per canonical finding (1 / 0 / -1 / NaN), on ``table``'s index.

    ``table`` is a harmonized table with ``spec.label_cols``; ``findings`` picks and orders
    the output columns (default: every canonical finding).

    >>> import pandas as pd
    >>> from radharmony.registry import get_harmonizer_class
    >>> spec = get_harmonizer_class("vindr_cxr").spec
    >>> rows = pd.DataFrame(0.0, index=[0, 1], columns=list(spec.label_cols))
    >>> rows.loc[0, "Nodule/Mass"] = 1.0
    >>> derive_findings(rows, spec, findings=["nodule_or_mass", "nodule", "mass"]).values.tolist()
    [[1.0, nan, nan], [0.0, 0.0, 0.0]]
    """
    wanted = check_findings(findings)
    emap = expanded_map(spec)
    v = _values(table, spec)
    n = len(table)
    col = {c: i for i, c in enumerate(spec.label_cols)}
    sources: dict[str, list[np.ndarray]] = {}
    for src, rels in emap.items():
        for f, (r, _) in rels.items():
            sources.setdefault(f, []).append(_transfer(v[:, col[src]], r, approximate))
    out = {f: _combine(sources.get(f, []), n) for f in finding_ids()}
    exhaustive = dict(zip(_table()["id"], _table()["exhaustive"]))
    for f in _bottom_up():
        kids = children(f)
        if exhaustive[f] and kids:
            all0 = np.logical_and.reduce([out[k] == 0.0 for k in kids])
            out[f] = np.where(np.isnan(out[f]) & all0, 0.0, out[f])
    if NO_FINDING in sources:
        kinds = dict(zip(_table()["id"], _table()["kind"]))
        own_set = _own_vocabulary(spec, approximate)
        own = [f for f in finding_ids() if kinds[f] == "finding" and f in own_set]
        normal = out[NO_FINDING] == 1.0
        for f in own:
            out[f] = np.where(np.isnan(out[f]) & normal, 0.0, out[f])
        if own:
            any_pos = np.logical_or.reduce([out[f] == 1.0 for f in own])
            out[NO_FINDING] = np.where(np.isnan(out[NO_FINDING]) & any_pos, 0.0, out[NO_FINDING])
    return pd.DataFrame({f: out[f] for f in wanted}, index=table.index)


def _bottom_up() -> list[str]:
    """Finding ids, every finding after all of its descendants."""
    order: list[str] = []

    def visit(f):
        if f in order:
            return
        for k in children(f):
            visit(k)
        order.append(f)

    for f in finding_ids():
        visit(f)
    return order


def derive_report(table: pd.DataFrame, spec, *, approximate: bool = False) -> pd.DataFrame:
    """Per source label: how its known values (1 / 0 / -1) reached the canonical findings.

    Columns ``dataset``, ``source_label``, ``values`` (known cells), ``mapped`` (passed as is
    through an exact or enabled approximate relation), ``one_way`` (only through narrower /
    broader relations: a 1 upwards or a 0 downwards) and ``unknown`` (reached no finding).
    ``mapped + one_way + unknown == values``.
    """
    emap = expanded_map(spec)
    v = _values(table, spec)
    rows = []
    for i, src in enumerate(spec.label_cols):
        x = v[:, i]
        known = ~np.isnan(x)
        rels = {r for r, _ in emap[src].values()}
        if "exact" in rels or (approximate and "approximate" in rels):
            mapped, one_way = known, np.zeros_like(known)
        else:
            mapped = np.zeros_like(known)
            one_way = (("narrower" in rels) & (x == 1.0)) | (("broader" in rels) & (x == 0.0))
        rows.append((spec.key, src, int(known.sum()), int(mapped.sum()), int(one_way.sum()),
                     int((known & ~mapped & ~one_way).sum())))
    return pd.DataFrame(rows, columns=["dataset", "source_label", "values", "mapped", "one_way",
                                       "unknown"])
