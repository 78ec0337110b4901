"""The record: one row of a mixture's ``records.parquet``, the contract every part of the
mixture wing shares (tasks write it, the build draws and splits it, the formats, the dataset and
the viewer read it; nothing downstream re-opens a dataset's metadata).

Columns (:data:`RECORD_SCHEMA`, in this order):

* ``record_id`` -- 16 hex digits, :func:`record_id` of what identifies the record (source name,
  task, the source item's id, the prompt variant): adding a source never renumbers another.
* ``task`` -- the task's registry name; ``family`` -- its family (``reports``, ``labels``,
  ``views``, ``vqa``, ``matching``, ``grounding``, ``temporal``, ``text``).
* ``source`` -- the spec's name of the source (default: its dataset key); ``dataset`` -- the
  dataset key; ``source_split`` -- the split the source was drawn from.
* ``split`` -- the mixture's own split (``train`` / ``valid``), drawn by patient.
* ``patient_id`` -- the patient in the source's identity family namespace
  (``"<family>:<id>"``), the unit of hold-out and of the split.
* ``study_id``, ``sample_id`` -- the source study and the source item (image ``sample_id``,
  study id, or question id) the record came from.
* ``image_paths`` -- the record's images, paths relative to the source's root (the
  ``image_path`` values of the harmonized table; ``mixture.json`` gives each source's root);
  empty for a text-only record. ``views`` -- each image's canonical view.
* ``prompt`` / ``target`` -- the user turn (without image tokens: each format adds its own)
  and the answer; ``prompt_variant`` -- which paraphrase was chosen.
* ``fields`` -- JSON text of the task's structured fields (labels, options, answer, boxes in
  source pixels, sections, prior inputs, ``silver``, ...): :func:`fields_of` reads it.

``mixture.json`` beside it (:data:`MANIFEST_NAME`) holds, at least: ``format``
(:data:`MANIFEST_FORMAT`), ``radharmony_version``, ``name``, ``seed``, ``spec`` (the resolved
spec), ``images`` (``{"mode": "original"}`` or ``{"mode": "cache", "size": 224}``), ``boxes``
(the dialect), ``sources`` (a list of ``{"name", "dataset", "root", "split", "kwargs",
"inputs"}``: ``root`` absolute, ``inputs`` each input file's identity), ``hold_out``, ``counts``
(a list of ``{"source", "task", "split", "records"}``), ``excluded`` (a list of ``{"source",
"task", "reason", "records"}``), ``counted`` (records kept but counted by what they lack,
e.g. ``without_prior``), ``readers`` (the multi-reader box choice), ``target_lengths`` (per
task, a histogram ``[[tokens, records], ...]`` of the targets' whitespace-token lengths:
:mod:`radharmony.mixture.lengths`) and ``records`` (the total). :func:`read_manifest` reads it and
:func:`source_roots` gives each source's root.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from pathlib import Path

import orjson
import pyarrow as pa
import xxhash

from ..errors import RadHarmonyError

RECORD_SCHEMA = pa.schema([
    ("record_id", pa.string()),
    ("task", pa.string()),
    ("family", pa.string()),
    ("source", pa.string()),
    ("dataset", pa.string()),
    ("source_split", pa.string()),
    ("split", pa.string()),
    ("patient_id", pa.string()),
    ("study_id", pa.string()),
    ("sample_id", pa.string()),
    ("image_paths", pa.list_(pa.string())),
    ("views", pa.list_(pa.string())),
    ("prompt", pa.string()),
    ("target", pa.string()),
    ("prompt_variant", pa.int16()),
    ("fields", pa.string()),
])
RECORD_COLUMNS = tuple(RECORD_SCHEMA.names)
RECORDS_NAME = "records.parquet"
MANIFEST_NAME = "mixture.json"
MANIFEST_FORMAT = "radharmony-mixture"
#: the mixture's own splits
MIXTURE_SPLITS = ("train", "valid")


def record_id(source: str, task: str, item: str, variant: int = 0) -> str:
    """The stable id of a record: 16 hex digits of xxh3-64 over its identifying parts."""
    key = "\x1f".join((source, task, str(item), str(int(variant))))
    return xxhash.xxh3_64_hexdigest(key.encode("utf-8"))


def fields_json(fields: dict) -> str:
    """``fields`` as canonical JSON text (sorted keys, no spaces: the same bytes every time).

    Fields of text, booleans, None and 64-bit integers (in lists and dicts keyed by text) are
    written by orjson, whose bytes for them are the standard encoder's; anything else (a
    float: orjson writes ``1e-5`` where Python writes ``1e-05``; numpy values) by the standard
    encoder."""
    if _orjson_ready(fields, 0):
        try:
            return orjson.dumps(fields, option=orjson.OPT_SORT_KEYS).decode()
        except orjson.JSONEncodeError:  # a lone surrogate: the standard encoder decides
            pass
    return _ENCODER.encode(fields)


class _Omit:
    """The type of :data:`OMIT`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "OMIT"


#: a value of :func:`fields_json_rows`'s columns that leaves its key out of that record
OMIT = _Omit()


def fields_json_rows(columns: dict) -> list[str]:
    """:func:`fields_json` of each record of ``columns`` (key -> one value per record, lists
    of one length; a value :data:`OMIT` leaves the key out of that record), the same text.

    What decides orjson's path is checked once per column, and the text is written column
    by column (:func:`_texts`: text needing no escape, lists of it, integers, booleans and
    None with no call per value) and joined per record in sorted key order (orjson's: code
    point order), no dict per record. A column orjson cannot write (a float, a lone
    surrogate, numpy values, ...) sends the records to :func:`fields_json`."""
    try:
        if not (set(map(type, columns)) <= _TEXT_KEYS
                and all(_column_ready(v) for v in columns.values())):
            raise TypeError("not orjson's")
        keys = sorted(columns)
        heads = [_texts([k]) for k in keys]
        parts = [_texts(columns[k]) for k in keys]
    except TypeError:  # orjson.JSONEncodeError is one
        return [fields_json({k: v for k, v in zip(columns, values) if v is not OMIT})
                for values in zip(*columns.values())]
    if not keys:
        return []
    heads = [f"{a}{t[0]}{b}:{a_}" for (a, t, b), (a_, _, _) in zip(heads, parts)]
    if not any(OMIT in t for _, t, _ in parts):  # OMIT compares by identity only
        template = "{" + ",".join(h.replace("%", "%%") + "%s" + b.replace("%", "%%")
                                  for h, (_, _, b) in zip(heads, parts)) + "}"
        return [template % t for t in zip(*(t for _, t, _ in parts))]
    return ["{" + ",".join([h + x + b for h, x, (_, _, b) in zip(heads, t, parts)
                            if x is not OMIT]) + "}"
            for t in zip(*(t for _, t, _ in parts))]


#: a character JSON text escapes (or orjson refuses: a lone surrogate)
_ESCAPED = re.compile('["\\\x00-\x1f\ud800-\udfff]')


def _plain_text(text: str) -> bool:
    """Whether JSON text writes ``text`` as is between quotes (no character escaped, no lone
    surrogate): printable text without a quote or backslash is (a quick look first)."""
    if '"' not in text and "\\" not in text and text.isprintable():
        return True
    return not _ESCAPED.search(text)


_CONSTANTS = {True: "true", False: "false", None: "null"}


def _texts(values: list) -> tuple[str, list, str]:
    """``(opening, texts, closing)``: each value's JSON text as orjson writes it inside a
    record is ``opening + text + closing`` (:data:`OMIT` stays OMIT). For orjson-ready values
    (:func:`_column_ready`); a lone surrogate raises ``orjson.JSONEncodeError``."""
    kinds = set(map(type, values))
    given = values if _Omit not in kinds else [v for v in values if v is not OMIT]
    kinds.discard(_Omit)

    def each(text) -> list:
        return list(map(text, values)) if given is values else \
            [v if v is OMIT else text(v) for v in values]

    if kinds <= _TEXT_KEYS and _plain_text("".join(given)):
        return '"', values, '"'
    if kinds <= _SEQUENCES and all(given):
        items = list(itertools.chain.from_iterable(given))
        if set(map(type, items)) <= _TEXT_KEYS and _plain_text("".join(items)):
            return '["', each('","'.join), '"]'
    if kinds <= {int}:
        return "", each(str), ""
    if kinds <= {bool, type(None)}:
        return "", each(_CONSTANTS.__getitem__), ""
    return "", each(lambda v: orjson.dumps(v, option=orjson.OPT_SORT_KEYS).decode()), ""


def fields_of(text: str | None) -> dict:
    """The ``fields`` column's JSON text back as a dict (``{}`` for empty)."""
    return json.loads(text) if text else {}


def _plain(value):
    """numpy scalars and arrays as plain JSON values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


_SCALARS = frozenset({str, bool, type(None)})
_TEXT_KEYS = frozenset({str})
_SEQUENCES = frozenset({list, tuple})
_LEAVES = _SCALARS | {int}
#: what a value may be for orjson to write it
_CONTAINED = _LEAVES | _SEQUENCES | {dict}
#: the integers orjson writes (64 bits, signed or not)
_INT_MIN, _INT_END = -2**63, 2**64


def _orjson_ready(value, depth: int) -> bool:
    """Whether orjson writes ``value`` as the standard encoder does: text, booleans, None and
    integers of 64 bits, in lists, tuples and text-keyed dicts (at most 4 deep)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if kind is int:
        return _INT_MIN <= value < _INT_END
    if depth > 3:
        return False
    if kind is dict:
        if not set(map(type, value)) <= _TEXT_KEYS:
            return False
        items = value.values()
    elif kind is list or kind is tuple:
        items = value
    else:
        return False
    kinds = set(map(type, items))
    if kinds <= _SCALARS:
        return True
    if int in kinds and not all(_INT_MIN <= v < _INT_END for v in items if type(v) is int):
        return False
    return kinds <= _LEAVES or all(_orjson_ready(v, depth + 1) for v in items
                                   if type(v) not in _LEAVES)  # only the containers


def _column_ready(values: list) -> bool:
    """:func:`_orjson_ready` of every value of a record's key (:data:`OMIT` aside): the
    items of the lists, tuples and dicts checked together, as one list one level down."""
    found = set(map(type, values))
    kinds = found - {_Omit}
    if kinds <= _SCALARS:
        return True
    if not kinds <= _CONTAINED:
        return False
    if int in kinds and not all(_INT_MIN <= v < _INT_END for v in values if type(v) is int):
        return False
    if kinds <= _LEAVES:
        return True
    seqs = values if found <= _SEQUENCES else [v for v in values if type(v) in _SEQUENCES]
    dicts = values if found == {dict} else [v for v in values if type(v) is dict]
    if not set(map(type, itertools.chain.from_iterable(dicts))) <= _TEXT_KEYS:
        return False
    return _orjson_ready(list(itertools.chain(
        itertools.chain.from_iterable(seqs),
        itertools.chain.from_iterable(map(dict.values, dicts)))), 1)


#: one encoder for every record (json.dumps with options builds a new one per call)
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                            allow_nan=False, default=_plain)


def read_manifest(out: str | os.PathLike) -> dict:
    """The ``mixture.json`` of the mixture folder ``out``."""
    return read_format(Path(out) / MANIFEST_NAME, MANIFEST_FORMAT,
                       what="the mixture manifest", expected=f"a folder written by radharmony "
                       f"mix build, holding {MANIFEST_NAME} and {RECORDS_NAME}",
                       fix="run `radharmony mix build SPEC OUT` first, or check the path")


def read_format(path: Path, fmt: str, *, what: str, expected: str, fix: str) -> dict:
    """The JSON file ``path`` of ``format`` ``fmt`` (``what`` it is, for the errors: what a
    readable one is and how to ``fix`` it)."""
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RadHarmonyError(f"Cannot read {what} {path}", expected=expected,
                              found=f"{type(exc).__name__}: {exc}", fix=fix) from None
    if not isinstance(found, dict) or found.get("format") != fmt:
        got = found.get("format") if isinstance(found, dict) else type(found).__name__
        raise RadHarmonyError(f"{path} is not {what}", expected=f"format {fmt!r}",
                              found=repr(got), fix=fix)
    return found


def source_roots(manifest: dict) -> dict[str, str]:
    """source name -> the absolute root its ``image_paths`` are relative to."""
    return {s["name"]: s["root"] for s in manifest.get("sources", [])}
