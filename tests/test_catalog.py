"""The light catalog (radharmony/catalog.json) equals the registry, and the commands that can
answer from it import neither torch nor pandas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from docs_blocks import gen_docs
from radharmony import catalog

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "pandas", "numpy", "cv2", "monai", "ray", "sklearn", "webdataset", "pyarrow")


def test_catalog_file_equals_the_registry():
    """Every built-in key, family and spec field as the registry has them now."""
    stored = json.loads(catalog.INDEX.read_text())
    assert stored == catalog.build(), "radharmony/catalog.json is stale: run python -m tools.gen_docs"
    assert stored["digest"] == catalog.source_digest()


def test_specs_read_back_equal_the_real_ones():
    from radharmony.registry import get_harmonizer_class

    stored = json.loads(catalog.INDEX.read_text())
    for key, record in stored["specs"].items():
        assert catalog._spec_from(record) == get_harmonizer_class(key).spec, key


def test_answers_come_from_the_registry_once_it_is_loaded(monkeypatch):
    """A user's register_dataset needs the registry: once loaded, it answers, not the file."""
    import radharmony

    assert catalog._index() is None  # this process has loaded the registry
    assert catalog.list_datasets() == radharmony.list_datasets()
    assert catalog.families() == radharmony.families()


def _imports_after(code: str) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print([m for m in {HEAVY!r} if m in sys.modules])")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env,
                       cwd=REPO, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    return eval(r.stdout.strip().splitlines()[-1])


def _cli(*argv: str) -> str:
    return ("import contextlib, io\nfrom radharmony.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    try:\n        code = main({list(argv)!r})\n"
            f"    except SystemExit as e:\n        code = e.code\n"
            f"assert code == 0, code\nassert out.getvalue()")


@pytest.mark.parametrize("argv", [("list",), ("list", "--json"), ("--help",), ("info", "--help")],
                         ids=" ".join)
def test_light_commands_import_neither_torch_nor_pandas(argv):
    assert _imports_after(_cli(*argv)) == []


def test_vocab_does_not_import_torch():
    assert "torch" not in _imports_after(_cli("vocab"))


def test_import_radharmony_is_light_and_usable():
    assert _imports_after("import radharmony\nassert radharmony.__version__") == []
    assert "torch" in _imports_after("import radharmony\nradharmony.merge")


def test_list_from_the_file_equals_list_from_the_registry():
    """`radharmony list --json` prints the same rows either way."""
    from radharmony.cli import main

    code = _cli("list", "--json").replace("assert out.getvalue()", "print(out.getvalue())")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    light = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, cwd=REPO, timeout=120).stdout
    heavy = subprocess.run([sys.executable, "-c", "import radharmony.registry\n" + code],
                           capture_output=True, text=True, env=env, cwd=REPO, timeout=120).stdout
    assert json.loads(light) == json.loads(heavy) and len(json.loads(light)) >= 30
    assert main  # the in-process import stays usable


def test_every_dataset_has_a_published_count_or_says_why_none_exists():
    """The catalog page's count column: the release's count in its unit, or the spec's
    ``expected_note`` (never a bare ``?``)."""
    gen = gen_docs()
    text = dict(gen.dataset_pages())["datasets/catalog.md"]
    rows = [r for r in text.splitlines() if r.startswith("| [`")]
    assert len(rows) == len(catalog.list_datasets())
    counts = {r.split("`")[1]: r.rsplit(" | ", 1)[1].rstrip(" |") for r in rows}
    assert "?" not in counts.values()
    assert counts["nih_cxr14"] == "112,120"
    assert counts["medical_diff_vqa"] == "700,703 questions"
    assert counts["ms_cxr"] == "1,162 pairs"
    assert counts["mimic_cxr_jpg_test"] == "687 studies"
    assert counts["chexmask_vindr"] == "18,000"
    assert counts["slake_chest"].startswith("none: SLAKE counts 14,028 questions")
    assert counts["chexmask_nih"] == ("none: CheXmask publishes 657,566 masks over its five "
                                      "sources and no count per source")
    # `radharmony list` shows the same counts (from the light catalog)
    assert catalog.spec("ms_cxr").published_count() == "1,162 pairs"
    assert catalog.spec("slake_chest").published_count() is None
    assert catalog.spec("slake_chest").expected_note.startswith("SLAKE counts 14,028")


def test_catalog_keys_are_never_broken_mid_word():
    """Each key links with the class whose style keeps it on one line (the site's CSS)."""
    text = dict(gen_docs().dataset_pages())["datasets/catalog.md"]
    assert "| [`chexmask_chexpert`](chexmask_chexpert.md){: .rh-key } |" in text
    css = (REPO / "docs" / "stylesheets" / "extra.css").read_text()
    assert ".md-typeset a.rh-key code" in css and "white-space: nowrap" in css
    mkdocs = (REPO / "mkdocs.yml").read_text()
    assert "stylesheets/extra.css" in mkdocs and "- attr_list" in mkdocs
