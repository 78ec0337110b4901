"""What a rule's regular expression can match, read from its parse: the characters a match can
start with (:func:`first_chars`, for the longest-match lookup of
:mod:`radharmony.reports.rules`) and the pattern without its lookarounds
(:func:`strip_lookarounds`)."""

from __future__ import annotations

import re

try:  # the regex parser, for the first characters a rule can match (stable since 3.0)
    from re import _constants as _sre_constants, _parser as _sre_parser
except ImportError:  # Python 3.10
    import sre_constants as _sre_constants
    import sre_parse as _sre_parser


def first_chars(pattern: str) -> set[str] | None:
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


def strip_lookarounds(pattern: str) -> str:
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
