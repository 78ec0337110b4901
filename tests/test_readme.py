"""The README's Quick start runs as written, on a replica laid out like the real release."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def quick_start_blocks() -> list[str]:
    text = README.read_text()
    section = text[text.index("## Quick start"):]
    section = section[:section.index("\n## ", 3)]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_quick_start_runs(rex_root, tmp_path, monkeypatch):
    blocks = quick_start_blocks()
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    for code in blocks:
        exec(compile(code.replace("/data/ReXGradient-160K", str(rex_root)), "README", "exec"), ns)
    assert ns["sample"]["img"].shape == (1, 224, 224)
    assert len(ns["folds"]) == 5 and len(ns["ds"]) == len(ns["df"])


def test_report_labels_section_runs(capsys):
    text = README.read_text()
    section = text[text.index("## Labels from reports"):]
    section = section[:section.index("\n## ", 3)]
    (block,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "negation" in out and "uncertain" in out
