"""Binary classification metrics with bootstrap intervals over patients, vectorized.

A bootstrap resample draws the test side's *patients* with replacement; every image of a
drawn patient enters with the patient's draw count as its weight. Each metric is written as
a function of per-image weights, so all resamples of a label are evaluated at once as one
``(B, n)`` weight matrix (in chunks that bound memory), and the same draws serve every label
(the macro average of a resample is the mean of its labels' values).

Point estimates are the metrics with every weight 1; they equal scikit-learn's
``roc_auc_score``, ``average_precision_score``, ``f1_score``, ... on the same arrays.
"""

from __future__ import annotations

import numpy as np

from ..errors import RadHarmonyError

#: metrics of the panel, in output order; ``threshold`` carries no interval
RANKING = ("auroc", "auprc")
AT_THRESHOLD = ("f1", "sensitivity", "specificity", "ppv", "npv")
METRICS = RANKING + AT_THRESHOLD
#: weights held in memory at once (resamples x images), about 32 MB of float64
_CHUNK_CELLS = 4_000_000


def choose_threshold(target: np.ndarray, score: np.ndarray, rule: str | float) -> float:
    """The score threshold (predict positive when ``score >= threshold``) chosen by ``rule``.

    ``"youden"``: maximizes sensitivity + specificity - 1; ``"f1"``: maximizes F1; a number:
    that threshold. Ties between candidate thresholds go to the higher one.
    """
    if not isinstance(rule, str):
        return float(rule)
    target = np.asarray(target, bool)
    order = np.argsort(-score, kind="stable")
    s, y = score[order], target[order]
    last = np.r_[np.flatnonzero(np.diff(s) != 0), len(s) - 1]  # end of each tie block
    tp = np.cumsum(y)[last].astype(float)
    fp = np.cumsum(~y)[last].astype(float)
    pos, neg = tp[-1], fp[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        if rule == "youden":
            gain = tp / pos - fp / neg
        elif rule == "f1":
            gain = 2 * tp / (tp + pos + fp)
        else:
            raise RadHarmonyError("Unknown threshold rule", expected="'youden', 'f1' or a "
                                  "number", found=repr(rule), fix="pass threshold='youden'")
    gain = np.nan_to_num(gain, nan=-np.inf)
    best = np.flatnonzero(gain == gain.max())[0]  # first = highest threshold
    return float(s[last[best]])


class PatientBootstrap:
    """Resamples of the patients of one test side, drawn once and shared by every label.

    Args:
        groups: the patient of every test image (any hashable values).
        n_bootstrap: number of resamples (0: point estimates only).
        seed: the draws depend only on it and on the order of ``groups``' first appearances.
    """

    def __init__(self, groups, *, n_bootstrap: int, seed: int = 0):
        import pandas as pd

        if isinstance(n_bootstrap, bool) or not isinstance(n_bootstrap, (int, np.integer)) \
                or n_bootstrap < 0:
            raise RadHarmonyError("n_bootstrap must be a non-negative integer",
                                  expected="e.g. n_bootstrap=1000 (0: no intervals)",
                                  found=repr(n_bootstrap), fix="pass n_bootstrap=1000")
        self.codes, uniques = pd.factorize(pd.Series(groups, dtype=object).astype(str))
        self.n_patients, self.n_bootstrap = len(uniques), int(n_bootstrap)
        self.seed = seed

    def chunks(self):
        """``(slice of resamples, (b, n_images) float64 weights)`` per chunk."""
        n, p = len(self.codes), self.n_patients
        if self.n_bootstrap == 0 or n == 0:
            return
        rng = np.random.default_rng([self.seed, 0x5EED])
        step = max(1, _CHUNK_CELLS // max(n, p))
        for start in range(0, self.n_bootstrap, step):
            b = min(step, self.n_bootstrap - start)
            draws = rng.integers(0, p, size=(b, p))
            counts = np.bincount((draws + p * np.arange(b)[:, None]).ravel(),
                                 minlength=b * p).reshape(b, p)
            yield slice(start, start + b), counts[:, self.codes].astype(np.float64)


def weighted_panel(target: np.ndarray, score: np.ndarray, pred: np.ndarray,
                   weights: np.ndarray) -> np.ndarray:
    """Every metric of :data:`METRICS` for each row of ``weights`` ``(b, n)``: ``(b, 7)``.

    ``target`` and ``pred`` are 0/1; images with weight 0 are absent from that resample.
    Undefined values (no positives, no predicted positives, ...) are NaN.
    """
    y = np.asarray(target, np.float64)
    p = np.asarray(pred, np.float64)
    w = np.atleast_2d(weights)
    out = np.full((w.shape[0], len(METRICS)), np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        if len(y):
            order = np.argsort(-score, kind="stable")
            s = score[order]
            starts = np.r_[0, np.flatnonzero(np.diff(s) != 0) + 1]  # tie blocks
            ws = w[:, order]
            wp = np.add.reduceat(ws * y[order], starts, axis=1)
            wn = np.add.reduceat(ws * (1 - y[order]), starts, axis=1)
            pos, neg = wp.sum(1), wn.sum(1)
            below = neg[:, None] - np.cumsum(wn, axis=1)  # negatives scored lower
            out[:, 0] = (wp * (below + 0.5 * wn)).sum(1) / (pos * neg)
            tp_c, fp_c = np.cumsum(wp, axis=1), np.cumsum(wn, axis=1)
            prec = np.where(tp_c + fp_c > 0, tp_c / (tp_c + fp_c), 0.0)
            out[:, 1] = (wp * prec).sum(1) / pos
            out[pos == 0, 1] = np.nan
        tp, fp = w @ (y * p), w @ ((1 - y) * p)
        fn, tn = w @ (y * (1 - p)), w @ ((1 - y) * (1 - p))
        out[:, 2] = 2 * tp / (2 * tp + fp + fn)
        out[:, 3] = tp / (tp + fn)
        out[:, 4] = tn / (tn + fp)
        out[:, 5] = tp / (tp + fp)
        out[:, 6] = tn / (tn + fn)
    return out


def interval(samples: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0, ignoring NaN resamples (NaN when all are)."""
    lo_q, hi_q = 50 * (1 - level), 50 * (1 + level)
    samples = np.asarray(samples, np.float64)
    if samples.shape[0] == 0:
        nan = np.full(samples.shape[1:], np.nan)
        return nan, nan.copy()
    ok = ~np.isnan(samples).all(axis=0)
    lo = np.full(samples.shape[1:], np.nan)
    hi = lo.copy()
    if ok.any():
        q = np.nanpercentile(samples[:, ok], [lo_q, hi_q], axis=0)
        lo[ok], hi[ok] = q[0], q[1]
    return lo, hi
