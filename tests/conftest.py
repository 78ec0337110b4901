"""Shared fixtures: replicas in the real on-disk formats, generated at test time."""

from __future__ import annotations

from pathlib import Path

import pytest

from radharmony.fake import write_rexgradient

#: ../shared beside the repository (real-format samples); absent on users' machines.
SHARED = Path(__file__).resolve().parents[2] / "shared"


def shared_file(*parts: str) -> Path:
    """A file under ../shared, or skip the test cleanly when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.is_file():
        pytest.skip(f"{p} is not available (../shared is absent)")
    return p


@pytest.fixture(scope="session")
def rex_root(tmp_path_factory) -> Path:
    """A ReXGradient-160K replica (metadata + 16-bit PNGs); returns the download root."""
    root = tmp_path_factory.mktemp("ReXGradient-160K")
    write_rexgradient(root, studies={"train": 30, "valid": 10, "test": 10}, seed=1)
    return root


@pytest.fixture(scope="session")
def rex_images(rex_root) -> Path:
    return rex_root / "deid_png"
