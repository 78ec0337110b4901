"""Report text: the four sections of a structured report joined into one ``report`` string.

``format_report(indication, comparison, findings, impression)`` gives
``"INDICATION:\n...\n\nCOMPARISON:\n...\n\nFINDINGS:\n...\n\nIMPRESSION:\n..."``, leaving out
sections that are empty, null, NaN or "None"-like (also "Comparison: None."); every dataset
whose metadata splits the report into sections (ReXGradient, OpenI) uses it.
"""

from __future__ import annotations

import math

#: (heading, metadata field) of each section, in report order
SECTIONS = (("INDICATION", "Indication"), ("COMPARISON", "Comparison"),
            ("FINDINGS", "Findings"), ("IMPRESSION", "Impression"))
#: section texts that mean "no text" (compared lower-cased, after a trailing period)
NONE_LIKE = frozenset({"", "none", "null", "nan", "n/a", "na"})


def section_text(value) -> str | None:
    """A report section's text, or None when it is empty, null, NaN or "None"-like
    (also "Comparison: None.")."""
    if value is None or isinstance(value, float) and math.isnan(value):
        return None
    text = str(value).strip()
    colon = text.find(":", 0, 20)
    bare = text[colon + 1:].strip().rstrip(".").strip() if colon >= 0 else text.rstrip(".").strip()
    # every NONE_LIKE term has at most 4 characters: longer text needs no lower-casing
    return None if len(bare) <= 4 and bare.lower() in NONE_LIKE else text


def format_report(indication, comparison, findings, impression) -> str | None:
    """``"INDICATION:\\n..."`` sections joined by a blank line; None when all are empty."""
    return join_sections(*map(section_text, (indication, comparison, findings, impression)))


def join_sections(*texts: str | None, heads: tuple[str, ...] | None = None) -> str | None:
    """Section texts joined under their headings (``heads``: ``"HEADING:\\n"`` strings, by
    default those of :data:`SECTIONS`), skipping None; None when every text is None."""
    parts = [head + text for head, text in zip(heads or _HEADS, texts) if text is not None]
    return "\n\n".join(parts) if parts else None


_HEADS = tuple(f"{head}:\n" for head, _ in SECTIONS)


def section_texts(values: list) -> list:
    """:func:`section_text` of each value, computed once per distinct string."""
    seen: dict[str, str | None] = {}
    out = []
    for v in values:
        if type(v) is str:
            text = seen.get(v, seen)
            if text is seen:
                text = seen[v] = section_text(v)
            out.append(text)
        else:
            out.append(section_text(v))
    return out
