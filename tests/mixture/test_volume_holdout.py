"""The hold-out for volumes: a hold-out set's patients and its volumes (the same bytes, or a
near-duplicate by the stored array's fingerprint) never enter a record, and are counted."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import nibabel as nib
import numpy as np
import pyarrow.parquet as pq

from radharmony.fake.ct_rate import write_ct_rate
from radharmony.mixture import build
from radharmony.mixture.holdout import (NEAR_CORRELATION, volume_digest, volume_print)

TRAIN = "train_fixed/train_{p}/train_{p}_{s}/train_{p}_{s}_{r}.nii.gz"
VALID = "valid_fixed/valid_{p}/valid_{p}_{s}/valid_{p}_{s}_{r}.nii.gz"


def test_fingerprints_match_rescaled_copies_only():
    rng = np.random.default_rng(0)
    a = rng.normal(0, 300, (20, 40, 40)).astype(np.float32)
    p = volume_print(a)
    assert p.shape == (16 * 32 * 32,) and abs(float(p @ p) - 1.0) < 1e-5
    assert float(p @ volume_print(np.round(a * 0.5 - 1024))) >= NEAR_CORRELATION  # units
    assert float(p @ volume_print(rng.normal(0, 300, a.shape))) < 0.1  # another volume
    assert not volume_print(np.full((4, 4, 4), 7.0)).any()  # constant: no pattern


def test_a_series_folder_is_one_digest(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "1.dcm").write_bytes(b"a")
    (tmp_path / "s" / "2.dcm").write_bytes(b"b")
    before = volume_digest(str(tmp_path / "s"))
    (tmp_path / "s" / "2.dcm").write_bytes(b"c")
    assert volume_digest(str(tmp_path / "s")) != before


def test_held_out_volumes_and_patients_enter_no_record(tmp_path):
    train = write_ct_rate(tmp_path / "a", split="train", n_patients=4)
    valid = write_ct_rate(tmp_path / "b", split="valid", n_patients=2, seed=1)
    rng = np.random.default_rng(5)
    # every volume unlike every other (the replica's synthetic CTs share one body template)
    for f in sorted(train.rglob("*.nii.gz")) + sorted(valid.rglob("*.nii.gz")):
        img = nib.load(f)
        noise = rng.normal(0, 400, img.shape).astype(np.int16)
        nib.save(nib.Nifti1Image(noise, img.affine, img.header), f)
    # an exact copy of train_1_a_2, and train_2_b_1 stored in other units
    shutil.copyfile(train / TRAIN.format(p=1, s="a", r=2), valid / VALID.format(p=1, s="a", r=1))
    src = nib.load(train / TRAIN.format(p=2, s="b", r=1))
    data = np.asarray(src.dataobj).astype(np.int32) * 2 + 7
    nib.save(nib.Nifti1Image(data, src.affine), valid / VALID.format(p=2, s="a", r=1))
    spec = {"name": "ct", "seed": 1, "valid": 0.0,
            "sources": [{"dataset": "ct_rate_train", "root": str(train), "split": "train",
                         "tasks": {"ct_classify_findings": "all"}}],
            "hold_out": [{"dataset": "ct_rate_valid", "root": str(valid), "split": "all"}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build(spec, tmp_path / "mix", progress=False)
    records = pq.read_table(tmp_path / "mix" / "records.parquet").to_pylist()
    studies = sorted(r["study_id"] for r in records)
    # six studies (train_1_a, 2_a, 2_b, 3_a, 4_a, 4_b), less the two held out by their volume
    assert studies == ["train_2_a", "train_3_a", "train_4_a", "train_4_b"]
    m = json.loads((tmp_path / "mix" / "mixture.json").read_text())
    excluded = {e["reason"]: e["records"] for e in m["excluded"]}
    assert excluded["hold_out_image"] == 2
    images = m["sources"][0]["hold_out_images"]
    assert (images["exact"], images["near"], images["missing"]) == (1, 1, 0)
    assert m["hold_out"][0]["images"]["checked"] == 5  # every hold-out volume read


def test_held_out_patients_of_a_volume_family(tmp_path):
    """A patient of the hold-out set in the source's family (``ct_rate``) drops his studies."""
    train = write_ct_rate(tmp_path / "a", split="train", n_patients=2, volumes=False)
    spec = {"name": "ct", "seed": 1, "valid": 0.0,
            "sources": [{"dataset": "ct_rate_train", "root": str(train),
                         "tasks": {"ct_classify_findings": "all"}}],
            "hold_out": [{"dataset": "ct_rate_train", "root": str(train), "split": "all"}]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build(spec, tmp_path / "mix", progress=False)
    m = json.loads((tmp_path / "mix" / "mixture.json").read_text())
    assert m["records"] == 0
    assert {e["reason"]: e["records"] for e in m["excluded"]}["hold_out_patient"] == 3
