"""Building a mixture from exact-format fakes: leak-free, reproducible byte for byte, counted."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from mix_replicas import COPY_TO, SHARED_PATIENT, replicas, spec_for  # noqa: F401 (fixture)
from radharmony.mixture import (MANIFEST_NAME, RECORD_COLUMNS, RECORDS_NAME, TASKS, build,
                                fields_of, read_manifest, record_id)


@pytest.fixture(scope="module")
def built(replicas, tmp_path_factory):
    base = tmp_path_factory.mktemp("mix")
    manifest = build(spec_for(replicas, cache_dir=base / "cache"), base / "out", workers=3,
                     progress=False)
    records = pq.read_table(base / "out" / RECORDS_NAME).to_pandas()
    return base, manifest, records


def _excluded(manifest, source, task) -> dict:
    return {e["reason"]: e["records"] for e in manifest["excluded"]
            if e["source"] == source and e["task"] == task}


def test_the_records_file_has_the_shared_schema(built):
    base, manifest, records = built
    assert tuple(records.columns) == RECORD_COLUMNS
    assert len(records) == manifest["records"] == sum(c["records"] for c in manifest["counts"])
    assert records["record_id"].is_unique
    assert read_manifest(base / "out")["name"] == "test-mix"
    assert set(records["split"]) == {"train", "valid"}
    assert (records["family"] == records["task"].map({t: TASKS[t].family for t in TASKS})).all()


def test_a_patient_in_train_and_in_a_hold_out_test_set_is_dropped_and_counted(built):
    _, manifest, records = built
    assert manifest["target_lengths"]
    assert f"mimic_cxr_jpg:{SHARED_PATIENT}" not in set(records["patient_id"])
    # MIMIC's train split holds two images: the shared patient's, and the copied test image
    for task in ("classify_findings", "classify_view", "report_findings_impression"):
        assert _excluded(manifest, "mimic_cxr_jpg", task) == {"hold_out_patient": 1,
                                                              "hold_out_image": 1}
    assert (records["source"] != "mimic_cxr_jpg").all()
    held = {h["name"]: h for h in manifest["hold_out"]}
    assert held["mimic_cxr_jpg"]["rows"] == 8 and held["mimic_cxr_jpg"]["split"] == "test"


def test_a_duplicate_image_under_another_patient_is_dropped(built):
    _, manifest, records = built
    assert manifest["target_lengths"]
    assert not any(COPY_TO in paths for paths in records["image_paths"])
    mimic = next(s for s in manifest["sources"] if s["name"] == "mimic_cxr_jpg")
    assert mimic["hold_out_images"] == {"checked": 2, "missing": 0, "unreadable": 0,
                                        "exact": 1, "near": 0, "status": "checked"}


def test_no_record_touches_a_hold_out_patient(built, replicas):
    import radharmony
    from radharmony.mixture.context import patient_keys

    _, _, records = built
    held = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key, split in (("mimic_cxr_jpg", "test"), ("rexgradient_test", None)):
            ds = radharmony.get_dataset_class(key)(replicas[key], cache_dir=None)
            t = ds.harmonized_df
            t = t[t["split"] == split] if split else t
            held |= set(patient_keys(t, key, ds.spec).tolist())
    assert held and not held & set(records["patient_id"])


def test_the_validation_split_is_drawn_by_patient_across_sources_and_tasks(built):
    _, _, records = built
    sides = records.groupby("patient_id")["split"].nunique()
    assert (sides == 1).all()
    rex = records[records["dataset"] == "rexgradient_train"]
    assert rex.groupby("patient_id")["source"].nunique().max() == 2  # rex and rex_silver
    valid = records["split"] == "valid"
    assert 0.1 < valid.mean() < 0.6  # valid: 0.3 of the patients


def test_the_rebuild_is_byte_identical_whatever_the_workers(built, replicas):
    base, manifest, _ = built
    again = build(spec_for(replicas, cache_dir=base / "cache"), base / "again", workers=1,
                  progress=False)
    assert (base / "again" / RECORDS_NAME).read_bytes() == \
        (base / "out" / RECORDS_NAME).read_bytes()
    assert again["counts"] == manifest["counts"] and again["excluded"] == manifest["excluded"]
    assert (base / "again" / MANIFEST_NAME).read_bytes() == \
        (base / "out" / MANIFEST_NAME).read_bytes()  # three processes or this one
    # the memory-mapped columns too, file by file
    files = sorted(p.name for p in (base / "out" / "columns").iterdir())
    assert files == sorted(p.name for p in (base / "again" / "columns").iterdir())
    assert "split.codes.npy" in files and "rows.train.npy" in files
    for name in files:
        assert (base / "again" / "columns" / name).read_bytes() == \
            (base / "out" / "columns" / name).read_bytes(), name


def test_the_columns_hold_the_records_and_what_reading_their_images_needs(built, replicas):
    from radharmony.mixture.columns import MixtureColumns
    from radharmony.mixture.reading import table_records

    base, manifest, _ = built
    want = table_records(pq.read_table(base / "out" / RECORDS_NAME))
    cols = MixtureColumns(base / "out")
    assert cols.num_rows == len(want) == manifest["records"]
    every = np.arange(len(want))
    got = cols.take(every, RECORD_COLUMNS)
    assert [dict(zip(got, v)) for v in zip(*got.values())] == want
    for split in ("train", "valid"):
        assert np.array_equal(cols.rows(split), [i for i, r in enumerate(want)
                                                 if r["split"] == split])
    # each source's image root (the root its dataset was opened on) and cache key mode
    assert cols.sources == {s["name"]: {"name": s["name"], "image_root": s["root"],
                                        "cache_key": "identity"}
                            for s in manifest["sources"]}
    assert not np.load(base / "out" / "columns" / "task.codes.npy", mmap_mode="r").flags.owndata


def test_changing_one_rate_changes_only_that_draw(built, replicas):
    base, _, records = built
    spec = spec_for(replicas, cache_dir=base / "cache")
    spec["sources"][6]["tasks"]["finding_question"] = "random:20"  # vindr, was random:10
    build(spec, base / "rate", progress=False)
    other = pq.read_table(base / "rate" / RECORDS_NAME).to_pandas()
    moved = (records["source"] == "vindr_cxr") & (records["task"] == "finding_question")
    moved2 = (other["source"] == "vindr_cxr") & (other["task"] == "finding_question")
    assert records.loc[~moved, "record_id"].tolist() == other.loc[~moved2, "record_id"].tolist()
    assert moved.sum() == 10 and moved2.sum() == 20


def test_counts_add_up_per_source_and_task(built):
    _, manifest, records = built
    assert manifest["target_lengths"]
    got = records.groupby(["source", "task", "split"]).size().to_dict()
    assert got == {(c["source"], c["task"], c["split"]): c["records"] for c in manifest["counts"]}
    rex = records[(records["source"] == "rexgradient_train")]
    views = rex[rex["task"] == "classify_view"]
    # x2: every image with a view twice, each time its own record id, never two in a row
    assert (views["sample_id"].value_counts() == 2).all()
    drawn = len(views) // 2 + _excluded(manifest, "rexgradient_train", "classify_view")["no_view"]
    images = next(s for s in manifest["sources"] if s["name"] == "rexgradient_train")["rows"]
    assert drawn == images
    pad = records[(records["source"] == "padchest")]  # random:50% of the labelled images
    pad_rows = next(s for s in manifest["sources"] if s["name"] == "padchest")["rows"]
    labelled = pad_rows - _excluded(manifest, "padchest", "classify_findings")["no_labels"]
    assert len(pad) == -(-labelled // 2)


def test_targets_never_hold_a_placeholder_and_prompts_are_the_tasks(built):
    _, _, records = built
    assert not records["target"].str.contains(r"\bNone\b|\bnan\b", regex=True).any()
    assert (records["target"].str.len() > 0).all()
    for task, group in records.groupby("task"):
        templates = TASKS[task].prompts
        for prompt, v in zip(group["prompt"].head(20), group["prompt_variant"].head(20)):
            head = templates[v].split("{")[0]
            assert prompt.startswith(head), (task, prompt, templates[v])
    fi = records[records["task"] == "report_findings_impression"]
    for target, fields in zip(fi["target"], fi["fields"]):
        sections = fields_of(fields)["sections"]
        assert target.startswith("Findings: " if sections[0] == "findings" else "Impression: ")
        assert ("Impression: " in target) == ("impression" in sections)


def test_record_ids_are_the_hash_of_what_identifies_them(built):
    _, _, records = built
    one = records[(records["task"] == "classify_findings") & (records["source"] == "chexpert")]
    for rid, sample, v in zip(one["record_id"], one["sample_id"], one["prompt_variant"]):
        assert rid == record_id("chexpert", "classify_findings", sample, v)
    asked = records[records["task"] == "finding_question"]  # one record per image x finding
    assert len(asked)
    for rid, sample, v, f in zip(asked["record_id"], asked["sample_id"],
                                 asked["prompt_variant"], asked["fields"]):
        item = f"{sample}|{fields_of(f)['finding']}"
        assert rid == record_id("vindr_cxr", "finding_question", item, v)
    twice = records[(records["task"] == "classify_view") &
                    (records["source"] == "rexgradient_train")]
    first = twice.drop_duplicates("sample_id")  # x2: the repeat's item is "<sample>#1"
    again = twice[twice.duplicated("sample_id")]
    assert set(again["record_id"]) == {
        record_id("rexgradient_train", "classify_view", f"{s}#1", v)
        for s, v in zip(again["sample_id"], again["prompt_variant"])}
    assert not set(first["record_id"]) & set(again["record_id"])


def test_labels_speak_only_for_what_the_source_labels(built, replicas):
    import radharmony

    _, _, records = built
    ds = radharmony.get_dataset_class("chexpert")(replicas["chexpert"], cache_dir=None)
    table = ds.harmonized_df.set_index("sample_id")
    recs = records[(records["source"] == "chexpert") & (records["task"] == "classify_findings")]
    checked = 0
    for sample, target, fields in zip(recs["sample_id"], recs["target"], recs["fields"]):
        row, f = table.loc[sample], fields_of(fields)
        assert f["silver"] is False and "Nodule" not in target  # CheXpert labels no nodule
        ptx = row["Pneumothorax"]
        if np.isnan(ptx) and row["No Finding"] != 1.0:
            assert "pneumothorax" not in f["labels"] and "Pneumothorax" not in target
            checked += 1
        elif ptx == 1.0:
            assert f["labels"]["pneumothorax"] == 1 and "Present: " in target
    silver = records[records["source"] == "rex_silver"]
    assert len(silver) and all(fields_of(f)["silver"] for f in silver["fields"])
    assert checked or len(recs) == 0


def test_vqa_and_matching_records(built):
    _, _, records = built
    mcq = records[records["task"] == "vqa_mcq"]
    for prompt, target, fields in zip(mcq["prompt"], mcq["target"], mcq["fields"]):
        f = fields_of(fields)
        assert target == next(o for o in f["options"] if o[0] == f["answer_letter"])
        assert all(o in prompt for o in f["options"])
    match = records[records["task"] == "image_text_matching"]
    study_patient = dict(zip(match["study_id"], match["patient_id"]))
    for study, target, fields in zip(match["study_id"], match["target"], match["fields"]):
        f = fields_of(fields)
        assert (target == "yes") == f["match"] == (f["report_study_id"] == study)
        other = study_patient.get(f["report_study_id"])
        assert f["match"] or other is None or other != study_patient[study]
    assert set(match["target"]) == {"yes", "no"}


def test_max_records_caps_a_source_and_counts_the_cut(replicas, tmp_path):
    spec = {"name": "cap", "seed": 0, "valid": 0.0,
            "sources": [{"dataset": "chexpert", "root": replicas["chexpert"], "max_records": 10,
                         "tasks": {"classify_findings": "all", "classify_view": "all"}}]}
    m = build(spec, tmp_path / "cap", progress=False)
    cut = sum(e["records"] for e in m["excluded"] if e["reason"] == "max_records")
    assert m["records"] == 10 and cut == 21 + 21 - 10  # 21 images, each labelled and viewed


def test_an_empty_source_split_is_refused_naming_the_splits(replicas, tmp_path):
    from radharmony.errors import RadHarmonyError

    spec = {"name": "empty", "sources": [{"dataset": "chexpert", "root": replicas["chexpert"],
                                          "split": "test", "tasks": {"classify_view": "all"}}]}
    with pytest.raises(RadHarmonyError, match=r"'chexpert': chexpert has no rows in split "
                                              r"'test'.*Found: 21 rows, splits \['train'\]"):
        build(spec, tmp_path / "out", progress=False)
    assert not (tmp_path / "out" / RECORDS_NAME).exists()


def test_missing_image_files_hold_out_by_patient_only_and_say_so(replicas, tmp_path):
    import shutil

    from radharmony.fake import make_fake

    root = Path(make_fake("vindr_cxr", tmp_path / "vindr")["base_image_dir"])
    for p in list(root.rglob("*.dicom")) + list(root.rglob("*.png")):
        p.unlink()
    spec = {"name": "meta-only", "seed": 0, "valid": 0.0,
            "sources": [{"dataset": "vindr_cxr", "root": str(root),
                         "tasks": {"classify_findings": "all"}}],
            "hold_out": [{"dataset": "mimic_cxr_jpg", "root": replicas["mimic_cxr_jpg"],
                          "split": "test"}]}
    m = build(spec, tmp_path / "out", progress=False)
    status = m["sources"][0]["hold_out_images"]
    assert status["status"] == "image files missing: held out by patient only"
    assert status["missing"] == m["sources"][0]["rows"] and status["checked"] == 0
    assert m["records"] > 0
    shutil.rmtree(tmp_path / "out")


def test_the_command_builds_and_prints_the_counts(replicas, tmp_path, capsys):
    yaml = pytest.importorskip("yaml")
    from radharmony.cli.main import main

    spec = {"name": "cli", "seed": 2, "sources": [{"dataset": "chexpert",
                                                   "root": replicas["chexpert"],
                                                   "tasks": {"classify_view": "first:3"}}]}
    path = tmp_path / "mix.yaml"
    path.write_text(yaml.safe_dump(spec))
    assert main(["mix", "build", str(path), str(tmp_path / "out"), "-q"]) == 0
    assert "wrote 3 records" in capsys.readouterr().out
    assert main(["mix", "info", str(tmp_path / "out"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["records"] == 3 and info["counts"][0]["task"] == "classify_view"
    assert main(["mix", "info", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "chexpert  classify_view" in out and "total: 3 records" in out
    assert (tmp_path / "out" / MANIFEST_NAME).is_file()
    path.write_text(yaml.safe_dump({**spec, "sources": [{**spec["sources"][0],
                                                         "tasks": {"classify_vew": "all"}}]}))
    assert main(["mix", "build", str(path), str(tmp_path / "bad")]) == 1
    assert "did you mean 'classify_view'" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()  # refused before anything was written
    assert pd.read_parquet(tmp_path / "out" / RECORDS_NAME)["task"].tolist() == \
        ["classify_view"] * 3


def test_the_manifest_tallies_target_lengths_per_task(built):
    """``target_lengths`` holds each task's histogram of whitespace-token lengths, equal to the
    lengths of the written targets (what the composition plot reads instead of the records)."""
    from radharmony.mixture.lengths import lengths_histogram

    _, manifest, records = built
    assert manifest["target_lengths"]
    want = {t: lengths_histogram([len(x.split()) for x in g["target"]])
            for t, g in records.groupby("task")}
    assert manifest["target_lengths"] == dict(sorted(want.items()))
    assert sum(n for h in manifest["target_lengths"].values() for _, n in h) == len(records)


def test_fields_json_writes_the_standard_encoder_s_bytes():
    from radharmony.mixture.records import fields_json

    plain = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                             allow_nan=False, default=lambda v: v.tolist())
    cases = [{"b": "x\n\u2028\x7f\"é😀", "a": [True, None, -2**63, 2**64 - 1], "c": {"z": 1}},
             {"labels": {"edema": 1, "mass": -1}, "silver": False},  # orjson's path
             {"score": 1e-05, "n": [0.5, 2.5e300]},  # floats: Python writes 1e-05
             {"big": 2**64, "deep": [[[[["x"]]]]]},  # past 64 bits, past 4 deep
             {"np": np.int64(3), "t": ("a", "b")}, {"s": "\ud800"}]  # numpy; lone surrogate
    for f in cases:
        assert fields_json(f) == plain.encode(f)


def test_a_source_failing_in_its_process_raises_its_error_and_leaves_nothing(replicas, tmp_path):
    from radharmony.errors import RadHarmonyError

    spec = {"name": "fails", "sources": [
        {"dataset": "chexpert", "root": replicas["chexpert"], "tasks": {"classify_view": "all"}},
        {"dataset": "chexpert", "root": replicas["chexpert"], "split": "test", "name": "bad",
         "tasks": {"classify_view": "all"}}]}
    with pytest.raises(RadHarmonyError, match=r"'bad': chexpert has no rows in split 'test'") \
            as err:
        build(spec, tmp_path / "out", workers=2, progress=False)
    assert "In the source process:" in str(err.value.__cause__)  # where it was raised there
    assert "_build_source" in str(err.value.__cause__)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == []  # no columns either


def test_sources_are_built_in_this_process_where_fork_is_not_the_way(monkeypatch):
    from radharmony.mixture import spool

    assert spool.process_count(8, 3) == 3 and spool.process_count(1, 3) == 1
    assert 1 <= spool.process_count(None, 99) <= spool.DEFAULT_PROCESSES
    monkeypatch.setattr(spool.sys, "platform", "darwin")
    assert spool.process_count(8, 3) == 1


def test_fields_json_rows_writes_fields_json_s_text_per_record():
    import random

    from radharmony.mixture.records import OMIT, fields_json, fields_json_rows

    tricky = ["x\n\u2028\x7f\"é😀\\", "", "%s", "\ud800", "\x00\x1f", None, True, False, 0,
              -2**63, 2**64 - 1, 2**64, 1e-05, 0.5, float("nan"), ["a", "b"], ("t", "%s"), [], ["\n"],
              ["x", 1], [True, None], {}, {"z": 1, "a": [2, None]}, {"b": {"y": "é", "x": 1}},
              [[[["deep"]]]], [[[[["deeper"]]]]], np.int64(3), np.array([1, 2]), {"\ud800": 1},
              ["\ud800"], {1: "a"}, {"a": [[["x"]]]}, {"a": [["x"]]}, OMIT]
    pools = [tricky, ["plain", "é😀", "quote\"", OMIT], [["a"], ["b", "c"], ("d",)],
             [1, -2**63, True, None, OMIT], [True, False, None]]
    keys = ["answer", "a", "é", "Z", "%s", "q\"k", "\u2028k", "😀", "\ud800"]
    rng = random.Random(0)
    for _ in range(3000):
        pool = rng.choice(pools)
        n = rng.randint(0, 5)
        cols = {k: [rng.choice(pool) for _ in range(n)]
                for k in rng.sample(keys, rng.randint(1, 4))}
        try:
            want = [fields_json({k: v[i] for k, v in cols.items() if v[i] is not OMIT})
                    for i in range(n)]
        except ValueError:  # NaN: refused alike
            with pytest.raises(ValueError):
                fields_json_rows(cols)
            continue
        assert fields_json_rows(cols) == want, cols


def test_a_box_task_on_a_source_without_its_box_file_names_the_file_and_where(tmp_path):
    """ReXGradient's boxes come from ``interstitial_pattern_bbox.json`` beside the split
    JSON, an optional file: without it ``detect_findings`` names it and the path looked at."""
    from radharmony.errors import RadHarmonyError
    from radharmony.fake import write_rexgradient

    base = write_rexgradient(tmp_path / "rex", studies={"train": 4, "valid": 2, "test": 2},
                             image_size=(64, 64))
    box = tmp_path / "rex" / "download" / "metadata" / "interstitial_pattern_bbox.json"
    assert not box.exists()
    spec = {"name": "nobox", "seed": 1, "sources": [
        {"dataset": "rexgradient_train", "root": str(base),
         "tasks": {"classify_view": "all", "detect_findings": "all"}}]}
    with pytest.raises(RadHarmonyError) as err:
        build(spec, tmp_path / "out", workers=1, progress=False)
    msg = str(err.value)
    assert msg.startswith("Mixture source 'rexgradient_train': detect_findings needs boxes, "
                          "and rexgradient_train's optional box file "
                          "interstitial_pattern_bbox.json is absent")
    assert f"no file at {box}" in msg and "remove detect_findings" in msg


@pytest.mark.parametrize("key, box_name", [("nih_cxr14", "BBox_List_2017.csv"),
                                           ("vindr_cxr_physionet", "annotations_train.csv")])
def test_other_optional_box_files_are_named_with_where_they_were_looked_for(tmp_path, key,
                                                                           box_name):
    """NIH's box list and VinDr-CXR (PhysioNet)'s box table are optional files too: without
    them ``detect_findings`` names the file and the folders searched, not "no boxes column"."""
    from radharmony.errors import RadHarmonyError
    from radharmony.fake.nih import write_nih
    from radharmony.fake.vindr_physionet import write_vindr_physionet

    if key == "nih_cxr14":
        root = write_nih(tmp_path / "src", n_patients=4, size=64)
    else:
        root = write_vindr_physionet(tmp_path / "src", n_train=3, n_test=2)
    for box in list((tmp_path / "src").rglob(box_name)):
        box.unlink()
    spec = {"name": "nobox", "seed": 1, "sources": [
        {"dataset": key, "root": str(root),
         "tasks": {"classify_findings": "all", "detect_findings": "all"}}]}
    with pytest.raises(RadHarmonyError) as err:
        build(spec, tmp_path / "out", workers=1, progress=False)
    msg = str(err.value)
    assert f"detect_findings needs boxes, and {key}'s optional box file {box_name} is absent" \
        in msg, msg
    assert f"no {box_name}" in msg and str(tmp_path / "src") in msg, msg
