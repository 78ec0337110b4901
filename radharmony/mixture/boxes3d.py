"""3-D boxes as text: the dialects of grounded CT records, written from the source annotation
through the record's own preset geometry and read back by
:func:`radharmony.mixture.box_parse.parse_boxes`.

A source box is the 3-D annotation contract's (``annotations(index)["boxes"]``): ``(x0, y0,
z0, x1, y1, z1)`` in the source volume's canonical voxels (x along W, y along H, z along D;
voxel k's centre at k, so a box covering voxels i..j spans i - 0.5 .. j + 0.5). A
:class:`VolumeFrame` holds what the preset did to that volume (the source's LPS affine, the
output's LPS affine and shape, from :meth:`radharmony.volumes.presets.Preset.geometry` or the
cache's ``info``); a box's eight corners go through it to the output's voxels, where x runs
along the output's last axis, y its middle one, z its first.

Two dialects, one box a token after its phrase::

    box3d     <ref>nodule</ref><box3d>(x0,y0,z0),(x1,y1,z1)</box3d>   bins 0-99 of each axis
    box3d_mm  <ref>nodule</ref><box3d_mm>(x0,y0,z0),(x1,y1,z1)</box3d_mm>   whole mm

``box3d``: each axis of the output cut into :data:`BINS` equal bins; a box's low corner is the
bin holding its low edge, its high corner the bin holding its high edge; read back, the low
edge of the low bin and the high edge of the high bin, so the box read contains the box
written and is at most one bin larger per side. ``box3d_mm``: millimetres from the output's
first voxel's outer corner along its axes (the output's spacing), low edges rounded down, high
ones up (at most 1 mm larger per side). A box partly outside the output (a crop) is clipped to
it and counted (``clipped``); wholly outside, left out and counted (``outside``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..errors import RadHarmonyError
from .box_frame import ParseResult

DIALECTS_3D = ("box3d", "box3d_mm")
#: bins per axis of the ``box3d`` dialect
BINS = 100
_TOKEN = {"box3d": "box3d", "box3d_mm": "box3d_mm"}
_NUM = r"\s*(-?\d+(?:\.\d+)?)\s*"
_POINT = r"\(" + _NUM + "," + _NUM + "," + _NUM + r"\)"
_CORNER = np.array([[(k >> a) & 1 for a in range(3)] for k in range(8)], np.float64)


@dataclass(frozen=True)
class VolumeFrame:
    """What a preset did to one volume: ``source_affine`` (source canonical index (d, h, w)
    -> LPS mm), ``affine`` and ``shape`` (the output's index -> LPS mm, its (D, H, W))."""

    source_affine: tuple
    affine: tuple
    shape: tuple

    @classmethod
    def of(cls, volume, info: dict, shape) -> "VolumeFrame":
        """The frame of ``volume`` (a :class:`~radharmony.volumes.volume.Volume`) under a
        preset whose geometry step gave ``info`` (its ``affine``) and an output ``shape``
        (spatial, in the output's axis order)."""
        src = np.asarray(volume.in_space("LPS").affine, np.float64)
        return cls(tuple(map(tuple, src)), tuple(map(tuple, np.asarray(info["affine"]))),
                   tuple(int(n) for n in shape[-3:]))

    @classmethod
    def coerce(cls, frame) -> "VolumeFrame":
        if isinstance(frame, cls):
            return frame
        try:
            return cls(tuple(map(tuple, frame["source_affine"])),
                       tuple(map(tuple, frame["affine"])), tuple(frame["shape"]))
        except (KeyError, TypeError) as e:
            raise RadHarmonyError("A 3-D box frame cannot be read",
                                  expected="a VolumeFrame or a dict with source_affine, "
                                           "affine and shape", found=repr(frame)[:80],
                                  fix="pass VolumeFrame.of(volume, info, shape)") from e

    def as_dict(self) -> dict:
        return {"source_affine": [list(r) for r in self.source_affine],
                "affine": [list(r) for r in self.affine], "shape": list(self.shape)}

    @property
    def spacing(self) -> np.ndarray:
        """The output's voxel size in mm along its axes (first, middle, last)."""
        return np.linalg.norm(np.asarray(self.affine)[:3, :3], axis=0)

    def _map(self, boxes: np.ndarray, forward: bool) -> np.ndarray:
        """Boxes ``(N, 6)`` (x, y, z order) from source voxels to output voxels (``forward``)
        or back: the bounds of the eight corners' images."""
        boxes = np.asarray(boxes, np.float64).reshape(-1, 6)
        m = np.linalg.inv(np.asarray(self.affine)) @ np.asarray(self.source_affine)
        if not forward:
            m = np.linalg.inv(m)
        lo, hi = boxes[:, :3], boxes[:, 3:]
        corners = lo[:, None, :] + _CORNER[None] * (hi - lo)[:, None, :]   # (N, 8, xyz)
        index = corners[..., ::-1]                                           # (d, h, w)
        out = index @ m[:3, :3].T + m[:3, 3]
        xyz = out[..., ::-1]
        return np.concatenate([xyz.min(axis=1), xyz.max(axis=1)], axis=1)

    def to_output(self, boxes) -> np.ndarray:
        """Source-voxel boxes in the output's voxels (x, y, z edges)."""
        return self._map(boxes, True)

    def to_source(self, boxes) -> np.ndarray:
        """Output-voxel boxes back in the source's voxels."""
        return self._map(boxes, False)

    def _extent(self) -> np.ndarray:
        """The output's size per (x, y, z)."""
        return np.asarray(self.shape[::-1], np.float64)


def _check(dialect: str) -> str:
    if dialect not in DIALECTS_3D:
        raise RadHarmonyError(f"Unknown 3-D box dialect {dialect!r}",
                              expected=" or ".join(DIALECTS_3D), found=repr(dialect),
                              fix="pick one of those")
    return dialect


def box3d_units(boxes, frame, dialect: str) -> tuple[np.ndarray, dict]:
    """``(units (M, 6) int64, counts)``: the source boxes as the dialect's integers (bins or
    mm), clipped to the output; ``counts`` = ``{"clipped": n, "outside": n}`` and ``kept``
    (the boxes written, (N,) bool)."""
    frame = VolumeFrame.coerce(frame)
    out = frame.to_output(boxes) + 0.5          # edges from the output's outer corner
    n = frame._extent()
    inside = (out[:, 3:] > 0).all(1) & (out[:, :3] < n).all(1)
    clipped = np.concatenate([np.clip(out[:, :3], 0, n), np.clip(out[:, 3:], 0, n)], 1)
    changed = inside & (clipped != out).any(1)
    q = clipped[inside]
    if _check(dialect) == "box3d":
        lo = np.floor(q[:, :3] / n * BINS)
        hi = np.ceil(q[:, 3:] / n * BINS) - 1
        u = np.clip(np.concatenate([lo, np.maximum(hi, lo)], 1), 0, BINS - 1)
    else:
        mm = frame.spacing[::-1]
        u = np.concatenate([np.floor(q[:, :3] * mm), np.ceil(q[:, 3:] * mm)], 1)
    return u.astype(np.int64), {"clipped": int(changed.sum()), "outside": int((~inside).sum()),
                                "kept": inside}


def from_units(u, frame, dialect: str) -> np.ndarray:
    """The dialect's integers back to source-voxel boxes ``(N, 6)``."""
    frame = VolumeFrame.coerce(frame)
    u = np.asarray(u, np.float64).reshape(-1, 6)
    n = frame._extent()
    if _check(dialect) == "box3d":
        edges = np.concatenate([u[:, :3] / BINS * n, (u[:, 3:] + 1) / BINS * n], 1)
    else:
        mm = np.tile(frame.spacing[::-1], 2)
        edges = u / mm
    return frame.to_source(edges - 0.5)


def unit_limit(frame, dialect: str) -> np.ndarray:
    """The largest integer of each corner coordinate (x, y, z, x, y, z)."""
    frame = VolumeFrame.coerce(frame)
    if _check(dialect) == "box3d":
        return np.full(6, BINS - 1, np.float64)
    return np.tile(np.ceil(frame._extent() * frame.spacing[::-1]), 2)


def box3d_text(phrase: str, boxes, frame, dialect: str) -> tuple[str, dict]:
    """``(text, counts)``: ``phrase`` with its source boxes in ``dialect`` (see the module);
    a phrase whose boxes all fall outside is written without a box."""
    u, counts = box3d_units(boxes, frame, dialect)
    tok = _TOKEN[dialect]
    parts = "".join(f"<{tok}>({a},{b},{c}),({d},{e},{f})</{tok}>" for a, b, c, d, e, f in
                    u.tolist())
    return f"<ref>{phrase}</ref>{parts}", counts


def parse_boxes3d(text: str, frame, dialect: str):
    """The phrases and boxes (source voxels, ``(k, 6)``) of one output in ``dialect``: a
    :class:`~radharmony.mixture.box_frame.ParseResult`. A token that is not two points of
    three whole numbers, a value past :func:`unit_limit`, negative, or reversed corners is
    counted in ``malformed`` and left out."""
    tok = re.escape(_TOKEN[_check(dialect)])
    pattern = re.compile(r"<ref>(.*?)</ref>|<" + tok + r">(.*?)</" + tok + ">", re.S)
    point = re.compile(_POINT)
    limit = unit_limit(frame, dialect)
    items, malformed, phrase, boxes = [], 0, None, None
    for m in pattern.finditer(text if isinstance(text, str) else ""):
        if m.group(1) is not None:
            if phrase is not None:
                items.append((phrase, boxes))
            phrase, boxes = m.group(1).strip(), None
            continue
        pts = point.findall(m.group(2))
        v = np.array([float(x) for p in pts for x in p]) if len(pts) == 2 and \
            not point.sub("", m.group(2)).replace(",", "").strip() else None
        if v is None or (v != np.round(v)).any() or (v < 0).any() or (v > limit).any() or \
                (v[:3] > v[3:]).any():
            malformed += 1
            continue
        boxes = (boxes or []) + [v]
        if phrase is None:
            phrase = ""
    if phrase is not None:
        items.append((phrase, boxes))
    out = [(p, None if b is None else from_units(np.array(b), frame, dialect))
           for p, b in items]
    usable = sum(b is not None for _, b in out) + sum(b is None for _, b in out)
    return ParseResult(out, malformed, not (malformed and not usable))


def mask_boxes(labels: np.ndarray, names: dict) -> tuple[np.ndarray, list]:
    """A label map on the source canonical grid (``source_mask``) summarised as boxes: per
    label value of ``names`` present, the box of its voxels in the contract's coordinates
    (x, y, z edges: voxels i..j span i - 0.5 .. j + 0.5); ``(boxes (N, 6), labels)`` in the
    order of ``names``.

    >>> m = np.zeros((4, 5, 6), np.uint8); m[1:3, 2, 3:5] = 7
    >>> b, n = mask_boxes(m, {7: "liver", 8: "spleen"})
    >>> b.tolist(), n
    ([[2.5, 1.5, 0.5, 4.5, 2.5, 2.5]], ['liver'])
    """
    out, got = [], []
    for value, name in names.items():
        where = np.nonzero(labels == value)
        if not len(where[0]):
            continue
        lo = [float(w.min()) - 0.5 for w in where[::-1]]
        hi = [float(w.max()) + 0.5 for w in where[::-1]]
        out.append(lo + hi)
        got.append(name)
    return np.array(out, np.float64).reshape(-1, 6), got


__all__ = ["BINS", "DIALECTS_3D", "VolumeFrame", "box3d_text", "box3d_units", "from_units",
           "mask_boxes", "parse_boxes3d", "unit_limit"]
