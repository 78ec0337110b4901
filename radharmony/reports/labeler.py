"""Rule-based labels from radiology reports: :func:`label_reports`.

For each labelled section (findings, impression; see :mod:`radharmony.reports.sections`)
the labeler finds every mention of a finding (``mentions.tsv``), then decides it from the
cues of its sentence (``cues.tsv``):

1. the sentence is cut into clauses at terminators ("but", "however", "which", ";", ...);
   only cues in the mention's clause count;
2. the nearest cue *before* the mention decides: negation -> 0, uncertain -> -1,
   probable ("likely", "X versus Y") -> -1 (1 with ``probable="positive"``),
   pseudo-negation ("no change in") -> 1; an ``ignore`` cue ("limits evaluation for")
   drops the mention (the clause speaks of the examination, not the finding), and so does
   a ``post`` / ``any`` ignore cue anywhere after it in the clause ("evaluation for ... is
   limited"; a ``pre`` one there, "scoliosis limits evaluation of ...", does not);
3. else the nearest cue *after* it: "is not seen" -> 0, "cannot be excluded" -> -1;
4. else the mention is positive (1). A ``normal`` rule ("normal heart size") gives 0, an
   ``uncertain`` rule -1 and a ``probable`` one ("borderline heart size") -1 (or 1),
   whatever the cues. An ``anaphor`` rule ("this nodule") is a mention only once the report
   has stated or hedged the finding.

Aggregation over a report's mentions is CheXpert's: any 1 -> 1, else any -1 -> -1, else any
0 -> 0, else NaN (not mentioned). ``No Finding`` is 1 when no other column except
``Support Devices`` is 1 or -1; otherwise it is NaN under ``vocabulary="chexpert"`` (CheXpert
never writes 0 there) and 0 under ``"canonical"``. A report with no labelled text (empty,
None, indication only) gives an all-NaN row.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from typing import Mapping

import numpy as np
import pandas as pd

from ..errors import RadHarmonyError, check_choice
from .rules import Rules, resolve_rules
from .sections import LABELLED, section_name, section_spans
from .findings import NO_FINDING, NOT_ABNORMAL, VOCABULARIES, columns, feeds
from .grades import LATERAL, mention_kinds, sentence_words

_SENTENCE_END = re.compile(r"(?<!\bvs)[.!?]+(?=\s|$)|\n[ \t]*\n")  # "vs." goes on
_RANK = {1.0: 3, -1.0: 2, 0.0: 1}
_FIXED = {"normal": 0.0, "uncertain": -1.0, "probable": -1.0}  # mention kinds with a value
_CUE_VALUE = {"negation": 0.0, "uncertain": -1.0, "probable": -1.0, "pseudo": 1.0, "ignore": None}
#: ``probable=`` of :func:`label_reports` -> the value of a probable hedge
PROBABLE = {"uncertain": -1.0, "positive": 1.0}
EXPLAIN_COLUMNS = ("row", "label", "value", "section", "sentence", "mention", "cue",
                   "cue_kind", "mention_rule", "cue_rule", "mention_start", "mention_end",
                   "cue_start", "cue_end")


class ReportInputError(RadHarmonyError, TypeError):
    """A value given as a report is neither text, a section mapping, nor missing."""


def _lower(text: str) -> str:
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


class _Labeler:
    """Finding-level results of one text: ``{finding: (value, evidence or None)}``."""

    def __init__(self, rules: Rules, explain: bool, probable: str = "uncertain",
                 kinds: bool = False):
        self.rules, self.explain = rules, explain
        self.fixed = {**_FIXED, "probable": PROBABLE[probable]}
        self.cue_value = {**_CUE_VALUE, "probable": PROBABLE[probable]}
        self.kinds = kinds  # also note each mention's grade and side (radharmony.reports.grades)
        self.notes = None

    def label_text(self, text: str, spans: list[tuple[str, int, int]], out: dict) -> None:
        low = _lower(text)
        mentions = self.rules.mentions
        for section, s, e in spans:
            sentences = None
            cue_cache: dict[int, list] = {}
            word_cache: dict[int, tuple] = {}
            prev_end = prev_start = s
            for ms, me, rule in mentions.finditer(low, s, e):
                # a grade's or side's words reach back to the previous mention, or past it to
                # its own words when only a coordinator stands between ("left infiltrate
                # versus atelectasis")
                last = prev_start if self.kinds and _coordinated(low, prev_end, ms) \
                    else prev_end
                prev_end, prev_start = me, last
                if rule.kind == "exclude" or rule.kind == "anaphor" and not any(
                        out.get(f, (0.0,))[0] != 0.0 for f in rule.findings):
                    continue
                if sentences is None:
                    sentences = [s] + [b.end() for b in _SENTENCE_END.finditer(low, s, e)] + [e]
                k = bisect_right(sentences, ms) - 1
                ss, se = sentences[k], sentences[k + 1]
                cues = None
                if rule.kind in self.fixed:
                    value, cue = self.fixed[rule.kind], None
                else:
                    cues = cue_cache.get(k)
                    if cues is None:
                        cues = cue_cache[k] = self._cues(low, ss, se)
                    value, cue = self._decide(cues, ms, me)
                    if value is None:
                        continue
                if self.kinds:
                    words = word_cache.get(k)
                    if words is None:
                        words = word_cache[k] = sentence_words(low, ss, se)
                    self._note(words, rule, value, max(ss, last), ms, me, se, cues)
                for finding in rule.findings:
                    old = out.get(finding)
                    if old is None or _RANK[value] > _RANK[old[0]]:
                        ev = (text, section, ss, se, ms, me, rule, cue) if self.explain else None
                        out[finding] = (value, ev)

    def _note(self, words: tuple, rule, value: float, start: int, ms: int, me: int, end: int,
              cues) -> None:
        """Note the grade and side of a decided mention in the window ``[start, end)`` cut
        at the clause's terminators (see :mod:`radharmony.reports.grades`)."""
        if not (words[0] or words[1]):  # a sentence without severity or side words
            for finding in rule.findings:
                self.notes.add(finding, value, math.nan, 0)
            return
        for cs, ce, cue_rule in cues or ():
            if cue_rule.kind == "terminator":
                if ce <= ms:
                    start = max(start, ce)
                elif cs >= me:
                    end = min(end, cs)
                    break
        lateral = not LATERAL.isdisjoint(rule.findings)
        grade, bits = mention_kinds(words, start, ms, me, end, lateral=lateral)
        for finding in rule.findings:
            self.notes.add(finding, value, grade, bits if lateral and finding in LATERAL else 0)

    def _cues(self, low: str, ss: int, se: int) -> list:
        return list(self.rules.cues.finditer(low, ss, se))

    def _decide(self, cues: list, ms: int, me: int):
        """The value of the mention at ``[ms, me)`` and the cue that decided it. A cue that
        starts before the mention is "pre" (it may reach over it: "no opacity to suggest"),
        one that starts after it is "post"; cues starting inside the mention are ignored.
        A probable cue does not lift an earlier hedge of its clause: in "question atelectasis
        versus infiltrate" the question decides both."""
        pre = post = hedge = None
        for cue in cues:
            cs, ce, rule = cue
            if cs < ms:
                if rule.kind == "terminator":
                    pre = hedge = None
                elif rule.target != "post":
                    if rule.kind == "probable" and hedge is not None:
                        cue = hedge
                    elif rule.kind == "uncertain":
                        hedge = cue
                    pre = cue
            elif cs >= me:
                if rule.kind == "terminator":
                    break
                if rule.kind == "ignore" and rule.target != "pre":
                    return None, cue
                if post is None and rule.target != "pre":
                    post = cue
        if pre is not None:
            return self.cue_value[pre[2].kind], pre
        if post is not None:
            return self.cue_value[post[2].kind], post
        return 1.0, None


_COORDINATORS = frozenset({"and", "or", "versus", "vs", "vs.", "and/or", "/", ",", "&", ""})


def _coordinated(low: str, prev_end: int, ms: int) -> bool:
    """Whether only a coordinator (or nothing) stands between two mentions."""
    return ms - prev_end <= 9 and low[prev_end:ms].strip() in _COORDINATORS


def _items(texts) -> tuple[list, pd.Index]:
    if isinstance(texts, (str, Mapping)) or texts is None:
        return [texts], pd.RangeIndex(1)
    if isinstance(texts, pd.Series):
        return texts.tolist(), texts.index
    if isinstance(texts, pd.DataFrame):
        raise ReportInputError("label_reports got a DataFrame", expected="one report per "
                               "item: a Series, list or array of strings", found="a DataFrame "
                               f"with columns {list(texts.columns)[:5]}",
                               fix="pass one column, e.g. label_reports(df['report'])")
    try:
        items = list(texts)
    except TypeError:
        raise ReportInputError("label_reports needs an iterable of reports",
                               expected="a Series, list or array of strings",
                               found=type(texts).__name__, fix="wrap the report in a list") \
            from None
    return items, pd.RangeIndex(len(items))


def _missing(value) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def label_reports(texts, *, vocabulary: str = "chexpert", explain: bool = False, rules=None,
                  probable: str = "uncertain"):
    """Labels from report texts: one row per text, values 1.0 / 0.0 / -1.0 / NaN.

    Args:
        texts: a Series (its index is kept), list or array of reports. Each item is a
            report string (sectioned or plain), a mapping section -> text (``{"FINDINGS":
            ..., "IMPRESSION": ...}``), or None/NaN (an all-NaN row). A single string is one
            report.
        vocabulary: ``"chexpert"`` (CheXpert's 14 column names) or ``"canonical"``
            (snake_case ids, :data:`radharmony.reports.findings.FINDINGS`).
        explain: also return the evidence (see below).
        rules: None (the built-in rules), a :class:`~radharmony.reports.rules.Rules` from
            :func:`~radharmony.reports.load_rules`, or a ``.tsv`` path / list of paths whose
            rules are added to the built-in ones.
        probable: the value of a *probable* hedge, one that favours the finding or names it
            in a short differential ("probable effusion", "likely atelectasis", "atelectasis
            versus scar", "borderline heart size"; ``probable`` rules): ``"uncertain"``
            (-1, CheXpert's convention: every hedge is uncertain) or ``"positive"`` (1; the
            other hedges, "may represent", "possible", "cannot be excluded", stay -1).
            ``cue_kind`` in the evidence tells the two apart either way.

    Returns:
        The label DataFrame (float32 columns) or, with ``explain=True``, ``(labels,
        evidence)``: ``evidence`` has one row per non-NaN label with ``row`` (the label
        row's index), ``label``, ``value``, ``section``, ``sentence``, ``mention``, ``cue``
        (None when no cue decided: a plain positive mention, a ``normal`` phrase, or the
        derived No Finding), ``cue_kind``, the rules that fired as ``file:line``, and
        character offsets of mention and cue in the input text (for a mapping item: in
        that section's text).

    Raises:
        ReportInputError: an item is not text (the message names its position).

    >>> label_reports(["FINDINGS:\\nNo pneumothorax. Possible small effusion.",
    ...                "INDICATION:\\nrule out pneumonia"])[["Pneumothorax",
    ...                "Pleural Effusion", "Pneumonia", "No Finding"]]
       Pneumothorax  Pleural Effusion  Pneumonia  No Finding
    0           0.0              -1.0        NaN         NaN
    1           NaN               NaN        NaN         NaN
    """
    if vocabulary not in VOCABULARIES:
        raise RadHarmonyError(f"Unknown vocabulary {vocabulary!r}",
                              expected=f"one of {VOCABULARIES}", found=repr(vocabulary),
                              fix="pass vocabulary='chexpert' or 'canonical'")
    check_choice("probable", probable, tuple(PROBABLE))
    compiled = resolve_rules(rules)
    items, index = _items(texts)
    cols = columns(vocabulary)
    col_feeds = feeds(vocabulary)
    no_finding = NO_FINDING[vocabulary]
    nf_else = np.nan if vocabulary == "chexpert" else 0.0
    labeler = _Labeler(compiled, explain, probable)
    values = np.full((len(items), len(cols)), np.nan, dtype=np.float32)
    col_pos = {c: i for i, c in enumerate(cols)}
    evidence: list[tuple] = []
    memo: dict[str, tuple] = {}
    for row, item in enumerate(items):
        if type(item) is str and item in memo:
            vals, evs = memo[item]
        else:
            found = _label_item(labeler, item, row, index)
            vals, evs = _columns(found, col_feeds, no_finding, nf_else, explain)
            if type(item) is str:
                memo[item] = (vals, evs)
        for c, v in vals.items():
            values[row, col_pos[c]] = v
        if explain:
            evidence += [(index[row], c, vals[c], *_evidence_cells(evs[c]))
                         for c in cols if c in evs]
    labels = pd.DataFrame(values, columns=list(cols), index=index)
    if not explain:
        return labels
    ev = pd.DataFrame(evidence, columns=list(EXPLAIN_COLUMNS))
    offsets = ["mention_start", "mention_end", "cue_start", "cue_end"]
    ev[offsets] = ev[offsets].astype("Int64")
    ev["value"] = ev["value"].astype(np.float32)
    return labels, ev


def _label_item(labeler: _Labeler, item, row: int, index) -> dict | None:
    """``{finding: (value, evidence)}``, or None when the item has no labelled text."""
    if _missing(item):
        return None
    found: dict = {}
    if isinstance(item, str):
        spans = [sp for sp in section_spans(item) if sp[0] in LABELLED]
        if not spans:
            return None
        labeler.label_text(item, spans, found)
        return found
    if isinstance(item, Mapping):
        any_text = False
        for key, text in item.items():
            if _missing(text) or section_name(key) not in LABELLED:
                continue
            if not isinstance(text, str):
                raise ReportInputError(
                    f"Report {_where(row, index)}: section {key!r} is not text",
                    expected="a string or None per section", found=type(text).__name__,
                    fix="convert the section to str or pass None")
            if text.strip():
                any_text = True
                labeler.label_text(text, [(section_name(key), 0, len(text))], found)
        return found if any_text else None
    raise ReportInputError(f"Report {_where(row, index)} is not text",
                           expected="a string, a mapping section -> text, or None/NaN",
                           found=f"{type(item).__name__} {item!r:.60}",
                           fix="convert the reports to str (missing ones to None) first")


def _where(row: int, index) -> str:
    label = index[row]
    return f"at position {row}" + ("" if label == row else f" (index {label!r})")


def _columns(found: dict | None, col_feeds: dict, no_finding: str, nf_else: float,
             explain: bool) -> tuple[dict, dict]:
    """Column values (only the non-NaN ones) and, with ``explain``, their evidence."""
    if found is None:
        return {}, {}
    vals, evs = {}, {}
    for col, fs in col_feeds.items():
        best = None
        for finding, positive_only in fs:
            got = found.get(finding)
            if got is None or positive_only and got[0] == 0.0:
                continue
            if best is None or _RANK[got[0]] > _RANK[best[0]]:
                best = got
        if best is not None:
            vals[col] = best[0]
            if explain:
                evs[col] = best[1]
    abnormal = any(v != 0.0 for c, v in vals.items() if c not in NOT_ABNORMAL)
    nf = nf_else if abnormal else 1.0
    if not math.isnan(nf):
        vals[no_finding] = nf
        if explain:
            evs[no_finding] = "derived"
    return vals, evs


def _evidence_cells(ev) -> tuple:
    if ev == "derived":
        return (None, None, None, None, "derived", None, None, None, None, None, None)
    text, section, ss, se, ms, me, rule, cue = ev
    sentence = text[ss:se].strip()
    if cue is None:
        return (section, sentence, text[ms:me], None, rule.kind if rule.kind in _FIXED
                else None, rule.where, None, ms, me, None, None)
    cs, ce, cue_rule = cue
    return (section, sentence, text[ms:me], text[cs:ce], cue_rule.kind, rule.where,
            cue_rule.where, ms, me, cs, ce)
