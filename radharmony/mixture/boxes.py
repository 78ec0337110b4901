"""Boxes as text: a box in the source image's pixels -> the text a grounded record's target holds,
in one of four dialects, for the image the record points at (``docs/mixture_grounding.md``).

The image a record points at (:class:`ImageFrame`) is either the **original** file (``W x H``)
or the **cached** letterboxed square of side ``S`` that radharmony's pipeline writes: the same
:class:`~radharmony.imaging.geometry.Letterbox` (long side scaled to ``S``, content centred,
padding on the short axis) maps a source box to the cached image, exactly as the dataset's
``bbox`` output does. A box is written in the pointed-at image's coordinates:

* ``maira2`` -- MAIRA-2's processor: the image padded to a square of side ``max(w, h)`` with the
  content at the top left, each corner quantised to 100 bins per axis on that square
  (``bin = floor(100 p / side)``, 0..99; read back at the bin centre ``(bin + 0.5) / 100``).
  A sentence is ``<obj>phrase<box><x12><y30><x40><y66></box>...</obj>``, no box for a
  negative sentence; sentences follow each other with nothing between them.
* ``chexagent`` -- CheXinstruct: ``<|ref|>phrase<|/ref|><|box|>(x1,y1),(x2,y2)<|/box|>`` per
  box, corners as integers 0..100 of the image's width and height (rounded to nearest). A
  phrase without a box is ``<|ref|>phrase<|/ref|>``; an empty phrase writes the boxes alone.
* ``radfact`` -- RadFact's grounded report: JSON ``[{"text": ..., "boxes": [{"x_min", "y_min",
  "x_max", "y_max"}] or null}]``, fractions of width and height, 4 decimals.
* ``pixels`` -- the same JSON with each box ``[x1, y1, x2, y2]`` in integer pixels of the
  pointed-at image.

One *bin* (the round-trip tolerance, :meth:`ImageFrame.bin_size`) is 1/100 of the square's side
(``maira2``), 1/100 of the side (``chexagent``), 1/10,000 of the side (``radfact``) and one
pixel (``pixels``) of the pointed-at image. Corners outside the image are clipped to it (to the
content for the cached image, as :meth:`Letterbox.boxes` does). The reverse is
:mod:`radharmony.mixture.box_parse`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import RadHarmonyError, check_choice, shorten
from ..imaging.geometry import Letterbox

DIALECTS = ("maira2", "chexagent", "radfact", "pixels")
IMAGE_MODES = ("original", "cache")
#: MAIRA-2's ``num_box_coord_bins`` and CheXagent's 0-100 scale
BINS = 100
#: decimals of a RadFact fraction
RADFACT_DECIMALS = 4
RADFACT_KEYS = ("x_min", "y_min", "x_max", "y_max")


@dataclass(frozen=True)
class ImageFrame:
    """The image a record points at: the original ``width`` x ``height`` file
    (``mode="original"``) or its cached letterboxed square of side ``size`` (``mode="cache"``).

    >>> ImageFrame(300, 200, mode="cache", size=224).to_target([[0, 0, 300, 200]]).tolist()
    [[0.0, 37.0, 224.0, 186.0]]
    """

    width: int
    height: int
    mode: str = "original"
    size: int | None = None

    def __post_init__(self):
        for name in ("width", "height"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise RadHarmonyError(f"ImageFrame {name} must be a positive integer",
                                      expected="the source image's size in pixels, e.g. 2048",
                                      found=shorten(repr(v), 60),
                                      fix="read it from the image header or the table's "
                                          "width/height columns")
            object.__setattr__(self, name, int(v))
        check_choice("mode", self.mode, IMAGE_MODES, what="ImageFrame mode")
        if self.mode == "cache":
            ok = isinstance(self.size, (int, np.integer)) and not isinstance(self.size, bool)
            if not ok or self.size < 1:
                raise RadHarmonyError("ImageFrame mode 'cache' needs the cached image's size",
                                      expected="size=224 (the cache's side in pixels)",
                                      found=f"size={self.size!r}", fix="pass size=224")
            object.__setattr__(self, "size", int(self.size))
        elif self.size is not None:
            raise RadHarmonyError("ImageFrame mode 'original' takes no size",
                                  expected="size=None", found=f"size={self.size!r}",
                                  fix="pass mode='cache' with the size, or drop size")

    @classmethod
    def coerce(cls, value) -> "ImageFrame":
        """An :class:`ImageFrame`, or one from a ``{"width", "height", "mode", "size"}`` dict
        (the ``frame`` of a record's ``fields``)."""
        if isinstance(value, cls):
            return value
        if isinstance(value, dict) and {"width", "height"} <= set(value):
            return cls(value["width"], value["height"], value.get("mode", "original"),
                       value.get("size"))
        raise RadHarmonyError("Cannot read an image frame", expected="an ImageFrame or a dict "
                              "{'width', 'height', 'mode', 'size'}",
                              found=shorten(repr(value), 80),
                              fix="pass ImageFrame(width, height, mode=..., size=...)")

    def as_dict(self) -> dict:
        """``{"width", "height", "mode", "size"}`` (what a record's ``fields`` stores)."""
        return {"width": self.width, "height": self.height, "mode": self.mode,
                "size": self.size}

    @property
    def letterbox(self) -> Letterbox | None:
        """The pipeline's letterbox onto the cached square (None for the original image)."""
        return _fit(self.height, self.width, self.size) if self.mode == "cache" else None

    @property
    def target_size(self) -> tuple[int, int]:
        """``(width, height)`` of the pointed-at image."""
        return (self.size, self.size) if self.mode == "cache" else (self.width, self.height)

    def to_target(self, xyxy) -> np.ndarray:
        """Source-pixel boxes ``(N, 4)`` -> pixels of the pointed-at image (clipped)."""
        return to_target(np.asarray(xyxy, np.float64).reshape(-1, 4), _params([self]), 0)

    def from_target(self, xyxy) -> np.ndarray:
        """Pixels of the pointed-at image ``(N, 4)`` -> source pixels (clipped to the image)."""
        return from_target(np.asarray(xyxy, np.float64).reshape(-1, 4), _params([self]), 0)

    def bin_size(self, dialect: str) -> tuple[float, float]:
        """One bin of ``dialect`` along x and y, in *source* pixels (the round-trip bound)."""
        p = _params([self])
        tx, ty = _unit(check_dialect(dialect), p)
        step = 10.0 ** -RADFACT_DECIMALS if dialect == "radfact" else 1.0
        return float(step * tx[0] / p["sx"][0]), float(step * ty[0] / p["sy"][0])


def check_dialect(dialect: str) -> str:
    """``dialect`` when it is one of :data:`DIALECTS`, else a four-part error."""
    return check_choice("dialect", dialect, DIALECTS, what="The boxes dialect")


@lru_cache(maxsize=65536)
def _fit(h: int, w: int, size: int) -> Letterbox:
    return Letterbox.fit(h, w, size)


_NAMES = ("sx", "sy", "ox", "oy", "cw", "ch", "tw", "th", "w", "h")


def _row(w: int, h: int, mode: str, size) -> tuple:
    if mode == "cache":
        lb = _fit(h, w, size)
        return (lb.new_w / lb.src_w, lb.new_h / lb.src_h, lb.left, lb.top, lb.new_w, lb.new_h,
                size, size, w, h)
    return (1.0, 1.0, 0, 0, w, h, w, h, w, h)


def _params(frames) -> dict[str, np.ndarray]:
    """Per frame: scale and offset source -> pointed-at pixels, content and target sizes.

    The cached frame's numbers are its :class:`Letterbox`'s (``new_w / src_w``, ``left``, ...),
    computed once per distinct ``(width, height, size)``.
    """
    seen: dict = {}
    keys = [(f.width, f.height, f.mode, f.size) for f in frames]
    for k in keys:
        if k not in seen:
            seen[k] = len(seen)
    table = np.array([_row(*k) for k in seen], np.float64).reshape(-1, len(_NAMES))
    index = np.fromiter(map(seen.__getitem__, keys), np.int64, len(keys))
    return {k: table[index, i] for i, k in enumerate(_NAMES)}


def _params_sizes(widths, heights, mode: str, size) -> tuple[dict, np.ndarray]:
    """:func:`_params` of the distinct sizes among ``widths``/``heights`` (validated once
    each) and every element's row in it."""
    w, h = np.asarray(widths, np.int64), np.asarray(heights, np.int64)
    pairs, inverse = np.unique(w * (1 << 32) + h, return_inverse=True)
    # checks mode, size and the smallest width and height (raises the frame's own errors)
    ImageFrame(int(w.min()) if len(w) else 1, int(h.min()) if len(h) else 1, mode, size)
    table = np.array([_row(int(k >> 32), int(k & 0xFFFFFFFF), mode, size) for k in pairs],
                     np.float64).reshape(-1, len(_NAMES))
    return {k: table[:, i] for i, k in enumerate(_NAMES)}, inverse.reshape(-1)


def _take(p: dict, index) -> tuple[np.ndarray, ...]:
    return tuple(p[k][index] for k in ("sx", "sy", "ox", "oy", "cw", "ch", "tw", "th", "w", "h"))


def to_target(xyxy: np.ndarray, p: dict, index) -> np.ndarray:
    """Source boxes -> pointed-at pixels for frames ``p`` (box ``i`` uses frame ``index[i]``):
    scale, clip to the content, offset -- :meth:`Letterbox.boxes`' steps."""
    sx, sy, ox, oy, cw, ch, *_ = _take(p, index)
    out = np.empty_like(xyxy)
    for j, (s, o, c) in enumerate(((sx, ox, cw), (sy, oy, ch), (sx, ox, cw), (sy, oy, ch))):
        out[:, j] = np.clip(xyxy[:, j] * s, 0, c) + o
    return out


def from_target(xyxy: np.ndarray, p: dict, index) -> np.ndarray:
    """Pointed-at pixels -> source boxes, clipped to the source image."""
    sx, sy, ox, oy, _, _, _, _, w, h = _take(p, index)
    out = np.empty_like(xyxy)
    for j, (s, o, m) in enumerate(((sx, ox, w), (sy, oy, h), (sx, ox, w), (sy, oy, h))):
        out[:, j] = np.clip((xyxy[:, j] - o) / s, 0, m)
    return out


def _unit(dialect: str, p: dict, index=slice(None)) -> tuple[np.ndarray, np.ndarray]:
    """Pointed-at pixels per dialect unit (x, y)."""
    tw, th = p["tw"][index], p["th"][index]
    if dialect == "maira2":
        side = np.maximum(tw, th) / BINS
        return side, side
    if dialect == "chexagent":
        return tw / BINS, th / BINS
    if dialect == "radfact":
        return tw, th
    return np.ones_like(tw), np.ones_like(th)


def units(xyxy: np.ndarray, p: dict, index, dialect: str) -> np.ndarray:
    """Source boxes ``(N, 4)`` -> dialect units (int64 bins/pixels, or float fractions)."""
    t = to_target(xyxy, p, index)
    ux, uy = _unit(dialect, p, index)
    q = t / np.stack([ux, uy, ux, uy], axis=1)
    if dialect == "maira2":
        return np.clip(np.floor(q), 0, BINS - 1).astype(np.int64)
    if dialect == "chexagent":
        return np.clip(np.rint(q), 0, BINS).astype(np.int64)
    if dialect == "radfact":
        return np.clip(np.round(q, RADFACT_DECIMALS), 0.0, 1.0)
    hi = np.stack([p["tw"][index], p["th"][index]] * 2, axis=1)
    return np.clip(np.rint(q), 0, hi).astype(np.int64)


def from_units(u: np.ndarray, p: dict, index, dialect: str) -> np.ndarray:
    """Dialect units ``(N, 4)`` -> source pixels (MAIRA-2 bins read at their centres)."""
    ux, uy = _unit(dialect, p, index)
    u = np.asarray(u, np.float64) + (0.5 if dialect == "maira2" else 0.0)
    return from_target(u * np.stack([ux, uy, ux, uy], axis=1), p, index)


def unit_limits(p: dict, index, dialect: str) -> np.ndarray:
    """The largest valid value per coordinate ``(N, 4)`` (a parsed value above is malformed)."""
    n = len(p["tw"][index])
    if dialect in ("maira2", "chexagent"):
        return np.full((n, 4), BINS - 1 if dialect == "maira2" else BINS, np.float64)
    if dialect == "radfact":
        return np.ones((n, 4))
    return np.stack([p["tw"][index], p["th"][index]] * 2, axis=1)


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
    return [f"[{a}, {b}, {c}, {d}]" for a, b, c, d in rows]


def _item_text(phrase: str, boxes: list[str] | None, dialect: str) -> str:
    """One grounded sentence from its phrase and its boxes' texts (None: no box)."""
    if dialect == "maira2":
        return f"<obj>{phrase}{''.join(boxes or ())}</obj>"
    if dialect == "chexagent":
        ref = f"<|ref|>{phrase}<|/ref|>" if phrase else ""
        return ref + ref.join(boxes) if boxes else ref
    listed = "null" if boxes is None else "[" + ", ".join(boxes) + "]"
    return f'{{"text": {json.dumps(phrase, ensure_ascii=False)}, "boxes": {listed}}}'


def join_items(items: list[str], dialect: str) -> str:
    """Grounded sentences -> the whole target text."""
    return "".join(items) if dialect in ("maira2", "chexagent") else "[" + ", ".join(items) + "]"


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

    >>> grounded_text([("Effusion.", [[0, 150, 100, 300]]), ("No pneumothorax.", None)],
    ...               ImageFrame(400, 300), "maira2")
    '<obj>Effusion.<box><x0><y37><x25><y75></box></obj><obj>No pneumothorax.</obj>'
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
    texts = _box_strings(units(xyxy, _params(frames), index, dialect), dialect)
    out, k = [], 0
    for items in records:
        parts = []
        for phrase, boxes in items:
            n = 0 if boxes is None else len(_boxes_array(boxes))
            parts.append(_item_text(str(phrase), texts[k:k + n] if n else None, dialect))
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
    texts = _box_strings(units(xyxy, p, owner, dialect), dialect)
    starts = item_start.tolist()
    items = [_item_text(ph, texts[a:b] if b > a else None, dialect)
             for ph, a, b in zip(phrases, starts[:-1], starts[1:])]
    rs = np.asarray(record_start, np.int64).tolist()
    return [join_items(items[a:b], dialect) for a, b in zip(rs[:-1], rs[1:])]
