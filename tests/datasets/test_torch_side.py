"""The two sides of a dataset module (issue 43, item 7): its harmonizers import without torch,
and its dataset classes, made on first use (``radharmony.datasets.torch_side``), are the same
torch ``Dataset`` subclasses as ever, found, pickled and documented under their usual names."""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import radharmony
from radharmony import datasets, registry

REPO = Path(__file__).resolve().parents[2]


def _run(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip().splitlines()[-1]


def test_every_harmonizer_and_family_without_torch():
    code = ("import sys\nimport radharmony\n"
            "keys = radharmony.list_datasets()\n"
            "hs = [radharmony.get_harmonizer_class(k) for k in keys]\n"
            "assert all(h.spec.key == k for h, k in zip(hs, keys))\n"
            "assert radharmony.families()\n"
            "import radharmony.harmonizer, radharmony.datasets.rexvqa\n"
            "print(len(keys), 'torch' in sys.modules)")
    assert _run(code) == f"{len(radharmony.list_datasets())} False"


def test_a_dataset_lookup_makes_the_torch_side():
    code = ("import sys\nfrom radharmony.datasets.rexgradient import ReXGradientTrainDataset\n"
            "print('torch' in sys.modules)")
    assert _run(code) == "True"


@pytest.mark.parametrize("key", radharmony.list_datasets())
def test_dataset_classes_are_torch_datasets_at_their_usual_names(key):
    cls = registry.get_dataset_class(key)
    assert issubclass(cls, torch.utils.data.Dataset)
    assert cls.harmonizer_class is registry.get_harmonizer_class(key)
    module = importlib.import_module(cls.__module__)
    assert cls.__qualname__ == cls.__name__  # not "_dataset_classes.<locals>.X"
    assert getattr(module, cls.__name__) is cls is getattr(datasets, cls.__name__)
    assert pickle.loads(pickle.dumps(cls)) is cls
    for name, value in vars(cls).items():
        if callable(value) and hasattr(value, "__qualname__"):
            assert "<locals>" not in value.__qualname__, name


def test_the_module_getattr_refuses_other_names():
    from radharmony.datasets import rexgradient

    with pytest.raises(AttributeError, match="no attribute 'NotADataset'"):
        rexgradient.NotADataset  # noqa: B018
    with pytest.raises(ImportError):
        from radharmony.datasets.rexgradient import NotADataset  # noqa: F401


def test_the_catalog_names_the_same_classes_as_before():
    """``datasets.CATALOG`` (the old eager table) still answers, from the made classes."""
    table = datasets.CATALOG
    assert set(table) == set(datasets.HARMONIZERS) == set(radharmony.list_datasets())
    assert all(table[k].harmonizer_class is datasets.HARMONIZERS[k] for k in table)
