"""radharmony's labeler next to the published ChestX-ray8 (NIH) labeler on OpenI.

Wang et al. 2017 ("ChestX-ray8: Hospital-scale Chest X-ray Database and Benchmarks on
Weakly-Supervised Classification and Localization of Common Thorax Diseases", CVPR), Table 2,
evaluate their report labeler (DNorm and MetaMap mentions, negation and uncertainty removed
on the dependency parse) on 2,435 OpenI reports against OpenI's human annotations, for their
eight findings and Normal. :data:`CHESTXRAY8_TABLE2` holds their published numbers;
:func:`compare` scores radharmony's labels on the same eight findings and Normal, mapped to
radharmony's canonical columns and MeSH gold (:data:`~radharmony.reports.evaluate_openi.GOLD`),
on the held-out odd ids. The protocols differ (report set, gold matching, what counts as
present): the two sides are comparable in kind, not equal in method.

    python -m benchmarks.report_labels --chestxray8
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .evaluate_openi import GOLD, _protocol, _prf, _reports, gold_labels, score_table
from .labeler import label_reports

#: Wang et al. 2017, Table 2, "Our Method" column: finding -> (precision, recall, F1) of their
#: labeler on OpenI. Their Table 1 counts the OpenI reports used: 2,435.
CHESTXRAY8_TABLE2: dict[str, tuple[float, float, float]] = {
    "Atelectasis": (0.99, 0.85, 0.91),
    "Cardiomegaly": (1.00, 0.79, 0.88),
    "Effusion": (0.93, 0.82, 0.87),
    "Infiltration": (0.74, 0.87, 0.80),
    "Mass": (0.75, 0.40, 0.52),
    "Nodule": (0.96, 0.62, 0.75),
    "Normal": (0.87, 0.99, 0.93),
    "Pneumonia": (0.66, 0.93, 0.77),
    "Pneumothorax": (0.90, 0.82, 0.86),
    "Total": (0.90, 0.91, 0.90),
}
#: their finding -> radharmony's canonical column (Normal: ``no_finding``)
COLUMNS: dict[str, str] = {
    "Atelectasis": "atelectasis", "Cardiomegaly": "cardiomegaly", "Effusion": "pleural_effusion",
    "Infiltration": "infiltration", "Mass": "mass", "Nodule": "nodule", "Normal": "no_finding",
    "Pneumonia": "pneumonia", "Pneumothorax": "pneumothorax"}
#: radharmony column -> the MeSH headings that make it gold 1 (OpenI tags a normal report
#: ``normal``)
HEADS: dict[str, tuple[str, ...]] = {c: GOLD.get(c, ("normal",)) for c in COLUMNS.values()}


def compare(path: str | Path, *, ids: str = "odd", n_boot: int = 1000, seed: int = 0,
            rules=None) -> pd.DataFrame:
    """One row per ChestX-ray8 finding (and two totals): radharmony's precision / recall / F1
    under the ``"issue"`` and ``"graded"`` protocols (``issue_*``, ``graded_*``; F1's
    bootstrap 95 % interval under graded), next to the published ``nih_*`` numbers.

    ``Total`` pools every row's counts, Normal included (a micro average: the published
    total's recall, 0.91, is what their Table 1 counts and per-row recalls give pooled over
    the nine rows, 0.908, and not over the eight findings, 0.80); ``Total (8 findings)``
    leaves Normal out."""
    df = _reports(path, ids)
    gold = gold_labels(df["major"], HEADS)
    cols = list(COLUMNS.values())
    out = pd.DataFrame({"finding": list(COLUMNS) + ["Total", "Total (8 findings)"],
                        "column": cols + ["", ""],
                        "gold": ["; ".join(HEADS[c]) for c in cols] + ["", ""]})
    g = gold[cols].to_numpy(bool)
    out["positives"] = [*g.sum(axis=0).tolist(), int(g.sum()), int(_drop(g).sum())]
    rng = np.random.default_rng(seed)
    boot = rng.integers(0, len(df), size=(n_boot, len(df)))
    for name in ("issue", "graded"):
        probable, present = _protocol(name)
        pred = label_reports(df["sections"], vocabulary="canonical", rules=rules,
                             probable=probable)
        t = score_table(gold, pred, HEADS, n_boot=n_boot, seed=seed, present=present)
        p = pred[cols].isin(present).to_numpy()
        totals = [_pooled(g, p, boot), _pooled(_drop(g), _drop(p), boot)]
        out[f"{name}_precision"] = [*t["precision"], *(x[0] for x in totals)]
        out[f"{name}_recall"] = [*t["recall"], *(x[1] for x in totals)]
        out[f"{name}_f1"] = [*t["f1"], *(x[2] for x in totals)]
        out[f"{name}_f1_lo"] = [*t["f1_lo"], *(x[3] for x in totals)]
        out[f"{name}_f1_hi"] = [*t["f1_hi"], *(x[4] for x in totals)]
    published = {**CHESTXRAY8_TABLE2, "Total (8 findings)": (np.nan,) * 3}
    for k, name in enumerate(("precision", "recall", "f1")):
        out[f"nih_{name}"] = [published[f][k] for f in out["finding"]]
    return out


def _drop(a: np.ndarray) -> np.ndarray:
    """The columns of ``a`` without Normal's."""
    keep = [k for k, c in enumerate(COLUMNS.values()) if c != "no_finding"]
    return a[:, keep]


def _pooled(gold: np.ndarray, pred: np.ndarray, boot: np.ndarray) -> tuple[float, ...]:
    """Precision, recall, F1 of all cells of ``gold`` / ``pred`` pooled (reports x columns),
    and F1's bootstrap 95 % interval over reports (``boot``: resampled row indices)."""
    p, r, f = _prf(gold.ravel(), pred.ravel())
    if not len(boot):
        return p, r, f, np.nan, np.nan
    f1s = [_prf(gold[b].ravel(), pred[b].ravel())[2] for b in boot]
    lo, hi = np.nanpercentile(f1s, [2.5, 97.5])
    return p, r, f, float(lo), float(hi)
