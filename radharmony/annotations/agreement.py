"""Inter-annotator agreement on boxes, per label, for any dataset with a ``boxes`` column.

For every image, every label and every pair of annotators who boxed that image, the two
annotators' boxes of the label are matched one-to-one (greedily, highest IoU first; see
:func:`radharmony.annotations.boxes.match_pairs`). Each matched pair contributes its IoU; a box left
without a partner (the other annotator drew fewer boxes of that label, or none) contributes
IoU 0. Annotators who drew no box at all on an image are not known to have looked at it and are
not counted there.
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterable

import numpy as np
import pandas as pd

from .boxes import boxes_to_array, iou_matrix, match_pairs

COLUMNS = ("label", "images", "pairs", "unmatched", "mean_iou", "median_iou", "iou_ge_0_5")


def pair_ious(records) -> list[tuple[str, str, str, float]]:
    """``(label, annotator_a, annotator_b, iou)`` for one image's ``boxes`` cell (unmatched
    boxes give IoU 0)."""
    xyxy, labels, annotators = boxes_to_array(records)
    who = sorted({str(a) for a in annotators if a is not None})
    out = []
    for a, b in combinations(who, 2):
        for label in sorted(set(labels)):
            ia = [i for i, (lab, ann) in enumerate(zip(labels, annotators))
                  if lab == label and str(ann) == a]
            ib = [i for i, (lab, ann) in enumerate(zip(labels, annotators))
                  if lab == label and str(ann) == b]
            if not ia and not ib:
                continue
            matched = match_pairs(iou_matrix(xyxy[ia], xyxy[ib]))
            out += [(label, a, b, v) for _, _, v in matched]
            out += [(label, a, b, 0.0)] * (max(len(ia), len(ib)) - len(matched))
    return out


def box_agreement(boxes: pd.DataFrame | Iterable) -> pd.DataFrame:
    """Per label: how many images two annotators both considered (``images``), the number of
    box pairs (``pairs``, unmatched boxes included), how many boxes had no partner
    (``unmatched``), and the mean / median IoU and the share of pairs with IoU >= 0.5.

    ``boxes`` is a harmonized table (its ``boxes`` column is used) or any iterable of
    ``boxes`` cells. Units do not matter (IoU is scale-free) as long as they are consistent
    within an image.
    """
    cells = boxes["boxes"] if isinstance(boxes, pd.DataFrame) else boxes
    rows = []
    for i, cell in enumerate(cells):
        rows += [(label, i, v) for label, _, _, v in pair_ious(cell)]
    if not rows:
        return pd.DataFrame(columns=list(COLUMNS))
    df = pd.DataFrame(rows, columns=["label", "image", "iou"])
    g = df.groupby("label", sort=True)["iou"]
    out = pd.DataFrame({
        "images": df.groupby("label", sort=True)["image"].nunique(),
        "pairs": g.size(),
        "unmatched": g.apply(lambda s: int((s == 0).sum())),
        "mean_iou": g.mean(),
        "median_iou": g.median(),
        "iou_ge_0_5": g.apply(lambda s: float(np.mean(s >= 0.5))),
    }).reset_index()
    return out[list(COLUMNS)]
