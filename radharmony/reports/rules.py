"""Labeling rules as data: loading, checking and compiling the ``rules/*.tsv`` files.

Two kinds of tab-separated file, told apart by their header row (``#`` starts a comment
line; blank lines are skipped):

``finding<TAB>kind<TAB>pattern`` -- mention rules (``finding``: one id of
:data:`~radharmony.reports.findings.FINDINGS`, or several comma-separated). ``kind`` is

* ``mention``: the pattern names the finding; cues around it decide 1 / 0 / -1;
* ``normal``: the pattern states the finding is absent ("normal heart size"): 0;
* ``uncertain``: the pattern hedges the finding whatever the cues: -1;
* ``probable``: the pattern states the finding at its mildest ("borderline heart size"): -1,
  or 1 with ``label_reports(..., probable="positive")``;
* ``exclude``: the pattern is *not* a mention ("pericardial effusion" guards
  ``pleural_effusion``); its text is consumed so no rule matches inside it;
* ``anaphor``: a definite mention ("the nodule", "this nodule") that refers back: it counts
  as a ``mention`` only when the report has already mentioned the finding; otherwise it
  names another lesion described before ("round opacity ... this nodule", "calcified
  granuloma ... the nodule") and is dropped.

``kind<TAB>position<TAB>pattern`` -- cue rules. ``kind`` is ``negation`` (0), ``uncertain``
(-1), ``probable`` (a hedge that favours the finding or names it in a short differential:
"probable", "likely", "X versus Y"; -1 like any hedge, 1 with ``probable="positive"``),
``pseudo`` (looks like a negation but is not: "no change in", decides 1), ``ignore``
(the mention is not counted: "evaluation for pneumothorax is limited") or
``terminator`` (ends a cue's scope: "but", "however", "which", ";"). ``position`` says where
the cue stands relative to the mention: ``pre``, ``post`` or ``any`` (terminators: ``any``).

Patterns are Python regular expressions matched on the lower-cased text; a space matches
any run of whitespace, and a pattern that begins (ends) with a letter, digit or group only
matches at a word start (end). Named groups and inline flags are refused. At one position the
rule with the longest match wins (a tie goes to the longer pattern text, then to the file
order), and matches never overlap: "cannot be excluded" (uncertain) hides the "not" inside
it, "no change in" (pseudo) hides its "no".
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..errors import RadHarmonyError
from .findings import FINDINGS
from .matcher import _Matcher, _edges, _translate

#: bump when the labelling algorithm changes (the rules' own hash is part of the cache key)
LABELER_VERSION = "1.6"
RULES_DIR = Path(__file__).with_name("rules")
#: language -> the folder of its built-in rules ("es": PadChest's stemmed Spanish text)
LANGUAGES = {"en": RULES_DIR, "es": RULES_DIR / "es"}
MENTION_HEADER = ("finding", "kind", "pattern")
CUE_HEADER = ("kind", "position", "pattern")
MENTION_KINDS = ("mention", "normal", "uncertain", "probable", "exclude", "anaphor")
CUE_KINDS = ("pseudo", "uncertain", "probable", "negation", "ignore", "terminator")
POSITIONS = ("pre", "post", "any")


class RuleError(RadHarmonyError, ValueError):
    """A rule file is malformed or holds a pattern that does not compile."""


@dataclass(frozen=True)
class Rule:
    """One rule line: ``table`` is ``"mention"`` or ``"cue"``; ``kind`` as in the file;
    ``target`` is the finding (mention rules) or the position (cue rules)."""

    table: str
    kind: str
    target: str
    pattern: str
    file: str
    line: int
    regex: re.Pattern = field(repr=False, compare=False)

    @property
    def findings(self) -> tuple[str, ...]:
        """The findings a mention rule names (its ``finding`` cell may list several, comma
        separated: "normal cardiomediastinal silhouette" is two)."""
        return tuple(self.target.split(","))

    @property
    def where(self) -> str:
        """``"mentions.tsv:12"``, for explanations."""
        return f"{Path(self.file).name}:{self.line}"


class Rules:
    """A compiled rule set. ``key`` (labeler version + a hash of every rule) names what the
    labels depend on: use it in cache keys."""

    def __init__(self, rules: Iterable[Rule]):
        rules = list(rules)
        self.mention_rules = [r for r in rules if r.table == "mention"]
        self.cue_rules = [r for r in rules if r.table == "cue"]
        self.mentions = _Matcher(self.mention_rules)
        self.cues = _Matcher(self.cue_rules)
        digest = hashlib.sha256()
        for r in rules:
            digest.update(f"{r.table}\t{r.kind}\t{r.target}\t{r.pattern}\n".encode())
        self.fingerprint = digest.hexdigest()
        self.key = f"report-labels-{LABELER_VERSION}-{self.fingerprint[:16]}"

    def __len__(self) -> int:
        return len(self.mention_rules) + len(self.cue_rules)

    def __repr__(self) -> str:
        return (f"Rules({len(self.mention_rules)} mention rules, {len(self.cue_rules)} cue "
                f"rules, key={self.key!r})")


def _compile_one(pattern: str, where: str) -> re.Pattern:
    if re.search(r"\(\?P?<[A-Za-z_]|\(\?[aiLmsux-]+[:)]", pattern):
        raise RuleError(f"{where}: pattern {pattern!r} uses a named group or inline flags",
                        expected="a plain regular expression (groups as (?:...))",
                        found=pattern, fix="rewrite the group as (?:...) and drop the flags")
    body = _translate(pattern)
    pre, post = _edges(pattern)
    try:
        rx = re.compile((r"(?<!\w)" if pre else "") + f"(?:{body})" + (r"(?!\w)" if post else ""))
    except re.error as exc:
        raise RuleError(f"{where}: pattern {pattern!r} is not a valid regular expression",
                        expected="a Python regular expression", found=str(exc),
                        fix="correct the pattern (escape literal brackets as \\( \\[)") from None
    if rx.fullmatch("") or re.compile(body).fullmatch(""):
        raise RuleError(f"{where}: pattern {pattern!r} matches the empty string",
                        expected="a pattern that needs at least one character",
                        found=pattern, fix="remove the optional-everything quantifiers")
    return rx


def read_rule_file(path: str | Path) -> list[Rule]:
    """The rules of one ``.tsv`` file (mention or cue table, told by its header)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleError(f"Cannot read the rule file {path}", expected="a UTF-8 text file",
                        found=f"{type(exc).__name__}: {exc}",
                        fix="pass an existing .tsv rule file") from None
    rules: list[Rule] = []
    header = None
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = line.rstrip("\r\n").split("\t")
        where = f"{path}, line {n}"
        if header is None:
            header = tuple(c.strip() for c in cells)
            if header not in (MENTION_HEADER, CUE_HEADER):
                raise RuleError(f"{where}: unknown header {line!r}",
                                expected="'finding<TAB>kind<TAB>pattern' (mention rules) or "
                                "'kind<TAB>position<TAB>pattern' (cue rules)",
                                found=repr(line), fix="start the file with one of the two")
            continue
        if len(cells) != 3 or not cells[2]:
            raise RuleError(f"{where}: expected 3 tab-separated cells",
                            expected="\t".join(header), found=repr(line),
                            fix="separate the cells with one tab each")
        a, b, pattern = cells[0].strip(), cells[1].strip(), cells[2].strip()
        if header == MENTION_HEADER:
            a = ",".join(f.strip() for f in a.split(","))
            bad = [f for f in a.split(",") if f not in FINDINGS]
            if bad:
                raise RuleError(f"{where}: unknown finding {bad[0]!r}",
                                expected=f"one of {FINDINGS} (several: comma separated)",
                                found=repr(a), fix="use a listed finding id")
            if b not in MENTION_KINDS:
                raise RuleError(f"{where}: unknown kind {b!r}", expected=f"one of {MENTION_KINDS}",
                                found=repr(b), fix="use a listed kind")
            rules.append(Rule("mention", b, a, pattern, str(path), n, _compile_one(pattern, where)))
        else:
            if a not in CUE_KINDS:
                raise RuleError(f"{where}: unknown cue kind {a!r}", expected=f"one of {CUE_KINDS}",
                                found=repr(a), fix="use a listed kind")
            if b not in POSITIONS:
                raise RuleError(f"{where}: unknown position {b!r}", expected=f"one of {POSITIONS}",
                                found=repr(b), fix="use pre, post or any")
            rules.append(Rule("cue", a, b, pattern, str(path), n, _compile_one(pattern, where)))
    return rules


def _files(source: str | Path) -> list[Path]:
    source = Path(source)
    if source.is_dir():
        return sorted(source.glob("*.tsv"))
    if not source.is_file():
        raise RuleError(f"No rule file or folder at {source}", expected="a .tsv rule file or "
                        "a folder of them", found="nothing there", fix="check the path")
    return [source]


def load_rules(*sources: str | Path, builtin: bool = True, language: str = "en") -> Rules:
    """The built-in rules of ``language`` (:data:`LANGUAGES`) plus those in ``sources``
    (``.tsv`` files or folders of them).

    >>> load_rules().key.startswith("report-labels-")
    True
    """
    rules: list[Rule] = list(_builtin_rules(_language(language))) if builtin else []
    for source in sources:
        for path in _files(source):
            rules += read_rule_file(path)
    return Rules(rules)


def _language(language: str) -> str:
    if language not in LANGUAGES:
        raise RuleError(f"No built-in rules for language {language!r}",
                        expected=f"one of {tuple(LANGUAGES)}", found=repr(language),
                        fix="pass language='en' (English reports) or 'es' (PadChest's Spanish "
                            "stems), or your own rule files with builtin=False")
    return language


@functools.lru_cache(maxsize=None)
def _builtin_rules(language: str = "en") -> tuple[Rule, ...]:
    folder = LANGUAGES[language]
    return tuple(r for p in sorted(folder.glob("*.tsv")) for r in read_rule_file(p))


@functools.lru_cache(maxsize=None)
def _compiled(language: str) -> Rules:
    return Rules(_builtin_rules(language))


def builtin_rules(language: str = "en") -> Rules:
    """The shipped rule set of ``language``, compiled once: ``"en"`` (the default) for
    English reports, ``"es"`` for PadChest's stemmed Spanish reports
    (``label_reports(texts, rules=builtin_rules("es"))``)."""
    return _compiled(_language(language))


def resolve_rules(rules) -> Rules:
    """``rules=`` of :func:`label_reports`: None (built-in), a :class:`Rules`, or a path /
    list of paths to add to the built-in rules."""
    if rules is None:
        return builtin_rules()
    if isinstance(rules, Rules):
        return rules
    if isinstance(rules, (str, Path)):
        return load_rules(rules)
    if isinstance(rules, (list, tuple)) and all(isinstance(r, (str, Path)) for r in rules):
        return load_rules(*rules)
    raise RuleError("rules= has the wrong type", expected="None, a Rules object (load_rules), "
                    "or a .tsv path / list of paths", found=type(rules).__name__,
                    fix="pass load_rules('my_rules.tsv') or the path itself")
