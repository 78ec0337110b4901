"""The dataset registry: key -> dataset class and harmonizer class.

Built-in datasets come from the catalog in :mod:`radharmony.datasets`; users add their own with
:func:`register_dataset`. Nothing below this module imports it.

Looking up a harmonizer (:func:`get_harmonizer_class`, :func:`families`,
:func:`load_harmonizer`, ``radharmony info`` / ``harmonize``) imports no torch: the built-in
harmonizers are the table side of their dataset modules, whose dataset classes are made on first
use (:mod:`radharmony.datasets.torch_side`). Looking up a dataset class makes them.
"""

from __future__ import annotations

import difflib
import os
from typing import TYPE_CHECKING

from . import datasets as _builtin
from .errors import RegistryError
from .table.harmonizer import BaseHarmonizer
from .table.store import load_table

if TYPE_CHECKING:
    from .data.dataset import BaseRadiologicalDataset

_USER: dict[str, type[BaseRadiologicalDataset]] = {}


def _catalog() -> dict[str, type[BaseRadiologicalDataset]]:
    """Key -> dataset class, built-in and registered (makes the built-in dataset classes)."""
    return {**_builtin.dataset_classes(), **_USER}


def _harmonizers() -> dict[str, type[BaseHarmonizer]]:
    """Key -> harmonizer class, built-in and registered (imports no torch)."""
    return {**_builtin.HARMONIZERS, **{k: cls.harmonizer_class for k, cls in _USER.items()}}


def register_dataset(cls_or_key=None, /):
    """Register a dataset class (with a ``harmonizer_class`` whose spec has a new ``key``) so
    that the CLI, the viewer and :func:`get_dataset_class` find it. Three forms:

    * ``register_dataset(MyDataset)`` (or ``@register_dataset`` above the class);
    * ``@register_dataset("my_key")`` above the class (the reference library's form): the key
      must be the harmonizer spec's ``key``, which the sample ids carry;
    * either form on a harmonizer class: a plain dataset class is made for it and registered
      (the harmonizer class is returned unchanged).

    ``register_dataset()`` with no argument is a decorator too.
    """
    if cls_or_key is None or isinstance(cls_or_key, str):
        return _register_as(cls_or_key)
    return _register_as(None)(cls_or_key)


def _register_as(key: str | None):
    def decorate(cls):
        from .data.dataset import BaseRadiologicalDataset

        if isinstance(cls, type) and issubclass(cls, BaseHarmonizer) and \
                getattr(cls, "spec", None) is not None:
            _register(type(f"{cls.__name__}Dataset", (BaseRadiologicalDataset,),
                           {"harmonizer_class": cls, "__module__": cls.__module__}), key)
            return cls
        return _register(cls, key)

    return decorate


def _register(cls, key: str | None) -> type[BaseRadiologicalDataset]:
    from .data.dataset import BaseRadiologicalDataset

    h = getattr(cls, "harmonizer_class", None)
    if not (isinstance(cls, type) and issubclass(cls, BaseRadiologicalDataset) and
            isinstance(h, type) and issubclass(h, BaseHarmonizer)):
        raise RegistryError("register_dataset needs a dataset class with a harmonizer",
                            expected="a BaseRadiologicalDataset subclass whose harmonizer_class "
                            "is a BaseHarmonizer subclass with a spec", found=repr(cls),
                            fix="set harmonizer_class on the dataset class")
    if key is not None and key != h.spec.key:
        raise RegistryError(f"register_dataset({key!r}) on {cls.__name__}, whose harmonizer's "
                            f"spec has key {h.spec.key!r}",
                            expected="the key of the harmonizer's spec (its sample ids carry it)",
                            found=repr(key), fix=f"use @register_dataset({h.spec.key!r}), or "
                            f"give the spec key={key!r}")
    key = h.spec.key
    if key in _builtin.HARMONIZERS and _builtin.dataset_classes()[key] is not cls:
        raise RegistryError(f"Dataset key {key!r} is a built-in dataset's",
                            expected="a new key", found=repr(key),
                            fix="give the harmonizer's spec another key")
    _USER[key] = cls
    return cls


def list_datasets() -> list[str]:
    """Sorted registry keys of every dataset radharmony knows."""
    return sorted(_harmonizers())


def families() -> dict[str, list[str]]:
    """Dataset family (the dataset module's name, e.g. ``rexgradient``) -> its keys."""
    out: dict[str, list[str]] = {}
    for key in list_datasets():
        module = get_harmonizer_class(key).__module__.rsplit(".", 1)[-1]
        out.setdefault(module, []).append(key)
    return out


def _lookup(key: str, kind: str):
    """The dataset class (``kind="dataset"``) or harmonizer class under ``key``."""
    table = _catalog() if kind == "dataset" else _harmonizers()
    if isinstance(key, str) and key in table:
        return table[key]
    fams = families()
    if isinstance(key, str) and key in fams:
        raise RegistryError(f"{key!r} is a dataset family, not one {kind}",
                            expected=f"one of its splits {fams[key]}", found=repr(key),
                            fix=f"pass one of {fams[key]}, or radharmony.resolve_dataset"
                                f"({key!r}, split={fams[key][0].rsplit('_', 1)[-1]!r})")
    close = difflib.get_close_matches(str(key), [*table, *fams], n=3)
    guess = f": did you mean {' or '.join(map(repr, close))}?" if close else ""
    raise RegistryError(f"No {kind} registered under key {key!r}{guess}",
                        expected=f"one of the {len(table)} keys radharmony.list_datasets() "
                        f"returns ({', '.join(sorted(table)[:4])}, ...)", found=repr(key),
                        fix=f"use {close[0]!r}" if close else
                        "run `radharmony list` for every key, its title and access terms")


def resolve_dataset(name, *, split: str | None = None) -> type[BaseRadiologicalDataset]:
    """The dataset class ``name`` stands for: a key (``"rexgradient_valid"``), a family with
    ``split`` (``"rexgradient", split="valid"``) or with a single split, a dataset or
    harmonizer class, or a class name (``"ReXGradientValidDataset"``).

    >>> resolve_dataset("rexgradient", split="valid").__name__
    'ReXGradientValidDataset'
    """
    table = _catalog()
    if isinstance(name, type):
        for cls in table.values():
            if name is cls or name is cls.harmonizer_class:
                return cls
        from .data.dataset import BaseRadiologicalDataset

        if issubclass(name, BaseRadiologicalDataset):
            return name
    if isinstance(name, str):
        fams = families()
        if name in fams and (split is not None or len(fams[name]) == 1):
            key = fams[name][0] if split is None else f"{name}_{split}"
            if key not in fams[name]:
                raise RegistryError(f"Dataset family {name!r} has no split {split!r}",
                                    expected=f"one of {[k[len(name) + 1:] for k in fams[name]]}",
                                    found=repr(split), fix="pass one of those as split=")
            return table[key]
        for cls in table.values():
            if name in (cls.__name__, cls.harmonizer_class.__name__):
                return cls
    return _lookup(name, "dataset")


def get_dataset_class(key: str) -> type[BaseRadiologicalDataset]:
    """The dataset class registered under ``key`` (e.g. ``"rexgradient_train"``)."""
    return _lookup(key, "dataset")


def get_harmonizer_class(key: str) -> type[BaseHarmonizer]:
    """The harmonizer class registered under ``key``."""
    return _lookup(key, "harmonizer")


def load_harmonizer(path: str | os.PathLike) -> BaseHarmonizer:
    """A harmonizer saved by ``harmonizer.save(path)``, of whichever dataset it belongs to
    (the class is chosen from the registry by the key in the file; no code is executed)."""
    header, df = load_table(path)
    return get_harmonizer_class(header.get("key"))._from_saved(path, header, df)
