"""An RSNA Pediatric Bone Age replica in the real on-disk format.

Layout (the Kaggle mirror, plus the challenge's validation set)::

    <root>/boneage-training-dataset.csv              "id,boneage,male" (True / False)
    <root>/boneage-training-dataset/boneage-training-dataset/<id>.png
    <root>/boneage-test-dataset.csv                  "Case ID,Sex" (M / F), no bone age
    <root>/boneage-test-dataset/boneage-test-dataset/<id>.png
    <root>/boneage-validation-dataset/Validation Dataset.csv
                                                     "Image ID,male,Bone Age (months)"
    <root>/boneage-validation-dataset/boneage-validation-dataset-1/<id>.png

Quirks reproduced: three headers that name the same things differently; the sex as
``True``/``False`` in two tables and ``M``/``F`` in the third; the folder nested in a folder
of the same name; 8-bit PNGs of different sizes, portrait.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import register_fake
from .images import synthetic_cxr, write_png
from .tables import write_csv

TRAIN = "boneage-training-dataset"
TEST = "boneage-test-dataset"
VALID = "boneage-validation-dataset"


def write_rsna_bone_age(root: str | Path, *, n_train: int = 5, n_valid: int = 2,
                        n_test: int = 2, seed: int = 0, images: bool = True) -> Path:
    """Write the replica under ``root``; returns ``root`` (the image root). Ids count up
    from 1377 across the splits, the sexes alternate, bone ages are 6-228 months."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    ids = iter(range(1377, 1377 + n_train + n_valid + n_test))

    def image(folder: Path, i: int) -> None:
        if images:
            h = int(rng.integers(96, 160))
            write_png(folder / f"{i}.png", synthetic_cxr(h, int(h * 0.8), rng=rng, bits=8))

    train = []
    for k in range(n_train):
        i = next(ids)
        train.append([i, int(rng.integers(6, 229)), "True" if k % 2 == 0 else "False"])
        image(root / TRAIN / TRAIN, i)
    valid = []
    for k in range(n_valid):
        i = next(ids)
        valid.append([i, "FALSE" if k % 2 == 0 else "TRUE", int(rng.integers(6, 229))])
        image(root / VALID / f"{VALID}-1", i)
    test = []
    for k in range(n_test):
        i = next(ids)
        test.append([i, "M" if k % 2 == 0 else "F"])
        image(root / TEST / TEST, i)
    write_csv(root / f"{TRAIN}.csv", ["id", "boneage", "male"], train)
    write_csv(root / VALID / "Validation Dataset.csv", ["Image ID", "male", "Bone Age (months)"],
              valid)
    write_csv(root / f"{TEST}.csv", ["Case ID", "Sex"], test)
    return root


@register_fake("rsna_bone_age")
def make(root: Path) -> dict:
    """Contract-suite maker: 5 training, 2 validation and 2 test images."""
    return {"base_image_dir": write_rsna_bone_age(root)}
