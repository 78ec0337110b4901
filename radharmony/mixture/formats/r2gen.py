"""R2Gen's ``annotation.json`` (R2Gen, PromptMRG, R2GenCSR): ``{"train": [...], "val": [...],
"test": [...]}``, each entry ``id``, ``report`` (the record's target), ``image_path`` (a list
joined by the loader to ``--image_dir``) and ``split``. Only report-generation records
(family ``reports``, and findings with the prior study) are written; the mixture's ``valid``
split is R2Gen's ``val``; ``test`` is empty by design (a mixture never holds a benchmark's
test patients: evaluate on the benchmark's own test split; the summary says so).

R2Gen's two loaders read ``image_path`` differently, so the study's images are chosen for
the one named by ``variant`` (:data:`VARIANTS`):

* ``iu`` (``IuxrayMultiImageDataset``, R2Gen's default): exactly two images, read as
  ``image_path[0]`` and ``image_path[1]`` -- the key frontal image, then the first lateral
  (else the study's next image). A study of one image is skipped
  (``"fewer than two images (R2Gen IU X-ray)"``: that loader raises ``IndexError`` on it).
* ``mimic`` (``MimiccxrSingleImageDataset``): one image, ``image_path[0]`` -- the key frontal
  image; a study without one is skipped (``"no frontal image"``).
"""

from __future__ import annotations

from ..images import first_lateral, key_frontal
from .common import Export
from .inputs import is_report
from .llava import COLUMNS as LLAVA_COLUMNS
from .llava import NO_FRONTAL, has_target

COLUMNS = [*LLAVA_COLUMNS, "family", "task"]
#: the mixture's split -> R2Gen's
SPLITS = {"train": "train", "valid": "val"}
NOT_REPORT = "not report generation"
NO_IMAGE = "no image"
ONE_IMAGE = "fewer than two images (R2Gen IU X-ray)"
#: R2Gen's loaders: how many images each reads
VARIANTS = ("iu", "mimic")
#: what the summary says of the empty test split
EMPTY_TEST = ("test is empty by design: a mixture holds no benchmark's test patients; "
              "evaluate on the benchmark's own test split")


def chosen(paths: list, views: list, variant: str) -> tuple[list[int] | None, str | None]:
    """The positions of the images ``variant``'s loader reads, or ``(None, reason)``."""
    k = key_frontal(views)
    if variant == "mimic":
        return ([k], None) if k is not None and k < len(paths) else (None, NO_FRONTAL)
    if len(paths) < 2:
        return None, ONE_IMAGE
    first = k if k is not None and k < len(paths) else 0
    lat = first_lateral(views)
    second = lat if lat is not None and lat < len(paths) and lat != first else \
        next(j for j in range(len(paths)) if j != first)
    return [first, second], None


def entry(rec: dict, ex: Export) -> dict | None:
    if not is_report(rec):
        ex.skip(NOT_REPORT)
        return None
    if not rec["image_paths"]:
        ex.skip(NO_IMAGE)
        return None
    if not has_target(rec, ex):
        return None
    paths = rec["image_paths"]
    picked, reason = chosen(paths, rec["views"] or [None] * len(paths), ex.variant or "iu")
    if picked is None:
        ex.skip(reason)
        return None
    split = SPLITS.get(rec["split"], rec["split"])
    return {"id": rec["record_id"], "report": rec["target"],
            "image_path": [ex.ref(rec["source"], paths[j]) for j in picked], "split": split}
