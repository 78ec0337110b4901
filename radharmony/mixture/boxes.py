"""Boxes as text: a box in the source image's pixels -> the text a grounded record's target holds,
in one of four dialects, for the image the record points at (``docs/mixture_grounding.md``).

The image a record points at (:class:`ImageFrame`) is either the **original** file (``W x H``)
or the **cached** letterboxed square of side ``S`` that radharmony's pipeline writes: the same
:class:`~radharmony.imaging.geometry.Letterbox` (long side scaled to ``S``, content centred,
padding on the short axis) maps a source box to the cached image, exactly as the dataset's
``bbox`` output does. A box is written in the pointed-at image's coordinates:

* ``maira2`` -- MAIRA-2's processor: the image resized by its shortest side and **centre-cropped
  to a square** of side ``m = min(w, h)``, each corner quantised to 100 bins per axis on that
  crop (``bin = floor(100 (p - o) / m)``, 0..99, ``o = (w - m) // 2`` along x and
  ``(h - m) // 2`` along y; read back at the bin centre ``(bin + 0.5) m / 100 + o``, as
  its ``adjust_box_for_original_image_size`` does). A box reaching past the crop is clipped
  to it, a box wholly outside it is dropped (:func:`crop_counts` counts both; a sentence
  whose boxes are all dropped keeps its phrase). A sentence is
  ``<obj>phrase<box><x12><y30><x40><y66></box>...</obj>``, no box for a negative sentence;
  sentences follow each other with nothing between them.
* ``chexagent`` -- CheXinstruct: ``<|ref|>phrase<|/ref|><|box|>(x1,y1),(x2,y2)<|/box|>`` per
  box, corners as integers 0..100 of the image's width and height (rounded to nearest). A
  phrase without a box is ``<|ref|>phrase<|/ref|>``; an empty phrase writes the boxes alone.
* ``radfact`` -- RadFact's grounded report: JSON ``[{"text": ..., "boxes": [{"x_min", "y_min",
  "x_max", "y_max"}] or null}]``, fractions of width and height, 4 decimals.
* ``pixels`` -- the same JSON with each box ``[x1, y1, x2, y2]`` in integer pixels of the
  pointed-at image.
* ``internvl`` -- InternVL: ``<ref>phrase</ref><box>[[x1, y1, x2, y2], ...]</box>``, a
  phrase's boxes in one list, corners as integers 0..1000 of the width and height (rounded
  to nearest); a phrase without a box is ``<ref>phrase</ref>``, an empty phrase writes the
  box alone.
* ``qwen2.5`` -- Qwen2.5-VL: JSON ``[{"bbox_2d": [x1, y1, x2, y2], "label": phrase}, ...]``,
  one object a box, integer pixels of the pointed-at image **as Qwen2.5-VL's processor
  resizes it** (:func:`~radharmony.mixture.box_frame.qwen_size`: sides multiples of 28
  within its pixel bounds); a sentence without a box is ``{"label": phrase}``.

One *bin* (the round-trip tolerance, :meth:`ImageFrame.bin_size`) is 1/100 of the crop's side
(``maira2``), 1/100 of the side (``chexagent``), 1/1,000 (``internvl``), 1/10,000 of the side
(``radfact``), one pixel (``pixels``) of the pointed-at image and one pixel of Qwen2.5-VL's
resized image (``qwen2.5``). Corners outside the image are clipped to it (to the
content for the cached image, as :meth:`Letterbox.boxes` does). The reverse is
:mod:`radharmony.mixture.box_parse`.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import RadHarmonyError, shorten
from .box_frame import (BINS, DIALECTS, IMAGE_MODES, RADFACT_DECIMALS, RADFACT_KEYS,
                        TOKEN_DIALECTS, ImageFrame, _params, _params_sizes, check_dialect, crop_counts,
                        crop_status, from_target, from_units, to_target, unit_limits, units)

__all__ = ["BINS", "DIALECTS", "IMAGE_MODES", "RADFACT_DECIMALS", "RADFACT_KEYS",
           "TOKEN_DIALECTS", "ImageFrame",
           "box_to_text", "check_dialect", "crop_counts", "crop_status", "from_target",
           "from_units", "grounded_text", "grounded_texts", "grounded_texts_flat",
           "join_items", "to_target", "unit_limits", "units"]


# -- text ------------------------------------------------------------------------------------------
def _box_strings(u: np.ndarray, dialect: str) -> list[str]:
    """One text per box of dialect units ``u`` (N, 4)."""
    rows = u.tolist()
    if dialect == "maira2":
        return [f"<box><x{a}><y{b}><x{c}><y{d}></box>" for a, b, c, d in rows]
    if dialect == "chexagent":
        return [f"<|box|>({a},{b}),({c},{d})<|/box|>" for a, b, c, d in rows]
    if dialect == "radfact":
        return [f'{{"x_min": {a}, "y_min": {b}, "x_max": {c}, "y_max": {d}}}'
                for a, b, c, d in rows]
    return [f"[{a}, {b}, {c}, {d}]" for a, b, c, d in rows]  # pixels, internvl


def _written(xyxy: np.ndarray, p: dict, index, dialect: str) -> list:
    """One text per source box, None for a box MAIRA-2's crop leaves out."""
    texts = _box_strings(units(xyxy, p, index, dialect), dialect)
    if dialect == "maira2":
        for k in np.flatnonzero(crop_status(xyxy, p, index, dialect) == 2).tolist():
            texts[k] = None
    return texts


def _kept(texts: list) -> list | None:
    """An item's box texts without the dropped ones (None: the item has no box left)."""
    kept = [t for t in texts if t is not None]
    return kept or None


def _item_text(phrase: str, boxes: list[str] | None, dialect: str) -> str:
    """One grounded sentence from its phrase and its boxes' texts (None: no box)."""
    if dialect == "maira2":
        return f"<obj>{phrase}{''.join(boxes or ())}</obj>"
    if dialect == "chexagent":
        ref = f"<|ref|>{phrase}<|/ref|>" if phrase else ""
        return ref + ref.join(boxes) if boxes else ref
    if dialect == "internvl":
        ref = f"<ref>{phrase}</ref>" if phrase else ""
        return ref + ("<box>[" + ", ".join(boxes) + "]</box>" if boxes else "")
    if dialect == "qwen2.5":
        label = json.dumps(phrase, ensure_ascii=False)
        if not boxes:
            return f'{{"label": {label}}}'
        return ", ".join(f'{{"bbox_2d": {b}, "label": {label}}}' for b in boxes)
    listed = "null" if boxes is None else "[" + ", ".join(boxes) + "]"
    return f'{{"text": {json.dumps(phrase, ensure_ascii=False)}, "boxes": {listed}}}'


def join_items(items: list[str], dialect: str) -> str:
    """Grounded sentences -> the whole target text."""
    return "".join(items) if dialect in TOKEN_DIALECTS else "[" + ", ".join(items) + "]"


def _boxes_array(boxes) -> np.ndarray | None:
    if boxes is None:
        return None
    try:
        arr = np.asarray(boxes, np.float64).reshape(-1, 4)
    except (TypeError, ValueError):
        raise RadHarmonyError("A box must be four numbers x_min, y_min, x_max, y_max",
                              expected="[x1, y1, x2, y2] or a list of them, in source pixels",
                              found=shorten(repr(boxes), 80),
                              fix="pass each box as four numbers") from None
    if not np.isfinite(arr).all():
        raise RadHarmonyError("A box has a non-finite coordinate", expected="finite pixels",
                              found=shorten(repr(boxes), 80), fix="drop or repair the box")
    return arr


def box_to_text(phrase: str, boxes, frame, dialect: str) -> str:
    """One grounded sentence: ``phrase`` with its ``boxes`` (``[x1, y1, x2, y2]`` or a list of
    them in source pixels; None or ``[]`` for a sentence without a box) in ``dialect``, for
    the image ``frame`` points at.

    >>> box_to_text("Nodule", [100, 50, 200, 150], ImageFrame(400, 300), "chexagent")
    '<|ref|>Nodule<|/ref|><|box|>(25,17),(50,50)<|/box|>'
    """
    return grounded_text([(phrase, boxes)], frame, dialect)


def grounded_text(items, frame, dialect: str) -> str:
    """The whole target text of ``items`` = ``[(phrase, boxes or None), ...]`` (see
    :func:`box_to_text`; ``radfact`` and ``pixels`` write one JSON list).

    >>> grounded_text([("Effusion.", [[60, 150, 150, 300]]), ("No pneumothorax.", None)],
    ...               ImageFrame(400, 300), "maira2")   # the centred 300 crop: x from 50
    '<obj>Effusion.<box><x3><y50><x33><y99></box></obj><obj>No pneumothorax.</obj>'
    """
    return grounded_texts([list(items)], [frame], dialect)[0]


def grounded_texts(records, frames, dialect: str) -> list[str]:
    """:func:`grounded_text` of many records at once (``records[i]`` a list of ``(phrase,
    boxes)`` items for the image ``frames[i]``): the arithmetic runs once over every box."""
    check_dialect(dialect)
    frames = [ImageFrame.coerce(f) for f in frames]
    if len(frames) != len(records):
        raise RadHarmonyError("grounded_texts needs one frame per record",
                              expected=f"{len(records)} frames", found=str(len(frames)),
                              fix="pass the image frame of every record")
    arrays, owner = [], []
    for r, items in enumerate(records):
        for phrase, boxes in items:
            arr = _boxes_array(boxes)
            if arr is not None and len(arr):
                arrays.append(arr)
                owner.append(np.full(len(arr), r))
    xyxy = np.concatenate(arrays) if arrays else np.zeros((0, 4))
    index = np.concatenate(owner) if owner else np.zeros(0, np.int64)
    texts = _written(xyxy, _params(frames), index, dialect)
    out, k = [], 0
    for items in records:
        parts = []
        for phrase, boxes in items:
            n = 0 if boxes is None else len(_boxes_array(boxes))
            parts.append(_item_text(str(phrase), _kept(texts[k:k + n]), dialect))
            k += n
        out.append(join_items(parts, dialect))
    return out


def grounded_texts_flat(phrases, *, xyxy, widths, heights, item_start, record_start,
                        dialect: str, mode: str = "original", size: int | None = None
                        ) -> list[str]:
    """The columnar fast path of :func:`grounded_texts` (one call for a million boxes).

    Args:
        phrases: one phrase per item.
        xyxy: ``(B, 4)`` boxes in source pixels, items' boxes consecutive; an item's boxes are
            ``xyxy[item_start[i]:item_start[i + 1]]`` (equal starts: an item without a box is
            written with none -- ``null`` in the JSON dialects).
        widths, heights: the source image size of every item.
        item_start: ``len(phrases) + 1`` offsets into ``xyxy``.
        record_start: ``R + 1`` offsets into the items: record ``r`` is items
            ``record_start[r]:record_start[r + 1]``.
        mode, size: the pointed-at image (see :class:`ImageFrame`).
    """
    check_dialect(dialect)
    item_start = np.asarray(item_start, np.int64)
    counts = np.diff(item_start)
    p, inverse = _params_sizes(widths, heights, mode, size)
    owner = np.repeat(inverse, counts)
    xyxy = np.asarray(xyxy, np.float64).reshape(-1, 4)
    texts = _written(xyxy, p, owner, dialect)
    starts = item_start.tolist()
    items = [_item_text(ph, _kept(texts[a:b]), dialect)
             for ph, a, b in zip(phrases, starts[:-1], starts[1:])]
    rs = np.asarray(record_start, np.int64).tolist()
    return [join_items(items[a:b], dialect) for a, b in zip(rs[:-1], rs[1:])]
