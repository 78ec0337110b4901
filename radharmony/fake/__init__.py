"""Writers of small dataset replicas in the exact on-disk format, for tests and demos.

No real data is shipped or downloaded: every file is generated from a seed. Each dataset
module's fake registers a *maker* under the dataset key: ``maker(root: Path) -> dict`` writes a
replica under ``root`` and returns the constructor keyword arguments (at least
``base_image_dir``) that build that dataset on it. The contract test-suite runs over them all.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from .images import synthetic_cxr, write_png

FAKES: dict[str, Callable[[Path], dict]] = {}


def register_fake(*keys: str):
    """Decorator: register ``maker(root) -> dataset kwargs`` for one or more dataset keys."""
    def deco(fn):
        for k in keys:
            FAKES[k] = fn
        return fn
    return deco


def make_fake(key: str, root: str | Path) -> dict:
    """Write the replica for dataset ``key`` under ``root``; returns the dataset kwargs."""
    _load_all()
    return FAKES[key](Path(root))


def _load_all() -> None:
    from importlib import import_module

    from ..datasets import MODULES

    for name in MODULES:
        import_module(f"{__name__}.{name}")


from .rexgradient import write_rexgradient  # noqa: E402
from .xraydar import write_xraydar  # noqa: E402

__all__ = ["FAKES", "make_fake", "register_fake", "synthetic_cxr", "write_png",
           "write_rexgradient", "write_xraydar"]
