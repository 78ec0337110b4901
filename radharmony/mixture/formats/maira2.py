"""MAIRA-2 inputs, one record a line (JSON lines): report generation (family ``reports``, and
findings with the prior study) and MAIRA-2's two grounded tasks, PadChest-GR's grounded
reports (``grounded_report``) and MS-CXR's phrase grounding (``phrase_grounding``).

An entry: ``id``; ``task`` -- ``findings_generation``, ``grounded_reporting`` or
``phrase_grounding`` (the processor's reporting input with or without grounding, or its
phrase-grounding input); the seven inputs ``frontal`` (the key frontal image), ``lateral``
(the first lateral view), ``prior_frontal`` (the prior study's key frontal image, from the
record's ``prior_image_paths`` and ``prior_views``), ``prior_report``, ``indication``,
``technique``, ``comparison`` (image references or text; null when the record has none);
``phrase`` (the phrase to ground, else null); ``target`` and ``absent``: the names of the
inputs that are null, so a model is not asked to describe a lateral it was not given.

A grounded target is MAIRA-2's own text, ``<obj>sentence<box><x..><y..><x..><y..></box></obj>``,
on MAIRA-2's frame of the image the entry names (100 bins over its centred shortest-side
crop), written from the record's boxes whatever the build's dialect and images were
(:func:`radharmony.mixture.reframe.convert`; the summary's ``boxes`` counts those clipped or
dropped by the crop). Records without a frontal image are skipped.
"""

from __future__ import annotations

from ..images import first_lateral, key_frontal
from .common import Export
from .inputs import fields, is_report, section, text_or_none
from .llava import COLUMNS as LLAVA_COLUMNS
from .llava import NO_FRONTAL, has_target
from .r2gen import NOT_REPORT

COLUMNS = [*LLAVA_COLUMNS, "family", "task", "fields"]
#: the records' task -> MAIRA-2's task (report generation: ``findings_generation``)
GROUNDED = {"grounded_report": "grounded_reporting", "phrase_grounding": "phrase_grounding"}
#: MAIRA-2's own box dialect: the export writes grounded targets in it
DIALECT = "maira2"
INPUTS = ("frontal", "lateral", "prior_frontal", "prior_report", "indication", "technique",
          "comparison")


def entry(rec: dict, ex: Export) -> dict | None:
    task = "findings_generation" if is_report(rec) else GROUNDED.get(rec["task"])
    if task is None:
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
    phrase = None
    if task == "phrase_grounding":
        phrase = next((b["phrase"] for b in f.get("boxes") or () if b.get("phrase")), None)
    return {"id": rec["record_id"], "task": task, **inputs, "phrase": phrase,
            "target": rec["target"], "absent": [name for name in INPUTS if inputs[name] is None]}
