"""Scoring what a model returns for grounded records: each output parsed in its record's dialect,
detection precision, recall and mAP@0.5 per class, mean IoU for phrase grounding, the share of
outputs that could not be parsed -- with 95 % intervals over patients
(:class:`radharmony.evaluate.metrics.PatientBootstrap`, as the other evaluators).

A record's ``fields`` (the JSON column of ``records.parquet``) carries what scoring needs::

    {"task_kind": "detection" | "phrase",
     "dialect": "maira2" | "chexagent" | "radfact" | "pixels",
     "frame": {"width": W, "height": H, "mode": "original" | "cache", "size": S or null},
     "boxes": [{"finding": "Nodule/Mass", "box": [x1, y1, x2, y2], "reader": "R8"}, ...]}

``boxes`` in source pixels; ``phrase`` in place of ``finding`` for phrase grounding; ``reader``
null for single-reader sets. Other keys are ignored.

**Detection** (``task_kind="detection"``): a predicted sentence's phrase names its class
(compared case- and space-insensitively, a final full stop ignored). Per image and class, the
readers' boxes are first grouped into *findings* exactly as fused boxes are
(:func:`radharmony.annotations.boxes.annotator_groups` at IoU 0.5): where readers disagree, each
reader's box is a valid match for its finding, and a finding is found once. Predictions are
matched one to one to findings, highest IoU first (a prediction's IoU with a finding: the best
over its readers' boxes), at IoU >= ``iou``. Per class: precision = matched predictions /
predictions, recall = matched findings / findings. A model's text carries no confidence, so the
precision-recall curve has one point and **AP@0.5 = precision x recall** (0 for a class with
findings and no prediction); **mAP@0.5** is its mean over the classes with findings.

**Phrase grounding** (``task_kind="phrase"``): MS-CXR's convention -- IoU between the union of
every predicted box and the union of the phrase's boxes (exact areas); 0 when the output has no
box or could not be parsed; **mIoU** is the mean over records.

**MAIRA-2's crop**: a ``maira2`` record's model sees only the centred shortest-side square
its processor crops, so its boxes are scored as the dialect writes them: clipped to the crop,
and a box wholly outside it left out (``per_record.outside_frame`` counts them).

**Unparsed**: the share of outputs that could not be read at all (:mod:`.box_parse`);
``malformed_boxes`` counts boxes left out of outputs that were read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..annotations.boxes import annotator_groups, iou_matrix, match_pairs
from ..errors import RadHarmonyError, shorten
from .box_frame import ImageFrame
from .box_parse import parse_many
from .boxes import check_dialect
from .records import fields_of

TASK_KINDS = ("detection", "phrase")


def class_key(text: str) -> str:
    """How a class name is compared: case-folded, single spaces, no final full stop."""
    return " ".join(str(text).casefold().split()).rstrip(".").strip()


@dataclass
class GroundingScores:
    """``summary`` (metric, value, ci_low, ci_high, n_records), ``per_class`` (class,
    findings, predicted, matched, precision, recall, ap50 and their intervals) and
    ``per_record`` (record_id, patient_id, task_kind, ok, malformed, predicted, matched,
    findings, iou)."""

    summary: pd.DataFrame
    per_class: pd.DataFrame
    per_record: pd.DataFrame

    def __getitem__(self, metric: str) -> float:
        row = self.summary[self.summary["metric"] == metric]
        if row.empty:
            raise RadHarmonyError(f"No metric {metric!r}",
                                  expected=f"one of {list(self.summary['metric'])}",
                                  found=repr(metric), fix="pick a listed metric")
        return float(row["value"].iloc[0])


def _records(records) -> pd.DataFrame:
    df = records if isinstance(records, pd.DataFrame) else pd.DataFrame(list(records))
    missing = {"record_id", "patient_id", "fields"} - set(df.columns)
    if missing:
        raise RadHarmonyError("grounding_metrics needs the records' ids, patients and fields",
                              expected="rows of records.parquet (record_id, patient_id, "
                              "fields)", found=f"no {sorted(missing)} column",
                              fix="pass pandas.read_parquet('<mixture>/records.parquet')")
    return df.reset_index(drop=True)


def _predictions(predictions, ids: list) -> list:
    if isinstance(predictions, pd.Series) and not isinstance(predictions.index, pd.RangeIndex):
        predictions = predictions.to_dict()
    if isinstance(predictions, dict):
        absent = [i for i in ids if i not in predictions]
        if absent:
            raise RadHarmonyError("Some records have no prediction",
                                  expected="one output per record_id",
                                  found=f"{len(absent)} missing, e.g. {absent[0]!r}",
                                  fix="predict every record, or score the subset you have")
        return [predictions[i] for i in ids]
    predictions = list(predictions)
    if len(predictions) != len(ids):
        raise RadHarmonyError("grounding_metrics needs one prediction per record",
                              expected=f"{len(ids)} outputs in the records' order",
                              found=f"{len(predictions)}",
                              fix="pass a list in the records' order or {record_id: text}")
    return predictions


def _fields(text, rid) -> dict:
    f = text if isinstance(text, dict) else fields_of(text)
    if f.get("task_kind") not in TASK_KINDS or "frame" not in f or "boxes" not in f:
        raise RadHarmonyError(f"Record {rid} is not a scorable grounded record",
                              expected="fields with task_kind (detection or phrase), "
                              "dialect, frame and boxes",
                              found=shorten(repr(f), 160),
                              fix="score the records of grounded tasks only")
    check_dialect(f.get("dialect"))
    return f


def _in_frame(f: dict) -> tuple[dict, int]:
    """The record's fields with its boxes as its dialect can place them (MAIRA-2: clipped to
    the centred crop, those wholly outside left out: a model shown the crop cannot find them)
    and how many were left out."""
    if f["dialect"] != "maira2" or not f["boxes"]:
        return f, 0
    xyxy, kept = ImageFrame.coerce(f["frame"]).in_frame([b["box"] for b in f["boxes"]],
                                                         "maira2")
    boxes = [{**b, "box": xy.tolist()} for b, xy, k in zip(f["boxes"], xyxy, kept) if k]
    return {**f, "boxes": boxes}, int((~kept).sum())


def union_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of the union of boxes ``a`` (N, 4) with the union of boxes ``b`` (exact areas)."""
    a, b = np.asarray(a, np.float64).reshape(-1, 4), np.asarray(b, np.float64).reshape(-1, 4)
    if not len(a) or not len(b):
        return 0.0
    both = np.concatenate([a, b])
    xs, ys = np.unique(both[:, [0, 2]]), np.unique(both[:, [1, 3]])
    cx, cy = (xs[:-1] + xs[1:]) / 2, (ys[:-1] + ys[1:]) / 2
    area = np.outer(np.diff(xs), np.diff(ys))

    def cover(r):
        inx = (r[:, 0, None] <= cx) & (cx < r[:, 2, None])
        iny = (r[:, 1, None] <= cy) & (cy < r[:, 3, None])
        return (inx[:, :, None] & iny[:, None, :]).any(0)

    ca, cb = cover(a), cover(b)
    union = float((area * (ca | cb)).sum())
    return float((area * (ca & cb)).sum()) / union if union > 0 else 0.0


def _name(box: dict) -> str:
    """A ground-truth box's class: its ``finding`` (or ``phrase``)."""
    return str(box.get("finding", box.get("phrase", "")))


def _detection(gt: list, pred_keys: list, pred_xyxy: np.ndarray, iou: float) -> dict:
    """class key -> (matched, predicted, findings) for one image."""
    out = {}
    by_class: dict[str, list] = {}
    for b in gt:
        by_class.setdefault(class_key(_name(b)), []).append(b)
    for c in set(by_class) | set(pred_keys):
        boxes = by_class.get(c, [])
        xyxy = np.array([b["box"] for b in boxes], np.float64).reshape(-1, 4)
        readers = [b.get("reader") if b.get("reader") is not None else f"\x00{k}"
                   for k, b in enumerate(boxes)]  # no reader: never grouped with another box
        groups = annotator_groups(xyxy, [c] * len(boxes), readers, iou=iou) if boxes else []
        p = pred_xyxy[[k for k, pk in enumerate(pred_keys) if pk == c]]
        m = iou_matrix(p, xyxy)
        g = np.stack([m[:, grp].max(1) for grp in groups], 1) if groups and len(p) \
            else np.zeros((len(p), len(groups)))
        out[c] = (len(match_pairs(g, iou)), len(p), len(groups))
    return out


def grounding_metrics(predictions, records, *, iou: float = 0.5, n_bootstrap: int = 1000,
                      seed: int = 0, level: float = 0.95) -> GroundingScores:
    """Score model outputs against grounded records (see the module docs).

    Args:
        predictions: the model's output texts, in the records' order, or
            ``{record_id: text}`` (a Series indexed by record id works too).
        records: rows of ``records.parquet`` (a DataFrame or a list of dicts) with
            ``record_id``, ``patient_id`` and ``fields``.
        iou: the match threshold (0.5: mAP@0.5).
        n_bootstrap, seed, level: the patient bootstrap (0 resamples: no intervals).
    """
    from ..evaluate.metrics import PatientBootstrap, interval  # evaluate/ imports torch

    df = _records(records)
    ids = df["record_id"].tolist()
    texts = _predictions(predictions, ids)
    framed = [_in_frame(_fields(f, r)) for f, r in zip(df["fields"].tolist(), ids)]
    fields = [f for f, _ in framed]
    outside = np.array([k for _, k in framed], np.int64)
    n = len(fields)
    ok, malformed = np.ones(n, bool), np.zeros(n, np.int64)
    parsed = [None] * n
    for dialect in sorted({f["dialect"] for f in fields}):
        rows = [i for i, f in enumerate(fields) if f["dialect"] == dialect]
        res = parse_many([texts[i] for i in rows], [fields[i]["frame"] for i in rows], dialect)
        ok[rows], malformed[rows] = res.ok, res.malformed
        for k, i in enumerate(rows):
            parsed[i] = res.result(k)
    kinds = np.array([f["task_kind"] for f in fields])
    classes: dict[str, str] = {}
    cells: list[tuple[int, str, tuple]] = []
    ious = np.full(n, np.nan)
    for i, (f, res) in enumerate(zip(fields, parsed)):
        if f["task_kind"] == "phrase":
            gt = np.array([b["box"] for b in f["boxes"]], np.float64).reshape(-1, 4)
            ious[i] = union_iou(res.boxes, gt) if ok[i] else 0.0
            continue
        for b in f["boxes"]:
            classes.setdefault(class_key(_name(b)), _name(b))
        keys, boxes = [], []
        for phrase, bx in res.items:
            if bx is not None:
                keys += [class_key(phrase)] * len(bx)
                boxes.append(bx)
                classes.setdefault(class_key(phrase), phrase)
        xyxy = np.concatenate(boxes) if boxes else np.zeros((0, 4))
        for c, counts in _detection(f["boxes"], keys, xyxy, iou).items():
            cells.append((i, c, counts))
    names = sorted(classes)
    col = {c: j for j, c in enumerate(names)}
    counts = np.zeros((3, n, len(names)))
    for i, c, (tp, npred, nobj) in cells:
        counts[:, i, col[c]] += (tp, npred, nobj)
    boot = PatientBootstrap(df["patient_id"].tolist(), n_bootstrap=n_bootstrap, seed=seed)
    det, phr = (kinds == "detection").astype(float), (kinds == "phrase").astype(float)
    point = _panel(np.ones((1, n)), counts, ious, phr, ok)
    samples = {k: np.full((boot.n_bootstrap,) + v.shape[1:], np.nan) for k, v in point.items()}
    for sl, w in boot.chunks():
        for k, v in _panel(w, counts, ious, phr, ok).items():
            samples[k][sl] = v
    summary = []
    for metric, subset in (("map50", det), ("precision", det), ("recall", det),
                           ("miou", phr), ("unparsed", np.ones(n))):
        lo, hi = interval(samples[metric], level)
        summary.append((metric, float(point[metric][0]), float(lo), float(hi),
                        int(subset.sum())))
    summary.append(("malformed_boxes", float(malformed.sum()), np.nan, np.nan, n))
    tot = counts.sum(1)
    per_class = pd.DataFrame({"class": [classes[c] for c in names], "findings": tot[2],
                              "predicted": tot[1], "matched": tot[0]})
    for metric in ("precision", "recall", "ap50"):
        lo, hi = interval(samples[f"class_{metric}"], level)
        per_class[metric], per_class[f"{metric}_low"], per_class[f"{metric}_high"] = \
            point[f"class_{metric}"][0], lo, hi
    per_record = pd.DataFrame({"record_id": ids, "patient_id": df["patient_id"].tolist(),
                               "task_kind": kinds, "ok": ok, "malformed": malformed,
                               "predicted": counts[1].sum(1), "matched": counts[0].sum(1),
                               "findings": counts[2].sum(1), "iou": ious,
                               "outside_frame": outside})
    return GroundingScores(pd.DataFrame(summary, columns=["metric", "value", "ci_low",
                                                          "ci_high", "n_records"]),
                           per_class, per_record)


def _panel(w: np.ndarray, counts: np.ndarray, ious, phr, ok) -> dict:
    """Every metric for each weight row ``w`` (b, n) at once."""
    tp, npred, nobj = (w @ counts[k] for k in range(3))  # (b, classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec, rec = tp / npred, tp / nobj
        ap = np.where(nobj > 0, np.where(npred > 0, prec * rec, 0.0), np.nan)
        found = (nobj > 0).any(1)
        mean_ap = np.full(len(w), np.nan)
        mean_ap[found] = np.nanmean(ap[found], axis=1)
        out = {"class_precision": prec, "class_recall": rec, "class_ap50": ap,
               "map50": mean_ap,
               "precision": tp.sum(1) / npred.sum(1), "recall": tp.sum(1) / nobj.sum(1),
               "miou": (w @ np.nan_to_num(ious * phr)) / (w @ phr),
               "unparsed": (w @ (~ok).astype(float)) / w.sum(1)}
    return out
