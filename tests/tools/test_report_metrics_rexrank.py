"""report_metrics as ReXrank's scorer (CXR-Report-Metric) computes and reads it: BLEU-2 equal
to ``fast_bleu``'s on every row, and empty predictions that its loader reads as text."""

from __future__ import annotations

import math
import random
import re

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("sacrebleu")
pytest.importorskip("rouge_score")

from radharmony.evaluate import CHEXPERT_14, report_metrics  # noqa: E402
from radharmony.evaluate.reports import (EMPTY_REPORT, PANDAS_NA, REXRANK_EPSILON,  # noqa: E402
                                         scorer_text, sentence_bleu)

WORDS = ("no pleural effusion . heart size is normal the lungs are clear left right lower lobe "
         "opacity mild edema stable").split()


def pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (hypothesis, reference) texts from a small vocabulary: many rows share unigrams
    but no bigram; some are empty or one token long; case and dots vary."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ref = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14)))
        if i % 5 == 0:  # unigram matches in an order that makes no bigram
            words = list(dict.fromkeys(ref.split()))[::-1][:rng.randint(1, 4)]
            hyp = " ".join(w for k, w in enumerate(words) if k % 2 == 0 or w != ".")
        else:
            hyp = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14)))
        out.append((hyp.upper() if i % 7 == 0 else hyp.replace(" .", "."), ref))
    return out


def scorer_tokens(text) -> list[str]:
    """The scorer's preparation for BLEU: str(), lower case, '.' split off, split on spaces,
    empty tokens dropped."""
    return [t for t in str(text).lower().replace(".", " .").split(" ") if t != ""]


def test_bleu2_rexrank_equals_fast_bleu_on_every_row():
    fast_bleu = pytest.importorskip("fast_bleu")
    rows = pairs(300)
    with pytest.warns(UserWarning, match="are empty"):  # some generated texts are
        scores = report_metrics([h for h, _ in rows], [r for _, r in rows], clinical=False)
    want = []
    for hyp, ref in rows:
        bleu = fast_bleu.BLEU([scorer_tokens(ref)], {"bigram": (0.5, 0.5)})
        want.append(bleu.get_score([scorer_tokens(hyp)])["bigram"][0])
    got = scores.per_report["bleu2_rexrank"].to_numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    smoothed = (got > 0) & (scores.per_report["bleu2"].to_numpy() == 0)
    assert smoothed.sum() >= 40  # rows with unigram but no bigram match are in the sample
    assert scores["bleu2_rexrank"] == pytest.approx(np.mean(want), abs=1e-12)


def test_smoothed_bleu_by_hand():
    # unigrams 2/2, one bigram without a match: 0.1 / 1; hypothesis 2 tokens, reference 3
    assert sentence_bleu(["c", "a"], ["a", "b", "c"], 2, epsilon=REXRANK_EPSILON) == \
        pytest.approx(math.exp(1 - 3 / 2) * math.sqrt(1 * 0.1))
    assert sentence_bleu(["c", "a"], ["a", "b", "c"], 2) == 0.0  # unsmoothed
    # one token: no bigram at all counts 0.1 / max(1, 0)
    assert sentence_bleu(["a"], ["a"], 2, epsilon=0.1) == pytest.approx(math.sqrt(0.1))
    # no unigram match, or no token: 0 even smoothed
    assert sentence_bleu(["x", "y"], ["a", "b"], 2, epsilon=0.1) == 0.0
    assert sentence_bleu([], ["a", "b"], 2, epsilon=0.1) == 0.0
    s = report_metrics(["effusion pleural"], ["pleural effusion"], clinical=False)
    assert s["bleu2"] == 0.0 and s["bleu2_rexrank"] == pytest.approx(math.sqrt(0.1))


# -- empty predictions and the scorer's loader --------------------------------------------------
def read_like_the_scorer(folder) -> tuple[pd.DataFrame, pd.DataFrame]:
    """What CXR-Report-Metric does with the two CSVs before scoring, raising where it would:
    pandas ``read_csv`` with its defaults; equal lengths and a ``report`` column; BERTScore
    ``lstrip``s every report (TypeError on NaN); CheXbert ``str.strip``s the column;
    RadGraph casts ``study_id`` to int and needs at least one token per report (its reader
    breaks on an empty sentence)."""
    gt, pred = pd.read_csv(folder / "gt_reports.csv"), pd.read_csv(folder / "pred_reports.csv")
    if len(gt) != len(pred) or "report" not in gt.columns or "report" not in pred.columns:
        raise ValueError("the scorer's length / column assertion fails")
    for df in (gt, pred):
        for report in df["report"]:
            if not isinstance(report, str):
                raise TypeError(f"report {report!r} is not a string")
            report.lstrip()
            if not re.sub(r"([/,:.!?()-])", r" \1 ", report).split():
                raise ValueError(f"report {report!r} has no token for RadGraph")
        df["report"].str.strip()
        [int(s) for s in df["study_id"]]
    return gt, pred


PREDICTIONS = ["", None, float("nan"), "   ", "None", "NA", "No effusion.", "null", "\n",
               "Heart size is normal. No effusion.", "nan"]
REFERENCES = ["No effusion.", "Heart size is normal.", "Mild edema.", "Clear lungs.",
              "No effusion.", "Stable.", "No effusion.", "Normal.", "Normal heart.",
              "Heart size is normal. No effusion.", "Small effusion."]


def test_empty_predictions_warn_score_as_empty_and_the_scorer_reads_them(tmp_path):
    fast_bleu = pytest.importorskip("fast_bleu")
    with pytest.warns(UserWarning, match=r"5 of 11 predictions are empty \(None, NaN or "
                      r"blank\), first ids: \[0, 1, 2, 3, 8\].*'\[empty\]'"):
        s = report_metrics(PREDICTIONS, REFERENCES, clinical=False, csv_dir=tmp_path)
    per = s.per_report
    assert not per.isna().any().any()  # never NaN
    for i in (0, 1, 2, 3, 8):
        assert per.loc[i, "bleu1"] == per.loc[i, "bleu2_rexrank"] == per.loc[i, "rougeL"] == 0
    gt, pred = read_like_the_scorer(tmp_path)
    assert pred["report"].tolist() == ["[empty]"] * 4 + [" None", " NA", "No effusion.",
                                                          " null", "[empty]",
                                                          "Heart size is normal. No effusion.",
                                                          " nan"]
    # the scorer's BLEU on the written files equals radharmony's on every row
    for (_, g), (_, p), mine in zip(gt.iterrows(), pred.iterrows(), per["bleu2_rexrank"]):
        bleu = fast_bleu.BLEU([scorer_tokens(g["report"])], {"bigram": (0.5, 0.5)})
        assert bleu.get_score([scorer_tokens(p["report"])])["bigram"][0] == \
            pytest.approx(mine, abs=1e-12)
    # "None" is the text "None" in radharmony too, not an empty prediction
    assert per.loc[4, "bleu1"] == 0 and per.loc[6, "bleu1"] == 1


def test_unwritten_empty_prediction_is_what_breaks_the_scorer(tmp_path):
    pd.DataFrame({"study_id": [1, 2], "report": ["", "None"]}).to_csv(
        tmp_path / "pred_reports.csv", index=False)
    pd.DataFrame({"study_id": [1, 2], "report": ["a", "b"]}).to_csv(
        tmp_path / "gt_reports.csv", index=False)
    with pytest.raises(TypeError, match="nan"):
        read_like_the_scorer(tmp_path)  # the reader of this file does fail


@pytest.mark.parametrize("text", sorted(PANDAS_NA | {" ", "\t", "x"}))
def test_every_text_pandas_reads_as_nan_is_written_as_a_string(tmp_path, text):
    pd.DataFrame({"study_id": [1], "report": [scorer_text(text)]}).to_csv(
        tmp_path / "r.csv", index=False)
    back = pd.read_csv(tmp_path / "r.csv")["report"][0]
    assert isinstance(back, str) and back.strip() == (text.strip() or EMPTY_REPORT)


def test_the_na_list_covers_the_installed_pandas():
    parsers = pytest.importorskip("pandas._libs.parsers")  # private: skipped if it moves
    assert set(parsers.STR_NA_VALUES) <= PANDAS_NA


def test_na_like_values_of_any_kind_are_empty_text():
    with pytest.warns(UserWarning, match="3 of 4 predictions are empty"):
        s = report_metrics([pd.NA, np.float32("nan"), None, "a b"], ["a b"] * 4,
                           clinical=False)
    assert s.per_report["bleu1"].tolist() == [0, 0, 0, 1]


def test_clinical_f1_of_an_empty_prediction():
    def labeler(texts):  # "effusion" positive, anything else nothing
        return pd.DataFrame([{c: (1.0 if c == "Pleural Effusion" and "effusion" in t else np.nan)
                              for c in CHEXPERT_14} for t in texts])

    with pytest.warns(UserWarning, match="2 of 3 predictions are empty"):
        s = report_metrics([None, "", "effusion"], ["effusion", "normal", "effusion"],
                           labeler=labeler)
    # empty vs a positive reference: F1 0; empty vs a negative one: both have none, 1
    assert s.per_report["clinical_f1"].tolist() == [0.0, 1.0, 1.0]
    assert s.per_report["hyp_positive"].tolist() == ["", "", "Pleural Effusion"]
