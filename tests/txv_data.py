"""Locate the real metadata tables shipped in the torchxrayvision wheel (without importing it:
its import pulls in torchvision). Tests using them skip cleanly when the wheel is absent."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


def txv_file(name: str) -> Path:
    """``torchxrayvision/data/<name>``, or skip the calling test."""
    spec = importlib.util.find_spec("torchxrayvision")
    locations = list(spec.submodule_search_locations or []) if spec else []
    for loc in locations:
        path = Path(loc) / "data" / name
        if path.is_file():
            return path
    pytest.skip(f"torchxrayvision's {name} is not installed (pip install --no-deps "
                f"torchxrayvision==1.5.7)")
