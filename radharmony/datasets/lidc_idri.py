"""LIDC-IDRI (Armato et al., TCIA): 1,018 thoracic CT series of 1,010 patients, each read by up
to four radiologists, read as TCIA ships them (``base_image_dir`` the folder holding the
collection folder)::

    LIDC-IDRI/LIDC-IDRI-0001/<StudyInstanceUID>/<SeriesInstanceUID>/000001.dcm ...
    LIDC-IDRI/LIDC-IDRI-0001/<StudyInstanceUID>/<SeriesInstanceUID>/069.xml   the readers' XML

Source of truth: the reader XMLs (:mod:`radharmony.annotations.lidc_xml`), one table row per
CT series (``image_path`` its folder; the series and study UIDs from the XML's header);
the collection folder stands where other datasets have a metadata file (``csv_path`` may name
it). Radiograph series (CR/DX, ``IdriReadMessage``) are not rows. Quirks:

- **Readers' marks grouped per nodule** by the rule of :func:`~radharmony.annotations.
  lidc_xml.group_marks` (at most one mark a reader a group). ``nodules`` keeps each group:
  ``kind`` (``contour``: outlined by a reader, >= 3 mm; ``point``: < 3 mm by every reader who
  marked it), its readers, and the nine ratings as lists over the readers who outlined it;
  :func:`nodule_table` flattens them (one row a nodule, each rating's median, its mask label).
- **Labels**: ``nodule_ge_3mm`` / ``nodule_lt_3mm`` (some reader marked one); ``malignancy_
  suspicious``: 1 when a group's median malignancy rating is above 3 (4 "moderately
  suspicious", 5 "highly suspicious"), else NaN when some group's median is 3 or unrated
  (indeterminate), else 0.
- **Contours to masks** (:meth:`LIDCIDRIDataset.source_mask`): each outline is filled on its
  slice (found by ``imageSOP_UID`` among the series' headers, else by ``imageZposition``), the
  outline pixels included (LIDC's documentation is said to place outlines just outside the
  nodule, unverified here: the mask may then err large by that ring); an ``inclusion`` FALSE
  outline is a hole (its outline removed with it). A voxel belongs to group
  k (labels 1.. in the order of the ``contour`` groups) when at least ``consensus`` (default
  0.5) of the readers who outlined the nodule drew it; overlaps: the earlier group wins.
- **Points and boxes** (:meth:`LIDCIDRIDataset.annotations`): a ``point`` group is the mean of
  its readers' points (``nodule_lt_3mm``), each reader's non-nodule its own point
  (``non_nodule``), a ``contour`` group the box of its mask voxels (``nodule_ge_3mm``).
- **Bad input** is counted and named (file and line) in one warning, and never drawn: an XML
  problem at harmonize (``xml_problems``), a mark whose slice is not in the series or which
  lies outside the volume when drawn.
- **Duplicate slice positions** (five series: 0085, 0146, 0418, 0572, 0979): the DICOM
  reader refuses two slices at one position (``DuplicateSliceError``); this module then keeps,
  at each position, the file of lowest ``InstanceNumber`` (then file name) and reads that list
  (:func:`read_lidc_series`), warning with the count. A mark on a dropped slice lands on the
  kept slice at its position, by ``imageZposition``.
- Patients are TCIA's subject ids (``LIDC-IDRI-0001``): the identity family ``lidc_idri``,
  shared by TCIA collections re-annotating these scans.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.lidc_xml import CHARACTERISTICS, group_marks, nodule_records, parse_read
from ..errors import SHOW, MetadataError, MetadataNotFoundError
from ..spec import DatasetSpec, Identity
from ..table.harmonizer import BaseHarmonizer, Inputs
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
COLLECTION = "LIDC-IDRI"
PATIENT = re.compile(r"LIDC-IDRI-\d{4}")
LABELS = ("nodule_ge_3mm", "nodule_lt_3mm", "malignancy_suspicious")
LABEL_MAP = {"nodule_ge_3mm": (("nodule", "narrower"),),
             "nodule_lt_3mm": (("nodule", "narrower"),),
             "malignancy_suspicious": (("suspicious_nodule", "exact"),)}
EXTRA_COLS = ("series_instance_uid", "xml_path", "readers", "nodule_count", "nodules",
              "non_nodules", "xml_problems")
COLUMN_TYPES = {"readers": "int64", "nodule_count": "int64", "nodules": "json",
                "non_nodules": "int64", "xml_problems": "int64"}
#: at a position held by several slices, keep the lowest (InstanceNumber, file name)
DUPLICATES = "lowest InstanceNumber"
ACCESS = ("TCIA LIDC-IDRI (CC BY 3.0; the NBIA Data Retriever with the XML annotations "
          "included); cite Armato et al., Medical Physics 38(2):915-931, 2011")
EXPECTED = {"images": 1_018, "patients": 1_010}

SPEC = DatasetSpec(
    key="lidc_idri", title="LIDC-IDRI", metadata_files=(COLLECTION,), label_cols=LABELS,
    label_map=LABEL_MAP, extra_cols=EXTRA_COLS,
    outputs=frozenset({"cls", "mask", "bbox3d", "points"}),
    row_unit="volume", id_col="series_instance_uid", column_types=COLUMN_TYPES, access=ACCESS,
    expected=EXPECTED, identity=Identity("lidc_idri"))


def warn_problems(problems: list[str], what: str, *, stacklevel: int = 3) -> None:
    """One warning counting ``problems`` (each ``"<file>:<line>: <what>"``), naming the first."""
    if problems:
        warnings.warn(f"LIDC-IDRI: {len(problems)} {what} (left out, never drawn): "
                      + "; ".join(problems[:SHOW]), UserWarning, stacklevel=stacklevel)


def series_labels(nodules: list[dict]) -> list[float]:
    """``LABELS`` of one series from its nodule groups (the rule of the module text)."""
    medians = [n["malignancy_median"] for n in nodules if n["kind"] == "contour"]
    suspicious = 1.0 if any(m is not None and m > 3 for m in medians) else \
        np.nan if any(m is None or m == 3 for m in medians) else 0.0
    return [float(any(n["kind"] == "contour" for n in nodules)),
            float(any(n["kind"] == "point" for n in nodules)), suspicious]


def nodule_table(table: pd.DataFrame) -> pd.DataFrame:
    """One row per nodule of a harmonized table: its series and patient, ``nodule`` (1.. in
    the series' group order), ``kind``, ``readers`` (how many marked it), ``mask_label`` (its
    label in the mask; 0 for a point) and each rating's median over the readers who gave it
    (NaN: none)."""
    rows = []
    for series, patient, nodules in zip(table["series_instance_uid"], table["patient_id"],
                                        table["nodules"]):
        label = 0
        for k, n in enumerate(nodules, 1):
            label += n["kind"] == "contour"
            ratings = {name: [v for v in n["characteristics"][name] if v is not None]
                       for name in CHARACTERISTICS}
            rows.append([series, patient, k, n["kind"], len(n["readers"]),
                         label if n["kind"] == "contour" else 0,
                         *(float(np.median(v)) if v else np.nan for v in ratings.values())])
    return pd.DataFrame(rows, columns=["series_instance_uid", "patient_id", "nodule", "kind",
                                       "readers", "mask_label", *CHARACTERISTICS])


# -- harmonizer -----------------------------------------------------------------------------------
class LIDCIDRIHarmonizer(BaseHarmonizer):
    """LIDC-IDRI: one row per CT series with a reader XML."""
    spec = SPEC
    metadata_description = "the LIDC-IDRI collection folder (LIDC-IDRI/, reader XML per series)"

    def resolve_metadata_path(self) -> Path:
        tried = [self.csv_path] if self.csv_path is not None else \
            [] if self.base_image_dir is None else \
            [Path(self.base_image_dir) / COLLECTION, Path(self.base_image_dir)]
        for path in tried:
            if path.is_dir() and path.name == COLLECTION:
                return path
        raise MetadataNotFoundError(self.metadata_description, tried,
                                    fix=f"pass base_image_dir= the folder holding {COLLECTION}/ "
                                        f"(or csv_path= that folder). {ACCESS}")

    def inputs(self, path: Path) -> Inputs:
        return Inputs(path, {}, {"xml": (path, (".xml",))})

    def read(self, inputs: Inputs) -> pd.DataFrame:
        root = inputs.folders["xml"][0]
        rels = inputs.listing("xml")
        return pd.DataFrame({"xml_path": [f"{root.name}/{r}" for r in rels],
                             "data": [(root / r).read_bytes() for r in rels]})

    @classmethod
    def harmonize_raw(cls, raw: pd.DataFrame, *, source: str = "metadata") -> pd.DataFrame:
        rows, problems = [], []
        for path, data in zip(raw["xml_path"].tolist(), raw["data"].tolist()):
            read = parse_read(data, source=path)
            if read is None:  # a radiograph read
                continue
            folder = path.rsplit("/", 1)[0]
            parts = folder.split("/")
            if len(parts) != 4 or not PATIENT.fullmatch(parts[1]):
                raise MetadataError(f"{source}: {path} is not in a series folder",
                                    expected=f"{COLLECTION}/LIDC-IDRI-dddd/<study>/<series>/"
                                             "<name>.xml", found=path,
                                    fix="keep the collection's folders as downloaded")
            problems += [f"{path}:{p['line']}: {p['what']}" for p in read["problems"]]
            nodules = nodule_records(read["marks"], group_marks(read["marks"]))
            rows.append([parts[1], read["study_uid"] or parts[2], folder, *series_labels(nodules),
                         read["series_uid"] or parts[3], path, read["readers"], len(nodules),
                         nodules, len(read["non_nodules"]), len(read["problems"])])
        warn_problems(problems, "problems in the reader XML files")
        df = pd.DataFrame(rows, columns=["patient_id", "study_id", "image_path", *LABELS,
                                         *EXTRA_COLS])
        twice = df["image_path"].duplicated(keep=False)
        if twice.any():
            raise MetadataError(f"{source}: two reader XML files in one series folder",
                                expected="one XML a series", found=", ".join(
                                    df.loc[twice, "xml_path"].head(SHOW)),
                                fix="remove the stray copy")
        df.insert(3, "view_position", None)
        df.insert(4, "report", None)
        return df


# -- series reading and geometry (the dataset side) ------------------------------------------------
def kept_files(folder) -> tuple[list[Path], int]:
    """The DICOM files of ``folder`` with one file a position (:data:`DUPLICATES`), and the
    count left out."""
    from ..volumes.dicom_headers import find_files, scan

    headers, _ = scan(find_files(Path(folder)))
    best: dict = {}
    for h in headers:
        iop = np.asarray(h.floats("ImageOrientationPatient"), np.float64)
        along = float(np.asarray(h.floats("ImagePositionPatient")) @ np.cross(iop[:3], iop[3:]))
        rank = (int(h.get("InstanceNumber") or 0), h.path.name)
        key = round(along, 3)
        if key not in best or rank < best[key][0]:
            best[key] = (rank, h.path)
    return sorted(p for _, p in best.values()), len(headers) - len(best)


def read_lidc_series(folder: str, *, ct: bool | None = True):
    """A series' canonical volume; with slices at one position, :func:`kept_files` read."""
    from ..volumes import read_volume
    from ..volumes.dicom import DuplicateSliceError

    try:
        return read_volume(folder, ct=ct)
    except DuplicateSliceError:
        files, dropped = kept_files(folder)
        warnings.warn(f"{folder}: {dropped} slices at a position already held: kept the one of "
                      f"{DUPLICATES} at each", UserWarning, stacklevel=2)
        return read_volume(files, ct=ct)


class SliceMap:
    """The series' slices (headers in the volume's file order) -> canonical voxel coordinates
    ``(d, h, w)`` through the volume's LPS ``affine``."""

    def __init__(self, headers, affine):
        self.sop = {str(h.get("SOPInstanceUID")): i for i, h in enumerate(headers)}
        self.ipp = np.array([h.floats("ImagePositionPatient") for h in headers], np.float64)
        iop = np.asarray(headers[0].floats("ImageOrientationPatient"), np.float64)
        dy, dx = headers[0].floats("PixelSpacing")
        self.axes = np.stack([iop[:3] * dx, iop[3:] * dy])  # mm per pixel of x, of y
        self.inverse = np.linalg.inv(np.asarray(affine, np.float64))

    def slice_of(self, sop, z) -> int | None:
        """The slice a mark names: its SOP UID, else the one slice at its z (0.01 mm)."""
        if sop in self.sop:
            return self.sop[sop]
        hits = np.flatnonzero(np.abs(self.ipp[:, 2] - (np.nan if z is None else z)) < 0.01)
        return int(hits[0]) if len(hits) == 1 else None

    def voxels(self, i: int, xy) -> np.ndarray:
        """(n, 3) canonical ``(d, h, w)`` of pixel ``(x, y)`` points on slice ``i``."""
        world = self.ipp[i] + np.asarray(xy, np.float64) @ self.axes
        return world @ self.inverse[:3, :3].T + self.inverse[:3, 3]


def draw_series(read: dict, slices: SliceMap, shape, *, consensus: float = 0.5,
                where: str = "") -> dict:
    """``{"labels"`` (uint16 label map on the canonical grid), ``"boxes", "box_labels",
    "points", "point_labels"}`` (contract order: x along W, y along H, z along D) of one XML
    ``read`` (the module text's rules); marks off the series or the volume counted in one
    warning naming ``where`` and each line."""
    import cv2

    labels = np.zeros(shape, np.uint16)
    problems, boxes, points, point_labels = [], [], [], []
    size = np.asarray(shape, np.float64)

    def place(roi):
        i = slices.slice_of(roi["sop"], roi["z"])
        vox = None if i is None else slices.voxels(i, roi["xy"])
        if vox is None or (vox < -0.5).any() or (vox > size - 0.5).any() \
                or np.abs(vox[:, 0] - np.rint(vox[0, 0])).max() > 1e-3:  # not on one D slice
            problems.append(f"{where}:{roi['line']}: " + (
                "its slice is not in the series" if i is None else "outside the volume"))
            return None
        return vox

    marks = read["marks"]
    groups = group_marks(marks)
    label = 0
    for members in groups:
        group = [marks[j] for j in members]
        outlined = [m for m in group if m["kind"] == "contour"]
        if not outlined:
            placed = [place(m["rois"][0]) for m in group]
            placed = [v[0] for v in placed if v is not None]
            if placed:
                points.append(np.mean(placed, axis=0)[::-1])
                point_labels.append("nodule_lt_3mm")
            continue
        label += 1
        count: dict[int, np.ndarray] = {}  # slice -> readers who drew each pixel
        for mark in outlined:
            drawn: dict[int, np.ndarray] = {}
            for roi in sorted(mark["rois"], key=lambda r: not r["inclusion"]):
                vox = place(roi)
                if vox is None:
                    continue
                d = int(round(vox[0, 0]))
                plane = drawn.setdefault(d, np.zeros(shape[1:], np.uint8))
                poly = [np.rint(vox[:, [2, 1]]).astype(np.int32)]
                cv2.fillPoly(plane, poly, int(roi["inclusion"]))
                cv2.polylines(plane, poly, True, int(roi["inclusion"]))
            for d, plane in drawn.items():
                count[d] = count.get(d, 0) + plane
        need = max(1, int(np.ceil(consensus * len(outlined) - 1e-9)))
        box = []
        for d, plane in sorted(count.items()):
            inside = (plane >= need) & (labels[d] == 0)
            if inside.any():
                labels[d][inside] = label
                rows, cols = np.nonzero(inside)
                box.append([cols.min(), rows.min(), d, cols.max(), rows.max(), d])
        if box:
            box = np.array(box, np.float64)
            boxes.append([*(box[:, :3].min(axis=0) - 0.5), *(box[:, 3:].max(axis=0) + 0.5)])
    for other in read["non_nodules"]:
        vox = place(other)
        if vox is not None:
            points.append(vox[0][::-1])
            point_labels.append("non_nodule")
    warn_problems(problems, "marks off the series or outside the volume")
    out = {"labels": labels}
    if boxes:
        out.update(boxes=np.array(boxes, np.float64), box_labels=["nodule_ge_3mm"] * len(boxes))
    if points:
        out.update(points=np.array(points, np.float64), point_labels=point_labels)
    return out


def _dataset_classes():
    """This module's dataset class (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from functools import partial

    from ..data.volumes import VolumeDataset
    from ..errors import ImageReadError, RadHarmonyError
    from ..volumes.dicom_headers import scan
    from ..volumes.precache import VolumeJob

    class LIDCIDRIDataset(VolumeDataset):
        """LIDC-IDRI CT series; ``output_mask=True`` adds the nodules' label map (``mask``),
        :meth:`annotations` their boxes and points (canonical voxels of the volume as read).
        ``consensus``: the share of a nodule's outlining readers a voxel needs."""
        harmonizer_class = LIDCIDRIHarmonizer
        ct = True

        def __init__(self, *args, consensus: float = 0.5, **kwargs):
            if not 0.0 <= float(consensus) <= 1.0:
                raise RadHarmonyError("LIDCIDRIDataset: consensus is a share of the readers",
                                      expected="0 <= consensus <= 1 (0: any reader, 1: all)",
                                      found=f"consensus={consensus!r}",
                                      fix="pass e.g. consensus=0.5 (half of the readers)")
            super().__init__(*args, **kwargs)
            self.consensus = float(consensus)
            self._drawn = None

        def read_params(self, index: int) -> dict:
            return {**super().read_params(index), "duplicates": DUPLICATES}

        def job(self, index: int):
            path = str(self.image_file(index))
            return VolumeJob([path], partial(read_lidc_series, path, ct=self.ct),
                             self.read_params(index))

        def drawn(self, index: int) -> dict:
            """Row ``index``'s :func:`draw_series` on its source volume (kept for one row)."""
            if self._drawn is None or self._drawn[0] != index:
                volume = self.read_volume(index) if self.preset is not None else \
                    self.load_volume(index)
                headers, _ = scan([Path(f) for f in volume.source.files])
                xml = self.base_image_dir / self.harmonized_df["xml_path"].iat[index]
                if not xml.is_file():
                    raise ImageReadError(f"{xml}: the series' reader XML is missing",
                                         expected="the XML the table was made from",
                                         found="no such file", fix="restore the file, or "
                                         "harmonize the collection again")
                read = parse_read(xml.read_bytes(), source=str(xml))
                self._drawn = (index, draw_series(
                    read, SliceMap(headers, volume.in_space("LPS").affine), volume.shape,
                    consensus=self.consensus, where=str(xml)),
                    (volume.shape, volume.in_space("LPS").affine))
            return self._drawn[1]

        def annotations(self, index: int) -> dict:
            """Boxes and points of row ``index`` in its source volume's canonical voxels."""
            return {k: v for k, v in self.drawn(index).items() if k != "labels"}

        def source_mask(self, index: int) -> np.ndarray:
            """The nodules' label map on the series' canonical grid (the sample's ``mask``
            carries it onto the returned grid: :class:`~radharmony.volumes.placement.
            VolumeGrid`)."""
            return self.drawn(index)["labels"]

    return (LIDCIDRIDataset,)


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["LIDCIDRIHarmonizer", "LIDCIDRIDataset", "nodule_table"]
