"""Grounded CT tasks: a volume's findings with their 3-D boxes as text
(:mod:`radharmony.mixture.boxes3d`), from the source annotation.

``ct_detect_findings``: every annotated finding of a volume with its boxes, one record per
volume with boxes (``no_boxes`` counts the others). ``ct_locate_levels``: one record per
annotated vertebra or disc level (a label :func:`level_name` reads: ``C2``, ``L4-L5``) -> its
box (C-spine vertebra boxes and masks, lumbar level points). A point is the voxel around it. The boxes come from the dataset's
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

import re
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
        if "points" in ann:  # a point: the voxel around it
            pts = np.asarray(ann["points"], np.float64).reshape(-1, 3)
            boxes = np.concatenate([boxes, np.concatenate([pts - 0.5, pts + 0.5], 1)])
            labels = labels + list(ann["point_labels"])
    if hasattr(ds, "source_mask") and getattr(ds, "mask_labels", None):
        mask = ds.source_mask(index)
        if mask is not None:
            mb, ml = mask_boxes(np.asarray(mask), dict(ds.mask_labels))
            boxes, labels = np.concatenate([boxes, mb]), labels + ml
    return boxes, labels


def _annotated(ctx) -> list[tuple]:
    """``(table row, boxes, labels, source frame)`` of every volume of ``ctx`` with boxes."""
    from ..holdout import open_dataset

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = open_dataset(ctx.key, ctx.mixture["root"], ctx.kwargs)
    index = {s: i for i, s in enumerate(ds.harmonized_df["sample_id"].astype(str))}
    out = []
    for r, sid in enumerate(ctx.table["sample_id"].astype(str).tolist()):
        boxes, labels = source_boxes(ds, index[sid])
        if not len(boxes):
            continue
        vol = ds.load_volume(index[sid])  # canonical (cached): its grid is the source's
        if isinstance(vol, tuple):  # a source opened with a preset: read the volume itself
            vol = ds.read_volume(index[sid])
        out.append((r, boxes, labels,
                    VolumeFrame.of(vol, {"affine": vol.in_space("LPS").affine}, vol.shape)))
    return out


def _record_fields(boxes, labels, frame) -> str:
    return fields_json({"boxes3d": np.round(boxes, 4).tolist(), "box_labels": list(labels),
                        "dialect3d": DIALECT, "frame3d": frame.as_dict()})


def _draft(ctx, rows: list, texts: list, fields: list, slots: dict | None = None,
           item=None) -> Draft:
    none = len(ctx.table) - len(set(rows))

    def render(j: np.ndarray) -> Rendered:
        js = j.tolist()
        return Rendered([texts[k] for k in js],
                        {n: [v[k] for k in js] for n, v in (slots or {}).items()},
                        [fields[k] for k in js])

    return Draft("image", np.asarray(rows, np.int64), render, item=item,
                 skipped={"no_boxes": none} if none else {})


def _detect(ctx) -> Draft:
    rows, texts, fields = [], [], []
    for r, boxes, labels, frame in _annotated(ctx):
        rows.append(r)
        texts.append(grounded_target(boxes, labels, frame)[0])
        fields.append(_record_fields(boxes, labels, frame))
    return _draft(ctx, rows, texts, fields)


register_task(Task(name="ct_detect_findings", family="grounding", needs=("volumes", "boxes3d"),
                   prompts=PROMPTS, build=_detect,
                   description="a CT volume's findings with their 3-D boxes as text (box3d)"))

#: a vertebra (C1-C7, T1-T12, L1-L5, S1) or a disc between two (``L4-L5``, ``l4_l5``)
_VERTEBRA = r"(?:C[1-7]|T(?:1[0-2]|[1-9])|L[1-5]|S1)"
LEVEL = re.compile(rf"^({_VERTEBRA})(?:[-_/ ]({_VERTEBRA}))?$", re.I)
LEVEL_PROMPTS = ("Where is the {level} {kind}? Give its 3-D box.",
                 "Locate the {level} {kind} in this scan.",
                 "Give the 3-D bounding box of {level}.")


def level_name(label: str) -> tuple[str, str] | None:
    """``(level, kind)`` of a label naming a vertebra or a disc level, else None.

    >>> level_name("l4_l5"), level_name("C2"), level_name("liver")
    (('L4-L5', 'disc'), ('C2', 'vertebra'), None)
    """
    m = LEVEL.match(str(label).strip())
    if m is None:
        return None
    return ("-".join(g.upper() for g in m.groups() if g),
            "disc" if m.group(2) else "vertebra")


def _levels(ctx) -> Draft:
    rows, texts, fields, names, kinds = [], [], [], [], []
    ids = ctx.units("image").ids
    for r, boxes, labels, frame in _annotated(ctx):
        for label in dict.fromkeys(labels):
            got = level_name(label)
            if got is None:
                continue
            mine = boxes[[k for k, n in enumerate(labels) if n == label]]
            rows.append(r)
            texts.append(grounded_target(mine, [got[0]] * len(mine), frame)[0])
            fields.append(_record_fields(mine, [got[0]] * len(mine), frame))
            names.append(got[0])
            kinds.append(got[1])
    return _draft(ctx, rows, texts, fields, {"level": names, "kind": kinds},
                  item=lambda j: [f"{ids[rows[k]]}|{names[k]}" for k in j.tolist()])


register_task(Task(name="ct_locate_levels", family="grounding", needs=("volumes", "boxes3d"),
                   prompts=LEVEL_PROMPTS, build=_levels, slots=("level", "kind"),
                   description="a vertebra or disc level -> its 3-D box (annotated spine "
                               "levels: C-spine, lumbar)"))

__all__ = ["DIALECT", "LEVEL", "grounded_target", "level_name", "source_boxes", "target_for"]
