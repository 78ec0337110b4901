"""View classification: the canonical view of an image (``PA``, ``AP``, ``LATERAL``, ...),
from the dataset's own view field through its ``view_map``; images without one are skipped
(``no_view``)."""

from __future__ import annotations

import numpy as np

from ..records import fields_json
from .base import Draft, Rendered, Task, register_task

VIEW_PROMPTS = ("Which view is this chest X-ray: PA, AP or lateral?",
                "What is the projection of this chest radiograph?",
                "Name the view position of this chest X-ray.")
#: canonical view -> the target text
VIEW_TEXT = {"PA": "PA", "AP": "AP", "LATERAL": "lateral", "LL": "left lateral"}


def _views(ctx) -> Draft:
    u = ctx.units("image")
    views = np.array([v[0] for v in u.views], dtype=object)
    keep = np.array([isinstance(v, str) and v in VIEW_TEXT for v in views], bool)
    pos = np.flatnonzero(keep)
    fields = {v: fields_json({"view": v}) for v in VIEW_TEXT}

    def render(j: np.ndarray) -> Rendered:
        v = views[pos[j]]
        return Rendered([VIEW_TEXT[x] for x in v], {}, [fields[x] for x in v])

    missing = int((~keep).sum())
    return Draft("image", pos, render, skipped={"no_view": missing} if missing else {})


register_task(Task(name="classify_view", family="views", needs=("images", "views"),
                   prompts=VIEW_PROMPTS, build=_views,
                   description="the view position of an image (PA, AP, lateral)"))

__all__ = ["VIEW_TEXT"]
