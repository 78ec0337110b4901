"""Sampling rules: how many of a source's records of one task a mixture draws.

The rules LLaVA-NeXT / LLaVA-OneVision users already write in their data YAML
(``sampling_strategy``), plus a multiplier for repeats:

* ``all`` -- every record once;
* ``first:N`` / ``end:N`` -- the first / last N records in the source's order;
* ``random:N`` -- N records drawn without replacement (seeded), kept in the source's order;
* N is a count or a percentage ``P%`` (count = ceil(P x len / 100), at most len);
* a multiplier above 1 (``2``, ``x2``, ``1.5``) -- every record ``floor(m)`` times, plus a
  seeded ``random`` draw of ``ceil((m - floor(m)) x len)`` records once more.

>>> r = parse_rule("random:50%")
>>> r.text, r.count(5)
('random:50%', 3)
>>> parse_rule("x2").pick(3, seed=0).tolist()
[0, 1, 2, 0, 1, 2]
>>> parse_rule("first:2").pick(5, seed=0).tolist()
[0, 1]
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import xxhash

#: the rule kinds (a multiplier is ``all`` with ``repeat`` > 1)
KINDS = ("all", "first", "end", "random")
RULE_HELP = ("all, first:N, end:N, random:N (N a count such as 1000 or a percentage such as "
             "25%), or a multiplier above 1 for repeats (2, x2, 1.5)")
_RULE = re.compile(r"^(first|end|random):\s*(\d+(?:\.\d+)?)\s*(%?)$")
_TIMES = re.compile(r"^[x\u00d7]?\s*(\d+(?:\.\d+)?)\s*[x\u00d7]?$")


class RuleError(ValueError):
    """A sampling rule that cannot be read (the spec parser turns it into its own error)."""


@dataclass(frozen=True)
class Rule:
    """A parsed sampling rule (see the module docs)."""

    kind: str = "all"
    number: float | None = None      # N (a count, or a percentage when ``percent``)
    percent: bool = False
    repeat: float = 1.0

    @property
    def text(self) -> str:
        """The rule as written in a spec (normalised)."""
        if self.repeat != 1.0:
            return f"x{self.repeat:g}"
        if self.kind == "all":
            return "all"
        return f"{self.kind}:{self.number:g}{'%' if self.percent else ''}"

    def count(self, n: int) -> int:
        """How many distinct records the rule takes of ``n`` (repeats not counted)."""
        if self.kind == "all":
            return n
        want = math.ceil(self.number * n / 100) if self.percent else int(self.number)
        return min(n, want)

    def pick(self, n: int, *, seed: int) -> np.ndarray:
        """Positions (into ``0 .. n-1``) the rule draws, in the order they are written:
        the source's order, repeats after the first pass."""
        if self.repeat != 1.0:
            whole = int(math.floor(self.repeat))
            extra = math.ceil((self.repeat - whole) * n)
            parts = [np.arange(n, dtype=np.int64)] * whole
            if extra:
                parts.append(_random(n, extra, seed))
            return np.concatenate(parts) if parts else np.zeros(0, np.int64)
        k = self.count(n)
        if self.kind in ("all",) or k == n:
            return np.arange(n, dtype=np.int64)
        if self.kind == "first":
            return np.arange(k, dtype=np.int64)
        if self.kind == "end":
            return np.arange(n - k, n, dtype=np.int64)
        return _random(n, k, seed)


def _random(n: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=k, replace=False)).astype(np.int64)


def parse_rule(value) -> Rule:
    """A :class:`Rule` from a spec value; :class:`RuleError` (its text: what was wrong)."""
    if isinstance(value, bool) or value is None:
        raise RuleError(f"{value!r} is not a rule")
    if isinstance(value, (int, float)):
        return _times(float(value), value)
    text = str(value).strip().lower()
    if text == "all":
        return Rule()
    m = _RULE.match(text)
    if m:
        kind, number, pct = m.group(1), float(m.group(2)), bool(m.group(3))
        if pct and not 0 < number <= 100:
            raise RuleError(f"{value!r}: a percentage must be above 0 and at most 100")
        if not pct and number != int(number):
            raise RuleError(f"{value!r}: a count must be a whole number")
        return Rule(kind, number, pct)
    m = _TIMES.match(text)
    if m:
        return _times(float(m.group(1)), value)
    raise RuleError(f"{value!r} is not a rule")


def _times(m: float, value) -> Rule:
    if not math.isfinite(m) or m < 1:
        raise RuleError(f"{value!r}: a multiplier must be 1 or more (use random:P% for less)")
    return Rule() if m == 1 else Rule("all", repeat=m)


def derive_seed(seed: int, *parts: str) -> int:
    """A 64-bit seed for one draw, from the spec's seed and the draw's name (source, task):
    changing one draw's rule never moves another draw."""
    return xxhash.xxh3_64_intdigest("\x1f".join((str(int(seed)), *map(str, parts))).encode())


__all__ = ["KINDS", "RULE_HELP", "Rule", "RuleError", "derive_seed", "parse_rule"]
