"""Study-level fixtures (imported by the study tests): the real ReXGradient test excerpt with fake PNGs, a fake replica."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from radharmony.fake import write_rexgradient
from radharmony.fake.images import synthetic_cxr, write_png

from conftest import shared_file

@pytest.fixture(scope="session")
def rex_real(tmp_path_factory):
    """``(metadata JSON path, image root, entries)``: the 100 real test studies, each image a
    small fake PNG at its real path."""
    path = shared_file("real", "rexgradient", "test_metadata_excerpt.json")
    entries = json.loads(path.read_text())
    root = tmp_path_factory.mktemp("rex_real")
    rng = np.random.default_rng(0)
    for e in entries.values():
        for p in e["ImagePath"]:
            write_png(root / p.replace("../", "", 1), synthetic_cxr(40, 36, rng=rng))
    return path, root / "deid_png", entries


@pytest.fixture(scope="session")
def rex_fake(tmp_path_factory) -> Path:
    """A small ReXGradient replica (train 30, test 10 studies); returns the download root."""
    root = tmp_path_factory.mktemp("rex_fake")
    write_rexgradient(root, studies={"train": 30, "test": 10}, seed=3, image_size=(64, 56))
    return root
