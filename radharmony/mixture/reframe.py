"""A grounded record's box texts written again for another image or dialect, from its
``fields`` (the boxes in source pixels), never from the old text's numbers.

A record's prompt and target hold boxes for the image it pointed at when it was built
(``fields["frame"]``: the original file, or the cached square) in the build's dialect
(``fields["dialect"]``). An export that points at another image (``images=`` other than the
build's), or a format with a dialect of its own (``maira2``), needs them where *its* image
puts them:

* :func:`rewrite` -- the same dialect, another frame: each box token of the text is replaced,
  in order, by the box of ``fields["boxes"]`` it was written from, in the new frame; the rest
  of the text (phrases, prose, the prompt's words) stays byte for byte.
* :func:`convert` -- another dialect: the text's sentences read back
  (:func:`~radharmony.mixture.box_parse.parse_boxes`), each box replaced by its source box,
  and the sentences written in the new dialect and frame.

Both refuse (:class:`~radharmony.export.ExportError`) a record whose text does not hold one
box token per box of its fields (the boxes MAIRA-2's crop left out at the build excepted):
a box is never guessed. A box that MAIRA-2's crop cuts in the new frame is clipped or dropped
and counted (:class:`Moved`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..export.codec import ExportError
from .box_frame import TOKEN_DIALECTS, ImageFrame, _params, crop_status
from .box_parse import parse_boxes
from .boxes import _written, grounded_text

#: one box as each dialect writes it (boxes._box_strings)
TOKENS = {"maira2": re.compile(r"<box><x\d+><y\d+><x\d+><y\d+></box>"),
          "chexagent": re.compile(r"<\|box\|>\(\d+,\d+\),\(\d+,\d+\)<\|/box\|>"),
          "radfact": re.compile(r'\{"x_min": [^{}"]*, "y_min": [^{}"]*, "x_max": [^{}"]*, '
                                r'"y_max": [^{}"]*\}'),
          "pixels": re.compile(r"\[\d+, \d+, \d+, \d+\]")}
TOKENS["internvl"] = TOKENS["pixels"]  # each box of a <box>[[...], ...]</box> list
TOKENS["qwen2.5"] = TOKENS["pixels"]  # each "bbox_2d": [...]


@dataclass
class Moved:
    """What writing a record's boxes again did: ``boxes`` written from the fields (those
    MAIRA-2's crop left out of the build's text are not there to write), ``clipped`` /
    ``dropped`` by MAIRA-2's crop in the new frame."""

    prompt: str
    target: str
    boxes: int = 0
    clipped: int = 0
    dropped: int = 0


def source_boxes(fields: dict) -> tuple[np.ndarray, ImageFrame, str]:
    """``(boxes (N, 4) in source pixels, the frame the text was written for, its dialect)``
    of the boxes the build wrote (those MAIRA-2's crop dropped then left out)."""
    frame = written_frame(fields)
    xyxy = np.array([b["box"] for b in fields.get("boxes") or ()], np.float64).reshape(-1, 4)
    dialect = fields["dialect"]
    written = crop_status(xyxy, _params([frame]), np.zeros(len(xyxy), np.int64), dialect) < 2
    return xyxy[written], frame, dialect


def written_frame(fields: dict) -> ImageFrame:
    """The frame the record's text was written for (a record without a box may have none:
    any frame reads a text without boxes, a one-pixel image stands in)."""
    frame = fields.get("frame")
    return ImageFrame.coerce(frame) if frame else ImageFrame(1, 1)


def new_frame(old: ImageFrame, mode: str, size: int | None) -> ImageFrame:
    """The same source image as the export points at it."""
    return ImageFrame(old.width, old.height, mode, size if mode == "cache" else None)


def _refuse(rid: str, found: str):
    raise ExportError(f"Record {rid}: its box texts cannot be matched to the boxes of its "
                      "fields", expected="one box token per box of fields['boxes'], in order",
                      found=found, fix="export with the mixture's own images mode (--images), "
                                       "or rebuild the mixture with this radharmony")


def rewrite(rid: str, prompt: str, target: str, fields: dict, frame: ImageFrame) -> Moved:
    """``prompt`` and ``target`` with every box token (in prompt-then-target order) written
    for ``frame`` in the record's own dialect (see the module doc)."""
    xyxy, _, dialect = source_boxes(fields)
    token = TOKENS[dialect]
    spans = [(0, m) for m in token.finditer(prompt)] + [(1, m) for m in token.finditer(target)]
    if len(spans) != len(xyxy):
        _refuse(rid, f"{len(spans)} box tokens for {len(xyxy)} boxes")
    texts = _written(xyxy, _params([frame]), np.zeros(len(xyxy), np.int64), dialect)
    status = crop_status(xyxy, _params([frame]), np.zeros(len(xyxy), np.int64), dialect)
    out = [prompt, target]
    for (which, m), new in reversed(list(zip(spans, texts))):  # from the end: spans stay put
        s = out[which]
        out[which] = s[:m.start()] + (new or "") + s[m.end():]
    return Moved(out[0], out[1], len(xyxy), int((status == 1).sum()), int((status == 2).sum()))


def source_items(rid: str, target: str, fields: dict) -> list:
    """The target's sentences ``[(phrase, boxes (k, 4) in source pixels or None), ...]``: its
    text read back for the phrases, each box taken from ``fields["boxes"]`` in order."""
    xyxy, old_frame, old = source_boxes(fields)
    items = parse_boxes(target, old_frame, old).items
    counts = [0 if b is None else len(b) for _, b in items]
    if sum(counts) != len(xyxy):
        _refuse(rid, f"{sum(counts)} boxes read from the target for {len(xyxy)} boxes")
    starts = np.r_[0, np.cumsum(counts)].tolist()
    return [(p, None if b is None else xyxy[a:e]) for (p, b), a, e in
            zip(items, starts, starts[1:])]


def _nothing(target: str, fields: dict, dialect: str) -> str:
    """The target of a record with nothing to box, in ``dialect`` (the build's words kept)."""
    from .tasks.grounded_source import nothing_text
    from .tasks.grounding import NO_FINDING, NO_OBJECT

    if dialect not in TOKEN_DIALECTS:
        return nothing_text(dialect, "")
    if fields["dialect"] in TOKEN_DIALECTS:
        return target
    return NO_OBJECT if fields.get("finding") == "foreign_object" else NO_FINDING


def convert(rid: str, target: str, fields: dict, frame: ImageFrame, dialect: str) -> Moved:
    """``target``'s sentences in ``dialect`` for ``frame`` (see the module doc); the prompt
    must hold no box (a captioning record's box is in its prompt: not converted)."""
    items = source_items(rid, target, fields)
    if not items:  # nothing to box: said in words (token dialects) or an empty list
        return Moved("", _nothing(target, fields, dialect))
    xyxy = np.concatenate([b for _, b in items if b is not None] or [np.zeros((0, 4))])
    status = crop_status(xyxy, _params([frame]), np.zeros(len(xyxy), np.int64), dialect)
    return Moved("", grounded_text(items, frame, dialect), len(xyxy), int((status == 1).sum()),
                 int((status == 2).sum()))


__all__ = ["Moved", "TOKENS", "convert", "new_frame", "rewrite", "source_boxes", "source_items",
           "written_frame"]
