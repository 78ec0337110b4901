"""R2Gen's ``annotation.json`` (R2Gen, PromptMRG, R2GenCSR): ``{"train": [...], "val": [...],
"test": [...]}``, each entry ``id``, ``report`` (the record's target), ``image_path`` (a list:
every image of the record, joined by the loader to ``--image_dir``) and ``split``. Only
report-generation records (family ``reports``) with images are written; the mixture's
``valid`` split is R2Gen's ``val``; ``test`` is empty (a mixture never holds test patients:
evaluate on the benchmark's own test split)."""

from __future__ import annotations

from .common import Export
from .inputs import is_report
from .llava import COLUMNS as LLAVA_COLUMNS
from .llava import has_target

COLUMNS = [*LLAVA_COLUMNS, "family", "task"]
#: the mixture's split -> R2Gen's
SPLITS = {"train": "train", "valid": "val"}
NOT_REPORT = "not report generation"
NO_IMAGE = "no image"


def entry(rec: dict, ex: Export) -> dict | None:
    if not is_report(rec):
        ex.skip(NOT_REPORT)
        return None
    if not rec["image_paths"]:
        ex.skip(NO_IMAGE)
        return None
    if not has_target(rec, ex):
        return None
    split = SPLITS.get(rec["split"], rec["split"])
    return {"id": rec["record_id"], "report": rec["target"],
            "image_path": [ex.ref(rec["source"], p) for p in rec["image_paths"]],
            "split": split}
