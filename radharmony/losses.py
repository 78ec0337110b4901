"""Losses for labels that may be unknown (merged datasets, NaN findings)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .errors import RadHarmonyError

REDUCTIONS = ("mean", "sum", "none")


class LossInputError(RadHarmonyError, ValueError):
    """Loss inputs of the wrong shape or an unknown option."""


def masked_bce(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, *,
               pos_weight: torch.Tensor | None = None, reduction: str = "mean") -> torch.Tensor:
    """Binary cross-entropy on logits, counting only the cells where ``mask`` is true.

    ``logits``, ``targets`` and ``mask`` share one shape (``(batch, findings)``); ``targets``
    hold 0/1 where known (anything, NaN included, where masked). ``pos_weight`` (one per
    finding) weighs positives as in :func:`torch.nn.functional.binary_cross_entropy_with_logits`.
    ``reduction``: ``"mean"`` over known cells (0 when none is known), ``"sum"``, or ``"none"``
    (per cell, 0 where masked).

    >>> import torch
    >>> logits = torch.zeros(1, 2)
    >>> round(masked_bce(logits, torch.tensor([[1.0, float("nan")]]),
    ...                  torch.tensor([[1.0, 0.0]])).item(), 4)
    0.6931
    """
    if reduction not in REDUCTIONS:
        raise LossInputError("masked_bce: unknown reduction", expected=f"one of {REDUCTIONS}",
                             found=repr(reduction), fix="pass reduction='mean'")
    if not (logits.shape == targets.shape == mask.shape):
        raise LossInputError("masked_bce: logits, targets and mask differ in shape",
                             expected="one shape for all three",
                             found=f"{tuple(logits.shape)}, {tuple(targets.shape)}, "
                                   f"{tuple(mask.shape)}",
                             fix="pass the sample's cls and cls_mask as targets and mask")
    known = mask.to(torch.bool)
    safe = torch.where(known, targets.to(logits.dtype), torch.zeros_like(logits))
    safe = torch.nan_to_num(safe, nan=0.0)
    cell = F.binary_cross_entropy_with_logits(logits, safe, pos_weight=pos_weight,
                                              reduction="none")
    cell = torch.where(known, cell, torch.zeros_like(cell))
    if reduction == "none":
        return cell
    if reduction == "sum":
        return cell.sum()
    return cell.sum() / known.sum().clamp(min=1)
