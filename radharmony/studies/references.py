"""Reference reports as ReXrank writes them, one per study, with integer evaluation ids.

ReXrank's test files hold ``section_findings``, ``section_impression`` and ``report`` =
``'Findings: ' + findings + ' Impression: ' + impression``; a missing section is written as
the literal ``None`` (``"... Impression: None"``). Its two tracks score against:

* ``"findings"``: the findings section alone (a study without findings has nothing to score
  against and is left out, counted in one warning);
* ``"findings_impression"``: the joined ``report`` (left out only when both are missing).

Its scorer (CXR-Report-Metric) reads CSVs ``study_id, report`` and casts ``study_id`` to
``int``; ReXGradient's ids (``1.2.826...``), IU's and CheXpert's are not integers, so each
reference gets an ``eval_id`` (0, 1, ... in study order) beside its ``study_id``.
"""

from __future__ import annotations

import warnings

import pandas as pd

from ..errors import SHOW, RadHarmonyError, StudyWarning, check_choice

TRACKS = ("findings", "findings_impression")


def rexrank_report(findings: str | None, impression: str | None) -> str:
    """``'Findings: ' + findings + ' Impression: ' + impression``, None written as ``None``.

    >>> rexrank_report("Clear lungs.", None)
    'Findings: Clear lungs. Impression: None'
    """
    return f"Findings: {findings} Impression: {impression}"


def rexrank_context(sections: dict) -> str:
    """The context ReXrank's IU X-ray entries give: ``"Indication: ... Comparison: ..."``
    (the parts present; "" when neither is)."""
    parts = [f"{name.capitalize()}: {sections[name]}" for name in ("indication", "comparison")
             if sections.get(name)]
    return " ".join(parts)


def study_sections(ds) -> pd.DataFrame:
    """``study_id`` + the six sections, one row per study, from a study-level dataset or an
    image-level one (grouped into studies here: a study is scored once, never per image)."""
    studies = getattr(ds, "studies", None)
    if studies is None:
        if not hasattr(ds, "harmonized_df"):
            raise RadHarmonyError("rexrank_references needs a radharmony dataset",
                                  expected="XDataset(..., level='study') or an image-level "
                                  "dataset", found=type(ds).__name__,
                                  fix="pass the dataset the model is evaluated on")
        from .index import build_index

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StudyWarning)  # image counts do not matter here
            studies = build_index(ds.harmonized_df, max_images=None,
                                  root_col=ds.spec.root_col, owner=type(ds).__name__).table()
    return studies


def rexrank_references(ds, track: str = "findings_impression") -> pd.DataFrame:
    """The reference of every study as ReXrank writes it for ``track``: a DataFrame
    ``eval_id`` (int, 0..n-1), ``study_id``, ``report``, ``findings``, ``impression``.

    ``ds``: a study-level dataset (``level="study"``) or an image-level one; either way one
    row per study."""
    check_choice("track", track, TRACKS)
    st = study_sections(ds)
    if track == "findings":
        keep = st["findings"].notna()
        text = st["findings"]
    else:
        keep = st["findings"].notna() | st["impression"].notna()
        text = pd.Series([rexrank_report(f, i) for f, i in zip(st["findings"],
                                                                st["impression"])],
                         index=st.index, dtype=object)
    dropped = st.loc[~keep, "study_id"]
    if len(dropped):
        what = "findings" if track == "findings" else "findings or impression"
        warnings.warn(f"rexrank_references(track={track!r}): {len(dropped)} of {len(st)} "
                      f"studies have no {what} and have no reference, first: "
                      f"{[str(s) for s in dropped[:SHOW]]}", StudyWarning, stacklevel=2)
    out = pd.DataFrame({"study_id": st.loc[keep, "study_id"].to_numpy(object),
                        "report": text[keep].to_numpy(object),
                        "findings": st.loc[keep, "findings"].to_numpy(object),
                        "impression": st.loc[keep, "impression"].to_numpy(object)})
    out.insert(0, "eval_id", range(len(out)))
    return out


def pair_with_references(hypotheses, references: pd.DataFrame) -> tuple[list, list, list]:
    """``(hypotheses, references, eval ids)`` in the references' order, from predictions
    keyed by study id (a mapping, or a DataFrame ``study_id, report``); exactly one per
    study, none for an unknown study."""
    if isinstance(hypotheses, pd.DataFrame):
        if not {"study_id", "report"} <= set(hypotheses.columns):
            raise RadHarmonyError("Predictions as a table need columns study_id and report",
                                  expected="columns study_id, report",
                                  found=str(list(hypotheses.columns)),
                                  fix="rename the columns, or pass {study_id: text}")
        dup = hypotheses["study_id"][hypotheses["study_id"].duplicated()]
        if len(dup):
            raise RadHarmonyError(f"{len(dup)} studies have more than one prediction (scored "
                                  f"per study, never per image), first: "
                                  f"{[str(s) for s in dup[:SHOW]]}",
                                  expected="one generated report per study",
                                  found=f"{len(hypotheses)} rows",
                                  fix="generate once per study (level='study')")
        hypotheses = dict(zip(hypotheses["study_id"], hypotheses["report"]))
    hypotheses = {str(k): v for k, v in dict(hypotheses).items()}
    ids = [str(s) for s in references["study_id"]]
    missing = [s for s in ids if s not in hypotheses]
    extra = sorted(set(hypotheses) - set(ids))
    if missing or extra:
        raise RadHarmonyError("Predictions and references do not cover the same studies",
                              expected=f"one prediction for each of the {len(ids)} studies",
                              found=f"{len(missing)} missing (first {missing[:SHOW]}), "
                              f"{len(extra)} unknown (first {extra[:SHOW]})",
                              fix="predict every study of rexrank_references(ds) and only those")
    return ([hypotheses[s] for s in ids], references["report"].tolist(),
            references["eval_id"].tolist())
