"""export_mixture: every trainer format read back by a reader that does what that trainer's
loader does (trainer_readers.py), with the values of the records, the images' files and bytes,
and the same bytes on every run and engine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from mixture_fixtures import FINDINGS_PROMPT, write_mixture
from ray_fixture import ray_cluster  # noqa: F401 (fixture)
from radharmony.errors import RadHarmonyError
from radharmony.imaging.pipeline import DefaultTransform
from radharmony.mixture.formats import FORMATS, export_mixture
from trainer_readers import (read_energon, read_hf_chat, read_internvl, read_llama_factory,
                             read_llava, read_llava_rad, read_maira2, read_onevision,
                             read_r2gen)

#: the fixture's records (ids are xxh3 of source, task, item: fixed), by what they are
STUDY_3PA = "be631dd001a7a19d"      # findings, views PA PA PA, train
SUMMARY = "4080f7f86750183f"        # text-only summarisation, train
STUDY_PA_LAT = "bbd49eab9436b7c4"   # findings, views PA LATERAL None, valid
WITH_PRIOR = "7c152cc69fb95085"     # findings_with_prior, LATERAL PA, prior PA N/A
LATERAL_ONLY = "a039f499288ef191"   # view question on one lateral image
MIMIC_LABELS = "34cb60876203bc02"   # classification as text, PA
VQA = ("d427a02265731f33", "715918333f40daea", "cd632fba8bf3b092")  # two lateral views each


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    return write_mixture(tmp_path_factory.mktemp("mix"))


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    return write_mixture(tmp_path_factory.mktemp("mixc"), images="cache", size=32)


def _changed(mix, tmp_path, record_id, change):
    """A copy of the mixture at ``tmp_path/changed`` whose record ``record_id`` has the
    columns ``change(record)`` returns."""
    import shutil

    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "changed"
    shutil.copytree(mix.out, out)
    table = pq.read_table(out / "records.parquet")
    rows = [{**r, **change(r)} if r["record_id"] == record_id else r for r in table.to_pylist()]
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), out / "records.parquet",
                   row_group_size=4)
    return type(mix)(out=out, records=mix.records, roots=mix.roots, manifest=mix.manifest)


def _by_id(mix):
    return {r["record_id"]: r for r in mix.records}


def _abs(mix, rec, j):
    return os.path.join(mix.roots[rec["source"]], rec["image_paths"][j])


def test_llava_one_frontal_image_string_and_text_only(mix, tmp_path):
    summary = export_mixture(mix.out, "llava", tmp_path / "train.json", progress=False)
    assert summary["entries"] == 13 and summary["skipped"] == {
        "no frontal image": 4, "needs the prior image (one-image trainer)": 1}
    got = {e["id"]: (e, f) for e, f in read_llava(tmp_path / "train.json", "/ignored")}
    assert LATERAL_ONLY not in got and not set(VQA) & set(got)
    recs = _by_id(mix)
    entry, file = got[STUDY_PA_LAT]
    assert entry["image"] == _abs(mix, recs[STUDY_PA_LAT], 0) == file  # the PA, absolute
    assert entry["conversations"] == [
        {"from": "human", "value": "<image>\n" + FINDINGS_PROMPT},
        {"from": "gpt", "value": recs[STUDY_PA_LAT]["target"]}]
    assert WITH_PRIOR not in got  # its prompt compares with a prior LLaVA-1.5 cannot see
    text, file = got[SUMMARY]
    assert "image" not in text and file is None
    assert text["conversations"][0]["value"].startswith("Summarise these findings")
    ids = [e["id"] for e, _ in read_llava(tmp_path / "train.json", "/x")]
    assert ids == [r["record_id"] for r in mix.records if r["record_id"] in got]  # file order
    assert all(os.path.isfile(f) for _, f in got.values() if f)


def test_the_key_image_is_pa_then_ap_then_another_frontal():
    from radharmony.mixture.images import first_lateral, key_frontal

    assert key_frontal(["LATERAL", "AP", "PA"]) == 2
    assert key_frontal(["LL", "AP", "AP"]) == 1
    assert key_frontal(["LATERAL", "AP SUPINE"]) == 1
    assert key_frontal([None]) == 0 and key_frontal(["LATERAL"]) is None
    assert key_frontal([None, None]) is None and key_frontal([]) is None
    assert first_lateral(["PA", None, "LL", "LATERAL"]) == 2 and first_lateral(["PA"]) is None


def test_a_list_image_fails_llava_but_not_onevision(mix, tmp_path):
    export_mixture(mix.out, "llava-onevision", tmp_path / "ov.json", progress=False)
    with pytest.raises(TypeError):  # LLaVA-1.5's os.path.join on a list
        read_llava(tmp_path / "ov.json", "/images")
    got = {e["id"]: files for e, files in read_onevision(tmp_path / "ov.json", "/")}
    assert len(got) == 18
    assert got[STUDY_PA_LAT] == [_abs(mix, _by_id(mix)[STUDY_PA_LAT], j) for j in range(3)]
    assert got[SUMMARY] == [] and len(got[VQA[0]]) == 2


def test_llava_rad_keys_and_labels(mix, tmp_path):
    summary = export_mixture(mix.out, "llava-rad", tmp_path / "rad.json", progress=False)
    assert summary["skipped"] == {"no frontal image": 4, "text-only": 1,
                                  "needs the prior image (one-image trainer)": 1}
    rows = {e["id"]: e for e, _ in read_llava_rad(tmp_path / "rad.json", "/")}
    assert len(rows) == 12  # every entry's view is AP or PA
    study = rows[STUDY_PA_LAT]
    assert (study["view"], study["generate_method"]) == ("PA", "rule-based")
    assert study["reason"] == study["indication"] == _by_id(mix)[STUDY_PA_LAT]["fields"][
        "indication"]
    labels = rows[MIMIC_LABELS]["chexpert_labels"]
    assert labels["Atelectasis"] == 1 and labels["Enlarged Cardiomediastinum"] == -1
    assert labels["Pleural Effusion"] == 0 and labels["Cardiomegaly"] is None
    assert list(labels)[:2] == ["Atelectasis", "Cardiomegaly"] and len(labels) == 14
    assert rows[STUDY_3PA]["chexpert_labels"]["Edema"] is None


def test_hf_chat_images_follow_the_image_items(mix, tmp_path):
    export_mixture(mix.out, "hf-chat", tmp_path / "chat.jsonl", progress=False)
    rows = {r["id"]: r for r in read_hf_chat(tmp_path / "chat.jsonl")}
    study = rows[STUDY_PA_LAT]
    assert [c["type"] for c in study["messages"][0]["content"]] == ["image"] * 3 + ["text"]
    assert study["images"] == [_abs(mix, _by_id(mix)[STUDY_PA_LAT], j) for j in range(3)]
    assert rows[SUMMARY]["images"] == [] and len(rows[SUMMARY]["messages"][0]["content"]) == 1
    assert rows[VQA[0]]["messages"][1]["content"][0]["text"] == _by_id(mix)[VQA[0]]["target"]


def test_r2gen_report_records_by_split(mix, tmp_path):
    summary = export_mixture(mix.out, "r2gen", tmp_path / "annotation.json", progress=False)
    assert summary["skipped"] == {"not report generation": 9}
    assert summary["splits"] == {"train": 5, "val": 4, "test": 0} and summary["variant"] == "iu"
    assert summary["note"].startswith("test is empty by design")
    ann = read_r2gen(tmp_path / "annotation.json", "/images")
    assert {k: len(v) for k, v in ann.items()} == {"train": 5, "val": 4, "test": 0}
    entry = dict((e["id"], e) for e, _ in ann["val"])[STUDY_PA_LAT]
    assert entry["report"] == _by_id(mix)[STUDY_PA_LAT]["target"]
    rec = _by_id(mix)[STUDY_PA_LAT]  # views PA, LATERAL, None: the IU loader's two
    assert entry["image_path"] == [_abs(mix, rec, 0), _abs(mix, rec, 1)]
    prior = dict((e["id"], e) for e, _ in ann["train"] + ann["val"])[WITH_PRIOR]
    assert prior["image_path"] == [_abs(mix, _by_id(mix)[WITH_PRIOR], j) for j in (1, 0)]
    only_valid = export_mixture(mix.out, "r2gen", tmp_path / "v.json", split="valid",
                                progress=False)
    assert only_valid["entries"] == 4


def test_r2gen_variants_choose_the_images_each_loader_reads(mix, tmp_path):
    """IU X-ray's loader reads two images (IndexError on one): a study of one image is
    skipped and counted; MIMIC-CXR's reads one: the frontal."""
    one = _changed(mix, tmp_path, STUDY_3PA, lambda r: {"image_paths": r["image_paths"][:1],
                                                          "views": ["PA"]})
    out = one.out
    iu = export_mixture(out, "r2gen", tmp_path / "iu.json", progress=False)
    assert iu["skipped"] == {"not report generation": 9,
                             "fewer than two images (R2Gen IU X-ray)": 1}
    ann = read_r2gen(tmp_path / "iu.json", "/")  # no IndexError
    assert all(len(e["image_path"]) == 2 for v in ann.values() for e, _ in v)
    mimic = export_mixture(out, "r2gen", tmp_path / "m.json", r2gen_variant="mimic",
                           progress=False)
    assert mimic["skipped"] == {"not report generation": 9} and mimic["entries"] == 9
    got = {e["id"]: e["image_path"] for v in read_r2gen(tmp_path / "m.json", "/",
                                                         "mimic").values() for e, _ in v}
    recs = _by_id(mix)
    assert got[WITH_PRIOR] == [_abs(mix, recs[WITH_PRIOR], 1)]  # LATERAL, PA: the PA
    assert got[STUDY_3PA] == [_abs(mix, recs[STUDY_3PA], 0)]
    with pytest.raises(RadHarmonyError, match="r2gen_variant"):
        export_mixture(out, "r2gen", tmp_path / "x.json", r2gen_variant="chexpert")


def test_maira2_inputs_and_what_is_absent(mix, tmp_path):
    export_mixture(mix.out, "maira2", tmp_path / "maira.jsonl", progress=False)
    rows = {r["id"]: r for r in read_maira2(tmp_path / "maira.jsonl")}
    assert len(rows) == 9
    recs = _by_id(mix)
    prior = rows[WITH_PRIOR]
    assert recs[WITH_PRIOR]["views"] == ["LATERAL", "PA"]
    assert prior["frontal"] == _abs(mix, recs[WITH_PRIOR], 1)
    assert prior["lateral"] == _abs(mix, recs[WITH_PRIOR], 0)
    assert prior["prior_frontal"] == os.path.join(
        mix.roots["rexgradient_train"], recs[WITH_PRIOR]["fields"]["prior_image_paths"][0])
    assert prior["prior_report"].startswith("The heart size and mediastinal contours")
    assert prior["absent"] == ["technique", "comparison"]
    assert rows[STUDY_3PA]["absent"] == ["lateral", "prior_frontal", "prior_report",
                                         "technique"]


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_the_same_records_give_the_same_bytes(mix, tmp_path, fmt):
    name = "x.jsonl" if fmt == "internvl" else "x.json"  # InternVL reads .jsonl only
    a = export_mixture(mix.out, fmt, tmp_path / "a" / name, progress=False)
    b = export_mixture(mix.out, fmt, tmp_path / "b" / name, progress=False)
    assert a["entries"] == b["entries"] > 0
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_cached_images_are_the_letterboxed_pixels_as_pngs(cached, tmp_path):
    dest = tmp_path / "out" / "train.json"
    summary = export_mixture(cached.out, "llava-onevision", dest, progress=False)
    folder = tmp_path / "out" / "images"
    assert summary["images"] == {"mode": "cache", "size": 32, "folder": str(folder),
                                 "written": 27}
    recs = _by_id(cached)
    for entry, files in read_onevision(dest, folder):
        rec = recs[entry["id"]]
        paths = rec["image_paths"] + rec["fields"].get("prior_image_paths", [])  # then prior's
        assert entry.get("image", []) == [f"{rec['source']}/{p}.png" for p in paths]
        for j, f in enumerate(files):
            png = cv2.imread(f, cv2.IMREAD_UNCHANGED)
            want = DefaultTransform(size=32).encode(
                os.path.join(cached.roots[rec["source"]], paths[j]))[0]
            assert png.dtype == np.uint8 and np.array_equal(png, want), f


def test_png_workers_give_the_same_bytes(cached, tmp_path):
    one = export_mixture(cached.out, "hf-chat", tmp_path / "a" / "c.jsonl", progress=False,
                         cache_dir=tmp_path / "cache")
    two = export_mixture(cached.out, "hf-chat", tmp_path / "b" / "c.jsonl", progress=False,
                         workers=2)
    assert one["images"]["written"] == two["images"]["written"] == 27
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.png"))
    assert len(files) == 27
    for rel in files:
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes()
    assert (tmp_path / "a" / "c.jsonl").read_bytes() == (tmp_path / "b" / "c.jsonl").read_bytes()


def test_original_paths_relative_to_an_image_folder(mix, tmp_path):
    data = Path(mix.out).parent / "data"
    export_mixture(mix.out, "llava", tmp_path / "t.json", image_folder=data, progress=False)
    for entry, file in read_llava(tmp_path / "t.json", data):
        if file:
            assert not os.path.isabs(entry["image"]) and os.path.isfile(file)
    with pytest.raises(RadHarmonyError, match="is not under image_folder"):
        export_mixture(mix.out, "llava", tmp_path / "u.json", image_folder=tmp_path,
                       progress=False)


def test_bad_arguments_name_the_fix(mix, tmp_path):
    with pytest.raises(RadHarmonyError, match="fmt"):
        export_mixture(mix.out, "llava2", tmp_path / "x.json")
    with pytest.raises(RadHarmonyError, match="split must be"):
        export_mixture(mix.out, "llava", tmp_path / "x.json", split="test")
    with pytest.raises(RadHarmonyError, match="Cannot read the mixture manifest"):
        export_mixture(tmp_path, "llava", tmp_path / "x.json")
    with pytest.raises(RadHarmonyError, match="images"):
        export_mixture(mix.out, "llava", tmp_path / "x.json", images="png")
    assert not (tmp_path / "x.json").exists()


def test_a_source_missing_from_the_manifest_is_named(mix, tmp_path):
    import shutil

    out = tmp_path / "mix"
    shutil.copytree(mix.out, out)
    manifest = json.loads((out / "mixture.json").read_text())
    manifest["sources"] = [s for s in manifest["sources"] if s["name"] != "mimic_cxr_jpg"]
    (out / "mixture.json").write_text(json.dumps(manifest))
    with pytest.raises(RadHarmonyError, match="'mimic_cxr_jpg', which mixture.json"):
        export_mixture(out, "hf-chat", tmp_path / "x.jsonl", progress=False)
    assert not (tmp_path / "x.jsonl").exists()


def test_ray_tasks_write_the_same_pngs(cached, tmp_path, ray_cluster):
    local = export_mixture(cached.out, "maira2", tmp_path / "a" / "m.jsonl", progress=False)
    on_ray = export_mixture(cached.out, "maira2", tmp_path / "b" / "m.jsonl", progress=False,
                            engine="ray")
    assert local["images"]["written"] == on_ray["images"]["written"] == 11
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*.png"))
    assert len(files) == 11 and all(
        (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)
    assert (tmp_path / "a" / "m.jsonl").read_bytes() == (tmp_path / "b" / "m.jsonl").read_bytes()


def test_llama_factory_counts_image_tokens_over_all_messages(cached, tmp_path):
    dest = tmp_path / "lf" / "data.json"
    summary = export_mixture(cached.out, "llama-factory", dest, progress=False)
    assert summary["dataset_info"]["name"] == "fixture" and summary["skipped"] == {}
    rows = {r["id"]: (r, files) for r, files in read_llama_factory(tmp_path / "lf", "fixture")}
    assert len(rows) == 18
    recs = _by_id(cached)
    study, files = rows[WITH_PRIOR]  # its two images, then the prior's two
    assert len(study["images"]) == len(files) == 4
    first = recs[WITH_PRIOR]["image_paths"][0]
    assert study["images"][0] == f"images/rexgradient_train/{first}.png"  # beside the file
    assert study["messages"][0]["content"].startswith("<image>" * 4 + "The last 2 images are")
    assert rows[SUMMARY][0]["images"] == [] and "<image>" not in str(rows[SUMMARY][0])
    info = json.loads((tmp_path / "lf" / "dataset_info.json").read_text())
    assert info["fixture"]["columns"] == {"messages": "messages", "images": "images"}
    # a literal <image> in a record's own text would break the count: left out, counted
    odd = _changed(cached, tmp_path, VQA[0], lambda r: {"target": r["target"] + " <image>"})
    s = export_mixture(odd.out, "llama-factory", tmp_path / "odd" / "d.json", progress=False)
    assert s["skipped"] == {"<image> in the record's text": 1} and s["entries"] == 17
    read_llama_factory(tmp_path / "odd", "fixture")


def test_internvl_lines_and_meta(cached, tmp_path):
    dest = tmp_path / "iv" / "train.jsonl"
    summary = export_mixture(cached.out, "internvl", dest, progress=False)
    rows = {r["id"]: (r, files) for r, files in read_internvl(summary["meta"]["path"])}
    assert len(rows) == 18 == summary["entries"] and summary["skipped"] == {}
    one, files = rows[MIMIC_LABELS]
    assert (one["width"], one["height"]) == (32, 32) and len(files) == 1
    assert one["conversations"][0]["value"].startswith("<image>\nWhich findings")
    four, files = rows[WITH_PRIOR]  # two images, then the prior's two
    assert four["width_list"] == [32] * 4 and len(files) == 4
    assert four["conversations"][0]["value"].startswith(
        "Image-1: <image>\nImage-2: <image>\nImage-3: <image>\nImage-4: <image>\n"
        "The last 2 images are")
    assert "image" not in rows[SUMMARY][0]
    with pytest.raises(RadHarmonyError, match="must end in .jsonl"):
        export_mixture(cached.out, "internvl", tmp_path / "x.json", progress=False)


def test_energon_blends_one_dataset_per_source_and_task_by_its_records(mix, tmp_path):
    dest = tmp_path / "en" / "metadataset.yaml"
    summary = export_mixture(mix.out, "energon", dest, progress=False)
    got = read_energon(dest)
    want: dict = {}
    for r in mix.records:
        key = ({"train": "train", "valid": "val"}[r["split"]], r["source"], r["task"])
        want.setdefault(key, set()).add(r["record_id"])
    seen = {}
    for split, parts in got.items():
        for weight, rows in parts:
            ids = {r["id"] for r in rows}
            (key,) = {k for k, v in want.items() if ids <= v and k[0] == split}
            assert ids == want[key] and weight == len(rows)  # the group's records, all
            seen[key] = weight
    assert set(seen) == set(want) and summary["entries"] == len(mix.records) == 18
    assert summary["groups"]["train"] == {f"train/{s}.{t}.jsonl": n
                                          for (sp, s, t), n in seen.items() if sp == "train"}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_renders_one_record_alone(mix, fmt):
    from radharmony.mixture.formats import render_record

    rec = {**_by_id(mix)[WITH_PRIOR]}
    rec["fields"] = json.dumps(rec["fields"])
    got = render_record(rec, fmt)
    if fmt in ("llava", "llava-rad"):  # one image: the prior cannot come along
        assert got == {"skipped": "needs the prior image (one-image trainer)"}
    else:
        assert got["id"] == rec["record_id"]
