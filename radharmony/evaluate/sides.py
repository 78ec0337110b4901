"""The two sides of a probe: each row's embedding, labels, usable mask and patient.

:func:`targets` reads a dataset's labels (1 positive, 0 negative; -1 and NaN masked) in its row
order without decoding images; a side pairs them with the rows' embeddings and groups.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import RadHarmonyError
from .embeddings import as_embeddings


def targets(dataset) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(labels (N, L) float32 0/1, usable mask (N, L) bool, label names)`` of ``dataset``,
    in its row order, read from its table without decoding images.

    A dataset that defines ``targets()`` is asked first; it returns either such a tuple or a
    DataFrame with one column per label holding 1 / 0 / -1 / NaN (a dataset merged from
    several sources does this, masking the labels a source does not have). Otherwise the
    columns ``dataset.spec.label_cols`` of ``dataset.harmonized_df`` are read. Usable
    means exactly 0 or 1; -1 (uncertain) and NaN (not mentioned) are masked.
    """
    own = getattr(dataset, "targets", None)
    if callable(own):
        got = own()
        if isinstance(got, tuple):
            labels, mask, names = got
            labels, mask = np.asarray(labels, np.float32), np.asarray(mask, bool)
            return np.where(mask, labels, 0).astype(np.float32), mask, list(names)
        table = pd.DataFrame(got)
    else:
        spec = getattr(dataset, "spec", None)
        cols = list(getattr(spec, "label_cols", ()) or ())
        if not cols:
            raise RadHarmonyError(f"{type(dataset).__name__} has no labels to probe",
                                  expected="a dataset whose spec lists label_cols, or a "
                                  "targets() method", found="no label columns",
                                  fix="probe a labelled dataset (e.g. NIH, CheXpert)")
        table = dataset.harmonized_df[cols]
    values = table.to_numpy(np.float64, na_value=np.nan)
    mask = (values == 0) | (values == 1)
    return np.where(mask, values, 0).astype(np.float32), mask, [str(c) for c in table.columns]


def _groups(dataset) -> np.ndarray:
    col = getattr(getattr(dataset, "spec", None), "group_col", "patient_id")
    return dataset.harmonized_df[col].astype(str).to_numpy()


@dataclass
class _Side:
    ids: np.ndarray
    groups: np.ndarray
    x: np.ndarray
    y: np.ndarray
    mask: np.ndarray
    names: list


def _side(embeddings, dataset, normalize: bool, *, by_order: bool = True) -> _Side:
    if not hasattr(dataset, "harmonized_df"):
        raise RadHarmonyError("Probes need a radharmony dataset", expected="an object with "
                              "harmonized_df (and spec.label_cols or targets())",
                              found=type(dataset).__name__, fix="pass the dataset you embedded")
    ids = dataset.harmonized_df["sample_id"].astype(str).to_numpy()
    x = as_embeddings(embeddings, dataset, by_order=by_order).lookup(ids).astype(np.float64)
    if normalize:
        x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    y, mask, names = targets(dataset)
    return _Side(ids, _groups(dataset), x, y, mask, names)


def _subsample(groups: np.ndarray, rows: np.ndarray, n: int | None, seed: int) -> np.ndarray:
    """``rows`` restricted to the first ``n`` of its patients in a seeded order (nested in n)."""
    if n is None:
        return rows
    uniq = np.unique(groups[rows])
    if n > len(uniq):
        raise RadHarmonyError(f"n_train={n} exceeds the training patients",
                              expected=f"at most {len(uniq)} patients",
                              found=f"n_train={n}", fix="pass smaller n_train values")
    keep = np.random.default_rng([seed, 0x7EA1]).permutation(uniq)[:n]
    return rows[np.isin(groups[rows], keep)]
