"""radharmony: public chest X-ray datasets as one harmonized table and ready PyTorch datasets."""

from .version import __version__
from .data.collate import collate, pad_boxes
from .combine import MergedDataset, merge
from . import audit  # a callable package: radharmony.audit(ds_or_merge)
from .data.loader import CachedLoader
from .errors import RadHarmonyError
from .registry import (families, get_dataset_class, get_harmonizer_class, list_datasets,
                       load_harmonizer, register_dataset, resolve_dataset)

__all__ = ["__version__", "CachedLoader", "MergedDataset", "audit", "collate", "merge",
           "pad_boxes",
           "RadHarmonyError", "families",
           "get_dataset_class", "get_harmonizer_class", "list_datasets", "load_harmonizer",
           "register_dataset", "resolve_dataset"]
