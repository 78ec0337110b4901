"""Scoring VQA answers as the leaderboards score them: :func:`vqa_metrics`.

* ``mcq``: accuracy of the letter read from each prediction
  (:func:`radharmony.vqa.letters.find_letters`: tags, boxes, Markdown, "option c", the
  option's text, ...); a prediction with no letter, with two different letters, or with a
  letter outside the question's options, is wrong and counted (``no_letter``, ``ambiguous``,
  ``outside_options``). Overall and per skill, the skills named as in
  ReXrank's VQA table (:data:`REXRANK_SKILLS`); :func:`rexrank_row` gives that table's row.
* ``closed``: accuracy of the normalised answer (a yes/no answer also matches a prediction
  that starts with it: "Yes, there is ...").
* ``open``: token F1 and token recall of the normalised prediction against the answer
  (SQuAD-style bag of tokens), averaged over questions.

Every value has a 95 % interval from resampling the *patients* with replacement
(:class:`radharmony.evaluate.metrics.PatientBootstrap`, seeded), so questions of one patient
move together.
"""

from __future__ import annotations

import re
import warnings
from collections import Counter

import numpy as np
import pandas as pd

from ..errors import RadHarmonyError
from ..evaluate.metrics import PatientBootstrap, interval
from .letters import extract_letter, find_letters  # noqa: F401 (kept importable here)

#: ReXrank's VQA columns (``vqa_results.csv``), after ``Overall Accuracy``
REXRANK_SKILLS = ("Differential Diagnosis", "Geometric Information Assessment",
                  "Location and Distribution Assessment", "Negation Assessment",
                  "Presence Assessment")
_SKILL_WORDS = {"differential": REXRANK_SKILLS[0], "geometric": REXRANK_SKILLS[1],
                "location": REXRANK_SKILLS[2], "negation": REXRANK_SKILLS[3],
                "presence": REXRANK_SKILLS[4]}
#: the tidy table's columns
COLUMNS = ("metric", "group", "n", "n_patients", "value", "ci_low", "ci_high", "no_letter",
           "ambiguous", "outside_options", "no_prediction")
_WORD = re.compile(r"[a-z0-9]+")


def skill(task) -> str | None:
    """ReXrank's name for a ReXVQA ``task_name`` (by its key word), else the task as given."""
    if not isinstance(task, str):
        return None
    low = task.lower()
    return next((name for word, name in _SKILL_WORDS.items() if word in low), task)


def _norm(text) -> str:
    return " ".join(_WORD.findall(str(text).lower())) if isinstance(text, str) else ""


def token_scores(prediction, answer) -> tuple[float, float]:
    """``(token F1, token recall)`` of ``prediction`` against ``answer``."""
    p, a = _norm(prediction).split(), _norm(answer).split()
    if not p or not a:
        return float(p == a), float(p == a)
    common = sum((Counter(p) & Counter(a)).values())
    if not common:
        return 0.0, 0.0
    precision, recall = common / len(p), common / len(a)
    return 2 * precision * recall / (precision + recall), recall


def closed_correct(prediction, answer) -> bool:
    """Normalised equality; a yes/no answer also matches a prediction starting with it."""
    p, a = _norm(prediction), _norm(answer)
    return bool(a) and (p == a or a in ("yes", "no") and p.split()[:1] == [a])


def _predictions(predictions, ids: pd.Series) -> pd.Series:
    """Predictions as a Series aligned to ``ids`` (NaN where a question has none)."""
    if isinstance(predictions, pd.DataFrame):
        key = "question_id" if "question_id" in predictions.columns else "sample_id"
        if key not in predictions.columns or "prediction" not in predictions.columns:
            raise RadHarmonyError("vqa_metrics: predictions table lacks its columns",
                                  expected="columns question_id (or sample_id) and prediction",
                                  found=list(predictions.columns), fix="rename the columns")
        predictions = dict(zip(predictions[key], predictions["prediction"]))
    if isinstance(predictions, pd.Series):
        predictions = predictions.to_dict()
    if not isinstance(predictions, dict):
        raise RadHarmonyError("vqa_metrics: predictions are not keyed by question",
                              expected="a dict / Series question_id -> text, or a table",
                              found=type(predictions).__name__,
                              fix="pass {question_id: predicted text, ...}")
    known, aligned, unknown = set(ids), {}, []
    for k, v in predictions.items():  # question ids, or sample ids "<key>:<question id>"
        q = k if k in known else k.split(":", 1)[1] if isinstance(k, str) and ":" in k \
            else None
        if q in known:
            aligned[q] = v
        else:
            unknown.append(k)
    if unknown:
        raise RadHarmonyError(f"vqa_metrics: {len(unknown)} predictions name no question of "
                              "the dataset", expected="question ids (or sample ids) of it",
                              found=f"e.g. {sorted(map(str, unknown))[:5]}",
                              fix="score against the dataset the predictions were made on")
    return ids.map(aligned)


def score_questions(predictions, table: pd.DataFrame) -> pd.DataFrame:
    """Per question: ``correct`` (mcq, closed) or ``f1`` / ``recall`` (open), with the
    extracted ``letter`` and flags, beside ``question_id``, ``patient_id``, ``answer_format``
    and ``skill``."""
    pred = _predictions(predictions, table["question_id"])
    rows = []
    for fmt, opts, letter, answer, p in zip(table["answer_format"], table["options"],
                                             table["answer_letter"], table["answer"], pred):
        have = isinstance(p, str)
        out = {"no_prediction": not have, "letter": None, "no_letter": False,
               "ambiguous": False, "outside_options": False, "correct": np.nan, "f1": np.nan,
               "recall": np.nan}
        if fmt == "mcq":
            letters = find_letters(p, opts) if have else ()
            got = letters[0] if len(letters) == 1 else None
            valid = {o[0] for o in opts}
            out.update(letter=got, no_letter=have and not letters, ambiguous=len(letters) > 1,
                       outside_options=got is not None and got not in valid,
                       correct=float(got is not None and got in valid and
                                     set(str(letter).split(",")) == {got}))
        elif fmt == "closed":
            out["correct"] = float(have and closed_correct(p, answer))
        else:
            out["f1"], out["recall"] = token_scores(p, answer) if have else (0.0, 0.0)
        rows.append(out)
    scored = pd.DataFrame(rows, index=table.index)
    tasks = table["task"] if "task" in table.columns else pd.Series(None, index=table.index)
    return pd.concat([table[["question_id", "patient_id", "answer_format"]],
                      tasks.map(skill).rename("skill"), scored], axis=1)


def vqa_metrics(predictions, dataset, *, n_bootstrap: int = 1000, seed: int = 0,
                csv_path=None) -> pd.DataFrame:
    """Score ``predictions`` (question_id -> predicted text: a dict, a Series, or a table with
    ``question_id``/``sample_id`` and ``prediction``) on a VQA ``dataset`` (or its table).

    Returns the tidy table (:data:`COLUMNS`): one row per metric (``mcq_accuracy``,
    ``closed_accuracy``, ``open_token_f1``, ``open_token_recall``) and group (``overall``,
    then each skill), with the number of questions and patients, the value and its 95 %
    patient-bootstrap interval (``n_bootstrap`` resamples, ``seed``), and the counts of mcq
    predictions without a letter (``no_letter``), with two different letters
    (``ambiguous``), with a letter outside the options (``outside_options``) and of
    questions without a prediction (``no_prediction``), all scored wrong. ``csv_path``: also write it as CSV.
    """
    table = pd.DataFrame(getattr(dataset, "harmonized_df", dataset))
    scored = score_questions(predictions, table)
    missing = int(scored["no_prediction"].sum())
    if missing:
        first = scored.loc[scored["no_prediction"], "question_id"].head(5).tolist()
        warnings.warn(f"vqa_metrics: {missing} of {len(scored)} questions have no prediction "
                      f"(scored wrong), first: {first}", UserWarning, stacklevel=2)
    boot = PatientBootstrap(scored["patient_id"], n_bootstrap=n_bootstrap, seed=seed)
    plan = []  # (metric, group, row mask, value column)
    for metric, fmt, col in (("mcq_accuracy", "mcq", "correct"),
                             ("closed_accuracy", "closed", "correct"),
                             ("open_token_f1", "open", "f1"),
                             ("open_token_recall", "open", "recall")):
        of = (scored["answer_format"] == fmt).to_numpy()
        if not of.any():
            continue
        plan.append((metric, "overall", of, col))
        for name in sorted(scored.loc[of, "skill"].dropna().unique()):
            plan.append((metric, name, of & (scored["skill"] == name).to_numpy(), col))
    values = {k: scored[k].to_numpy(np.float64) for k in ("correct", "f1", "recall")}
    samples = [np.full(boot.n_bootstrap, np.nan) for _ in plan]
    for part, w in boot.chunks():
        for k, (_, _, mask, col) in enumerate(plan):
            wm = w[:, mask]
            with np.errstate(invalid="ignore", divide="ignore"):
                samples[k][part] = wm @ values[col][mask] / wm.sum(1)
    rows = []
    for k, (metric, group, mask, col) in enumerate(plan):
        lo, hi = interval(samples[k][:, None]) if boot.n_bootstrap else ([np.nan], [np.nan])
        sub = scored[mask]
        rows.append({"metric": metric, "group": group, "n": int(mask.sum()),
                     "n_patients": int(sub["patient_id"].nunique()),
                     "value": float(values[col][mask].mean()), "ci_low": float(lo[0]),
                     "ci_high": float(hi[0]), "no_letter": int(sub["no_letter"].sum()),
                     "ambiguous": int(sub["ambiguous"].sum()),
                     "outside_options": int(sub["outside_options"].sum()),
                     "no_prediction": int(sub["no_prediction"].sum())})
    out = pd.DataFrame(rows, columns=list(COLUMNS))
    if csv_path is not None:
        out.to_csv(csv_path, index=False)
    return out


def rexrank_row(scores: pd.DataFrame) -> dict:
    """ReXrank's VQA table row (``Overall Accuracy`` and the five skills, in percent) from
    :func:`vqa_metrics`' table."""
    mcq = scores[scores["metric"] == "mcq_accuracy"].set_index("group")["value"] * 100
    return {"Overall Accuracy": float(mcq.get("overall", np.nan)),
            **{s: float(mcq.get(s, np.nan)) for s in REXRANK_SKILLS}}
