"""Grounded records exported for another image than the build's (``images=``) or in a format's
own dialect (``maira2``): every box written again from the record's fields, where a build for
that image would have put it, or the record refused -- never a box left in the old frame."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.mixture.boxes import ImageFrame
from radharmony.mixture.builder import build
from radharmony.mixture.formats import export_mixture
from test_grounded_tasks import roots  # noqa: F401 (fixture: the grounded replicas)
from trainer_readers import read_hf_chat, read_internvl, read_maira2, read_ms_swift

TASKS = {"object_cxr_train": {"locate_foreign_objects": "all"},
         "ms_cxr": {"phrase_grounding": "all", "grounded_captioning": "all"}}


def _mix(folder, roots, dialect, images, tasks=TASKS):
    sources = [{"dataset": k, "root": roots[k], "split": "all", "tasks": t}
               for k, t in tasks.items()]
    spec = {"name": "b", "seed": 1, "valid": 0.0, "sources": sources, "boxes": dialect,
            "images": images}
    build(spec, folder, progress=False)
    return folder


def _chat(path) -> dict:
    return {r["id"]: (r["messages"][0]["content"][-1]["text"],
                      r["messages"][1]["content"][0]["text"]) for r in read_hf_chat(path)}


@pytest.mark.parametrize("dialect", ["pixels", "chexagent", "maira2"])
def test_an_export_for_another_image_writes_the_boxes_a_build_for_it_writes(tmp_path, roots,
                                                                           dialect):
    # 224: the size an export of an original-mode build writes cached images at
    cached = _mix(tmp_path / "c", roots, dialect, {"mode": "cache", "size": 224})
    original = _mix(tmp_path / "o", roots, dialect, {"mode": "original"})
    pairs = [(cached, "original", original)]
    if dialect != "maira2":  # MAIRA-2 on the original drops boxes its crop leaves out
        pairs.append((original, "cache", cached))
    for mix, images, same in pairs:
        s = export_mixture(mix, "hf-chat", tmp_path / images / "x.jsonl", images=images,
                           progress=False)
        export_mixture(same, "hf-chat", tmp_path / images / "want.jsonl", progress=False)
        got, want = _chat(tmp_path / images / "x.jsonl"), _chat(tmp_path / images / "want.jsonl")
        assert got == want and len(got) > 10
        recs = pd.read_parquet(mix / "records.parquet")
        changed = sum(got[r] != (p, t) for r, p, t in recs[["record_id", "prompt", "target"]]
                      .itertuples(index=False))
        assert changed > 5  # the captions' prompts among them
        n_boxes = sum(len(json.loads(f).get("boxes") or []) for f in recs["fields"])
        assert s["boxes"]["rewritten"] == n_boxes
        # the 400 x 200 and 200 x 400 images' edge boxes: outside MAIRA-2's crop
        assert s["boxes"]["dropped"] == (3 if (dialect, images) == ("maira2", "original")
                                         else 0)


def test_the_builds_own_images_leave_the_text_alone(tmp_path, roots):
    mix = _mix(tmp_path / "m", roots, "chexagent", {"mode": "cache", "size": 64})
    s = export_mixture(mix, "hf-chat", tmp_path / "x.jsonl", progress=False)
    assert s["boxes"] == {"rewritten": 0, "clipped": 0, "dropped": 0}


def test_a_text_that_does_not_match_its_fields_is_refused(tmp_path, roots):
    import pyarrow.parquet as pq

    mix = _mix(tmp_path / "m", roots, "chexagent", {"mode": "cache", "size": 64})
    table = pq.read_table(mix / "records.parquet")
    targets = table.column("target").to_pylist()
    k = next(i for i, t in enumerate(targets) if t.count("<|box|>") == 1)
    targets[k] = targets[k] + targets[k]  # two box tokens for one box
    table = table.set_column(table.schema.get_field_index("target"), "target",
                             [targets])
    pq.write_table(table, mix / "records.parquet")
    with pytest.raises(RadHarmonyError, match="2 box tokens for 1 boxes"):
        export_mixture(mix, "llava", tmp_path / "x.json", images="original", progress=False)
    assert not (tmp_path / "x.json").exists()


def test_maira2_writes_grounded_reports_and_phrases_on_its_own_frame(tmp_path, roots):
    """PadChest-GR's grounded reports and MS-CXR's phrases, built in another dialect
    (``pixels``) on the original images, exported as MAIRA-2's grounded targets: read by its
    processor's rules, each box is within one bin of the source box clipped to its crop."""
    from test_box_text import maira2_processor_read

    mix = _mix(tmp_path / "m", roots, "pixels", {"mode": "original"},
               tasks={"padchest_gr": {"grounded_report": "all"},
                      "ms_cxr": {"phrase_grounding": "all"}})
    s = export_mixture(mix, "maira2", tmp_path / "m.jsonl", progress=False)
    rows = {r["id"]: r for r in read_maira2(tmp_path / "m.jsonl")}
    recs = pd.read_parquet(mix / "records.parquet").set_index("record_id")
    assert set(rows) == set(recs.index) and s["skipped"] == {}
    tasks = {r["task"] for r in rows.values()}
    assert tasks == {"grounded_reporting", "phrase_grounding"}
    n = 0
    for rid, row in rows.items():
        f = json.loads(recs.loc[rid, "fields"])
        w, h = f["frame"]["width"], f["frame"]["height"]
        side = min(w, h)
        lo = np.array([(w - side) // 2, (h - side) // 2] * 2, float)
        read = maira2_processor_read(row["target"], w, h)
        got = [b for _, bs in read for b in bs or ()]
        want = [np.clip(b["box"], lo, lo + side) for b in f["boxes"]]
        want = [b for b in want if b[2] > b[0] and b[3] > b[1]]  # dropped: outside the crop
        assert len(got) == len(want)
        for g, b in zip(got, want):
            assert np.abs(np.array(g) - b).max() <= side / 100 + 1e-6
            n += 1
        if row["task"] == "grounded_reporting":  # negatives kept, without a box
            assert [p for p, _ in read] == f["sentences"]
        else:
            assert row["phrase"] == f["boxes"][0]["phrase"] == read[0][0]
        assert row["frontal"].endswith(recs.loc[rid, "image_paths"][0])
    assert n > 3 and s["boxes"]["rewritten"] >= n


@pytest.mark.parametrize("images", ["original", "cache"])
def test_ms_swift_objects_are_the_boxes_in_the_entrys_image_pixels(tmp_path, roots, images):
    mix = _mix(tmp_path / "m", roots, "chexagent", {"mode": "original"},
               tasks={"padchest_gr": {"grounded_report": "all"},
                      "ms_cxr": {"phrase_grounding": "all", "grounded_captioning": "all"}})
    s = export_mixture(mix, "ms-swift", tmp_path / "s.jsonl", images=images, progress=False)
    recs = pd.read_parquet(mix / "records.parquet").set_index("record_id")
    captions = int((recs["task"] == "grounded_captioning").sum())
    assert s["skipped"] == {"box in the prompt": captions} and captions > 0
    rows = read_ms_swift(tmp_path / "s.jsonl", tmp_path / "images" if images == "cache"
                         else None)
    assert len(rows) == len(recs) - captions
    n = 0
    for row, pairs in rows:
        f = json.loads(recs.loc[row["id"], "fields"])
        frame = ImageFrame(f["frame"]["width"], f["frame"]["height"], images,
                           224 if images == "cache" else None)
        want = frame.to_target([b["box"] for b in f["boxes"]])
        names = [b.get("finding") or b.get("phrase") for b in f["boxes"]]
        assert [r for r, _ in pairs] == names
        got = np.array([b for _, b in pairs], float).reshape(-1, 4)
        np.testing.assert_allclose(got, want, atol=0.5 + 1e-6)
        n += len(pairs)
        if recs.loc[row["id"], "task"] == "grounded_report":  # negatives as text
            target = row["messages"][1]["content"]
            assert all(x in target for x in f["sentences"] if x not in names)
    assert n > 3 and s["boxes"]["rewritten"] == n


@pytest.mark.parametrize("images", ["original", "cache"])
def test_internvl_boxes_are_0_1000_of_the_named_image(tmp_path, roots, images):
    """Built in MAIRA-2's dialect on the original images, exported for InternVL: every box
    the build wrote, from the fields, on 0..1000 of the named image's width and height (the
    boxes MAIRA-2's crop left out of the build's text stay out)."""
    from radharmony.mixture.box_parse import parse_boxes
    from radharmony.mixture.reframe import source_boxes

    mix = _mix(tmp_path / "m", roots, "maira2", {"mode": "original"},
               tasks={"padchest_gr": {"grounded_report": "all"},
                      "object_cxr_train": {"locate_foreign_objects": "all"}})
    s = export_mixture(mix, "internvl", tmp_path / "iv.jsonl", images=images, progress=False)
    rows = read_internvl(s["meta"]["path"])
    recs = pd.read_parquet(mix / "records.parquet").set_index("record_id")
    n = 0
    for row, files in rows:
        f = json.loads(recs.loc[row["id"], "fields"])
        if not f.get("boxes"):
            continue
        frame = ImageFrame(f["frame"]["width"], f["frame"]["height"], images,
                           224 if images == "cache" else None)
        assert (row["width"], row["height"]) == frame.target_size
        got = parse_boxes(row["conversations"][1]["value"], frame, "internvl")
        wx, wy = frame.bin_size("internvl")
        err = np.abs(got.boxes - source_boxes(f)[0])
        assert (err[:, [0, 2]] <= wx / 2 + 1e-6).all() and (err[:, [1, 3]] <= wy / 2 + 1e-6).all()
        n += len(got.boxes)
    assert n == s["boxes"]["rewritten"] > 3


@pytest.mark.parametrize("built", ["pixels", "chexagent"])
def test_an_image_with_nothing_to_box_keeps_saying_so_in_another_dialect(tmp_path, roots,
                                                                        built):
    mix = _mix(tmp_path / "m", roots, built, {"mode": "cache", "size": 64},
               tasks={"object_cxr_train": {"locate_foreign_objects": "all"}})
    s = export_mixture(mix, "internvl", tmp_path / "iv.jsonl", progress=False)
    assert s["skipped"] == {} and s["entries"] == 4
    targets = {Path(f[0]).name.removesuffix(".png"): r["conversations"][1]["value"]
               for r, f in read_internvl(s["meta"]["path"])}
    assert targets["00004.jpg"] == "No foreign object."
    assert targets["00003.jpg"].startswith("<ref>Foreign object</ref><box>[[")
