"""Validation of the Spanish rules (``builtin_rules("es")``) on PadChest's reports against
its physicians' labels.

PadChest's table (``PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz``, shipped in the
torchxrayvision wheel) holds each study's report as lower-cased Spanish stems and, for
26,413 studies, labels a physician read from that report (``MethodLabel == "Physician"``;
the rest were labelled by PadChest's own model and are not used). One row per study. The
labels are positive-only, so a finding counts as present when the labeler gives 1 or -1, as
on OpenI. Gold per finding: any of its exact PadChest terms (:data:`GOLD`, the terms of
``radharmony.datasets.padchest.LABEL_TERMS``). The rules were developed on studies
whose ``StudyID`` ends in an even digit; :func:`evaluate` scores the odd ones.

    python -m benchmarks.report_labels --padchest
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pandas as pd

from ..errors import MetadataError, check_choice
from .evaluate_openi import disagreements, score_table, select_ids
from .labeler import label_reports
from .rules import builtin_rules

#: canonical column -> the exact PadChest terms that make it gold 1: those of the harmonized
#: label of :mod:`radharmony.datasets.padchest` (``LABEL_TERMS``; a test keeps them equal)
GOLD = {
    "cardiomegaly": ("cardiomegaly",),
    "pleural_effusion": ("pleural effusion", "loculated pleural effusion",
                         "loculated fissural effusion"),
    "pneumothorax": ("pneumothorax", "hydropneumothorax"),
    "nodule": ("nodule", "multiple nodules"),
    "mass": ("mass", "pulmonary mass"),
    "pneumonia": ("pneumonia", "atypical pneumonia"),
    "consolidation": ("consolidation",),
    "atelectasis": ("atelectasis", "laminar atelectasis", "lobar atelectasis",
                    "segmental atelectasis", "total atelectasis", "round atelectasis",
                    "atelectasis basal"),
    "emphysema": ("emphysema",),
    "hiatal_hernia": ("hiatal hernia",),
    "edema": ("pulmonary edema",),
    "fracture": ("fracture", "rib fracture", "callus rib fracture", "clavicle fracture",
                 "humeral fracture", "vertebral fracture"),
    "infiltration": ("infiltrates",),
    "fibrosis": ("pulmonary fibrosis",),
}
#: the primary labels of the OpenI table that PadChest labels too (it has no opacity label)
PRIMARY = ("cardiomegaly", "pleural_effusion", "pneumothorax", "nodule")


def read_padchest_reports(path: str | Path) -> pd.DataFrame:
    """One row per physician-labelled study: ``study_id``, ``report`` and ``terms`` (the
    physician's PadChest terms, stripped)."""
    try:
        df = pd.read_csv(path, usecols=["StudyID", "Report", "MethodLabel", "Labels"],
                         dtype=str, keep_default_na=False)
    except (OSError, ValueError) as exc:
        raise MetadataError(f"{path} is not a readable PadChest table", expected="PADCHEST_"
                            "chest_x_ray_images_labels_160K_01.02.19.csv(.gz)",
                            found=f"{type(exc).__name__}: {exc}"[:200],
                            fix="pass the table as downloaded") from None
    df = df[df["MethodLabel"] == "Physician"].drop_duplicates("StudyID")

    def terms(cell: str, study: str) -> list:
        if not cell or cell == "nan":
            return []
        try:
            values = ast.literal_eval(cell)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise MetadataError(f"{path}: study {study}: Labels is not a list of terms",
                                expected="a Python list literal, e.g. ['pleural effusion']",
                                found=repr(cell)[:120], fix="pass the table as downloaded"
                                ) from None
        return [t.strip() for t in values if isinstance(t, str) and t.strip()] \
            if isinstance(values, (list, tuple)) else []

    return pd.DataFrame({"study_id": df["StudyID"].to_numpy(),
                         "report": [r if r and r != "nan" else None for r in df["Report"]],
                         "terms": [terms(c, s) for c, s in zip(df["Labels"], df["StudyID"])]})


def gold_labels(terms: pd.Series) -> pd.DataFrame:
    """0/1 per :data:`GOLD` column: any of its exact PadChest terms."""
    return pd.DataFrame({col: terms.map(lambda ts, w=frozenset(heads): bool(w.intersection(ts)))
                         .astype(int) for col, heads in GOLD.items()}, index=terms.index)


def _studies(path: str | Path, ids: str) -> pd.DataFrame:
    check_choice("ids", ids, ("odd", "even", "all"))
    df = read_padchest_reports(path)
    last = df["study_id"].map(lambda s: int((re.sub(r"\D", "", s) or "0")[-1]))
    return select_ids(df, last, ids)  # by the StudyID's last digit


def _labels(df: pd.DataFrame, rules) -> pd.DataFrame:
    return label_reports(df["report"], vocabulary="canonical",
                         rules=rules if rules is not None else builtin_rules("es"))


def evaluate(path: str | Path, *, ids: str = "odd", n_boot: int = 1000, seed: int = 0,
             rules=None) -> pd.DataFrame:
    """Precision / recall / F1 (bootstrap 95 % intervals over studies) per :data:`GOLD`
    column, on the ``"odd"``, ``"even"`` or ``"all"`` study ids."""
    df = _studies(path, ids)
    return score_table(gold_labels(df["terms"]), _labels(df, rules), GOLD, n_boot=n_boot,
                       seed=seed)


def errors(path: str | Path, label: str, *, ids: str = "even", rules=None) -> pd.DataFrame:
    """The false positives and false negatives of one label (rule development: even ids)."""
    df = _studies(path, ids)
    return disagreements(df, gold_labels(df["terms"])[label], _labels(df, rules)[label])
