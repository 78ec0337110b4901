"""How the mixture viewer shows a record: the export format's rendering of it, its images as
the trainer sees them (the original, or the cached letterboxed square), and its boxes.

The renderings are the exports' own (:func:`radharmony.mixture.formats.render_record`); boxes
are parsed back from a target's text by :func:`radharmony.mixture.box_parse.parse_boxes`.
"""

from __future__ import annotations

import json
import os

import numpy as np

from ..errors import PathSafetyError, RadHarmonyError
from .answers import NotFound, ViewerError

#: the export formats the page offers: name -> title
FORMATS = {"llava": "LLaVA-1.5 entry", "hf_chat": "HF chat messages",
           "llava-onevision": "LLaVA-OneVision entry", "llava-rad": "LLaVA-Rad entry",
           "maira2": "MAIRA-2 inputs", "r2gen": "R2Gen entry"}


class OutsideSources(ViewerError):
    """A record's image path that resolves outside its source's root."""

    status = 403


def render(record: dict, fmt: str) -> object:
    """``record`` as the export format ``fmt`` writes it (the LLaVA entry with its
    conversation, the HF chat messages, ...): :func:`radharmony.mixture.formats.render_record`,
    the exports' own entry functions."""
    if fmt not in FORMATS:
        raise ViewerError(f"Unknown export format {fmt!r}", expected=f"one of {list(FORMATS)}",
                          found=repr(fmt), fix="pick a format the page lists")
    from ..mixture.formats import render_record

    return render_record(record, fmt)


def _boxes_from_target(record: dict, shown: "Shown", dialect: str | None) -> list[dict]:
    """Boxes ``{"phrase", "box": [x1, y1, x2, y2]}`` parsed back from the record's target
    text, in the original image's pixels, by :func:`radharmony.mixture.box_parse.parse_boxes`
    in the mixture's dialect (``pixels`` when the manifest names none) for the image the
    record points at (:meth:`Shown.image_frame`). A target that holds no box gives none."""
    from ..mixture.box_parse import parse_boxes

    parsed = parse_boxes(record.get("target") or "", shown.image_frame(), dialect or "pixels")
    return [{"phrase": str(phrase or ""), "box": [float(v) for v in box]}
            for phrase, boxes in parsed.items if boxes is not None for box in boxes]


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

    def image_frame(self):
        """The image the record points at, as the box dialects see it
        (:class:`radharmony.mixture.boxes.ImageFrame`): the original file, or its cached
        letterboxed square."""
        from ..mixture.boxes import ImageFrame

        if self.crop:
            return ImageFrame(self.lb.src_w, self.lb.src_h)
        return ImageFrame(self.lb.src_w, self.lb.src_h, mode="cache", size=self.lb.size)


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
