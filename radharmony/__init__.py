"""radharmony: public chest X-ray datasets as one harmonized table and ready PyTorch datasets."""

__version__ = "0.1.0"

from .collate import collate  # noqa: E402
from .errors import RadHarmonyError  # noqa: E402
from .registry import get_dataset_class, get_harmonizer_class, list_datasets  # noqa: E402

__all__ = ["__version__", "collate", "RadHarmonyError", "get_dataset_class",
           "get_harmonizer_class", "list_datasets"]
