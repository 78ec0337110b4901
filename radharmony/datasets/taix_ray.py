"""TAIX-Ray: bedside chest radiographs of intensive-care patients with graded findings.

Source of truth, the Hugging Face release ``TLAIM/TAIX-Ray`` as shipped: Parquet shards in two
configurations, ``data/{train,val,test}-NNNNN-of-NNNNN.parquet`` (the images at 512 px, the
default) and ``original/...`` (the images as acquired), each row one image with the columns
``UID, Fold, Split, PatientID, PhysicianID, StudyDate, Age, Sex, HeartSize,
PulmonaryCongestion, PleuralEffusion_Right, PleuralEffusion_Left, PulmonaryOpacities_Right,
PulmonaryOpacities_Left, Atelectasis_Right, Atelectasis_Left, Image`` (``Age`` in days; the
eight findings graded from the structured report on the five-point scale none, questionable,
mild, moderate, severe = 0-4; ``Image`` the encoded image as a struct of ``bytes`` and
``path``). The column list is the dataset card's; the published description says 215,381
radiographs of 47,724 patients (the card: "about 200k" and "about 50k"). One copy of the card's
viewer shows ``HeartSize`` up to 3 only; radharmony reads it on the same 0-4 scale.

Images: radharmony reads image files, so the images inside the shards are written out once,
byte for byte as stored, by :func:`extract_images` (``images/<config>/<split>/<UID>.<ext>``
beside the shards); the harmonizer lists that folder and never needs it (a row whose image
was not extracted keeps the ``.png`` path and fails when read).

Harmonized: one row per image; ``patient_id`` ``PatientID``, ``study_id`` the image ``UID``
(the release has no study id); five label columns (``cls``), one per finding over both sides:
1 from ``mild``, -1 for ``questionable``, 0 for ``none``; the grades as the ``grade`` output
(``<finding>_grade``: for a two-sided finding the worse side) and the sides of the three
two-sided findings as ``side`` (:func:`radharmony.vocabulary.side_of`); the eight grades as
shipped in ``grades_raw``. ``PulmonaryOpacities`` maps to ``lung_opacity`` exactly: the
report template itemizes atelectasis apart, so an image with atelectasis and no other opacity
has ``lung_opacity`` 1 after derivation (atelectasis implies it) while its grade says none.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, require_columns
from ..table.read_parquet import read_parquet
from ..spec import DatasetSpec, Identity, grade_column, side_column
from ..annotations.grades import grade_presence, side_of
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
META_COLUMNS = ("UID", "Fold", "Split", "PatientID", "PhysicianID", "StudyDate", "Age", "Sex")
#: the graded columns as shipped -> (label column, canonical finding, side or None)
GRADED = {"HeartSize": ("HeartSize", "cardiomegaly", None),
          "PulmonaryCongestion": ("PulmonaryCongestion", "pulmonary_congestion", None),
          "PleuralEffusion_Right": ("PleuralEffusion", "pleural_effusion", "right"),
          "PleuralEffusion_Left": ("PleuralEffusion", "pleural_effusion", "left"),
          "PulmonaryOpacities_Right": ("PulmonaryOpacities", "lung_opacity", "right"),
          "PulmonaryOpacities_Left": ("PulmonaryOpacities", "lung_opacity", "left"),
          "Atelectasis_Right": ("Atelectasis", "atelectasis", "right"),
          "Atelectasis_Left": ("Atelectasis", "atelectasis", "left")}
COLUMNS = META_COLUMNS + tuple(GRADED)
IMAGE_COLUMN = "Image"
LABELS = tuple(dict.fromkeys(label for label, _, _ in GRADED.values()))
LABEL_MAP = {label: ((finding, "exact"),) for label, finding, _ in GRADED.values()}
FINDINGS = tuple(dict.fromkeys(finding for _, finding, _ in GRADED.values()))
LATERAL = tuple(dict.fromkeys(finding for _, finding, side in GRADED.values() if side))
SPLIT_MAP = {"train": "train", "val": "valid", "test": "test"}
CONFIGS = {"taix_ray": "data", "taix_ray_original": "original"}
IMAGE_FOLDER = "images"
DAYS_PER_YEAR = 365.25
EXTRA_COLS = (tuple(map(grade_column, FINDINGS)) + tuple(map(side_column, LATERAL)) +
              ("grades_raw", "uid", "fold", "physician_id", "study_date", "age_days",
               "patient_age_years", "patient_sex", "split", "split_raw"))
COLUMN_TYPES = {"grades_raw": "json", "fold": "Int64", "age_days": "Int64",
                "patient_age_years": "float64"}
ACCESS = ("Hugging Face 'TLAIM/TAIX-Ray' (CC BY-NC 4.0); cite the TAIX-Ray paper, Scientific "
          "Data (University Hospital RWTH Aachen)")


def _spec(key: str, title: str) -> DatasetSpec:
    return DatasetSpec(
        identity=Identity("taix_ray"), key=key, title=title,
        metadata_files=("README.md",), label_cols=LABELS, extra_cols=EXTRA_COLS,
        outputs=frozenset({"cls", "grade", "side"}), label_map=LABEL_MAP,
        grades=FINDINGS, sides=LATERAL, column_types=COLUMN_TYPES, id_col="study_id",
        age_col="patient_age_years", sex_col="patient_sex", access=ACCESS,
        expected={"images": 215_381, "patients": 47_724})


SPEC = _spec("taix_ray", "TAIX-Ray (512 px)")
ORIGINAL_SPEC = _spec("taix_ray_original", "TAIX-Ray (original resolution)")


# -- the images inside the shards ----------------------------------------------------------------
#: the leading bytes of the codecs a shard may hold -> the extension its file gets
MAGIC = {b"\x89PNG": ".png", b"\xff\xd8\xff": ".jpg", b"II*\x00": ".tif", b"MM\x00*": ".tif"}


def shards(root: Path, config: str) -> list[Path]:
    """The Parquet shards of ``config`` (``data`` or ``original``) under ``root``, sorted."""
    return sorted((Path(root) / config).glob("*.parquet"))


def extract_images(root: str | Path, *, config: str = "data", progress: bool = True) -> int:
    """Write the images stored in the ``config`` shards under ``root`` to
    ``root/images/<config>/<split>/<UID><ext>``, byte for byte (the extension from the codec's
    leading bytes); images already there are kept. Returns how many files were written.

    >>> from radharmony.fake.taix_ray import write_taix_ray
    >>> import tempfile
    >>> root = write_taix_ray(tempfile.mkdtemp(), extract=False)
    >>> extract_images(root, progress=False), extract_images(root, progress=False)
    (6, 0)
    """
    from ..errors import MetadataError

    root = Path(root)
    written = 0
    for shard in shards(root, config):
        table = read_parquet(shard, ("UID", "Split", IMAGE_COLUMN),
                             description="a TAIX-Ray shard", progress=progress)
        for uid, split, image in zip(*(table.column(c).to_pylist()
                                       for c in ("UID", "Split", IMAGE_COLUMN))):
            data = image.get("bytes") if isinstance(image, dict) else None
            if not data:
                raise MetadataError(f"{shard}: image of UID {uid} has no bytes",
                                    expected="the Image struct with its encoded bytes",
                                    found=repr(image)[:80], fix="download the shard again")
            ext = next((e for m, e in MAGIC.items() if data.startswith(m)), ".png")
            path = root / IMAGE_FOLDER / config / str(split) / f"{uid}{ext}"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                written += 1
    return written


# -- harmonizer -----------------------------------------------------------------------------------
class TAIXRayHarmonizer(BaseHarmonizer):
    """TAIX-Ray at 512 px: the ``data/`` shards' metadata columns (the images extracted by
    :func:`extract_images`)."""

    spec = SPEC
    metadata_description = "the TAIX-Ray dataset card (README.md) beside its Parquet shards"

    def inputs(self, path: Path) -> Inputs:
        """The card (or a shard given as ``csv_path``), the configuration's shards and the
        extracted images."""
        config = CONFIGS[self.spec.key]
        root = path.parent if path.suffix != ".parquet" else path.parent.parent
        images = root / IMAGE_FOLDER / config
        return Inputs(path, folders={
            "shards": (root / config if (root / config).is_dir() else None, (".parquet",)),
            "images": (images if images.is_dir() else None, ())})

    def read(self, inputs: Inputs) -> dict:
        folder = inputs.folders["shards"][0]
        parts = [read_parquet(folder / rel, COLUMNS, description="a TAIX-Ray shard",
                              progress=False).to_pandas()
                 for rel in (inputs.listing("shards") if folder is not None else [])]
        table = pd.concat(parts, ignore_index=True) if parts else \
            pd.DataFrame(columns=list(COLUMNS))
        images = inputs.listing("images") if inputs.folders["images"][0] is not None else None
        return {"table": table, "images": images,
                "prefix": f"{IMAGE_FOLDER}/{CONFIGS[self.spec.key]}"}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        t = raw["table"]
        require_columns(t, COLUMNS, source=source, description="the TAIX-Ray shards")
        uid, split = t["UID"].astype(str), t["Split"].astype(str)
        check_cells(split.isin(list(SPLIT_MAP)), split, source=source,
                    what="Split is not train / val / test", expected="train, val or test")
        grades = pd.DataFrame({c: pd.to_numeric(t[c], errors="coerce") for c in GRADED})
        for c in GRADED:
            check_cells(grades[c].isin(range(5)) | t[c].isna(), t[c], source=source,
                        what=f"{c} is not a grade 0-4", expected="0 (none) to 4 (severe)")
        out = pd.DataFrame({"patient_id": t["PatientID"].astype(str), "study_id": uid,
                            "image_path": _image_paths(uid, split, raw), "view_position": None,
                            "report": None})
        worst = {}
        for label, finding, _ in GRADED.values():
            cols = [c for c, (lab, _, _) in GRADED.items() if lab == label]
            worst[finding] = grades[cols].max(axis=1, skipna=False)
            out[label] = grade_presence(worst[finding])
        for finding in FINDINGS:
            out[grade_column(finding)] = worst[finding].astype(np.float32)
        for finding in LATERAL:
            left, right = (grades[c] for c, (_, f, s) in sorted(
                GRADED.items(), key=lambda kv: kv[1][2] != "left") if f == finding)
            out[side_column(finding)] = [side_of(left=lv, right=rv)
                                         for lv, rv in zip(left.tolist(), right.tolist())]
        out["grades_raw"] = [{c: (None if v != v else int(v)) for c, v in zip(GRADED, row)}
                             for row in grades.itertuples(index=False)]
        age = pd.to_numeric(t["Age"], errors="coerce")
        out = out.assign(uid=uid, fold=pd.to_numeric(t["Fold"], errors="coerce"),
                         physician_id=t["PhysicianID"], study_date=t["StudyDate"].astype(str),
                         age_days=age, patient_age_years=(age / DAYS_PER_YEAR).round(2),
                         patient_sex=t["Sex"], split=split.map(SPLIT_MAP), split_raw=split)
        return out


def _image_paths(uid: pd.Series, split: pd.Series, raw: dict) -> np.ndarray:
    """Each image's extracted file (its listed name whatever the extension), else the
    ``.png`` path :func:`extract_images` would write."""
    prefix = raw["prefix"]
    stem = (split + "/" + uid).to_numpy(object)
    paths = np.array([f"{prefix}/{s}.png" for s in stem], dtype=object)
    if raw.get("images"):
        listed = {rel.rsplit(".", 1)[0]: rel for rel in raw["images"]}
        paths = np.array([f"{prefix}/{listed[s]}" if s in listed else p
                          for s, p in zip(stem, paths)], dtype=object)
    return paths


class TAIXRayOriginalHarmonizer(TAIXRayHarmonizer):
    """TAIX-Ray at the original resolution: the ``original/`` shards."""

    spec = ORIGINAL_SPEC


# -- dataset --------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class TAIXRayDataset(BaseRadiologicalDataset):
        """TAIX-Ray at 512 px; ``base_image_dir`` is the release's folder (``README.md``,
        ``data/``), after :func:`extract_images`. ``output_cls`` gives the five findings'
        presence, ``output_grade`` their grades 0-4 (``grade`` (5,)), ``output_side`` the
        sides of effusion, opacity and atelectasis (``side`` (3, 2) ``[left, right]``)."""

        harmonizer_class = TAIXRayHarmonizer

    class TAIXRayOriginalDataset(TAIXRayDataset):
        """TAIX-Ray at the original resolution (``original/``, ``extract_images(root,
        config="original")``)."""

        harmonizer_class = TAIXRayOriginalHarmonizer

    return TAIXRayDataset, TAIXRayOriginalDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["TAIXRayHarmonizer", "TAIXRayOriginalHarmonizer", "TAIXRayDataset",
           "TAIXRayOriginalDataset", "extract_images"]
