"""Report sections: which parts of a report the labeler reads.

Understood layouts:

* ReXGradient / OpenI as radharmony formats them: ``"INDICATION:\\n...\\n\\nFINDINGS:\\n..."``;
* MIMIC-CXR report files: a ``FINAL REPORT`` banner, then free headers at the start of a
  line (``EXAMINATION:``, ``INDICATION:``, ``HISTORY:``, ``TECHNIQUE:``, ``COMPARISON:``,
  ``FINDINGS:``, ``IMPRESSION:``, ...), text on the header's line or below it;
* a mapping of section name -> text (OpenI's ``AbstractText`` elements by ``Label``);
* plain text without any header, read as findings.

Only ``findings`` and ``impression`` are labelled. When a report has headers, text before the
first header (the banner) and under any other header is never labelled, so an indication
such as "rule out pneumonia" yields no label.
"""

from __future__ import annotations

import re
from typing import Mapping

#: header spelling (lower case, single spaces) -> section name
HEADERS: dict[str, str] = {
    **dict.fromkeys(("findings", "finding", "findings and impression", "findings/impression"),
                    "findings"),
    **dict.fromkeys(("impression", "impressions", "conclusion", "conclusions", "opinion",
                     "summary"), "impression"),
    **dict.fromkeys(("indication", "indications", "clinical indication", "reason for exam",
                     "reason for examination", "reason for study", "clinical information",
                     "clinical data", "clinical details"), "indication"),
    **dict.fromkeys(("history", "clinical history", "patient history", "medical history"),
                    "history"),
    **dict.fromkeys(("examination", "exam", "type of examination", "procedure", "study"),
                    "examination"),
    **dict.fromkeys(("technique", "techniques", "views"), "technique"),
    **dict.fromkeys(("comparison", "comparisons", "prior", "priors"), "comparison"),
    **dict.fromkeys(("wet read", "notification", "recommendation", "recommendations",
                     "addendum", "note", "notes"), "other"),
}
LABELLED = ("findings", "impression")

_HEADER_RX = re.compile(
    r"^[ \t]*(?P<h>" + "|".join(sorted((re.escape(h).replace(r"\ ", r"[ \t]+")
                                        for h in HEADERS), key=len, reverse=True))
    + r")[ \t]*:", re.IGNORECASE | re.MULTILINE)


def section_spans(text: str) -> list[tuple[str, int, int]]:
    """``(section, start, end)`` character spans of ``text``'s sections, in order.

    Headerless text is one ``findings`` span; with headers, the text before the first one
    is ``preamble``.

    >>> section_spans("INDICATION:\\nrule out pneumonia\\n\\nFINDINGS:\\nNo effusion.")
    [('indication', 12, 30), ('findings', 42, 54)]
    >>> section_spans("No effusion.")
    [('findings', 0, 12)]
    """
    heads = list(_HEADER_RX.finditer(text))
    if not heads:
        return [("findings", *_strip(text, 0, len(text)))] if text.strip() else []
    spans = []
    if text[:heads[0].start()].strip():
        spans.append(("preamble", *_strip(text, 0, heads[0].start())))
    for h, nxt in zip(heads, heads[1:] + [None]):
        start, end = _strip(text, h.end(), nxt.start() if nxt else len(text))
        if end > start:
            name = HEADERS[" ".join(h.group("h").lower().split())]
            spans.append((name, start, end))
    return spans


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def split_sections(report: str | Mapping[str, str | None]) -> dict[str, str]:
    """Section name -> text (repeated sections joined by a newline).

    >>> split_sections("INDICATION:\\nCough\\n\\nFINDINGS:\\nClear lungs.\\n\\n"
    ...                "IMPRESSION:\\nNormal.")
    {'indication': 'Cough', 'findings': 'Clear lungs.', 'impression': 'Normal.'}
    >>> split_sections({"FINDINGS": "Clear lungs.", "INDICATION": None})
    {'findings': 'Clear lungs.'}
    """
    if isinstance(report, Mapping):
        out: dict[str, str] = {}
        for key, value in report.items():
            if isinstance(value, str) and value.strip():
                name = section_name(key)
                out[name] = out[name] + "\n" + value.strip() if name in out else value.strip()
        return out
    out = {}
    for name, start, end in section_spans(report):
        out[name] = out[name] + "\n" + report[start:end] if name in out else report[start:end]
    return out


def section_name(key) -> str:
    """The section a mapping key stands for (``"FINDINGS"`` -> ``"findings"``); unknown keys
    are ``"other"`` (never labelled)."""
    return HEADERS.get(" ".join(str(key).lower().rstrip(":").split()), "other")
