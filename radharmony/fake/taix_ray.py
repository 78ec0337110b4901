"""A TAIX-Ray replica in the real on-disk format (the Hugging Face release).

Layout::

    <root>/README.md                                   the dataset card (configs: default, original)
    <root>/data/{train,val,test}-00000-of-00001.parquet     512 px configuration
    <root>/original/{train,val,test}-00000-of-00001.parquet  original resolution

Each shard: the card's columns in its order, ``Age`` in days (int64), the eight grades int64
0-4, ``Image`` a struct ``{bytes: binary, path: string}`` holding an encoded PNG (``path``
null). Quirks reproduced: 64-hex ids (SHA-256 text), a patient with two images, a
questionable grade on one side only, a finding graded on both sides, the split ``val`` (not
``valid``). With ``extract=True`` (the maker) the images are then written out by
:func:`radharmony.datasets.taix_ray.extract_images`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import cv2
import numpy as np

from . import register_fake
from .images import synthetic_cxr

#: (split, patient, grades of the eight findings in the card's order)
ROWS = (
    ("train", 0, (2, 1, 3, 0, 0, 0, 2, 2)),  # right effusion moderate; atelectasis both
    ("train", 0, (2, 2, 0, 1, 0, 3, 0, 0)),  # left effusion questionable; left opacity
    ("train", 1, (0, 0, 0, 0, 0, 0, 0, 0)),  # nothing
    ("val", 2, (4, 3, 2, 2, 1, 0, 0, 1)),    # severe heart; both effusions; right opacity ?
    ("test", 3, (1, 0, 0, 4, 0, 0, 2, 0)),   # questionable heart; severe left effusion
    ("test", 3, (3, 1, 0, 0, 0, 0, 0, 0)),
)
GRADE_COLUMNS = ("HeartSize", "PulmonaryCongestion", "PleuralEffusion_Right",
                 "PleuralEffusion_Left", "PulmonaryOpacities_Right", "PulmonaryOpacities_Left",
                 "Atelectasis_Right", "Atelectasis_Left")
CARD = """---
license: cc-by-nc-4.0
configs:
  - config_name: default
    data_files:
      - split: train
        path: data/train-*
      - split: test
        path: data/test-*
      - split: val
        path: data/val-*
  - config_name: original
    data_files:
      - split: train
        path: original/train-*
      - split: test
        path: original/test-*
      - split: val
        path: original/val-*
---
# TAIX-Ray Dataset (replica)
"""


def _hex(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def write_taix_ray(root: str | Path, *, seed: int = 0, extract: bool = True,
                   sizes: dict | None = None) -> Path:
    """Write the replica under ``root`` (both configurations); returns ``root``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "README.md").write_text(CARD)
    sizes = sizes or {"data": 96, "original": 144}
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    for config, side in sizes.items():
        rng = np.random.default_rng(seed)
        for split in ("train", "val", "test"):
            rows = [(i, r) for i, r in enumerate(ROWS) if r[0] == split]
            cols: dict[str, list] = {c: [] for c in ("UID", "Fold", "Split", "PatientID",
                                                     "PhysicianID", "StudyDate", "Age", "Sex",
                                                     *GRADE_COLUMNS, "Image")}
            for i, (_, patient, grades) in rows:
                ok, png = cv2.imencode(".png", synthetic_cxr(side, int(side * 0.9), rng=rng,
                                                             bits=8))
                cols["UID"].append(_hex(f"image{i}"))
                cols["Fold"].append(0)
                cols["Split"].append(split)
                cols["PatientID"].append(_hex(f"patient{patient}"))
                cols["PhysicianID"].append(_hex(f"physician{i % 2}"))
                cols["StudyDate"].append(f"2013-05-{10 + i:02d}")
                cols["Age"].append(20_000 + 365 * patient + i)
                cols["Sex"].append("M" if patient % 2 == 0 else "F")
                for c, g in zip(GRADE_COLUMNS, grades):
                    cols[c].append(g)
                cols["Image"].append({"bytes": png.tobytes(), "path": None})
            types = {c: pa.int64() for c in ("Fold", "Age", *GRADE_COLUMNS)}
            table = pa.table({c: pa.array(v, type=image_type if c == "Image" else
                                          types.get(c, pa.string())) for c, v in cols.items()})
            path = root / config / f"{split}-00000-of-00001.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, path)
    if extract:
        from ..datasets.taix_ray import extract_images

        for config in sizes:
            extract_images(root, config=config, progress=False)
    return root


@register_fake("taix_ray", "taix_ray_original")
def make(root: Path) -> dict:
    """Contract-suite maker: 6 images of 4 patients in both configurations, extracted."""
    return {"base_image_dir": write_taix_ray(root)}


#: how the fake reports name each finding (two-sided ones take a side word)
REPORT_NAMES = {"HeartSize": ("cardiomegaly", "enlarged cardiac silhouette"),
                "PulmonaryCongestion": ("pulmonary congestion", "pulmonary venous congestion"),
                "PleuralEffusion": ("pleural effusion", "effusion"),
                "PulmonaryOpacities": ("airspace opacity", "opacity"),
                "Atelectasis": ("atelectasis", "atelectasis")}
SEVERITY_WORDS = {2: ("mild", "small", "minimal"), 3: ("moderate",),
                  4: ("severe", "large", "extensive")}
#: the heart and the congestion are not "small" or "large"
WHOLE_WORDS = {2: ("mild",), 3: ("moderate",), 4: ("severe", "marked")}


def taix_style_reports(n: int, *, seed: int = 0):
    """``(texts, grades)``: ``n`` short structured reports written from random TAIX-Ray grades
    (the eight findings 0-4, zeros most often), one sentence per finding in the template's
    order ("Moderate right and small left pleural effusions.", "Questionable left
    atelectasis.", "No pulmonary congestion."), and the grades as a DataFrame of the card's
    eight columns: what :func:`radharmony.reports.report_grades` should read back."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    grades = rng.choice(5, size=(n, len(GRADE_COLUMNS)), p=(0.45, 0.1, 0.2, 0.15, 0.1))
    texts = []
    for row in grades:
        g = dict(zip(GRADE_COLUMNS, row.tolist()))
        parts = []
        for label, names in REPORT_NAMES.items():
            name = names[int(rng.integers(2))]
            if label in g:
                parts.append(_sentence(rng, name, {"": g[label]}, WHOLE_WORDS))
            else:
                parts.append(_sentence(rng, name, {"right": g[f"{label}_Right"],
                                                   "left": g[f"{label}_Left"]}))
        texts.append("FINDINGS: " + " ".join(parts))
    return texts, pd.DataFrame(grades, columns=list(GRADE_COLUMNS))


def _sentence(rng, name: str, by_side: dict, severity: dict = SEVERITY_WORDS) -> str:
    """One finding's sentence in one of the template's phrasings: before the name ("Small
    left effusion."), after it ("Pleural effusion on the right, moderate."), bilateral
    ("Bilateral small effusions."), hedged ("Questionable left atelectasis.", "Right
    atelectasis cannot be excluded.")."""
    worst = max(by_side.values())
    if worst == 0:
        return f"No {name}." if rng.random() < 0.7 else f"No evidence of {name}."
    form = rng.random()
    if worst == 1:
        where = " ".join(s for s, v in by_side.items() if v == 1 and s)
        if form < 0.5:
            return f"Questionable {where + ' ' if where else ''}{name}."
        return f"{(where + ' ' + name) if where else name} cannot be excluded.".capitalize()
    words = {s: severity[v][int(rng.integers(len(severity[v])))]
             for s, v in by_side.items() if v >= 2}
    sides = list(words)
    if len(sides) == 2:
        if words["right"] == words["left"] and form < 0.5:
            return f"Bilateral {words['right']} {name}."
        return f"{words['right'].capitalize()} right and {words['left']} left {name}."
    side = sides[0]
    if side and form < 0.3:
        return f"{name.capitalize()} on the {side}, {words[side]}."
    return f"{words[side].capitalize()} {side + ' ' if side else ''}{name}."
