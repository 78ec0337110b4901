"""A ROCO replica in the layout of the ``razorx89/roco-dataset`` repository after its fetch.

Layout::

    <root>/data/{train,validation,test}/radiology/captions.txt   ROCO_<n> TAB " <caption>"
    <root>/data/.../radiology/keywords.txt, cuis.txt             ROCO_<n> TAB TAB <v> TAB <v> ...
    <root>/data/.../radiology/dlinks.txt    ROCO_<n> TAB wget -r ftp://.../PMC<id>.tar.gz
                                            -P /path/to/Dir TAB <figure file>
    <root>/data/.../radiology/images/ROCO_<n>.jpg    8-bit grayscale JPEG

Quirks reproduced (each seen in the repository's files): a leading space after the id's tab
(two on some lines), the empty second field of keywords and CUIs, stemmed keywords
(``pelvi``), two figures of one article, a figure without a ``dlinks.txt`` row, captions of
every modality (CT, MRI, ultrasound, angiography, X-ray; chest and not).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from .images import synthetic_cxr

#: (caption, keywords, article) per figure; article None: no dlinks row
FIGURES = [
    ("Chest radiograph showing left pleural fluid with collapse of the left lower lobe.",
     ["lower", "collapse", "radiograph", "lobe", "fluid", "pleural", "chest", "left"], 3856271),
    ("Axial computed tomography scan of the pelvis showing a diffuse infiltration of the "
     "bladder wall (arrow).", ["pelvi", "scan", "wall", "bladder", "axial", "tomography"],
     3970251),
    ("Chest CT scan showing a left perihilar mass.", ["mas", "scan", "chest", "perihilar", "ct"],
     4075797),
    (" MRI brain with contrast (axial view) - homogenous enhancement of the lesion.",
     ["brain", "axial", "enhancement", "lesion", "contrast", "mri"], 5629864),
    ("Transabdominal ultrasound in a 16-year-old adolescent.", ["ultrasound", "adolescent"],
     4181738),
    ("AP chest X-ray after intubation shows the endotracheal tube; the lungs are clear.",
     ["xray", "ap", "chest", "intubation", "lung", "endotracheal", "tube"], 5667711),
    ("Left coronary arteriogram in the right anterior oblique projection.",
     ["coronary", "arteriogram", "oblique", "projection", "left"], 4534944),
    ("Panoramic view of the patient presenting multiple osteomas.",
     ["panoramic", "view", "patient", "osteoma"], None),
    ("Follow-up chest radiograph of the same patient: the effusion resolved.",
     ["followup", "chest", "radiograph", "effusion"], 3856271),
]
FOLDERS = ("train", "train", "train", "validation", "test")


def write_roco(root: str | Path, *, seed: int = 0, images: bool = True) -> Path:
    """Write the replica (9 figures over the three splits) under ``root``; returns ``root``."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    files: dict = {}
    for n, (caption, keywords, article) in enumerate(FIGURES):
        rid, folder = f"ROCO_{20 + 7 * n:05d}", FOLDERS[n % len(FOLDERS)]
        lines = files.setdefault(folder, {k: [] for k in ("captions", "keywords", "cuis",
                                                          "dlinks")})
        lines["captions"].append(f"{rid}\t {caption}")
        lines["keywords"].append("\t".join([rid, "", *keywords]))
        lines["cuis"].append("\t".join([rid, "", *(f"C{int(rng.integers(10**6, 10**7)):07d}"
                                                  for _ in keywords[:3])]))
        if article is not None:
            lines["dlinks"].append(f"{rid}\twget -r ftp://ftp.ncbi.nlm.nih.gov/pub/pmc/"
                                   f"oa_package/1e/ed/PMC{article}.tar.gz -P /path/to/Dir\t"
                                   f"fig-{n + 1}.jpg")
        if images:
            import cv2

            out = root / "data" / folder / "radiology" / "images" / f"{rid}.jpg"
            out.parent.mkdir(parents=True, exist_ok=True)
            cv2.imwrite(str(out), synthetic_cxr(240 + 8 * n, 256, rng=rng, bits=8))
    for folder, kinds in files.items():
        for kind, lines in kinds.items():
            path = root / "data" / folder / "radiology" / f"{kind}.txt"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@register_fake("roco")
def make(root: Path) -> dict:
    """Contract-suite maker: 9 figures of 8 articles (one without a link)."""
    return {"base_image_dir": write_roco(root)}
