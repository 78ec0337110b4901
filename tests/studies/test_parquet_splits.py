"""Parquet exports read with `datasets.load_dataset(folder)` land in the splits their rows
belong to (file names per split and the folder's dataset card)."""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pandas as pd
import pytest

from radharmony.datasets.rexgradient import ReXGradientTestDataset
from radharmony.errors import StudyWarning
from radharmony.export import to_parquet
from radharmony.export.hf_card import split_groups

from study_fixtures import rex_real  # noqa: F401 (fixture)

datasets = pytest.importorskip("datasets")


def _load(folder):
    return datasets.load_dataset(str(folder))


def test_a_test_split_dataset_is_split_test(rex_real, tmp_path):
    path, images, _ = rex_real
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTestDataset(images, path, level="study", max_images=2, cache_dir=None)
    man = to_parquet(ds, tmp_path / "pq", shard_size=40, progress=False)
    assert [(s["name"], s["split"], s["start"], s["stop"]) for s in man["shards"]] == [
        ("rexgradient_test-test-000000.parquet", "test", 0, 40),
        ("rexgradient_test-test-000001.parquet", "test", 40, 80),
        ("rexgradient_test-test-000002.parquet", "test", 80, 100)]
    hf = _load(tmp_path / "pq")
    assert list(hf) == ["test"] and hf["test"]["study_id"] == list(ds.study_ids)


def test_vqa_rows_land_in_their_official_splits(tmp_path):
    from radharmony.datasets.medical_diff_vqa import MedicalDiffVQADataset
    from radharmony.fake.medical_diff_vqa import write_medical_diff_vqa

    ds = MedicalDiffVQADataset(write_medical_diff_vqa(tmp_path / "d"), cache_dir=None)
    splits = ds.harmonized_df["split"].tolist()
    assert splits.count("train") == 9 and splits.count("valid") == 9  # the replica's rows
    to_parquet(ds, tmp_path / "pq", shard_size=4, progress=False)
    hf = _load(tmp_path / "pq")
    assert sorted(hf) == ["train", "validation"]
    for name, ours in (("train", "train"), ("validation", "valid")):
        want = [sid for sid, s in zip(ds.sample_ids, splits) if s == ours]
        assert hf[name]["sample_id"] == want, name
    card = (tmp_path / "pq" / "README.md").read_text()
    assert "  - split: validation\n    path:\n    - \"medical_diff_vqa-validation-000000" \
        ".parquet\"\n" in card and "Rows per split: train 9, validation 9." in card
    # a smaller second export does not pick up the first one's leftover shards
    to_parquet(ds, tmp_path / "pq", shard_size=9, progress=False)
    assert (tmp_path / "pq" / "medical_diff_vqa-train-000002.parquet").is_file()
    hf = _load(tmp_path / "pq")
    assert (hf["train"].num_rows, hf["validation"].num_rows) == (9, 9)


def test_rows_without_a_split_are_train(tmp_path):
    import radharmony
    from radharmony.fake import make_fake

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = make_fake("openi", tmp_path / "o")
        ds = radharmony.get_dataset_class("openi")(**kw, level="study", cache_dir=None)
    man = to_parquet(ds, tmp_path / "pq", progress=False)
    assert [s["name"] for s in man["shards"]] == ["openi-train-000000.parquet"]
    hf = _load(tmp_path / "pq")
    assert list(hf) == ["train"] and hf["train"]["study_id"] == list(ds.study_ids)


class _Q(SimpleNamespace):
    def __len__(self):
        return len(self.harmonized_df)


def test_split_groups():
    def groups(key, splits=None):
        q = _Q(spec=SimpleNamespace(key=key, row_unit="question"),
               harmonized_df=pd.DataFrame({"x": range(4)} if splits is None
                                          else {"split": splits}))
        return [(name, list(rows)) for name, rows in split_groups(q)]

    assert groups("x", ["test", None, "train", "valid"]) == [
        ("train", [2]), ("validation", [3]), ("test", [0]), ("unsplit", [1])]
    assert groups("x", [None] * 4) == [("train", [0, 1, 2, 3])]
    assert groups("tbx11k_val") == [("validation", [0, 1, 2, 3])]
    assert groups("object_cxr_dev") == [("validation", [0, 1, 2, 3])]
    assert groups("rexvqa_test") == [("test", [0, 1, 2, 3])]
    assert groups("nih_cxr14") == [("train", [0, 1, 2, 3])]
