"""The matching engine of the labeling rules: one regex alternation per rule table, and the
lookup of which rule produced each match (at one position the longest match wins).

:mod:`radharmony.reports.rules` loads and checks the rule files; this module turns their
patterns into regular expressions (:func:`_translate`, :func:`_edges`) and finds the matches
(:class:`_Matcher`).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from typing import Protocol

try:  # the regex parser, for the first characters a rule can match (stable since 3.0)
    from re import _constants as _sre_constants, _parser as _sre_parser
except ImportError:  # Python 3.10
    import sre_constants as _sre_constants
    import sre_parse as _sre_parser


class Rule(Protocol):
    """What the matcher reads of a rule (:class:`radharmony.reports.rules.Rule` is one): its
    pattern, and that pattern compiled."""

    pattern: str
    regex: re.Pattern

_NO_BOUNDARY = set(";:,.!-/&'\" \t")


class _Matcher:
    """One alternation of many rules (no capturing groups: sre keeps its fast path) and the
    lookup of which rule produced a match (cached by the matched text; a rule with a
    lookaround, whose match depends on the text around, is checked again each time)."""

    def __init__(self, rules: list[Rule]):
        order = sorted(range(len(rules)), key=lambda i: -len(rules[i].pattern))
        classes: dict[tuple[bool, bool], list[int]] = {}
        for i in order:
            p = rules[i].pattern
            classes.setdefault(_edges(p), []).append(i)
        parts, self.order = [], []
        for (pre, post), idx in sorted(classes.items(), reverse=True):
            body = "|".join(_translate(rules[i].pattern) for i in idx)
            parts.append((r"(?<!\w)" if pre else "") + f"(?:{body})" + (r"(?!\w)" if post else ""))
            self.order += idx
        self.rules = rules
        self.regex = re.compile("|".join(parts) if parts else r"(?!x)x")
        # rules with a lookaround, in order, with their pattern stripped of it (any context)
        loose = {i: _strip_lookarounds(rules[i].pattern) for i in self.order}
        self._contextual = [(k, rules[i], re.compile(_translate(loose[i])))
                            for k, i in enumerate(self.order) if loose[i] != rules[i].pattern]
        plain = {id(r) for _, r, _ in self._contextual}
        self._plain_order = [i for i in self.order if id(rules[i]) not in plain]
        self._rank = {id(rules[i]): k for k, i in enumerate(self.order)}
        self._which: dict[str, tuple[list[Rule], Rule | None]] = {}
        # longest match: per first character, the (rank, rule) pairs that can start with it
        firsts = [_first_chars(_translate(rules[i].pattern)) for i in self.order]
        anywhere = [k for k, f in enumerate(firsts) if f is None]
        self._by_first: dict[str, tuple[list[int], list[Rule]]] = {}
        for ch in {c for f in firsts if f for c in f}:
            ks = sorted({k for k, f in enumerate(firsts) if f and ch in f} | set(anywhere))
            self._by_first[ch] = (ks, [rules[self.order[k]] for k in ks])
        self._anywhere = (anywhere, [rules[self.order[k]] for k in anywhere])

    def finditer(self, low: str, start: int, end: int):
        """``(start, end, rule)`` of every match in ``low[start:end]``, left to right, without
        overlaps; at each position the rule with the longest match wins (ties: the longer
        pattern text, then the file order)."""
        search, pos = self.regex.search, start
        while True:
            m = search(low, pos, end)
            if m is None:
                return
            s, e = m.span()
            rule = self.which(low, s, e)
            # the alternation took the first rule in order that matches here; a later one
            # (shorter pattern text) that can start with this character may match more
            ranks, bucket = self._by_first.get(low[s], self._anywhere)
            for later in bucket[bisect_right(ranks, self._rank[id(rule)]):]:
                lm = later.regex.match(low, s, end)
                if lm is not None and lm.end() > e:
                    rule, e = later, lm.end()
            yield s, e, rule
            pos = e

    def which(self, low: str, start: int, end: int) -> Rule:
        """The rule that produced the alternation's match ``low[start:end]``."""
        text = low[start:end]
        entry = self._which.get(text)
        if entry is None:
            entry = self._resolve(low, start, end, text)
            if len(self._which) < 100_000:
                self._which[text] = entry
        candidates, base = entry
        for rule in candidates:  # a lookaround rule ahead of the plain one, if it holds here
            m = rule.regex.match(low, start)
            if m is not None and m.end() == end:
                return rule
        return base if base is not None else self._scan(low, start, end, self.order)

    def _resolve(self, low: str, start: int, end: int, text: str):
        """The plain rule that matched ``text`` and the lookaround rules before it in order
        that could match the same text in another context."""
        base = self._scan(low, start, end, self._plain_order)
        rank = self._rank[id(base)] if base is not None else len(self.order)
        return [r for k, r, loose in self._contextual
                if k < rank and loose.fullmatch(text)], base

    def _scan(self, low: str, start: int, end: int, order) -> Rule | None:
        first = None
        for i in order:
            m = self.rules[i].regex.match(low, start)
            if m is not None:
                first = first or self.rules[i]
                if m.end() == end:
                    return self.rules[i]
        return first


def _first_chars(pattern: str) -> set[str] | None:
    """The characters a match of ``pattern`` can start with, or None (any, or unknown)."""
    try:
        first, _ = _first_of_seq(_sre_parser.parse(pattern))
    except Exception:  # an unknown construct: every position is a candidate
        return None
    return first


def _first_of_seq(items) -> tuple[set[str] | None, bool]:
    acc: set[str] = set()
    for op, av in items:
        first, empty = _first_of_item(op, av)
        if first is None:
            return None, False
        acc |= first
        if not empty:
            return acc, False
    return acc, True


def _first_of_item(op, av) -> tuple[set[str] | None, bool]:
    """(first characters, can be empty) of one parsed regex item."""
    c = _sre_constants
    if op is c.LITERAL:
        return {chr(av)}, False
    if op is c.IN:
        out: set[str] = set()
        for o, a in av:
            if o is c.LITERAL:
                out.add(chr(a))
            elif o is c.RANGE and a[1] - a[0] <= 256:
                out |= {chr(x) for x in range(a[0], a[1] + 1)}
            else:
                return None, False
        return out, False
    if op is c.SUBPATTERN:
        return _first_of_seq(av[-1])
    if op is c.BRANCH:
        out, empty = set(), False
        for branch in av[1]:
            first, e = _first_of_seq(branch)
            if first is None:
                return None, False
            out, empty = out | first, empty or e
        return out, empty
    if op in (c.MAX_REPEAT, c.MIN_REPEAT):
        first, empty = _first_of_seq(av[2])
        return first, empty or av[0] == 0
    if op in (c.AT, c.ASSERT, c.ASSERT_NOT):  # zero width
        return set(), True
    return None, False


def _strip_lookarounds(pattern: str) -> str:
    """``pattern`` without its lookahead / lookbehind groups (``(?=...)``, ``(?!...)``,
    ``(?<=...)``, ``(?<!...)``)."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class or c != "(" or not re.match(r"\(\?(?:=|!|<=|<!)", pattern[i:]):
            in_class = (c != "]") if in_class else c == "["
            out.append(c)
            i += 1
            continue
        i = _group_end(pattern, i) + 1
    return "".join(out)


def _group_end(pattern: str, i: int) -> int:
    """The index of the ")" that closes the group opened at ``pattern[i]``."""
    depth, in_class = 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(pattern)


def _edges(pattern: str) -> tuple[bool, bool]:
    """Whether the pattern gets a word boundary at its start and at its end: not where it
    begins or ends with punctuation, literal or escaped (``;``, ``\\?``)."""
    pre = pattern[0] not in _NO_BOUNDARY and not (
        pattern[0] == "\\" and len(pattern) > 1 and not pattern[1].isalnum())
    tail = pattern[:-1] if pattern[-1] == "?" and len(pattern) > 2 and pattern[-3] == "\\" \
        else pattern  # "vs\\.?": judge by the escaped character
    post = tail[-1] not in _NO_BOUNDARY and not (
        len(tail) > 1 and tail[-2] == "\\" and not tail[-1].isalnum())
    return pre, post


def _translate(pattern: str) -> str:
    """Lower-case literal letters (escapes kept) and let a space match any whitespace
    (``" ?"``: optional whitespace)."""
    out, i, in_class = [], 0, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if c == "[":
            in_class = True
        elif c == "]":
            in_class = False
        if c == " " and not in_class:
            optional = pattern[i + 1:i + 2] in ("?", "*")
            out.append(r"\s*" if optional else r"\s+")
            i += 2 if optional else 1
            continue
        out.append(c.lower())
        i += 1
    return "".join(out)
