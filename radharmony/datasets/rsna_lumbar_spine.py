"""RSNA 2024 Lumbar Spine Degenerative Classification (RSNA and ASNR, 2024): lumbar MR studies
with the severity of five degenerative conditions at the five disc levels L1/L2 .. L5/S1, read
as the Kaggle competition ships them (``base_image_dir`` is the competition's root)::

    train_images/<study_id>/<series_id>/<instance_number>.dcm
    train.csv                        study_id + 25 columns <condition>_<level>: Normal/Mild,
                                     Moderate, Severe or empty
    train_series_descriptions.csv    study_id, series_id, series_description ("Sagittal T1",
                                     "Sagittal T2/STIR", "Axial T2")
    train_label_coordinates.csv      study_id, series_id, instance_number, condition, level,
                                     x, y: where each graded finding was marked

Source of truth: ``train.csv`` for the labels, the DICOM headers for the volumes. Quirks:

- **An axial series holds several stacks** (one per disc, at different angles). One table row
  per *stack*: the series' files split by ``ImageOrientationPatient`` exactly as the DICOM
  reader splits them (:func:`radharmony.volumes.dicom.stacks_of`: stacks in the order of
  their first file in the folder's sorted names), so ``stack`` in a row is the reader's
  ``read_volume(folder, stack=...)``. Rows must name distinct files: ``image_path`` is the
  stack's first file (lowest instance number); its folder is the series. Harmonizing scans
  every file's header (fast: :mod:`radharmony.volumes.dicom_headers`), no pixel is read.
- **Points through the headers.** Each coordinate row (instance number, x, y) is kept on the
  stack holding that instance (``points_raw``: ``[instance, x, y, label]``, the label the
  ``train.csv`` column of its condition and level). :meth:`annotations` maps them into the
  stack's canonical voxel coordinates through the scanned geometry (x a column, y a row, pixel
  centres at integers). A point on an instance number the series does not have, or outside
  its image (x beyond ``Columns``, y beyond ``Rows``), is counted and named in one warning
  with the file and line, and never drawn.
- **Grades.** ``Normal/Mild`` merges none and mild, which the 0-4 grade scale
  (:data:`radharmony.spec.GRADE_LEVELS`) cannot hold: the ``grade`` output is 3 (moderate)
  or 4 (severe) and NaN for ``Normal/Mild``; the label columns are 1 for moderate or severe
  and 0 for normal/mild, mapped ``narrower`` to the level's canonical finding (a moderate
  stenosis is a stenosis; normal/mild does not say none). ``severity_raw`` keeps the release's
  words. Labels are the study's, repeated on each of its stacks.
- **Patient = study**: the release has no patient ids. MR intensities stay in their stored
  type (no Hounsfield check).
"""

from __future__ import annotations

import warnings
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd

from ..spec import DatasetSpec, grade_column
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.read_csv import check_cells, read_table
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
#: the five conditions as coordinates name them -> their train.csv column stem
CONDITIONS = {"Spinal Canal Stenosis": "spinal_canal_stenosis",
              "Left Neural Foraminal Narrowing": "left_neural_foraminal_narrowing",
              "Right Neural Foraminal Narrowing": "right_neural_foraminal_narrowing",
              "Left Subarticular Stenosis": "left_subarticular_stenosis",
              "Right Subarticular Stenosis": "right_subarticular_stenosis"}
LEVELS = ("L1/L2", "L2/L3", "L3/L4", "L4/L5", "L5/S1")
#: the 25 graded columns in train.csv's order (condition by condition, levels inside)
GRADED = tuple(f"{stem}_{level.lower().replace('/', '_')}" for stem in CONDITIONS.values()
               for level in LEVELS)
#: each release word -> (label: moderate or severe, grade 0-4 or NaN)
SEVERITY = {"Normal/Mild": (0.0, np.nan), "Moderate": (1.0, 3.0), "Severe": (1.0, 4.0)}
TREE = "train_images"
METADATA_FILE = "train.csv"
SIDE_FILES = {"series": "train_series_descriptions.csv",
              "coordinates": "train_label_coordinates.csv"}
SERIES_COLUMNS = ("study_id", "series_id", "series_description")
COORDINATE_COLUMNS = ("study_id", "series_id", "instance_number", "condition", "level", "x", "y")
#: each label is the level's canonical finding (narrower: normal/mild says nothing)
LABEL_MAP = {c: ((c, "narrower"),) for c in GRADED}
EXTRA_COLS = (*map(grade_column, GRADED), "stack_id", "series_id", "stack", "num_stacks",
              "series_description", "num_slices", "instance_numbers", "points_raw",
              "severity_raw", "split", "split_raw")
COLUMN_TYPES = {**dict.fromkeys(map(grade_column, GRADED), "float32"), "stack": "int64",
                "num_stacks": "int64", "num_slices": "int64", "instance_numbers": "json",
                "points_raw": "json", "severity_raw": "json"}
ACCESS = ("Kaggle rsna-2024-lumbar-spine-degenerative-classification (competition rules: "
          "non-commercial research); cite the competition (RSNA and ASNR, 2024) and its "
          "dataset paper, the RSNA Lumbar Degenerative Imaging Spine Classification "
          "(LumbarDISC) dataset (Richards et al., 2025)")
EXPECTED = {"studies": 1_975}

SPEC = DatasetSpec(
    key="rsna_lumbar_spine", title="RSNA 2024 Lumbar Spine Degenerative Classification",
    metadata_files=(METADATA_FILE,), label_cols=GRADED, label_map=LABEL_MAP,
    extra_cols=EXTRA_COLS, outputs=frozenset({"cls", "grade", "points"}), grades=GRADED,
    row_unit="volume", id_col="stack_id", column_types=COLUMN_TYPES, access=ACCESS,
    expected=EXPECTED,
    expected_note="the release counts studies and series; a row is a stack (an axial series "
                  "holds several)")


# -- pure helpers ---------------------------------------------------------------------------------
def severities(train: pd.DataFrame, *, source: str) -> tuple[np.ndarray, np.ndarray]:
    """(studies, 25) labels and grades of the ``train.csv`` words (empty: NaN both)."""
    words = train[list(GRADED)]
    known = words.isin(list(SEVERITY)) | words.isna()
    for col in GRADED:
        check_cells(known[col], words[col], source=source, what=f"{col} is not a severity",
                    expected="Normal/Mild, Moderate, Severe or empty")
    label = words.apply(lambda c: c.map(lambda w: SEVERITY.get(w, (np.nan,))[0]))
    grade = words.apply(lambda c: c.map(lambda w: SEVERITY.get(w, (np.nan, np.nan))[1]))
    return label.to_numpy(np.float32), grade.to_numpy(np.float32)


def place_points(coords: pd.DataFrame, slices: pd.DataFrame, *, source: str) -> dict:
    """Each point of ``coords`` on the stack holding its instance: ``(study, series, stack) ->
    [[instance, x, y, label], ...]``. A point on an instance the series lacks, or outside
    that file's image, is left out, counted in one warning naming its line."""
    where = slices.set_index(["study_id", "series_id", "instance"])
    key = pd.MultiIndex.from_arrays([coords["study_id"], coords["series_id"],
                                     pd.to_numeric(coords["instance_number"], errors="coerce")])
    found = where.reindex(key)
    x, y = (pd.to_numeric(coords[c], errors="coerce").to_numpy(np.float64) for c in ("x", "y"))
    missing = found["stack"].isna().to_numpy()
    cols, rows = (found[c].to_numpy(np.float64) for c in ("columns", "rows"))
    outside = ~missing & ~((x >= -0.5) & (x <= cols - 0.5) & (y >= -0.5) & (y <= rows - 0.5))
    labels = [f"{CONDITIONS.get(c, c)}_{str(lv).lower().replace('/', '_')}"
              for c, lv in zip(coords["condition"], coords["level"])]
    for bad, what in ((missing, "on an instance number its series does not have"),
                      (outside, "outside their image (x beyond Columns or y beyond Rows)")):
        if bad.any():
            lines = (np.flatnonzero(bad) + 2).tolist()  # the header is line 1
            first = coords.iloc[int(np.flatnonzero(bad)[0])]
            warnings.warn(f"{source}: {int(bad.sum())} point(s) {what}, not drawn: line(s) "
                          f"{', '.join(map(str, lines[:5]))}{' ...' if len(lines) > 5 else ''} "
                          f"(first: study {first['study_id']}, series {first['series_id']}, "
                          f"instance {first['instance_number']}, x {first['x']}, y "
                          f"{first['y']})", UserWarning, stacklevel=3)
    out: dict = {}
    keep = ~missing & ~outside
    stacks = found["stack"].to_numpy()
    for i in np.flatnonzero(keep).tolist():
        stack_key = (key[i][0], key[i][1], int(stacks[i]))
        out.setdefault(stack_key, []).append([int(key[i][2]), float(x[i]), float(y[i]),
                                              labels[i]])
    return out


# -- harmonizer -----------------------------------------------------------------------------------
class RSNALumbarSpineHarmonizer(BaseHarmonizer):
    """RSNA 2024 Lumbar Spine train: one row per stack of each series under ``train_images``."""
    spec = SPEC

    @property
    def metadata_description(self) -> str:  # type: ignore[override]
        return "the RSNA 2024 Lumbar Spine study table train.csv"

    def inputs(self, path: Path) -> Inputs:
        root = path.parent
        files = {role: root / name if (root / name).is_file() else None
                 for role, name in SIDE_FILES.items()}
        images = root / TREE
        return Inputs(path, files, {"images": (images if images.is_dir() else None, (".dcm",))},
                      looked={role: [root / name] for role, name in SIDE_FILES.items()})

    def read(self, inputs: Inputs) -> dict:
        text = dict(dtype=str, keep_default_na=False, na_values=[""])
        raw = {"train": read_table(inputs.metadata, description=self.metadata_description,
                                   columns=("study_id", *GRADED), **text)}
        for role, columns in (("series", SERIES_COLUMNS), ("coordinates", COORDINATE_COLUMNS)):
            path = inputs.file(role)
            raw[role] = None if path is None else read_table(
                path, description=f"the RSNA 2024 Lumbar Spine {SIDE_FILES[role]}",
                columns=columns, **text)
        raw["slices"] = scan_slices(inputs.folders["images"][0], inputs.listing("images")
                                    if inputs.folders["images"][0] is not None else [])
        raw["coordinates_source"] = str(inputs.file("coordinates") or SIDE_FILES["coordinates"])
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = METADATA_FILE) -> pd.DataFrame:
        train, slices = raw["train"], raw["slices"]
        study = train["study_id"].astype(str).str.strip()
        check_cells(study.str.fullmatch(r"\d+"), train["study_id"], source=source,
                    what="study_id is not a number", expected="the study's folder name")
        label, grade = severities(train, source=source)
        at = pd.Series(np.arange(len(study)), index=study.to_numpy())
        stacks = slices.groupby(["study_id", "series_id", "stack"], sort=True)
        first = stacks["instance"].min().reset_index()
        first["num_slices"] = stacks.size().to_numpy()
        first["num_stacks"] = first.groupby(["study_id", "series_id"])["stack"] \
            .transform("size").to_numpy()
        first["instance_numbers"] = stacks["instance"].agg(lambda s: sorted(s.tolist())) \
            .to_numpy()
        row = at.reindex(first["study_id"]).to_numpy()
        imageless = ~study.isin(set(first["study_id"]))
        if imageless.any():
            warnings.warn(f"{source}: {int(imageless.sum())} of {len(study)} studies have no "
                          f"series under {TREE}/ (first: {study[imageless].iloc[0]}): no rows",
                          UserWarning, stacklevel=3)
        unlabelled = np.isnan(row.astype(np.float64))
        if unlabelled.any():
            warnings.warn(f"{source}: {int(unlabelled.sum())} stack(s) of studies train.csv "
                          "does not list (labels NaN there)", UserWarning, stacklevel=3)
        pick = np.where(unlabelled, 0, row).astype(np.int64)
        blank = lambda a: np.where(unlabelled[:, None], np.nan, a[pick])  # noqa: E731
        labels, grades = blank(label), blank(grade)
        descriptions = {} if raw.get("series") is None else dict(zip(
            zip(raw["series"]["study_id"].str.strip(), raw["series"]["series_id"].str.strip()),
            raw["series"]["series_description"]))
        points = {} if raw.get("coordinates") is None else place_points(
            raw["coordinates"].assign(**{c: raw["coordinates"][c].str.strip()
                                         for c in ("study_id", "series_id")}),
            slices, source=raw.get("coordinates_source", SIDE_FILES["coordinates"]))
        keys = list(zip(first["study_id"], first["series_id"], first["stack"].astype(int)))
        words = train[list(GRADED)].to_numpy(object)
        df = pd.DataFrame({
            "patient_id": first["study_id"].to_numpy(object),
            "study_id": first["study_id"].to_numpy(object),
            "image_path": [f"{TREE}/{s}/{r}/{n}.dcm" for s, r, n in
                           zip(first["study_id"], first["series_id"], first["instance"])],
            "view_position": None, "report": None,
            **{c: labels[:, j] for j, c in enumerate(GRADED)},
            **{grade_column(c): grades[:, j] for j, c in enumerate(GRADED)},
            "stack_id": [f"{s}_{r}_{k}" for s, r, k in keys],
            "series_id": first["series_id"].to_numpy(object),
            "stack": first["stack"].astype(np.int64).to_numpy(),
            "num_stacks": first["num_stacks"].astype(np.int64).to_numpy(),
            "series_description": [descriptions.get((s, r)) for s, r, _ in keys],
            "num_slices": first["num_slices"].astype(np.int64).to_numpy(),
            "instance_numbers": pd.Series(list(first["instance_numbers"]), dtype=object),
            "points_raw": pd.Series([points.get(k, []) for k in keys], dtype=object),
            "severity_raw": pd.Series([None if u else {c: (None if w != w else w)
                                                       for c, w in zip(GRADED, words[i])}
                                       for u, i in zip(unlabelled, pick)], dtype=object),
            "split": "train", "split_raw": "train"})
        return df


def scan_slices(root: Path | None, listing: list[str]) -> pd.DataFrame:
    """One row per DICOM file under ``root`` (``listing``: relative paths
    ``<study>/<series>/<instance>.dcm``): its study, series, instance (the file name), stack
    (as :func:`radharmony.volumes.dicom.stacks_of` splits the series folder) and image size.
    Headers only: no pixel is read."""
    from ..volumes.dicom import stacks_of
    from ..volumes.dicom_headers import DicomSeriesError, scan

    folders: dict[str, list[str]] = {}
    for rel in listing:
        parent = rel.rpartition("/")[0]
        folders.setdefault(parent, []).append(rel)
    records, refused = [], []
    for parent, rels in folders.items():
        parts = PurePosixPath(parent).parts
        if len(parts) != 2:
            continue                                  # not <study>/<series>/
        headers, _ = scan([root / rel for rel in rels])
        try:
            stacks = stacks_of(headers, root / parent) if headers else []
        except DicomSeriesError as exc:               # a file without geometry: no stacks
            refused.append(f"{parent}: {exc.what}")
            continue
        for k, stack in enumerate(stacks):
            for h in stack:
                stem = Path(h.file).stem
                records.append((parts[0], parts[1], int(stem) if stem.isdigit() else -1, k,
                                h.get("Rows"), h.get("Columns")))
    if refused:
        warnings.warn(f"{root}: {len(refused)} series left out, their files not splitting into "
                      f"stacks (first: {refused[0]})", UserWarning, stacklevel=3)
    return pd.DataFrame(records, columns=["study_id", "series_id", "instance", "stack", "rows",
                                          "columns"])


def stack_points(points, instances: list[int], affine: np.ndarray, shape
                 ) -> tuple[np.ndarray, list[str], list]:
    """``points`` (``[instance, x, y, label]``) in the canonical voxel coordinates of a
    stack: ``instances`` its files' instance numbers sorted along the normal, ``affine`` the
    LPS affine of its (slice, row, column) array of ``shape``. Returns ``(points (N, 3) as
    (x, y, z), labels, left out)``: a point on another instance or outside the volume is left
    out."""
    from ..volumes.series_files import canonical_grid, slice_points

    canonical, size = canonical_grid(affine, shape)
    slot = {n: k for k, n in enumerate(instances)}
    ranks = [slot.get(int(p[0]), -1) for p in points]
    xyz = slice_points(ranks, [p[1] for p in points], [p[2] for p in points], affine,
                       canonical) if len(points) else np.zeros((0, 3))
    out, labels, left = [], [], []
    for p, k, v in zip(points, ranks, xyz):
        if k < 0 or not all(-0.5 <= c <= n - 0.5 for c, n in zip(v, size[::-1])):
            left.append(list(p))
            continue
        out.append(tuple(v))
        labels.append(str(p[3]))
    return np.asarray(out, dtype=np.float64).reshape(-1, 3), labels, left


def _dataset_classes():
    """This module's dataset class (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from functools import partial

    from ..data.volumes import VolumeDataset
    from ..volumes import read_volume
    from ..volumes.dicom import geometry
    from ..volumes.dicom_headers import read_header
    from ..volumes.precache import VolumeJob

    class RSNALumbarSpineDataset(VolumeDataset):
        """RSNA 2024 Lumbar Spine stacks (``base_image_dir`` the competition root): each row
        one stack of a series (``read_volume(folder, stack=...)``), MR values in their stored
        type. ``output_cls`` gives the 25 condition-level labels (moderate or severe),
        ``output_grade`` their grades (3, 4, NaN for normal/mild); :meth:`annotations` the
        marked points in the stack's canonical voxel coordinates."""
        harmonizer_class = RSNALumbarSpineHarmonizer
        ct = False

        def series_folder(self, index: int) -> Path:
            """Row ``index``'s series folder (its ``image_path`` is the stack's first file)."""
            return self.image_file(index).parent

        def read_params(self, index: int) -> dict:
            return {**super().read_params(index),
                    "stack": int(self.harmonized_df["stack"].iat[index])}

        def job(self, index: int):
            folder, params = str(self.series_folder(index)), self.read_params(index)
            return VolumeJob([folder], partial(read_volume, folder, stack=params["stack"],
                                               ct=False), params)

        def cache_key(self, index: int) -> str:
            if self.volume_cache is None:
                return super().cache_key(index)           # the error naming the missing cache
            inputs, _, params = self.job(index)
            return self.volume_cache.key(inputs, params)

        def annotations(self, index: int) -> dict:
            """Row ``index``'s marked points in its source volume's canonical voxel
            coordinates (``(D, H, W)`` toward S, P, L; voxel k's centre at k):
            ``{"points": (N, 3) float64 as (x, y, z), "point_labels": [...]}`` (empty when
            the stack has none). Geometry from the stack's headers; no pixel is read."""
            row = self.harmonized_df.iloc[index]
            if not row["points_raw"]:
                return {}
            folder = self.series_folder(index)
            headers = [read_header(folder / f"{n}.dcm") for n in row["instance_numbers"]]
            ordered, affine, _ = geometry(headers, folder)
            instances = [int(Path(h.file).stem) for h in ordered]
            shape = (len(ordered), int(ordered[0].get("Rows")), int(ordered[0].get("Columns")))
            points, labels, left = stack_points(row["points_raw"], instances, affine, shape)
            if left:
                warnings.warn(f"{folder}: {len(left)} point(s) outside stack {row['stack']}, "
                              f"not drawn (first: {left[0]})", UserWarning, stacklevel=2)
            return {"points": points, "point_labels": labels} if labels else {}

    return (RSNALumbarSpineDataset,)


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["RSNALumbarSpineHarmonizer", "RSNALumbarSpineDataset"]
