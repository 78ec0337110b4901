"""Whole studies: multi-view samples with report sections and priors, ReXrank references.

``XDataset(root, level="study", max_images=K, view_order=("PA", "AP", "LATERAL", "LL"),
prior=False)`` -> :class:`radharmony.data.studies.StudyDataset` (which builds on this
package: the study index, sections, priors). See ``docs/study_level.md``.
"""

from .index import VIEW_ORDER
from .references import (TRACKS, rexrank_context, rexrank_references, rexrank_report,
                         study_sections)
from .sections import SECTION_KEYS, parse_sections, report_sections, split_formatted

__all__ = ["SECTION_KEYS", "TRACKS", "VIEW_ORDER", "rexrank_context", "rexrank_references",
           "rexrank_report", "study_sections",
           "parse_sections", "report_sections", "split_formatted"]
