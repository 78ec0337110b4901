"""VQA datasets pre-cache and check every image their questions read -- each question's
images and its reference study's -- not only the key image of each row."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch

from radharmony.datasets.medical_diff_vqa import MedicalDiffVQADataset
from radharmony.datasets.rexvqa import ReXVQATestDataset
from radharmony.fake.medical_diff_vqa import write_medical_diff_vqa
from radharmony.fake.rexvqa import write_rexvqa


@pytest.fixture(scope="module")
def diff_root(tmp_path_factory):
    return write_medical_diff_vqa(tmp_path_factory.mktemp("diffc"))


@pytest.fixture(scope="module")
def rex_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("rexc")
    write_rexvqa(root, studies={"train": 2, "valid": 2, "test": 6}, seed=4, per_study=2.0)
    return root


def rex(root, cache):
    return ReXVQATestDataset(root / "deid_png", root / "metadata" / "test_vqa_data.json",
                             cache_dir=cache, dtype=torch.float32)


def distinct(df, *cols):
    return {p for c in cols if c in df for ps in df[c] if ps is not None for p in ps}


def test_pre_cache_packs_every_image_of_every_question(rex_root, tmp_path, monkeypatch):
    ds = rex(rex_root, tmp_path / "cache")
    df = ds.harmonized_df
    images = distinct(df, "image_paths")
    assert len(images) > df["image_path"].nunique()  # questions with several images
    keys = ds.pre_cache(progress=False)
    assert len(keys) == len(images) == len(set(keys))
    _, pack_of, _ = ds.image_cache.locate(keys)
    assert (np.asarray(pack_of) >= 0).all()  # all packed, not only the key images
    fresh = rex(rex_root, tmp_path / "cache")

    def no_decode(*a, **k):
        raise AssertionError("decoded although pre-cached")
    monkeypatch.setattr(type(fresh.pipeline), "encode", no_decode)
    for i in range(len(fresh)):
        s = fresh[i]
        assert s["img_mask"].sum() == len(s["image_paths"])


def test_reference_images_are_pre_cached_and_checked(diff_root, tmp_path, monkeypatch):
    root = tmp_path / "diff"
    shutil.copytree(diff_root, root)
    ds = MedicalDiffVQADataset(root, cache_dir=tmp_path / "cache", dtype=torch.float32)
    df = ds.harmonized_df
    images = distinct(df, "image_paths", "ref_image_paths")
    refs_only = distinct(df, "ref_image_paths") - distinct(df, "image_paths")
    assert refs_only  # priors that are no question's own image
    assert len(ds.pre_cache(progress=False)) == len(images)
    monkeypatch.setattr(type(ds.pipeline), "encode", lambda *a, **k: 1 / 0)
    diff = int((df["task"] == "difference").to_numpy().nonzero()[0][0])
    assert ds[diff]["ref_img_mask"].all()  # read from the cache
    report = ds.validate(decode=False, progress=False)
    assert report.ok and report.checked == len(images)
    gone = sorted(refs_only)[0]
    (root / gone).unlink()
    report = ds.validate(decode=False, progress=False)
    assert report.paths() == [gone] and report.counts()["missing"] == 1
