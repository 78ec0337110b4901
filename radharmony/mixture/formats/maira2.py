"""MAIRA-2 inputs, one report-generation record (family ``reports``) a line (JSON lines):
``id``, the seven inputs ``frontal`` (the key frontal image), ``lateral`` (the first lateral
view), ``prior_frontal`` (the prior study's key frontal image, from the record's
``prior_image_paths`` and ``prior_views``), ``prior_report``, ``indication``, ``technique``,
``comparison`` (image references or text; null when the record has none), ``target`` and
``absent``: the names of the inputs that are null, so a model is not asked to describe a
lateral it was not given. Records without a frontal image are skipped."""

from __future__ import annotations

from ..images import first_lateral, key_frontal
from .common import Export
from .inputs import fields, is_report, section, text_or_none
from .llava import COLUMNS as LLAVA_COLUMNS
from .llava import NO_FRONTAL, has_target
from .r2gen import NOT_REPORT

COLUMNS = [*LLAVA_COLUMNS, "family", "task", "fields"]
INPUTS = ("frontal", "lateral", "prior_frontal", "prior_report", "indication", "technique",
          "comparison")


def entry(rec: dict, ex: Export) -> dict | None:
    if not is_report(rec):
        ex.skip(NOT_REPORT)
        return None
    if not has_target(rec, ex):
        return None
    paths, views = rec["image_paths"] or [], rec["views"] or []
    k = key_frontal(views) if paths else None
    if k is None or k >= len(paths):
        ex.skip(NO_FRONTAL)
        return None
    f = fields(rec)
    lat = first_lateral(views)
    prior_paths = f.get("prior_image_paths") or []
    prior_views = f.get("prior_views") or [None] * len(prior_paths)
    pk = key_frontal(prior_views) if prior_paths else None
    if pk is None and prior_paths and not any(prior_views):
        pk = 0  # a prior whose views are unknown: its first image
    src = rec["source"]
    inputs = {"frontal": ex.ref(src, paths[k]),
              "lateral": ex.ref(src, paths[lat]) if lat is not None and lat < len(paths)
              else None,
              "prior_frontal": ex.ref(src, prior_paths[pk]) if pk is not None and
              pk < len(prior_paths) else None,
              "prior_report": text_or_none(f.get("prior_report")),
              **{name: section(rec, name) for name in ("indication", "technique",
                                                       "comparison")}}
    return {"id": rec["record_id"], **inputs, "target": rec["target"],
            "absent": [name for name in INPUTS if inputs[name] is None]}
