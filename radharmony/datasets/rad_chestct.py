"""RAD-ChestCT (Draelos et al.): chest CT volumes of Duke University Health System with 84
abnormalities x 52 locations extracted from the reports (public release: 3,630 of 35,747 scans;
NumPy volumes, no affine).

Layout, as the Zenodo release ships it (``base_image_dir`` the folder holding the volumes,
searched recursively; the tables beside the metadata or in ``base_image_dir``)::

    <NoteAcc_DEID>.npz                                  key ``ct``: int16 HU, axes (I, P, L)
    CT_Scan_Metadata_Complete_35747.csv                 NoteAcc_DEID, MRN_DEID, final_spacing, ...
    imgtrain_Abnormality_and_Location_Labels.csv        NoteAcc_DEID, <abnormality>*<location>, ...
    imgvalid_Abnormality_and_Location_Labels.csv
    imgtest_Abnormality_and_Location_Labels.csv

Source of truth: the three label tables, one row per scan (``NoteAcc_DEID``, ``trn00001``);
the split is the file a row comes from. Quirks:

- **No geometry in the file.** A volume is a bare array whose axes run toward (I, P, L) in
  LPS (first slice the most superior) at 0.8 mm isotropic after the release's resampling
  (``final_spacing`` in the metadata): :func:`radharmony.volumes.npz.read_npz` reads it with
  that declared geometry into the canonical order (S, P, L). A row without a spacing in the
  metadata takes :data:`SPACING`.
- **The label matrix.** Each label table has 84 x 52 = 4,368 binary columns named
  ``<abnormality>*<location>`` (``nodule*right_upper``). The abnormality axis gives ``cls``
  (an abnormality is present when present at any location), mapped into the canonical label
  space; the whole matrix is kept in ``abnormality_locations``, the list of present
  ``[abnormality, location]`` pairs (lossless: every other cell is 0), and
  :func:`location_matrix` turns it back into the (84, 52) array. A column the file lacks
  leaves its abnormality unknown (NaN) only if none of its locations is present.
- **The public subset.** The metadata covers all 35,747 scans, the label tables (as public
  loaders pair them with the volumes, row for row) the 3,630 public ones: the table is the
  label tables' rows, the metadata only joined on (its other rows are not public scans). A
  volume is found by listing ``base_image_dir`` (any nesting the archives unpack to); when it
  is not listed, its path is ``<NoteAcc_DEID>.npz``.
- ``patient_id`` is ``MRN_DEID`` from the metadata (several scans per patient); a scan the
  metadata lacks is its own patient (counted in a warning). Reports are not released: the
  table has indications neither.

Unverified (no copy of the files was at hand): the label tables' column names and order are
taken from public loaders (``NoteAcc_DEID`` then ``<abnormality>*<location>``, 0/1 cells), and
the form of ``final_spacing`` (a number or a bracketed list of three are both read).
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.labels import decode_cells
from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, read_table
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
METADATA_FILE = "CT_Scan_Metadata_Complete_35747.csv"
#: the metadata columns read (``final_spacing`` when present)
METADATA_COLUMNS = ("NoteAcc_DEID", "MRN_DEID")
#: split -> the label table's name
LABEL_FILES = {"train": "imgtrain_Abnormality_and_Location_Labels.csv",
               "valid": "imgvalid_Abnormality_and_Location_Labels.csv",
               "test": "imgtest_Abnormality_and_Location_Labels.csv"}
#: the 84 abnormalities, in the release's (alphabetical) order
ABNORMALITIES = (
    "air_trapping", "airspace_disease", "aneurysm", "arthritis", "aspiration", "atelectasis",
    "atherosclerosis", "bandlike_or_linear", "breast_implant", "breast_surgery",
    "bronchial_wall_thickening", "bronchiectasis", "bronchiolectasis", "bronchiolitis",
    "bronchitis", "cabg", "calcification", "cancer", "cardiomegaly", "catheter_or_port",
    "cavitation", "chest_tube", "clip", "congestion", "consolidation", "coronary_artery_disease",
    "cyst", "debris", "deformity", "density", "dilation_or_ectasia", "distention", "emphysema",
    "fibrosis", "fracture", "gi_tube", "granuloma", "groundglass", "hardware", "heart_failure",
    "heart_valve_replacement", "hemothorax", "hernia", "honeycombing", "infection",
    "infiltrate", "inflammation", "interstitial_lung_disease", "lesion", "lucency",
    "lung_resection", "lymphadenopathy", "mass", "mucous_plugging", "nodule", "nodulegr1cm",
    "opacity", "other_path", "pacemaker_or_defib", "pericardial_effusion",
    "pericardial_thickening", "plaque", "pleural_effusion", "pleural_thickening", "pneumonia",
    "pneumonitis", "pneumothorax", "postsurgical", "pulmonary_edema", "reticulation",
    "scarring", "scattered_calc", "scattered_nod", "secretion", "septal_thickening",
    "soft_tissue", "staple", "stent", "sternotomy", "suture", "tracheal_tube", "transplant",
    "tree_in_bud", "tuberculosis")
#: the 52 locations, in the release's (alphabetical) order
LOCATIONS = (
    "abdomen", "adrenal_gland", "airways", "anterior", "aorta", "aortic_valve", "axilla", "bone",
    "breast", "centrilobular", "chest_wall", "diaphragm", "esophagus", "gallbladder", "heart",
    "hilum", "inferior", "interstitial", "intestine", "ivc", "kidney", "lateral", "left",
    "left_lower", "left_lung", "left_mid", "left_upper", "liver", "lung", "medial",
    "mediastinum", "mitral_valve", "other_location", "pancreas", "posterior",
    "pulmonary_artery", "pulmonary_valve", "pulmonary_vein", "rib", "right", "right_lower",
    "right_lung", "right_mid", "right_upper", "spine", "spleen", "stomach", "subpleural",
    "superior", "svc", "thyroid", "tricuspid_valve")
_DEVICE = (("support_devices", "narrower"), ("medical_material", "narrower"))
_MATERIAL = (("medical_material", "narrower"),)
#: abnormality -> canonical findings (radharmony.vocabulary); None: no canonical finding fits
#: (a location-free term such as ``density`` or a procedure such as ``cabg``)
LABEL_MAP = {a: None for a in ABNORMALITIES} | {
    "atelectasis": (("atelectasis", "exact"),), "cardiomegaly": (("cardiomegaly", "exact"),),
    "consolidation": (("consolidation", "exact"),), "emphysema": (("emphysema", "exact"),),
    "fibrosis": (("fibrosis", "exact"),), "fracture": (("fracture", "exact"),),
    "interstitial_lung_disease": (("interstitial_lung_disease", "exact"),),
    "pleural_effusion": (("pleural_effusion", "exact"),),
    "pleural_thickening": (("pleural_thickening", "exact"),),
    "pneumothorax": (("pneumothorax", "exact"),), "mass": (("mass", "exact"),),
    "nodule": (("nodule", "exact"),), "nodulegr1cm": (("nodule", "narrower"),),
    "scattered_nod": (("nodule", "narrower"),),
    "lymphadenopathy": (("lymphadenopathy", "exact"),),
    "pericardial_effusion": (("pericardial_effusion", "exact"),),
    "bronchiectasis": (("bronchiectasis", "exact"),),
    "tuberculosis": (("tuberculosis", "exact"),), "granuloma": (("granuloma", "exact"),),
    "infection": (("infection", "exact"),), "pneumonia": (("pneumonia", "exact"),),
    "heart_failure": (("heart_failure", "exact"),), "pulmonary_edema": (("edema", "exact"),),
    "congestion": (("pulmonary_congestion", "approximate"),),
    "infiltrate": (("infiltration", "exact"),),
    # an opacity may lie outside the lung (the location says): approximate
    "opacity": (("lung_opacity", "approximate"),),
    "groundglass": (("lung_opacity", "narrower"),),
    "airspace_disease": (("lung_opacity", "narrower"),),
    "calcification": (("calcification", "exact"),),
    "coronary_artery_disease": (("coronary_artery_calcification", "approximate"),),
    "atherosclerosis": (("arterial_wall_calcification", "approximate"),),
    "hernia": (("hiatal_hernia", "broader"),),
    "septal_thickening": (("interlobular_septal_thickening", "exact"),),
    "bronchial_wall_thickening": (("peribronchial_thickening", "approximate"),),
    "air_trapping": (("mosaic_attenuation", "approximate"),),
    "lesion": (("lung_lesion", "approximate"),),
    "catheter_or_port": _DEVICE, "chest_tube": _DEVICE, "gi_tube": _DEVICE,
    "pacemaker_or_defib": _DEVICE, "tracheal_tube": _DEVICE,
    "stent": _MATERIAL, "clip": _MATERIAL, "staple": _MATERIAL, "suture": _MATERIAL,
    "hardware": _MATERIAL, "breast_implant": _MATERIAL, "heart_valve_replacement": _MATERIAL,
}
LABEL_CODES = {"0": 0.0, "1": 1.0, "0.0": 0.0, "1.0": 1.0}
#: where each array axis of a volume runs (LPS letters) and the release's voxel size (mm)
AXES, SPACING = "IPL", 0.8
SUFFIX = ".npz"
EXTRA_COLS = ("note_acc_deid", "abnormality_locations", "spacing_mm", "split", "split_raw")
COLUMN_TYPES = {"abnormality_locations": "json", "spacing_mm": "float64"}
ACCESS = ("Zenodo (RAD-ChestCT, 3,630 public volumes): CC BY 4.0; cite Draelos et al., "
          "'Machine-learning-based multiple abnormality prediction with large-scale chest "
          "computed tomography volumes', Medical Image Analysis 2021")
#: the public release (the full 35,747 scans are not public)
EXPECTED = {"images": 3_630}

SPEC = DatasetSpec(
    key="rad_chestct", title="RAD-ChestCT", metadata_files=(METADATA_FILE,),
    label_cols=ABNORMALITIES, label_map=LABEL_MAP, extra_cols=EXTRA_COLS,
    outputs=frozenset({"cls"}), row_unit="volume", id_col="note_acc_deid",
    column_types=COLUMN_TYPES, access=ACCESS, expected=EXPECTED)


# -- pure helpers ---------------------------------------------------------------------------------
def location_matrix(pairs) -> np.ndarray:
    """A row's ``abnormality_locations`` -> the (84, 52) uint8 matrix of the release
    (:data:`ABNORMALITIES` x :data:`LOCATIONS`)."""
    out = np.zeros((len(ABNORMALITIES), len(LOCATIONS)), np.uint8)
    a, loc = {n: i for i, n in enumerate(ABNORMALITIES)}, {n: i for i, n in enumerate(LOCATIONS)}
    for abnormality, location in pairs or ():
        out[a[abnormality], loc[location]] = 1
    return out


def spacing_values(col: pd.Series, *, source: str) -> np.ndarray:
    """``final_spacing`` cells (``0.8`` or ``[0.8, 0.8, 0.8]``) -> one isotropic mm value per
    row (NaN where empty); anisotropic or unreadable cells are refused."""
    text = col.astype(object).where(col.notna(), "").astype(str)
    parts = [[float(v) for v in re.findall(r"[-+]?\d*\.?\d+(?:[eE][-+]?\d+)?", t)] for t in text]
    ok = pd.Series([len(p) in (0, 1, 3) and len(set(p)) <= 1 and all(v > 0 for v in p)
                    for p in parts], index=col.index)
    check_cells(ok, col, source=source, what="final_spacing is not one isotropic voxel size",
                expected="e.g. 0.8 or [0.8, 0.8, 0.8] (mm)")
    return np.array([p[0] if p else np.nan for p in parts], np.float64)


def _binary_cells(text: pd.DataFrame, *, source: str) -> np.ndarray:
    """0/1 text cells -> float32 (NaN where empty) in one pass over the 4,368 columns; any
    other text goes through :func:`decode_cells`, which names its row and column."""
    block = text.to_numpy(dtype=object)
    one, zero = block == "1", block == "0"
    if not (one | zero).all():            # the "1.0" spelling, empty cells, or bad text
        one |= block == "1.0"
        zero |= block == "0.0"
        if not (one | zero | pd.isna(block)).all():
            return decode_cells(text, LABEL_CODES, source=source)
    return np.where(one, np.float32(1), np.where(zero, np.float32(0), np.float32(np.nan)))


def label_matrix(labels: pd.DataFrame, *, source: str) -> tuple[np.ndarray, list]:
    """A label table's ``<abnormality>*<location>`` columns -> (``cls`` (rows, 84) float32:
    present anywhere, NaN when the file has none of an abnormality's columns and no present
    cell; the present pairs of each row)."""
    names = [c for c in labels.columns if c != "NoteAcc_DEID"]
    split = [c.split("*", 1) for c in names]
    ok = pd.Series([len(s) == 2 and s[0] in LABEL_MAP and s[1] in LOCATIONS for s in split])
    check_cells(ok, pd.Series(names), source=source,
                what="a label column is not <abnormality>*<location> of the release",
                expected="e.g. 'nodule*right_upper' (84 abnormalities x 52 locations)")
    values = _binary_cells(labels[names], source=source)
    cls = np.full((len(labels), len(ABNORMALITIES)), np.nan, np.float32)
    index = {n: i for i, n in enumerate(ABNORMALITIES)}
    cols = np.array([index[s[0]] for s in split], np.int64)
    present = np.nan_to_num(values, nan=0.0) > 0
    for a in np.unique(cols):
        block = values[:, cols == a]
        cls[:, a] = np.where((block > 0).any(axis=1), 1.0,
                             np.where(np.isnan(block).all(axis=1), np.nan, 0.0))
    rows, where = np.nonzero(present)
    pairs: list[list] = [[] for _ in range(len(labels))]
    for r, c in zip(rows.tolist(), where.tolist()):
        pairs[r].append(split[c])
    return cls, pairs


# -- harmonizer -----------------------------------------------------------------------------------
class RADChestCTHarmonizer(BaseHarmonizer):
    """RAD-ChestCT: one row per scan of the three label tables."""

    spec = SPEC

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return f"the RAD-ChestCT metadata table {METADATA_FILE}"

    def _side(self, path: Path, name: str) -> Path | None:
        roots = [path.parent] if self.base_image_dir is None else \
            [Path(self.base_image_dir), path.parent]
        return next((r / name for r in roots if (r / name).is_file()), None)

    def inputs(self, path: Path) -> Inputs:
        """The metadata, the three label tables and the volume folder (listed)."""
        files = {split: self._side(path, name) for split, name in LABEL_FILES.items()}
        base = None if self.base_image_dir is None else Path(self.base_image_dir)
        folders = {"volumes": (base if base is not None and base.is_dir() else None, (SUFFIX,))}
        return Inputs(path, files, folders)

    def read(self, inputs: Inputs) -> dict:
        text = {"dtype": str, "keep_default_na": False, "na_values": [""]}
        wanted = {*METADATA_COLUMNS, "final_spacing"}
        raw = {"metadata": read_table(inputs.metadata, description=self.metadata_description,
                                      columns=METADATA_COLUMNS,
                                      usecols=lambda c: c in wanted, **text)}
        for split, name in LABEL_FILES.items():
            path = inputs.file(split)
            if path is None:
                warnings.warn(f"No RAD-ChestCT label table {name} found near "
                              f"{inputs.metadata}: the table has no {split} rows", UserWarning,
                              stacklevel=3)
            raw[split] = None if path is None else read_table(
                path, description=f"the RAD-ChestCT label table {name}",
                columns=("NoteAcc_DEID",), **text)
        raw["volumes"] = inputs.by_name("volumes", suffix=SUFFIX)
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        parts, splits, pairs = [], [], []
        for split in LABEL_FILES:
            labels = raw.get(split)
            if labels is None:
                continue
            values, present = label_matrix(labels, source=f"{source} ({split} labels)")
            parts.append(pd.DataFrame(values, columns=list(ABNORMALITIES))
                         .assign(note_acc_deid=labels["NoteAcc_DEID"].to_numpy()))
            splits += [split] * len(labels)
            pairs += present
        df = pd.concat(parts, ignore_index=True) if parts else \
            pd.DataFrame(columns=["note_acc_deid", *ABNORMALITIES])
        df["split"] = df["split_raw"] = pd.Series(splits, dtype=object)
        df["abnormality_locations"] = pd.Series(pairs, dtype=object)
        note = df["note_acc_deid"].astype(str)
        check_cells(note.str.fullmatch(r"[A-Za-z0-9_]+"), note, source=source,
                    what="NoteAcc_DEID is not a scan id", expected="e.g. trn00001")
        volumes = raw.get("volumes")
        meta = raw["metadata"].drop_duplicates("NoteAcc_DEID", keep="last") \
            .set_index("NoteAcc_DEID").reindex(note.to_numpy())
        patient = meta["MRN_DEID"].reset_index(drop=True)
        missing = int(patient.isna().sum())
        if missing:
            warnings.warn(f"{source}: {missing} of {len(df)} scans have no row in the metadata: "
                          "each is its own patient", UserWarning, stacklevel=3)
        spacing = spacing_values(meta["final_spacing"].reset_index(drop=True), source=source) \
            if "final_spacing" in meta.columns else np.full(len(df), np.nan)
        paths = note + SUFFIX if volumes is None else \
            note.map(volumes).where(note.isin(list(volumes)), note + SUFFIX)
        out = pd.DataFrame({
            "patient_id": patient.where(patient.notna(), note).astype(str),
            "study_id": note, "image_path": paths, "view_position": None, "report": None,
            "note_acc_deid": note, "abnormality_locations": df["abnormality_locations"],
            "spacing_mm": spacing, "split": df["split"], "split_raw": df["split_raw"]})
        out[list(ABNORMALITIES)] = df[list(ABNORMALITIES)].to_numpy(np.float32)
        return out


def _dataset_classes():
    """This module's dataset class (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from functools import partial

    from ..data.volumes import VolumeDataset
    from ..volumes import read_volume
    from ..volumes.precache import VolumeJob

    class RADChestCTDataset(VolumeDataset):
        """RAD-ChestCT volumes: each ``.npz`` read with the declared axes (I, P, L) and its
        row's ``final_spacing`` (0.8 mm when the metadata gives none); ``base_image_dir`` the
        folder holding them."""
        harmonizer_class = RADChestCTHarmonizer
        ct = True

        def spacing(self, index: int) -> float:
            value = self.harmonized_df["spacing_mm"].iat[index]
            return SPACING if value != value else float(value)

        def read_params(self, index: int) -> dict:
            return {"reader": "read_npz", "ct": True, "axes": AXES,
                    "spacing": self.spacing(index)}

        def job(self, index: int):
            path = str(self.image_file(index))
            return VolumeJob([path], partial(read_volume, path, ct=True, axes=AXES,
                                             spacing=self.spacing(index)),
                             self.read_params(index))

    return (RADChestCTDataset,)


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["RADChestCTHarmonizer", "RADChestCTDataset"]
