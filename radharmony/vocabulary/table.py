"""The canonical findings table (``findings.tsv``) and the per-dataset mapping onto it.

``findings.tsv`` is data, one row per canonical finding, tab-separated, columns:

* ``id``: snake_case identifier (the column name in derived tables);
* ``name``: display name;
* ``parents``: ``;``-separated ids of the findings this one implies (a small DAG);
* ``exhaustive``: ``yes`` when the finding's children partition it (a dataset that labels
  every child, all 0, has the finding 0), else ``no``;
* ``kind``: ``finding``, ``device`` (never implied absent by a ``No Finding``) or ``normal``;
* ``umls_cui``: the UMLS concept, where PadChest's ``labelCUIS`` gives one for the exact term;
* ``definition``: one sentence.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Iterable, Mapping

import pandas as pd

from ..errors import RadHarmonyError
from .. import catalog  # the registry's specs, without importing torch (`radharmony vocab`)

#: the relations a source label may have to a canonical finding
RELATIONS = ("exact", "narrower", "broader", "approximate")
KINDS = ("finding", "device", "normal")
NO_FINDING = "no_finding"
TABLE_FILE = "findings.tsv"


class VocabularyError(RadHarmonyError, ValueError):
    """A label map, a finding id or a derivation input does not fit the canonical vocabulary."""


@lru_cache(maxsize=1)
def _table() -> pd.DataFrame:
    text = resources.files(__package__).joinpath(TABLE_FILE).read_text(encoding="utf-8")
    rows = [line.split("\t") for line in text.splitlines() if line.strip()]
    header, body = rows[0], rows[1:]
    df = pd.DataFrame(body, columns=header).astype(object)
    df["parents"] = df["parents"].map(lambda s: tuple(p for p in s.split(";") if p))
    df["exhaustive"] = df["exhaustive"].map({"yes": True, "no": False})
    df["umls_cui"] = df["umls_cui"].where(df["umls_cui"] != "", None)
    return df


def findings() -> pd.DataFrame:
    """The canonical findings, one row each, in vocabulary order (a copy).

    >>> f = findings()
    >>> f.set_index("id").loc["hydropneumothorax", "parents"]
    ('pneumothorax', 'pleural_effusion')
    """
    return _table().copy()


@lru_cache(maxsize=1)
def finding_ids() -> tuple[str, ...]:
    return tuple(_table()["id"])


@lru_cache(maxsize=1)
def _parents() -> dict[str, tuple[str, ...]]:
    return dict(zip(_table()["id"], _table()["parents"]))


@lru_cache(maxsize=None)
def ancestors(finding: str) -> tuple[str, ...]:
    """Every finding ``finding`` implies, nearest first (``"nodule"`` -> nodule_or_mass, ...)."""
    out: list[str] = []
    todo = list(_parents()[finding])
    while todo:
        p = todo.pop(0)
        if p not in out:
            out.append(p)
            todo.extend(_parents()[p])
    return tuple(out)


@lru_cache(maxsize=None)
def descendants(finding: str) -> tuple[str, ...]:
    """Every finding that implies ``finding``, in vocabulary order."""
    return tuple(f for f in finding_ids() if finding in ancestors(f))


@lru_cache(maxsize=None)
def children(finding: str) -> tuple[str, ...]:
    return tuple(f for f in finding_ids() if finding in _parents()[f])


def check_findings(names: Iterable[str] | None, *, where: str = "findings=") -> tuple[str, ...]:
    """``names`` as a tuple of known finding ids (all of them for None), or raise."""
    if names is None:
        return finding_ids()
    if isinstance(names, str):
        names = (names,)
    names = tuple(names)
    unknown = [n for n in names if n not in finding_ids()]
    if unknown:
        import difflib

        close = {u: difflib.get_close_matches(u, finding_ids(), n=1) for u in unknown}
        hint = ", ".join(f"{u!r} -> {c[0]!r}" for u, c in close.items() if c)
        raise VocabularyError(f"{where} names findings outside the canonical vocabulary",
                              expected="ids from radharmony.vocabulary.FINDINGS",
                              found=repr(unknown),
                              fix=f"did you mean {hint}?" if hint else
                              "see radharmony.vocabulary.findings() for the ids")
    return names


def check_label_map(spec) -> None:
    """Raise unless ``spec.label_map`` covers every label column with valid entries."""
    lmap: Mapping = spec.label_map
    missing = [c for c in spec.label_cols if c not in lmap]
    extra = [c for c in lmap if c not in spec.label_cols]
    if missing or extra:
        raise VocabularyError(
            f"dataset {spec.key!r}: label_map does not match its label columns",
            expected="one entry per label column (a tuple of (finding, relation) pairs, or None "
                     "for explicitly unmapped)",
            found=f"unmapped columns {missing}, entries for unknown columns {extra}",
            fix="add the entries to the LABEL_MAP of the dataset module")
    for col, pairs in lmap.items():
        if pairs is None:
            continue
        ok = isinstance(pairs, tuple) and pairs and all(
            isinstance(p, tuple) and len(p) == 2 and p[0] in finding_ids() and p[1] in RELATIONS
            for p in pairs)
        if not ok:
            raise VocabularyError(
                f"dataset {spec.key!r}: label_map[{col!r}] is not a valid mapping",
                expected=f"None or a non-empty tuple of (finding id, relation in {RELATIONS})",
                found=repr(pairs), fix="use ids from radharmony.vocabulary.FINDINGS")
        if len({f for f, _ in pairs}) != len(pairs):
            raise VocabularyError(f"dataset {spec.key!r}: label_map[{col!r}] names a finding twice",
                                  found=repr(pairs), fix="give one relation per finding")


_STRENGTH = {"exact": 3, "narrower": 2, "broader": 2, "approximate": 1}


def expanded_map(spec) -> dict[str, dict[str, tuple[str, bool]]]:
    """source label -> {finding: (relation, declared)} after following the hierarchy.

    An exact or narrower entry also implies every ancestor (``narrower``); an exact or broader
    entry bounds every descendant (``broader``: a 0 stays 0). A declared entry beats an inferred
    one; inferred ``narrower`` and ``broader`` together make ``exact``.
    """
    check_label_map(spec)
    out: dict[str, dict[str, tuple[str, bool]]] = {}
    for col in spec.label_cols:
        pairs = spec.label_map[col] or ()
        declared = {f: r for f, r in pairs}
        inferred: dict[str, set[str]] = {}
        for f, r in pairs:
            if r in ("exact", "narrower"):
                for a in ancestors(f):
                    inferred.setdefault(a, set()).add("narrower")
            if r in ("exact", "broader"):
                for d in descendants(f):
                    inferred.setdefault(d, set()).add("broader")
        entry = {f: (r, True) for f, r in declared.items()}
        for f, rels in inferred.items():
            if f in entry:
                continue
            entry[f] = ("exact" if rels == {"narrower", "broader"} else rels.pop(), False)
        out[col] = {f: entry[f] for f in finding_ids() if f in entry}
    return out


def mapping(keys: Iterable[str] | None = None, *, expand: bool = True) -> pd.DataFrame:
    """Every registered dataset's source labels against the canonical findings.

    Columns ``dataset``, ``source_label``, ``finding`` (None for an explicitly unmapped label),
    ``relation`` (``exact``, ``narrower``: the source label implies the finding, ``broader``:
    the finding implies the source label, ``approximate``; None when unmapped) and ``declared``
    (False for the rows the hierarchy adds; ``expand=False`` leaves them out).

    Examples:
        >>> m = mapping(["vindr_cxr"])
        >>> m[(m.source_label == "Nodule/Mass") & m.declared][["finding", "relation"]].values.tolist()
        [['nodule_or_mass', 'exact']]
    """
    rows = []
    for key in (catalog.list_datasets() if keys is None else keys):
        spec = catalog.spec(key)
        emap = expanded_map(spec)
        for col in spec.label_cols:
            if spec.label_map[col] is None:
                rows.append((key, col, None, None, True))
                continue
            for f, (r, declared) in emap[col].items():
                if declared or expand:
                    rows.append((key, col, f, r, declared))
    return pd.DataFrame(rows, columns=["dataset", "source_label", "finding", "relation",
                                       "declared"])
