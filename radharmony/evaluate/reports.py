"""Report-generation metrics that run offline: BLEU, ROUGE-L and a clinical F1.

* **Tokens** (every BLEU here): lower-cased, ``.`` split off as its own token, split on
  spaces, empty tokens dropped -- the preprocessing of the CXR-Report-Metric code behind the
  ReXrank leaderboard.
* ``bleu1`` ... ``bleu4``: corpus BLEU (clipped n-gram counts pooled over all reports, one
  brevity penalty, uniform weights up to order n, no smoothing), computed by ``sacrebleu``
  on those tokens (``tokenize="none"``), so the numbers are sacrebleu's.
* ``bleu2_rexrank``: the mean over reports of each report's own BLEU-2 as ReXrank's scorer
  computes it with ``fast_bleu`` (weights 1/2, 1/2, single reference, brevity penalty, and
  ``fast_bleu``'s default smoothing, NLTK's method 1: an order with no match counts
  ``0.1 / max(1, its n-gram count)`` matches; no unigram match, or no token, scores 0). So a
  report with unigram but no bigram matches scores more than 0. ``fast_bleu`` is not a
  dependency: :func:`sentence_bleu` with ``epsilon=REXRANK_EPSILON`` is that arithmetic,
  checked against the package in the test suite.
* **Empty reports**: None, NaN and blank texts are scored as the empty text (no tokens: BLEU
  0, ROUGE-L 0, no positive finding) and a warning names how many predictions are empty and
  the first ids. In the scorer's CSVs an empty report is written as :data:`EMPTY_REPORT`
  (pandas reads an empty field as NaN, which the scorer's BERTScore step cannot take, and its
  RadGraph reader breaks on a report of no tokens); a text pandas reads as NaN (``"None"``,
  ``"NA"``, ...) is written after one space, which every step of the scorer strips.
* ``rougeL``: mean over reports of ROUGE-L F-measure (``rouge-score``, its own tokenizer,
  no stemming).
* Clinical F1 over the 14 CheXpert observations, the weight-free analogue of F1-CheXbert:
  both texts are labelled by radharmony's report labeler; **positive means a label value of
  exactly 1** (uncertain -1, negative 0 and not mentioned all count as not positive).
  ``clinical_f1_micro`` pools true/false positives over every report and label;
  ``clinical_f1_macro`` averages per-label F1 over the labels positive in some reference or
  hypothesis; the ``_5`` variants restrict both to the five observations of the CheXbert
  papers (atelectasis, cardiomegaly, consolidation, edema, pleural effusion). Per report:
  F1 over its 14 labels, 1 when neither text has a positive finding.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from ..errors import RadHarmonyError

EXTRA = "pip install radharmony[eval]"
CHEXPERT_14 = ("Atelectasis", "Cardiomegaly", "Consolidation", "Edema",
               "Enlarged Cardiomediastinum", "Fracture", "Lung Lesion", "Lung Opacity",
               "No Finding", "Pleural Effusion", "Pleural Other", "Pneumonia", "Pneumothorax",
               "Support Devices")
CHEXBERT_5 = ("Atelectasis", "Cardiomegaly", "Consolidation", "Edema", "Pleural Effusion")
#: ``fast_bleu``'s smoothing epsilon (its default, NLTK's method 1), used by ReXrank's BLEU-2
REXRANK_EPSILON = 0.1
#: how an empty report is written to the scorer's CSVs: one token, matching no report, so
#: that pandas reads a string, RadGraph's reader gets a token and the BLEU stays 0
EMPTY_REPORT = "[empty]"
#: the fields pandas' ``read_csv`` reads as NaN by default (pandas 1.x to 3.x)
PANDAS_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                       "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a",
                       "nan", "null"})


def tokens(text: str) -> list[str]:
    """ReXrank-style tokens: lower case, ``.`` as its own token, split on spaces.

    >>> tokens("No pleural effusion. Heart normal.")
    ['no', 'pleural', 'effusion', '.', 'heart', 'normal', '.']
    """
    return [t for t in str(text).lower().replace(".", " .").split(" ") if t]


def _ngrams(toks: list[str], n: int) -> dict:
    out: dict = {}
    for i in range(len(toks) - n + 1):
        g = tuple(toks[i:i + n])
        out[g] = out.get(g, 0) + 1
    return out


def sentence_bleu(hyp: list[str], ref: list[str], n: int, *,
                  epsilon: float | None = None) -> float:
    """BLEU-n of one tokenized hypothesis against one reference (uniform weights, brevity
    penalty).

    ``epsilon=None``: unsmoothed, 0 when some order has no match. A number: ``fast_bleu``'s
    smoothing (NLTK's method 1), which ReXrank's BLEU-2 uses with ``epsilon=0.1``
    (:data:`REXRANK_EPSILON`): an order with no match counts ``epsilon / max(1, its n-gram
    count)`` matches; still 0 when no unigram matches.

    >>> round(sentence_bleu("a b c d".split(), "a b c x".split(), 2), 4)
    0.7071
    >>> round(sentence_bleu("c a".split(), "a b c".split(), 2, epsilon=0.1), 4)
    0.1918
    """
    if not hyp:
        return 0.0
    logs = 0.0
    for k in range(1, n + 1):
        h, r = _ngrams(hyp, k), _ngrams(ref, k)
        total = sum(h.values())
        match = sum(min(c, r.get(g, 0)) for g, c in h.items())
        if match == 0 and (epsilon is None or k == 1):
            return 0.0
        logs += math.log(match / total if match else epsilon / max(1, total)) / n
    bp = 1.0 if len(hyp) >= len(ref) else math.exp(1 - len(ref) / len(hyp))
    return bp * math.exp(logs)


def _texts(values, what: str) -> list[str]:
    if isinstance(values, str):
        raise RadHarmonyError(f"report_metrics {what} is one string",
                              expected="a list of report texts", found=repr(values[:40]),
                              fix=f"pass [{what[:-1]}] for a single report")
    return ["" if v is None or (not isinstance(v, str) and pd.api.types.is_scalar(v)
                                and pd.isna(v)) else str(v) for v in values]


def scorer_text(text: str) -> str:
    """``text`` as written to ReXrank's scorer CSVs, so that pandas reads it back as a string
    the scorer can take: a blank text becomes :data:`EMPTY_REPORT`; a text pandas reads as
    NaN (:data:`PANDAS_NA`) gets one leading space (stripped again by every scorer step).

    >>> scorer_text(""), scorer_text("None"), scorer_text("No effusion.")
    ('[empty]', ' None', 'No effusion.')
    """
    if not text.strip():
        return EMPTY_REPORT
    return " " + text if text in PANDAS_NA else text


def _warn_empty(texts: list[str], ids: list, what: str, csv_dir) -> None:
    empty = [i for t, i in zip(texts, ids) if not t.strip()]
    if empty:
        written = (f"; written to {csv_dir} as {EMPTY_REPORT!r} (ReXrank's scorer cannot read "
                   "an empty report)") if csv_dir is not None else ""
        warnings.warn(f"report_metrics: {len(empty)} of {len(texts)} {what} are empty (None, "
                      f"NaN or blank), first ids: {empty[:5]}; each is scored as the empty "
                      f"text (BLEU 0, ROUGE-L 0, no positive finding){written}", UserWarning,
                      stacklevel=3)


def _default_labeler():
    try:
        from ..reports import label_reports
    except ImportError:
        raise RadHarmonyError("The clinical F1 needs radharmony's report labeler",
                              expected="radharmony.reports.label_reports", found="it is not "
                              "importable in this installation", fix="pass labeler=<callable "
                              "texts -> DataFrame of the 14 CheXpert columns>, or "
                              "clinical=False") from None
    return lambda texts: label_reports(texts, vocabulary="chexpert")


def _positives(labeler, texts: list[str], side: str) -> np.ndarray:
    df = pd.DataFrame(labeler(texts))
    missing = [c for c in CHEXPERT_14 if c not in df.columns]
    if missing or len(df) != len(texts):
        raise RadHarmonyError(f"The report labeler's output for the {side} is not one row "
                              "per text with the 14 CheXpert columns",
                              expected=f"{len(texts)} rows, columns {list(CHEXPERT_14)}",
                              found=f"{len(df)} rows, missing {missing}",
                              fix="return label_reports(texts, vocabulary='chexpert')")
    return df[list(CHEXPERT_14)].to_numpy(np.float64, na_value=np.nan) == 1


def _scorer_csvs(folder: Path, ids: list, hyp: list, ref: list, study_ids) -> None:
    """CXR-Report-Metric's inputs: ``study_id`` (an int: it casts them) and ``report``
    (:func:`scorer_text`: pandas reads every one back as a string)."""
    try:
        ints = [int(i) for i in ids]
    except (TypeError, ValueError):
        raise RadHarmonyError("ReXrank's scorer needs integer ids", expected="ids= of "
                              "integers (or references from rexrank_references)",
                              found=repr(ids[:3]), fix="pass ids=range(n)") from None
    folder.mkdir(parents=True, exist_ok=True)
    for name, texts in (("gt_reports", ref), ("pred_reports", hyp)):
        pd.DataFrame({"study_id": ints, "report": [scorer_text(t) for t in texts]}
                     ).to_csv(folder / f"{name}.csv", index=False)
    pd.DataFrame({"eval_id": ints, "study_id": study_ids if study_ids is not None else ints}
                 ).to_csv(folder / "eval_ids.csv", index=False)


def _f1(tp, fp, fn):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan)


@dataclass
class ReportScores:
    """Scores of generated reports against references.

    Attributes:
        summary: ``metric, value`` (corpus-level and mean per-report values).
        per_report: one row per pair: ``bleu1`` ... ``bleu4`` (sentence BLEU-n, unsmoothed),
            ``bleu2_rexrank`` (smoothed as ``fast_bleu``), ``rougeL``, ``clinical_f1``, and the
            hypothesis's and reference's positive labels.
        per_label: clinical ``label, tp, fp, fn, precision, recall, f1, support``.
    """

    summary: pd.DataFrame
    per_report: pd.DataFrame
    per_label: pd.DataFrame | None

    def __getitem__(self, metric: str) -> float:
        s = self.summary.set_index("metric")["value"]
        if metric not in s.index:
            raise KeyError(metric)
        return float(s[metric])

    def to_dict(self) -> dict:
        return {m: float(v) for m, v in zip(self.summary["metric"], self.summary["value"])}

    def to_csv(self, folder: str | os.PathLike) -> list[Path]:
        """Write ``summary.csv``, ``per_report.csv`` and ``per_label.csv`` into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        out = []
        for name, df in (("summary", self.summary), ("per_report", self.per_report),
                         ("per_label", self.per_label)):
            if df is not None:
                df.to_csv(folder / f"{name}.csv", index=False)
                out.append(folder / f"{name}.csv")
        return out


def report_metrics(hypotheses, references, *,
                   labeler: Callable | None = None, clinical: bool = True,
                   ids: Sequence | None = None,
                   csv_dir: str | os.PathLike | None = None) -> ReportScores:
    """Score generated reports against references, pair by pair (see the module docs).

    Args:
        hypotheses, references: report texts, same length and order (None, NaN and blank
            texts count as "", with a warning naming how many and the first ids);
            or, per study, ``references`` = :func:`radharmony.studies.rexrank_references`
            (one row per study, never per image) and ``hypotheses`` = ``{study_id: text}``
            or a DataFrame ``study_id, report`` (exactly one per study); then ``ids`` are
            the integer ``eval_id`` s and ``per_report`` also has ``study_id``.
        labeler: ``texts -> DataFrame`` with the 14 CheXpert columns (1 / 0 / -1 / NaN);
            default ``radharmony.reports.label_reports(texts, vocabulary="chexpert")``.
        clinical: False skips the clinical F1 (and the labeler).
        ids: identifiers kept in ``per_report`` (default 0..n-1).
        csv_dir: also write ReXrank's scorer inputs there (CXR-Report-Metric's
            ``study_id, report`` CSVs, ``study_id`` an int): ``gt_reports.csv``,
            ``pred_reports.csv``, and ``eval_ids.csv`` (``eval_id, study_id``).

    >>> s = report_metrics(["no pleural effusion ."], ["no pleural effusion ."],
    ...                    clinical=False)
    >>> s["bleu4"], s["rougeL"]
    (1.0, 1.0)
    """
    study_ids = None
    if isinstance(references, pd.DataFrame):
        from ..studies.references import pair_with_references

        study_ids = references["study_id"].tolist()
        hypotheses, references, ids = pair_with_references(hypotheses, references)
    hyp, ref = _texts(hypotheses, "hypotheses"), _texts(references, "references")
    if len(hyp) != len(ref):
        raise RadHarmonyError("report_metrics needs one reference per hypothesis",
                              expected=f"{len(hyp)} references", found=f"{len(ref)}",
                              fix="pair the lists by study id first")
    if not hyp:
        raise RadHarmonyError("report_metrics got no reports", expected="at least one pair",
                              found="0", fix="pass the generated and reference reports")
    try:
        from rouge_score import rouge_scorer
        from sacrebleu.metrics import BLEU
    except ImportError as exc:
        raise RadHarmonyError("report_metrics needs sacrebleu and rouge-score",
                              expected="both installed", found=f"{exc.name} is missing",
                              fix=EXTRA) from None
    h_tok, r_tok = [tokens(t) for t in hyp], [tokens(t) for t in ref]
    h_join, r_join = [" ".join(t) for t in h_tok], [" ".join(t) for t in r_tok]
    per = pd.DataFrame({"id": list(ids) if ids is not None else np.arange(len(hyp))})
    if study_ids is not None:
        per["study_id"] = study_ids
    shown = study_ids if study_ids is not None else per["id"].tolist()
    _warn_empty(hyp, shown, "predictions", csv_dir)
    _warn_empty(ref, shown, "references", csv_dir)
    if csv_dir is not None:
        _scorer_csvs(Path(csv_dir), per["id"].tolist(), hyp, ref, study_ids)
    summary = []
    for n in range(1, 5):
        bleu = BLEU(max_ngram_order=n, tokenize="none", smooth_method="none", lowercase=False)
        corpus = bleu.corpus_score(h_join, [r_join]).score / 100
        summary.append((f"bleu{n}", min(1.0, corpus)))
        per[f"bleu{n}"] = [sentence_bleu(h, r, n) for h, r in zip(h_tok, r_tok)]
    per["bleu2_rexrank"] = [sentence_bleu(h, r, 2, epsilon=REXRANK_EPSILON)
                            for h, r in zip(h_tok, r_tok)]
    summary.append(("bleu2_rexrank", float(per["bleu2_rexrank"].mean())))
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    per["rougeL"] = [scorer.score(r, h)["rougeL"].fmeasure for h, r in zip(hyp, ref)]
    summary.append(("rougeL", float(per["rougeL"].mean())))
    per_label = None
    if clinical:
        labeler = labeler or _default_labeler()
        hp, rp = _positives(labeler, hyp, "hypotheses"), _positives(labeler, ref, "references")
        tp, fp, fn = (hp & rp), (hp & ~rp), (~hp & rp)
        names = np.array(CHEXPERT_14)
        per["clinical_f1"] = np.nan_to_num(_f1(tp.sum(1), fp.sum(1), fn.sum(1)), nan=1.0)
        per["hyp_positive"] = ["|".join(names[row]) for row in hp]
        per["ref_positive"] = ["|".join(names[row]) for row in rp]
        ltp, lfp, lfn = tp.sum(0), fp.sum(0), fn.sum(0)
        with np.errstate(invalid="ignore", divide="ignore"):
            per_label = pd.DataFrame({
                "label": names, "tp": ltp, "fp": lfp, "fn": lfn,
                "precision": np.where(ltp + lfp > 0, ltp / (ltp + lfp), np.nan),
                "recall": np.where(ltp + lfn > 0, ltp / (ltp + lfn), np.nan),
                "f1": _f1(ltp, lfp, lfn), "support": rp.sum(0)})
        five = np.isin(names, CHEXBERT_5)
        for suffix, sel in (("", slice(None)), ("_5", five)):
            f1s = per_label["f1"].to_numpy()[sel]
            summary.append((f"clinical_f1_micro{suffix}",
                            float(_f1(ltp[sel].sum(), lfp[sel].sum(), lfn[sel].sum()))))
            summary.append((f"clinical_f1_macro{suffix}",
                            float(np.nanmean(f1s)) if np.isfinite(f1s).any() else np.nan))
        summary.append(("clinical_f1_per_report", float(per["clinical_f1"].mean())))
    return ReportScores(pd.DataFrame(summary, columns=["metric", "value"]), per, per_label)
