"""Grounded tasks end to end: mixtures built from fakes (an Object-CXR replica written here with
boxes at the image edges on wide and tall images, VinDr-CXR's three readers, MS-CXR,
Chest ImaGenome, PadChest-GR), their targets parsed back and scored."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import cv2
import numpy as np
import pandas as pd
import pytest

from radharmony.fake import make_fake
from radharmony.imaging.geometry import Letterbox
from radharmony.mixture.box_parse import parse_boxes
from radharmony.mixture.boxes import DIALECTS, TOKEN_DIALECTS, ImageFrame
from radharmony.mixture.builder import build
from radharmony.mixture.grounding_scores import grounding_metrics
from radharmony.mixture.records import fields_json, fields_of
from radharmony.mixture.specfile import MixtureSpecError

#: the Object-CXR replica: name -> (height, width, rectangles x1 y1 x2 y2 in source pixels);
#: a wide image (vertical padding in the cache), a tall one (horizontal padding), boxes
#: touching every edge, and an image without an object
OBJECTS = {"00001.jpg": (200, 400, [(0, 0, 60, 200), (340, 150, 400, 200)]),
           "00002.jpg": (400, 200, [(0, 380, 200, 400)]),
           "00003.jpg": (300, 300, [(100, 40, 180, 120)]),
           "00004.jpg": (250, 350, [])}


def _object_cxr(root: Path) -> str:
    """A replica in the challenge's format: black images with a white rectangle per box."""
    (root / "train").mkdir(parents=True)
    rows = ["image_name,annotation"]
    for name, (h, w, boxes) in OBJECTS.items():
        img = np.zeros((h, w), np.uint8)
        for x1, y1, x2, y2 in boxes:
            img[y1:y2, x1:x2] = 255
        cv2.imwrite(str(root / "train" / name), img, [cv2.IMWRITE_JPEG_QUALITY, 100])
        rows.append(f"{name}," + ";".join(f"0 {x1} {y1} {x2} {y2}" for x1, y1, x2, y2 in boxes))
    (root / "train.csv").write_text("\n".join(rows) + "\n")
    (root / "dev.csv").write_text("image_name,annotation\n")
    return str(root)


#: the VinDr fake's first image: R6 boxed Atelectasis at (93, 51, 214, 137); R9 is added
FUSED_IMAGE = "47660010a8a49c67fcf6afadbb6e29bd"


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("grounded")
    out = {"object_cxr_train": _object_cxr(base / "object_cxr")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for key in ("vindr_cxr", "ms_cxr", "chest_imagenome", "padchest_gr", "nih_cxr14"):
            out[key] = str(make_fake(key, base / key)["base_image_dir"])
    with open(base / "vindr_cxr" / "train.csv", "a") as fh:  # a second reader, overlapping
        fh.write(f"{FUSED_IMAGE},Atelectasis,1,R9,95.0,51.0,214.0,139.0\n")
    return out


def _build(tmp_path, roots: dict, tasks: dict, **top) -> tuple[dict, pd.DataFrame]:
    sources = [{"dataset": k, "root": roots[k], "split": "all", "tasks": t}
               for k, t in tasks.items()]
    spec = {"name": "g", "seed": 3, "valid": 0.0, "sources": sources, **top}
    m = build(spec, tmp_path / "mix", progress=False)
    recs = pd.read_parquet(tmp_path / "mix" / "records.parquet")
    recs["f"] = [json.loads(f) for f in recs["fields"]]
    return m, recs


@pytest.mark.parametrize("dialect", DIALECTS)
def test_cache_mode_boxes_land_on_the_same_bright_rectangle(tmp_path, roots, dialect):
    _, recs = _build(tmp_path, roots, {"object_cxr_train": {"locate_foreign_objects": "all"}},
                     images="cache", size=64, boxes=dialect)
    assert len(recs) == 4
    for _, r in recs.iterrows():
        name = Path(r["image_paths"][0]).name
        h, w, want = OBJECTS[name]
        frame = ImageFrame.coerce(r["f"]["frame"])
        assert (frame.width, frame.height, frame.mode, frame.size) == (w, h, "cache", 64)
        got = parse_boxes(r["target"], frame, dialect)
        assert got.ok and got.malformed == 0
        xyxy = np.concatenate([b for _, b in got.items if b is not None] or [np.zeros((0, 4))])
        assert len(xyxy) == len(want)
        if not want:
            assert r["target"] == ("No foreign object." if dialect in TOKEN_DIALECTS
                                   else "[]") and r["f"]["boxes"] == []
            continue
        bx, by = frame.bin_size(dialect)
        tol = np.array([bx, by, bx, by]) + 1e-6
        assert (np.abs(xyxy - np.array(want, float)) <= tol).all(), (name, xyxy, want)
        assert [b["box"] for b in r["f"]["boxes"]] == [list(map(float, b)) for b in want]
        original = cv2.imread(str(Path(roots["object_cxr_train"]) / r["image_paths"][0]), 0)
        lb = Letterbox.fit(h, w, 64)
        cached = lb.pad(lb.resize(original))
        for box, cbox in zip(xyxy, frame.to_target(xyxy)):
            x1, y1, x2, y2 = np.round(box).astype(int)
            assert original[y1 + 1:y2 - 1, x1 + 1:x2 - 1].mean() > 200
            c1, d1, c2, d2 = np.round(cbox).astype(int)
            assert cached[d1 + 1:d2 - 1, c1 + 1:c2 - 1].mean() > 180, (name, cbox)
            ring = np.zeros_like(cached, bool)  # just outside the box: dark, unless another box
            ring[max(d1 - 2, 0):d2 + 2, max(c1 - 2, 0):c2 + 2] = True
            ring[max(d1 - 1, 0):d2 + 1, max(c1 - 1, 0):c2 + 1] = False
            if len(want) == 1:
                assert cached[ring].mean() < 60, (name, cbox)


def test_original_mode_frames_the_source_image(tmp_path, roots):
    _, recs = _build(tmp_path, roots, {"object_cxr_train": {"locate_foreign_objects": "all"}},
                     boxes="pixels")
    r = recs[recs["image_paths"].map(lambda p: p[0].endswith("00002.jpg"))].iloc[0]
    assert r["f"]["frame"] == {"width": 200, "height": 400, "mode": "original", "size": None}
    assert json.loads(r["target"]) == [{"text": "Foreign object",
                                        "boxes": [[0, 380, 200, 400]]}]


def test_vindr_readers_all_first_fused_and_one_reader(tmp_path, roots):
    per = {}
    for mode in ("all", "first", "fused", "reader:R8"):
        m, recs = _build(tmp_path / mode.replace(":", "_"), roots,
                         {"vindr_cxr": {"detect_findings": "all"}}, readers=mode)
        assert m["spec"]["readers"] == mode
        assert m["readers"] == {"readers": mode, **({"fuse_iou": 0.5} if mode == "fused"
                                                    else {})}
        per[mode] = {r["sample_id"]: [(b["reader"], b["box"]) for b in r["f"]["boxes"]]
                     for _, r in recs.iterrows()}
    every = sum(map(len, per["all"].values()))
    assert sum(map(len, per["fused"].values())) == every - 1
    fused = [b for rs in per["fused"].values() for r, b in rs if "+" in r]
    assert fused == [[94.0, 51.0, 214.0, 138.0]]
    assert ("R6+R9", [94.0, 51.0, 214.0, 138.0]) in per["fused"][f"vindr_cxr:{FUSED_IMAGE}"]
    per = {m: {s: [r for r, _ in rs] for s, rs in d.items()} for m, d in per.items()}
    assert all(len(set(rs)) == 1 for rs in per["first"].values())
    assert {x for rs in per["reader:R8"].values() for x in rs} == {"R8"}
    # every image of the "all" records has boxes; R8 read only some of them
    assert set(per["reader:R8"]) < set(per["all"])


def test_a_bad_readers_choice_names_the_key(tmp_path, roots):
    with pytest.raises(MixtureSpecError, match=r"readers: unknown readers choice.*reader:<id>"):
        _build(tmp_path, roots, {"vindr_cxr": {"detect_findings": "all"}}, readers="best")


def test_normal_images_come_at_their_own_rule(tmp_path, roots):
    m, recs = _build(tmp_path, roots, {"vindr_cxr": {"detect_findings": "all",
                                                     "detect_no_finding": "all"}},
                     boxes="chexagent")
    counts = {c["task"]: c["records"] for c in m["counts"]}
    # the VinDr fake: 8 images, 7 with boxes, 1 labelled "No finding" without a box
    assert counts == {"detect_findings": 7, "detect_no_finding": 1}
    normal = recs[recs["task"] == "detect_no_finding"].iloc[0]
    assert normal["target"] == "No finding." and normal["f"]["boxes"] == []
    assert normal["sample_id"] not in set(recs.loc[recs["task"] == "detect_findings",
                                                   "sample_id"])


def test_unboxed_images_with_findings_are_not_normal(tmp_path, roots):
    """NIH boxed only some images: the others with findings are not "no finding" images."""
    _, recs = _build(tmp_path, roots, {"nih_cxr14": {"detect_no_finding": "all",
                                                     "detect_findings": "all"}})
    raw = Path(roots["nih_cxr14"]).parent
    entries = pd.read_csv(raw / "Data_Entry_2017_v2020.csv")
    boxed = set(pd.read_csv(raw / "BBox_List_2017.csv")["Image Index"])
    normal = set(entries.loc[entries["Finding Labels"] == "No Finding", "Image Index"])
    assert len(normal - boxed) < len(set(entries["Image Index"]) - boxed)
    got = recs[recs["task"] == "detect_no_finding"]["image_paths"].map(lambda p: p[0])
    assert set(got) == normal - boxed
    assert len(recs[recs["task"] == "detect_findings"]) == len(boxed)


ALL = {"vindr_cxr": {"detect_findings": "all", "grounded_diagnosis": "all"},
       "ms_cxr": {"phrase_grounding": "all", "grounded_captioning": "all"},
       "chest_imagenome": {"anatomical_grounding": "all"},
       "padchest_gr": {"grounded_report": "all"},
       "object_cxr_train": {"locate_foreign_objects": "all"}}


@pytest.mark.parametrize("dialect", DIALECTS)
def test_perfect_predictions_score_one(tmp_path, roots, dialect):
    # one reader: with several readers' boxes in the target (all, or fused beside a reader's
    # second box), two readers' boxes of one finding are one finding to the scorer, and the
    # second predicted box counts against precision
    _, recs = _build(tmp_path, roots, ALL, images="cache", size=224, boxes=dialect,
                     readers="first")
    assert set(recs["task"]) == {t for ts in ALL.values() for t in ts}
    # the fields' text is the canonical JSON, byte for byte
    assert all(fields_json(fields_of(f)) == f for f in recs["fields"])
    scored = recs[recs["task"] != "grounded_captioning"]
    s = grounding_metrics(scored["target"].tolist(), scored, n_bootstrap=0)
    assert s["precision"] == 1.0 and s["recall"] == 1.0 and s["map50"] == 1.0
    assert s["miou"] > 0.85 and s["unparsed"] == 0.0 and s["malformed_boxes"] == 0
    report = recs[recs["task"] == "grounded_report"].iloc[0]
    sentences = report["f"]["sentences"]  # PadChest-GR: negatives kept, without a box
    boxed = {b["finding"] for b in report["f"]["boxes"]}
    assert boxed < set(sentences) and "No pneumothorax." in sentences
    caption = recs[recs["task"] == "grounded_captioning"].iloc[0]
    assert caption["target"] == caption["f"]["boxes"][0]["phrase"]


def test_maira2_boxes_on_the_original_are_on_maira2s_centred_crop(tmp_path, roots):
    from test_box_text import maira2_processor_read

    m, recs = _build(tmp_path, roots, {"object_cxr_train": {"locate_foreign_objects": "all"}},
                     boxes="maira2")
    # 00001 (400 x 200: crop x 100..300) and 00002 (200 x 400: crop y 100..300) hold their
    # boxes at the edges, wholly outside MAIRA-2's crop: dropped and counted, phrase kept
    assert {c["what"]: c["records"] for c in m["counted"]} == {
        "boxes_dropped_outside_crop": 3}
    by_name = {Path(r["image_paths"][0]).name: r for _, r in recs.iterrows()}
    assert by_name["00001.jpg"]["target"] == "<obj>Foreign object</obj>"
    assert by_name["00002.jpg"]["target"] == "<obj>Foreign object</obj>"
    read = maira2_processor_read(by_name["00003.jpg"]["target"], 300, 300)
    np.testing.assert_allclose(read[0][1], [[100, 40, 180, 120]], atol=3)
    # a wide image's box inside the crop, read back as MAIRA-2's processor does
    wide = parse_boxes("<obj>a<box><x0><y0><x49><y99></box></obj>", ImageFrame(400, 200),
                       "maira2")
    np.testing.assert_allclose(wide.boxes, [[101, 1, 199, 199]])


TWO_IN_ONE = {"maira2": ("</box><box>", ""), "chexagent": ("<|/box|><|ref|>Foreign object"
                                                              "<|/ref|><|box|>", ",")}
OVER = {"maira2": "<obj>Foreign object<box><x0><y0><x120><y99></box></obj>",  # a bin over 99
        "chexagent": "<|ref|>Foreign object<|/ref|><|box|>(0,0),(101,50)<|/box|>"}


@pytest.mark.parametrize("dialect", ["maira2", "chexagent"])
def test_model_outputs_two_boxes_in_a_token_prose_and_out_of_range(tmp_path, roots, dialect):
    # the cached square: MAIRA-2's crop is the whole image, so both boxes are written
    _, recs = _build(tmp_path, roots, {"object_cxr_train": {"locate_foreign_objects": "all"}},
                     images="cache", size=64, boxes=dialect)
    recs = recs[recs["image_paths"].map(lambda p: p[0].endswith("00001.jpg"))]
    target = recs["target"].iloc[0]
    two = target.replace(*TWO_IN_ONE[dialect])  # both boxes' coordinates in one box token
    assert two.count("box|>(" if dialect == "chexagent" else "<box>") == 1, two
    prose = "Sure! Here is what I see: " + target + " That is all."
    s = grounding_metrics([two], recs, n_bootstrap=0)
    assert s["recall"] == 1.0 and s["precision"] == 1.0 and s["malformed_boxes"] == 0
    assert grounding_metrics([prose], recs, n_bootstrap=0)["recall"] == 1.0
    s = grounding_metrics([OVER[dialect]], recs, n_bootstrap=0)
    assert s["malformed_boxes"] == 1 and s["recall"] == 0.0


def test_tasks_list_their_feeders():
    from radharmony.cli.mix import tasks_listing

    listed = {t["name"]: t for t in tasks_listing()}
    want = {"detect_findings": {"vindr_cxr", "vindr_cxr_physionet", "vindr_pcxr", "nih_cxr14",
                                "rsna_pneumonia", "tbx11k_train", "siim_covid19",
                                "object_cxr_train", "padchest_gr"},
            "phrase_grounding": {"ms_cxr"}, "grounded_captioning": {"ms_cxr"},
            "anatomical_grounding": {"chest_imagenome", "chest_imagenome_gold"},
            "locate_foreign_objects": {"object_cxr_train", "object_cxr_dev"},
            "grounded_report": {"padchest_gr"}}
    for name, keys in want.items():
        assert listed[name]["family"] == "grounding"
        assert keys <= set(listed[name]["datasets"]), name
    assert {"chest_imagenome", "mimic_cxr_jpg"}.isdisjoint(listed["detect_findings"]["datasets"])
    assert set(listed["phrase_grounding"]["datasets"]) == {"ms_cxr"}
    assert set(listed["grounded_report"]["datasets"]) == {"padchest_gr"}
