"""CANDID-PTX (Feng et al., Radiology: AI 2021; Dunedin Hospital, New Zealand): 19,237 chest
radiographs with pneumothorax, acute rib fracture and chest tube segmentations and anonymised
free-text reports.

Source of truth: three CSV tables beside the JPEGs (``<SOPInstanceUID>.jpg``, e.g. in
``chest_radiographs/``; found by name in any nesting)::

    Pneumothorax_reports.csv   SOPInstanceUID, EncodedPixels, Report, ...   (the metadata file)
    acute_rib_fracture.csv     anon_SOPUID, <annotation reference>, mask_rle
    chest_tube.csv             anon_SOPUID, <annotation reference>, mask_rle

``Pneumothorax_reports.csv`` lists every image; an image with several pneumothorax regions
has one row per region (a loader de-duplicates ``SOPInstanceUID``), ``EncodedPixels`` is
``-1`` for an image without one and empty where not read (a label that is then unknown). The
two other tables list only images with a fracture or a tube, one row per region
(``Rib_fracture_mask_rle.csv`` is another copy's name for the fracture table).

**Run-length convention, determined from the data.** The codes are ``start length ...`` pairs
over the image's pixels. Whether a start is absolute or counts from the previous run's end
(SIIM-ACR's relative code) is decided per file by
:func:`~radharmony.annotations.masks.detect_rle_relative`: absolute codes always have
increasing starts, relative codes of a real region do not. A file whose codes all have one run
(undecidable; the conventions then agree) is read as relative, SIIM-ACR's convention, with a
warning. ``rle_convention`` records each file's result. Pixels are numbered down the columns
(SIIM-ACR's column-major order) over the JPEG's own size, read from its header.

Harmonized: one row per image; ``Pneumothorax`` 1 / 0 / NaN (empty code), ``Rib fracture`` and
``Chest tube`` 1 when the image has a code in that table, else 0; ``report`` the report as
written; ``pneumothorax_rle``, ``rib_fracture_rle``, ``chest_tube_rle`` each image's codes.
``output_mask=True`` gives ``mask`` (the pneumothorax, every region merged) and ``masks``
(3, S, S): pneumothorax, rib fracture, chest tube (:data:`MASKS`).

Patients: ``filename`` (when the table has it) starts with the patient's index
(``<index>_...``); else ``StudyInstanceUID``, else the image is its own patient (warned).

**Unverified** (no real file here): the full column lists of all three tables -- only the
columns named above are read, by name, and the harmonizer warns naming each table; the pixel
order; whether the release ships splits (``bbox_annotation_pneumothorax/*.json`` look derived
and are not read). Access may have changed: its sibling CANDID-II is closed to users outside
Health New Zealand since February 2024.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.masks import detect_rle_relative, merge_masks, rle_decode
from ..spec import DatasetSpec
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import find_optional
from ..table.read_csv import lists_by, read_table, require_columns
from .object_cxr import ChannelMasks
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
REPORTS = "Pneumothorax_reports.csv"
#: side table role -> its names, best first
SIDE_FILES = {"rib_fracture": ("acute_rib_fracture.csv", "Rib_fracture_mask_rle.csv"),
              "chest_tube": ("chest_tube.csv",)}
REPORT_COLUMNS = ("SOPInstanceUID", "EncodedPixels", "Report")
OPTIONAL_COLUMNS = ("StudyInstanceUID", "filename")
SIDE_COLUMNS = ("anon_SOPUID", "mask_rle")
NO_MASK = "-1"
#: mask channel -> (label column, rle column), the ``masks`` order
MASKS = {"pneumothorax": ("Pneumothorax", "pneumothorax_rle"),
         "rib_fracture": ("Rib fracture", "rib_fracture_rle"),
         "chest_tube": ("Chest tube", "chest_tube_rle")}
LABELS = tuple(label for label, _ in MASKS.values())
LABEL_MAP = {"Pneumothorax": (("pneumothorax", "exact"),),
             "Rib fracture": (("rib_fracture", "narrower"),),  # acute ones only
             "Chest tube": (("support_devices", "narrower"),)}
SPEC = DatasetSpec(
    key="candid_ptx", title="CANDID-PTX (pneumothorax, rib fracture and chest tube masks)",
    metadata_files=(REPORTS,), label_cols=LABELS, label_map=LABEL_MAP,
    extra_cols=("study_uid", "rle_convention", *(rle for _, rle in MASKS.values())),
    outputs=frozenset({"cls", "mask", "report"}), id_col="study_id",
    column_types={"rle_convention": "json", **{rle: "json" for _, rle in MASKS.values()}},
    expected={"images": 19_237},
    access="University of Otago / Auckland figshare (doi 10.17608/k6.auckland.14173982): a "
           "data use agreement and an online research-ethics course")
_FIX = "pass the CANDID-PTX tables as released"


# -- pure helpers ---------------------------------------------------------------------------------
def _codes(values: pd.Series) -> pd.Series:
    return values.fillna("").astype(str).str.strip()


def convention(codes, *, name: str, source: str) -> str:
    """``"relative"`` or ``"absolute"`` for one file's codes (see the module text)."""
    relative = detect_rle_relative(c for c in codes if c not in ("", NO_MASK))
    if relative is None:
        warnings.warn(f"{source}: no run-length code in {name} has two runs, so its "
                      "start convention cannot be told from the data; read as relative "
                      "(SIIM-ACR's)", stacklevel=3)
        return "relative"
    return "relative" if relative else "absolute"


def _cell(value, empty):
    """A json cell as its value (a table read back from CSV holds it as text)."""
    if isinstance(value, str):
        return json.loads(value) if value.strip() else empty
    return empty if value is None else value


# -- harmonizer -----------------------------------------------------------------------------------
class CANDIDPTXHarmonizer(BaseHarmonizer):
    """CANDID-PTX: 19,237 images with pneumothorax, rib fracture and chest tube masks."""

    spec = SPEC
    metadata_description = f"the CANDID-PTX table {REPORTS}"

    def inputs(self, path: Path) -> Inputs:
        """The reports table, the fracture and tube tables beside it (or near the images) and
        the image folder, listed for JPEGs."""
        root = self.base_image_dir
        return Inputs(path, {role: find_optional(names, path.parent, root)
                             for role, names in SIDE_FILES.items()},
                      {"images": (root if root is not None and root.is_dir() else None,
                                  (".jpg",))})

    def read(self, inputs: Inputs) -> dict:
        raw = {"reports": read_table(inputs.metadata, description=self.metadata_description,
                                     columns=REPORT_COLUMNS, dtype=str, keep_default_na=False)}
        checked = [inputs.metadata.name]
        for role, names in SIDE_FILES.items():
            path = inputs.file(role)
            if path is None:
                warnings.warn(f"No {' or '.join(names)} beside {inputs.metadata}: every "
                              f"{MASKS[role][0]} label is 0 and its masks empty", stacklevel=2)
                raw[role] = None
                continue
            raw[role] = read_table(path, description=f"the CANDID-PTX table {path.name}",
                                   columns=SIDE_COLUMNS, dtype=str, keep_default_na=False)
            checked.append(path.name)
        warnings.warn(f"CANDID-PTX {', '.join(checked)}: the full column lists are not "
                      "verified against a real copy; only the columns "
                      f"{list(REPORT_COLUMNS)} / {list(SIDE_COLUMNS)} (and "
                      f"{list(OPTIONAL_COLUMNS)} when present) are read, by name", stacklevel=2)
        raw["files"] = inputs.by_name("images", suffix=".jpg")
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        t = raw["reports"]
        require_columns(t, REPORT_COLUMNS, source=source, description=f"the table {REPORTS}")
        sop = t["SOPInstanceUID"].str.strip()
        first = ~sop.duplicated()
        ids = pd.Index(sop[first])
        codes = _codes(t["EncodedPixels"])
        conventions, lists = {}, {}
        conventions["pneumothorax"] = convention(codes, name=REPORTS, source=source)
        drawn = codes.ne(NO_MASK) & codes.ne("")
        lists["pneumothorax"] = lists_by(ids, sop[drawn], codes[drawn].to_numpy(object))
        read = codes.ne("").groupby(sop).any().reindex(ids).to_numpy()
        for role in SIDE_FILES:
            side = raw.get(role)
            if side is None:
                lists[role], conventions[role] = [[] for _ in ids], None
                continue
            require_columns(side, SIDE_COLUMNS, source=source, description=f"the {role} table")
            side_codes = _codes(side["mask_rle"])
            conventions[role] = convention(side_codes, name=SIDE_FILES[role][0], source=source)
            keep = side_codes.ne(NO_MASK) & side_codes.ne("")
            lists[role] = lists_by(ids, side["anon_SOPUID"].str.strip()[keep],
                                   side_codes[keep].to_numpy(object))
        rows = t[first].reset_index(drop=True)
        col = {c: (rows[c].str.strip() if c in rows.columns else None) for c in OPTIONAL_COLUMNS}
        if col["filename"] is not None:
            patient = col["filename"].str.split("_", n=1).str[0]
        elif col["StudyInstanceUID"] is not None:
            patient = col["StudyInstanceUID"]
        else:
            warnings.warn(f"{source}: {REPORTS} has neither filename nor StudyInstanceUID: each "
                          "image is its own patient", stacklevel=2)
            patient = pd.Series(ids, dtype=object)
        files = raw.get("files") or {}
        report = rows["Report"].str.strip()
        df = pd.DataFrame({"patient_id": patient.where(patient.ne(""), pd.Series(ids))
                           .astype(object),
                           "study_id": pd.Series(ids, dtype=object),
                           "image_path": pd.Series([files.get(i, f"{i}.jpg") for i in ids],
                                                   dtype=object),
                           "view_position": None,
                           "report": report.where(report.ne(""), None).astype(object)})
        has = np.array([bool(c) for c in lists["pneumothorax"]])
        df["Pneumothorax"] = np.where(read, has, np.nan).astype(np.float32)
        for role in SIDE_FILES:
            df[MASKS[role][0]] = np.array([float(bool(c)) for c in lists[role]], np.float32)
        df["study_uid"] = col["StudyInstanceUID"].astype(object) \
            if col["StudyInstanceUID"] is not None else None
        df["rle_convention"] = pd.Series([conventions] * len(df), dtype=object)
        for role, (_, rle) in MASKS.items():
            df[rle] = pd.Series(lists[role], dtype=object)
        return df


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class CANDIDPTXDataset(ChannelMasks, BaseRadiologicalDataset):
        """CANDID-PTX; ``base_image_dir`` holds the JPEGs (found by name). ``output_mask=True``
        gives ``mask`` (the pneumothorax) and ``masks`` (3 channels, :data:`MASKS` order)."""

        harmonizer_class = CANDIDPTXHarmonizer

        def source_masks(self, index: int) -> np.ndarray:
            """Row ``index``'s ``(height, width, 3)`` masks at the JPEG's size."""
            df = self.harmonized_df
            shape = self.source_size(index)
            conventions = _cell(df["rle_convention"].iat[index], {})
            out = np.zeros((*shape, len(MASKS)), np.uint8)
            for k, (role, (_, rle)) in enumerate(MASKS.items()):
                where = f"{role} mask of SOPInstanceUID {df['study_id'].iat[index]}"
                relative = conventions.get(role) != "absolute"
                out[..., k] = merge_masks((rle_decode(c, height=shape[0], width=shape[1],
                                                      relative=relative, order="F", where=where)
                                           for c in _cell(df[rle].iat[index], [])), shape=shape)
            return out

        def source_mask(self, index: int) -> np.ndarray:
            return self.source_masks(index)[..., 0]

    return CANDIDPTXDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["CANDIDPTXHarmonizer", "CANDIDPTXDataset"]
