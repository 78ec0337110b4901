"""ms-swift's multimodal JSON lines: ``{"id", "messages": [{"role": "user", "content":
"<image>..." + prompt}, {"role": "assistant", "content": target}], "images": [...]}``, and for
a grounded record ``objects`` = ``{"ref": [...], "bbox": [[x1, y1, x2, y2], ...],
"bbox_type": "real", "image_id": [...]}``.

A grounded target is written with swift's placeholders: each boxed sentence as
``<ref-object><bbox>`` per box (its ``ref`` the sentence, its ``bbox`` the box), a sentence
without a box as its text, sentences joined by a space; swift puts each model's own box syntax
in their place, in order. The boxes are integer pixels (``bbox_type: real``) of the image the
entry names (the original file, or the cached square), from the record's fields in source
pixels, whatever the build's dialect. A captioning record (its box in the prompt) is left out
(``"box in the prompt"``), and so is a record whose own text holds one of swift's
placeholders (``<image>``, ``<ref-object>``, ``<bbox>``).
"""

from __future__ import annotations

import numpy as np

from ..reframe import new_frame, source_items, written_frame
from .common import Export
from .inputs import every_image, fields, token_free
from .llava import COLUMNS as LLAVA_COLUMNS
from .llava import has_target

COLUMNS = [*LLAVA_COLUMNS, "fields"]
PLACEHOLDERS = ("<image>", "<ref-object>", "<bbox>")
BOX_IN_PROMPT = "box in the prompt"

__all__ = ["COLUMNS", "entry"]


def entry(rec: dict, ex: Export) -> dict | None:
    if not has_target(rec, ex) or not all(token_free(rec, ex, t) for t in PLACEHOLDERS):
        return None
    refs, words = every_image(rec, ex)
    target, objects = rec["target"], None
    f = fields(rec) if '"dialect":' in (rec.get("fields") or "") else {}
    if f.get("dialect") and f.get("boxes"):
        if f.get("task_kind") == "caption":
            ex.skip(BOX_IN_PROMPT)
            return None
        target, objects = _grounded(rec, f, ex)
    out = {"id": rec["record_id"],
           "messages": [{"role": "user", "content": "<image>" * len(refs) + words
                         + rec["prompt"]}, {"role": "assistant", "content": target}],
           "images": refs}
    if objects is not None:
        out["objects"] = objects
    return out


def _grounded(rec: dict, f: dict, ex: Export) -> tuple[str, dict]:
    """The target with placeholders and its ``objects``, boxes in the entry's image pixels."""
    frame = new_frame(written_frame(f), ex.mode, ex.size)
    parts, names, boxes = [], [], []
    for phrase, xyxy in source_items(rec["record_id"], rec["target"], f):
        if xyxy is None or not len(xyxy):
            parts.append(phrase)
            continue
        parts.append("<ref-object><bbox>" * len(xyxy))
        names += [phrase] * len(xyxy)
        boxes += np.rint(frame.to_target(xyxy)).astype(int).tolist()
    ex.boxes["rewritten"] += len(boxes)
    return " ".join(p for p in parts if p), {"ref": names, "bbox": boxes, "bbox_type": "real",
                                             "image_id": [0] * len(boxes)}
