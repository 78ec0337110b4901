"""LLaVA-Rad (microsoft/LLaVA-Rad) entries: the LLaVA-1.5 entry (``image`` one string, the key
frontal image) plus the keys its loaders read:

* ``view``: the key image's view (``PA``, ``AP``, ...): its MIMIC loaders keep ``AP``/``PA``
  and fail on an entry without the key;
* ``reason``: the indication (its indication-conditioned prompt), or null;
* ``generate_method``: ``"rule-based"`` (radharmony's reports are split by rules, not a
  language model; LLaVA-Rad's test loader keeps these);
* ``impression``, ``indication``, ``history``, ``orientation`` (text or null) and
  ``chexpert_labels``: the 14 CheXpert names -> 1, 0, -1, or null where the record's labels
  do not say (a record's ``labels`` are matched by name, case and ``_`` / space aside, so
  ``pleural_effusion`` and ``Pleural Effusion`` are the same finding).

The sections are the study's (report records carry them in ``fields``: the indication even
when the prompt does not show it; the impression is the target's when the target is the
impression). Text-only records are skipped (``"text-only"``: LLaVA-Rad's loaders need an
image and a view), and so are records with a prior study's images (one image per entry).
"""

from __future__ import annotations

from ...evaluate.reports import CHEXPERT_14
from ..images import key_frontal
from .common import Export
from .inputs import fields, section, text_or_none
from .llava import COLUMNS as LLAVA_COLUMNS
from .llava import llava_entry

COLUMNS = [*LLAVA_COLUMNS, "fields"]
TEXT_ONLY = "text-only"
_NAMES = {n.lower(): n for n in CHEXPERT_14}


def chexpert_labels(labels) -> dict:
    """The 14 CheXpert names -> 1, 0, -1 or None, from a record's ``labels`` dict."""
    out = dict.fromkeys(CHEXPERT_14)
    for name, value in (labels or {}).items():
        key = _NAMES.get(str(name).replace("_", " ").strip().lower())
        if key is not None and value in (1, 0, -1):
            out[key] = int(value)
    return out


def entry(rec: dict, ex: Export) -> dict | None:
    if not rec["image_paths"]:
        ex.skip(TEXT_ONLY)
        return None
    base = llava_entry(rec, ex)
    if base is None:
        return None
    f = fields(rec)
    indication = section(rec, "indication")
    base.update(view=rec["views"][key_frontal(rec["views"])], reason=indication,
                generate_method="rule-based", impression=section(rec, "impression"),
                indication=indication, history=section(rec, "history"),
                orientation=text_or_none(f.get("orientation")),
                chexpert_labels=chexpert_labels(f.get("labels")))
    return base
