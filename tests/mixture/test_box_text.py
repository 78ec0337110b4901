"""Boxes as text (radharmony.mixture.boxes) and back (radharmony.mixture.box_parse): each dialect
spelled as its project writes it, the letterbox of the cache, the round trip within one bin,
and a parser that counts what it cannot read."""

from __future__ import annotations

import doctest
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radharmony.errors import RadHarmonyError
from radharmony.imaging.geometry import Letterbox
from radharmony.mixture import box_frame, box_parse, boxes
from radharmony.mixture.box_fast import strict_mask
from radharmony.mixture.box_parse import parse_boxes, parse_many
from radharmony.mixture.boxes import (DIALECTS, ImageFrame, box_to_text, grounded_text,
                                      grounded_texts, grounded_texts_flat)

PROFILE = settings.get_profile("radharmony-property")
WIDE = ImageFrame(400, 300)
WIDE_CACHE = ImageFrame(400, 300, mode="cache", size=224)


def test_docstring_examples():
    for module in (boxes, box_frame, box_parse):
        assert doctest.testmod(module).failed == 0


# -- hand-computed texts ---------------------------------------------------------------------------
def test_maira2_centre_crops_to_the_short_side_and_floors_to_100_bins():
    # 400 x 300: MAIRA-2's crop is the centred 300 square, x from 50 to 350; one bin 3 px
    # x 100 -> (100 - 50) / 3 = 16.7 -> 16; y 150 -> 50; x 398 reaches past 350: clipped to 99
    assert box_to_text("Left effusion.", [100, 150, 398, 299], WIDE, "maira2") == \
        "<obj>Left effusion.<box><x16><y50><x99><y99></box></obj>"
    # a tall image crops y instead: 300 x 600, the crop y 150..450; y 300 -> 150 / 3 = 50
    assert box_to_text("a", [30, 300, 299, 450], ImageFrame(300, 600), "maira2") == \
        "<obj>a<box><x10><y50><x99><y99></box></obj>"
    # a box wholly outside the crop (x 0..40 < 50) is dropped, its phrase kept
    assert grounded_text([("b", [[0, 0, 40, 300], [60, 0, 100, 100]]), ("c", [[10, 0, 50, 9]])],
                         WIDE, "maira2") == \
        "<obj>b<box><x3><y0><x16><y33></box></obj><obj>c</obj>"
    assert boxes.crop_counts([[0, 0, 40, 300], [60, 0, 100, 100], [10, 0, 50, 9],
                              [100, 150, 398, 299]], [400] * 4, [300] * 4, dialect="maira2") \
        == {"clipped": 1, "dropped": 2}
    # a square image (the cached square above all) is its own crop: nothing moves
    assert box_to_text("d", [0, 0, 400, 400], ImageFrame(400, 400), "maira2") == \
        "<obj>d<box><x0><y0><x99><y99></box></obj>"
    assert boxes.crop_counts([[0, 0, 400, 300]], [400], [300], dialect="maira2", mode="cache",
                             size=224) == {"clipped": 0, "dropped": 0}
    assert boxes.crop_counts([[0, 0, 40, 300]], [400], [300], dialect="chexagent") == \
        {"clipped": 0, "dropped": 0}


def test_chexagent_rounds_to_0_100_of_each_side_and_repeats_the_ref_per_box():
    text = grounded_text([("Nodule", [[100, 50, 200, 150], [0, 0, 400, 300]]),
                          ("no effusion", None)], WIDE, "chexagent")
    assert text == ("<|ref|>Nodule<|/ref|><|box|>(25,17),(50,50)<|/box|>"
                    "<|ref|>Nodule<|/ref|><|box|>(0,0),(100,100)<|/box|>"
                    "<|ref|>no effusion<|/ref|>")
    assert box_to_text("", [100, 50, 200, 150], WIDE, "chexagent") == \
        "<|box|>(25,17),(50,50)<|/box|>"


def test_internvl_writes_0_1000_of_each_side_one_box_list_per_phrase():
    text = grounded_text([("Nodule", [[100, 50, 200, 150], [0, 0, 400, 300]]),
                          ("no effusion", None)], WIDE, "internvl")
    # x 100 / 400 -> 250, y 50 / 300 -> 166.7 -> 167
    assert text == ("<ref>Nodule</ref><box>[[250, 167, 500, 500], [0, 0, 1000, 1000]]</box>"
                    "<ref>no effusion</ref>")
    assert box_to_text("", [100, 50, 200, 150], WIDE, "internvl") == \
        "<box>[[250, 167, 500, 500]]</box>"
    r = parse_boxes("Here: " + text, WIDE, "internvl")
    assert [p for p, _ in r.items] == ["Nodule", "no effusion"] and r.items[1][1] is None
    np.testing.assert_allclose(r.items[0][1], [[100, 50.1, 200, 150], [0, 0, 400, 300]])
    bad = parse_boxes("<ref>a</ref><box>[[1, 2, 3]]</box><ref>b</ref><box>[[1, 2, 1001, 4]]"
                      "</box>", WIDE, "internvl")
    assert bad.malformed == 2 and len(bad.boxes) == 0


def _smart_resize(height: int, width: int, factor=28, min_pixels=3136,
                  max_pixels=16384 * 28 * 28) -> tuple[int, int]:
    """Qwen2.5-VL's processor's resize, one image, in plain Python (its rules as written in
    its utilities: round each side to the factor, then one scale into the pixel bounds)."""
    import math

    h = max(factor, round(height / factor) * factor)
    w = max(factor, round(width / factor) * factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h, w = math.floor(height / beta / factor) * factor, math.floor(width / beta / factor) \
            * factor
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) \
            * factor
    return h, w


def test_qwen25_boxes_are_pixels_of_the_image_as_its_processor_resizes_it():
    from radharmony.mixture.box_frame import qwen_size

    # 400 x 300 -> 392 x 308 (14 and 11 patches of 28): x 100 * 392 / 400 = 98, y 50 * 308 /
    # 300 = 51.3 -> 51
    text = grounded_text([("Nodule", [[100, 50, 200, 150], [0, 0, 400, 300]]),
                          ("no effusion", None)], WIDE, "qwen2.5")
    assert json.loads(text) == [{"bbox_2d": [98, 51, 196, 154], "label": "Nodule"},
                                {"bbox_2d": [0, 0, 392, 308], "label": "Nodule"},
                                {"label": "no effusion"}]
    r = parse_boxes("```json\n" + text + "\n```", WIDE, "qwen2.5")
    assert [p for p, _ in r.items] == ["Nodule", "no effusion"] and len(r.items[0][1]) == 2
    assert parse_boxes('[{"bbox_2d": [0, 0, 393, 10], "label": "a"}]', WIDE,
                       "qwen2.5").malformed == 1  # past the resized width
    rng = np.random.default_rng(1)
    sizes = np.r_[rng.integers(10, 9000, (300, 2)), [[5000, 5000], [28, 28], [20, 4000]]]
    rw, rh = qwen_size(sizes[:, 0], sizes[:, 1])
    assert [(int(h), int(w)) for w, h in zip(rw, rh)] == [
        _smart_resize(int(h), int(w)) for w, h in sizes.tolist()]


def test_json_dialects_are_the_lists_their_readers_load():
    items = [("Right effusion.", [[40, 30, 200, 150]]), ("Heart normal.", None)]
    rad = json.loads(grounded_text(items, WIDE, "radfact"))
    assert rad == [{"text": "Right effusion.",
                    "boxes": [{"x_min": 0.1, "y_min": 0.1, "x_max": 0.5, "y_max": 0.5}]},
                   {"text": "Heart normal.", "boxes": None}]
    px = json.loads(grounded_text(items, WIDE_CACHE, "pixels"))
    # letterbox 400x300 -> 224: scale 0.56, content 224 x 168, top 28
    assert px == [{"text": "Right effusion.", "boxes": [[22, 45, 112, 112]]},
                  {"text": "Heart normal.", "boxes": None}]


def test_cache_frame_uses_the_pipelines_letterbox():
    rng = np.random.default_rng(3)
    for w, h in ((400, 300), (300, 600), (2048, 2500), (17, 1000)):
        frame = ImageFrame(w, h, mode="cache", size=224)
        xyxy = np.sort(rng.uniform(0, 1, (20, 4)) * [w, h, w, h], axis=0)
        xyxy = np.concatenate([np.minimum(xyxy[:, :2], xyxy[:, 2:]),
                               np.maximum(xyxy[:, :2], xyxy[:, 2:])], axis=1)
        want = Letterbox.fit(h, w, 224).boxes(xyxy)
        np.testing.assert_allclose(frame.to_target(xyxy), want, atol=1e-3)
        np.testing.assert_allclose(frame.from_target(frame.to_target(xyxy)), xyxy, atol=1e-6)


def test_corners_past_the_image_are_clipped():
    assert box_to_text("x", [-50, -5, 900, 700], WIDE, "chexagent") == \
        "<|ref|>x<|/ref|><|box|>(0,0),(100,100)<|/box|>"
    assert box_to_text("x", [-50, -5, 900, 700], WIDE_CACHE, "pixels") == \
        '[{"text": "x", "boxes": [[0, 28, 224, 196]]}]'


def test_the_columnar_path_writes_the_same_text():
    rng = np.random.default_rng(0)
    records, frames = [], []
    for r in range(30):
        w, h = int(rng.integers(50, 3000)), int(rng.integers(50, 3000))
        items = []
        for k in range(int(rng.integers(0, 4))):
            n = int(rng.integers(0, 3))
            b = np.sort(rng.uniform(0, 1, (n, 2, 2)), axis=1).reshape(n, 4)  # x1 y1 x2 y2
            items.append((f'p{r}.{k} "é" \\', (b * [w, h, w, h]).tolist() if n else None))
        records.append(items)
        frames.append((w, h))
    for dialect in DIALECTS:
        for mode, size in (("original", None), ("cache", 224)):
            want = grounded_texts(records, [ImageFrame(w, h, mode, size) for w, h in frames],
                                  dialect)
            phrases, xyxy, ws, hs, starts, rstart = [], [], [], [], [0], [0]
            box_sizes = []
            for items, (w, h) in zip(records, frames):
                for phrase, b in items:
                    phrases.append(phrase)
                    xyxy.extend(b or [])
                    box_sizes.extend([(w, h)] * len(b or []))
                    ws.append(w)
                    hs.append(h)
                    starts.append(len(xyxy))
                rstart.append(len(phrases))
            got = grounded_texts_flat(phrases, xyxy=np.array(xyxy).reshape(-1, 4), widths=ws,
                                      heights=hs, item_start=starts, record_start=rstart,
                                      dialect=dialect, mode=mode, size=size)
            assert got == want, (dialect, mode)
            if dialect in ("radfact", "pixels"):
                assert all(isinstance(json.loads(t), list) for t in got)
            frames_ = [ImageFrame(w, h, mode, size) for w, h in frames]
            # the writer's token text takes the fast path (json.loads is the fast path of JSON)
            assert strict_mask(got, dialect).all() == (dialect in ("maira2", "chexagent"))
            fast, slow = (parse_many(got, frames_, dialect, _fast=f) for f in (True, False))
            for name in ("item_output", "item_boxed", "box_item", "xyxy", "malformed", "ok"):
                np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name), name)
            assert fast.item_phrase == slow.item_phrase and fast.malformed.sum() == 0
            dropped = boxes.crop_counts(xyxy, [w for w, _ in box_sizes],
                                        [h for _, h in box_sizes], dialect=dialect,
                                        mode=mode, size=size)["dropped"]
            assert dropped == 0 or (dialect, mode) == ("maira2", "original")
            assert len(fast.xyxy) == len(xyxy) - dropped


# -- a reader of MAIRA-2's grounded sequence, as its processor does it ------------------------------
def maira2_processor_read(text: str, width: int, height: int):
    """What MAIRA-2's processor does with an output (split on <obj>...</obj>, then <box>...</box>,
    each box ``<x><y><x><y>`` read at its bin centre over 100 bins, every value in [0, 1]), then
    its ``adjust_box_for_original_image_size``: a fraction f of the centred crop of side
    m = min(W, H) is f * m + (W - m) // 2 pixels along x (and the same along y)."""
    text, out = text.strip(), []
    m = min(width, height)
    off = [(width - m) // 2, (height - m) // 2] * 2
    while text:
        assert text.startswith("<obj>")
        end = text.index("</obj>")
        body, text = text[len("<obj>"):end], text[end + len("</obj>"):]
        if "<box>" not in body:
            out.append((body.lstrip(), None))
            continue
        phrase, rest = body[:body.index("<box>")].strip(), body[body.index("<box>"):]
        found = []
        for inner in re.findall(r"<box>(.*?)</box>", rest):
            vals = [(int(v) + 0.5) / 100 for v in re.search(
                r"<x(\d+?)><y(\d+?)><x(\d+?)><y(\d+?)>", inner).groups()]
            assert all(0 <= v <= 1 for v in vals)
            found.append([v * m + o for v, o in zip(vals, off)])
        out.append((phrase, found))
    return out


def test_maira2_text_is_read_by_the_processors_rules():
    items = [("Left effusion.", [[100, 150, 398, 299], [60, 10, 70, 20]]), ("No ptx.", None)]
    got = maira2_processor_read(grounded_text(items, WIDE, "maira2"), 400, 300)
    assert got[1] == ("No ptx.", None)
    assert got[0][0] == "Left effusion."
    # the processor puts each box within one bin (3 px) of where it is; the first clipped at 350
    np.testing.assert_allclose(got[0][1], [[act - 0 for act in b] for b in
                                           [[99.5, 151.5, 348.5, 298.5], [60.5, 10.5, 69.5, 19.5]]])
    tall = maira2_processor_read(box_to_text("a", [30, 300, 299, 450], ImageFrame(300, 600),
                                             "maira2"), 300, 600)
    np.testing.assert_allclose(tall[0][1], [[31.5, 301.5, 298.5, 448.5]])


# -- round trip ------------------------------------------------------------------------------------
SIZES = st.tuples(st.integers(8, 5000), st.integers(8, 5000))


@PROFILE
@given(SIZES, st.lists(st.tuples(*[st.floats(0, 1)] * 4), min_size=1, max_size=4),
       st.sampled_from(DIALECTS), st.sampled_from([None, 224, 512, 37]))
def test_round_trip_within_one_bin(size, corners, dialect, cache):
    w, h = size
    frame = ImageFrame(w, h) if cache is None else ImageFrame(w, h, mode="cache", size=cache)
    xyxy = np.array([[min(a, c) * w, min(b, d) * h, max(a, c) * w, max(b, d) * h]
                     for a, b, c, d in corners])
    text = grounded_text([("finding", xyxy)], frame, dialect)
    back = parse_boxes("The answer: " + text + " done.", frame, dialect)
    assert back.ok and back.malformed == 0 and back.items[0][0] == "finding"
    want = xyxy
    if dialect == "maira2" and cache is None:  # MAIRA-2 sees the centred crop only
        m = min(w, h)
        lo = np.array([(w - m) // 2, (h - m) // 2] * 2, np.float64)
        status = box_frame.crop_status(xyxy, box_frame._params([frame] * len(xyxy)),
                                   np.arange(len(xyxy)), "maira2")
        want = np.clip(xyxy, lo, lo + m)[status < 2]
        if not len(want):
            assert back.items[0][1] is None
            return
    bx, by = frame.bin_size(dialect)
    err = np.abs(back.items[0][1] - want)
    assert (err[:, [0, 2]] <= bx + 1e-6).all() and (err[:, [1, 3]] <= by + 1e-6).all(), err


# -- the parser's tolerance and its counts ---------------------------------------------------------
def test_spacing_and_prose_are_tolerated():
    r = parse_boxes("I see: <obj> Nodule <box> <x 25> <y37>\n<x50><y 74> </box></obj> and more",
                    WIDE, "maira2")
    assert r.items[0][0] == "Nodule" and r.malformed == 0
    # bin centres on the centred 300 crop of the 400 x 300 image: x 25.5 * 3 + 50, y 37.5 * 3
    np.testing.assert_allclose(r.items[0][1], [[126.5, 112.5, 201.5, 223.5]])
    r = parse_boxes("```json\n[{\"text\": \"a\", \"boxes\": [[1, 2, 3, 4]]}]\n```", WIDE,
                    "pixels")
    np.testing.assert_allclose(r.boxes, [[1, 2, 3, 4]])


def test_two_boxes_in_one_token_are_two_boxes():
    r = parse_boxes("<|ref|>a<|/ref|><|box|>(0,0),(50,50),(50,50),(100,100)<|/box|>", WIDE,
                    "chexagent")
    np.testing.assert_allclose(r.boxes, [[0, 0, 200, 150], [200, 150, 400, 300]])
    r = parse_boxes("<obj>a<box><x0><y0><x9><y9><x10><y10><x19><y19></box></obj>", WIDE,
                    "maira2")
    assert len(r.boxes) == 2 and r.malformed == 0


@pytest.mark.parametrize("dialect,text,malformed,n_boxes", [
    ("chexagent", "<|ref|>a<|/ref|><|box|>(10,10),(101,50)<|/box|>", 1, 0),  # over 100
    ("chexagent", "<|ref|>a<|/ref|><|box|>(10,10),(20,20)<|/box|><|box|>(10,10)<|/box|>", 1, 1),
    ("chexagent", "<|ref|>a<|/ref|><|box|>(60,10),(20,20)<|/box|>", 1, 0),  # reversed
    ("chexagent", "<|ref|>a<|/ref|><|box|>(10,10),(20,20)", 1, 0),  # never closed
    ("maira2", "<obj>a<box><x10><y10><x100><y20></box></obj>", 1, 0),  # bin 100
    ("maira2", "<obj>a<box><x10><y10><y20><x30></box></obj>", 1, 0),  # axes out of order
    ("maira2", "<obj>a<box><x10><y10><x20><y20></box><box><x1></obj>", 1, 1),
    ("radfact", '[{"text": "a", "boxes": [{"x_min": 0.1, "y_min": 0.1, "x_max": 1.2, '
                '"y_max": 0.3}]}]', 1, 0),
    ("pixels", '[{"text": "a", "boxes": [[1, 2, 3]]}, {"text": "b", "boxes": [[1, 2, 3, 4]]}]',
     1, 1),
    ("pixels", '[{"text": "a", "boxes": [[1, 2, 401, 4]]}]', 1, 0),  # past the width
])
def test_malformed_boxes_are_counted_not_guessed(dialect, text, malformed, n_boxes):
    r = parse_boxes(text, WIDE, dialect)
    assert (r.malformed, len(r.boxes)) == (malformed, n_boxes)


def test_what_is_unparsed():
    assert parse_boxes("No acute findings.", WIDE, "maira2").ok  # nothing found, said plainly
    assert parse_boxes("No acute findings.", WIDE, "maira2").items == []
    assert not parse_boxes("<obj>a<box><x1></box></obj>", WIDE, "maira2").ok
    assert not parse_boxes("[{'text': 'a'}]", WIDE, "radfact").ok  # not JSON
    assert parse_boxes("[]", WIDE, "radfact").ok


@pytest.mark.parametrize("dialect", ["maira2", "chexagent"])
def test_canonical_and_tolerated_outputs_mixed_in_one_batch(dialect):
    canonical = [grounded_text([("a", [[60, 0, 200, 150]]), ("b", None)], WIDE, dialect),
                 grounded_text([("c", [[200, 150, 340, 300], [60, 0, 100, 30]])], WIDE,
                               dialect)]
    texts = [canonical[0], "Here: " + canonical[1], canonical[1], "nothing"]
    assert strict_mask(texts, dialect).tolist() == [True, False, True, False]
    many = parse_many(texts, WIDE, dialect)
    got = [[(p, None if b is None else b.round().tolist()) for p, b in many.result(i).items]
           for i in range(4)]
    assert got[1] == got[2] and got[1][0][0] == "c"
    np.testing.assert_allclose(got[1][0][1], [[200, 150, 340, 300], [60, 0, 100, 30]], atol=4)
    assert got[0][1] == ("b", None) and got[3] == []


@pytest.mark.parametrize("dialect", DIALECTS)
def test_batched_outputs_never_run_into_each_other(dialect):
    texts = [box_to_text("a", [0, 0, 200, 150], WIDE, dialect),
             box_to_text("a", [200, 150, 400, 300], WIDE, dialect),  # the same phrase again
             box_to_text("", [0, 0, 400, 300], WIDE, dialect)]  # a box without a phrase
    many = parse_many(texts, WIDE, dialect)
    assert [len(many.result(i).items) for i in range(3)] == [1, 1, 1]
    assert [len(many.result(i).boxes) for i in range(3)] == [1, 1, 1]


def test_parse_many_matches_one_by_one():
    texts = [box_to_text("a", [10, 20, 30, 40], WIDE_CACHE, "pixels"), "garbage [",
             box_to_text("b", None, WIDE_CACHE, "pixels")]
    many = parse_many(texts, WIDE_CACHE, "pixels")
    assert list(many.ok) == [True, False, True] and len(many) == 3
    for i, t in enumerate(texts):
        one = parse_boxes(t, WIDE_CACHE, "pixels")
        assert [(p, None if b is None else b.tolist()) for p, b in many.result(i).items] == \
            [(p, None if b is None else b.tolist()) for p, b in one.items]


def test_bad_arguments_say_what_to_pass():
    with pytest.raises(RadHarmonyError, match="mode 'cache' needs the cached image's size"):
        ImageFrame(10, 10, mode="cache")
    with pytest.raises(RadHarmonyError, match="The boxes dialect must be one of"):
        box_to_text("a", [0, 0, 1, 1], WIDE, "yolo")
    with pytest.raises(RadHarmonyError, match="width must be a positive integer"):
        ImageFrame(0, 10)
    with pytest.raises(RadHarmonyError, match="four numbers"):
        box_to_text("a", [0, 0, 1], WIDE, "maira2")
