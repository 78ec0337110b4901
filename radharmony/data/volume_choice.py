"""The one volume of each study: :func:`chosen_volumes`, the rule the dataset's
``one_per_study=True`` and the mixtures' CT tasks both follow, so that a study is read
through the same reconstruction everywhere.

Two reconstructions of a CT-RATE scan (a thin and a thick one, or two kernels) share one
report and one label row. The rule: the smallest ``spacing_z``, then the smallest in-plane
pixel area (``spacing_x * spacing_y``), then the lowest ``reconstruction`` number, then table
order; a column the table lacks, or a missing value, decides nothing (it sorts last).
"""

from __future__ import annotations

import numpy as np

#: the columns the rule reads, in the order they decide (ascending)
RULE_COLUMNS = ("spacing_z", "_inplane", "reconstruction")


def chosen_volumes(table) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, study ids)``: the one volume of each study (first-seen study order) by
    the module's rule.

    >>> import pandas as pd
    >>> t = pd.DataFrame({"study_id": ["a", "a", "b"], "spacing_z": [1.5, 1.0, 2.0],
    ...                   "reconstruction": [1, 2, 1]})
    >>> [p.tolist() for p in chosen_volumes(t)]
    [[1, 2], ['a', 'b']]
    """
    n = len(table)
    study = table["study_id"].astype(str).to_numpy(object)
    keys = []
    for col in RULE_COLUMNS:
        if col == "_inplane":
            v = table["spacing_x"].to_numpy(np.float64) * table["spacing_y"].to_numpy(
                np.float64) if {"spacing_x", "spacing_y"} <= set(table.columns) else None
        else:
            v = table[col].to_numpy(np.float64, na_value=np.nan) if col in table.columns \
                else None
        keys.append(np.where(np.isnan(v), np.inf, v) if v is not None else np.zeros(n))
    codes, uniques = _factorize(study)
    # lexsort: the last key decides first; the table order breaks the last ties
    order = np.lexsort((np.arange(n), *reversed(keys), codes))
    first = np.ones(n, bool)
    first[1:] = codes[order][1:] != codes[order][:-1]
    pos = order[first]
    return pos, uniques[codes[pos]]


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    import pandas as pd

    codes, uniques = pd.factorize(pd.Series(values, dtype=object), sort=False)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


__all__ = ["RULE_COLUMNS", "chosen_volumes"]
