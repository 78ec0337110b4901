"""Study exports: LLaVA JSON, Hugging Face Parquet (read back by `datasets`), WebDataset."""

from __future__ import annotations

import io
import json
import tarfile
import warnings

import cv2
import numpy as np
import pytest
import torch

from radharmony.datasets.rexgradient import ReXGradientTestDataset
from radharmony.errors import StudyWarning
from radharmony.export import (DeepImageWarning, ExportError, to_llava, to_parquet,
                               to_study_webdataset)
from radharmony.export.studies import study_key
from radharmony.studies import SECTION_KEYS

from study_fixtures import rex_real  # noqa: F401 (fixture)


@pytest.fixture
def study_ds(rex_real, tmp_path):
    path, images, _ = rex_real
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        return ReXGradientTestDataset(images, path, level="study", max_images=3,
                                      cache_dir=tmp_path / "cache", dtype=torch.float32)


def _pixels(data: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)


def _as_tensor(ds, arr):
    return ds.images.pipeline.to_tensor(arr, torch.float32)


def test_parquet_reads_back_with_hf_datasets(study_ds, tmp_path):
    datasets = pytest.importorskip("datasets")
    man = to_parquet(study_ds, tmp_path / "pq", shard_size=40, progress=False)
    assert man["complete"] and man["num_studies"] == 100 and len(man["shards"]) == 3
    assert man["images"]["source"] == "cache" and man["images"]["size"] == 224
    files = sorted(str(p) for p in (tmp_path / "pq").glob("*.parquet"))
    hf = datasets.load_dataset("parquet", data_files=files, split="train")
    assert isinstance(hf.features["images"], datasets.List)
    assert isinstance(hf.features["images"].feature, datasets.Image)
    raw = hf.with_format(None).cast_column("images", datasets.List(datasets.Image(decode=False)))
    for i in (0, 57, 99):
        s, row = study_ds[i], raw[i]
        for k in ("study_id", "patient_id", "views", "sample_ids", "key_image", *SECTION_KEYS,
                  "report"):
            assert row[k] == s[k], (i, k)
        assert row["prior_study_id"] is None  # built without priors
        n = int(s["img_mask"].sum())
        assert len(row["images"]) == n
        for j, im in enumerate(row["images"]):  # the cache's pixels, exactly
            assert torch.equal(_as_tensor(study_ds, _pixels(im["bytes"]))[0], s["img"][j, 0])
    # every row's text fields, in study order
    text, st = hf.remove_columns("images"), study_ds.studies
    for k in ("study_id", "patient_id", "key_image", *SECTION_KEYS, "report"):
        assert list(text[k]) == st[k].tolist(), k
    # decoded by datasets as PIL images too
    assert hf[0]["images"][0].size == (224, 224)


def test_exports_resume_and_keys_are_safe(study_ds, tmp_path, capsys):
    out = tmp_path / "wds"
    first = to_study_webdataset(study_ds, out, shard_size=30, progress=False)
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.tar")}
    (out / first["shards"][1]["name"]).write_bytes(b"broken")
    capsys.readouterr()
    again = to_study_webdataset(study_ds, out, shard_size=30, progress=True)
    bar = capsys.readouterr().err  # the progress bar starts at the 3 shards kept
    assert "exporting rexgradient_test (webdataset)" in bar and " 3/4 " in bar and " 4/4 " in bar
    assert again["shards"] == first["shards"]
    for name, t in stamps.items():  # only the damaged shard was written again
        assert ((out / name).stat().st_mtime_ns == t) == (name != first["shards"][1]["name"])
    with tarfile.open(out / first["shards"][0]["name"]) as tf:
        names = tf.getnames()
        meta = json.loads(tf.extractfile(names[-1]).read()) if names[-1].endswith(".json") \
            else None
    keys = {n.split(".", 1)[0] for n in names}
    assert len(keys) == 30 and all(k.isalnum() for k in keys)
    assert meta["key"] == study_key(meta["study_id"]) and "." in meta["study_id"]
    assert all(n.split(".", 1)[1] in ("json", "0.png", "1.png", "2.png") for n in names)
    # the webdataset library reads one sample per study, with the study's images and JSON
    wds = pytest.importorskip("webdataset")
    shards = [str(out / s["name"]) for s in again["shards"]]
    got = list(wds.WebDataset(shards, shardshuffle=False))
    assert len(got) == len(study_ds) == 100
    for i in (0, 41, 99):
        s, meta = study_ds[i], json.loads(got[i]["json"])
        assert got[i]["__key__"] == study_key(s["study_id"]) and meta["study_id"] == s["study_id"]
        pngs = sorted(k for k in got[i] if k.endswith(".png"))
        assert pngs == [f"{j}.png" for j in range(int(s["img_mask"].sum()))]
        assert meta["images"] == [f"{got[i]['__key__']}.{k}" for k in pngs]
        assert torch.equal(_as_tensor(study_ds, _pixels(got[i]["0.png"]))[0], s["img"][0, 0])


def test_llava_json(study_ds, tmp_path):
    path = tmp_path / "llava" / "train.json"
    dropped = study_ds.study_ids[5]
    study_ds.index.sections[5] = dict(study_ds.index.sections[5], findings=None)
    with pytest.warns(StudyWarning, match=rf"1 of 100 studies have no findings and were "
                                          rf"left out, first: \['{dropped}'\]"):
        to_llava(study_ds, path, answer="findings", flavor="onevision", progress=False)
    entries = json.loads(path.read_text())
    assert len(entries) == 99 and dropped not in {e["id"] for e in entries}
    e = entries[0]
    s = study_ds[0]
    assert e["id"] == s["study_id"] and e["conversations"][1]["value"] == s["findings"]
    human = e["conversations"][0]["value"]
    assert human.count("<image>") == len(e["image"]) == int(s["img_mask"].sum())
    assert f"Indication: {s['indication']}" in human
    assert all((path.parent / f).is_file() for f in e["image"])
    fi = to_llava(study_ds, tmp_path / "fi.json", answer="findings_impression",
                  images="original", flavor="onevision", progress=False)
    assert fi["images"]["source"] == "original"
    e = json.loads((tmp_path / "fi.json").read_text())[0]
    assert e["conversations"][1]["value"].startswith("Findings: ")
    with pytest.raises(ExportError, match="level='study'"):
        to_parquet(study_ds.images, tmp_path / "x")


def test_llava_resume_rewrites_a_part_whose_image_changed(study_ds, tmp_path):
    path = tmp_path / "llava" / "train.json"
    first = to_llava(study_ds, path, shard_size=40, flavor="onevision", progress=False)
    parts = path.parent / "train_parts"
    assert all(len(s["images_sha256"]) == 64 for s in first["shards"])
    entries = json.loads(path.read_text())
    damaged, deleted = entries[3]["image"][0], entries[90]["image"][0]  # parts 0 and 2
    original = {f: (path.parent / f).read_bytes() for f in (damaged, deleted)}
    stamps = {s["name"]: (parts / s["name"]).stat().st_mtime_ns for s in first["shards"]}
    (path.parent / damaged).write_bytes(b"not a png")
    (path.parent / deleted).unlink()
    again = to_llava(study_ds, path, shard_size=40, flavor="onevision", progress=False)
    assert again["shards"] == first["shards"] and json.loads(path.read_text()) == entries
    rewritten = {n for n, t in stamps.items() if (parts / n).stat().st_mtime_ns != t}
    assert rewritten == {first["shards"][0]["name"], first["shards"][2]["name"]}
    assert all((path.parent / f).read_bytes() == b for f, b in original.items())


def test_cli_study_export_and_info(tmp_path, capsys):
    from radharmony.cli.main import main
    from radharmony.fake import write_rexgradient

    write_rexgradient(tmp_path, studies={"test": 6}, seed=4, image_size=(48, 40))
    meta = str(tmp_path / "download" / "metadata" / "test_metadata_view_position.json")
    root = str(tmp_path / "deid_png")
    assert main(["info", "rexgradient_test", "--root", root, "--csv-path", meta,
                 "--level", "study", "--json", "-q"]) == 0
    info = json.loads(capsys.readouterr().out)[0]["study_level"]
    assert info["studies"] == 6 and sum(info["images_per_study"].values()) == 6
    assert set(info["sections"]) == set(SECTION_KEYS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        st = ReXGradientTestDataset(root, meta, level="study", cache_dir=None).studies
    assert info["images_per_study"] == {str(k): int(v) for k, v in
                                        st["n_images"].value_counts().sort_index().items()}
    assert info["sections"] == {k: round(float(st[k].notna().mean()), 4) for k in SECTION_KEYS}
    assert info["section_source"] == st["section_source"].value_counts().to_dict()
    for fmt in ("webdataset", "parquet", "llava"):
        assert main(["export", "rexgradient_test", "--root", root, "--csv-path", meta,
                     "--level", "study", "--format", fmt, "-o", str(tmp_path / fmt),
                     "--json", "-q"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["studies"] == 6 and out["format"] == fmt
    assert main(["export", "rexgradient_test", "--root", root, "--format", "parquet", "-o",
                 str(tmp_path / "x"), "-q"]) == 2  # parquet needs --level study


def test_cache_export_at_the_transforms_size_and_bits(tmp_path):
    from radharmony.fake import write_rexgradient
    from radharmony.imaging.pipeline import DefaultTransform

    write_rexgradient(tmp_path, studies={"test": 6}, seed=4, image_size=(48, 40))
    meta = tmp_path / "download" / "metadata" / "test_metadata_view_position.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTestDataset(tmp_path / "deid_png", meta, level="study",
                                    transform=DefaultTransform(size=64, bits=16),
                                    cache_dir=tmp_path / "cache", dtype=torch.float32)
    with pytest.warns(DeepImageWarning, match=r"1 of 1 shards hold 16-bit images "
                                              r"\(rexgradient_test-000000.tar\)"):
        man = to_study_webdataset(ds, tmp_path / "wds", progress=False)
    assert (man["images"]["source"], man["images"]["size"], man["images"]["bits"]) == \
        ("cache", 64, 16)
    with tarfile.open(tmp_path / "wds" / man["shards"][0]["name"]) as tf:
        meta0 = json.loads(tf.extractfile(next(n for n in tf.getnames()
                                               if n.endswith(".json"))).read())
        pic = _pixels(tf.extractfile(meta0["images"][0]).read())
    assert pic.shape == (64, 64) and pic.dtype == np.uint16
    s = ds[list(ds.study_ids).index(meta0["study_id"])]
    assert torch.equal(_as_tensor(ds, pic)[0], s["img"][0, 0])
