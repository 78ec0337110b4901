"""How the mixture viewer shows a record: the export format's rendering of it, its images as
the trainer sees them (the original, or the cached letterboxed square), and its boxes.

Two parts of the mixture wing are read lazily and replaced by a small built-in fallback while
they are absent: :mod:`radharmony.mixture.formats` (the trainer renderings) and
:func:`radharmony.mixture.boxes.parse_boxes` (boxes parsed back from a target's text).
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import PathSafetyError, RadHarmonyError
from .app import NotFound, ViewerError

#: the export formats the page offers: name -> title
FORMATS = {"llava": "LLaVA conversation", "hf_chat": "HF chat messages"}
IMAGE_TOKEN = "<image>\n"


class OutsideSources(ViewerError):
    """A record's image path that resolves outside its source's root."""

    status = 403


def render(record: dict, fmt: str) -> object:
    """``record`` as the export format ``fmt`` renders it (the LLaVA conversation, or the HF
    chat ``messages``): through :mod:`radharmony.mixture.formats` where it exists, else the
    built-in rendering below."""
    if fmt not in FORMATS:
        raise ViewerError(f"Unknown export format {fmt!r}", expected=f"one of {list(FORMATS)}",
                          found=repr(fmt), fix="pick a format the page lists")
    try:
        from ..mixture import formats  # written in parallel; wired by the integrator
        rendered = formats.render_record(record, fmt)
    except (ImportError, AttributeError):
        rendered = _fallback_render(record, fmt)
    return rendered


def _fallback_render(record: dict, fmt: str) -> object:
    images = list(record.get("image_paths") or [])
    prompt, target = record.get("prompt") or "", record.get("target") or ""
    if fmt == "llava":
        return [{"from": "human", "value": IMAGE_TOKEN * len(images) + prompt},
                {"from": "gpt", "value": target}]
    return [{"role": "user", "content": [{"type": "image"} for _ in images] +
             [{"type": "text", "text": prompt}]},
            {"role": "assistant", "content": [{"type": "text", "text": target}]}]


def _boxes_from_target(record: dict, shown: "Shown", dialect: str | None) -> list[dict]:
    """Boxes ``{"phrase", "box": [x1, y1, x2, y2]}`` parsed back from the record's target
    text, in the original image's pixels.

    Through :func:`radharmony.mixture.boxes.parse_boxes` ``(text, frame, dialect)`` where it
    exists (``frame``: :meth:`Shown.frame`, the image the record points at); else the
    ``pixels`` dialect: the target is a JSON list of ``{"phrase", "box"}`` in the pixels of
    the image the record points at (the original, or the cached square), mapped back here.
    """
    text = record.get("target") or ""
    try:
        from ..mixture.boxes import parse_boxes  # written in parallel; wired by the integrator
    except ImportError:
        parse_boxes = None
    if parse_boxes is not None and dialect and dialect != "pixels":
        return [{"phrase": str(b.get("phrase", "")), "box": [float(v) for v in b["box"]]}
                for b in parse_boxes(text, shown.frame(), dialect)]
    try:
        found = json.loads(text)
    except ValueError:
        return []
    out = []
    for b in found if isinstance(found, list) else []:
        try:
            xyxy = [float(v) for v in b["box"]]
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
        if len(xyxy) == 4:
            out.append({"phrase": str(b.get("phrase", "")),
                        "box": shown.to_source(np.array([xyxy]))[0].tolist()})
    return out


def boxes_of(record: dict, fields: dict, shown: "Shown", *, dialect: str | None) -> list[dict]:
    """Every box to draw on the record's first image, in the displayed PNG's pixels:
    ``fields["boxes"]`` (source pixels) as ``kind="fields"`` and the boxes parsed back from
    the target as ``kind="target"``, both through the image's own geometry."""
    out = []
    for b in fields.get("boxes") or []:
        try:
            xyxy = [float(v) for v in b["box"]]
        except (KeyError, TypeError, ValueError):
            continue
        if len(xyxy) == 4:
            out.append({"kind": "fields", "label": str(b.get("phrase") or b.get("finding") or ""),
                        "box": shown.boxes(np.array([xyxy]))[0].tolist()})
    for b in _boxes_from_target(record, shown, dialect):
        out.append({"kind": "target", "label": b["phrase"],
                    "box": shown.boxes(np.array([b["box"]]))[0].tolist()})
    return out


class Shown:
    """The displayed image's geometry: source pixels -> displayed pixels (a Letterbox; with
    ``crop`` its padding is cut off, as an original image is shown without it)."""

    def __init__(self, letterbox, *, crop: bool):
        self.lb, self.crop = letterbox, crop
        self.width = letterbox.new_w if crop else letterbox.size
        self.height = letterbox.new_h if crop else letterbox.size

    def boxes(self, xyxy: np.ndarray) -> np.ndarray:
        # continuous coordinates, not clipped (a misplaced box must show where it is)
        xyxy = np.asarray(xyxy, np.float64).reshape(-1, 4).copy()
        sx, sy = self.lb.new_w / self.lb.src_w, self.lb.new_h / self.lb.src_h
        dx, dy = (0, 0) if self.crop else (self.lb.left, self.lb.top)
        xyxy[:, [0, 2]] = xyxy[:, [0, 2]] * sx + dx
        xyxy[:, [1, 3]] = xyxy[:, [1, 3]] * sy + dy
        return xyxy

    def to_source(self, xyxy: np.ndarray) -> np.ndarray:
        """Pixels of the image the record points at (the original; in cache mode the cached
        square) -> source pixels."""
        xyxy = np.asarray(xyxy, np.float64).reshape(-1, 4).copy()
        if self.crop:  # the record points at the original
            return xyxy
        sx, sy = self.lb.src_w / self.lb.new_w, self.lb.src_h / self.lb.new_h
        xyxy[:, [0, 2]] = (xyxy[:, [0, 2]] - self.lb.left) * sx
        xyxy[:, [1, 3]] = (xyxy[:, [1, 3]] - self.lb.top) * sy
        return xyxy

    def frame(self) -> dict:
        """The image the record points at: its size and, when cached, its letterbox."""
        if self.crop:
            return {"width": self.lb.src_w, "height": self.lb.src_h, "letterbox": None}
        return {"width": self.lb.size, "height": self.lb.size, "letterbox": self.lb.as_dict()}


def image_path(roots: dict, record: dict, rel: str):
    """The file of image ``rel`` of ``record``, refusing anything outside its source's root."""
    root = roots.get(record.get("source"))
    if root is None:
        raise OutsideSources(f"Record {record.get('record_id')} names source "
                             f"{record.get('source')!r}, which mixture.json does not list",
                             expected=f"one of {sorted(roots)}", found=repr(record.get("source")),
                             fix="rebuild the mixture; the viewer reads only its sources")
    try:
        from ..imaging.read import safe_path

        return safe_path(root, rel)
    except PathSafetyError as exc:
        raise OutsideSources(f"Refusing image {rel!r} of record {record.get('record_id')}: it is "
                             f"not inside the source {record.get('source')}'s root {root}",
                             expected="a path inside one of the mixture's sources",
                             found=str(exc).splitlines()[0],
                             fix="rebuild the mixture; the viewer reads only its sources") \
            from None


def load_image(path, *, mode: str, size: int) -> tuple[np.ndarray, Shown]:
    """The image as 8-bit gray, as the trainer sees it: ``mode="cache"``: the ``size`` square
    the cache holds (letterboxed); ``"original"``: the original scaled to ``size`` on its long
    side, without padding. Returns it with its :class:`Shown` geometry."""
    from ..imaging.pipeline import DefaultTransform

    if not os.path.exists(path):
        raise NotFound(f"Image {path} does not exist", expected="the source's image file",
                       found="no such file", fix="check the source root in mixture.json")
    try:
        arr, lb = DefaultTransform(size=size).encode(path)
    except RadHarmonyError:
        raise
    if mode != "cache":
        arr = arr[lb.top:lb.top + lb.new_h, lb.left:lb.left + lb.new_w]
    return np.ascontiguousarray(arr), Shown(lb, crop=mode != "cache")
