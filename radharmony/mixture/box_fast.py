"""The fast path of :func:`radharmony.mixture.box_parse.parse_many` for outputs written exactly
as :mod:`radharmony.mixture.boxes` writes them (a trained model's usual answer): all such
outputs are joined and read by a few regular-expression passes over one string, instead of
several calls per output. Anything else (prose, spacing, an odd token) goes to the tolerant
reader; both give the same result on canonical text (``tests/mixture/test_box_text.py``).
"""

from __future__ import annotations

import re
from itertools import chain

import numpy as np

SEP = "\x00"
_MAIRA_ONE = r"(?:<obj>[^<\x00]*(?:<box><x\d+><y\d+><x\d+><y\d+></box>)*</obj>)*"
_CHEX_ONE = (r"(?:<\|ref\|>[^<\x00]*<\|/ref\|>"
             r"|<\|box\|>\(\d+,\d+\),\(\d+,\d+\)<\|/box\|>)*")
STRICT = {"maira2": re.compile(_MAIRA_ONE), "chexagent": re.compile(_CHEX_ONE)}
STRICT_ALL = {d: re.compile(f"{p}(?:\\x00{p})*") for d, p in
              (("maira2", _MAIRA_ONE), ("chexagent", _CHEX_ONE))}
_MAIRA_ITEMS = re.compile(r"(\x00)|<obj>([^<]*)((?:<box>(?:<[xy]\d+>){4}</box>)*)</obj>")
_MAIRA_COORDS = re.compile(r"<[xy](\d+)>")
_CHEX_TOKENS = re.compile(r"(\x00)|<\|ref\|>([^<]*)<\|/ref\|>|(<\|box\|>)")
_CHEX_COORDS = re.compile(r"<\|box\|>\((\d+),(\d+)\),\((\d+),(\d+)\)<\|/box\|>")


def strict_mask(texts: list, dialect: str) -> np.ndarray:
    """Which outputs are canonical text of ``dialect`` (all False for the JSON dialects: a
    regex pass over their joined text was measured slower than ``json.loads`` per output)."""
    n = len(texts)
    if dialect not in STRICT or not n:
        return np.zeros(n, bool)
    if all(isinstance(t, str) for t in texts):
        joined = SEP.join(texts)
        if joined.count(SEP) == n - 1 and STRICT_ALL[dialect].fullmatch(joined):
            return np.ones(n, bool)
    one = STRICT[dialect].fullmatch
    return np.fromiter((isinstance(t, str) and SEP not in t and one(t) is not None
                        for t in texts), bool, n)


def read_strict(texts: list, owners, dialect: str):
    """``(item_output, phrases, counts, values)`` of canonical outputs ``texts`` (``owners``:
    their output indices): ``counts[k]`` boxes of item ``k`` (-1: a sentence without a box),
    ``values`` ``(B, 4)`` float64 in dialect units, items' boxes consecutive."""
    joined = SEP.join(texts)
    owners = list(owners)
    item_output, phrases, counts = [], [], []
    o = 0
    if dialect == "maira2":
        for sep, phrase, boxes in _MAIRA_ITEMS.findall(joined):
            if sep:
                o += 1
                continue
            item_output.append(owners[o])
            phrases.append(phrase.strip())
            counts.append(boxes.count("<box>") if boxes else -1)
        coords = _MAIRA_COORDS.findall(joined)
    else:
        last = None  # the phrase of this output's last item
        for sep, ref, box in _CHEX_TOKENS.findall(joined):
            if sep:
                o, last = o + 1, None
            elif box:
                if last is None:
                    item_output.append(owners[o])
                    phrases.append("")
                    counts.append(-1)
                    last = ""
                counts[-1] = max(counts[-1], 0) + 1
            elif last is None or ref.strip() != last:
                last = ref.strip()
                item_output.append(owners[o])
                phrases.append(last)
                counts.append(-1)
        coords = list(chain.from_iterable(_CHEX_COORDS.findall(joined)))
    values = np.fromiter(map(int, coords), np.int64, len(coords)).astype(np.float64)
    values = values.reshape(-1, 4)
    return item_output, phrases, counts, values
