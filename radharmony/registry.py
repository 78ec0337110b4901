"""Dataset registry: key -> (dataset class, harmonizer class)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import RegistryError

if TYPE_CHECKING:  # pragma: no cover
    from .base import BaseHarmonizer, BaseRadiologicalDataset

_DATASETS: dict[str, type["BaseRadiologicalDataset"]] = {}
_HARMONIZERS: dict[str, type["BaseHarmonizer"]] = {}


def register_harmonizer(cls):
    """Class decorator: register a harmonizer under ``cls.spec.key``."""
    _HARMONIZERS[cls.spec.key] = cls
    return cls


def register_dataset(cls):
    """Class decorator: register a dataset class under its harmonizer's key."""
    _DATASETS[cls.harmonizer_class.spec.key] = cls
    return cls


def _load_all() -> None:
    from . import datasets  # noqa: F401  (importing registers every built-in dataset)


def list_datasets() -> list[str]:
    """Sorted registry keys of every dataset radharmony knows."""
    _load_all()
    return sorted(_DATASETS)


def _lookup(table: dict, key: str, kind: str):
    _load_all()
    try:
        return table[key]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(str(key), table, n=3)
        hint = f"did you mean {', '.join(map(repr, close))}?" if close else \
            "call radharmony.list_datasets() for the valid keys"
        raise RegistryError(f"No {kind} registered under key {key!r}",
                            expected=f"one of {sorted(table)}", found=repr(key),
                            fix=hint) from None


def get_dataset_class(key: str) -> type["BaseRadiologicalDataset"]:
    """The dataset class registered under ``key`` (e.g. ``"rexgradient_train"``)."""
    return _lookup(_DATASETS, key, "dataset")


def get_harmonizer_class(key: str) -> type["BaseHarmonizer"]:
    """The harmonizer class registered under ``key``."""
    return _lookup(_HARMONIZERS, key, "harmonizer")
