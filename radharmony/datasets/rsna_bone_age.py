"""RSNA Pediatric Bone Age Challenge (2017): 14,236 hand radiographs with the bone age in months.

Source of truth, as the Kaggle mirror (``kmader/rsna-bone-age``) ships it:
``boneage-training-dataset.csv`` (header ``id,boneage,male``: the image id, the bone age in
months as a whole number, the sex as ``True`` / ``False``) over
``boneage-training-dataset/boneage-training-dataset/<id>.png`` (12,611 images), and
``boneage-test-dataset.csv`` (header ``Case ID,Sex``: ``M`` / ``F``, no bone age) over
``boneage-test-dataset/boneage-test-dataset/<id>.png`` (200 images). The challenge's own release
adds the validation set, ``Validation Dataset.csv`` (header ``Image ID,male,Bone Age (months)``,
1,425 images); its folder names vary between copies, so the harmonizer lists every ``.png``
under ``base_image_dir`` and finds each id's file there (the split's own folder first).

Harmonized: one row per image; the target ``bone_age_months`` (the ``reg`` output, NaN for the
test images, whose ground truth the Kaggle mirror does not ship) and the sex (``patient_sex``
``M`` / ``F``: the covariate every bone-age model conditions on, a sample's ``male`` with
``output_reg=True``). The release names no patients: ``patient_id`` is the image id (the
challenge describes one radiograph per child; this is not verifiable from the files). The
images are 8-bit grayscale PNGs of varied sizes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import find_optional
from ..table.read_csv import check_cells, read_table, require_columns
from ..spec import DatasetSpec
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
TRAIN_COLUMNS = ("id", "boneage", "male")
VALID_COLUMNS = ("Image ID", "male", "Bone Age (months)")
TEST_COLUMNS = ("Case ID", "Sex")
SIDE_FILES = {"valid": ("Validation Dataset.csv",
                        "boneage-validation-dataset/Validation Dataset.csv"),
              "test": ("boneage-test-dataset.csv",)}
#: each split: its table's columns, the (id, bone age, sex) among them, the word its folder
#: names contain
SPLITS = {"train": (TRAIN_COLUMNS, ("id", "boneage", "male"), "training"),
          "valid": (VALID_COLUMNS, ("Image ID", "Bone Age (months)", "male"), "validation"),
          "test": (TEST_COLUMNS, ("Case ID", None, "Sex"), "test")}
MALE = {"true": "M", "false": "F", "1": "M", "0": "F", "m": "M", "f": "F"}
TARGET = "bone_age_months"
EXTRA_COLS = (TARGET, "patient_sex", "split", "split_raw")
ACCESS = ("RSNA Pediatric Bone Age Challenge 2017 (Stanford AIMI / Kaggle 'kmader/rsna-bone-age'"
          "); cite Halabi et al., Radiology 2019")

SPEC = DatasetSpec(
    key="rsna_bone_age", title="RSNA Pediatric Bone Age",
    metadata_files=("boneage-training-dataset.csv", "train.csv"),
    extra_cols=EXTRA_COLS, reg_cols=(TARGET,), outputs=frozenset({"reg"}),
    column_types={"split": "text"}, sex_col="patient_sex", id_col="study_id",
    access=ACCESS,
    expected={"images": 14_236, "studies": 14_236, "patients": 14_236, "train": 12_611,
              "valid": 1_425, "test": 200})


# -- harmonizer -----------------------------------------------------------------------------------
class RSNABoneAgeHarmonizer(BaseHarmonizer):
    """RSNA bone age: the training table, the validation and test tables where found."""

    spec = SPEC
    metadata_description = "the RSNA bone age training table (boneage-training-dataset.csv)"

    def inputs(self, path: Path) -> Inputs:
        """The training table, the validation and test tables (beside it or the images), and
        the image folder listed for ``.png`` files."""
        root = self.base_image_dir
        files = {role: find_optional(names, path.parent, root)
                 for role, names in SIDE_FILES.items()}
        return Inputs(path, files=files, folders={"images": (
            root if root is not None and root.is_dir() else None, (".png",))})

    def read(self, inputs: Inputs) -> dict:
        tables = {"train": read_table(inputs.metadata, description=self.metadata_description,
                                      columns=TRAIN_COLUMNS, dtype=str, keep_default_na=False)}
        for role in SIDE_FILES:
            path = inputs.file(role)
            if path is not None:
                tables[role] = read_table(path, description=f"the RSNA bone age {role} table",
                                          columns=SPLITS[role][0], dtype=str,
                                          keep_default_na=False)
        return {"tables": tables, "files": inputs.listing("images")
                if inputs.folders["images"][0] is not None else None}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        parts = [_split_rows(raw["tables"][split], split, source=source)
                 for split in SPLITS if split in raw["tables"]]
        df = pd.concat(parts, ignore_index=True)
        ids = df["study_id"]
        df.insert(2, "image_path", _image_paths(ids, df["split"], raw.get("files")))
        df.insert(0, "patient_id", ids)
        df.insert(3, "view_position", None)
        df.insert(4, "report", None)
        return df


def _split_rows(table: pd.DataFrame, split: str, *, source: str) -> pd.DataFrame:
    """One split's rows: id, bone age (months; NaN where the table has none), sex."""
    columns, (id_col, age_col, sex_col), _ = SPLITS[split]
    require_columns(table, columns, source=source, description=f"the {split} table")
    ids = table[id_col].str.strip()
    check_cells(ids.str.fullmatch(r"\d+"), ids, source=source, what=f"{id_col} is not a "
                "whole number", expected="the image id, e.g. 1377")
    said = table[sex_col].str.strip()
    sex = said.str.lower().map(MALE)
    check_cells(sex.notna() | said.eq(""), said, source=source, what=f"{sex_col} is not a sex",
                expected="True / False (male) or M / F")
    age = pd.Series(np.nan, index=table.index)
    if age_col is not None:
        text = table[age_col].str.strip()
        age = pd.to_numeric(text.where(text.ne("")), errors="coerce")
        check_cells(age.notna() | text.eq(""), text, source=source,
                    what=f"{age_col} is not a number", expected="the bone age in months, "
                    "e.g. 180")
    return pd.DataFrame({"study_id": ids, TARGET: age.astype(np.float64),
                         "patient_sex": sex.astype(object).where(sex.notna(), None),
                         "split": split, "split_raw": split})


def _image_paths(ids: pd.Series, splits: pd.Series, files: list[str] | None) -> np.ndarray:
    """Each id's listed ``<id>.png``, preferring a path in its split's folder; ``<id>.png``
    when the images were not listed or the id has no file."""
    fallback = (ids + ".png").to_numpy(object)
    if files is None:
        return fallback
    by_name: dict[str, list[str]] = {}
    for rel in files:
        by_name.setdefault(rel.rsplit("/", 1)[-1], []).append(rel)
    out = []
    for name, split, default in zip(fallback, splits, fallback):
        found = by_name.get(name, ())
        word = SPLITS[split][2]
        out.append(next((p for p in found if word in p.lower()), found[0] if found else default))
    return np.asarray(out, dtype=object)


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    import torch

    from ..data.dataset import BaseRadiologicalDataset

    class RSNABoneAgeDataset(BaseRadiologicalDataset):
        """RSNA bone age; ``base_image_dir`` is the folder holding the split folders (listed
        for ``.png`` files). ``output_reg=True`` gives ``reg`` (1,) the bone age in months,
        ``reg_mask`` (1,) (0 for the test images) and ``male`` (1,) float: 1 male, 0 female,
        NaN unknown (the covariate)."""

        harmonizer_class = RSNABoneAgeHarmonizer

        def _male(self, indices) -> torch.Tensor:
            sex = self.harmonized_df["sex"].to_numpy(dtype=object)[indices]
            return torch.tensor(np.array([[1.0] if s == "M" else [0.0] if s == "F" else
                                          [np.nan] for s in np.atleast_1d(sex)], np.float32))

        def batch_outputs(self, indices: np.ndarray) -> dict:
            out = super().batch_outputs(indices)
            if "reg" in self.outputs:
                out["male"] = self._male(indices)
            return out

        def add_outputs(self, index: int, sample: dict, letterbox) -> None:
            super().add_outputs(index, sample, letterbox)
            if "reg" in self.outputs and "male" not in sample:
                sample["male"] = self._male(index)[0]

    return RSNABoneAgeDataset,


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["RSNABoneAgeHarmonizer", "RSNABoneAgeDataset"]
