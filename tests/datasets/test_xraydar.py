"""X-Raydar multimodal: table, every output, warnings/errors, splits, and boxes that follow the
image through the built-in pipeline."""

import radharmony
import json
import warnings

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony import get_dataset_class
from radharmony.datasets.xraydar import LABEL_COLS, REPORT_CATEGORIES
from radharmony.errors import MetadataError
from radharmony.fake import make_fake, write_png, write_xraydar
from radharmony.harmonizer import BaseHarmonizer, XRaydarMultimodalHarmonizer
from radharmony.dataset import XRaydarMultimodalDataset
from radharmony.annotations.spans import align_tokens, char_spans, detect_span_end
from radharmony.imaging.pipeline import DefaultTransform

H = XRaydarMultimodalHarmonizer


def line(**over):
    """One hand-written annotations.jsonl object (the card's example, completed)."""
    text = "There is consolidation in the left lower zone. Comparison: none."
    rec = {"xray_id": "1858", "image_file": "images/1858.png",
           "consensus_labels": ["consolidation", "mediastinum_widened", "unfolded_aorta",
                                "volume_loss"],
           "bounding_boxes": [
               {"label": "consolidation", "annotator": "705", "x_min": 1200, "y_min": 800,
                "x_max": 1500, "y_max": 1100},
               {"label": "mediastinum_widened", "annotator": "703", "x_min": 700, "y_min": 200,
                "x_max": 1000, "y_max": 600}],
           "report_text": text,
           "report_tokens": ["There", "is", "consolidation", "in", "the", "left", "lower",
                             "zone", ".", "Comparison", ":", "none", "."],
           "report_iobe_tags": ["B", "I", "I", "I", "I", "I", "I", "I", "E", "B", "I", "I", "E"],
           "report_spans": [{"label": "consolidation", "start": 0, "end": 8},
                            {"label": "comparison", "start": 9, "end": 12}],
           "report_labels": ["consolidation", "comparison"]}
    rec.update(over)
    return rec


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


# -- vocabulary and table --------------------------------------------------------------------------
def test_vocabularies_are_the_issue_lists():
    assert len(LABEL_COLS) == 37 and list(LABEL_COLS) == sorted(LABEL_COLS)
    assert len(REPORT_CATEGORIES) == 45 and list(REPORT_CATEGORIES) == sorted(REPORT_CATEGORIES)
    assert set(LABEL_COLS) < set(REPORT_CATEGORIES)
    assert LABEL_COLS[0] == "aortic_calcification" and LABEL_COLS[-1] == "volume_loss"


def test_hand_written_line_pins_the_table():
    df = H.harmonize_raw([line(), None, line(xray_id="7", image_file="images/7.png",
                                             consensus_labels=[], bounding_boxes=[])])
    assert len(df) == 2  # the blank line (None) is skipped
    r = df.iloc[0]
    assert (r.patient_id, r.study_id, r.image_path) == ("1858", "1858", "images/1858.png")
    assert r.view_position is None and r.report.startswith("There is consolidation")
    on = {c for c in LABEL_COLS if r[c] == 1.0}
    assert on == {"consolidation", "mediastinum_widened", "unfolded_aorta", "volume_loss"}
    assert all(r[c] == 0.0 for c in LABEL_COLS if c not in on)  # assessed, not missing
    assert (df.iloc[1][list(LABEL_COLS)] == 0).all()  # empty list: no finding
    assert r.boxes[0] == {"label": "consolidation", "annotator": "705", "x_min": 1200.0,
                          "y_min": 800.0, "x_max": 1500.0, "y_max": 1100.0}
    assert r.report_spans == line()["report_spans"]  # token form kept as shipped
    assert r.report_char_spans == [{"label": "consolidation", "start": 0, "end": 46},
                                   {"label": "comparison", "start": 47, "end": 64}]
    assert r.report_labels == ["consolidation", "comparison"]


def test_harmonizer_reads_metadata_only_and_discovers_the_jsonl(tmp_path):
    root = write_xraydar(tmp_path, n=6, images=False)
    h = H(base_image_dir=root)
    df = h.harmonize()
    assert h.csv_path == root / "annotations.jsonl" and len(df) == 6
    assert df.image_path.str.fullmatch(r"images/\d+\.png").all()
    assert df.study_id.is_unique


def test_saved_table_round_trips(tmp_path):
    root = write_xraydar(tmp_path, n=5, images=False)
    h = H(base_image_dir=root)
    back = radharmony.load_harmonizer(h.save(tmp_path / "x.parquet")).harmonize()
    df = h.harmonize()
    for col in ("boxes", "report_spans", "report_char_spans", "report_labels", *LABEL_COLS):
        assert back[col].tolist() == df[col].tolist()


# -- warnings and errors ---------------------------------------------------------------------------
def test_unknown_labels_warn_naming_label_and_exam(tmp_path):
    bad = line(consensus_labels=["consolidation", "lung_nodule"],
               report_labels=["incidental"],
               bounding_boxes=[{"label": "blob", "annotator": "1", "x_min": 1, "y_min": 1,
                                "x_max": 5, "y_max": 5}])
    with pytest.warns(UserWarning) as rec:
        df = H.harmonize_raw([bad])
    msgs = " ".join(str(w.message) for w in rec)
    for label, field in (("lung_nodule", "consensus_labels"), ("incidental", "report_labels"),
                         ("blob", "bounding_boxes")):
        assert f"unknown label {label!r} in {field} of exam(s) 1858" in msgs
    assert df.consolidation[0] == 1.0 and df.boxes[0][0]["label"] == "blob"  # kept, not lost
    assert df.report_labels[0] == ["incidental"]


def test_malformed_line_names_its_number(tmp_path):
    root = write_xraydar(tmp_path, n=5, images=False, malformed_line=3)
    with pytest.raises(MetadataError, match=r"annotations\.jsonl, line 3: is not valid JSON"):
        H(base_image_dir=root).harmonize()


@pytest.mark.parametrize("records, needle", [
    ([line(), ["not", "an", "object"]], "line 2: is not a JSON object"),
    ([line(xray_id=None)], "line 1: has no xray_id"),
    ([line(), line()], "line 2: repeats exam 1858 of line 1"),
    ([line(consensus_labels="consolidation")], "line 1: consensus_labels is not a list of str"),
    ([line(report_iobe_tags=["B"])], "line 1: has 13 report_tokens but 1 report_iobe_tags"),
    ([line(bounding_boxes=[{"label": "bulla", "x_min": "a"}])], "line 1: bounding_boxes[0]"),
])
def test_bad_lines_raise_with_line_numbers(tmp_path, records, needle):
    path = write_jsonl(tmp_path / "annotations.jsonl", records)
    with pytest.raises(MetadataError, match="Expected.*Fix") as e:
        H(csv_path=path, base_image_dir=tmp_path).harmonize()
    assert needle in str(e.value)


def test_inverted_box_is_dropped_with_a_warning():
    bad = line(bounding_boxes=[{"label": "bulla", "annotator": "1", "x_min": 9, "y_min": 1,
                                "x_max": 5, "y_max": 5}])
    with pytest.warns(UserWarning, match="1 empty or inverted box.*exam 1858"):
        assert H.harmonize_raw([bad]).boxes[0] == []


# -- report spans ----------------------------------------------------------------------------------
def test_align_tokens_handles_split_punctuation_and_missing_tokens():
    text = "Left lower zone.  Heart  normal."
    assert align_tokens(text, ["Left", "lower", "zone", ".", "Heart", "normal", "."]) == [
        (0, 4), (5, 10), (11, 15), (15, 16), (18, 23), (25, 31), (31, 32)]
    # a token absent from the text is skipped, not matched far ahead
    assert align_tokens("a b c", ["a", "zz", "b"]) == [(0, 1), None, (2, 3)]
    assert align_tokens("Heart normal", ["heart"]) == [(0, 5)]  # case-insensitive fallback


def test_span_end_convention_is_read_from_the_iobe_tags():
    tags = ["B", "I", "E", "B", "E"]
    assert detect_span_end([(tags, [{"start": 0, "end": 2}, {"start": 3, "end": 4}])])[0] == \
        "inclusive"
    assert detect_span_end([(tags, [{"start": 0, "end": 3}, {"start": 3, "end": 5}])])[0] == \
        "exclusive"
    offsets = [(0, 1), (2, 3), (4, 5)]
    assert char_spans([{"label": "x", "start": 0, "end": 2}], offsets, inclusive=True) == \
        ([{"label": "x", "start": 0, "end": 5}], [])
    assert char_spans([{"label": "x", "start": 0, "end": 2}], offsets, inclusive=False)[0] == \
        [{"label": "x", "start": 0, "end": 3}]


@pytest.mark.parametrize("span_end", ["inclusive", "exclusive"])
def test_char_spans_cover_the_sentence_text_for_both_conventions(tmp_path, span_end):
    root = write_xraydar(tmp_path, n=10, images=False, span_end=span_end)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = H(base_image_dir=root).harmonize()
    checked = 0
    for text, toks, spans, chars in zip(df.report, df.report_tokens, df.report_spans,
                                        df.report_char_spans):
        assert len(chars) == len(spans)
        for s, c in zip(spans, chars):
            last = s["end"] if span_end == "inclusive" else s["end"] - 1
            piece = text[c["start"]:c["end"]]
            assert piece.replace(" ", "") == "".join(toks[s["start"]:last + 1])
            assert piece.endswith(".") and piece[0].isupper() and c["label"] == s["label"]
            checked += 1
    assert checked >= 10


# -- outputs ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def fake_root(tmp_path_factory):
    return write_xraydar(tmp_path_factory.mktemp("xraydar"), n=12)


def dataset(root, **kw):
    return XRaydarMultimodalDataset(root, cache_dir=None, dtype=torch.float32, **kw)


def test_registry_sample_ids_and_default_sample(fake_root):
    assert get_dataset_class("xraydar_multimodal") is XRaydarMultimodalDataset
    ds = dataset(fake_root)
    s = ds[0]
    assert set(s) == {"sample_id", "img"} and s["img"].shape == (1, 224, 224)
    ids = [json.loads(x)["xray_id"] for x in
           (fake_root / "annotations.jsonl").read_text().splitlines()]
    assert list(ds.sample_ids) == [f"xraydar_multimodal:{i}" for i in ids]


def test_output_cls(fake_root):
    ds = dataset(fake_root, output_cls=True)
    for i in range(len(ds)):
        rec = json.loads((fake_root / "annotations.jsonl").read_text().splitlines()[i])
        cls = ds[i]["cls"]
        assert cls.shape == (37,)
        assert {LABEL_COLS[j] for j in torch.nonzero(cls).flatten().tolist()} == \
            set(rec["consensus_labels"])


def test_output_report_and_report_labels(fake_root):
    ds = dataset(fake_root, output_report=True, output_report_labels=True)
    lines = (fake_root / "annotations.jsonl").read_text().splitlines()
    for i in range(len(ds)):
        rec, s = json.loads(lines[i]), ds[i]
        assert s["report"] == rec["report_text"]
        assert s["report_cls"].shape == (45,)
        assert {REPORT_CATEGORIES[j] for j in torch.nonzero(s["report_cls"]).flatten()
                .tolist()} == set(rec["report_labels"])


def test_output_report_spans_are_character_offsets(fake_root):
    ds = dataset(fake_root, output_report=True, output_report_spans=True)
    n = 0
    for i in range(len(ds)):
        s = ds[i]
        for span in s["report_spans"]:
            assert set(span) == {"label", "start", "end"}
            piece = s["report"][span["start"]:span["end"]]
            assert piece == piece.strip() and piece.endswith(".")
            n += 1
    assert n > 10


def test_output_bbox_maps_pixels_through_the_letterbox(fake_root):
    ds = dataset(fake_root, output_bbox=True)
    df = ds.harmonized_df
    i = int(np.argmax(df.boxes.map(len).to_numpy()))
    s, lb = ds[i], ds.load_image(i)[1]
    boxes = df.boxes[i]
    xyxy = np.array([[b[k] for k in ("x_min", "y_min", "x_max", "y_max")] for b in boxes])
    assert s["bbox"].dtype == torch.float32 and s["bbox"].shape == (len(boxes), 4)
    assert s["bbox"].numpy() == pytest.approx(lb.boxes(xyxy), abs=1e-4)
    assert s["bbox_labels"] == [b["label"] for b in boxes]
    assert s["bbox_annotators"] == [b["annotator"] for b in boxes]
    assert len(set(s["bbox_annotators"])) == 2  # both annotators' boxes by default
    empty = ds[int(np.flatnonzero(df.boxes.map(len).to_numpy() == 0)[0])]
    assert empty["bbox"].shape == (0, 4) and empty["bbox_labels"] == []


def test_bbox_options_one_annotator_and_merge(fake_root):
    full = dataset(fake_root, output_bbox=True)
    first = dataset(fake_root, output_bbox=True, bbox_annotator="first")
    merged = dataset(fake_root, output_bbox=True, bbox_merge_iou=0.5)
    for i in range(len(full)):
        a, f, m = full[i], first[i], merged[i]
        assert len(set(f["bbox_annotators"])) <= 1 and len(f["bbox"]) <= len(a["bbox"])
        assert len(m["bbox"]) <= len(a["bbox"])
    assert any("+" in w for i in range(len(merged)) for w in merged[i]["bbox_annotators"])


def test_user_transform_keeps_source_pixels(fake_root):
    ds = dataset(fake_root, output_bbox=True, transform=lambda s: {**s, "img": np.zeros((1, 8, 8),
                                                                                    np.float32)})
    i = int(np.argmax(ds.harmonized_df.boxes.map(len).to_numpy()))
    b = ds.harmonized_df.boxes[i][0]
    assert ds[i]["bbox"][0].tolist() == [b["x_min"], b["y_min"], b["x_max"], b["y_max"]]


def test_splits_group_by_exam_deterministically(fake_root):
    ds = dataset(fake_root)
    assert ds.spec.group_col == "study_id"
    folds = ds.get_folds(3)
    vals = [set(v.harmonized_df.study_id) for _, v in folds]
    assert sorted(x for v in vals for x in v) == sorted(ds.harmonized_df.study_id)
    for (tr, va) in folds:
        assert not set(tr.harmonized_df.study_id) & set(va.harmonized_df.study_id)
    again = [set(v.harmonized_df.study_id) for _, v in ds.get_folds(3)]
    assert vals == again
    train, val = ds.get_datasets(n_splits=4)
    assert len(train) + len(val) == len(ds) == len(ds.get_datasets())


def test_fake_maker_builds_the_dataset(tmp_path):
    kwargs = make_fake("xraydar_multimodal", tmp_path)
    ds = get_dataset_class("xraydar_multimodal")(**kwargs, cache_dir=None, output_cls=True,
                                                 output_bbox=True, output_report_spans=True)
    assert len(ds) == 12 and ds[3]["cls"].shape == (37,)


# -- the bright-rectangle test: boxes cover the same pixels after resize and padding ---------------
def _bright_rect_root(tmp_path, h, w, box, bits):
    img = np.full((h, w), 200 if bits == 16 else 20, np.uint16 if bits == 16 else np.uint8)
    x0, y0, x1, y1 = box
    img[y0:y1, x0:x1] = 4000 if bits == 16 else 250
    write_png(tmp_path / "images" / "1.png", img)
    rec = line(xray_id="1", image_file="images/1.png", bounding_boxes=[
        {"label": "bulla", "annotator": "9", "x_min": x0, "y_min": y0, "x_max": x1, "y_max": y1}])
    write_jsonl(tmp_path / "annotations.jsonl", [rec])
    return tmp_path


@pytest.mark.parametrize("h, w, box, size, bits", [
    (600, 450, (100, 380, 260, 520), 224, 16),     # portrait: padding left and right
    (333, 517, (400, 40, 480, 300), 224, 8),       # landscape: padding top and bottom
    (257, 257, (0, 0, 64, 31), 96, 16),            # square, box at the corner
    (700, 300, (150, 10, 299, 690), 320, 8),       # tall, upscaled, box at the edge
])
def test_output_box_covers_the_bright_region(tmp_path, h, w, box, size, bits):
    root = _bright_rect_root(tmp_path, h, w, box, bits)
    for cache in (None, tmp_path / "cache", tmp_path / "cache"):  # uncached, cold, warm
        ds = XRaydarMultimodalDataset(root, output_bbox=True, cache_dir=cache,
                                      transform=DefaultTransform(size=size),
                                      dtype=torch.float32)
        s = ds[0]
        img = s["img"][0].numpy()
        assert img.shape == (size, size)
        bright = img > 0.0  # halfway between background (-1) and rectangle (+1)
        ys, xs = np.nonzero(bright)
        x0, y0, x1, y1 = s["bbox"][0].tolist()
        # every bright pixel [j, j+1) lies inside the box, to within one pixel of blur
        assert xs.min() >= x0 - 1 and xs.max() + 1 <= x1 + 1
        assert ys.min() >= y0 - 1 and ys.max() + 1 <= y1 + 1
        # and the box holds nothing but the rectangle: it is no more than a pixel too large
        assert x1 - x0 <= xs.max() + 1 - xs.min() + 2 and y1 - y0 <= ys.max() + 1 - ys.min() + 2
        inner = img[int(np.ceil(y0)) + 1:int(y1) - 1, int(np.ceil(x0)) + 1:int(x1) - 1]
        assert inner.size and (inner > 0.9).all()


def test_table_read_back_from_csv_gives_the_same_samples(fake_root, tmp_path):
    ds = dataset(fake_root, output_bbox=True, output_report_spans=True,
                 output_report_labels=True, output_cls=True)
    df = ds.harmonizer.harmonize()
    nested = ["boxes", "report_labels", "report_spans", "report_char_spans", "report_tokens",
              "report_iobe_tags"]
    df[nested] = df[nested].map(json.dumps)
    df.to_csv(tmp_path / "t.csv", index=False)
    back = dataset(fake_root, harmonized_df=pd.read_csv(tmp_path / "t.csv"), output_bbox=True,
                   output_report_spans=True, output_report_labels=True, output_cls=True)
    for i in (0, 1, 5):
        a, b = ds[i], back[i]
        assert a["sample_id"] == b["sample_id"] and a["report_spans"] == b["report_spans"]
        for k in ("bbox", "cls", "report_cls"):
            assert torch.equal(a[k], b[k])
