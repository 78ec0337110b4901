"""Linear and k-nearest-neighbour probes over frozen embeddings, per label.

Two modes:

* **k-fold** (``test=None``): the dataset's patients are dealt into ``folds`` folds
  (:func:`radharmony.data.splits.assign_folds` on ``spec.group_col``, the same partition as
  ``dataset.get_folds(folds, seed=seed)``); each fold's images are scored by a probe fitted on
  the other folds, and the metrics are computed on the pooled out-of-fold scores.
* **fixed split** (``test=<dataset>``): fitted on ``dataset``, scored on ``test``.

Labels and their masks come from :func:`targets`: a value of 1 is positive, 0 negative; -1
(uncertain) and NaN (not mentioned) are left out of that label's training and scoring. The
operating threshold (``"youden"``, ``"f1"`` or a number) is chosen on the training side's
scores of the fitted probe (for kNN, leaving each training image out of its own
neighbours) and applied to the test side. Intervals come from a bootstrap over the test
side's patients (:mod:`radharmony.evaluate.metrics`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import RadHarmonyError
from ..data.splits import assign_folds
from .metrics import PatientBootstrap
from .scoring import _level
from .sides import _side, targets

__all__ = ["ProbeResult", "knn_probe", "linear_probe", "targets"]

EXTRA = "pip install radharmony[eval]"


# -- probes: fit on (x, y), score the test rows and the training rows ------------------------------
def _linear(x_tr, y_tr, x_te, *, seed, C, max_iter):
    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise RadHarmonyError("linear_probe needs scikit-learn", expected="scikit-learn "
                              "installed", found="it is not", fix=EXTRA) from None
    model = LogisticRegression(C=C, class_weight="balanced", max_iter=max_iter,
                               random_state=seed)
    model.fit(x_tr, y_tr)
    return model.decision_function(x_te), model.decision_function(x_tr)


def _knn_scores(x_q, x_ref, y_ref, k, *, exclude_self=False):
    """Fraction of positives among each query's ``k`` most cosine-similar references."""
    out = np.empty(len(x_q))
    step = max(1, 2_000_000 // max(1, len(x_ref)))
    for s in range(0, len(x_q), step):
        sim = x_q[s:s + step] @ x_ref.T
        if exclude_self:
            sim[np.arange(len(sim)), np.arange(s, s + len(sim))] = -np.inf
        kk = min(k, x_ref.shape[0] - exclude_self)
        top = np.argpartition(-sim, kk - 1, axis=1)[:, :kk]
        out[s:s + step] = y_ref[top].mean(1)
    return out


def _knn(x_tr, y_tr, x_te, *, k):
    return _knn_scores(x_te, x_tr, y_tr, k), _knn_scores(x_tr, x_tr, y_tr, k, exclude_self=True)


# -- results ------------------------------------------------------------------------------------
@dataclass
class ProbeResult:
    """What a probe measured.

    Attributes:
        metrics: tidy table, one row per (``n_train``,) label and metric; columns
            ``label, metric, value, ci_low, ci_high, n_pos, n_neg, n_patients, reason`` (and
            ``n_train`` first when it was given). ``label == "macro"`` rows average the labels
            with a value (their interval from the same resamples). A label that cannot be
            measured has NaN values and says why in ``reason``.
        predictions: long table of test-side scores: ``n_train, label, sample_id, group,
            fold, target, score, pred, threshold`` (usable rows only).
        folds: the fold of every row of the dataset (k-fold mode; None otherwise).
    """

    metrics: pd.DataFrame
    predictions: pd.DataFrame
    folds: np.ndarray | None = None
    settings: dict = field(default_factory=dict)

    def to_csv(self, path: str | os.PathLike, **kwargs) -> None:
        """Write :attr:`metrics` as CSV (no index)."""
        self.metrics.to_csv(path, index=False, **kwargs)

    def value(self, label: str, metric: str, n_train=None) -> float:
        m = self.metrics
        sel = (m["label"] == label) & (m["metric"] == metric)
        if n_train is not None:
            sel &= m["n_train"] == n_train
        return float(m.loc[sel, "value"].iloc[0])

    def plot_roc(self, **kwargs):
        """ROC curve per label (see :func:`radharmony.evaluate.plots.plot_roc`)."""
        from .plots import plot_roc

        return plot_roc(self, **kwargs)

    def plot_label_efficiency(self, **kwargs):
        """Metric against ``n_train`` (see :func:`~radharmony.evaluate.plot_label_efficiency`)."""
        from .plots import plot_label_efficiency

        return plot_label_efficiency(self, **kwargs)


def _check_args(folds, n_train, threshold):
    if isinstance(threshold, str) and threshold not in ("youden", "f1"):
        raise RadHarmonyError("Unknown threshold rule", expected="'youden', 'f1' or a number",
                              found=repr(threshold), fix="pass threshold='youden'")
    levels = n_train if isinstance(n_train, (list, tuple, np.ndarray)) else [n_train]
    for n in levels:
        if n is not None and (isinstance(n, bool) or not isinstance(n, (int, np.integer))
                              or n < 1):
            raise RadHarmonyError("n_train must be a positive number of patients",
                                  expected="an int, a list of ints, or None (all)",
                                  found=repr(n), fix="pass e.g. n_train=[10, 100, 1000]")
    return [None if n is None else int(n) for n in levels]


def _run(fit, embeddings, dataset, *, folds, seed, n_bootstrap, test, n_train, threshold,
         normalize, ci) -> ProbeResult:
    levels = _check_args(folds, n_train, threshold)
    train = _side(embeddings, dataset, normalize, by_order=test is None)
    if test is None:
        fold_of = assign_folds(pd.Series(train.groups), folds, seed=seed)
        splits = [(np.flatnonzero(fold_of != k), np.flatnonzero(fold_of == k), k)
                  for k in range(folds)]
        evalside = train
    else:
        fold_of = None
        evalside = _side(embeddings, test, normalize, by_order=False)
        if evalside.names != train.names:
            raise RadHarmonyError("The test dataset's labels differ from the training "
                                  "dataset's", expected=f"labels {train.names}",
                                  found=f"{evalside.names}", fix="probe datasets with the same "
                                  "labels (or merge them so targets() aligns them)")
        splits = [(np.arange(len(train.ids)), np.arange(len(evalside.ids)), -1)]
    boot = PatientBootstrap(evalside.groups, n_bootstrap=n_bootstrap, seed=seed)
    tables, preds = [], []
    for level in levels:
        table, pred = _level(fit, train, evalside, splits, level, seed, threshold, boot, ci)
        if n_train is not None:
            table.insert(0, "n_train", level if level is not None else -1)
            pred.insert(0, "n_train", level if level is not None else -1)
        tables.append(table)
        preds.append(pred)
    return ProbeResult(pd.concat(tables, ignore_index=True), pd.concat(preds, ignore_index=True),
                       fold_of, {"folds": folds if test is None else None, "seed": seed,
                                 "n_bootstrap": n_bootstrap, "threshold": threshold,
                                 "train_patients": float(np.mean(
                                     [len(np.unique(train.groups[tr])) for tr, _, _ in splits]))})


def linear_probe(embeddings, dataset, *, folds: int = 5, seed: int = 0,
                 n_bootstrap: int = 1000, test=None, n_train=None, threshold="youden",
                 C: float = 1.0, max_iter: int = 2000, normalize: bool = True,
                 ci: float = 0.95) -> ProbeResult:
    """Class-balanced logistic regression per label on frozen embeddings.

    Args:
        embeddings: from :func:`embed` (a list of them is joined), or computed elsewhere:
            a ``{sample_id: vector}`` mapping, a DataFrame indexed by ``sample_id``, or an
            (N, D) array / tensor in ``dataset``'s row order (k-fold mode; with ``test`` use a
            keyed form). Keyed forms must cover every ``sample_id`` of ``dataset`` (and of
            ``test``); see :func:`~radharmony.evaluate.embeddings.as_embeddings`.
        dataset: the labelled dataset (k-fold mode) or the training side (with ``test``).
        folds: patient-grouped folds in k-fold mode (ignored with ``test``).
        seed: folds, ``n_train`` subsampling and bootstrap draws depend only on it.
        n_bootstrap: resamples of the test side's patients for the intervals (0: none).
        test: a dataset to score instead of cross-validating (fixed-split mode).
        n_train: training *patients* to keep (all their images), an int or a list for a
            label-efficiency curve; the same seeded patient order is used for each size (a
            smaller set is part of every larger one). None: all.
        threshold: ``"youden"``, ``"f1"`` or a fixed score (the probe's decision function,
            0 = the logistic regression's own boundary).
        C, max_iter: scikit-learn ``LogisticRegression`` options (lbfgs,
            ``class_weight="balanced"``).
        normalize: L2-normalize the embeddings first.

    Returns a :class:`ProbeResult`; ``result.metrics`` is the tidy table.

    Example::

        emb = embed(encoder, ds)
        res = linear_probe(emb, ds, folds=5)
        res.metrics.query("metric == 'auroc'")
    """
    def fit(x_tr, y_tr, x_te):
        return _linear(x_tr, y_tr, x_te, seed=seed, C=C, max_iter=max_iter)

    return _run(fit, embeddings, dataset, folds=folds, seed=seed, n_bootstrap=n_bootstrap,
                test=test, n_train=n_train, threshold=threshold, normalize=normalize, ci=ci)


def knn_probe(embeddings, dataset, *, k: int = 20, folds: int = 5, seed: int = 0,
              n_bootstrap: int = 1000, test=None, n_train=None, threshold="youden",
              normalize: bool = True, ci: float = 0.95) -> ProbeResult:
    """k-nearest-neighbour probe per label: a test image's score is the fraction of positives
    among its ``k`` most cosine-similar training images (those with a usable label).
    Other arguments as :func:`linear_probe`; the training-side scores that choose the
    threshold leave each image out of its own neighbours."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise RadHarmonyError("knn_probe k must be a positive integer", expected="e.g. k=20",
                              found=repr(k), fix="pass k=20")

    def fit(x_tr, y_tr, x_te):
        return _knn(x_tr, y_tr, x_te, k=int(k))

    return _run(fit, embeddings, dataset, folds=folds, seed=seed, n_bootstrap=n_bootstrap,
                test=test, n_train=n_train, threshold=threshold, normalize=normalize, ci=ci)
