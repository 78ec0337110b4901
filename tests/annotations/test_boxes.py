"""Boxes for every dataset: IoU, selection/merging, agreement, geometry, collate, Label Studio
box files and ReXGradient's interstitial-pattern boxes."""

import radharmony
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony import collate
from radharmony.annotations.agreement import box_agreement, pair_ious
from radharmony.annotations.boxes import (BoxSelection, box_record, iou_matrix, match_pairs,
                                          merge_boxes, normalize_boxes)
from radharmony.annotations.label_studio import (detect_label_studio_form, join_boxes,
                                                 read_label_studio)
from radharmony.data.collate import pad_boxes
from radharmony.errors import MetadataError, RadHarmonyError, UnsupportedOutputWarning
from radharmony.fake import write_rexgradient
from radharmony.fake.rexgradient import BBOX_FILE, make_bbox_file, make_metadata
from radharmony.imaging.geometry import Letterbox


def rec(label, who, *xyxy):
    return box_record(label, who, *xyxy)


# -- IoU, matching ---------------------------------------------------------------------------------
def test_iou_matrix_known_values():
    a = np.array([[0, 0, 10, 10], [0, 0, 0, 5]])
    b = np.array([[5, 0, 15, 10], [0, 0, 10, 10], [20, 20, 30, 30]])
    m = iou_matrix(a, b)
    assert m.shape == (2, 3)
    assert m[0, 0] == pytest.approx(50 / 150)
    assert m[0, 1] == 1.0 and m[0, 2] == 0.0
    assert (m[1] == 0).all()  # an empty box overlaps nothing
    assert iou_matrix(np.zeros((0, 4)), b).shape == (0, 3)


def test_match_pairs_is_one_to_one_best_first():
    m = np.array([[0.9, 0.8], [0.85, 0.1]])
    assert match_pairs(m) == [(0, 0, 0.9), (1, 1, 0.1)]
    assert match_pairs(m, threshold=0.5) == [(0, 0, 0.9)]
    assert match_pairs(np.zeros((2, 2))) == []


# -- selection and merging -------------------------------------------------------------------------
CELL = [rec("consolidation", "705", 100, 100, 200, 200),
        rec("consolidation", "703", 110, 100, 210, 200),   # IoU with the first: 90/110
        rec("effusion", "703", 0, 0, 50, 50),
        rec("effusion", "705", 300, 300, 350, 350)]        # disjoint from 703's effusion


def test_selection_keeps_all_by_default():
    assert BoxSelection().apply(CELL) == CELL


def test_selection_one_annotator():
    assert [b["annotator"] for b in BoxSelection(annotator="703").apply(CELL)] == ["703", "703"]
    first = BoxSelection(annotator="first").apply(CELL)  # first listed on this image: 705
    assert [b["annotator"] for b in first] == ["705", "705"]
    assert BoxSelection(annotator="999").apply(CELL) == []


def test_merge_by_iou_averages_overlapping_boxes_of_different_annotators():
    merged = merge_boxes(CELL, iou=0.5)
    assert len(merged) == 3
    m = merged[0]
    assert m["label"] == "consolidation" and m["annotator"] == "703+705"
    assert [m[k] for k in ("x_min", "y_min", "x_max", "y_max")] == [105, 100, 205, 200]
    assert merged[1:] == CELL[2:]  # disjoint effusion boxes stay apart
    assert merge_boxes(CELL, iou=0.9) == CELL  # 0.818 < 0.9: nothing merges


def test_merge_never_joins_one_annotators_boxes_or_different_labels():
    same = [rec("a", "1", 0, 0, 10, 10), rec("a", "1", 0, 0, 10, 10)]
    assert merge_boxes(same, iou=0.5) == same
    other = [rec("a", "1", 0, 0, 10, 10), rec("b", "2", 0, 0, 10, 10)]
    assert merge_boxes(other, iou=0.5) == other
    three = [rec("a", "1", 0, 0, 10, 10), rec("a", "2", 0, 0, 10, 10), rec("a", "3", 0, 0, 10, 12)]
    assert [b["annotator"] for b in merge_boxes(three, iou=0.5)] == ["1+2+3"]


@pytest.mark.parametrize("kwargs, needle", [
    ({"annotator": 705}, "bbox_annotator must be text"),
    ({"merge_iou": 1.5}, "bbox_merge_iou must be a number in (0, 1]"),
    ({"merge_iou": True}, "bbox_merge_iou must be a number"),
    ({"annotator": "705", "merge_iou": 0.5}, "exclude each other"),
])
def test_selection_rejects_bad_arguments(kwargs, needle):
    with pytest.raises(RadHarmonyError, match="Expected") as e:
        BoxSelection(**kwargs)
    assert needle in str(e.value)


# -- agreement -------------------------------------------------------------------------------------
def test_agreement_per_label():
    pairs = pair_ious(CELL)
    assert ("consolidation", "703", "705", pytest.approx(90 / 110)) in pairs
    assert [p for p in pairs if p[0] == "effusion"] == [("effusion", "703", "705", 0.0)]
    single = [rec("consolidation", "1", 0, 0, 10, 10)]  # one annotator only: no pair
    table = pd.DataFrame({"boxes": [CELL, single, []]})
    out = box_agreement(table).set_index("label")
    assert out.loc["consolidation", "images"] == 1
    assert out.loc["consolidation", "mean_iou"] == pytest.approx(90 / 110)
    assert out.loc["consolidation", "iou_ge_0_5"] == 1.0
    assert out.loc["effusion", "unmatched"] == 1 and out.loc["effusion", "mean_iou"] == 0
    assert box_agreement([[], single]).empty


def test_agreement_counts_extra_boxes_as_unmatched():
    cell = [rec("a", "1", 0, 0, 10, 10), rec("a", "1", 50, 50, 60, 60),
            rec("a", "2", 0, 0, 10, 10)]
    assert sorted(v for *_, v in pair_ious(cell)) == [0.0, 1.0]


# -- geometry --------------------------------------------------------------------------------------
@pytest.mark.parametrize("h, w", [(400, 300), (300, 400), (256, 256), (97, 413)])
def test_letterbox_boxes_pixel_and_normalized_agree(h, w):
    lb = Letterbox.fit(h, w, 224)
    px = np.array([[0, 0, w, h], [w / 4, h / 2, w / 2, h]], np.float32)
    out = lb.boxes(px)
    assert out[0].tolist() == pytest.approx([lb.left, lb.top, lb.left + lb.new_w,
                                             lb.top + lb.new_h])
    norm = px / np.array([w, h, w, h], np.float32)
    assert lb.boxes(norm, normalized=True) == pytest.approx(out, abs=1e-3)
    past = lb.boxes(np.array([[-50, -50, w + 50, h + 50]]))  # clipped to the content
    assert past[0].tolist() == pytest.approx(out[0].tolist())
    assert lb.boxes(np.zeros((0, 4))).shape == (0, 4)


def test_letterbox_mask_follows_the_image():
    lb = Letterbox.fit(300, 420, 224)
    mask = np.zeros((300, 420), np.uint8)
    mask[60:150, 200:330] = 3
    out = lb.mask(mask)
    assert out.shape == (224, 224) and set(np.unique(out)) == {0, 3}
    ys, xs = np.nonzero(out)
    box = lb.boxes(np.array([[200, 60, 330, 150]]))[0]
    assert xs.min() >= np.floor(box[0]) and xs.max() + 1 <= np.ceil(box[2])
    assert ys.min() >= np.floor(box[1]) and ys.max() + 1 <= np.ceil(box[3])


# -- collate ---------------------------------------------------------------------------------------
def test_collate_keeps_variable_box_counts_per_sample():
    batch = [{"img": torch.zeros(1, 4, 4), "bbox": torch.zeros(n, 4), "bbox_labels": ["x"] * n,
              "report": None if n == 0 else "r", "cls": torch.ones(3)} for n in (0, 2, 2)]
    out = collate(batch)
    assert out["img"].shape == (3, 1, 4, 4) and out["cls"].shape == (3, 3)
    assert [b.shape[0] for b in out["bbox"]] == [0, 2, 2]
    assert out["bbox_labels"] == [[], ["x", "x"], ["x", "x"]]
    assert out["report"] == [None, "r", "r"]
    same = collate([{"bbox": torch.zeros(1, 4)}, {"bbox": torch.zeros(1, 4)}])
    assert isinstance(same["bbox"], list)  # same structure whatever the counts
    padded, valid = pad_boxes(out["bbox"], fill=-1)
    assert padded.shape == (3, 2, 4) and valid.tolist() == [[False, False], [True, True],
                                                            [True, True]]
    assert (padded[0] == -1).all()


# -- Label Studio forms ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def metas():
    return [make_metadata(10, seed=3)]


FORMS = ["label_studio_json", "label_studio_json_min", "keyed_by_image"]


def _sizes(metas):
    return {f"{e['StudyInstanceUid']}_{p.rsplit('/', 1)[1]}": tuple(s) if s else None
            for m in metas for e in m.values() for p, s in zip(e["ImagePath"], e["ImageShape"])}


def test_label_studio_forms_are_detected_and_agree(metas):
    results = {}
    for form in FORMS:
        raw = json.loads(json.dumps(make_bbox_file(metas, form=form)))
        assert detect_label_studio_form(raw) == form
        by_name, found = read_label_studio(raw, image_sizes=_sizes(metas))
        assert found == form
        results[form] = {k: sorted((b["label"], b["annotator"],
                                    *(round(b[c], 6) for c in ("x_min", "y_min", "x_max",
                                                               "y_max"))) for b in v)
                         for k, v in by_name.items()}
    names = {k.split("-", 1)[-1] for k in results["label_studio_json"]}
    assert names == set(results["keyed_by_image"])  # the full export carries upload prefixes
    for form in FORMS:
        assert {k.split("-", 1)[-1]: v for k, v in results[form].items()} == \
            results["keyed_by_image"]
    boxes = [b for v in results["keyed_by_image"].values() for b in v]
    assert boxes and all(0 <= b[2] < b[4] <= 1 and 0 <= b[3] < b[5] <= 1 for b in boxes)


def test_label_studio_percent_to_normalized_and_annotator():
    task = {"id": 1, "data": {"image": "/data/upload/3/0a1b2c3d-S_P.png"}, "annotations": [
        {"completed_by": {"id": 4, "email": "r@x.org"}, "result": [
            {"type": "rectanglelabels", "original_width": 800, "original_height": 600,
             "value": {"x": 10, "y": 20, "width": 30, "height": 40, "rotation": 0,
                       "rectanglelabels": ["reticular"]}},
            {"type": "choices", "value": {"choices": ["ok"]}}]},
        {"completed_by": 5, "was_cancelled": True, "result": [
            {"type": "rectanglelabels", "value": {"x": 0, "y": 0, "width": 1, "height": 1,
                                                  "rectanglelabels": ["nodular"]}}]}],
        "predictions": [{"result": [{"type": "rectanglelabels", "value": {
            "x": 0, "y": 0, "width": 5, "height": 5, "rectanglelabels": ["model"]}}]}]}
    with pytest.warns(UserWarning, match="1 result.*not labelled rectangles"):
        by_name, form = read_label_studio([task])
    assert form == "label_studio_json"
    assert by_name == {"0a1b2c3d-S_P.png": [rec("reticular", "r@x.org", 0.1, 0.2, 0.4, 0.6)]}
    rows, unmatched = join_boxes(["S_P.png", "S_Q.png"], by_name)
    assert rows[0] == by_name["0a1b2c3d-S_P.png"] and rows[1] == [] and unmatched == []


def test_label_studio_rotation_warns_and_uses_the_envelope():
    region = {"x": 10, "y": 10, "width": 20, "height": 10, "rotation": 90,
              "rectanglelabels": ["reticular"], "original_width": 100, "original_height": 100}
    raw = [{"image": "a.png", "label": [region], "annotator": 2}]
    with pytest.warns(UserWarning, match=r"1 rotated rectangle.*rotation 90"):
        by_name, form = read_label_studio(raw)
    assert form == "label_studio_json_min"
    b = by_name["a.png"][0]
    # clockwise 90 degrees about the top-left corner (10, 10): x from 0 to 10, y from 10 to 30
    assert [b["x_min"], b["y_min"], b["x_max"], b["y_max"]] == pytest.approx(
        [0.0, 0.1, 0.1, 0.3])
    assert b["annotator"] == "2"


def test_label_studio_bad_inputs_raise_with_four_parts():
    with pytest.raises(MetadataError, match="not a Label Studio box export.*Expected.*Fix"):
        read_label_studio({"a.png": {"x": 1}}, source="f.json")
    bad = [{"image": "a.png", "label": [{"x": 90, "y": 0, "width": 30, "height": 5,
                                         "rectanglelabels": ["r"]}]}]
    with pytest.raises(MetadataError, match="outside its image"):
        read_label_studio(bad)
    with pytest.raises(MetadataError, match="without numeric x"):
        read_label_studio([{"image": "a.png", "label": [{"x": "?", "y": 0, "width": 3,
                                                         "height": 5, "rectanglelabels": ["r"]}]}])


def test_keyed_pixel_boxes_need_the_image_size():
    raw = {"a.png": [{"x": 100, "y": 50, "width": 200, "height": 100, "label": "nodular"}],
           "b.png": [{"x": 1, "y": 1, "width": 2, "height": 2, "label": "nodular"}]}
    with pytest.warns(UserWarning, match="1 pixel box.*size is unknown"):
        by_name, _ = read_label_studio(raw, image_sizes={"a.png": (500, 1000), "b.png": None})
    assert by_name == {"a.png": [rec("nodular", None, 0.1, 0.1, 0.3, 0.3)]}


# -- ReXGradient -----------------------------------------------------------------------------------
@pytest.mark.parametrize("form", FORMS)
def test_rexgradient_bbox_output_with_each_form(tmp_path, form):
    from radharmony.dataset import ReXGradientTrainDataset

    root = write_rexgradient(tmp_path, studies={"train": 10, "valid": 3}, bbox=form)
    ds = ReXGradientTrainDataset(root, output_bbox=True, cache_dir=None)
    df = ds.harmonized_df
    counts = df["boxes"].map(len)
    assert counts.sum() > 0 and (counts == 0).any()
    raw = json.loads((tmp_path / "download" / "metadata" / BBOX_FILE).read_text())
    by_name, _ = read_label_studio(raw, image_sizes=_sizes([make_metadata(10, seed=0)]))
    i = int(np.flatnonzero(counts.to_numpy())[0])
    name = f"{df.study_id[i]}_{df.image_path[i].rsplit('/', 1)[1]}"
    expected = next(v for k, v in by_name.items() if k.endswith(name))
    assert df["boxes"][i] == expected
    s = ds[i]
    lb = ds.load_image(i)[1]
    xyxy = [[b[k] for k in ("x_min", "y_min", "x_max", "y_max")] for b in expected]
    assert s["bbox"].numpy() == pytest.approx(lb.boxes(np.array(xyxy), normalized=True))
    assert s["bbox_labels"] == [b["label"] for b in expected]
    empty = ds[int(np.flatnonzero(counts.to_numpy() == 0)[0])]
    assert empty["bbox"].shape == (0, 4) and empty["bbox"].dtype == torch.float32


def test_rexgradient_without_box_file_warns(tmp_path):
    from radharmony.dataset import ReXGradientValidDataset

    root = write_rexgradient(tmp_path, studies={"valid": 3}, images=False)
    with pytest.warns(UnsupportedOutputWarning, match="no 'bbox' key"):
        ds = ReXGradientValidDataset(root, output_bbox=True, cache_dir=None)
    assert "bbox" not in ds.outputs and "boxes" not in ds.harmonized_df.columns


def test_rexgradient_rotation_warns_and_saved_table_keeps_boxes(tmp_path):
    from radharmony.harmonizer import BaseHarmonizer, ReXGradientTrainHarmonizer

    root = write_rexgradient(tmp_path, studies={"train": 8}, images=False,
                             bbox="label_studio_json", bbox_rotation=30)
    with pytest.warns(UserWarning, match="rotated rectangle"):
        h = ReXGradientTrainHarmonizer(base_image_dir=root)
        df = h.harmonize()
    back = radharmony.load_harmonizer(h.save(tmp_path / "h.parquet")).harmonize()
    assert back["boxes"].tolist() == df["boxes"].tolist()


def test_rexgradient_box_selection_through_the_dataset(tmp_path):
    from radharmony.dataset import ReXGradientTrainDataset

    root = write_rexgradient(tmp_path, studies={"train": 16}, bbox="label_studio_json_min")
    kw = dict(output_bbox=True, cache_dir=None)
    full = ReXGradientTrainDataset(root, **kw)
    one = ReXGradientTrainDataset(root, bbox_annotator="11", **kw)
    merged = ReXGradientTrainDataset(root, bbox_merge_iou=0.01, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        n = [(len(full[i]["bbox"]), set(one[i]["bbox_annotators"]), len(merged[i]["bbox"]))
             for i in range(len(full))]
    assert all(a <= {"11"} for _, a, _ in n)
    assert all(m <= f for f, _, m in n) and sum(f for f, _, _ in n) > 0


def test_normalize_boxes():
    out = normalize_boxes([rec("a", "1", 10, 20, 30, 40)], width=100, height=200)
    assert out == [rec("a", "1", 0.1, 0.1, 0.3, 0.2)]


REAL = Path(__file__).resolve().parents[3] / "shared" / "real" / "rexgradient" / \
    "test_metadata_excerpt.json"


@pytest.mark.skipif(not REAL.is_file(), reason="shared real-format samples absent")
@pytest.mark.parametrize("form", ["label_studio_json", "keyed_by_image"])
def test_box_file_joins_on_real_study_and_sop_uids(tmp_path, form):
    from radharmony.harmonizer import ReXGradientTestHarmonizer

    meta = json.loads(REAL.read_text())
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "test_metadata.json").write_text(REAL.read_text())
    box_file = make_bbox_file([meta], form=form, seed=5)
    (tmp_path / "metadata" / BBOX_FILE).write_text(json.dumps(box_file))
    df = ReXGradientTestHarmonizer(base_image_dir=tmp_path / "deid_png").harmonize()
    assert len(df) == 162
    n_regions = sum(len(v) for v in box_file.values()) if form == "keyed_by_image" else \
        sum(len(a["result"]) for t in box_file for a in t["annotations"])
    assert n_regions > 10 and df["boxes"].map(len).sum() == n_regions
