"""Validation of the report labeler on OpenI's reports against their manual MeSH codes.

OpenI's ``NLMCXR_reports.tgz`` (shipped in the torchxrayvision wheel) holds 3,955 reports with
manual MeSH ``major`` headings. The codes are positive-only, so a label counts as "mentioned
as present" when it is 1 or -1 (MeSH coders tag hedged findings), and as absent otherwise.
Reports indexed ``No Indexing`` are left out. The rules were developed on reports with even
``CXR<n>`` ids only; :func:`evaluate` reports precision, recall and F1 with bootstrap 95 %
intervals on the odd ids.

    python -m benchmarks.report_labels            # the table
"""

from __future__ import annotations

import re
import tarfile
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import MetadataError, check_choice
from .labeler import label_reports

#: canonical column -> MeSH headings (case-blind, before the first "/") that make it gold 1
GOLD: dict[str, tuple[str, ...]] = {
    "cardiomegaly": ("Cardiomegaly",),
    "pleural_effusion": ("Pleural Effusion",),
    "pneumothorax": ("Pneumothorax", "Hydropneumothorax"),
    "lung_opacity": ("Opacity", "Airspace Disease", "Consolidation", "Infiltrate"),
    "nodule": ("Nodule",),
    # every other finding MeSH codes that the labeler has a column for
    "atelectasis": ("Pulmonary Atelectasis",),
    "consolidation": ("Consolidation",),
    "infiltration": ("Infiltrate",),
    "edema": ("Pulmonary Edema",),
    "pneumonia": ("Pneumonia",),
    "mass": ("Mass",),
    "emphysema": ("Emphysema", "Pulmonary Emphysema"),
    "fibrosis": ("Pulmonary Fibrosis",),
    "hiatal_hernia": ("Hernia, Hiatal",),
    "fracture": ("Fractures, Bone",),
    "pleural_thickening": ("Thickening/pleura",),
    "hydropneumothorax": ("Hydropneumothorax",),
    "granuloma": ("Calcified Granuloma", "Granuloma", "Granulomatous Disease"),
    "scoliosis": ("Scoliosis",),
    "subcutaneous_emphysema": ("Subcutaneous Emphysema",),
    "support_devices": ("Catheters, Indwelling", "Implanted Medical Device", "Medical Device",
                        "Tube, Inserted", "Stents", "Surgical Instruments"),
    "copd": ("Pulmonary Disease, Chronic Obstructive",),
    "interstitial_lung_disease": ("Lung Diseases, Interstitial",),
    "bronchiectasis": ("Bronchiectasis",),
    "tuberculosis": ("Tuberculosis",),
    # calcinosis anywhere, and aortic atherosclerosis (a calcified aorta on a chest film)
    "calcification": ("Calcinosis", "Atherosclerosis"),
    "aortic_calcification": ("Calcinosis/aorta", "Calcinosis/aorta, thoracic",
                             "Atherosclerosis/aorta", "Atherosclerosis/aorta, thoracic"),
    "foreign_object": ("Foreign Bodies",),
    "clavicle_fracture": ("Fractures, Bone/clavicle",),
    "pneumoperitoneum": ("Pneumoperitoneum",),
    "pulmonary_congestion": ("Pulmonary Congestion",),
    "heart_failure": ("Heart Failure",),
}
PRIMARY = ("cardiomegaly", "pleural_effusion", "pneumothorax", "lung_opacity", "nodule")
#: protocol -> (``probable=`` of the labeler, the values scored as "mentioned as present").
#: ``"issue"``: every hedge (-1) counts as present, on the premise that MeSH coders tag
#: hedged findings. ``"graded"``: probable hedges are labelled 1 and only 1 counts, because
#: the coders tag probable hedges ("probable", "X versus Y", "borderline") and not the others
#: ("may represent", "possible", "suggestive of"); see :func:`hedging`.
PROTOCOLS: dict[str, tuple[str, tuple[float, ...]]] = {
    "issue": ("uncertain", (1.0, -1.0)), "graded": ("positive", (1.0,))}


def read_openi(path: str | Path) -> pd.DataFrame:
    """One row per report: ``uid``, ``number``, ``sections`` (label -> text) and
    ``major`` (the manual MeSH tags)."""
    rows = []
    try:
        with tarfile.open(path, "r:*") as tar:
            for m in tar.getmembers():
                if not (m.isfile() and m.name.endswith(".xml")):
                    continue
                root = ET.fromstring(tar.extractfile(m).read())
                uid = root.find("uId").get("id")
                rows.append({"uid": uid, "number": int(re.sub(r"\D", "", uid)),
                             "sections": {a.get("Label"): a.text
                                          for a in root.iter("AbstractText")},
                             "major": [t.text.strip() for t in root.findall("MeSH/major")
                                       if t.text]})
    except (tarfile.TarError, OSError, EOFError, ET.ParseError) as exc:
        raise MetadataError(f"{path} is not a readable OpenI report archive",
                            expected="NLMCXR_reports.tgz", found=f"{type(exc).__name__}: {exc}",
                            fix="pass the archive as downloaded") from None
    return pd.DataFrame(rows).sort_values("number", ignore_index=True)


def gold_labels(major: pd.Series, heads: dict[str, tuple[str, ...]] | None = None
                ) -> pd.DataFrame:
    """0/1 per column of ``heads`` (default :data:`GOLD`) from the MeSH tags (a tag matches a
    heading when it equals it or starts with it followed by "/")."""
    def has(tags, heads):
        tags = [t.casefold() for t in tags]
        return any(t == h or t.startswith(h + "/") for t in tags
                   for h in (h.casefold() for h in heads))
    return pd.DataFrame({c: major.map(lambda tags, hs=hs: has(tags, hs)).astype(int)
                         for c, hs in (GOLD if heads is None else heads).items()},
                        index=major.index)


def select_ids(df: pd.DataFrame, numbers: pd.Series, ids: str) -> pd.DataFrame:
    """The rows of ``df`` whose ``numbers`` are odd, even, or all of them (``ids``): the
    development / held-out split of the validations."""
    check_choice("ids", ids, ("odd", "even", "all"))
    if ids != "all":
        df = df[(numbers % 2 == (1 if ids == "odd" else 0)).to_numpy()]
    return df.reset_index(drop=True)


def disagreements(df: pd.DataFrame, gold: pd.Series, pred: pd.Series, *,
                  present: tuple[float, ...] = (1.0, -1.0)) -> pd.DataFrame:
    """The rows of ``df`` where one label's gold (0/1) and the labeler (present when one of
    ``present``) disagree, with ``gold`` and ``pred`` columns."""
    g, p = gold.astype(bool), pred.isin(present)
    return df[g != p].assign(gold=g[g != p].astype(int), pred=pred[g != p])


def _reports(path: str | Path, ids: str) -> pd.DataFrame:
    """The reports of ``ids`` (``"odd"``, ``"even"`` or ``"all"``), ``No Indexing`` left out."""
    check_choice("ids", ids, ("odd", "even", "all"))
    df = read_openi(path)
    df = df[~df["major"].map(lambda tags: any(t.casefold() == "no indexing" for t in tags))]
    return select_ids(df, df["number"], ids)


def _protocol(protocol: str) -> tuple[str, tuple[float, ...]]:
    """``(probable=, present values)`` of a :data:`PROTOCOLS` name (checked)."""
    return PROTOCOLS[check_choice("protocol", protocol, tuple(PROTOCOLS))]


def _prf(gold: np.ndarray, pred: np.ndarray) -> tuple[float, float, float]:
    tp = int((gold & pred).sum())
    fp, fn = int((~gold & pred).sum()), int((gold & ~pred).sum())
    p = tp / (tp + fp) if tp + fp else float("nan")
    r = tp / (tp + fn) if tp + fn else float("nan")
    f = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else float("nan")
    return p, r, f


def evaluate(path: str | Path, *, ids: str = "odd", n_boot: int = 1000, seed: int = 0,
             rules=None, protocol: str = "issue") -> pd.DataFrame:
    """Precision / recall / F1 (bootstrap 95 % intervals over reports) per :data:`GOLD`
    column on the ``"odd"``, ``"even"`` or ``"all"`` report ids, scored as ``protocol``
    (:data:`PROTOCOLS`) says."""
    probable, present = _protocol(protocol)
    df = _reports(path, ids)
    pred = label_reports(df["sections"], vocabulary="canonical", rules=rules,
                         probable=probable)
    return score_table(gold_labels(df["major"]), pred, GOLD, n_boot=n_boot, seed=seed,
                       present=present)


def score_table(gold: pd.DataFrame, pred: pd.DataFrame, heads: dict, *, n_boot: int = 1000,
                seed: int = 0, present: tuple[float, ...] = (1.0, -1.0)) -> pd.DataFrame:
    """Precision / recall / F1 with bootstrap 95 % intervals over rows, per column of
    ``heads`` (column -> the gold's headings, for the table): ``gold`` 0/1, ``pred`` the
    labeler's values, present when one of ``present``."""
    rng = np.random.default_rng(seed)
    boot = rng.integers(0, len(gold), size=(n_boot, len(gold)))
    rows = []
    for col in heads:
        g = gold[col].to_numpy(bool)
        p = pred[col].isin(present).to_numpy(bool)
        prec, rec, f1 = _prf(g, p)
        stats = np.array([_prf(g[b], p[b]) for b in boot]).reshape(len(boot), 3)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # no positives in a resample
            lo = np.nanpercentile(stats, 2.5, axis=0) if len(boot) else np.full(3, np.nan)
            hi = np.nanpercentile(stats, 97.5, axis=0) if len(boot) else np.full(3, np.nan)
        rows.append({"label": col, "gold": "; ".join(heads[col]), "positives": int(g.sum()),
                     "predicted": int(p.sum()), "precision": prec, "p_lo": lo[0], "p_hi": hi[0],
                     "recall": rec, "r_lo": lo[1], "r_hi": hi[1], "f1": f1, "f1_lo": lo[2],
                     "f1_hi": hi[2]})
    return pd.DataFrame(rows)


def errors(path: str | Path, label: str, *, ids: str = "even", rules=None,
           protocol: str = "issue") -> pd.DataFrame:
    """The false positives and false negatives of one label under ``protocol`` (for rule
    development: use the even ids)."""
    probable, present = _protocol(protocol)
    df = _reports(path, ids)
    pred, ev = label_reports(df["sections"], vocabulary="canonical", explain=True, rules=rules,
                             probable=probable)
    out = disagreements(df, gold_labels(df["major"])[label], pred[label], present=present)
    ev = ev[ev["label"] == label].set_index("row")
    out["sentence"] = [ev["sentence"].get(i) for i in out.index]
    out["cue"] = [ev["cue"].get(i) for i in out.index]
    return out


def hedging(path: str | Path, *, ids: str = "even", rules=None) -> pd.DataFrame:
    """How often the MeSH coders tagged what the labeler calls stated (1), a probable hedge
    (-1 by default, 1 with ``probable="positive"``) and another hedge (-1), per :data:`GOLD`
    column. The ``"issue"`` protocol counts every hedge as present, on the premise that
    coders tag hedged findings: ``f1``. ``f1_stated_only`` counts the stated ones only,
    ``f1_graded`` the stated and the probable ones (the ``"graded"`` protocol)."""
    df = _reports(path, ids)
    pred = label_reports(df["sections"], vocabulary="canonical", rules=rules)
    graded = label_reports(df["sections"], vocabulary="canonical", rules=rules,
                           probable="positive")
    gold = gold_labels(df["major"])
    rows = []
    for col in GOLD:
        g = gold[col].to_numpy(bool)
        stated = (pred[col] == 1.0).to_numpy()
        probable = ((pred[col] == -1.0) & (graded[col] == 1.0)).to_numpy()
        other = (graded[col] == -1.0).to_numpy()
        rows.append({"label": col, "positives": int(g.sum()),
                     "stated": int(stated.sum()), "stated_tagged": int((stated & g).sum()),
                     "probable": int(probable.sum()),
                     "probable_tagged": int((probable & g).sum()),
                     "hedged": int(other.sum()), "hedged_tagged": int((other & g).sum()),
                     "f1": _prf(g, stated | probable | other)[2],
                     "f1_stated_only": _prf(g, stated)[2],
                     "f1_graded": _prf(g, stated | probable)[2]})
    return pd.DataFrame(rows)
