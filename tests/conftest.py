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


# -- the property tests' hypothesis profile (tests/property/): derandomized, so each run draws
# the same examples and CI is deterministic, with modest example counts;
# RADHARMONY_PROPERTY_EXAMPLES=2000 draws that many random examples per test instead, to hunt
# for new bugs.
from hypothesis import HealthCheck, settings  # noqa: E402
import os  # noqa: E402

_HUNT = os.environ.get("RADHARMONY_PROPERTY_EXAMPLES")
settings.register_profile(
    "radharmony-property", derandomize=_HUNT is None, database=None, deadline=None,
    max_examples=int(_HUNT or 100), print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large])
