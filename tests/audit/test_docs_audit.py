"""docs/audit.md: its Python blocks run as written, and its families table is the registry's."""

from __future__ import annotations

import re
from pathlib import Path

from radharmony.registry import get_harmonizer_class, list_datasets

DOC = Path(__file__).resolve().parents[2] / "docs" / "audit.md"


def test_python_blocks_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) == 2
    for code in blocks:
        exec(compile(code, str(DOC), "exec"), {})
    out = capsys.readouterr().out
    assert "chexpert" in out and "left out 6 of" in out


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
