"""The documentation: every python example runs, the site builds with no warning, every public
name has a reference entry, every registered dataset has an up-to-date page."""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import warnings

import pytest

from docs_blocks import DOCS, REPO, blocks, gen_docs, pages, point_at_replicas, run_block

#: blocks marked ``docs-test: skip``: kept few on purpose (each needs what a test cannot have)
MAX_SKIPPED = 8
#: top-level modules of the optional extras: a page needing an absent one is skipped
OPTIONAL = {"pytorch_lightning", "lightning", "ray", "webdataset", "monai", "sklearn",
            "sacrebleu", "rouge_score", "numba", "isal", "yaml", "skimage", "selenium"}
PAGES = [p for p in pages() if any(skip is None for _, _, skip in blocks(p))]


def test_skipped_blocks_are_few_and_say_why():
    skipped = [(p.name, line, why) for p in pages() for line, _, why in blocks(p) if why]
    assert len(skipped) <= MAX_SKIPPED, skipped
    assert all(why != "no reason given" for *_, why in skipped), skipped


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_page_examples_run(page, tmp_path_factory, monkeypatch):
    work = tmp_path_factory.mktemp("work")
    data = tmp_path_factory.mktemp("data")
    monkeypatch.chdir(work)
    built: dict = {}
    ns: dict = {"__name__": "__docs__"}
    for line, code, skip in blocks(page):
        if skip:
            continue
        code = point_at_replicas(code, data, built, page.name)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                run_block(code, f"{page.relative_to(REPO)}:{line}", ns)
        except ModuleNotFoundError as exc:  # an optional extra this install lacks
            if exc.name and exc.name.split(".")[0] in OPTIONAL:
                pytest.skip(f"{page.name}:{line} needs {exc.name} (an optional extra)")
            raise


def test_every_public_name_has_a_reference_entry():
    """Each name of radharmony.__all__ and of every subpackage's __all__ is documented on
    its module's reference page (the site build checks that each identifier resolves)."""
    subpackages = {f"radharmony.{p.parent.name}" for p in (REPO / "radharmony").glob("*/__init__.py")
                   if "__all__" in p.read_text()}
    assert subpackages | {"radharmony"} == set(gen_docs().public_modules())
    missing = []
    for module in sorted(subpackages | {"radharmony"}):
        page = DOCS / "api" / f"{module}.md"
        text = page.read_text() if page.is_file() else ""
        idents = gen_docs().reference_entries()[module]
        for name in importlib.import_module(module).__all__:
            # a dataset class, made on first use, is written out (mkdocstrings cannot collect it)
            entry = (f"::: {idents.get(name)}\n", f"class {name}(")
            if name != "__version__" and (name not in idents or not any(e in text for e in entry)):
                missing.append(f"{module}.{name}")
    assert not missing, missing


def test_generated_pages_are_up_to_date():
    """Dataset pages and API pages equal what tools/gen_docs.py writes now."""
    gen = gen_docs()
    stale = [str(path) for path, text in [*gen.dataset_pages(), *gen.api_pages()]
             if not (DOCS / path).is_file() or (DOCS / path).read_text() != text]
    assert not stale, f"{stale}: run `python -m tools.gen_docs`"


def test_every_registered_dataset_has_a_page():
    import radharmony

    missing = [k for k in radharmony.list_datasets() if not (DOCS / "datasets" / f"{k}.md").is_file()]
    assert not missing, f"{missing}: run `python -m tools.gen_docs`"


def test_site_builds_without_warnings(tmp_path):
    """``mkdocs build --strict``: a broken link, a missing page or reference fails it."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable)) or "mkdocs"
    r = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]


def test_report_labels_example_prints_the_cues(capsys):
    """The labels-from-reports page's example shows negation and uncertainty decided."""
    (block,) = [code for _, code, _ in blocks(DOCS / "labels_from_reports.md")][:1]
    exec(compile(block, "docs/labels_from_reports.md", "exec"), {})
    out = capsys.readouterr().out
    assert "negation" in out and "uncertain" in out
