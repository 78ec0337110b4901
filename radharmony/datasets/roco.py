"""ROCO, Radiology Objects in COntext (Pelka et al., LABELS 2018): 81,807 radiology figures of
PubMed Central open-access articles with their captions -- every modality (CT, MRI, X-ray,
ultrasound, angiography, ...), the chest ones flagged.

Layout (the ``razorx89/roco-dataset`` repository after its ``scripts/fetch.py``; the root,
holding ``data/``, is ``base_image_dir``)::

    data/{train,validation,test}/radiology/captions.txt   ROCO_<n> TAB " <caption>"
    data/{train,validation,test}/radiology/keywords.txt   ROCO_<n> TAB TAB <kw> TAB <kw> ...
    data/{train,validation,test}/radiology/cuis.txt       ROCO_<n> TAB TAB <CUI> TAB <CUI> ...
    data/{train,validation,test}/radiology/dlinks.txt     ROCO_<n> TAB wget -r <PMC package
                                                          URL> -P /path/to/Dir TAB <figure file>
    data/{train,validation,test}/radiology/images/ROCO_<n>.jpg

(checked on the repository's own files: 65,448 / 8,180 / 8,179 radiology entries). Keywords
are the caption's words, lower-cased and crudely singularised (``pelvi``, ``tuberculosi``);
CUIs are UMLS concepts. The ``non-radiology/`` subsets and ``semtypes.txt`` are not read.

Harmonized: one row per caption; ``report`` and ``caption`` the caption (stripped),
``keywords`` / ``cuis`` JSON lists, ``pmc_id`` the article (from the package URL) and
``figure`` its file in the article. An article is the patient and the study (its figures
often show one patient: they stay on one side of any split); without a ``dlinks.txt`` row the
ROCO id is. ``split`` is the release's folder (``validation`` -> ``valid``).

Flags from the caption (rules, not labels; ROCO has no modality field): ``modality`` is the
earliest-mentioned of CT, MRI, PET/nuclear, ultrasound, angiography, mammography,
fluoroscopy, X-ray (None when no term matches); ``chest`` is 1 when the caption names a chest
structure (chest, thorax, lung, pleura, mediastinum, ...), ``chest_xray`` when it is also an
X-ray. Mixture tasks: ``caption_image`` (the caption) and ``image_keywords``.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import MetadataError
from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer, Inputs
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
SPLITS = {"train": "train", "validation": "valid", "test": "test"}  # folder -> split
KINDS = ("captions", "keywords", "cuis", "dlinks")
#: modality -> the caption terms that name it (whole words, any case), in tie-break order
MODALITY_TERMS = {
    "CT": r"ct|cta|hrct|mdct|cbct|cone[- ]beam|computed tomograph\w*|computeri[sz]ed tomograph\w*",
    "MRI": r"mri|mra|mrcp|magnetic resonance|t[12][- ]?weighted|t[12]w\w*|flair|dwi|gadolinium|"
           r"diffusion[- ]weighted",
    "PET/nuclear": r"pet|spect|scintigra\w*|scintiscan",
    "ultrasound": r"ultrasound\w*|ultrasonogra\w*|sonogra\w*|echocardiogra\w*|doppler",
    "angiography": r"angiogra\w*|arteriogra\w*|venogra\w*|dsa",
    "mammography": r"mammogra\w*",
    "fluoroscopy": r"fluoroscop\w*|barium|cholangiogra\w*|urogra\w*|hysterosalpingogra\w*",
    "X-ray": r"x[- ]?rays?|radiograph\w*|radiogram|cxr|plain films?|orthopantomogra\w*|opg",
}
CHEST_TERMS = (r"chest|thora\w*|lungs?|pulmonary|pleura\w*|mediastin\w*|hil(?:ar|um)|"
               r"pneumothora\w*|trachea\w*|bronch\w*|ribs?|cardiomegaly")
EXTRA_COLS = ("caption", "keywords", "cuis", "pmc_id", "figure", "modality", "chest",
              "chest_xray", "split", "split_raw")
SPEC = DatasetSpec(
    key="roco", title="ROCO (Radiology Objects in COntext)",
    metadata_files=("data/train/radiology/captions.txt",), extra_cols=EXTRA_COLS,
    outputs=frozenset({"report"}), column_types={"keywords": "json", "cuis": "json",
                                                 "chest": "Int64", "chest_xray": "Int64"},
    expected={"images": 81_807, "train": 65_448, "valid": 8_180, "test": 8_179},
    access=("github.com/razorx89/roco-dataset (captions, keywords, links); images from the PMC "
            "open-access subset, each under its article's licence (licences.txt)"))
#: one search finds the earliest mention (the first alternative wins at one position)
_MODALITY_RX = re.compile(r"\b(?:" + "|".join(f"(?P<m{i}>{t})" for i, t in
                                             enumerate(MODALITY_TERMS.values())) + r")\b", re.I)
_MODALITY_NAMES = {f"m{i}": name for i, name in enumerate(MODALITY_TERMS)}
_CHEST_RX = re.compile(rf"\b(?:{CHEST_TERMS})\b", re.I)
_PMC_RX = re.compile(r"/(PMC\d+)\.tar\.gz")
_ID_RX = re.compile(r"ROCO_\d+")


def modality(caption: str) -> str | None:
    """The earliest-mentioned modality of :data:`MODALITY_TERMS` in ``caption`` (None)."""
    m = _MODALITY_RX.search(caption)
    return None if m is None else _MODALITY_NAMES[m.lastgroup]


def parse_lines(text: str, *, source: str) -> dict[str, list[str]]:
    """A ROCO tab file -> ROCO id -> its other fields (empty fields dropped, stripped)."""
    out = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        rid, _, rest = line.partition("\t")
        rid = rid.strip()
        if not _ID_RX.fullmatch(rid):
            raise MetadataError(f"{source}, line {n}: no ROCO id", expected="ROCO_<n> TAB ...",
                                found=repr(line[:80]), fix="re-clone the roco-dataset repository")
        out[rid] = [f for f in map(str.strip, rest.split("\t")) if f]
    return out


# -- harmonizer -----------------------------------------------------------------------------------
class ROCOHarmonizer(BaseHarmonizer):
    """ROCO: 81,807 radiology figures with captions (65,448 / 8,180 / 8,179)."""

    spec = SPEC
    metadata_description = "the ROCO captions data/train/radiology/captions.txt"

    def inputs(self, path: Path) -> Inputs:
        """Every split's captions, keywords, CUIs and download links (``data/`` is three
        folders above the training captions)."""
        data = path.parent.parent.parent
        files = {f"{split}/{kind}": data / split / "radiology" / f"{kind}.txt"
                 for split in SPLITS for kind in KINDS if (split, kind) != ("train", "captions")}
        return Inputs(path, {k: v if v.is_file() else None for k, v in files.items()})

    def read(self, inputs: Inputs) -> dict:
        out = {}
        for role in inputs.files:
            found = inputs.file(role)
            out[role] = None if found is None else found.read_text(encoding="utf-8",
                                                                   errors="replace")
        out["train/captions"] = inputs.metadata.read_text(encoding="utf-8", errors="replace")
        return out

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        parts = []
        for folder, split in SPLITS.items():
            text = raw.get(f"{folder}/captions")
            if text is None:
                continue
            fields = {k: parse_lines(raw.get(f"{folder}/{k}") or "", source=f"{source} "
                                     f"({folder}/{k}.txt)") for k in KINDS}
            ids = list(fields["captions"])
            links = [fields["dlinks"].get(i, []) for i in ids]
            pmc = [next(iter(_PMC_RX.findall(f[0])), None) if f else None for f in links]
            parts.append(pd.DataFrame({
                "roco_id": ids, "caption": [" ".join(fields["captions"][i]) or None for i in ids],
                "keywords": [fields["keywords"].get(i, []) for i in ids],
                "cuis": [fields["cuis"].get(i, []) for i in ids], "pmc_id": pmc,
                "figure": [f[-1] if len(f) > 1 else None for f in links], "split": split,
                "split_raw": folder, "image_path": [f"data/{folder}/radiology/images/{i}.jpg"
                                                    for i in ids]}))
        if not parts:
            raise MetadataError(f"{source}: no ROCO captions", expected="data/<split>/radiology/"
                                "captions.txt", found="none of train, validation, test",
                                fix="clone github.com/razorx89/roco-dataset")
        t = pd.concat(parts, ignore_index=True)
        caption = t["caption"].fillna("")
        patient = t["pmc_id"].where(t["pmc_id"].notna(), t["roco_id"])
        df = pd.DataFrame({"patient_id": patient.to_numpy(object),
                           "study_id": patient.to_numpy(object),
                           "image_path": t["image_path"].to_numpy(object), "view_position": None,
                           "report": t["caption"].to_numpy(object)})
        for col in ("caption", "keywords", "cuis", "pmc_id", "figure"):
            df[col] = t[col].to_numpy(object)
        df["modality"] = np.array([modality(c) for c in caption], object)
        chest = caption.map(lambda c: bool(_CHEST_RX.search(c))).to_numpy(bool)
        df["chest"] = pd.array(chest.astype(int), dtype="Int64")
        df["chest_xray"] = pd.array((chest & (df["modality"] == "X-ray").to_numpy(bool))
                                    .astype(int), dtype="Int64")
        df["split"] = t["split"].to_numpy(object)
        df["split_raw"] = t["split_raw"].to_numpy(object)
        return df


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class ROCODataset(BaseRadiologicalDataset):
        """ROCO; ``base_image_dir`` is the roco-dataset repository root (holding ``data/``).
        The chest figures: ``harmonized_df["chest"] == 1`` (X-rays: ``chest_xray``)."""

        harmonizer_class = ROCOHarmonizer

    return ROCODataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["ROCOHarmonizer", "ROCODataset"]
