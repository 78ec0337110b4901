"""Boxes, written once for every dataset.

In the harmonized table a dataset with boxes has a ``boxes`` column: per image a list of dicts
``{"label": str, "annotator": str | None, "x_min", "y_min", "x_max", "y_max"}`` in the units
its spec declares (``box_units``: ``"normalized"`` = [0, 1] of the source image, or
``"pixel"`` = source pixels when the metadata gives no image size). An image without boxes has
an empty list. Read back from CSV the column is a JSON string; :func:`parse_boxes` turns it back.

This module also holds what every dataset's boxes may need:

* :func:`iou_matrix` -- pairwise IoU;
* :class:`BoxSelection` -- keep all annotators (default), keep one, or merge across annotators
  by IoU; the dataset constructors' ``bbox_annotator=`` / ``bbox_merge_iou=`` build one;
* :func:`merge_boxes` -- one box per group of overlapping boxes across annotators.

Label Studio exports are read by :mod:`radharmony.annotations.label_studio`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import RadHarmonyError
from ..cells import parse_literal

BOX_KEYS = ("x_min", "y_min", "x_max", "y_max")


# -- the boxes column ------------------------------------------------------------------------------
def parse_boxes(value) -> list[dict]:
    """A ``boxes`` cell (list, JSON or Python-literal text as ``DataFrame.to_csv`` writes it,
    None or NaN) -> list of dicts. Text is parsed as data only (``json``/``ast.literal_eval``)."""
    if value is None or isinstance(value, float) and np.isnan(value):
        return []
    if isinstance(value, str):
        value = parse_literal(value) if value.strip() else []
    return [dict(b) for b in value]



def boxes_to_array(records) -> tuple[np.ndarray, list[str], list[str | None]]:
    """``(N, 4)`` float32 array, labels and annotators from a ``boxes`` cell."""
    recs = parse_boxes(records)
    xyxy = np.array([[float(b[k]) for k in BOX_KEYS] for b in recs], np.float32).reshape(-1, 4)
    return xyxy, [str(b.get("label", "")) for b in recs], [b.get("annotator") for b in recs]


def box_record(label: str, annotator, x_min, y_min, x_max, y_max) -> dict:
    """One entry of a ``boxes`` list (annotator as text, or None when unknown)."""
    return {"label": label, "annotator": None if annotator is None else str(annotator),
            "x_min": float(x_min), "y_min": float(y_min), "x_max": float(x_max),
            "y_max": float(y_max)}


def normalize_boxes(records, *, width: float, height: float) -> list[dict]:
    """Pixel box records -> [0, 1] of a ``width`` x ``height`` image (e.g. a ``"pixel"``
    table's boxes once the image size is known)."""
    scale = {"x_min": width, "x_max": width, "y_min": height, "y_max": height}
    return [{**b, **{k: float(b[k]) / scale[k] for k in BOX_KEYS}} for b in parse_boxes(records)]


def iou_matrix(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` (N, 4) with every box in ``b`` (M, 4), as an (N, M) array.

    Boxes are ``x_min, y_min, x_max, y_max`` in continuous coordinates; empty boxes give 0.
    """
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    lo = np.maximum(a[:, None, :2], b[None, :, :2])
    hi = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(hi - lo, 0, None).prod(axis=2)
    area_a = np.clip(a[:, 2:] - a[:, :2], 0, None).prod(axis=1)
    area_b = np.clip(b[:, 2:] - b[:, :2], 0, None).prod(axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    return np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)


def match_pairs(iou: np.ndarray, threshold: float = 0.0) -> list[tuple[int, int, float]]:
    """Greedy one-to-one matching: highest IoU first, each row and column used once, pairs
    with IoU above ``threshold`` (or equal to it when ``threshold`` > 0)."""
    pairs = []
    if iou.size == 0:
        return pairs
    used_r, used_c = set(), set()
    order = np.argsort(-iou, axis=None, kind="stable")
    for flat in order:
        r, c = divmod(int(flat), iou.shape[1])
        v = float(iou[r, c])
        if v < threshold or (threshold == 0.0 and v <= 0.0):
            break
        if r not in used_r and c not in used_c:
            used_r.add(r)
            used_c.add(c)
            pairs.append((r, c, v))
    return pairs


# -- keep all / keep one annotator / merge ---------------------------------------------------------
@dataclass(frozen=True)
class BoxSelection:
    """Which boxes a sample gets when several annotators boxed the same image.

    Attributes:
        annotator: None keeps every annotator's boxes (the default); ``"first"`` keeps, per
            image, the boxes of the annotator listed first for that image; any other text keeps
            only that annotator's boxes (images they did not annotate get none).
        merge_iou: when set, boxes of the same label drawn by different annotators are grouped
            (greedily, highest IoU first, at most one box per annotator in a group, every pair
            in a group with IoU >= ``merge_iou``) and each group becomes one box: the mean of its
            coordinates, annotator ``"a+b"`` (sorted ids). Boxes left alone are kept as they are.
    """

    annotator: str | None = None
    merge_iou: float | None = None

    def __post_init__(self):
        if self.annotator is not None and not isinstance(self.annotator, str):
            raise RadHarmonyError("bbox_annotator must be text", expected="None (all), 'first' "
                                  "or an annotator id such as '705'", found=repr(self.annotator),
                                  fix=f"pass bbox_annotator={str(self.annotator)!r}")
        if self.merge_iou is not None:
            ok = isinstance(self.merge_iou, (int, float)) and not isinstance(self.merge_iou, bool)
            if not ok or not 0.0 < float(self.merge_iou) <= 1.0:
                raise RadHarmonyError("bbox_merge_iou must be a number in (0, 1]",
                                      expected="e.g. bbox_merge_iou=0.5",
                                      found=repr(self.merge_iou), fix="pass a value in (0, 1]")
            if self.annotator is not None:
                raise RadHarmonyError("bbox_annotator and bbox_merge_iou exclude each other",
                                      expected="one annotator's boxes, or boxes merged across "
                                      "annotators", found=f"bbox_annotator={self.annotator!r}, "
                                      f"bbox_merge_iou={self.merge_iou!r}",
                                      fix="pass only one of them")

    @property
    def keeps_all(self) -> bool:
        return self.annotator is None and self.merge_iou is None

    def apply(self, records) -> list[dict]:
        """The selected box records of one image (a ``boxes`` cell)."""
        recs = parse_boxes(records)
        if self.keeps_all or not recs:
            return recs
        if self.annotator is not None:
            who = recs[0].get("annotator") if self.annotator == "first" else self.annotator
            return [b for b in recs if b.get("annotator") == who]
        return merge_boxes(recs, iou=float(self.merge_iou))


def merge_boxes(records: list[dict], *, iou: float) -> list[dict]:
    """Merge same-label boxes of different annotators that overlap with IoU >= ``iou``.

    Greedy and deterministic (:func:`annotator_groups`). A group's box is the mean of its
    members' coordinates. Output order follows the first member.
    """
    xyxy, labels, annotators = boxes_to_array(records)
    out = []
    for g in annotator_groups(xyxy, labels, annotators, iou=iou):
        if len(g) == 1:
            out.append(dict(records[g[0]]))
            continue
        mean = xyxy[g].astype(np.float64).mean(axis=0)
        who = "+".join(sorted(str(annotators[k]) for k in g))
        out.append(box_record(labels[g[0]], who, *mean.tolist()))
    return out


def annotator_groups(xyxy, labels, annotators, *, iou: float) -> list[list[int]]:
    """Indices of the boxes that are one finding drawn by several annotators, one list per
    group (sorted by first member; a box alone is a group of one).

    Pairs of same-label boxes of different annotators are taken highest IoU first; a box joins
    a group only when its annotator is not in it yet and it overlaps every member with IoU >=
    ``iou``.
    """
    n = len(labels)
    groups = [[i] for i in range(n)]
    group_of = list(range(n))
    m = iou_matrix(xyxy, xyxy)
    cand = [(m[i, j], i, j) for i in range(n) for j in range(i + 1, n)
            if labels[i] == labels[j] and annotators[i] != annotators[j] and m[i, j] >= iou]
    for _, i, j in sorted(cand, key=lambda t: (-t[0], t[1], t[2])):
        gi, gj = group_of[i], group_of[j]
        if gi == gj:
            continue
        a, b = groups[gi], groups[gj]
        if {annotators[k] for k in a} & {annotators[k] for k in b} or \
                min(m[p, q] for p in a for q in b) < iou:
            continue
        groups[gi] = sorted(a + b)
        groups[gj] = []
        for k in b:
            group_of[k] = gi
    return sorted((g for g in groups if g), key=lambda g: g[0])
