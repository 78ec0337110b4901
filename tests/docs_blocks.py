"""The python blocks of README.md and docs/**/*.md, and the replicas they run on.

A page's blocks run in order, in one namespace, in a fresh working folder. A data root a
block names (``/data/NIH/images``) is pointed at a replica laid out like the real release
(:data:`ROOTS`); a block that cannot run (it needs a GPU cluster, a browser, a real download)
carries ``<!-- docs-test: skip REASON -->`` on the line before its fence.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = REPO / "docs"
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\b\s*(.*?)\s*-->")
FENCE = re.compile(r"^( *)```python[^\n]*\n(.*?)^\1```", re.S | re.M)


def gen_docs():
    """tools/gen_docs.py, the generator of the dataset and API pages, loaded by path."""
    import importlib.util
    import sys

    if "gen_docs" not in sys.modules:
        spec = importlib.util.spec_from_file_location("gen_docs", REPO / "tools" / "gen_docs.py")
        sys.modules["gen_docs"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules["gen_docs"]


def pages() -> list[Path]:
    """README.md and every docs page, in a stable order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks(path: Path) -> list[tuple[int, str, str | None]]:
    """(line number, code, skip reason or None) of each ```python block of ``path``."""
    text = path.read_text()
    out = []
    for m in FENCE.finditer(text):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        skip = SKIP.search(before)
        indent = len(m.group(1))
        code = "\n".join(line[indent:] for line in m.group(2).split("\n"))
        out.append((text.count("\n", 0, m.start()) + 1, code,
                    (skip.group(1) or "no reason given") if skip else None))
    return out


def _fake(key: str, name: str, sub: str = "") -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        from radharmony.fake import make_fake

        base = Path(make_fake(key, tmp / name)["base_image_dir"])
        return base / sub if sub else base
    return build


def _writer(module: str, name: str, **kwargs) -> Callable[[Path], Path]:
    """A replica large enough for the examples' 10 patient-grouped folds."""
    def build(tmp: Path) -> Path:
        from importlib import import_module

        writer = getattr(import_module(f"radharmony.fake.{module}"), f"write_{module}")
        return Path(writer(tmp / name, **kwargs))
    return build


def _rex(sub: str = "") -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        from radharmony.fake import write_rexgradient

        root = tmp / "ReXGradient-160K"
        if not root.exists():
            write_rexgradient(root, studies={"train": 30, "valid": 10, "test": 10}, seed=1)
        return root / sub if sub else root
    return build


def _mixture(tmp: Path) -> Path:
    """A small mixture folder (records.parquet + mixture.json over fake replicas, written by
    tests/mixture/mixture_fixtures.py, its tasks named as the registry names them) standing in
    for one ``radharmony mix build`` wrote."""
    import importlib.util
    import sys

    module = sys.modules.get("mixture_fixtures")
    if module is None:
        spec = importlib.util.spec_from_file_location(
            "mixture_fixtures", REPO / "tests" / "mixture" / "mixture_fixtures.py")
        sys.modules["mixture_fixtures"] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module.write_mixture(tmp / "mixture", images="cache", size=64,
                                registry_names=True).out


#: a data root as the docs write it -> the replica that stands in for it (longest first)
ROOTS: dict[str, Callable[[Path], Path]] = {
    "/mnt/data/ReXGradient-160K": _rex(),
    "/data/ReXGradient-160K": _rex(),
    "/data/rexgradient/deid_png": _rex("deid_png"),
    "/data/NIH/images": _writer("nih", "NIH", n_patients=12),
    "/data/nih/images": _writer("nih", "NIH", n_patients=12),
    "/data/nih": _writer("nih", "NIH", n_patients=12),
    "/data/CheXpert-v1.0-small": _writer("chexpert", "CheXpert", n_patients=16),
    "/data/xraydar-multimodal": _fake("xraydar_multimodal", "xraydar"),
    "/data/xraydar": _fake("xraydar_multimodal", "xraydar"),
    "/data/vindr-cxr/train": _fake("vindr_cxr", "vindr"),
    "/data/PadChest": _writer("padchest", "PadChest", n_patients=12),
    "/data/openi/png": _fake("openi", "openi"),
    "/data/mixtures/cxr-mix": _mixture,
    "/data/rsna-bone-age": _fake("rsna_bone_age", "rsna-bone-age"),
    "/data/TAIX-Ray": _writer("taix_ray", "TAIX-Ray", extract=False),
    "/data/CT-RATE/dataset": _fake("ct_rate_train", "CT-RATE"),
    "/data/Totalsegmentator_dataset_v201": _fake("totalsegmentator", "TotalSegmentator"),
}


def _chexlocalize(tmp: Path) -> Path:
    """CheXlocalize's replica; its val_labels.csv is CheXpert's valid.csv (the same images)."""
    import shutil

    base = Path(_fake("chexlocalize_val", "CheXloc")(tmp))
    shutil.copy(base / "val_labels.csv", base / "valid.csv")
    return base


#: page name -> data roots that stand for another replica on that page
PAGE_ROOTS: dict[str, dict[str, Callable[[Path], Path]]] = {
    "datasets_grounding.md": {"/data/CheXpert-v1.0-small": _chexlocalize},
}


def point_at_replicas(code: str, tmp: Path, built: dict[str, Path], page: str = "") -> str:
    """``code`` with every data root of :data:`ROOTS` it names replaced by its replica."""
    roots = {**ROOTS, **PAGE_ROOTS.get(page, {})}
    for root in sorted(roots, key=len, reverse=True):
        if root in code:
            if root not in built:
                built[root] = roots[root](tmp)
            code = code.replace(root, str(built[root]))
    return code


def run_block(code: str, name: str, ns: dict) -> None:
    """Run one block in ``ns``: plain code with ``exec``; a ``>>>`` session with doctest, its
    shown outputs compared."""
    if not code.lstrip().startswith(">>>"):
        exec(compile(code, name, "exec"), ns)
        return
    import doctest

    test = doctest.DocTestParser().get_doctest(code, ns, name, name, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out: list[str] = []
    runner.run(test, out=out.append, clear_globs=False)
    if runner.failures:
        raise AssertionError("".join(out))
