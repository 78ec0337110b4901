"""Scoring ``reg``, ``grade`` and ``side`` predictions, with bootstrap intervals over patients.

Each function takes a model's predictions beside the targets and masks a dataset's samples
carry (``reg`` / ``reg_mask``, ``grade`` / ``grade_mask``, ``side`` / ``side_mask``; e.g. the
columns of a collated batch stacked over a test split) and the patient of every image, and
returns a tidy table in the probes' columns (:data:`radharmony.evaluate.scoring.COLUMNS`
without ``n_pos`` / ``n_neg``, with ``n`` the images scored): one row per target and metric.
Intervals come from the same patient bootstrap as the probes
(:class:`radharmony.evaluate.metrics.PatientBootstrap`): a resample draws patients with
replacement, their images weighted by the draw count, so a patient's images never count as
independent.

>>> import numpy as np
>>> t = regression_scores([[130.0], [100.0], [52.0]], [[120.0], [100.0], [np.nan]],
...                       groups=["a", "a", "b"], names=["bone_age_months"], n_bootstrap=0)
>>> t[["label", "metric", "value", "n", "n_patients"]].values.tolist()[:2]
[['bone_age_months', 'mae', 5.0, 2, 1], ['bone_age_months', 'rmse', 7.0710678118654755, 2, 1]]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import RadHarmonyError
from .metrics import PatientBootstrap, interval

COLUMNS = ("label", "metric", "value", "ci_low", "ci_high", "n", "n_patients", "reason")
#: metrics of :func:`regression_scores`; ``ordinal=True`` adds ``exact`` and ``within_one``
REGRESSION = ("mae", "rmse", "bias")
ORDINAL = ("exact", "within_one")


def _matrix(name: str, values, n: int | None = None, dims: int = 2) -> np.ndarray:
    arr = np.asarray(values.detach().cpu() if hasattr(values, "detach") else values,
                     dtype=np.float64)
    if arr.ndim == dims - 1:
        arr = arr[:, None]
    if arr.ndim != dims or (n is not None and len(arr) != n):
        raise RadHarmonyError(f"scoring: {name} has the wrong shape",
                              expected=f"{dims}-D, one row per image"
                              + (f" ({n} rows)" if n is not None else ""),
                              found=f"shape {arr.shape}",
                              fix="stack the samples' values (a collated batch's tensor)")
    return arr


def _panel(errors: dict, known: np.ndarray, boot: PatientBootstrap, level: float
           ) -> list[tuple]:
    """``(metric, value, low, high)`` for each ``metric -> (n,) per-image value`` (mean over
    the known images; ``rmse``: root of the mean), with the bootstrap interval."""
    out = []
    w1 = known.astype(np.float64)
    for metric, per_image in errors.items():
        v = np.where(known, per_image, 0.0)

        def mean(w):
            with np.errstate(invalid="ignore", divide="ignore"):
                m = (w @ v) / w.sum(axis=-1)
            return np.sqrt(m) if metric == "rmse" else m

        value = float(mean(w1[None, :])[0])
        draws = [mean(w * w1) for _, w in boot.chunks()]
        lo, hi = interval(np.concatenate(draws)[:, None] if draws else np.empty((0, 1)), level)
        out.append((metric, value, float(lo[0]), float(hi[0])))
    return out


def _scores(names, columns: list[tuple[np.ndarray, dict]], groups, n_bootstrap: int,
            seed: int, level: float) -> pd.DataFrame:
    rows = []
    groups = np.asarray(groups, dtype=object)
    for name, (known, errors) in zip(names, columns):
        n = int(known.sum())
        patients = len(pd.unique(groups[known]))
        if n == 0:
            rows += [(name, m, np.nan, np.nan, np.nan, 0, 0, "no known target")
                     for m in errors]
            continue
        boot = PatientBootstrap(groups[known], n_bootstrap=n_bootstrap, seed=seed)
        sub = {m: e[known] for m, e in errors.items()}
        rows += [(name, m, v, lo, hi, n, patients, None)
                 for m, v, lo, hi in _panel(sub, np.ones(n, bool), boot, level)]
    return pd.DataFrame(rows, columns=list(COLUMNS))


def regression_scores(pred, target, *, groups, mask=None, names=None, ordinal: bool = False,
                      n_bootstrap: int = 1000, seed: int = 0, level: float = 0.95
                      ) -> pd.DataFrame:
    """MAE, RMSE and bias (mean of prediction - target) of every target column, with
    ``level`` intervals from ``n_bootstrap`` resamples of the patients.

    Args:
        pred, target: ``(N, K)`` (or ``(N,)``) predictions and targets (``reg`` or
            ``grade``); a NaN target is unknown.
        groups: the patient of every image (``harmonized_df["patient_id"]``).
        mask: ``(N, K)``, 1 where the target is known (the sample's ``reg_mask`` /
            ``grade_mask``); default: wherever ``target`` is not NaN.
        names: the K targets' names (``spec.reg_cols``, ``spec.grades``).
        ordinal: also ``exact`` (the rounded prediction equals the grade) and
            ``within_one`` (it is at most one grade off), for ``grade`` predictions.
    """
    target = _matrix("target", target)
    pred = _matrix("pred", pred, len(target))
    known = ~np.isnan(target) if mask is None else _matrix("mask", mask, len(target)) > 0
    known &= ~np.isnan(pred)
    names = list(names) if names is not None else [str(k) for k in range(target.shape[1])]
    columns = []
    for k in range(target.shape[1]):
        diff = np.nan_to_num(pred[:, k] - target[:, k])
        errors = {"mae": np.abs(diff), "rmse": diff ** 2, "bias": diff}
        if ordinal:
            off = np.abs(np.round(pred[:, k]) - np.nan_to_num(target[:, k]))
            errors.update(exact=(off == 0).astype(float), within_one=(off <= 1).astype(float))
        columns.append((known[:, k], errors))
    return _scores(names, columns, groups, n_bootstrap, seed, level)


def side_scores(pred, target, *, groups, mask, names=None, threshold: float = 0.5,
                n_bootstrap: int = 1000, seed: int = 0, level: float = 0.95) -> pd.DataFrame:
    """How often the predicted side is the finding's side: ``accuracy`` (left and right both
    right, at ``threshold``), ``left`` and ``right`` (each bit alone), over the images whose
    side is known (``side_mask`` 1).

    Args:
        pred: ``(N, S, 2)`` scores of ``[left, right]`` per finding.
        target, mask: the samples' ``side`` ``(N, S, 2)`` and ``side_mask`` ``(N, S)``.
        groups, names, n_bootstrap, seed, level: as :func:`regression_scores`.
    """
    target = _matrix("target", target, dims=3)
    pred = _matrix("pred", pred, len(target), dims=3)
    known = _matrix("mask", mask, len(target)) > 0
    guess = pred >= threshold
    truth = target > 0.5
    names = list(names) if names is not None else [str(k) for k in range(target.shape[1])]
    columns = []
    for k in range(target.shape[1]):
        hit = guess[:, k] == truth[:, k]
        columns.append((known[:, k], {"accuracy": hit.all(axis=1).astype(float),
                                      "left": hit[:, 0].astype(float),
                                      "right": hit[:, 1].astype(float)}))
    return _scores(names, columns, groups, n_bootstrap, seed, level)


__all__ = ["ORDINAL", "REGRESSION", "regression_scores", "side_scores"]
