"""radharmony: public chest X-ray datasets as one harmonized table and ready PyTorch datasets.

The names below are imported on first use (PEP 562), so ``import radharmony`` and the
``radharmony`` command's light subcommands (``--help``, ``list``, ``vocab``) load neither torch
nor pandas until something needs them; ``radharmony.merge`` and the others work as before.
"""

from __future__ import annotations

from importlib import import_module

from .version import __version__

#: public name -> the module (relative to this package) that defines it
_HOMES = {
    "CachedLoader": ".data.loader",
    "MergedDataset": ".combine",
    "merge": ".combine",
    "collate": ".data.collate",
    "pad_boxes": ".data.collate",
    "pad_packed": ".data.collate",
    "RadHarmonyError": ".errors",
    "families": ".registry",
    "get_dataset_class": ".registry",
    "get_harmonizer_class": ".registry",
    "list_datasets": ".registry",
    "load_harmonizer": ".registry",
    "register_dataset": ".registry",
    "resolve_dataset": ".registry",
}

__all__ = ["__version__", "CachedLoader", "MergedDataset", "audit", "collate", "merge",
           "pad_boxes", "pad_packed",
           "RadHarmonyError", "families",
           "get_dataset_class", "get_harmonizer_class", "list_datasets", "load_harmonizer",
           "register_dataset", "resolve_dataset"]


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is not None:
        value = getattr(import_module(home, __name__), name)
        globals()[name] = value  # later lookups skip this function
        return value
    if not name.startswith("__"):
        try:  # a subpackage not imported yet (radharmony.datasets, radharmony.fake, ...)
            return import_module(f".{name}", __name__)
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
