"""The answer letter a model wrote for a multiple-choice question: :func:`find_letters`.

Models answer in many styles: ``C``, ``(c).``, ``<answer>C</answer>``, ``\\boxed{C}``,
``**C. A nodule**``, ``b) atelectasis``, ``The answer is C``, ``I would choose option c``,
``C is correct``, or the option's text (``A nodule``, ``The answer is a nodule``). The reading:

1. Wrappers: when the text has ``<answer>...</answer>`` tags or a LaTeX ``\\boxed{...}``, only
   their contents are read; ``\\text{...}`` is unwrapped and Markdown emphasis (``*``, ``_``,
   backticks, ``#``) removed.
2. The text is one letter alone (any case, brackets and punctuation around it ignored).
3. Letters *marked* as letters: after a statement (``answer``, ``option``, ``choice``,
   ``letter``, ``choose``, ``select``, ``pick``, ``go with``, ``it is``, then fillers such as
   ``is``, ``:``, ``the correct``); at the start of a line (``C.``, ``b)``, ``(C)``, ``C:``,
   or an upper-case ``C`` before more words); in brackets anywhere (``(C)``); before ``is
   correct``, ``is the best``, ...; ending the text after its last ``:``, ``,`` or ``;``. A
   list (``A or B``, ``A, C``) marks each of its letters. Never a letter: the article
   ``a``/``A`` or the pronoun ``I`` before a word (``A nodule``, ``I would``); a letter inside
   a word (``e.g.``, ``X-ray``, ``don't``); a letter said not to be the answer (``not A``,
   ``Option A is incorrect``).
4. No marked letter: the option whose text the answer is, or starts with (an option of one
   word: its first clause, so ``No, there is none`` but not ``No idea``), or (an option of two
   words or more, not after ``no``/``not``/``without``) contains -- on its own or after a
   statement (``Answer: a nodule``, ``It is a nodule``). Case and punctuation are ignored;
   the longest matching option text wins.

Two different letters (or two options' texts) are ambiguous: no letter, counted apart.
"""

from __future__ import annotations

import re

_CONTAINER = re.compile(r"<answer>(.*?)</answer>|\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}",
                        re.I | re.S)
_LATEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mathbf|mathit)\s*\{([^{}]*)\}")
_MARKUP = re.compile(r"\*+|`+|^[ \t]*#+[ \t]*|(?<!\w)_{1,2}|_{1,2}(?!\w)", re.M)
_ALONE = re.compile(r"^\W*([A-Za-z])\W*$")
_STATED = re.compile(
    r"\b(?:answers?|options?|choices?|letter|choose|chose|chosen|choosing|select|selected|"
    r"selecting|pick|picked|go(?:ing)?\s+with|it'?s|it\s+is)\b"
    r"(?:\s*(?:(?:is|was|would\s+be|will\s+be|should\s+be|be|it'?s|the|my|correct|right|best|"
    r"final|most\s+likely|likely|option|answer|letter|choice|to)\b|[:=\-\u2013\u2014>\u2192]))*",
    re.I)
_BRACKETED = re.compile(r"(?<![A-Za-z0-9])[(\[]([A-Za-z])[)\]]")
_BEFORE_CORRECT = re.compile(r"(?<![\w'\u2019.-])([A-Z])\s+(?:is|would\s+be|should\s+be|seems"
                             r"(?:\s+to\s+be)?|appears(?:\s+to\s+be)?)\s+(?:the\s+)?(?:most\s+)?"
                             r"(?:correct|right|best|answer|likely|appropriate)\b")
_END = re.compile(r"[)\].!\s]*$")
_SEPARATOR = re.compile(r"\s*(?:,\s*(?:and|or)\b|,|/|&|\band/or\b|\band\b|\bor\b)\s*", re.I)
_NEGATED_BEFORE = re.compile(r"(?:\bnot|\bthan|\binstead\s+of|\bexcept|\bnor)\s*(?:option\s*)?$",
                             re.I)
_NEGATED_AFTER = re.compile(r"\s*[)\]]?\s*(?:is|are|was|would\s+be|seems)\s+(?:not\b|incorrect|"
                            r"wrong|unlikely|less\s+likely|false)|\s*(?:is|are)n'?t\b", re.I)
#: words after ``A`` that make it a letter (``A is correct``), not the article
_AFTER_LETTER_A = frozenset({"is", "was", "would", "seems", "appears", "fits", "matches",
                             "best", "because", "since", "as", "and", "or", "looks"})
_LETTER = re.compile(r"[ \t]*([(\[])?([A-Za-z])([)\]])?")
_DELIMITER = re.compile(r"[.:;,!?](?:\s|$)|\s+[-\u2013]\s")
_WORD_CHAR = re.compile(r"[\w'\u2019-]")
_OPTION = re.compile(r"\s*[(\[]?([A-Za-z])[)\]]?\s*[.):]\s*(.*)", re.S)
_TOKEN = re.compile(r"[a-z0-9]+")
_CLAUSE = re.compile(r"[^.,;:!?\n]*")


def _norm(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


def _clean(text: str) -> str:
    """The text to read: the contents of answer tags / boxes if any, LaTeX and Markdown off."""
    inside = [m.group(1) if m.group(1) is not None else m.group(2)
              for m in _CONTAINER.finditer(text)]
    if inside:
        text = "\n".join(inside)
    text = _LATEX_TEXT.sub(r"\1", text)
    return _MARKUP.sub("", text).strip()


def _said_not(text: str, start: int, end: int) -> bool:
    """Whether the letter between ``start`` and ``end`` is said not to be the answer."""
    return bool(_NEGATED_BEFORE.search(text, 0, start) or _NEGATED_AFTER.match(text, end))


def _letter_at(text: str, i: int, *, line_start: bool) -> tuple[str, int] | None:
    """``(letter, end)`` when a marked single letter starts at ``i`` (after blanks)."""
    m = _LETTER.match(text, i)
    if m is None:
        return None
    opened, letter, closed = m.group(1), m.group(2), m.group(3)
    start, end = m.start(2), m.end()
    if (start > 0 and not opened and _WORD_CHAR.match(text[start - 1])) or \
            (not closed and end < len(text) and _WORD_CHAR.match(text[end])) or \
            (opened and not closed):
        return None
    rest = text[end:]
    if not (opened or closed or not rest.strip() or _DELIMITER.match(rest)):
        # not delimited: followed by a word
        word = re.match(r"\s+(\S+)", rest)
        nxt = word.group(1).lower().strip(".,;:!?") if word else ""
        if line_start and letter.islower():
            return None
        if letter in "aA" and nxt not in _AFTER_LETTER_A and word and word.group(1)[0].islower():
            return None  # the article: "a nodule", "A large effusion"
        if letter in "iI" and nxt not in ("is", "was"):
            return None  # the pronoun: "I would choose"
    return None if _said_not(text, start - (1 if opened else 0), end) else (letter.upper(), end)


def _list_at(text: str, i: int, *, line_start: bool) -> tuple[list[tuple[int, str]], int]:
    """The letters of a list starting at ``i`` (``A``, ``A or B``, ``(a), (c)``), and where
    the list ends."""
    out, end = [], i
    got = _letter_at(text, i, line_start=line_start)
    while got is not None:
        out.append((i, got[0]))
        end = got[1]
        sep = _SEPARATOR.match(text, end)
        if sep is None:
            break
        i = sep.end()
        got = _letter_at(text, i, line_start=False)
    return out, end


def _marked(text: str) -> list[str]:
    """Distinct marked letters, in order of first appearance."""
    found: list[tuple[int, str]] = []
    for m in _STATED.finditer(text):
        found += _list_at(text, m.end(), line_start=False)[0]
    for m in re.finditer(r"^[ \t>\u2022-]*", text, re.M):
        found += _list_at(text, m.end(), line_start=True)[0]
    last = max(text.rfind(c) for c in ":,;")  # "Looking at the image, C."
    if last >= 0:
        letters, end = _list_at(text, last + 1, line_start=False)
        found += letters if _END.match(text, end) else []
    for pattern in (_BRACKETED, _BEFORE_CORRECT):
        for m in pattern.finditer(text):
            if not _said_not(text, m.start(1) - 1, m.end(1)):
                found.append((m.start(1), m.group(1).upper()))
    return list(dict.fromkeys(letter for _, letter in sorted(found)))


def _by_text(text: str, options) -> list[str]:
    """Letters of the options whose text the answer is, starts with, or contains."""
    texts = []
    for o in options or ():
        m = _OPTION.match(str(o))
        if m and _norm(m.group(2)):
            texts.append((m.group(1).upper(), _norm(m.group(2))))
    starts = [0] + [m.end() for m in _STATED.finditer(text)]  # the text, what follows a statement
    said = [(_norm(text[i:]), _norm(_CLAUSE.match(text, i).group())) for i in starts]
    for rule in ("prefix", "contains"):
        hits = {}
        for letter, t in texts:
            for s, clause in said[:1] if rule == "contains" else said:
                if rule == "prefix":  # one word: its whole clause ("No, there is", not "no idea")
                    ok = clause == t or len(t.split()) > 1 and (s == t or s.startswith(t + " "))
                else:  # a text of two words or more, anywhere, not negated
                    ok = len(t.split()) > 1 and re.search(
                        rf"(?:^| )(?<!\bno )(?<!\bnot )(?<!\bwithout ){t}(?: |$)", s)
                if ok:
                    hits[letter] = t
        longest = [k for k, t in hits.items()
                   if not any(t != u and f" {t} " in f" {u} " for u in hits.values())]
        if longest:
            return sorted(set(longest))
    return []


def find_letters(prediction, options=None) -> tuple[str, ...]:
    """Every distinct answer letter ``prediction`` names (upper case; see the module docs):
    one letter is the answer, none is no letter, two or more are ambiguous.

    >>> find_letters("<answer>c</answer>"), find_letters("A or B"), find_letters("no idea")
    (('C',), ('A', 'B'), ())
    >>> find_letters("The answer is a nodule", ["A. Atelectasis", "B. Edema", "C. A nodule"])
    ('C',)
    """
    if not isinstance(prediction, str):
        return ()
    text = _clean(prediction)
    alone = _ALONE.match(text)
    if alone:
        return (alone.group(1).upper(),)
    return tuple(_marked(text) or _by_text(text, options))


def extract_letter(prediction, options: list[str] | None = None) -> str | None:
    """The one answer letter a free-text prediction gives, upper case, or None (no letter, or
    two different letters: :func:`find_letters`). The letter may lie outside the options --
    :func:`radharmony.vqa.metrics.vqa_metrics` counts that as wrong.

    >>> extract_letter("**C. A nodule**"), extract_letter("I would choose C")
    ('C', 'C')
    """
    letters = find_letters(prediction, options)
    return letters[0] if len(letters) == 1 else None
