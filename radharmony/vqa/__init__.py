"""Visual question answering on chest X-rays: one sample shape for every VQA dataset (a
question, its answer and options, its images as a study sample), and scoring as the
leaderboards score (:func:`vqa_metrics`). See ``docs/vqa.md``."""

from .harmonizer import BaseVQAHarmonizer
from .table import answer_format, normalise_options, option_text, vqa_spec

__all__ = ["BaseVQAHarmonizer", "VQADataset", "answer_format", "collate_vqa",
           "normalise_options", "option_text", "vqa_spec", "vqa_metrics"]

#: imported on first use: the dataset side imports torch, the metrics pandas-heavy scoring (the
#: VQA harmonizers import this package and stay torch-free)
_LAZY = {"VQADataset": ".dataset", "collate_vqa": ".dataset", "vqa_metrics": ".metrics"}


def __getattr__(name):
    if name in _LAZY:
        from importlib import import_module

        value = globals()[name] = getattr(import_module(_LAZY[name], __name__), name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
