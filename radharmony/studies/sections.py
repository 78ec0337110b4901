"""A study's report as sections: ``indication``, ``history``, ``comparison``, ``technique``,
``findings``, ``impression`` -- each None when absent, never the text "None".

Where the sections come from, best first (:func:`report_sections`):

1. ``"source"``: the source's own fields. A table column ``section_<name>`` (CheXpert-Plus's
   ``section_history``, ``section_comparison``, ``section_technique``, ``section_findings``,
   ``section_impression``, and its ``section_clinical_history`` read as the history;
   CT-RATE's ``section_clinical_information`` read as the indication: :data:`SECTION_ALIASES`), and a report that radharmony joined from
   the source's fields with :func:`radharmony.reports.format.format_report` (ReXGradient's
   four fields, OpenI's ``AbstractText`` elements), which :func:`split_formatted` splits back
   exactly (the split is accepted only when joining it again gives the same text).
2. ``"parser"``: any other report is cut at its headers by the labeler's section parser
   (:func:`radharmony.reports.sections.section_spans`: headers at the start of a line, any
   case, ``INDICATION:``, ``CLINICAL HISTORY:``, ``FINDINGS:``, ...), with the MIMIC-CXR
   project's rule that the **last** section of a name wins (its ``create_section_files.py``).
3. ``"none"``: a report with no header at all has no sections (its text stays in ``report``);
   the study dataset counts such reports in one warning.
"""

from __future__ import annotations

import re

from ..reports.format import SECTIONS, join_sections, section_text
from ..reports.sections import section_spans

#: the section keys of every study sample, in report order
SECTION_KEYS = ("indication", "history", "comparison", "technique", "findings", "impression")
#: a source's section column names (``section_<name>``) that hold a study key under another
#: name (as the parser reads a ``CLINICAL HISTORY:`` header as the history)
SECTION_ALIASES = {"clinical_history": "history", "clinical_information": "indication"}
#: the sections radharmony's report formatter writes, in its order
FORMATTED = tuple(head.lower() for head, _ in SECTIONS)
_STARTS = tuple(f"{h}:\n" for h, _ in SECTIONS)
_FORMATTED_RX = re.compile(r"(?:\A|\n\n)(" + "|".join(h for h, _ in SECTIONS) + r"):\n")


def empty_sections() -> dict:
    """Every section key, None."""
    return dict.fromkeys(SECTION_KEYS)


def split_formatted(report: str | None) -> dict | None:
    """The sections of a report joined by :func:`~radharmony.reports.format.format_report`
    (``"INDICATION:\\n...\\n\\nFINDINGS:\\n..."``), or None when ``report`` is not exactly such
    a join.

    >>> split_formatted("COMPARISON:\\nNone available\\n\\nFINDINGS:\\nClear.")["findings"]
    'Clear.'
    >>> split_formatted("FINDINGS: Clear.") is None
    True
    """
    if not isinstance(report, str) or not report.startswith(_STARTS):
        return None
    heads = list(_FORMATTED_RX.finditer(report))
    names = [m.group(1).lower() for m in heads]
    order = [FORMATTED.index(n) for n in names]
    if not heads or heads[0].start() != 0 or order != sorted(set(order)):
        return None
    out = empty_sections()
    for m, nxt in zip(heads, heads[1:] + [None]):
        out[m.group(1).lower()] = report[m.end():nxt.start() if nxt else len(report)]
    if join_sections(*(out[n] for n in FORMATTED)) != report:
        return None
    return out


def parse_sections(report: str | None) -> dict | None:
    """A free-text report's sections by its headers, the last section of a name winning
    (MIMIC-CXR's rule); None when the report has no header (or no text).

    ``examination``, ``preamble`` and ``other`` sections (wet read, addendum, notes) are not
    study keys and are left in ``report`` only.

    >>> s = parse_sections("FINAL REPORT\\nINDICATION: Cough.\\n\\nFINDINGS: Old.\\n"
    ...                    "Findings: Clear lungs.\\n impression: Normal.")
    >>> s["indication"], s["findings"], s["impression"], s["comparison"]
    ('Cough.', 'Clear lungs.', 'Normal.', None)
    >>> parse_sections("No acute disease.") is None
    True
    """
    if not isinstance(report, str) or not report.strip():
        return None
    spans = section_spans(report)
    if len(spans) == 1 and spans[0][0] == "findings" and not report[:spans[0][1]].strip():
        return None  # headerless: the parser reads it as findings, a study has no sections
    out = empty_sections()
    for name, start, end in spans:
        if name in out:
            out[name] = section_text(report[start:end])  # the last of a name wins
    return out


def report_sections(report, columns: dict | None = None) -> tuple[dict, str]:
    """``(sections, source)`` of one study: ``columns`` (section name -> the source's own
    field, from the table's ``section_<name>`` columns; two columns of one key -- an alias --
    give the later one's text when it has any) first, then the report split as formatted or
    parsed; ``source`` is ``"source"``, ``"parser"`` or ``"none"``."""
    own: dict = {}
    for name, value in (columns or {}).items():
        key, text = SECTION_ALIASES.get(name, name), section_text(value)
        if key in SECTION_KEYS and (text is not None or key not in own):
            own[key] = text
    formatted = split_formatted(report)
    parsed = formatted if formatted is not None else parse_sections(report)
    if own or formatted is not None:  # the source's own fields win over the parser
        base = parsed or empty_sections()
        base.update(own)
        return base, "source"
    if parsed is None:
        return empty_sections(), "none"
    return parsed, "parser"
