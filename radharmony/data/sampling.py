"""One sample assembly for every read path: ``__getitem__``, batched reads and the loader.

A sample is ``{"sample_id", "img", ...outputs}``; with ``cls`` comes ``cls_mask`` (1 where the
target is a usable 0/1, see :func:`cls_targets`), with ``reg`` / ``grade`` / ``side`` their
``reg_mask`` / ``grade_mask`` / ``side_mask`` (1 where known: :func:`reg_targets`,
:func:`side_targets`). The image arrives either as the pipeline's
quantized array with its :class:`~radharmony.imaging.geometry.Letterbox` (the built-in,
cacheable pipeline) or as whatever a user transform returned; the outputs (``report``,
``cls``, ``bbox``, ``mask``, ...) are added by the dataset's
:meth:`~radharmony.data.dataset.BaseRadiologicalDataset.add_outputs`, so a dataset that adds its
own outputs is served the same by every path.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from ..annotations.boxes import boxes_to_array
from ..annotations.labels import UNCERTAIN_POLICIES
from ..annotations.masks import mask_output


#: a sample's ``report`` when its row has none (the table keeps None): always a ``str``, so
#: torch's default collate batches it; ``has_report`` (a bool tensor) tells the two apart
NO_REPORT = ""
#: outputs of :func:`standard_outputs` placed with the image's letterbox
PLACED = frozenset({"bbox", "mask"})


def stream_hint(ds) -> bool | None:
    """``to_tensor``'s ``stream`` for a batch of ``ds``: False when a per-sample transform
    reads each image again at once (it then finds them in the caches), else by size."""
    return False if getattr(ds, "sample_transform", None) is not None else None


def wants_letterbox(ds) -> bool:
    """Whether assembling ``ds``'s samples uses each image's letterbox: a requested ``bbox``
    or ``mask``, or an ``add_outputs`` or ``assemble`` of the dataset's own (which may use it).
    A batched read passes None for the letterbox otherwise."""
    return bool(PLACED & set(ds.outputs)) or _overrides(type(ds))


@functools.lru_cache(maxsize=None)
def _overrides(cls: type) -> bool:
    """Whether ``cls`` overrides the base dataset's ``add_outputs`` or ``assemble``."""
    return any(sum(name in k.__dict__ for k in cls.__mro__) > 1
               for name in ("add_outputs", "assemble"))


def standard_outputs(ds, index: int, sample: dict, letterbox) -> None:
    """Add the outputs every dataset offers, as ``ds.outputs`` requests them (``cls`` and
    ``cls_mask`` already in ``sample`` came from :func:`batch_outputs`)."""
    rows = ds.rows
    if "report" in ds.outputs:
        report = rows.reports[index]
        sample["has_report"] = torch.tensor(isinstance(report, str) and report != "")
        sample["report"] = report if sample["has_report"] else NO_REPORT
    if "cls" in ds.outputs and rows.labels is not None and "cls" not in sample:
        sample["cls"], sample["cls_mask"] = cls_targets(
            rows.labels[index], getattr(ds, "uncertain", "keep"))
    for name, values, targets in _kind_outputs(ds):
        if name not in sample:
            sample[name], sample[name + "_mask"] = targets(values[index])
    if "bbox" in ds.outputs:
        box_outputs(ds, index, sample, letterbox)
    if "mask" in ds.outputs:
        sample["mask"] = mask_output(ds.source_mask(index), letterbox)


def cls_targets(labels: np.ndarray, uncertain: str = "keep") -> tuple[torch.Tensor, torch.Tensor]:
    """``(cls, cls_mask)`` from one row of table labels (1, 0, -1 uncertain, NaN unknown), or
    from rows of them (``(B, F)``: element-wise, so a batch equals its rows one by one).

    ``cls_mask`` is 1 where ``cls`` is a usable 0/1 target and 0 where it is not: unknown
    (NaN: not mentioned, not labelled) always, uncertain (-1) under ``"keep"`` (``cls`` holds
    -1) and ``"ignore"`` (``cls`` holds 0). Under ``"zeros"`` / ``"ones"`` an uncertain label
    becomes that target and counts. Unknown labels are 0 in ``cls``.

    >>> cls, mask = cls_targets(np.array([1, 0, -1, np.nan], np.float32), "keep")
    >>> cls.tolist(), mask.tolist()
    ([1.0, 0.0, -1.0, 0.0], [1.0, 1.0, 0.0, 0.0])
    >>> cls_targets(np.array([-1.0], np.float32), "ones")[0].tolist()
    [1.0]
    """
    known = ~np.isnan(labels)
    cls = np.where(known, labels, np.float32(0.0)).astype(np.float32)
    mask = known.astype(np.float32)
    unsure = labels == -1.0
    if unsure.any():
        if uncertain == "keep":
            mask[unsure] = 0.0
        elif uncertain == "ignore":
            cls[unsure], mask[unsure] = 0.0, 0.0
        else:
            cls[unsure] = UNCERTAIN_POLICIES[uncertain]
    return torch.from_numpy(cls), torch.from_numpy(mask)


def reg_targets(values: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """``(values, mask)`` from one row (or ``(B, K)`` rows) of regression targets or grades
    (NaN unknown): unknown values are 0 and masked (mask 0).

    >>> reg, mask = reg_targets(np.array([131.0, np.nan], np.float32))
    >>> reg.tolist(), mask.tolist()
    ([131.0, 0.0], [1.0, 0.0])
    """
    known = ~np.isnan(values)
    return (torch.from_numpy(np.where(known, values, np.float32(0.0)).astype(np.float32)),
            torch.from_numpy(known.astype(np.float32)))


#: a side's ``[left, right]``
SIDE_BITS = {"left": (1.0, 0.0), "right": (0.0, 1.0), "both": (1.0, 1.0)}


def side_targets(values: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """``(side (..., S, 2) [left, right], side_mask (..., S))`` from one row (or rows) of
    side cells: a side not said (None) is ``[0, 0]`` and masked.

    >>> side, mask = side_targets(np.array(["left", None, "both"], object))
    >>> side.tolist(), mask.tolist()
    ([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]], [1.0, 0.0, 1.0])
    """
    values = np.asarray(values, dtype=object)
    flat = values.reshape(-1)
    bits = np.array([SIDE_BITS.get(v, (0.0, 0.0)) for v in flat], np.float32).reshape(
        *values.shape, 2)
    mask = np.array([v in SIDE_BITS for v in flat], np.float32).reshape(values.shape)
    return torch.from_numpy(bits), torch.from_numpy(mask)


def _kind_outputs(ds) -> list:
    """``(output, the rows' values, its targets function)`` of each requested reg, grade and
    side output the table holds."""
    rows = ds.rows
    return [(name, values, targets) for name, values, targets in (
        ("reg", rows.reg, reg_targets), ("grade", rows.grades, reg_targets),
        ("side", rows.sides, side_targets)) if name in ds.outputs and values is not None]


def box_outputs(ds, index: int, sample: dict, letterbox) -> None:
    """``bbox`` (N, 4) x_min, y_min, x_max, y_max in output pixels, ``bbox_labels`` and
    ``bbox_annotators`` from the table's ``boxes`` column (list of dicts per image).

    With a user transform (``letterbox`` is None) boxes stay in source pixels, or normalized
    [0, 1] when the table stores them so.
    """
    cell = ds.rows.boxes[index] if ds.rows.boxes is not None else None
    xyxy, labels, annotators = boxes_to_array(ds.box_selection.apply(cell))
    if letterbox is not None:
        xyxy = letterbox.boxes(xyxy, normalized=ds.spec.box_units == "normalized")
    sample["bbox"] = torch.from_numpy(np.ascontiguousarray(xyxy, dtype=np.float32))
    sample["bbox_labels"] = labels
    sample["bbox_annotators"] = annotators


def batch_outputs(ds, indices: np.ndarray) -> dict:
    """The outputs of rows ``indices`` computed for the whole batch at once, one tensor per
    key whose rows go to the samples (see :meth:`~radharmony.data.dataset.
    BaseRadiologicalDataset.batch_outputs`): ``cls`` and ``cls_mask``, ``reg``, ``grade``,
    ``side`` and their masks, when requested."""
    out = {}
    if "cls" in ds.outputs and ds.rows.labels is not None:
        out["cls"], out["cls_mask"] = cls_targets(ds.rows.labels[indices],
                                                  getattr(ds, "uncertain", "keep"))
    for name, values, targets in _kind_outputs(ds):
        out[name], out[name + "_mask"] = targets(values[indices])
    return out


def assemble(ds, index: int, img, letterbox, given: dict | None = None) -> dict:
    """The sample of row ``index`` around an image tensor ``img`` (``given``: outputs already
    computed for it, which :meth:`add_outputs` keeps)."""
    sample = {"sample_id": ds.rows.ids[index], "img": img}
    if given:
        sample.update(given)
    ds.add_outputs(index, sample, letterbox)
    return sample


def as_tensor(img, dtype: torch.dtype) -> torch.Tensor:
    """A user transform's image as a plain tensor (MONAI MetaTensor unwrapped); floating
    images take ``dtype``."""
    if hasattr(img, "as_tensor"):  # MONAI MetaTensor -> plain tensor
        img = img.as_tensor()
    img = torch.as_tensor(np.asarray(img) if not isinstance(img, torch.Tensor) else img)
    return img.to(dtype) if img.is_floating_point() else img


def after_transform(sample, dtype: torch.dtype) -> dict:
    """A sample returned by a transform run after the cache: MONAI MetaTensors (any key)
    unwrapped to plain tensors, ``img`` as a tensor of ``dtype``."""
    if not isinstance(sample, dict):
        from ..errors import RadHarmonyError

        raise RadHarmonyError("A sample transform returned no sample dict",
                              expected="the (possibly changed) sample dict",
                              found=type(sample).__name__,
                              fix="return the sample from the transform (MONAI dictionary "
                                  "transforms do)")
    for key, value in sample.items():
        if hasattr(value, "as_tensor") and isinstance(value, torch.Tensor):
            sample[key] = value.as_tensor()
    if "img" in sample:
        sample["img"] = as_tensor(sample["img"], dtype)
    return sample
