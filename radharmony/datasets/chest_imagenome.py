"""Chest ImaGenome 1.0.0 (PhysioNet, Wu et al., NeurIPS 2021 Datasets & Benchmarks): anatomical
region boxes with region-level findings for frontal MIMIC-CXR images (annotations only).

**Silver** (``chest_imagenome``): ``silver_dataset/scene_graph.zip``, one
``<dicom_id>_SceneGraph.json`` per image (at any depth: some extractions nest
``scene_graph/scene_graph/``). Keys read: ``image_id`` (the dicom id), ``patient_id``,
``study_id``, ``viewpoint``; ``objects[]`` with ``bbox_name`` and ``original_x1, original_y1,
original_x2, original_y2`` (pixels of the original image); ``attributes[]`` with ``bbox_name``,
``phrases`` (report sentences) and ``attributes`` (lists of ``"category|relation|name"``
strings, e.g. ``"anatomicalfinding|yes|atelectasis"``). Beside the zip:
``splits/{train,valid,test}.csv`` (the ``split`` column; the image id column is ``dicom_id``
or ``image_id``) and ``splits/images_to_avoid.csv`` (``avoid``: the gold images, to keep out
of training).

**Gold** (``chest_imagenome_gold``): ``gold_dataset/gold_bbox_coordinate_annotations_1000images
.csv`` (one row per image x region: ``image_id`` = ``<dicom_id>.dcm``, ``bbox_name``,
``original_x1`` ... ``original_y2``) and, beside it, the TAB-separated
``gold_object_attribute_with_coordinates.txt`` (``image_id``, ``patient_id``, ``study_id``,
``bbox``, ``categoryID``, ``label_name`` and ``context`` ``yes``/``no`` or ``relation``
``1``/``0``). Subject and study come from that file, else from MIMIC-CXR-JPG's
``mimic-cxr-2.0.0-metadata.csv.gz`` found near ``base_image_dir``; images found in neither are
dropped with a warning.

Harmonized: one row per image. ``boxes`` holds one record per region with coordinates (label
= region name, ``annotator`` None, source pixels: ``box_units="pixel"``) and two extra keys:
``attributes`` (that region's ``"category|relation|name"`` strings, every category kept --
filter ``nlp``/``technicalassessment`` yourself) and ``phrases``. Faulty boxes are clipped at
0 and dropped when empty (``dropped_boxes`` counts them). Regions with findings but no box
(neck, chest walls, ..., or a dropped faulty box) go to ``unboxed_regions`` (``{"region", "attributes", "phrases"}``).
:func:`region_findings` flattens both into one row per (image, region, finding). There are no
label columns: the findings are region-level.

Joins with ``mimic_cxr_jpg``: ``image_path`` ``files/p<2 digits>/p<subject>/s<study>/<dicom_id>
.jpg`` (the release's ``.dcm`` paths with MIMIC-CXR-JPG's extension), ``patient_id`` the
subject id and ``study_id`` the study id without ``p``/``s``, ``sample_id`` ``<key>:<dicom_id>``;
``base_image_dir`` is the MIMIC-CXR-JPG root.

Unverified (no real file available here; keys from third-party loaders): the split CSVs'
header (read by name, either id column), the gold files' exact columns (the subject/study and
yes/no columns are looked for under both names above), and that the original pixel space of
the boxes equals the MIMIC-CXR-JPG size. Not read: the comparison relations, the 224 x 224
coordinates, ``utils/`` and ``semantics/``.
"""

from __future__ import annotations

import json
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from ..annotations.boxes import box_record
from ..errors import MetadataError
from ..spec import DatasetSpec, Identity
from ..table.harmonizer import BaseHarmonizer, Inputs
from ..table.locate import find_optional
from ..table.read_csv import read_table, require_columns
from .mimic import VIEW_MAP
from .torch_side import torch_side

# -- declarative spec ----------------------------------------------------------------------------
#: the 29 boxed regions, in the order of the authors' tooling
REGIONS = ("right lung", "right upper lung zone", "right mid lung zone", "right lower lung zone",
           "right hilar structures", "right apical zone", "right costophrenic angle",
           "right hemidiaphragm", "left lung", "left upper lung zone", "left mid lung zone",
           "left lower lung zone", "left hilar structures", "left apical zone",
           "left costophrenic angle", "left hemidiaphragm", "trachea", "spine",
           "right clavicle", "left clavicle", "aortic arch", "mediastinum",
           "upper mediastinum", "svc", "cardiac silhouette", "cavoatrial junction",
           "right atrium", "carina", "abdomen")
COORDS = ("original_x1", "original_y1", "original_x2", "original_y2")
SPLITS = {"train": "train", "valid": "valid", "test": "test"}  # split file -> split
SPLIT_FILES = {s: (f"splits/{s}.csv", f"silver_dataset/splits/{s}.csv") for s in SPLITS}
AVOID_FILES = ("splits/images_to_avoid.csv", "silver_dataset/splits/images_to_avoid.csv")
GOLD_ATTRIBUTES = "gold_object_attribute_with_coordinates.txt"
MIMIC_METADATA = ("mimic-cxr-2.0.0-metadata.csv.gz", "mimic-cxr-2.0.0-metadata.csv")
LABEL_MAP: dict = {}  # region-level findings only, no label columns
ACCESS = ("PhysioNet chest-imagenome 1.0.0, credentialed access, PhysioNet Credentialed Health "
          "Data License 1.5.0; images: MIMIC-CXR-JPG under its own terms")
SPEC = DatasetSpec(
    identity=Identity("mimic_cxr_jpg"),
    key="chest_imagenome", title="Chest ImaGenome (silver scene graphs on MIMIC-CXR-JPG)",
    metadata_files=("chest-imagenome/1.0.0/silver_dataset/scene_graph.zip",
                    "chest-imagenome/silver_dataset/scene_graph.zip",
                    "silver_dataset/scene_graph.zip", "scene_graph.zip"),
    extra_cols=("dicom_id", "split", "split_raw", "avoid", "dropped_boxes", "boxes",
                "unboxed_regions"),
    column_types={"avoid": "bool", "dropped_boxes": "Int64", "unboxed_regions": "json"},
    outputs=frozenset({"bbox"}), view_map=VIEW_MAP, id_col="dicom_id", box_units="pixel",
    access=ACCESS, label_map=LABEL_MAP,
    expected={"images": 242_072, "regions": 29, "train_images_after_filtering": 166_521})
GOLD_SPEC = DatasetSpec(
    identity=Identity("mimic_cxr_jpg"),
    key="chest_imagenome_gold", title="Chest ImaGenome (gold set: 1,000 images, 500 patients)",
    metadata_files=(
        "chest-imagenome/1.0.0/gold_dataset/gold_bbox_coordinate_annotations_1000images.csv",
        "chest-imagenome/gold_dataset/gold_bbox_coordinate_annotations_1000images.csv",
        "gold_dataset/gold_bbox_coordinate_annotations_1000images.csv",
        "gold_bbox_coordinate_annotations_1000images.csv"),
    extra_cols=("dicom_id", "dropped_boxes", "boxes", "unboxed_regions"),
    column_types={"dropped_boxes": "Int64", "unboxed_regions": "json"},
    outputs=frozenset({"bbox"}), view_map=VIEW_MAP, id_col="dicom_id", box_units="pixel",
    access=ACCESS, label_map=LABEL_MAP, expected={"images": 1_000, "patients": 500})
_FIX = "pass the Chest ImaGenome files as downloaded"


# -- pure helpers ---------------------------------------------------------------------------------
def mimic_path(subject: str, study: str, dicom: str) -> str:
    """MIMIC-CXR-JPG's image path (as ``mimic_cxr_jpg`` writes it)."""
    return f"files/p{subject[:2]}/p{subject}/s{study}/{dicom}.jpg"


def plain_id(value) -> str | None:
    """``10000980``, ``"p10000980"``, ``10000980.0`` -> ``"10000980"``; None when missing."""
    if value is None or isinstance(value, float) and np.isnan(value):
        return None
    text = str(value).strip()
    text = re.sub(r"^[ps](?=\d)", "", text)
    text = re.sub(r"\.0+$", "", text)
    return text or None


def dicom_of(value) -> str:
    """An image id with any ``.dcm``/``.jpg`` extension and folder removed."""
    return re.sub(r"\.(dcm|jpg)$", "", str(value).strip().rsplit("/", 1)[-1])


def region_box(region: str, coords, *, where: str) -> dict | None:
    """A pixel box record for one region, clipped at 0; None when it is empty after that."""
    try:
        x1, y1, x2, y2 = (float(v) for v in coords)
    except (TypeError, ValueError):
        raise MetadataError(f"{where}: region {region!r} has non-numeric coordinates",
                            expected="numbers original_x1 ... original_y2",
                            found=repr(coords)[:80], fix=_FIX) from None
    x1, y1, x2, y2 = max(x1, 0.0), max(y1, 0.0), max(x2, 0.0), max(y2, 0.0)
    if not (x2 > x1 and y2 > y1):
        return None
    return box_record(region, None, x1, y1, x2, y2)


def attach(boxes: dict[str, dict], findings: dict[str, dict]) -> tuple[list, list]:
    """``(boxes, unboxed_regions)``: each region's ``attributes``/``phrases`` on its box, or
    an unboxed entry when it has none."""
    out, unboxed = [], []
    for region, rec in boxes.items():
        f = findings.get(region, {})
        out.append({**rec, "attributes": f.get("attributes", []), "phrases": f.get("phrases", [])})
    for region, f in findings.items():
        if region not in boxes:
            unboxed.append({"region": region, "attributes": f.get("attributes", []),
                            "phrases": f.get("phrases", [])})
    return out, unboxed


def scene_graph_row(graph: dict, *, where: str) -> dict:
    """One image's row fields from its parsed scene graph."""
    if not isinstance(graph, dict) or "image_id" not in graph:
        raise MetadataError(f"{where}: not a scene graph", expected="an object with image_id, "
                            "patient_id, study_id, objects, attributes",
                            found=repr(graph)[:80], fix=_FIX)
    boxes, dropped = {}, 0
    for k, obj in enumerate(graph.get("objects") or []):
        if not all(c in obj for c in COORDS):
            continue  # a region named without coordinates
        rec = region_box(obj.get("bbox_name"), [obj[c] for c in COORDS],
                         where=f"{where}, objects[{k}]")
        if rec is None:
            dropped += 1
        else:
            boxes[rec["label"]] = rec
    findings: dict[str, dict] = {}
    for a in graph.get("attributes") or []:
        region = a.get("bbox_name")
        f = findings.setdefault(region, {"attributes": [], "phrases": []})
        for group in a.get("attributes") or []:
            f["attributes"] += [group] if isinstance(group, str) else list(group)
        f["phrases"] += [str(p).strip() for p in a.get("phrases") or []]
    recs, unboxed = attach(boxes, findings)
    return {"dicom": dicom_of(graph["image_id"]), "subject": plain_id(graph.get("patient_id")),
            "study": plain_id(graph.get("study_id")), "view": graph.get("viewpoint"),
            "boxes": recs, "unboxed": unboxed, "dropped": dropped}


def region_findings(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (image, region, finding string) of a Chest ImaGenome table:
    ``dicom_id, region, boxed, category, relation, name``."""
    rows = []
    for dicom, boxes, unboxed in zip(df["dicom_id"], df["boxes"], df["unboxed_regions"]):
        for rec, boxed in [(b, True) for b in boxes] + [(u, False) for u in unboxed]:
            for text in rec.get("attributes", []):
                cat, rel, name = (str(text).split("|", 2) + ["", ""])[:3]
                rows.append((dicom, rec.get("label", rec.get("region")), boxed, cat, rel, name))
    return pd.DataFrame(rows, columns=["dicom_id", "region", "boxed", "category", "relation",
                                       "name"])


def _table(rows: list[dict], *, source: str) -> pd.DataFrame:
    keep = [r for r in rows if r["subject"] and r["study"]]
    if len(keep) < len(rows):
        warnings.warn(f"{source}: {len(rows) - len(keep)} images without a subject or study id "
                      f"are dropped (first "
                      f"{[r['dicom'] for r in rows if not (r['subject'] and r['study'])][:3]})",
                      stacklevel=3)
    return pd.DataFrame({
        "patient_id": [r["subject"] for r in keep], "study_id": [r["study"] for r in keep],
        "image_path": [mimic_path(r["subject"], r["study"], r["dicom"]) for r in keep],
        "view_position": [r["view"] if isinstance(r["view"], str) and r["view"].strip()
                          else None for r in keep],
        "report": None, "dicom_id": [r["dicom"] for r in keep],
        "_boxes": [r["boxes"] for r in keep], "_unboxed": [r["unboxed"] for r in keep],
        "_dropped": [r["dropped"] for r in keep]})


def _id_column(df: pd.DataFrame, *, source: str, what: str) -> pd.Series:
    for col in ("dicom_id", "image_id"):
        if col in df.columns:
            return df[col].map(dicom_of)
    raise MetadataError(f"{source}: {what} has no image id column",
                        expected="a column dicom_id or image_id", found=str(list(df.columns)),
                        fix=_FIX)


# -- harmonizers ----------------------------------------------------------------------------------
class ChestImaGenomeHarmonizer(BaseHarmonizer):
    """Chest ImaGenome silver: one scene graph per frontal MIMIC-CXR image (242,072)."""

    spec = SPEC
    metadata_description = "the Chest ImaGenome scene graphs (silver_dataset/scene_graph.zip)"

    def inputs(self, path: Path) -> Inputs:
        """The scene-graph zip and, beside it, the split and images-to-avoid CSVs."""
        files = {f"split_{s}": find_optional(names, path.parent)
                 for s, names in SPLIT_FILES.items()}
        files["avoid"] = find_optional(AVOID_FILES, path.parent)
        return Inputs(path, files)

    def read(self, inputs: Inputs) -> dict:
        graphs = []
        try:
            with zipfile.ZipFile(inputs.metadata) as zf:
                for name in sorted(n for n in zf.namelist() if n.endswith("_SceneGraph.json")):
                    try:
                        graphs.append((name, json.loads(zf.read(name))))
                    except ValueError as exc:
                        raise MetadataError(f"{inputs.metadata}, {name} is not valid JSON",
                                            expected="a scene graph object", found=str(exc),
                                            fix=_FIX) from None
        except zipfile.BadZipFile as exc:
            raise MetadataError(f"{inputs.metadata} is not a zip archive",
                                expected="scene_graph.zip as downloaded", found=str(exc),
                                fix=_FIX) from None
        tables = {}
        for role in (*(f"split_{s}" for s in SPLITS), "avoid"):
            if (p := inputs.file(role)) is not None:
                tables[role] = read_table(p, description=p.name, dtype=str)
        return {"graphs": graphs, "tables": tables}

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        rows = [scene_graph_row(g, where=f"{source}, {name}") for name, g in raw["graphs"]]
        t = _table(rows, source=source)
        tables = raw.get("tables") or {}
        split = pd.Series([None] * len(t), dtype=object)
        for s, value in SPLITS.items():
            if (tab := tables.get(f"split_{s}")) is not None:
                ids = set(_id_column(tab, source=source, what=f"splits/{s}.csv"))
                split[t["dicom_id"].isin(ids).to_numpy()] = value
        avoid = tables.get("avoid")
        df = t.iloc[:, :6].copy()
        df["split_raw"] = split.to_numpy(object)
        df["split"] = split.to_numpy(object)  # the file names are the standard names
        df["avoid"] = t["dicom_id"].isin(
            set(_id_column(avoid, source=source, what="images_to_avoid.csv"))
            if avoid is not None else set()).to_numpy()
        df["dropped_boxes"] = pd.array(t["_dropped"], dtype="Int64")
        df["boxes"] = t["_boxes"].to_numpy(object)
        df["unboxed_regions"] = t["_unboxed"].to_numpy(object)
        return df


class ChestImaGenomeGoldHarmonizer(BaseHarmonizer):
    """Chest ImaGenome gold: 1,000 images of 500 patients with verified boxes and findings."""

    spec = GOLD_SPEC
    metadata_description = ("the Chest ImaGenome gold boxes "
                            "(gold_bbox_coordinate_annotations_1000images.csv)")

    def inputs(self, path: Path) -> Inputs:
        """The gold box CSV, the gold attribute file beside it and MIMIC-CXR-JPG's metadata
        table near the images (subject and study of images the attribute file lacks)."""
        return Inputs(path, {"attributes": find_optional((GOLD_ATTRIBUTES,), path.parent),
                             "mimic_metadata": find_optional(MIMIC_METADATA,
                                                             self.base_image_dir)})

    def read(self, inputs: Inputs) -> dict:
        raw = {"boxes": read_table(inputs.metadata, description=self.metadata_description,
                                   columns=("image_id", "bbox_name", *COORDS), dtype=str),
               "attributes": None, "mimic": None}
        if (p := inputs.file("attributes")) is not None:
            raw["attributes"] = read_table(p, description=GOLD_ATTRIBUTES, sep="\t", dtype=str,
                                           columns=("image_id", "bbox"))
        if (p := inputs.file("mimic_metadata")) is not None:
            raw["mimic"] = read_table(p, description=p.name, dtype=str,
                                      columns=("dicom_id", "subject_id", "study_id",
                                               "ViewPosition"),
                                      usecols=["dicom_id", "subject_id", "study_id",
                                               "ViewPosition"])
        return raw

    @classmethod
    def harmonize_raw(cls, raw: dict, *, source: str = "metadata") -> pd.DataFrame:
        b = raw["boxes"]
        require_columns(b, ("image_id", "bbox_name", *COORDS), source=source,
                        description="the gold box table")
        b = b.assign(_dicom=b["image_id"].map(dicom_of))
        a = raw.get("attributes")
        ids: dict[str, tuple] = {}
        findings: dict[str, dict] = {}
        if a is not None:
            a = a.assign(_dicom=a["image_id"].map(dicom_of))
            yes = a["context"] if "context" in a.columns else \
                a.get("relation", pd.Series(["1"] * len(a))).map({"1": "yes", "0": "no"})
            for d, s, t in zip(a["_dicom"], a.get("patient_id", [None] * len(a)),
                               a.get("study_id", [None] * len(a))):
                if plain_id(s) and plain_id(t):
                    ids.setdefault(d, (plain_id(s), plain_id(t), None))
            for d, region, cat, rel, name in zip(a["_dicom"], a["bbox"],
                                                 a.get("categoryID", [""] * len(a)), yes,
                                                 a.get("label_name", [""] * len(a))):
                f = findings.setdefault(d, {}).setdefault(str(region).strip().lower(),
                                                          {"attributes": [], "phrases": []})
                f["attributes"].append(f"{cat}|{rel}|{name}")
        view: dict[str, str] = {}
        if (m := raw.get("mimic")) is not None:
            for d, s, t, v in zip(m["dicom_id"], m["subject_id"], m["study_id"],
                                  m["ViewPosition"]):
                ids.setdefault(d, (plain_id(s), plain_id(t), None))
                if isinstance(v, str):
                    view[d] = v
        rows = []
        for d, group in b.groupby("_dicom", sort=False):
            boxes, dropped = {}, 0
            for i, region, *xyxy in zip(group.index, group["bbox_name"],
                                        *(group[c] for c in COORDS)):
                rec = region_box(str(region).strip().lower(), xyxy, where=f"{source}, row {i}")
                if rec is None:
                    dropped += 1
                else:
                    boxes[rec["label"]] = rec
            recs, unboxed = attach(boxes, findings.get(d, {}))
            subject, study, _ = ids.get(d, (None, None, None))
            rows.append({"dicom": d, "subject": subject, "study": study, "view": view.get(d),
                         "boxes": recs, "unboxed": unboxed, "dropped": dropped})
        t = _table(rows, source=source)
        df = t.iloc[:, :6].copy()
        df["dropped_boxes"] = pd.array(t["_dropped"], dtype="Int64")
        df["boxes"] = t["_boxes"].to_numpy(object)
        df["unboxed_regions"] = t["_unboxed"].to_numpy(object)
        return df


# -- datasets -------------------------------------------------------------------------------------
def _dataset_classes():
    """This module's dataset classes (the torch side), made on first use: see
    :mod:`radharmony.datasets.torch_side`."""
    from ..data.dataset import BaseRadiologicalDataset

    class ChestImaGenomeDataset(BaseRadiologicalDataset):
        """Chest ImaGenome silver; ``base_image_dir`` is the MIMIC-CXR-JPG root. ``bbox`` holds the
        region boxes (``bbox_labels`` their region names); the findings stay in the table."""

        harmonizer_class = ChestImaGenomeHarmonizer

    class ChestImaGenomeGoldDataset(BaseRadiologicalDataset):
        """Chest ImaGenome gold; ``base_image_dir`` is the MIMIC-CXR-JPG root."""

        harmonizer_class = ChestImaGenomeGoldHarmonizer

    return ChestImaGenomeDataset, ChestImaGenomeGoldDataset


__getattr__ = torch_side(__name__, _dataset_classes)


__all__ = ["ChestImaGenomeHarmonizer", "ChestImaGenomeDataset", "ChestImaGenomeGoldHarmonizer",
           "ChestImaGenomeGoldDataset"]
