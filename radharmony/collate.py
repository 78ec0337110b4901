"""Batching samples whose fields vary in size (boxes) or may be missing (reports)."""

from __future__ import annotations

import torch


def collate(batch: list[dict]) -> dict:
    """Collate sample dicts: equal-shape tensors are stacked, everything else becomes a list.

    Variable-length fields (``bbox`` (N, 4), ``bbox_labels``, ``report`` that may be None)
    stay per-sample lists, so ``DataLoader(ds, collate_fn=radharmony.collate)`` never fails on
    them.
    """
    out = {}
    for key in batch[0]:
        values = [s.get(key) for s in batch]
        if all(isinstance(v, torch.Tensor) for v in values) and \
                len({tuple(v.shape) for v in values}) == 1 and key != "bbox":
            out[key] = torch.stack(values)
        else:
            out[key] = values
    return out
