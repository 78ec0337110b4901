"""Label helpers shared by every dataset: exact-term multi-hot and the uncertain-label policy.

Table values: ``1`` positive, ``0`` negative, ``-1`` uncertain, ``NaN`` not mentioned. The
table always keeps -1 and NaN apart. What a sample's ``cls`` tensor holds is a dataset option
(:class:`UncertainLabelsMixin`); missing always becomes 0 there, and ``cls_mask`` marks which
targets are usable (:func:`radharmony.data.sampling.cls_targets`).
"""

from __future__ import annotations

from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from ..errors import MetadataError, RadHarmonyError

#: ``uncertain=`` values: what an uncertain (-1) label becomes in ``cls`` (``"ignore"``: 0,
#: masked out of ``cls_mask`` like ``"keep"``).
UNCERTAIN_POLICIES = {"keep": -1.0, "zeros": 0.0, "ones": 1.0, "ignore": 0.0}


def term_index(label_terms: Mapping[str, Iterable[str]]) -> dict[str, list[int]]:
    """Exact term -> indices of the labels it sets (one term may set several labels)."""
    index: dict[str, list[int]] = {}
    for j, terms in enumerate(label_terms.values()):
        if isinstance(terms, str):
            name = list(label_terms)[j]
            raise RadHarmonyError(f"The terms of label {name!r} are one string",
                                  expected="a tuple of exact terms", found=repr(terms),
                                  fix=f"write {name!r}: ({terms!r},)")
        for t in terms:
            index.setdefault(t, []).append(j)
    return index


def multi_hot(values: pd.Series, parse: Callable[[str], list[str]],
              label_terms: Mapping[str, Iterable[str]], *, vocabulary: Iterable[str] | None = None,
              source: str = "metadata", column: str = "labels") -> tuple[np.ndarray, np.ndarray]:
    """Multi-hot labels from a column of term lists, matching whole terms only.

    Args:
        values: one cell per image (a string the dataset encodes its terms in, or missing).
        parse: the cell's string -> its terms; called once per distinct string.
        label_terms: label name -> the exact terms that make it positive (never substrings).
        vocabulary: when given, every term must be in it (a closed label set) or this raises.

    Returns ``(float32 (n, n_labels), terms)``: 1 when a mapped term is present, 0 when not,
    NaN for a missing cell; ``terms`` holds each row's parsed term list (None when missing).
    """
    index = term_index(label_terms)
    vocab = None if vocabulary is None else frozenset(vocabulary)
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    table = np.zeros((len(uniques) + 1, len(label_terms)), np.float32)
    table[-1] = np.nan  # code -1 (missing) picks the last row
    parsed = np.empty(len(uniques) + 1, dtype=object)
    for u, cell in enumerate(uniques):
        terms = parse(cell)
        if vocab is not None and not vocab.issuperset(terms):
            row = int(np.flatnonzero(codes == u)[0])
            raise MetadataError(f"{source}, row {row}: unknown term in {column}",
                                expected=f"terms from {sorted(vocab)}",
                                found=f"{sorted(set(terms) - vocab)} in {cell!r}",
                                fix="check the file is the release this dataset expects")
        parsed[u] = terms
        for t in terms:
            table[u, index.get(t, [])] = 1.0
    return table[codes], parsed[codes]


def decode_cells(text: pd.DataFrame, codes: Mapping[str, float], *, source: str = "metadata"
                 ) -> np.ndarray:
    """Label cells written as text (``"-1.0"``, ``"YES"``) -> float32 through ``codes``.

    Empty cells become NaN; any other text not in ``codes`` raises, naming row and column.
    Each column is factorized, so the lookup runs once per distinct cell text.
    """
    out = np.empty(text.shape, np.float32)
    for j, col in enumerate(text.columns):
        cells, uniques = pd.factorize(text[col], use_na_sentinel=True)
        unknown = [u for u in uniques if u not in codes]
        if unknown:
            row = int(np.flatnonzero(text[col].to_numpy(dtype=object) == unknown[0])[0])
            raise MetadataError(f"{source}, row {row}: label {col!r} has an unknown value",
                                expected=f"one of {sorted(codes)} or empty",
                                found=repr(unknown[0]), fix="pass the table as released "
                                "(do not fill or recode its cells)")
        lookup = np.array([codes[u] for u in uniques] + [np.nan], np.float32)
        out[:, j] = lookup[cells]
    return out


def check_policy(uncertain: str) -> float:
    """The ``cls`` value for uncertain labels under policy ``uncertain``, or raise."""
    if uncertain not in UNCERTAIN_POLICIES:
        raise RadHarmonyError("Unknown uncertain-label policy", expected=f"uncertain= one of "
                              f"{sorted(UNCERTAIN_POLICIES)}", found=repr(uncertain),
                              fix="pass uncertain='keep' (-1 stays, masked), 'ignore' (0, "
                                  "masked), 'zeros' or 'ones'")
    return UNCERTAIN_POLICIES[uncertain]


class UncertainLabelsMixin:
    """Adds the keyword ``uncertain=`` to a dataset whose table holds -1 (uncertain) labels.

    What ``cls`` holds for -1, and whether ``cls_mask`` counts it:

    * ``"keep"`` (default): -1, masked out (``cls_mask`` 0);
    * ``"ignore"``: 0, masked out;
    * ``"zeros"`` (U-Zeros) / ``"ones"`` (U-Ones): 0 / 1, counted (``cls_mask`` 1).

    Missing labels are 0 in ``cls`` and 0 in ``cls_mask`` in every policy; train with the
    mask (e.g. ``binary_cross_entropy_with_logits(logits, cls, weight=cls_mask)``) so that
    neither -1 nor an unknown label reaches the loss. Put the mixin before
    ``BaseRadiologicalDataset`` in the bases.
    """

    def __init__(self, *args, uncertain: str = "keep", **kwargs):
        check_policy(uncertain)
        self.uncertain = uncertain
        super().__init__(*args, **kwargs)
