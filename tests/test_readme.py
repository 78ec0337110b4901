"""The README: a page a newcomer reads in five minutes, whose Quick start runs as written on a
replica laid out like the real release, and whose links lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
#: the README's length limit (the manual lives in docs/)
MAX_LINES = 250


def section(title: str) -> str:
    text = README.read_text()
    part = text[text.index(f"## {title}"):]
    return part[:part.index("\n## ", 3)]


def quick_start_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", section("Quick start"), flags=re.S)


def test_readme_fits_on_a_few_screens():
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES
    setup = section("Set-up: two commands")
    assert "make demo" in setup and "make test" in setup


def test_quick_start_reaches_a_training_batch(rex_root, tmp_path, monkeypatch):
    blocks = quick_start_blocks()
    assert len(blocks) >= 1
    monkeypatch.chdir(tmp_path)
    ns: dict = {}
    for code in blocks:
        exec(compile(code.replace("/data/ReXGradient-160K", str(rex_root)), "README", "exec"), ns)
    assert ns["sample"]["img"].shape == (1, 224, 224)
    assert tuple(ns["batch"]["img"].shape) == (8, 1, 224, 224)
    assert len(ns["batch"]["report"]) == 8
    assert len(ns["folds"]) == 5 and len(ns["ds"]) == len(ns["df"])


def test_every_local_link_resolves():
    text = README.read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert len(links) >= 20
    missing = [ln for ln in links if not ln.startswith("http") and not (README.parent / ln).exists()]
    assert not missing, missing

