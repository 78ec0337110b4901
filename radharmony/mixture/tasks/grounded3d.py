"""Grounded CT tasks: a volume's findings with their 3-D boxes as text
(:mod:`radharmony.mixture.boxes3d`), from the source annotation.

``ct_detect_findings``: every annotated finding of a volume with its boxes, one record per
volume with boxes (``no_boxes`` counts the others). The boxes come from the dataset's
``annotations(index)`` hook (the 3-D annotation contract: source canonical voxels) and masks
from ``source_mask(index)`` through :func:`~radharmony.mixture.boxes3d.mask_boxes`, with the
label names of the dataset's ``mask_labels`` (value -> name) when it has them. A dataset feeds
it when its spec lists ``bbox3d`` among its outputs.

The target is written on the source's own grid (``box3d``, bins of the source volume); the
record's ``fields`` keep ``boxes3d`` (source voxels), ``box_labels`` and ``frame3d`` (the
source grid's :class:`~radharmony.mixture.boxes3d.VolumeFrame`), and each 3-D export writes the
target again through its preset's geometry (:func:`target_for`).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..boxes3d import VolumeFrame, box3d_text, mask_boxes
from ..records import fields_json
from .base import Draft, Rendered, Task, register_capability, register_task
from .volumes import volume_level

DIALECT = "box3d"
PROMPTS = ("Detect the findings in this CT volume and give their 3-D boxes.",
           "Locate every finding in this CT scan with a 3-D bounding box.",
           "List the findings of this CT volume with their boxes (x, y, z corners).")

register_capability("boxes3d", lambda spec, kw: volume_level(spec) and "bbox3d" in spec.outputs,
                    meaning="3-D boxes or masks from the dataset's annotations hook")


def grounded_target(boxes, labels, frame, dialect: str = DIALECT) -> tuple[str, dict]:
    """``(text, counts)``: each label (first-seen order) with its boxes, one line each."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 6)
    lines, counts = [], {"clipped": 0, "outside": 0}
    for name in dict.fromkeys(labels):
        mine = boxes[[k for k, n in enumerate(labels) if n == name]]
        text, c = box3d_text(name, mine, frame, dialect)
        lines.append(text)
        counts["clipped"] += c["clipped"]
        counts["outside"] += c["outside"]
    return "\n".join(lines), counts


def target_for(fields: dict, affine, shape, dialect: str = DIALECT) -> tuple[str, dict]:
    """A grounded record's target written again for a preset's output (its LPS ``affine``
    and spatial ``shape``) from the record's ``fields``."""
    src = VolumeFrame.coerce(fields["frame3d"])
    frame = VolumeFrame(src.source_affine, tuple(map(tuple, np.asarray(affine))),
                        tuple(int(n) for n in shape))
    return grounded_target(fields["boxes3d"], fields["box_labels"], frame, dialect)


def source_boxes(ds, index: int) -> tuple[np.ndarray, list]:
    """A dataset row's boxes (the annotations hook's, then its mask's) in source voxels."""
    boxes, labels = np.zeros((0, 6)), []
    if hasattr(ds, "annotations"):
        ann = ds.annotations(index) or {}
        if "boxes" in ann:
            boxes, labels = np.asarray(ann["boxes"], np.float64).reshape(-1, 6), \
                list(ann["box_labels"])
    if hasattr(ds, "source_mask") and getattr(ds, "mask_labels", None):
        mask = ds.source_mask(index)
        if mask is not None:
            mb, ml = mask_boxes(np.asarray(mask), dict(ds.mask_labels))
            boxes, labels = np.concatenate([boxes, mb]), labels + ml
    return boxes, labels


def _detect(ctx) -> Draft:
    from ..holdout import open_dataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = open_dataset(ctx.key, ctx.mixture["root"], ctx.kwargs)
    index = {s: i for i, s in enumerate(ds.harmonized_df["sample_id"].astype(str))}
    rows, texts, fields = [], [], []
    for r, sid in enumerate(ctx.table["sample_id"].astype(str).tolist()):
        boxes, labels = source_boxes(ds, index[sid])
        if not len(boxes):
            continue
        vol = ds.load_volume(index[sid])  # canonical (cached): its grid is the source's
        if isinstance(vol, tuple):  # a source opened with a preset: read the volume itself
            vol = ds.read_volume(index[sid])
        frame = VolumeFrame.of(vol, {"affine": vol.in_space("LPS").affine}, vol.shape)
        text, _ = grounded_target(boxes, labels, frame)
        rows.append(r)
        texts.append(text)
        fields.append(fields_json({"boxes3d": np.round(boxes, 4).tolist(),
                                   "box_labels": labels, "dialect3d": DIALECT,
                                   "frame3d": frame.as_dict()}))
    none = len(ctx.table) - len(rows)

    def render(j: np.ndarray) -> Rendered:
        js = j.tolist()
        return Rendered([texts[k] for k in js], {}, [fields[k] for k in js])

    return Draft("image", np.asarray(rows, np.int64), render,
                 skipped={"no_boxes": none} if none else {})


register_task(Task(name="ct_detect_findings", family="grounding", needs=("volumes", "boxes3d"),
                   prompts=PROMPTS, build=_detect,
                   description="a CT volume's findings with their 3-D boxes as text (box3d)"))

__all__ = ["DIALECT", "grounded_target", "source_boxes", "target_for"]
