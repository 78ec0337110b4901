"""Argument checks and sample access shared by the augmentations.

The probability and range checks of their constructors, the sample's image and boxes (with
their per-box lists kept in step when boxes are dropped), and the cast back to the input dtype.
"""

from __future__ import annotations

import math

import torch

from ..errors import RadHarmonyError

#: keys that travel box by box with ``bbox`` (besides any other ``bbox_*`` of the same length)
BOX_LIST_KEYS = ("bbox_labels", "bbox_annotators")


# -- argument checks ---------------------------------------------------------------------------
def _check_p(owner: str, p) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise RadHarmonyError(f"{owner}: p must be a probability",
                              expected="a number in [0, 1]", found=repr(p),
                              fix=f"pass e.g. {owner}(p=0.5)")
    return float(p)


def _range(owner: str, name: str, value, *, symmetric: bool, low: float | None = None
           ) -> tuple[float, float] | None:
    """``None`` (disabled), ``x`` (``(-x, x)`` when ``symmetric``) or ``(lo, hi)``."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool) and symmetric:
        lo, hi = -abs(float(value)), abs(float(value))
    elif isinstance(value, (tuple, list)) and len(value) == 2 and \
            all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        lo, hi = float(value[0]), float(value[1])
    else:
        shape = "a number x (for (-x, x)) or a pair (lo, hi)" if symmetric else "a pair (lo, hi)"
        raise RadHarmonyError(f"{owner}: {name} has the wrong form", expected=shape,
                              found=repr(value), fix=f"pass e.g. {name}=None to disable it")
    if not lo <= hi or (low is not None and lo < low) or not (math.isfinite(lo) and
                                                              math.isfinite(hi)):
        bound = f", both >= {low}" if low is not None else ""
        raise RadHarmonyError(f"{owner}: {name} range is invalid",
                              expected=f"finite lo <= hi{bound}", found=repr(value),
                              fix=f"pass e.g. {name}=({max(low or 0, 0.9)}, 1.1)"
                              if low is not None else f"pass e.g. {name}=(-0.1, 0.1)")
    return lo, hi


def _uniform(u: torch.Tensor, rng: tuple[float, float] | None, default: float) -> float:
    if rng is None:
        return default
    return rng[0] + (rng[1] - rng[0]) * float(u)


def _image(owner: str, sample) -> torch.Tensor:
    if not isinstance(sample, dict):
        raise RadHarmonyError(f"{owner} needs a sample dict", expected="a dict with 'img'",
                              found=type(sample).__name__,
                              fix="call it on a dataset sample, e.g. aug(ds[0])")
    img = sample.get("img")
    if not isinstance(img, torch.Tensor) or img.dim() < 2:
        found = f"shape {tuple(img.shape)}" if isinstance(img, torch.Tensor) else \
            type(img).__name__
        raise RadHarmonyError(f"{owner}: the sample's 'img' is not an image tensor",
                              expected="a (C, H, W) tensor (the built-in pipeline's output)",
                              found=found, fix="apply augmentations after the built-in "
                              "pipeline (train_transform=), not as transform=")
    return img


def _restore(out: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    if like.is_floating_point():
        return out.to(like.dtype)
    info = torch.iinfo(like.dtype) if like.dtype != torch.bool else None
    if info is None:
        return out > 0.5
    return out.round_().clamp_(info.min, info.max).to(like.dtype)


def _keep_boxes(out: dict, sample: dict, boxes: torch.Tensor, keep: torch.Tensor) -> None:
    n = len(keep)
    out["bbox"] = boxes[keep].to(sample["bbox"].dtype)
    if bool(keep.all()):
        return
    idx = keep.nonzero().flatten().tolist()
    for key, value in sample.items():
        if key == "bbox" or not key.startswith("bbox_"):
            continue
        if isinstance(value, torch.Tensor) and value.dim() and len(value) == n:
            out[key] = value[keep]
        elif isinstance(value, (list, tuple)) and len(value) == n:
            out[key] = type(value)(value[i] for i in idx)
        elif key in BOX_LIST_KEYS:
            raise RadHarmonyError(f"the sample's {key!r} is out of step with its boxes",
                                  expected=f"one entry per box ({n})",
                                  found=f"{len(value) if hasattr(value, '__len__') else value!r}",
                                  fix="keep bbox and its per-box lists the same length")


def _boxes(sample: dict) -> torch.Tensor | None:
    boxes = sample.get("bbox")
    if boxes is None:
        return None
    if not isinstance(boxes, torch.Tensor) or boxes.dim() != 2 or boxes.shape[-1] != 4:
        raise RadHarmonyError("the sample's 'bbox' is not an (N, 4) tensor",
                              expected="x_min, y_min, x_max, y_max rows in output pixels",
                              found=f"{type(boxes).__name__} "
                              f"{tuple(boxes.shape) if hasattr(boxes, 'shape') else ''}",
                              fix="build samples with output_bbox=True and the built-in "
                              "pipeline")
    return boxes


def _clip_boxes(boxes: torch.Tensor, width: int, height: int) -> tuple[torch.Tensor,
                                                                       torch.Tensor]:
    """Boxes clipped to the image and the mask of those with area left inside it."""
    clipped = torch.stack([boxes[:, 0].clamp(0, width), boxes[:, 1].clamp(0, height),
                           boxes[:, 2].clamp(0, width), boxes[:, 3].clamp(0, height)], 1)
    keep = (clipped[:, 2] > clipped[:, 0]) & (clipped[:, 3] > clipped[:, 1])
    return clipped, keep
