"""PadChest-GR (BIMCV, Castro et al., NEJM AI 2025): grounded radiology reports on 4,555
PadChest studies -- finding sentences in Spanish and English, each positive one with the boxes
of up to two independent readers.

Source of truth: ``grounded_reports_20240819.json`` -- a list of studies, each with its
``ImageID`` (and ``StudyID``) and a ``findings`` list; every finding has ``sentence_en``,
``sentence_es``, ``abnormal`` (bool), ``boxes`` (reader 1) and ``extra_boxes`` (reader 2) as
**normalised** ``[x1, y1, x2, y2]`` lists, ``labels`` (PadChest terms), ``locations`` and
``progression``. Beside it ``master_table.csv`` (or ``master_table.csv.zip``): ``StudyID,
ImageID, PatientID, PatientAge, PatientSex_DICOM, StudyDate_DICOM, split, study_is_benchmark,
study_is_validation`` (read by name).

Harmonized: one row per image. ``report`` is the English grounded report (the sentences in
order), ``report_es`` the Spanish one, ``sentences`` every finding as a dict. Each box is a
record with ``annotator`` ``"1"`` or ``"2"`` (the reader: keep them apart for inter-reader
agreement, ``bbox_annotator="1"`` selects one), label = the sentence's first term, and the extra
keys ``sentence`` (its index), ``sentence_en``, ``labels``. Label columns are PadChest's
(:data:`radharmony.datasets.padchest.LABEL_TERMS`, exact terms only) over the *abnormal*
sentences; every study is fully read, so an unlisted label is 0, and ``No Finding`` is 1 when
no sentence is abnormal.

Joins with ``padchest``: ``patient_id`` = ``PatientID``, ``study_id`` = ``StudyID``. When
PadChest's own table (``PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv.gz``) is found near
``base_image_dir``, ``image_path`` is PadChest's ``<ImageDir>/<ImageID>`` -- the same file and
cache entry as ``padchest`` with the same ``base_image_dir``; otherwise it is
``Padchest_GR_files/<ImageID>`` under the PadChest-GR folder (some extractions name it
``BIMCV-Padchest-GR `` with a trailing space: pass that folder as ``base_image_dir``).

Unverified (no real file available here; from third-party loaders): the JSON's key names
(``ImageID``/``image_id``, ``findings``, ``sentence_es``/``sentence``, a box as one 4-list or a
list of them are all accepted), the master table's full header, and that its ids join the
PadChest table. Prior images (``PadChest_GR_progression_Images/``) are not read.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.boxes import box_record
from ..errors import MetadataError
from ..spec import DatasetSpec, Identity
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import find_optional
from ..table.read_csv import read_table, require_columns
from ..table.read_json import read_json_file
from .padchest import FILE as PADCHEST_FILE
from .padchest import LABEL_MAP, LABEL_TERMS, LABELS
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
JSON_FILE = "grounded_reports_20240819.json"
MASTER_COLUMNS = ("StudyID", "ImageID", "PatientID")
MASTER_FILES = ("master_table.csv", "master_table.csv.zip")
PADCHEST_FILES = (f"{PADCHEST_FILE}.gz", PADCHEST_FILE)
IMAGE_DIR = "Padchest_GR_files"
READERS = (("boxes", "1"), ("extra_boxes", "2"))
SPLIT_MAP = {"train": "train", "validation": "valid", "val": "valid", "test": "test"}
TERM_LABEL = {t: lab for lab, terms in LABEL_TERMS.items() for t in terms}
ACCESS = ("BIMCV PadChest-GR (bimcv.cipf.es), registration and the PadChest-GR research use "
          "agreement (non-commercial)")
SPEC = DatasetSpec(
    identity=Identity("padchest"),
    key="padchest_gr", title="PadChest-GR (grounded reports on PadChest)",
    metadata_files=(JSON_FILE, f"BIMCV-Padchest-GR/{JSON_FILE}", f"BIMCV-Padchest-GR /{JSON_FILE}"),
    label_cols=LABELS, extra_cols=("image_id", "report_es", "patient_sex", "patient_age",
                                   "study_date", "split", "split_raw", "sentences", "boxes"),
    column_types={"patient_age": "Int64", "study_date": "Int64", "sentences": "json"},
    outputs=frozenset({"cls", "bbox", "report"}), access=ACCESS, label_map=LABEL_MAP,
    expected={"studies": 4_555, "abnormal_studies": 3_099, "normal_studies": 1_456,
              "positive_sentences": 7_037, "negative_sentences": 3_422})
_FIX = "pass the PadChest-GR files as downloaded"


# -- pure helpers ---------------------------------------------------------------------------------
def box_lists(value, *, where: str) -> list[list[float]]:
    """A reader's boxes: one ``[x1, y1, x2, y2]`` list, a list of them, or nothing."""
    if value is None or value == []:
        return []
    items = [value] if len(value) == 4 and all(isinstance(v, (int, float)) for v in value) \
        else value
    out = []
    for b in items:
        try:
            x1, y1, x2, y2 = (float(v) for v in b)
        except (TypeError, ValueError):
            raise MetadataError(f"{where}: a box is not [x1, y1, x2, y2]",
                                expected="normalised corner lists", found=repr(b)[:80],
                                fix=_FIX) from None
        out.append([x1, y1, x2, y2])
    return out


def study_fields(study: dict, *, where: str) -> dict:
    """``image_id``, the sentences, the box records and the positive terms of one study."""
    image = study.get("ImageID", study.get("image_id")) if isinstance(study, dict) else None
    findings = study.get("findings") if isinstance(study, dict) else None
    if not isinstance(image, str) or not isinstance(findings, list):
        raise MetadataError(f"{where}: not a PadChest-GR study",
                            expected="an object with ImageID and a findings list",
                            found=repr(study)[:100], fix=_FIX)
    sentences, boxes, terms = [], [], set()
    for k, f in enumerate(findings):
        labels = [str(t).strip() for t in f.get("labels") or []]
        abnormal = bool(f.get("abnormal"))
        en = f.get("sentence_en")
        sentences.append({"sentence_en": en, "sentence_es": f.get("sentence_es",
                                                                  f.get("sentence")),
                          "abnormal": abnormal, "labels": labels,
                          "locations": f.get("locations", []),
                          "progression": f.get("progression")})
        if abnormal:
            terms |= set(labels)
        for key, reader in READERS:
            for x1, y1, x2, y2 in box_lists(f.get(key), where=f"{where}, findings[{k}].{key}"):
                boxes.append({**box_record(labels[0] if labels else "finding", reader,
                                           x1, y1, x2, y2),
                              "sentence": k, "sentence_en": en, "labels": labels})
    return {"image_id": image.strip(), "study_id": study.get("StudyID"),
            "sentences": sentences, "boxes": boxes, "terms": terms}


def _report(sentences: list[dict], key: str) -> str | None:
    text = " ".join(str(s[key]).strip() for s in sentences if s.get(key))
    return text or None


# -- harmonizer -----------------------------------------------------------------------------------
class PadChestGRHarmonizer(BaseHarmonizer):
    """PadChest-GR: 4,555 studies (3,099 abnormal), two readers' boxes per positive sentence."""

    spec = SPEC
    metadata_description = f"the PadChest-GR grounded reports {JSON_FILE}"

    def inputs(self, path: Path) -> Inputs:
        """The JSON, ``master_table.csv`` beside it and PadChest's own table near the images
        (its ``ImageDir`` places each image in the PadChest tree)."""
        return Inputs(path, {"master": find_optional(MASTER_FILES, path.parent),
                             "padchest": find_optional(PADCHEST_FILES, self.base_image_dir)})

    def read(self, inputs: Inputs) -> dict:
        raw = {"studies": read_json_file(inputs.metadata, what="a list of studies"),
               "master": None, "padchest": None}
        if (p := inputs.file("master")) is not None:
            raw["master"] = read_table(p, description="master_table.csv", dtype=str,
                                       columns=MASTER_COLUMNS)
        if (p := inputs.file("padchest")) is not None:
            raw["padchest"] = read_table(p, description=p.name, dtype=str,
                                         usecols=["ImageID", "ImageDir"],
                                         columns=("ImageID", "ImageDir"))
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        studies = raw["studies"]
        if not isinstance(studies, list):
            raise MetadataError(f"{source}: the grounded reports are not a list",
                                expected="a JSON list of studies", found=type(studies).__name__,
                                fix=_FIX)
        rows = [study_fields(s, where=f"{source}, study {i}") for i, s in enumerate(studies)]
        image = pd.Series([r["image_id"] for r in rows], dtype=object)
        master = raw.get("master")
        if master is None:
            warnings.warn(f"{source}: no master_table.csv beside it: patient ids are missing, "
                          "so patient_id is the study id", stacklevel=2)
            master = pd.DataFrame(columns=list(MASTER_COLUMNS))
        require_columns(master, MASTER_COLUMNS, source=source, description="master_table.csv")
        m = master.drop_duplicates("ImageID").set_index("ImageID").reindex(image)
        study = m["StudyID"].fillna(pd.Series([r["study_id"] for r in rows],
                                              index=m.index, dtype=object))
        study = study.where(study.notna(), image.str.replace(r"\.png$", "", regex=True)
                            .to_numpy())
        patient = m["PatientID"].fillna(study)
        path = IMAGE_DIR + "/" + image
        if (pc := raw.get("padchest")) is not None:
            folder = pc.drop_duplicates("ImageID").set_index("ImageID")["ImageDir"] \
                .reindex(image).to_numpy(object)
            known = pd.notna(folder)
            if not known.all():
                warnings.warn(f"{source}: {int((~known).sum())} of {len(image)} images are not "
                              f"in the PadChest table; their image_path is {IMAGE_DIR}/<ImageID>",
                              stacklevel=2)
            path = pd.Series(np.where(known, pd.Series(folder).astype(str).str.replace(
                r"\.0$", "", regex=True) + "/" + image, path), dtype=object)
        df = pd.DataFrame({"patient_id": patient.to_numpy(object),
                           "study_id": study.to_numpy(object),
                           "image_path": np.asarray(path, dtype=object), "view_position": None,
                           "report": [_report(r["sentences"], "sentence_en") for r in rows]})
        hot = np.zeros((len(rows), len(LABELS)), np.float32)
        for i, r in enumerate(rows):
            for t in r["terms"]:
                if t in TERM_LABEL:
                    hot[i, LABELS.index(TERM_LABEL[t])] = 1.0
            if not r["terms"] and not any(s["abnormal"] for s in r["sentences"]):
                hot[i, LABELS.index("No Finding")] = 1.0
        df[list(LABELS)] = hot
        df["image_id"] = image.to_numpy(object)
        df["report_es"] = [_report(r["sentences"], "sentence_es") for r in rows]
        col = {c: m[c].to_numpy(object) if c in m.columns else [None] * len(m)
               for c in ("PatientSex_DICOM", "PatientAge", "StudyDate_DICOM", "split")}
        df["patient_sex"] = [v if isinstance(v, str) else None for v in col["PatientSex_DICOM"]]
        df["patient_age"] = pd.array(pd.to_numeric(pd.Series(col["PatientAge"]),
                                                   errors="coerce").round(), dtype="Int64")
        df["study_date"] = pd.array(pd.to_numeric(pd.Series(col["StudyDate_DICOM"]),
                                                  errors="coerce"), dtype="Int64")
        df["split_raw"] = [v if isinstance(v, str) else None for v in col["split"]]
        df["split"] = [SPLIT_MAP.get(str(v).strip().lower()) if isinstance(v, str) else None
                       for v in col["split"]]
        df["sentences"] = [r["sentences"] for r in rows]
        df["boxes"] = [r["boxes"] for r in rows]
        return df


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class PadChestGRDataset(BaseRadiologicalDataset):
        """PadChest-GR; ``base_image_dir`` is the PadChest root (``<ImageDir>/`` folders,
        shared with ``padchest``) or the PadChest-GR folder (``Padchest_GR_files/``).
        ``output_bbox=True`` adds ``bbox_sentences`` (the English sentence of each box)."""

        harmonizer_class = PadChestGRHarmonizer

        def add_outputs(self, index: int, sample: dict, box) -> None:
            super().add_outputs(index, sample, box)
            if "bbox" in sample:
                chosen = self.box_selection.apply(self.rows.boxes[index])
                sample["bbox_sentences"] = [b.get("sentence_en") for b in chosen]

    return PadChestGRDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["PadChestGRHarmonizer", "PadChestGRDataset"]
