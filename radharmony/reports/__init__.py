"""Offline, rule-based labels from radiology reports (CheXpert-compatible, auditable).

>>> from radharmony.reports import label_reports
>>> label_reports(["FINDINGS:\\nNo change in the small left effusion. No pneumothorax."]
...               )[["Pleural Effusion", "Pneumothorax"]]
   Pleural Effusion  Pneumothorax
0               1.0           0.0

See ``docs/report_labels.md`` for the rules, the aggregation and the validation on OpenI.
"""

from .labeler import EXPLAIN_COLUMNS, ReportInputError, label_reports
from .grading import report_grades
from .rules import LABELER_VERSION, Rule, RuleError, Rules, builtin_rules, load_rules
from .sections import section_spans, split_sections
from .findings import FINDINGS, columns

__all__ = ["label_reports", "report_grades", "split_sections", "section_spans", "load_rules",
           "builtin_rules", "labeler_key", "Rules", "Rule", "RuleError", "ReportInputError",
           "LABELER_VERSION", "FINDINGS", "EXPLAIN_COLUMNS", "columns"]


def labeler_key(rules=None) -> str:
    """What report labels depend on, for cache keys: ``"report-labels-<version>-<rules
    hash>"`` (``rules`` as :func:`label_reports` takes it).

    >>> labeler_key().startswith("report-labels-" + LABELER_VERSION + "-")
    True
    """
    from .rules import resolve_rules

    return resolve_rules(rules).key
