"""One label space across datasets: canonical findings, each dataset's mapping onto them, and
the derivation of canonical labels that never invents a negative.

The vocabulary is data (``findings.tsv`` in this package, see :mod:`.table`); each dataset
module declares ``label_map`` in its spec; :func:`derive_findings` applies the rules.

>>> from radharmony import vocabulary
>>> vocabulary.FINDINGS[:3]
('no_finding', 'atelectasis', 'cardiomegaly')
>>> m = vocabulary.mapping(["rsna_pneumonia"], expand=False)
>>> m[["finding", "relation"]].values.tolist()
[['lung_opacity', 'narrower'], ['pneumonia', 'approximate']]
"""

from __future__ import annotations

from .derive import derive_findings, derive_report
from .kinds import GRADE_LEVELS, SIDES, TARGETS, check_kinds, grade_presence, side_of
from .table import (RELATIONS, VocabularyError, ancestors, check_label_map, descendants,
                    finding_ids, findings, mapping)

#: canonical finding ids, in vocabulary order
FINDINGS: tuple[str, ...] = finding_ids()

__all__ = ["FINDINGS", "GRADE_LEVELS", "RELATIONS", "SIDES", "TARGETS", "VocabularyError",
           "ancestors", "check_kinds", "check_label_map", "derive_findings", "derive_report",
           "descendants", "findings", "grade_presence", "mapping", "side_of"]
