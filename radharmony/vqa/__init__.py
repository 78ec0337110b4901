"""Visual question answering on chest X-rays: one sample shape for every VQA dataset (a
question, its answer and options, its images as a study sample), and scoring as the
leaderboards score (:func:`vqa_metrics`). See ``docs/vqa.md``."""

from .dataset import VQADataset, collate_vqa
from .harmonizer import BaseVQAHarmonizer
from .table import answer_format, normalise_options, option_text, vqa_spec

__all__ = ["BaseVQAHarmonizer", "VQADataset", "answer_format", "collate_vqa",
           "normalise_options", "option_text", "vqa_spec", "vqa_metrics"]


def __getattr__(name):  # the metrics import pandas-heavy scoring lazily
    if name == "vqa_metrics":
        from .metrics import vqa_metrics

        return vqa_metrics
    raise AttributeError(name)
