"""A dataset module's dataset classes, made on first use, so that its harmonizers import without
torch.

A dataset module holds both sides of one dataset: the spec and the harmonizers, which read the
owner's files into a table (pandas), and the dataset classes, which serve that table as tensors
(their base, :class:`~radharmony.data.dataset.BaseRadiologicalDataset`, is a
``torch.utils.data.Dataset``). ``radharmony info`` and ``radharmony harmonize`` need only the
first side, and importing torch takes several times as long as everything they do on a small
dataset. So each module defines its dataset classes inside one function and hands it to
:func:`torch_side`, which makes the module's ``__getattr__``: the first lookup of any dataset class
named in the module's ``__all__`` runs the function once and stores its classes in the module.

Nothing changes for the classes themselves: they are real ``torch.utils.data.Dataset``
subclasses, found (and pickled, and unpickled in a DataLoader worker) under their usual
``radharmony.datasets.<module>.<Name>``; ``from radharmony.datasets.rexgradient import
ReXGradientTrainDataset`` works as before.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable, Iterable

_LOCK = threading.RLock()


def torch_side(module: str, make: Callable[[], Iterable[type]]):
    """The module ``__getattr__`` that makes ``module``'s dataset classes with ``make()`` on
    the first lookup of a name of its ``__all__`` the module does not hold yet."""
    nested = f"{make.__name__}.<locals>."

    def __getattr__(name: str):
        mod = sys.modules[module]
        if not name.startswith("__") and name in getattr(mod, "__all__", ()):
            with _LOCK:
                if not mod.__dict__.get("_made_dataset_classes"):
                    for cls in make():
                        _home(cls, nested)
                        mod.__dict__.setdefault(cls.__name__, cls)
                    mod.__dict__["_made_dataset_classes"] = True
            if name in mod.__dict__:
                return mod.__dict__[name]
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__


def _home(cls: type, nested: str) -> None:
    """Name ``cls`` and its functions as if defined at the module's top level (pickle finds a
    class by ``__module__`` + ``__qualname__``; tracebacks and docs read the same names)."""
    cls.__qualname__ = cls.__qualname__.replace(nested, "", 1)
    for value in vars(cls).values():
        func = getattr(value, "__func__", value)
        if callable(func) and isinstance(getattr(func, "__qualname__", None), str):
            try:
                func.__qualname__ = func.__qualname__.replace(nested, "", 1)
            except (AttributeError, TypeError):
                pass
