"""Where grounded tasks' boxes come from (radharmony.mixture.grounding): every box-carrying
dataset's fake, with one row checked by hand against the raw file the fake wrote; the readers
choice; and the cached-image mode checked on pixels (the same bright rectangle in both)."""

from __future__ import annotations

import doctest
import math

import numpy as np
import pandas as pd
import pytest

import radharmony
from radharmony.errors import RadHarmonyError
from radharmony.fake import make_fake, write_png
from radharmony.imaging.pipeline import DefaultTransform
from radharmony.mixture import grounding
from radharmony.mixture.box_parse import parse_boxes
from radharmony.mixture.boxes import DIALECTS, ImageFrame, box_to_text
from radharmony.mixture.grounding import BoxItem, box_items, box_table, choose_readers

# key -> (boxes + unboxed sentences, kind, the first row: text, reader, xyxy, width, height)
# the first row checked by hand against the raw file the fake writes:
#   vindr_cxr train.csv "47660010...,Atelectasis,1,R6,93.0,51.0,214.0,137.0" (DICOM 352 x 288)
#   nih_cxr14 BBox_List_2017.csv "00000001_000.png,Atelectasis,93.499147,284.718545,276.516329,
#       265.384789" in 1024 units, the fake PNG 256 x 256: x / 4 -> 23.37, 71.18, 92.50, 137.53
#   ms_cxr "...,142,60,90,46,314,348,train" (x, y, w, h, image 314 x 348) -> 142, 60, 232, 106
#   padchest_gr finding 0 "boxes": [0.1, 0.5, 0.4, 0.9] of a 98 x 105 PNG -> 9.8, 52.5, 39.2, 94.5
EXPECTED = {
    "vindr_cxr": (38, "finding", ("Atelectasis", "R6", (93, 51, 214, 137), 352, 288)),
    "vindr_cxr_physionet": (12, "finding", ("Atelectasis", "R6", (164, 76, 233, 176), 352, 288)),
    "vindr_pcxr": (3, "finding", ("Dextro cardia", "R5", (76, 49, 133, 130), 200, 180)),
    "nih_cxr14": (6, "finding", ("Atelectasis", None, (23.3748, 71.1796, 92.5039, 137.5258),
                                 256, 256)),
    "rsna_pneumonia": (6, "finding", ("Pneumonia", None, (69, 89, 196, 111), 256, 256)),
    "tbx11k_train": (5, "finding", ("ActiveTuberculosis", None,
                                    (212.8708, 124.7488, 247.7876, 156.7321), 512, 512)),
    "siim_covid19": (4, "finding", ("opacity", None, (63.8612, 55.8495, 109.2447, 161.5036),
                                    288, 320)),
    "object_cxr_train": (5, "finding", ("Foreign object", None, (62, 96, 142, 209), 280, 342)),
    "ms_cxr": (6, "phrase", ("atelectasis in the left lower lobe", None, (142, 60, 232, 106),
                             314, 348)),
    "chest_imagenome": (25, "region", ("right mid lung zone", None, (2, 2, 11, 38), 85, 81)),
    "padchest_gr": (21, "sentence", ("Right pleural effusion.", "1", (9.8, 52.5, 39.2, 94.5),
                                     98, 105)),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = {}

    def get(key):
        if key not in cache:
            kw = make_fake(key, tmp_path_factory.mktemp(key))
            cache[key] = radharmony.get_dataset_class(key)(**kw)
        return cache[key]
    return get


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_every_box_in_source_pixels_with_its_text_and_reader(key, built):
    ds = built(key)
    n, kind, (text, reader, xyxy, w, h) = EXPECTED[key]
    t = box_table(ds.harmonized_df, ds.spec, root=ds.base_image_dir)
    assert len(t) == n and set(t["kind"]) == {kind}
    first = t.iloc[0]
    assert (first["text"], first["reader"], first["width"], first["height"]) == \
        (text, reader, w, h)
    np.testing.assert_allclose(first[["x_min", "y_min", "x_max", "y_max"]].to_numpy(float),
                               xyxy, atol=1e-3)
    boxed = t.dropna(subset=["x_min"])
    assert (boxed["x_min"] >= 0).all() and (boxed["x_max"] <= boxed["width"] + 1e-6).all()
    assert (boxed["y_max"] <= boxed["height"] + 1e-6).all()


def test_padchest_gr_keeps_negative_sentences_without_boxes(built):
    ds = built("padchest_gr")
    rows = box_items(ds.harmonized_df, ds.spec, root=ds.base_image_dir)
    first = rows[0]
    texts = [i.text for i in first.items]
    assert texts[0] == "Right pleural effusion." and texts[-1] == "No pneumothorax."
    assert first.items[-1].box is None and first.items[-1].reader is None
    assert [i.reader for i in first.items if i.text == "Right pleural effusion."] == \
        ["1", "1", "2"]
    t = box_table(ds.harmonized_df, ds.spec, root=ds.base_image_dir)
    assert t[t["row"] == 0]["item"].tolist() == [0, 0, 0, 1, 2]


def test_ms_cxr_items_group_boxes_by_phrase(built):
    ds = built("ms_cxr")
    t = box_table(ds.harmonized_df, ds.spec, root=ds.base_image_dir)
    row0 = t[t["row"] == 0]
    assert row0["item"].tolist() == [0, 0, 1]
    assert row0["label"].tolist() == ["Atelectasis", "Atelectasis", "Pleural Effusion"]


def test_sizes_come_from_the_caller_or_an_error_says_how(built):
    ds = built("vindr_cxr")
    df = ds.harmonized_df
    with pytest.raises(RadHarmonyError, match="need each image's size.*Fix: pass root="):
        box_table(df, ds.spec)
    sizes = {s: (1000, 500) for s in df["sample_id"]}
    t = box_table(df, ds.spec, sizes=sizes)
    assert (t["width"] == 1000).all() and t.iloc[0]["x_min"] == 93.0  # pixels stay pixels
    nih = built("nih_cxr14")
    sizes = pd.DataFrame({"sample_id": nih.harmonized_df["sample_id"], "width": 1024,
                          "height": 1024})
    t = box_table(nih.harmonized_df, nih.spec, sizes=sizes)
    assert t.iloc[0]["x_min"] == pytest.approx(93.499147, abs=1e-3)  # the real 1024 PNG
    with pytest.raises(RadHarmonyError, match="sizes= lacks images"):
        box_table(nih.harmonized_df, nih.spec, sizes={})


# -- readers -----------------------------------------------------------------------------------------
ITEMS = [BoxItem("Nodule", (10, 10, 50, 50), "R1"), BoxItem("Nodule", (12, 10, 52, 50), "R2"),
         BoxItem("Nodule", (200, 200, 220, 220), "R2"), BoxItem("Effusion", (0, 0, 5, 5), "R3"),
         BoxItem("No pneumothorax.", None, None)]


def test_choose_readers():
    assert choose_readers(ITEMS, "all") == (ITEMS, {"readers": "all"})
    first, _ = choose_readers(ITEMS, "first")
    assert [i.reader for i in first] == ["R1", None]
    r2, _ = choose_readers(ITEMS, "reader:R2")
    assert [i.box for i in r2] == [(12, 10, 52, 50), (200, 200, 220, 220), None]
    fused, info = choose_readers(ITEMS, "fused")
    assert info == {"readers": "fused", "fuse_iou": 0.5}
    assert [(i.text, i.box, i.reader) for i in fused] == [
        ("Nodule", (11.0, 10.0, 51.0, 50.0), "R1+R2"), ("Nodule", (200, 200, 220, 220), "R2"),
        ("Effusion", (0, 0, 5, 5), "R3"), ("No pneumothorax.", None, None)]
    single = [BoxItem("Pneumonia", (1, 2, 3, 4), None)]
    assert choose_readers(single, "reader:R9")[0] == single  # no readers: nothing to choose
    with pytest.raises(RadHarmonyError, match="Unknown readers choice"):
        choose_readers(ITEMS, "reader:")


def test_docstring_examples():
    assert doctest.testmod(grounding).failed == 0


# -- the cached image: the parsed box drawn on both images covers the same bright rectangle ---------
def _bright_box(arr: np.ndarray, level: float) -> np.ndarray:
    ys, xs = np.nonzero(arr > level)
    return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], np.float64)


@pytest.mark.parametrize("shape,rect", [((180, 300), (200, 40, 260, 120)),
                                        ((400, 150), (20, 300, 90, 380))])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_cached_mode_finds_the_same_bright_rectangle(tmp_path, shape, rect, dialect):
    h, w = shape
    img = np.full((h, w), 20, np.uint8)
    x1, y1, x2, y2 = rect
    img[y1:y2, x1:x2] = 240
    path = write_png(tmp_path / "rect.png", img)
    cached, letterbox = DefaultTransform(size=224).encode(path)
    frame = ImageFrame(w, h, mode="cache", size=224)
    assert frame.letterbox == letterbox  # the pipeline's own geometry
    text = box_to_text("rectangle", rect, frame, dialect)
    parsed = parse_boxes(f"Found it: {text}", frame, dialect)
    (phrase, boxes), = parsed.items
    source_box = boxes[0]
    bx, by = frame.bin_size(dialect)
    # on the original: the parsed box is the bright rectangle, within one bin
    np.testing.assert_allclose(source_box, _bright_box(img, 128), atol=max(bx, by) + 1e-6)
    # on the cached image: the parsed box mapped there is the bright rectangle there too
    # (within one bin of the cache plus the one pixel an area resize blurs at an edge)
    on_cache = frame.to_target([source_box])[0]
    bin_px = max(bx * letterbox.new_w / w, by * letterbox.new_h / h)
    np.testing.assert_allclose(on_cache, _bright_box(cached, 128), atol=bin_px + 1.0)
    m = int(math.ceil(bin_px + 1))
    x1, y1, x2, y2 = on_cache.round().astype(int)
    assert cached[y1 + m:y2 - m, x1 + m:x2 - m].min() > 200  # inside: bright
    outside = np.ones(cached.shape, bool)
    outside[max(0, y1 - m):y2 + m, max(0, x1 - m):x2 + m] = False
    assert cached[outside].max() < 60  # around it: dark (content and padding)
