"""Report spans: token-level annotations -> character offsets into the report text.

Datasets that annotate reports token by token ship the tokens, per-token IOBE tags and spans
as token indices. :func:`align_tokens` finds each token in the text (tokens may be split from
punctuation: ``"zone ."`` for ``"zone."``), :func:`detect_span_end` decides from the IOBE tags
whether a span's ``end`` is the index of its last token (inclusive) or one past it
(exclusive), and :func:`char_spans` converts spans to ``{"label", "start", "end"}`` character
offsets with an exclusive ``end`` (``text[start:end]`` is the span's text).
"""

from __future__ import annotations

from typing import Iterable, Sequence


def align_tokens(text: str, tokens: Sequence[str]) -> list[tuple[int, int] | None]:
    """Character ``(start, end)`` of every token in ``text``, in order; None for a token that
    cannot be found before the next word (it is then skipped, not guessed).

    Tokens are searched left to right from the end of the previous one; only whitespace and
    punctuation may lie between two tokens, so one missing token cannot make the rest jump
    ahead. A case-insensitive match is accepted when the exact one fails.
    """
    lower = text.lower()
    out: list[tuple[int, int] | None] = []
    cursor = 0
    for tok in tokens:
        tok = str(tok)
        hit = None
        if tok.strip():
            for hay, needle in ((text, tok), (lower, tok.lower())):
                i = hay.find(needle, cursor)
                if i >= 0 and not any(ch.isalnum() for ch in text[cursor:i]):
                    hit = (i, i + len(tok))
                    break
        out.append(hit)
        if hit is not None:
            cursor = hit[1]
    return out


def _tag(t) -> str:
    return str(t)[:1].upper()


def detect_span_end(records: Iterable[tuple[Sequence, Sequence[dict]]]) -> tuple[str, int, int]:
    """``("inclusive" | "exclusive", inclusive_votes, exclusive_votes)`` for spans as token
    indices, from ``(iobe_tags, spans)`` pairs of a whole file.

    A span votes *inclusive* when the token at ``end`` is tagged ``E`` and the one before is not,
    when ``start == end`` (an exclusive span would be empty), and *exclusive* when the token
    before ``end`` is tagged ``E`` and the one at ``end`` is not, or ``end`` equals the number of
    tokens. With no evidence either way the end is taken as inclusive (the X-Raydar card's
    example, a whole sentence with its final full stop, reads so).
    """
    inc = exc = 0
    for tags, spans in records:
        n = len(tags)
        for s in spans:
            start, end = s.get("start"), s.get("end")
            if not isinstance(start, int) or not isinstance(end, int):
                continue
            at = _tag(tags[end]) if 0 <= end < n else ""
            before = _tag(tags[end - 1]) if 0 < end <= n else ""
            if start == end or (at == "E" and before != "E"):
                inc += 1
            elif end == n or (before == "E" and at != "E"):
                exc += 1
    return ("exclusive" if exc > inc else "inclusive"), inc, exc


def char_spans(spans: Sequence[dict], offsets: Sequence[tuple[int, int] | None], *,
               inclusive: bool) -> tuple[list[dict], list[dict]]:
    """``(converted, unaligned)``: spans as character offsets (end exclusive), and the spans
    whose first or last token could not be placed in the text or lies out of range."""
    out, bad = [], []
    for s in spans:
        start, end = s.get("start"), s.get("end")
        last = end if inclusive else (end - 1 if isinstance(end, int) else end)
        ok = isinstance(start, int) and isinstance(last, int) and \
            0 <= start <= last < len(offsets)
        if not ok or offsets[start] is None or offsets[last] is None:
            bad.append(s)
            continue
        out.append({"label": s.get("label"), "start": offsets[start][0],
                    "end": offsets[last][1]})
    return out, bad
