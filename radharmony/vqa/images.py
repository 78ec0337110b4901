"""A question's images as a study sample: each image through the dataset's per-image pipeline
and cache, stacked to ``(K, 1, S, S)`` with an ``img_mask`` of the real ones.

This is the one place a VQA sample reads images; when the study-level sample
(:mod:`radharmony.studies`) offers the same stacking, this function is what is swapped.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pandas as pd
import torch

from ..errors import RowsDroppedWarning
from ..imaging.read import safe_path

SHOW = 5


def load_one(ds, root, rel: str) -> np.ndarray:
    """The quantized ``(S, S)`` image at ``root/rel`` through ``ds``'s cache (decoded and
    stored on a miss); unsafe or absent files raise the standard errors naming them."""
    path = safe_path(root, rel)
    cache = ds.image_cache
    if cache is None:
        return ds.pipeline.encode(path)[0]
    key = cache.key(path)
    hit = cache.load(key)
    if hit is not None:
        return hit[0]
    arr, box = ds.pipeline.encode(path)
    cache.store(key, arr, box.as_dict())
    return arr


def stack_images(ds, root, paths: list[str], *, size: int | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(img (K, 1, S, S), img_mask (K,) bool)`` of ``paths`` under ``root``; ``size`` pads to
    ``K = size`` slots (zeros, mask False)."""
    arrs = [load_one(ds, root, p) for p in paths]
    q = np.stack(arrs)
    img = ds.pipeline.to_tensor(q, ds.dtype)
    k = len(paths) if size is None else max(size, len(paths))
    if k > len(paths):
        pad = torch.zeros((k - len(paths), *img.shape[1:]), dtype=img.dtype)
        img = torch.cat([img, pad])
    mask = torch.zeros(k, dtype=torch.bool)
    mask[:len(paths)] = True
    return img, mask


def absent_questions(df: pd.DataFrame, root, *, columns=("image_paths",)) -> np.ndarray:
    """Boolean per question: True where one of its images (in any of ``columns``) is absent
    under ``root`` (each distinct file looked up once)."""
    base = os.fspath(root)
    seen: dict[str, bool] = {}
    out = np.zeros(len(df), dtype=bool)
    for col in columns:
        if col not in df.columns:
            continue
        for i, paths in enumerate(df[col].tolist()):
            for p in paths or ():
                there = seen.get(p)
                if there is None:
                    there = seen[p] = os.path.isfile(os.path.join(base, p))
                if not there:
                    out[i] = True
    return out


def report_absent(df: pd.DataFrame, absent: np.ndarray, *, owner: str, drop: bool,
                  root) -> None:
    """Warn, with the count and the first question ids, about questions whose images are
    absent: dropped (``drop``) or kept (reading them raises, naming the file)."""
    if not absent.any():
        return
    ids = df["question_id"][absent].tolist()
    what = "dropped" if drop else "kept (reading them raises)"
    warnings.warn(f"{owner}: {len(ids)} of {len(df)} questions have images absent under "
                  f"{root}; {what}; first: {ids[:SHOW]}"
                  + ("" if drop else " -- pass on_missing='drop' to leave them out"),
                  RowsDroppedWarning, stacklevel=4)
