"""The frames boxes are written in: an image a record points at (:class:`ImageFrame`: the original
file, or the cached letterboxed square) and each dialect's units on it -- the arithmetic
source pixels <-> pointed-at pixels <-> dialect units (bins, fractions, pixels) that
:mod:`radharmony.mixture.boxes` writes as text and :mod:`radharmony.mixture.box_parse` reads
back (see :mod:`radharmony.mixture.boxes` for each dialect's frame, MAIRA-2's centred crop
among them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import RadHarmonyError, check_choice, shorten
from ..imaging.geometry import Letterbox

DIALECTS = ("maira2", "chexagent", "radfact", "pixels", "internvl", "qwen2.5")
#: the dialects written as tokens in the text (the others: one JSON list)
TOKEN_DIALECTS = ("maira2", "chexagent", "internvl")
IMAGE_MODES = ("original", "cache")
#: MAIRA-2's ``num_box_coord_bins`` and CheXagent's 0-100 scale
BINS = 100
#: InternVL's 0-1000 scale of width and height
PER_MILLE = 1000
#: Qwen2.5-VL's processor: sides multiples of 28 (patch 14 x merge 2), 3,136 to 12,845,056
#: pixels (its preprocessor_config.json)
QWEN_FACTOR, QWEN_MIN_PIXELS, QWEN_MAX_PIXELS = 28, 4 * 28 * 28, 16384 * 28 * 28
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

    def in_frame(self, xyxy, dialect: str) -> tuple[np.ndarray, np.ndarray]:
        """Source-pixel boxes ``(N, 4)`` as ``dialect`` can place them on this image, and
        which of them it can place at all: MAIRA-2's boxes clipped to its centred crop (in
        source pixels) and False for a box wholly outside it; the other dialects' boxes
        unchanged, all True.

        >>> boxes, kept = ImageFrame(400, 300).in_frame([[0, 0, 40, 300], [10, 10, 100, 100],
        ...                                              [100, 0, 300, 300]], "maira2")
        >>> boxes.tolist(), kept.tolist()
        ([[0.0, 0.0, 40.0, 300.0], [50.0, 10.0, 100.0, 100.0], [100.0, 0.0, 300.0, 300.0]], \
[False, True, True])
        """
        xyxy = np.asarray(xyxy, np.float64).reshape(-1, 4)
        if check_dialect(dialect) != "maira2":
            return xyxy, np.ones(len(xyxy), bool)
        p = _params([self] * len(xyxy))
        q = _scaled(xyxy, p, slice(None), dialect)  # bins on the crop, unclipped
        status = _crop_status(q)
        ux, uy = _unit(dialect, p)
        clipped = from_target(np.clip(q, 0, BINS) * np.stack([ux, uy, ux, uy], axis=1)
                              + _origin(dialect, p), p, slice(None))
        return np.where((status == 1)[:, None], clipped, xyxy), status != 2

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


def qwen_size(width, height) -> tuple[np.ndarray, np.ndarray]:
    """``(width, height)`` of images as Qwen2.5-VL's processor resizes them (its
    ``smart_resize``: each side rounded to a multiple of 28, the area then brought within its
    pixel bounds by one scale, aspect kept).

    >>> [v.tolist() for v in qwen_size([2048, 400], [2500, 300])]
    [[2044, 392], [2492, 308]]
    """
    w, h = np.asarray(width, np.float64), np.asarray(height, np.float64)
    f = QWEN_FACTOR
    rw, rh = np.maximum(f, np.round(w / f) * f), np.maximum(f, np.round(h / f) * f)
    big, small = rw * rh > QWEN_MAX_PIXELS, rw * rh < QWEN_MIN_PIXELS
    beta = np.sqrt(w * h / QWEN_MAX_PIXELS)
    rw = np.where(big, np.floor(w / beta / f) * f, rw)
    rh = np.where(big, np.floor(h / beta / f) * f, rh)
    beta = np.sqrt(QWEN_MIN_PIXELS / (w * h))
    rw = np.where(small, np.ceil(w * beta / f) * f, rw)
    rh = np.where(small, np.ceil(h * beta / f) * f, rh)
    return rw.astype(np.int64), rh.astype(np.int64)


def _unit(dialect: str, p: dict, index=slice(None)) -> tuple[np.ndarray, np.ndarray]:
    """Pointed-at pixels per dialect unit (x, y)."""
    tw, th = p["tw"][index], p["th"][index]
    if dialect == "qwen2.5":
        rw, rh = qwen_size(tw, th)
        return tw / rw, th / rh
    if dialect == "maira2":
        side = np.minimum(tw, th) / BINS
        return side, side
    if dialect == "chexagent":
        return tw / BINS, th / BINS
    if dialect == "internvl":
        return tw / PER_MILLE, th / PER_MILLE
    if dialect == "radfact":
        return tw, th
    return np.ones_like(tw), np.ones_like(th)


def _origin(dialect: str, p: dict, index=slice(None)) -> np.ndarray:
    """``(N, 4)`` pointed-at pixels of the dialect's origin per coordinate: MAIRA-2's centred
    crop's top-left corner (``(w - m) // 2``, ``(h - m) // 2``), else 0."""
    tw, th = p["tw"][index], p["th"][index]
    if dialect != "maira2":
        return np.zeros((len(tw), 4))
    m = np.minimum(tw, th)
    ox, oy = (tw - m) // 2, (th - m) // 2
    return np.stack([ox, oy, ox, oy], axis=1)


def _scaled(xyxy: np.ndarray, p: dict, index, dialect: str) -> np.ndarray:
    """Source boxes -> dialect units before rounding (MAIRA-2: bins on its crop, unclipped)."""
    t = to_target(xyxy, p, index)
    ux, uy = _unit(dialect, p, index)
    return (t - _origin(dialect, p, index)) / np.stack([ux, uy, ux, uy], axis=1)


def _crop_status(q: np.ndarray) -> np.ndarray:
    """Per box of MAIRA-2 bins ``q`` (unclipped): 0 inside the crop, 1 reaching past it
    (clipped), 2 wholly outside it (dropped: no overlap of positive extent)."""
    lo, hi = np.maximum(q[:, :2], 0), np.minimum(q[:, 2:], BINS)
    extent = hi - lo
    size = q[:, 2:] - q[:, :2]
    out = ((extent < 0) | ((extent == 0) & (size > 0))).any(axis=1)
    past = ((q < 0) | (q > BINS)).any(axis=1)
    return np.where(out, 2, np.where(past, 1, 0)).astype(np.int8)


def units(xyxy: np.ndarray, p: dict, index, dialect: str) -> np.ndarray:
    """Source boxes ``(N, 4)`` -> dialect units (int64 bins/pixels, or float fractions)."""
    q = _scaled(xyxy, p, index, dialect)
    if dialect == "maira2":
        return np.clip(np.floor(q), 0, BINS - 1).astype(np.int64)
    if dialect in ("chexagent", "internvl"):
        return np.clip(np.rint(q), 0, BINS if dialect == "chexagent" else PER_MILLE).astype(
            np.int64)
    if dialect == "radfact":
        return np.clip(np.round(q, RADFACT_DECIMALS), 0.0, 1.0)
    hi = _pixel_limits(p, index, dialect)
    return np.clip(np.rint(q), 0, hi).astype(np.int64)


def _pixel_limits(p: dict, index, dialect: str) -> np.ndarray:
    """``(N, 4)`` the width and height of the image a pixel dialect counts in (Qwen2.5-VL:
    as its processor resizes it)."""
    tw, th = p["tw"][index], p["th"][index]
    if dialect == "qwen2.5":
        tw, th = qwen_size(tw, th)
    return np.stack([tw, th] * 2, axis=1)


def crop_status(xyxy: np.ndarray, p: dict, index, dialect: str) -> np.ndarray:
    """Per source box: 0 written as is, 1 clipped to MAIRA-2's crop, 2 dropped (always 0 in
    the other dialects, whose frame is the whole pointed-at image)."""
    if dialect != "maira2":
        return np.zeros(len(xyxy), np.int8)
    return _crop_status(_scaled(xyxy, p, index, dialect))


def crop_counts(xyxy, widths, heights, *, dialect: str, mode: str = "original",
                size: int | None = None) -> dict:
    """``{"clipped": n, "dropped": m}``: how many source boxes (``(N, 4)``, box ``i`` on an
    image of ``widths[i]`` x ``heights[i]``) MAIRA-2's centred crop cuts or leaves out in
    ``dialect`` for the pointed-at image (``mode``, ``size``); zeros in other dialects.

    >>> crop_counts([[0, 0, 40, 300], [10, 10, 100, 100], [100, 0, 300, 300]], [400] * 3,
    ...             [300] * 3, dialect="maira2")
    {'clipped': 1, 'dropped': 1}
    """
    xyxy = np.asarray(xyxy, np.float64).reshape(-1, 4)
    if dialect != "maira2" or not len(xyxy):
        return {"clipped": 0, "dropped": 0}
    p, inverse = _params_sizes(widths, heights, mode, size)
    status = crop_status(xyxy, p, inverse, check_dialect(dialect))
    return {"clipped": int((status == 1).sum()), "dropped": int((status == 2).sum())}


def from_units(u: np.ndarray, p: dict, index, dialect: str) -> np.ndarray:
    """Dialect units ``(N, 4)`` -> source pixels (MAIRA-2 bins read at their centres)."""
    ux, uy = _unit(dialect, p, index)
    u = np.asarray(u, np.float64) + (0.5 if dialect == "maira2" else 0.0)
    return from_target(u * np.stack([ux, uy, ux, uy], axis=1) + _origin(dialect, p, index),
                       p, index)


def unit_limits(p: dict, index, dialect: str) -> np.ndarray:
    """The largest valid value per coordinate ``(N, 4)`` (a parsed value above is malformed)."""
    n = len(p["tw"][index])
    if dialect in ("maira2", "chexagent", "internvl"):
        top = {"maira2": BINS - 1, "chexagent": BINS, "internvl": PER_MILLE}[dialect]
        return np.full((n, 4), top, np.float64)
    if dialect == "radfact":
        return np.ones((n, 4))
    return _pixel_limits(p, index, dialect)


@dataclass
class ParseResult:
    """What one output holds: ``items`` = ``[(phrase, boxes (k, 4) float64 in source pixels, or
    None for a sentence without a box), ...]`` in text order; ``malformed`` boxes counted and
    left out; ``ok`` False when the output could not be read at all."""

    items: list
    malformed: int = 0
    ok: bool = True

    @property
    def boxes(self) -> np.ndarray:
        """Every box of every item, ``(N, 4)``."""
        arrs = [b for _, b in self.items if b is not None]
        return np.concatenate(arrs) if arrs else np.zeros((0, 4))
