"""A Chest ImaGenome replica (silver and gold) over a MIMIC-CXR-JPG image tree.

Layout::

    <root>/files/p1X/p<subject>/s<study>/<dicom_id>.jpg              the MIMIC-CXR-JPG images
    <root>/chest-imagenome/silver_dataset/scene_graph.zip            <dicom_id>_SceneGraph.json
    <root>/chest-imagenome/silver_dataset/splits/{train,valid,test}.csv
                                    dicom_id,subject_id,study_id,path,ViewPosition
    <root>/chest-imagenome/silver_dataset/splits/images_to_avoid.csv
    <root>/chest-imagenome/gold_dataset/gold_bbox_coordinate_annotations_1000images.csv
    <root>/chest-imagenome/gold_dataset/gold_object_attribute_with_coordinates.txt   (TAB)

Quirks reproduced: scene graphs one folder deeper for some images (``scene_graph/scene_graph/``);
integer ``patient_id``/``study_id``; regions named without coordinates; a faulty box (zero
area) and one reaching past the left edge (negative ``original_x1``); attributes as lists of
``"category|relation|name"`` strings with ``yes`` and ``no``; a region with findings but no box
(``neck``); ``.dcm`` paths in the split CSVs; gold ``image_id`` with ``.dcm``.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import cv2
import numpy as np

from ..datasets.chest_imagenome import COORDS, REGIONS, mimic_path
from . import register_fake
from .images import synthetic_cxr
from .tables import write_csv

FINDINGS = (("anatomicalfinding", "atelectasis"), ("anatomicalfinding", "lung opacity"),
            ("disease", "pneumonia"), ("tubesandlines", "enteric tube"),
            ("nlp", "abnormal"), ("anatomicalfinding", "pleural effusion"))


def _dicom(rng) -> str:
    return "-".join("".join(rng.choice(list("0123456789abcdef"), 8)) for _ in range(5))


def scene_graph(dicom: str, subject: str, study: str, h: int, w: int, k: int, *, rng) -> dict:
    """One image's scene graph: 6 boxed regions (one faulty, one past the edge), one region
    named without coordinates and findings on a region without a box."""
    objects, attributes = [], []
    for j, region in enumerate(REGIONS[k % 3: k % 3 + 6]):
        x1, y1 = int(rng.integers(0, w // 2)), int(rng.integers(0, h // 2))
        x2, y2 = x1 + int(rng.integers(5, w // 2)), y1 + int(rng.integers(5, h // 2))
        if j == 1:
            x2 = x1  # faulty: zero area
        if j == 2:
            x1 = -3  # past the left edge
        objects.append({"object_id": f"{dicom}_{region}", "bbox_name": region,
                        "original_x1": x1, "original_y1": y1, "original_x2": x2,
                        "original_y2": y2, "x1": x1 * 224 // w, "y1": y1 * 224 // h,
                        "x2": x2 * 224 // w, "y2": y2 * 224 // h, "width": 224, "height": 224})
        cat, name = FINDINGS[(j + k) % len(FINDINGS)]
        attributes.append({"bbox_name": region, "object_id": f"{dicom}_{region}",
                           "phrases": [f"There is {name} in the {region}."],
                           "attributes": [[f"{cat}|{'no' if j == 3 else 'yes'}|{name}",
                                           "nlp|yes|abnormal"]]})
    objects.append({"object_id": f"{dicom}_right atrium", "bbox_name": "right atrium"})
    attributes.append({"bbox_name": "neck", "object_id": f"{dicom}_neck",
                       "phrases": ["Neck soft tissues unremarkable."],
                       "attributes": [["anatomicalfinding|no|lung opacity"]]})
    return {"image_id": dicom, "patient_id": int(subject), "study_id": int(study),
            "viewpoint": ("PA", "AP")[k % 2], "objects": objects, "attributes": attributes,
            "relationships": []}


def write_chest_imagenome(root: str | Path, *, n_subjects: int = 4, seed: int = 0,
                          images: bool = True) -> Path:
    """Write the images and both annotation sets under ``root``; returns ``root``."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    release = root / "chest-imagenome"
    graphs, splits = {}, {"train": [], "valid": [], "test": []}
    gold_boxes, gold_attrs, avoid = [], [], []
    k = 0
    for s in range(n_subjects):
        subject = f"1{s}{int(rng.integers(100000, 999999))}"
        for _ in range(1 + (s == 0)):
            study = str(int(rng.integers(50_000_000, 59_999_999)))
            dicom = _dicom(rng)
            h, w = int(rng.integers(80, 110)), int(rng.integers(70, 100))
            if images:
                out = root / mimic_path(subject, study, dicom)
                out.parent.mkdir(parents=True, exist_ok=True)
                cv2.imwrite(str(out), synthetic_cxr(h, w, rng=rng, bits=8))
            g = scene_graph(dicom, subject, study, h, w, k, rng=rng)
            deeper = "scene_graph/scene_graph/" if k % 2 else "scene_graph/"
            graphs[f"{deeper}{dicom}_SceneGraph.json"] = g
            part = ("train", "valid", "test")[s % 3] if s < 3 else "test"
            splits[part].append([dicom, subject, study,
                                 f"files/p{subject[:2]}/p{subject}/s{study}/{dicom}.dcm",
                                 g["viewpoint"]])
            if part == "test":  # the gold set: verified boxes and findings
                avoid.append([dicom])
                for o in g["objects"]:
                    if "original_x1" in o:
                        gold_boxes.append([f"{dicom}.dcm", o["bbox_name"],
                                           *(o[c] for c in COORDS)])
                for a in g["attributes"]:
                    for text in a["attributes"][0]:
                        cat, rel, name = text.split("|")
                        gold_attrs.append([subject, study, f"{dicom}.dcm", a["bbox"] if "bbox"
                                           in a else a["bbox_name"], cat, name, rel,
                                           "1" if rel == "yes" else "0", "[1, 2, 30, 40]"])
            k += 1
    silver = release / "silver_dataset"
    silver.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(silver / "scene_graph.zip", "w") as zf:
        for name, g in graphs.items():
            zf.writestr(name, json.dumps(g))
    for part, rows in splits.items():
        write_csv(silver / "splits" / f"{part}.csv",
                  ["dicom_id", "subject_id", "study_id", "path", "ViewPosition"], rows)
    write_csv(silver / "splits" / "images_to_avoid.csv", ["dicom_id"], avoid)
    gold = release / "gold_dataset"
    write_csv(gold / "gold_bbox_coordinate_annotations_1000images.csv",
              ["image_id", "bbox_name", *COORDS], gold_boxes)
    with open(gold / "gold_object_attribute_with_coordinates.txt", "w") as fh:
        fh.write("\t".join(["patient_id", "study_id", "image_id", "bbox", "categoryID",
                            "label_name", "context", "relation", "coord_original"]) + "\n")
        for r in gold_attrs:
            fh.write("\t".join(map(str, r)) + "\n")
    return root


@register_fake("chest_imagenome", "chest_imagenome_gold")
def make(root: Path) -> dict:
    """Contract-suite maker: 4 patients, 5 images (all silver, the 2 test patients' gold)."""
    return {"base_image_dir": write_chest_imagenome(root)}
