"""Batching samples whose fields vary in size (boxes) or may be missing (reports)."""

from __future__ import annotations

import torch

from ..errors import RadHarmonyError
from .handoff import PACKED_KEYS, collate_keys

#: Keys kept as per-sample lists even when every sample's tensor happens to share a shape, so
#: a batch has the same structure whatever the box counts.
PER_SAMPLE_KEYS = frozenset({"bbox", "bbox3d", "bbox3d_mm", "points", "points_mm"})
#: study samples' per-image keys (:mod:`radharmony.studies`) -> padding value: samples with
#: different K (studies of datasets built with different ``max_images``) pad to the largest
PADDED_KEYS = {"img": -1.0, "prior_img": -1.0, "img_mask": False, "prior_img_mask": False}


def collate(batch: list[dict]) -> dict:
    """Collate sample dicts: equal-shape tensors are stacked, everything else becomes a list.

    Variable-length fields (``bbox`` (N, 4), ``bbox_labels``, ``bbox_annotators``,
    ``report_spans``; a volume's ``bbox3d`` (N, 6), ``points`` (N, 3), their ``_mm`` and
    labels) stay per-sample lists, so ``DataLoader(ds, collate_fn=radharmony.collate)``
    never fails on them; turn the boxes into one padded tensor with :func:`pad_boxes` when a
    model wants that. ``report`` is a list of ``str`` and ``has_report`` a (B,) bool tensor,
    as torch's default collate gives them (a sample without a report has ``report`` "" and
    ``has_report`` False; see :data:`radharmony.data.sampling.NO_REPORT`). ``reg`` (R,),
    ``grade`` (G,) and ``side`` (S, 2) stack like ``cls``, with their masks. Study samples'
    ``img`` (K, 1, S, S) and ``img_mask`` (K,) of different K are padded to the largest K;
    packed study samples' ``img`` (n, 1, S, S) are concatenated, ``(sum n, 1, S, S)``, with
    ``num_images`` (B,) (see :func:`pad_packed`).
    """
    return collate_keys(batch, _stack_or_list)  # a batched read's rows: its tensor, no copy


def _stack_or_list(key: str, values: list):
    if key in PACKED_KEYS.values() and all(isinstance(v, int) for v in values):
        return torch.tensor(values, dtype=torch.long)  # num_images: (B,), as torch's collate
    if key not in PER_SAMPLE_KEYS and all(isinstance(v, torch.Tensor) for v in values) \
            and len({tuple(v.shape) for v in values}) == 1:
        return torch.stack(values)
    if key in PADDED_KEYS and values and all(isinstance(v, torch.Tensor) for v in values) \
            and len({tuple(v.shape[1:]) for v in values}) == 1:
        k = max(len(v) for v in values)
        out = torch.full((len(values), k, *values[0].shape[1:]), PADDED_KEYS[key],
                         dtype=values[0].dtype)
        for i, v in enumerate(values):
            out[i, :len(v)] = v
        return out
    return values


def pad_boxes(boxes: list[torch.Tensor], *, fill: float = 0.0
              ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, N_max, K)`` boxes padded with ``fill`` and a ``(B, N_max)`` bool mask of the real
    ones, from a batch's list of ``(N_i, K)`` tensors: 2-D boxes (K = 4), a volume's
    ``bbox3d`` (K = 6) or ``points`` (K = 3); float32, or float64 when they are (``_mm``).

    >>> padded, valid = pad_boxes([torch.zeros(2, 6), torch.ones(1, 6)], fill=-1.0)
    >>> tuple(padded.shape), valid.tolist(), padded[1, 1, 0].item()
    ((2, 2, 6), [[True, True], [True, False]], -1.0)
    """
    n = max((len(b) for b in boxes), default=0)
    width = next((b.shape[-1] for b in boxes if b.dim() == 2), 4)
    dtype = torch.float64 if any(b.dtype == torch.float64 for b in boxes) else torch.float32
    out = torch.full((len(boxes), n, width), fill, dtype=dtype)
    valid = torch.zeros((len(boxes), n), dtype=torch.bool)
    for i, b in enumerate(boxes):
        out[i, :len(b)] = b
        valid[i, :len(b)] = True
    return out, valid


def pad_packed(x: torch.Tensor, num_images, *, max_images: int | None = None,
               fill: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(B, K, ...)`` from a packed batch's rows ``x`` ``(sum n, ...)`` (the images of a
    ``packed=True`` study batch, or what an encoder made of them, in the same order) and its
    ``num_images`` (B,), with the ``(B, K)`` bool mask of the real ones; K is ``max_images``
    or the largest count, the rest is ``fill``. On ``x``'s device.

    >>> feats = torch.arange(3.0)[:, None]  # 3 images' features: 2 of study 0, 1 of study 1
    >>> padded, mask = pad_packed(feats, torch.tensor([2, 1]))
    >>> padded[..., 0].tolist(), mask.tolist()
    ([[0.0, 1.0], [2.0, 0.0]], [[True, True], [True, False]])
    """
    counts = torch.as_tensor(num_images, dtype=torch.long, device=x.device).reshape(-1)
    total, k = int(counts.sum()), int(counts.max()) if len(counts) else 0
    if max_images is not None:
        if max_images < k:
            raise RadHarmonyError("pad_packed: max_images is smaller than a study's count",
                                  expected=f"max_images >= {k}", found=str(max_images),
                                  fix="pass the dataset's max_images, or None")
        k = max_images
    if total != len(x):
        raise RadHarmonyError("pad_packed: the rows do not match num_images",
                              expected=f"{total} rows (sum of num_images)",
                              found=f"{len(x)} rows",
                              fix="pass the batch's own num_images with its img's rows")
    mask = torch.arange(k, device=x.device)[None, :] < counts[:, None]
    out = x.new_full((len(counts), k, *x.shape[1:]), fill)
    out[mask] = x
    return out, mask
