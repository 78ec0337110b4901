"""Whole studies: multi-view samples with report sections and priors, ReXrank references.

``XDataset(root, level="study", max_images=K, view_order=("PA", "AP", "LATERAL", "LL"),
prior=False)`` -> :class:`StudyDataset`. See ``docs/study_level.md``.
"""

from .dataset import PRIOR_KEYS, SAMPLE_KEYS, StudyDataset
from .index import VIEW_ORDER
from .sections import SECTION_KEYS, parse_sections, report_sections, split_formatted

__all__ = ["PRIOR_KEYS", "SAMPLE_KEYS", "SECTION_KEYS", "StudyDataset", "VIEW_ORDER",
           "parse_sections", "report_sections", "split_formatted"]
