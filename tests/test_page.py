"""Every code snippet of the public ReXGradient page, run unchanged on a replica.

The snippets below are copied verbatim from ``shared/spec/rexgradient_radharmony_page.txt``;
only the data root ``/data/ReXGradient-160K`` is pointed at a replica laid out as the page
describes. When ../shared is present the test also checks each snippet still appears there.
"""

from __future__ import annotations

import pytest

from conftest import SHARED

ROOT = "/data/ReXGradient-160K"

SNIPPETS = {
    "train": '''
import torch
from radharmony.dataset import ReXGradientTrainDataset

ds = ReXGradientTrainDataset(
    base_image_dir="/data/ReXGradient-160K/deid_png/",
    output_report=True,
    dtype=torch.float32,
)
train_ds, val_ds = ds.get_datasets(n_splits=10)
sample = train_ds[0]
''',
    "valid": '''
from radharmony.dataset import ReXGradientValidDataset

ds = ReXGradientValidDataset(
    base_image_dir="/data/ReXGradient-160K/deid_png/",
    output_report=True,
)
full_ds = ds.get_datasets()   # 17,007 samples
''',
    "test": '''
from radharmony.dataset import ReXGradientTestDataset

ds = ReXGradientTestDataset(
    base_image_dir="/data/ReXGradient-160K/deid_png/",
    output_report=True,
)
test_ds = ds.get_datasets()   # 17,029 samples
''',
    "harmonizer": '''
from radharmony.harmonizer import ReXGradientValidHarmonizer

h = ReXGradientValidHarmonizer(
    csv_path="/data/ReXGradient-160K/download/metadata/valid_metadata_view_position.json",
    base_image_dir="/data/ReXGradient-160K/deid_png/",
)
df = h.harmonize()
print(df.columns.tolist())
''',
    "to_csv": '''
df.to_csv("rexgradient_valid_harmonized.csv", index=False)
''',
    "from_csv": '''
import pandas as pd
from radharmony.dataset import ReXGradientValidDataset

ds = ReXGradientValidDataset(
    base_image_dir="/data/ReXGradient-160K/deid_png/",
    harmonized_df=pd.read_csv("rexgradient_valid_harmonized.csv"),
    output_report=True,
)
''',
}


def run(code: str, root, ns: dict) -> dict:
    exec(compile(code.replace(ROOT, str(root)), "<page snippet>", "exec"), ns)
    return ns


def test_snippets_still_match_the_page():
    page = SHARED / "spec" / "rexgradient_radharmony_page.txt"
    if not page.is_file():
        pytest.skip("../shared/spec is absent")
    text = page.read_text()
    for name, code in SNIPPETS.items():
        for line in code.strip().splitlines():
            assert line.strip() in text, (name, line)


def test_page_snippets_run_unchanged(rex_root, tmp_path, monkeypatch, capsys):
    import torch

    monkeypatch.chdir(tmp_path)
    ns = run(SNIPPETS["train"], rex_root, {})
    sample = ns["sample"]
    assert sample["img"].shape == (1, 224, 224) and sample["img"].dtype == torch.float32
    assert -1 <= float(sample["img"].min()) <= float(sample["img"].max()) <= 1
    assert sample["report"] == "" or sample["report"].startswith(
        ("INDICATION:\n", "COMPARISON:\n", "FINDINGS:\n", "IMPRESSION:\n"))
    assert len(ns["train_ds"]) + len(ns["val_ds"]) == len(ns["ds"])

    ns = run(SNIPPETS["valid"], rex_root, {})
    assert len(ns["full_ds"]) == len(ns["ds"]) > 0
    assert ns["full_ds"][0]["img"].dtype == torch.bfloat16
    ns = run(SNIPPETS["test"], rex_root, {})
    assert len(ns["test_ds"]) > 0

    ns = run(SNIPPETS["harmonizer"], rex_root, {})
    assert capsys.readouterr().out.strip() == str(
        ['patient_id', 'study_id', 'image_path', 'view_position', 'report',
         'accession_number', 'patient_sex', 'patient_age', 'study_date'])
    run(SNIPPETS["to_csv"], rex_root, ns)
    ns2 = run(SNIPPETS["from_csv"], rex_root, {})
    assert len(ns2["ds"]) == len(ns["df"])
    assert ns2["ds"][0]["report"] == ns["df"]["report"].iloc[0]
    assert (tmp_path / "cache").is_dir()  # the page's default cache_dir="./cache"
