"""Annotation encodings several datasets share: COCO JSON, COCO compressed RLE, shapes -> masks.

* :func:`read_coco` / :func:`coco_tables` -- a COCO detection file (``images``,
  ``annotations``, ``categories``) checked and split into plain Python tables (TBX11K).
* :func:`coco_rle_decode` / :func:`coco_rle_encode` -- COCO's run-length masks, in the
  *compressed* string form (``{"size": [h, w], "counts": "<ascii>"}``) and the uncompressed
  list form (``"counts": [int, ...]``). Runs alternate background/foreground starting with
  background, over the pixels in column-major order (down each column, then the next
  column). The compressed string packs each count in 5-bit groups, least significant first,
  one group per character (``chr(group + 48)``), bit 6 (0x20) meaning "another group
  follows", bit 5 (0x10) of the last group the sign; from the fourth count on, the string
  holds the difference to the count two places earlier. Written from that description (no
  pycocotools needed; it is not a dependency).
* :func:`polygon_mask`, :func:`ellipse_mask`, :func:`rectangle_mask` -- shapes rasterized to
  uint8 masks (Object-CXR, CheXlocalize contours), and :func:`shape_box` for their bounding box.

Every function is pure; errors name ``where`` (file and entry) in the four-part form.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

from ..errors import MetadataError

_FIX = "re-download the annotation file; do not edit it by hand"


# -- COCO compressed RLE -------------------------------------------------------------------------
def _rle_counts(counts: str, *, where: str) -> list[int]:
    """The run lengths packed in a compressed COCO ``counts`` string."""
    out: list[int] = []
    i, n = 0, len(counts)
    while i < n:
        value, shift, more = 0, 0, True
        while more:
            if i >= n:
                raise MetadataError(f"{where}: compressed RLE ends inside a count",
                                    expected="COCO compressed RLE text",
                                    found=repr(counts[-20:]), fix=_FIX)
            group = ord(counts[i]) - 48
            if not 0 <= group < 64:
                raise MetadataError(f"{where}: compressed RLE holds an invalid character",
                                    expected="characters '0' (48) to 'o' (111)",
                                    found=repr(counts[i]), fix=_FIX)
            value |= (group & 0x1F) << shift
            more = bool(group & 0x20)
            shift += 5
            i += 1
            if not more and group & 0x10:
                value |= -1 << shift
        if len(out) > 2:
            value += out[-2]
        out.append(value)
    return out


def coco_rle_decode(rle: dict, *, where: str = "RLE") -> np.ndarray:
    """A COCO RLE object ``{"size": [h, w], "counts": str | list}`` -> uint8 (h, w) mask."""
    try:
        h, w = (int(v) for v in rle["size"])
        counts = rle["counts"]
    except (KeyError, TypeError, ValueError):
        raise MetadataError(f"{where}: not a COCO RLE object", expected="{'size': [h, w], "
                            "'counts': '...'}", found=repr(rle)[:80], fix=_FIX) from None
    if isinstance(counts, bytes):
        counts = counts.decode("ascii", errors="replace")
    runs = _rle_counts(counts, where=where) if isinstance(counts, str) else \
        [int(c) for c in counts]
    runs_arr = np.asarray(runs, np.int64)
    if (runs_arr < 0).any() or int(runs_arr.sum()) != h * w:
        raise MetadataError(f"{where}: RLE runs do not cover the {h}x{w} mask",
                            expected=f"non-negative runs summing to {h * w}",
                            found=f"{len(runs)} runs summing to {int(runs_arr.sum())}"
                                  f"{', some negative' if (runs_arr < 0).any() else ''}",
                            fix=_FIX)
    values = np.zeros(len(runs), np.uint8)
    values[1::2] = 1
    flat = np.repeat(values, runs_arr)
    return flat.reshape((h, w), order="F")


def coco_rle_encode(mask: np.ndarray, *, compressed: bool = True) -> dict:
    """The inverse of :func:`coco_rle_decode` (fake writers and tests)."""
    mask = np.asarray(mask)
    h, w = mask.shape
    flat = (mask.ravel(order="F") > 0).astype(np.int8)
    change = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate(([0], change, [flat.size]))
    runs = np.diff(bounds).tolist()
    if flat.size and flat[0]:
        runs = [0] + runs
    if not compressed:
        return {"size": [h, w], "counts": runs}
    chars = []
    for i, value in enumerate(runs):
        if i > 2:
            value -= runs[i - 2]
        more = True
        while more:
            group = value & 0x1F
            value >>= 5
            more = value != -1 if group & 0x10 else value != 0
            chars.append(chr((group | (0x20 if more else 0)) + 48))
    return {"size": [h, w], "counts": "".join(chars)}


# -- shapes -> masks -------------------------------------------------------------------------------
def polygon_mask(polygons: Iterable[Sequence], shape: tuple[int, int], *,
                 where: str = "polygon") -> np.ndarray:
    """The union of filled polygons, each a sequence of ``(x, y)`` points (or a flat
    ``[x0, y0, x1, y1, ...]`` list as COCO writes them), in pixels, -> uint8 mask."""
    mask = np.zeros(shape, np.uint8)
    pts = []
    for poly in polygons:
        arr = np.asarray(poly, np.float64)
        if arr.ndim == 1 and arr.size % 2 == 0:
            arr = arr.reshape(-1, 2)
        if arr.ndim != 2 or arr.shape[1] != 2 or len(arr) < 3 or not np.isfinite(arr).all():
            raise MetadataError(f"{where}: not a polygon", expected="3 or more (x, y) points",
                                found=repr(poly)[:80], fix=_FIX)
        pts.append(np.round(arr).astype(np.int32))
    if pts:
        import cv2  # here: the harmonizers import this module without the image stack

        cv2.fillPoly(mask, pts, 1)
    return mask


def rectangle_mask(x_min, y_min, x_max, y_max, shape: tuple[int, int]) -> np.ndarray:
    """A filled axis-aligned rectangle (pixel corners, inclusive of ``x_min``/``y_min``)."""
    mask = np.zeros(shape, np.uint8)
    r0, r1 = max(0, int(math.floor(y_min))), min(shape[0], int(math.ceil(y_max)))
    c0, c1 = max(0, int(math.floor(x_min))), min(shape[1], int(math.ceil(x_max)))
    mask[r0:r1, c0:c1] = 1
    return mask


def ellipse_mask(x_min, y_min, x_max, y_max, shape: tuple[int, int]) -> np.ndarray:
    """A filled axis-aligned ellipse inscribed in the box (pixel centres inside it)."""
    yy, xx = np.ogrid[:shape[0], :shape[1]]
    cx, cy = (x_min + x_max) / 2, (y_min + y_max) / 2
    rx, ry = max((x_max - x_min) / 2, 0.5), max((y_max - y_min) / 2, 0.5)
    return ((((xx + 0.5 - cx) / rx) ** 2 + ((yy + 0.5 - cy) / ry) ** 2) <= 1).astype(np.uint8)


def shape_box(points: Sequence) -> tuple[float, float, float, float]:
    """``(x_min, y_min, x_max, y_max)`` of a point sequence ``[(x, y), ...]``."""
    arr = np.asarray(points, np.float64).reshape(-1, 2)
    return (float(arr[:, 0].min()), float(arr[:, 1].min()), float(arr[:, 0].max()),
            float(arr[:, 1].max()))


# -- COCO detection JSON ---------------------------------------------------------------------------
def coco_tables(coco: dict, *, source: str) -> tuple[list[dict], dict[int, str], dict[int, list]]:
    """``(images, category names by id, annotations by image id)`` from a parsed COCO file.

    ``images`` keeps the file's order (``id``, ``file_name``, ``width``, ``height`` checked);
    every annotation's ``bbox`` is ``[x, y, w, h]`` in pixels and becomes
    ``{"category": name, "x_min", "y_min", "x_max", "y_max", **the annotation}``. An annotation
    whose image or category is not listed raises.
    """
    cats: dict[int, str] = {}
    for i, c in enumerate(coco["categories"]):
        if not isinstance(c, dict) or "id" not in c or not isinstance(c.get("name"), str):
            raise MetadataError(f"{source}: categories[{i}] has no id and name",
                                expected="{'id': int, 'name': str}", found=repr(c)[:80], fix=_FIX)
        cats[c["id"]] = c["name"]
    images, seen = [], set()
    for i, im in enumerate(coco["images"]):
        ok = isinstance(im, dict) and isinstance(im.get("file_name"), str) and "id" in im
        try:
            size = ok and float(im["width"]) > 0 and float(im["height"]) > 0
        except (KeyError, TypeError, ValueError):
            size = False
        if not size:
            raise MetadataError(f"{source}: images[{i}] lacks id, file_name, width or height",
                                expected="{'id', 'file_name', 'width', 'height', ...}",
                                found=repr(im)[:120], fix=_FIX)
        if im["id"] in seen:
            raise MetadataError(f"{source}: images[{i}] repeats image id {im['id']!r}",
                                expected="one entry per image", found=repr(im)[:120], fix=_FIX)
        seen.add(im["id"])
        images.append(im)
    per_image: dict[int, list] = {im["id"]: [] for im in images}
    for i, a in enumerate(coco["annotations"]):
        where = f"{source}: annotations[{i}]"
        try:
            x, y, w, h = (float(v) for v in a["bbox"])
            if not all(map(math.isfinite, (x, y, w, h))):
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise MetadataError(f"{where} has no numeric bbox", expected="bbox [x, y, w, h] "
                                "in pixels", found=repr(a)[:120], fix=_FIX) from None
        if a.get("image_id") not in per_image or a.get("category_id") not in cats:
            raise MetadataError(f"{where} names an unknown image or category",
                                expected=f"image_id among the {len(images)} images, "
                                f"category_id in {sorted(cats)}",
                                found=f"image_id {a.get('image_id')!r}, category_id "
                                      f"{a.get('category_id')!r}", fix=_FIX)
        per_image[a["image_id"]].append({**a, "category": cats[a["category_id"]], "x_min": x,
                                         "y_min": y, "x_max": x + w, "y_max": y + h})
    return images, cats, per_image


__all__ = ["coco_rle_decode", "coco_rle_encode", "coco_tables", "ellipse_mask",
           "polygon_mask", "rectangle_mask", "shape_box"]
