"""Harmonizer classes: ``from radharmony.harmonizer import ReXGradientValidHarmonizer``."""

from .table.harmonizer import BaseHarmonizer
from .datasets import __all__ as _all
from . import datasets as _datasets

globals().update({name: getattr(_datasets, name) for name in _all if name.endswith("Harmonizer")})
__all__ = ["BaseHarmonizer", *[n for n in _all if n.endswith("Harmonizer")]]
