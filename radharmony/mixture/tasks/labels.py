"""Labels as text, per image, in the canonical label space (:mod:`radharmony.vocabulary`).

* ``classify_findings``: the present / absent / uncertain lists of the findings the dataset's
  labels name; a finding the source does not label is in no list (never stated absent). An
  image with no known finding is skipped (``no_labels``).
* ``finding_question``: one closed question per (image, finding) with a known value: yes / no
  / uncertain.

``no_finding`` is not a finding to ask about or to list as absent or uncertain: a normal image
lists ``No finding`` as present (beside the findings its labels rule out).

Labels from radharmony's report labeler (a source built with ``labels: report``) are silver:
``fields["silver"]`` is true and the target says nothing else differently.
"""

from __future__ import annotations

import numpy as np

from ..records import fields_json, fields_json_rows
from .base import Draft, Rendered, Task, register_task

CLASSIFY_PROMPTS = ("List the findings present, absent and uncertain in this chest X-ray.",
                    "Which findings does this chest X-ray show, which are absent, and which "
                    "are uncertain?",
                    "Classify this chest radiograph: present, absent and uncertain findings.")
QUESTION_PROMPTS = ("Is there {finding} in this chest X-ray? Answer yes, no or uncertain.",
                    "Does this chest radiograph show {finding}? Answer yes, no or uncertain.",
                    "{Finding}: yes, no or uncertain?")
ANSWERS = {1.0: "yes", 0.0: "no", -1.0: "uncertain"}
_HEADS = ((1.0, "Present"), (0.0, "Absent"), (-1.0, "Uncertain"))


#: the canonical "no finding" id (radharmony.vocabulary.table.NO_FINDING)
NO_FINDING = "no_finding"


def _names() -> dict[str, str]:
    from ...vocabulary import findings as finding_table  # pandas: only when a task runs

    t = finding_table()
    return dict(zip(t["id"], t["name"]))


def labels_text(values: np.ndarray, names: list[str]) -> str:
    """``"Present: a, b\\nAbsent: c\\nUncertain: d"`` for one row of values (1 / 0 / -1 / NaN),
    a line only for a non-empty list.

    >>> labels_text(np.array([1.0, np.nan, 0.0, -1.0]), ["Edema", "Mass", "Nodule", "Fracture"])
    'Present: Edema\\nAbsent: Nodule\\nUncertain: Fracture'
    """
    lines = []
    if isinstance(values, np.ndarray):
        values = values.tolist()  # plain floats compare faster
    for v, head in _HEADS:
        got = [n for n, x in zip(names, values) if x == v]
        if got:
            lines.append(f"{head}: {', '.join(got)}")
    return "\n".join(lines)


def distinct_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(distinct rows, each row's index among them)`` of a matrix of 1 / 0 / -1 / 9 cells:
    each row read as base-4 digits (one int64 for up to 31 columns, so one 1-D sort), as
    ``np.unique(values, axis=0, return_inverse=True)`` gives them, only faster.

    >>> p, k = distinct_rows(np.array([[1.0, 9.0], [0.0, -1.0], [1.0, 9.0]]))
    >>> p.tolist(), k.tolist()
    ([[0.0, -1.0], [1.0, 9.0]], [1, 0, 1])
    """
    if not len(values) or values.shape[1] > 31:
        if not len(values):
            return np.zeros((0, values.shape[1])), np.zeros(0, np.int64)
        p, k = np.unique(values, axis=0, return_inverse=True)
        return p, k.reshape(-1)
    digit = np.select([values == -1.0, values == 0.0, values == 1.0], [0, 1, 2], 3)
    codes = digit.astype(np.int64) @ (4 ** np.arange(values.shape[1] - 1, -1, -1,
                                                     dtype=np.int64))
    _, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    return values[first], inverse.reshape(-1)


def _label_fields(ids, rows: np.ndarray, silver: bool) -> list[str]:
    """The fields of each row of label values (NaN: not labelled)."""
    labels = [{f: int(v) for f, v in zip(ids, r) if v == v} for r in rows.tolist()]
    n = len(labels)
    return fields_json_rows({"labels": labels, "silver": [silver] * n,
                             "label_space": ["canonical"] * n})


def _without_normal_doubt(ids, values: np.ndarray) -> np.ndarray:
    """``values`` with ``no_finding`` unknown unless it is 1."""
    if NO_FINDING in ids:
        values = values.copy()
        k = ids.index(NO_FINDING)
        values[values[:, k] != 1.0, k] = np.nan
    return values


def _classify(ctx) -> Draft:
    ids, values = ctx.findings()
    values = _without_normal_doubt(ids, values)
    names = _names()
    shown = [names[f] for f in ids]
    known = ~np.isnan(values)
    keep = known.any(axis=1) if values.shape[1] else np.zeros(len(values), bool)
    pos = np.flatnonzero(keep)
    # label patterns repeat: each distinct row is written once
    filled = np.where(known, values, 9.0)[pos]
    patterns, inverse = distinct_rows(filled)
    rows = np.where(patterns == 9.0, np.nan, patterns)
    texts = [labels_text(r, shown) for r in rows.tolist()]
    fields = _label_fields(ids, rows, ctx.silver)

    def render(j: np.ndarray) -> Rendered:
        k = inverse[j]
        return Rendered([texts[x] for x in k], {}, [fields[x] for x in k])

    return Draft("image", pos, render, skipped={"no_labels": int((~keep).sum())}
                 if (~keep).any() else {})


def _question(ctx) -> Draft:
    ids, values = ctx.findings()
    if NO_FINDING in ids:
        values = values.copy()
        values[:, ids.index(NO_FINDING)] = np.nan
    names = _names()
    row, col = np.nonzero(~np.isnan(values))  # row-major: an image's findings together
    no_label = len(values) - len(np.unique(row))
    image_ids = ctx.units("image").ids

    def items(j: np.ndarray) -> list:  # made per chunk: millions of pairs stay two int arrays
        return [f"{s}|{ids[c]}" for s, c in zip(image_ids[row[j]], col[j].tolist())]
    lower = [names[f][0].lower() + names[f][1:] for f in ids]
    answers = values[row, col]
    cache = {(c, v): fields_json({"finding": ids[c], "answer": ANSWERS[v],
                                  "silver": ctx.silver}) for c in range(len(ids))
             for v in ANSWERS}

    def render(j: np.ndarray) -> Rendered:
        c, v = col[j].tolist(), answers[j].tolist()  # plain numbers: faster keys
        return Rendered([ANSWERS[x] for x in v],
                        {"finding": [lower[x] for x in c], "Finding": [names[ids[x]] for x in c]},
                        [cache[(x, y)] for x, y in zip(c, v)])

    return Draft("image", row.astype(np.int64), render, item=items,
                 skipped={"no_labels": int(no_label)} if no_label else {})


register_task(Task(name="classify_findings", family="labels", needs=("images", "labels"),
                   prompts=CLASSIFY_PROMPTS, build=_classify,
                   description="present / absent / uncertain findings of an image, as text"))
register_task(Task(name="finding_question", family="labels", needs=("images", "labels"),
                   prompts=QUESTION_PROMPTS, build=_question, slots=("finding", "Finding"),
                   description="one finding, yes / no / uncertain, per image and labelled "
                               "finding"))

__all__ = ["ANSWERS", "distinct_rows", "labels_text"]
