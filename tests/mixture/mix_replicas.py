"""Replicas a mixture is built from: exact-format fakes of six sources and a hold-out set,
their images made as different as real patients' (``revary``), with one patient planted in
both MIMIC-CXR's train split and its test split, and one test image copied, byte for byte,
over a train image of another patient."""

from __future__ import annotations

import gzip
import shutil
import warnings
from pathlib import Path

import pytest

#: MIMIC replica facts (the fake's split file): patient 10085093 has train studies 56369616
#: and 59685819; 59685819 is moved to the test split. Patient 13015635's train image is
#: overwritten with the bytes of test patient 12056500's first image.
MOVED_STUDY, SHARED_PATIENT = "59685819", "10085093"
COPY_TO = "files/p13/p13015635/s57830020/dba7f7bb-bd3c5706-9c260591-2126461f-d6e158f3.jpg"
COPY_FROM = "files/p12/p12056500/s56399927/864291a2-8f65ec8a-bfc1bb3e-34d179a1-f4feac2f.jpg"
KEYS = ("rexgradient_train", "mimic_cxr_jpg", "chexpert", "padchest", "rexvqa_train",
        "vindr_cxr")


def _images(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix.lower() in (".png", ".jpg", ".jpeg"))


@pytest.fixture(scope="session")
def replicas(tmp_path_factory) -> dict[str, str]:
    """dataset key -> the root a spec names (rexgradient_test shares rexgradient's)."""
    from radharmony.fake import make_fake
    from radharmony.fake.duplicates import revary

    base = tmp_path_factory.mktemp("mixture-replicas")
    roots = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for seed, key in enumerate(KEYS):
            root = Path(make_fake(key, base / key)["base_image_dir"])
            revary(_images(base / key), seed=100 + seed)
            roots[key] = str(root)
    split = Path(roots["mimic_cxr_jpg"]) / "mimic-cxr-2.0.0-split.csv.gz"
    lines = gzip.decompress(split.read_bytes()).decode().splitlines()
    lines = [ln.replace(",train", ",test") if f",{MOVED_STUDY}," in ln else ln for ln in lines]
    split.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    mimic = Path(roots["mimic_cxr_jpg"])
    shutil.copyfile(mimic / COPY_FROM, mimic / COPY_TO)
    roots["rexgradient_test"] = roots["rexgradient_train"]
    return roots


def spec_for(roots: dict, *, cache_dir, valid: float = 0.3, **changes) -> dict:
    """The test mixture: every task family over the six sources, MIMIC's and ReXGradient's
    test splits held out."""
    sources = [
        {"dataset": "rexgradient_train", "root": roots["rexgradient_train"],
         "tasks": {"report_findings": "all", "report_findings_impression": "all",
                   "report_impression_indication": "all", "summarize_impression": "all",
                   "image_text_matching": "all", "classify_view": "x2"}},
        {"dataset": "rexgradient_train", "name": "rex_silver", "labels": "report",
         "root": roots["rexgradient_train"], "tasks": {"classify_findings": "all"}},
        {"dataset": "mimic_cxr_jpg", "root": roots["mimic_cxr_jpg"], "split": "train",
         "tasks": {"classify_findings": "all", "finding_question": "all",
                   "report_findings_impression": "all", "classify_view": "all"}},
        {"dataset": "chexpert", "root": roots["chexpert"],
         "tasks": {"classify_findings": "all", "classify_view": "first:5"}},
        {"dataset": "padchest", "root": roots["padchest"],
         "tasks": {"classify_findings": "random:50%"}},
        {"dataset": "rexvqa_train", "root": roots["rexvqa_train"], "tasks": {"vqa_mcq": "all"}},
        {"dataset": "vindr_cxr", "root": roots["vindr_cxr"],
         "tasks": {"classify_findings": "all", "finding_question": "random:10"}},
    ]
    spec = {"name": "test-mix", "seed": 11, "valid": valid, "cache_dir": str(cache_dir),
            "sources": sources,
            "hold_out": [{"dataset": "mimic_cxr_jpg", "root": roots["mimic_cxr_jpg"],
                          "split": "test"},
                         {"dataset": "rexgradient_test", "root": roots["rexgradient_test"]}]}
    spec.update(changes)
    return spec
