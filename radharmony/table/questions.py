"""The question-level part of the one schema validation (``DatasetSpec.row_unit ==
"question"``): one row per VQA question, its images as lists.

:func:`radharmony.table.schema.validate` calls :func:`check_questions` after typing the
columns, so a VQA table read back from CSV or Parquet is checked exactly like a fresh one.
"""

from __future__ import annotations

import operator
import re
from itertools import chain

import pandas as pd

from ..errors import SchemaError
from ..spec import QUESTION_COLUMNS
from .paths import all_plainly_clean

#: the values of ``answer_format``
ANSWER_FORMATS = ("closed", "open", "mcq")
OPTION = re.compile(r"([A-Z])\. ")


def _fail(source: str, i: int, qid, what: str, expected: str, found: str, fix: str):
    raise SchemaError(f"{source}: row {i} (question {qid!r}) {what}", expected=expected,
                      found=found[:200], fix=fix)


def check_spec(spec) -> None:
    """A question-level spec declares every :data:`QUESTION_COLUMNS` with its type."""
    for col, kind in QUESTION_COLUMNS.items():
        if col not in spec.extra_cols or spec.column_types.get(col, "text") != kind:
            raise SchemaError(f"dataset {spec.key!r} is question-level but does not declare "
                              f"column {col!r} ({kind})", expected=f"{col!r} in extra_cols "
                              "with its type", found=f"extra_cols={list(spec.extra_cols)}",
                              fix="build the spec with radharmony.vqa.vqa_spec")


def duplicate_question(ids: list, source: str) -> None:
    """Refuse a question id that occurs twice, naming both occurrences."""
    if len(set(ids)) == len(ids):  # the common case, at C speed
        return
    first: dict = {}
    for i, q in enumerate(ids):
        j = first.setdefault(q, i)
        if j != i:
            n = len(ids) - len(set(ids))
            raise SchemaError(f"{source}: question_id {q!r} occurs twice, at rows {j} and {i}",
                              expected="one row per question id",
                              found=f"{n} repeated question id(s); first {q!r} at rows {j} "
                                    f"and {i}", fix="remove or rename the repeated question")


def check_questions(out: pd.DataFrame, spec, source: str, check_path) -> pd.DataFrame:
    """Check the question columns of the typed table ``out`` (in place) and return it.

    ``check_path(path, where)`` is the schema's relative-path check for each listed image. A
    table that passes the column-wise checks (the common case) is not walked row by row; one
    that fails them is, and the first faulty row is named.
    """
    check_spec(spec)
    ids = out["question_id"].tolist()
    cols = [ids, *(out[c].tolist() for c in ("answer_format", "options", "answer_letter",
                                             "image_paths", "view_positions", "image_path"))]
    if not _plainly_valid(*cols):
        _first_fault(*cols, source=source, check_path=check_path)
    if "ref_image_paths" in out.columns:
        for i, (q, r) in enumerate(zip(ids, out["ref_image_paths"].tolist())):
            if r is None:
                continue
            if not isinstance(r, list):
                _fail(source, i, q, "has a ref_image_paths that is not a list",
                      "a list of image paths, or missing", repr(r), "harmonize again")
            for path in r:
                check_path(path, where=f"{source}, row {i}")
    return out


#: "A. ", "B. ", ... : the prefixes of normalised options
_PREFIXES = [f"{chr(65 + k)}. " for k in range(26)]
_BY_N = [_PREFIXES[:n] for n in range(27)]  # n options -> their prefixes
_LAST = [None, *(p[0] for p in _PREFIXES)]  # n options -> the last letter
_LETTERS = frozenset(p[0] for p in _PREFIXES)


def _plainly_valid(ids, fmts, opts, letters, paths, views, keys) -> bool:
    """True when every question passes :func:`_first_fault`'s checks, checked column-wise
    (each distinct image path once); False when any may not (the caller then looks row by
    row)."""
    if pd.api.types.infer_dtype(ids, skipna=False) != "string" or not all(ids) or \
            any(map(str.isspace, ids)) or len(set(ids)) != len(ids):
        return False
    if not set(fmts) <= set(ANSWER_FORMATS):
        return False
    try:
        for fmt, o, letter in zip(fmts, opts, letters) if set(fmts) != {"mcq"} else ():
            if fmt == "mcq":  # str.startswith raises TypeError on a non-text option
                n = len(o)
                if type(o) is not list or not n or not all(map(str.startswith, o, _BY_N[n])) \
                        or not (type(letter) is str and len(letter) == 1 and
                                "A" <= letter <= _PREFIXES[n - 1][0]):
                    return False
            elif not (o is None or o == []) or letter is not None:
                return False
        if set(fmts) == {"mcq"} and not _all_mcq_valid(opts, letters):
            return False
        if paths and (set(map(type, paths)) != {list} or not all(map(len, paths))):
            return False
        if not all_plainly_clean(list(set().union(*paths))):
            return False
    except (TypeError, AttributeError, IndexError):  # a non-text option, 27 options, ...
        return False
    return (not views or set(map(type, views)) == {list}) and \
        list(map(len, views)) == list(map(len, paths)) and \
        all(map(list.__contains__, paths, keys))


def _all_mcq_valid(opts, letters) -> bool:
    """:func:`_plainly_valid`'s check of multiple-choice questions, over whole columns at C
    speed: options lists of 1-26 texts ``"A. "``, ``"B. "``, ... in order, a letter among them."""
    if set(map(type, opts)) != {list} or not set(letters) <= _LETTERS:
        return False
    n = list(map(len, opts))
    if not all(n) or max(n) > 26:
        return False
    return all(map(str.startswith, chain.from_iterable(opts),
                   chain.from_iterable(map(_BY_N.__getitem__, n)))) and \
        all(map(operator.le, letters, map(_LAST.__getitem__, n)))


def _first_fault(ids, fmts, opts, letters, paths, views, keys, *, source: str,
                 check_path) -> None:
    """Walk the questions row by row and raise naming the first faulty one."""
    for i, q in enumerate(ids):
        if not isinstance(q, str) or not q.strip():
            _fail(source, i, q, "has no question_id", "a non-empty question id", repr(q),
                  "fix or drop that question")
    duplicate_question(ids, source)
    for i, (q, fmt, o, letter, p, v, key) in enumerate(zip(ids, fmts, opts, letters, paths,
                                                          views, keys)):
        if fmt not in ANSWER_FORMATS:
            _fail(source, i, q, f"has answer_format {fmt!r}", f"one of {ANSWER_FORMATS}",
                  repr(fmt), "harmonize again with the dataset's harmonizer")
        o = [] if o is None else o
        if not isinstance(o, list) or (fmt == "mcq") != bool(o) or any(
                not isinstance(x, str) or not OPTION.match(x) or x[0] != chr(65 + k)
                for k, x in enumerate(o)):
            _fail(source, i, q, "has options that are not normalised",
                  "for mcq a list 'A. ...', 'B. ...' in order; [] otherwise",
                  f"answer_format={fmt!r}, options={o!r}", "normalise them with "
                  "radharmony.vqa.normalise_options")
        if fmt == "mcq":
            valid = {x[0] for x in o}
            got = letter.split(",") if isinstance(letter, str) else [letter]
            if not all(g in valid for g in got):
                _fail(source, i, q, f"has answer letter {letter!r} outside its options",
                      f"one of {sorted(valid)}", f"{letter!r} with options {o!r}",
                      "check the question's correct answer in the source file")
        elif letter is not None:
            _fail(source, i, q, "has an answer letter but no options", "answer_letter None "
                  "unless answer_format is 'mcq'", repr(letter), "harmonize again")
        if not isinstance(p, list) or not p:
            _fail(source, i, q, "has no image list", "a non-empty list in image_paths",
                  repr(p), "check the question's images in the source file")
        for path in p:
            check_path(path, where=f"{source}, row {i}")
        if not isinstance(v, list) or len(v) != len(p) or key not in p:
            _fail(source, i, q, "has images and views that do not match",
                  "view_positions as long as image_paths, and image_path one of them",
                  f"{len(p)} images, views {v!r}, key {key!r}", "harmonize again")
