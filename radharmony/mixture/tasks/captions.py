"""Figure captioning: an image's own caption (``caption_image``) and its keywords
(``image_keywords``), for datasets whose text is a caption rather than a sectioned report
(ROCO: a ``caption`` column, a ``keywords`` list column).

Images without a caption (or without keywords) are skipped (``no_caption``, ``no_keywords``);
the keywords target is the dataset's own keywords in their file order, comma-separated.
"""

from __future__ import annotations

import numpy as np

from ..records import fields_json
from .base import Draft, Rendered, Task, register_capability, register_task

CAPTION_PROMPTS = ("Write the figure caption for this radiology image.",
                   "Caption this medical image as a journal figure would.",
                   "What does this radiology image show? Answer with a figure caption.")
KEYWORD_PROMPTS = ("List the keywords of this radiology image, comma-separated.",
                   "Give the key terms that describe this medical image.",
                   "Which keywords would index this radiology figure?")


def _has(column: str):
    return lambda spec, kw: spec.row_unit == "image" and column in spec.columns


register_capability("caption", _has("caption"), meaning="a figure caption per image (the "
                                                        "caption column)")
register_capability("keywords", _has("keywords"), meaning="keywords per image (the keywords "
                                                          "list column)")


def _texts(ctx, column: str) -> np.ndarray:
    u = ctx.units("image")
    return ctx.table[column].to_numpy(object)[np.asarray(u.rows, np.int64)]


def _captioning(ctx) -> Draft:
    text = _texts(ctx, "caption")
    keep = np.array([isinstance(t, str) and bool(t.strip()) for t in text], bool)
    pos = np.flatnonzero(keep)
    fields = fields_json({"text": "caption"})

    def render(j: np.ndarray) -> Rendered:
        return Rendered([text[p].strip() for p in pos[j]], {}, [fields] * len(j))

    missing = int((~keep).sum())
    return Draft("image", pos, render, skipped={"no_caption": missing} if missing else {})


def _keywords(ctx) -> Draft:
    words = _texts(ctx, "keywords")
    keep = np.array([w is not None and len(w) > 0 for w in words], bool)
    pos = np.flatnonzero(keep)
    fields = fields_json({"text": "keywords"})

    def render(j: np.ndarray) -> Rendered:
        return Rendered([", ".join(map(str, words[p])) for p in pos[j]], {}, [fields] * len(j))

    missing = int((~keep).sum())
    return Draft("image", pos, render, skipped={"no_keywords": missing} if missing else {})


register_task(Task(name="caption_image", family="reports", needs=("images", "caption"),
                   prompts=CAPTION_PROMPTS, build=_captioning,
                   description="an image's figure caption"))
register_task(Task(name="image_keywords", family="reports", needs=("images", "keywords"),
                   prompts=KEYWORD_PROMPTS, build=_keywords,
                   description="an image's keywords (from its caption)"))
