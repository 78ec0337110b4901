"""The labeler's findings and the two output vocabularies built from them (one place).

A *finding* is what a mention rule names (``mentions.tsv``, column ``finding``). The output
columns of each vocabulary are fed by findings:

* ``"chexpert"``: CheXpert's 14 observations under CheXpert's own names. Each column takes
  every mention of the findings listed for it (``Lung Lesion`` = nodule, mass or lesion;
  ``Pleural Other`` also takes fibrosis, as CheXpert's labeler files it there);
  ``Pleural Effusion`` also takes the positive and uncertain hydropneumothorax mentions
  (fluid in the pleural space), not the negated ones.
* ``"canonical"``: one snake_case column per finding (the ids of the cross-dataset
  vocabulary). A narrower finding also feeds its parent, with its positive and uncertain
  mentions only (``rib fracture`` -> ``fracture`` = 1; ``no rib fracture`` says nothing
  about other fractures).

``No Finding`` / ``no_finding`` is derived, never mentioned: see :mod:`radharmony.reports.labeler`.
"""

from __future__ import annotations

#: every finding a mention rule may name, in canonical column order (no_finding is derived)
FINDINGS: tuple[str, ...] = (
    "enlarged_cardiomediastinum", "cardiomegaly", "lung_lesion", "nodule", "mass",
    "lung_opacity", "infiltration", "edema", "consolidation", "pneumonia", "atelectasis",
    "pneumothorax", "hydropneumothorax", "pleural_effusion", "pleural_thickening",
    "pleural_other", "fracture", "rib_fracture", "support_devices", "emphysema", "fibrosis",
    "hiatal_hernia", "granuloma", "scoliosis", "subcutaneous_emphysema", "copd",
    "interstitial_lung_disease", "bronchiectasis", "tuberculosis", "calcification",
    "aortic_calcification", "foreign_object", "clavicle_fracture", "pneumomediastinum",
    "pneumoperitoneum", "pulmonary_congestion", "heart_failure", "infection")

NO_FINDING = {"chexpert": "No Finding", "canonical": "no_finding"}

#: CheXpert column -> the findings whose mentions it takes (all of them: 1, -1 and 0)
CHEXPERT: dict[str, tuple[str, ...]] = {
    "No Finding": (),
    "Enlarged Cardiomediastinum": ("enlarged_cardiomediastinum",),
    "Cardiomegaly": ("cardiomegaly",),
    "Lung Lesion": ("lung_lesion", "nodule", "mass"),
    "Lung Opacity": ("lung_opacity", "infiltration"),
    "Edema": ("edema", "pulmonary_congestion", "heart_failure"),  # CheXpert's edema mentions
    "Consolidation": ("consolidation",),
    "Pneumonia": ("pneumonia", "infection"),  # CheXpert's pneumonia mentions
    "Atelectasis": ("atelectasis",),
    "Pneumothorax": ("pneumothorax", "hydropneumothorax"),
    "Pleural Effusion": ("pleural_effusion",),
    "Pleural Other": ("pleural_other", "pleural_thickening", "fibrosis"),
    "Fracture": ("fracture", "rib_fracture"),
    "Support Devices": ("support_devices",),
}

#: canonical parent -> narrower findings whose positive/uncertain mentions also feed it
CANONICAL_CHILDREN: dict[str, tuple[str, ...]] = {
    "lung_lesion": ("nodule", "mass"),
    "lung_opacity": ("infiltration", "consolidation"),
    "pneumothorax": ("hydropneumothorax",),
    "pleural_effusion": ("hydropneumothorax",),  # air and fluid in the pleural space
    "pleural_other": ("pleural_thickening",),
    "fracture": ("rib_fracture", "clavicle_fracture"),
    "calcification": ("aortic_calcification",),
}

#: CheXpert column -> findings whose positive/uncertain mentions only also feed it ("no
#: hydropneumothorax" says nothing of an effusion)
CHEXPERT_CHILDREN: dict[str, tuple[str, ...]] = {"Pleural Effusion": ("hydropneumothorax",)}

#: columns that do not make a report abnormal (No Finding ignores them)
NOT_ABNORMAL = frozenset({"Support Devices", "support_devices"})

VOCABULARIES = ("chexpert", "canonical")


def columns(vocabulary: str) -> tuple[str, ...]:
    """The output columns of ``vocabulary``, ``No Finding``/``no_finding`` first."""
    if vocabulary == "chexpert":
        return tuple(CHEXPERT)
    return ("no_finding", *FINDINGS)


def feeds(vocabulary: str) -> dict[str, tuple[tuple[str, bool], ...]]:
    """Column -> ``(finding, positive_only)`` pairs that feed it (No Finding excluded)."""
    if vocabulary == "chexpert":
        return {c: (*((f, False) for f in fs), *((f, True) for f in CHEXPERT_CHILDREN.get(c, ())))
                for c, fs in CHEXPERT.items() if fs}
    return {f: ((f, False), *((c, True) for c in CANONICAL_CHILDREN.get(f, ())))
            for f in FINDINGS}
