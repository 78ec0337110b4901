"""A VinDr-RibCXR replica in the authors' format.

Layout (the authors' training code's ``data/`` folder)::

    <root>/data/train/train_mask.json   pandas columns-oriented JSON: {"img": {"0": path},
    <root>/data/val/val_mask.json        "R1": {"0": [{"x": .., "y": ..}, ...] | "None"}, ...}
    <root>/data/train/img/VinDr_RibCXR_train_000.png ...   8-bit PNGs

Quirks reproduced: one column per rib, each an ``{index: value}`` object keyed by text
indices; float ``x``/``y`` points; a rib not drawn written as the text ``"None"``; ``img`` a
path relative to the code's folder (``data/train/img/...``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..datasets.vindr_ribcxr import FILES, RIBS
from . import register_fake
from .images import synthetic_cxr, write_png

HEIGHT, WIDTH = 640, 512


def _rib(k: int, rng: np.random.Generator) -> list[dict]:
    """Rib ``k`` (0-19) as a thin curved band: right ribs left of centre, top down."""
    side, level = (-1 if k < 10 else 1), k % 10
    y = 90 + 45 * level + float(rng.uniform(-4, 4))
    xs = np.linspace(WIDTH / 2 + side * 30, WIDTH / 2 + side * 220, 6)
    top = [{"x": float(x), "y": float(y + 0.08 * abs(x - WIDTH / 2))} for x in xs]
    bottom = [{"x": p["x"], "y": p["y"] + 14.0} for p in reversed(top)]
    return top + bottom


def write_vindr_ribcxr(root: str | Path, *, n_train: int = 4, n_val: int = 2, seed: int = 0,
                       images: bool = True) -> Path:
    """Write the replica under ``root`` and return ``root``. Train image 1 lacks L10 and R10
    (``"None"``); every image has the other ribs."""
    root = Path(root)
    rng = np.random.default_rng(seed)
    for split, n in (("train", n_train), ("val", n_val)):
        table = {"img": {}, **{r: {} for r in RIBS}}
        for i in range(n):
            rel = f"data/{split}/img/VinDr_RibCXR_{split}_{i:03d}.png"
            table["img"][str(i)] = rel
            for k, rib in enumerate(RIBS):
                drawn = not (split == "train" and i == 1 and rib in ("R10", "L10"))
                table[rib][str(i)] = _rib(k, rng) if drawn else "None"
            if images:
                write_png(root / rel, synthetic_cxr(HEIGHT, WIDTH, rng=rng, bits=8))
        path = root / "data" / split / FILES[split]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(table))
    return root


@register_fake("vindr_ribcxr")
def make(root: Path) -> dict:
    """Contract-suite maker: 4 train and 2 val PNGs; the tables sit below the image root."""
    return {"base_image_dir": write_vindr_ribcxr(root)}
