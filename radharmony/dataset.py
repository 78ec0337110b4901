"""Dataset classes: ``from radharmony.dataset import ReXGradientTrainDataset``."""

from .data.dataset import BaseRadiologicalDataset
from .datasets import __all__ as _all
from . import datasets as _datasets

globals().update({name: getattr(_datasets, name) for name in _all if name.endswith("Dataset")})
__all__ = ["BaseRadiologicalDataset", *[n for n in _all if n.endswith("Dataset")]]
