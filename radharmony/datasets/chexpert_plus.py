"""CheXpert-Plus (Stanford AIMI, 2024): reports and demographics for the CheXpert images.

Source of truth: ``df_chexpert_plus_240401.csv``, one row per image, 27 columns in
:data:`COLUMNS` order (``path_to_image`` ... ``split``); ``report`` is the whole report, the
``section_*`` columns a separate parse of it. Labels come from the CheXbert JSON Lines file
``report_fixed.json`` (in ``chexbert_labels.zip`` or its extracted ``chexbert_labels/``
folder, found beside the table): one object per image keyed by ``path_to_image`` with the 14
CheXpert names, values ``1`` / ``0`` / ``-1`` or absent (not mentioned -> NaN). Without the
file every label is NaN (with a warning).

Joins with ``chexpert`` / ``chexpert_valid``: ``image_path`` is ``path_to_image``
(``train/patient00001/study1/view1_frontal.jpg``), ``patient_id`` its ``patientNNNNN`` part and
``study_id`` ``patientNNNNN/studyN`` -- the values CheXpert's harmonizer gives the same image,
so with ``base_image_dir`` = the CheXpert release folder both datasets read (and cache) the
same files. ``deid_patient_id`` is kept as a column. The PNG release stores ``.png`` files under
``PNG/{train,valid}/...`` while the table says ``.jpg``: when ``base_image_dir`` holds the
``.png`` form of the first listed image and not the ``.jpg``, ``image_path`` ends in ``.png``
(merge any ``png_chexpert_plus_chunk_K/`` levels first).

Counts: the paper gives 223,228 images, 187,711 reports, 64,725 patients; the CSV has 223,462
rows (neither is asserted). Unverified (no real file available): the CheXbert file's exact
name inside the zip, and the ``frontal_lateral`` / ``ap_pa`` spellings (read as CheXpert's).
"""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..errors import MetadataError
from ..annotations.labels import UncertainLabelsMixin
from ..spec import DatasetSpec, Identity
from ..table.read_csv import check_cells, read_csv_table
from .chexpert import LABEL_MAP as CHEXPERT_LABEL_MAP
from .chexpert import LABELS, SEX_MAP, SPLIT_MAP, VIEW_MAP
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COLUMNS = ("path_to_image", "path_to_dcm", "frontal_lateral", "ap_pa", "deid_patient_id",
           "patient_report_date_order", "report", "section_narrative",
           "section_clinical_history", "section_history", "section_comparison",
           "section_technique", "section_procedure_comments", "section_findings",
           "section_impression", "section_end_of_impression", "section_summary",
           "section_accession_number", "age", "sex", "race", "ethnicity", "interpreter_needed",
           "insurance_type", "recent_bmi", "deceased", "split")
#: the section columns kept (the study-level sections: ``radharmony.studies.sections``)
SECTIONS = ("section_clinical_history", "section_history", "section_comparison",
            "section_technique", "section_findings", "section_impression")
DEMOGRAPHICS = ("race", "ethnicity", "interpreter_needed", "insurance_type", "deceased")
LABEL_FILE = "report_fixed.json"
LABEL_CODES = {1: 1.0, 0: 0.0, -1: -1.0, 1.0: 1.0, 0.0: 0.0, -1.0: -1.0}
EXTRA_COLS = ("deid_patient_id", "patient_report_date_order", "patient_age", "patient_sex",
              *DEMOGRAPHICS, "recent_bmi", "frontal_lateral", "ap_pa", *SECTIONS, "split", "split_raw")
#: the CheXpert labeler's 14 observations, mapped as CheXpert's (radharmony.vocabulary)
LABEL_MAP = CHEXPERT_LABEL_MAP
ACCESS = ("Stanford AIMI, free registration: Stanford University School of Medicine Research "
          "Data Use Agreement (non-commercial research)")
SPEC = DatasetSpec(
    identity=Identity("chexpert"),
    column_types={"patient_report_date_order": "Int64", "patient_age": "Int64", "recent_bmi": "float64"},
    label_map=LABEL_MAP, key="chexpert_plus", title="CheXpert-Plus", metadata_files=("df_chexpert_plus_240401.csv",),
    label_cols=LABELS, extra_cols=EXTRA_COLS, outputs=frozenset({"cls", "report"}),
    view_map=VIEW_MAP, access=ACCESS,
    age_col="patient_age", sex_col="patient_sex",
    expected={"images": 223_228, "reports": 187_711, "patients": 64_725, "rows": 223_462})


# -- pure helpers ---------------------------------------------------------------------------------
def read_label_lines(path: Path) -> list[dict]:
    """The CheXbert JSON Lines file (plain, or inside ``chexbert_labels.zip``) as objects."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as zf:
            member = next(n for n in zf.namelist() if n.endswith(LABEL_FILE))
            text = io.TextIOWrapper(zf.open(member), encoding="utf-8").read()
    else:
        text = path.read_text(encoding="utf-8")
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                raise MetadataError(f"{path}, line {n}: not JSON", expected="one JSON object "
                                    "per line (JSON Lines)", found=repr(line[:80]),
                                    fix="re-extract chexbert_labels.zip") from None
    return out


def label_matrix(lines: list[dict] | None, paths: pd.Series, *, source: str) -> np.ndarray:
    """(n, 14) float32 from CheXbert objects keyed by ``path_to_image``; absent -> NaN."""
    out = np.full((len(paths), len(LABELS)), np.nan, np.float32)
    if lines is None:
        return out
    row = {p: i for i, p in enumerate(paths)}
    for n, rec in enumerate(lines, 1):
        i = row.get(rec.get("path_to_image"))
        if i is None:
            continue
        for j, name in enumerate(LABELS):
            v = rec.get(name)
            if v is None or isinstance(v, float) and np.isnan(v):
                continue
            if isinstance(v, bool) or v not in LABEL_CODES:
                raise MetadataError(f"{source} labels, line {n}: {name!r} has an unknown value",
                                    expected="1, 0, -1 or absent", found=repr(v),
                                    fix="re-extract chexbert_labels.zip")
            out[i, j] = LABEL_CODES[v]
    return out


# -- harmonizer -----------------------------------------------------------------------------------
class CheXpertPlusHarmonizer(BaseHarmonizer):
    """CheXpert-Plus: 223,462 table rows (the paper: 223,228 images, 64,725 patients)."""

    spec = SPEC
    metadata_description = "the CheXpert-Plus table df_chexpert_plus_240401.csv"

    def inputs(self, path: Path) -> Inputs:
        """The CSV, the CheXbert label file beside it, and the image root's ``.png`` listing
        (which of the two image releases is extracted decides the extension)."""
        labels = next((c for c in (path.parent / LABEL_FILE,
                                   path.parent / "chexbert_labels" / LABEL_FILE,
                                   path.parent / "chexbert_labels.zip") if c.is_file()), None)
        base = self.base_image_dir
        return Inputs(path, {"labels": labels},
                      {"png_images": (base if base is not None and base.is_dir() else None,
                                      (".png",))})

    def read(self, inputs: Inputs) -> dict:
        path = inputs.metadata
        table = read_csv_table(path, COLUMNS, description=self.metadata_description)
        labels = None
        if inputs.file("labels") is not None:
            labels = read_label_lines(inputs.file("labels"))
        else:
            warnings.warn(f"No {LABEL_FILE} or chexbert_labels.zip beside {path}: every label "
                          "is missing (NaN)", UserWarning, stacklevel=3)
        ext = ".jpg"
        if len(table) and inputs.folders["png_images"][0] is not None:
            first = str(Path(table["path_to_image"].iat[0]).with_suffix(".png"))
            if first in set(inputs.listing("png_images")):
                ext = ".png"
        return {"table": table, "labels": labels, "image_ext": ext}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        t = raw["table"]
        path = t["path_to_image"]
        check_cells(path.str.fullmatch(r"(train|valid)/patient\d+/study\d+/[^/]+\.jpg"), path,
                    source=source, what="path_to_image is not <split>/patient/study/view.jpg",
                    expected="e.g. train/patient00001/study1/view1_frontal.jpg")
        study = path.str.replace(r"^[^/]+/|/[^/]+$", "", regex=True)
        ext = raw.get("image_ext", ".jpg")
        view = t["ap_pa"].fillna(t["frontal_lateral"])  # raw, as CheXpert's harmonizer keeps it
        df = pd.DataFrame({
            "patient_id": study.str.replace(r"/.*$", "", regex=True), "study_id": study,
            "image_path": path if ext == ".jpg" else path.str.slice(0, -4) + ext,
            "view_position": view.astype(object), "report": t["report"]})
        df[list(LABELS)] = label_matrix(raw.get("labels"), path, source=source)
        df["deid_patient_id"] = t["deid_patient_id"]
        df["patient_report_date_order"] = pd.to_numeric(
            t["patient_report_date_order"]).astype("Int64")
        df["patient_age"] = pd.to_numeric(t["age"]).round().astype("Int64")
        df["patient_sex"] = t["sex"].map(SEX_MAP)
        for col in DEMOGRAPHICS:
            df[col] = t[col]
        df["recent_bmi"] = pd.to_numeric(t["recent_bmi"]).astype("float64")
        df["frontal_lateral"] = t["frontal_lateral"]
        df["ap_pa"] = t["ap_pa"]
        for col in SECTIONS:
            df[col] = t[col]
        df["split_raw"] = t["split"]
        df["split"] = t["split"].map(SPLIT_MAP)
        return df


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class CheXpertPlusDataset(UncertainLabelsMixin, BaseRadiologicalDataset):
        """CheXpert-Plus; ``base_image_dir`` is the CheXpert release folder (JPEGs, the same files
        and cache entries as ``chexpert``) or the PNG release's ``PNG/`` folder.

        ``output_report=True`` gives the whole ``report``; ``uncertain=`` as for CheXpert.
        """

        harmonizer_class = CheXpertPlusHarmonizer

    return CheXpertPlusDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["CheXpertPlusHarmonizer", "CheXpertPlusDataset"]
