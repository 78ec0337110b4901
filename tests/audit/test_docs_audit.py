"""docs/audit.md: its families table is the registry's (tests/test_docs.py runs its examples)."""

from __future__ import annotations

import re
from pathlib import Path

from radharmony.registry import get_harmonizer_class, list_datasets

DOC = Path(__file__).resolve().parents[2] / "docs" / "audit.md"


def test_families_table_is_the_registry():
    rows = re.findall(r"^\| `(\w+)` \| (.*?) \| (.*?) \|$", DOC.read_text(), flags=re.M)
    table = {}
    for family, keys, link in rows:
        for key in re.findall(r"`(\w+)`", keys):
            table[key] = (family, link.split()[0].strip(":"))
    declared = {}
    for key in list_datasets():
        ident = get_harmonizer_class(key).spec.identity
        if ident is not None:
            declared[key] = (ident.family, {"same": "same", "column": "column",
                                            "none": "none", "path": "path"}[ident.link])
    assert table == declared
