"""to_llava's flavors, each read by a reader doing what its trainer's loader does
(tests/formats_readers.py): LLaVA-1.5 (the default), LLaVA-OneVision, LLaVA-Rad."""

from __future__ import annotations

import json
import warnings

import cv2
import numpy as np
import pytest
import torch

from radharmony.datasets.rexgradient import ReXGradientTestDataset
from radharmony.errors import StudyWarning
from radharmony.export import FLAVORS, ExportError, to_llava

from formats_readers import read_llava15, read_llava_onevision, read_llava_rad
from study_fixtures import rex_real  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def study_ds(rex_real, tmp_path_factory):
    path, images, _ = rex_real
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        return ReXGradientTestDataset(images, path, level="study", max_images=3,
                                      cache_dir=tmp_path_factory.mktemp("cache"),
                                      dtype=torch.float32)


@pytest.fixture(scope="module")
def exports(study_ds, tmp_path_factory):
    """flavor -> the JSON path of that flavor's export (cache images)."""
    out = tmp_path_factory.mktemp("flavors")
    paths = {}
    images = {}
    for flavor in FLAVORS:
        paths[flavor] = out / f"{flavor}.json"
        images[flavor] = to_llava(study_ds, paths[flavor], flavor=flavor,
                                  progress=False)["num_images"]
    # the excerpt's 100 studies have 159 images; LLaVA-1.5 and LLaVA-Rad take one each
    assert images == {"llava": 100, "onevision": 159, "llava-rad": 100}
    return paths


def test_the_default_is_read_by_llava15_one_key_image_per_entry(study_ds, exports):
    path = exports["llava"]
    assert to_llava.__kwdefaults__["flavor"] == "llava"
    entries = read_llava15(path, path.parent)  # every entry: image a string, one <image>
    assert len(entries) == len(study_ds) == 100
    for i in (0, 17, 99):
        e, s = entries[i], study_ds[i]
        key = int(s["key_image"])
        assert e["id"] == s["study_id"] and isinstance(e["image"], str)
        assert e["view"] == s["views"][key]
        assert e["conversations"][0]["value"].startswith("<image>\nIndication: ")
        png = cv2.imread(str(path.parent / e["image"]), cv2.IMREAD_UNCHANGED)
        got = study_ds.images.pipeline.to_tensor(png, torch.float32)[0]
        assert torch.equal(got, s["img"][key, 0])  # the key image's pixels, exactly
    assert sum(1 for _ in (path.parent / "llava_images").rglob("*.png")) == 100


def test_the_old_multi_image_entries_fail_llava15_and_llava_rad(exports):
    path = exports["onevision"]
    with pytest.raises(TypeError):  # os.path.join on a list, as LLaVA-1.5's loader raises
        read_llava15(path, path.parent)
    with pytest.raises(TypeError):
        read_llava_rad(path, path.parent)
    plain = exports["llava"]
    with pytest.raises(KeyError, match="reason"):  # the view is there; LLaVA-Rad needs more
        read_llava_rad(plain, plain.parent)


def test_onevision_every_view_with_one_token_each(study_ds, exports):
    path = exports["onevision"]
    entries = read_llava_onevision(path, path.parent)
    assert len(entries) == 100
    counts = [len(e["image"]) for e in entries]
    # the excerpt's studies: 46 with one image, 49 with two, 5 with three
    assert (counts.count(1), counts.count(2), counts.count(3)) == (46, 49, 5)
    assert all(e["views"] == list(study_ds[i]["views"][:len(e["image"])])
               for i, e in enumerate(entries[:5]))
    # LLaVA-1.5 entries are OneVision entries too (a string image, one token)
    assert len(read_llava_onevision(exports["llava"], path.parent)) == 100


def test_llava_rad_keeps_the_frontal_studies(study_ds, exports):
    path = exports["llava-rad"]
    kept = read_llava_rad(path, path.parent)
    # 16 of the 100 excerpt studies have an AP (11) or PA (5) key image; the other 84 carry
    # no view or "N/A", which LLaVA-Rad's MIMIC loaders leave out
    assert len(kept) == len(read_llava_rad(path, path.parent, test=True)) == 16
    assert sorted(e["view"] for e in kept).count("AP") == 11
    entries = json.loads(path.read_text())
    for e, i in ((entries[0], 0), (kept[0], list(study_ds.study_ids).index(kept[0]["id"]))):
        s = study_ds[i]
        assert e["reason"] == s["indication"] and e["generate_method"] == "rule-based"
        assert e["impression"] == s["impression"] and e["conversations"][1]["value"] == \
            s["findings"]


def test_flavor_is_checked_and_part_of_the_resume_key(study_ds, tmp_path):
    with pytest.raises(ExportError, match=r"flavor must be one of 'llava', 'onevision', "
                                          r"'llava-rad'"):
        to_llava(study_ds, tmp_path / "x.json", flavor="llava15")
    path = tmp_path / "t.json"
    to_llava(study_ds, path, shard_size=50, progress=False)
    first = json.loads(path.read_text())
    to_llava(study_ds, path, shard_size=50, flavor="onevision", progress=False)
    assert all(isinstance(e["image"], list) for e in json.loads(path.read_text()))
    to_llava(study_ds, path, shard_size=50, progress=False)
    assert json.loads(path.read_text()) == first


def test_vqa_flavors(tmp_path):
    from radharmony.datasets.medical_diff_vqa import MedicalDiffVQADataset
    from radharmony.datasets.rexvqa import ReXVQATestDataset
    from radharmony.fake.medical_diff_vqa import write_medical_diff_vqa
    from radharmony.fake.rexvqa import write_rexvqa

    rex = ReXVQATestDataset(write_rexvqa(tmp_path / "r", studies={"test": 4}), cache_dir=None)
    to_llava(rex, tmp_path / "rex.json", progress=False)
    entries = read_llava15(tmp_path / "rex.json", tmp_path)
    df = rex.harmonized_df
    assert len(entries) == len(df) and max(len(p) for p in df["image_paths"]) > 1
    for e, row in zip(entries, df.itertuples()):
        assert e["image"].endswith(".png") and row.question in e["conversations"][0]["value"]
    diff = MedicalDiffVQADataset(write_medical_diff_vqa(tmp_path / "d"), cache_dir=None)
    n_ref = int(diff.harmonized_df["ref_image_paths"].notna().sum())
    with pytest.warns(UserWarning, match=rf"{n_ref} of {len(diff)} questions compare two "
                                         r"studies and were left out .*flavor='onevision'"):
        to_llava(diff, tmp_path / "d.json", images="original", progress=False)
    kept = read_llava15(tmp_path / "d.json", tmp_path)
    assert len(kept) == len(diff) - n_ref and n_ref >= 2
    man = json.loads((tmp_path / "d_parts" / "manifest.json").read_text())
    assert man["num_images"] == len(kept)  # one image per entry written
    with warnings.catch_warnings():  # resumed: the same warning, from the manifest
        warnings.simplefilter("error")
        with pytest.raises(UserWarning, match=rf"{n_ref} of {len(diff)} questions"):
            to_llava(diff, tmp_path / "d.json", images="original", progress=False)
    to_llava(diff, tmp_path / "d1.json", images="original", flavor="onevision", progress=False)
    assert len(read_llava_onevision(tmp_path / "d1.json", tmp_path)) == len(diff)
    with pytest.raises(ExportError, match="flavor='llava-rad' writes report-generation"):
        to_llava(diff, tmp_path / "d2.json", flavor="llava-rad")


def test_readers_refuse_what_the_trainers_cannot_read(tmp_path):
    png = tmp_path / "a.png"
    cv2.imwrite(str(png), np.zeros((8, 8), np.uint8))
    turn = [{"from": "human", "value": "<image>\n<image>\nq"}, {"from": "gpt", "value": "a"}]
    (tmp_path / "two.json").write_text(json.dumps([{"id": "x", "image": "a.png",
                                                   "conversations": turn}]))
    with pytest.raises(ValueError, match="2 <image> tokens for one image"):
        read_llava15(tmp_path / "two.json", tmp_path)
    with pytest.raises(ValueError, match="2 <image> tokens for 1 images"):
        read_llava_onevision(tmp_path / "two.json", tmp_path)
    (tmp_path / "gone.json").write_text(json.dumps([{"id": "x", "image": "b.png",
                                                    "conversations": turn[:1]}]))
    with pytest.raises(FileNotFoundError):
        read_llava_onevision(tmp_path / "gone.json", tmp_path)


def test_the_key_image_is_the_frontal_one_wherever_it_stands(tmp_path):
    from radharmony.datasets.rexgradient import ReXGradientTrainDataset
    from radharmony.fake import write_rexgradient

    write_rexgradient(tmp_path, studies={"train": 30}, seed=3, image_size=(64, 56))
    meta = tmp_path / "download" / "metadata" / "train_metadata_view_position.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTrainDataset(tmp_path / "deid_png", meta, level="study",
                                     view_order=("LATERAL", "LL", "PA", "AP"), cache_dir=None)
    keys = [int(k) for k in ds.index.key_image]
    assert (keys.count(0), keys.count(1), keys.count(2)) == (20, 8, 2)  # laterals first
    path = tmp_path / "o.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)  # studies without an answer
        to_llava(ds, path, answer="findings_impression", images="original", progress=False)
    entries = read_llava15(path, path.parent)
    moved = 0
    for e in entries:
        s = list(ds.study_ids).index(e["id"])
        row = int(ds.index.rows[s][keys[s]])
        assert (path.parent / e["image"]).read_bytes() == ds.images.image_file(row).read_bytes()
        assert e["view"] == ds._views[s][keys[s]] and e["view"] in ("PA", "AP") or keys[s] == 0
        moved += keys[s] != 0
    assert (len(entries), moved) == (22, 8)  # 22 studies with an answer, 8 lateral-first
