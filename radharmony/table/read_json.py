"""Reading JSON metadata: large files with bare ``NaN``, side files and JSON Lines.

With :mod:`orjson` installed, bare ``NaN`` values after a space that end a line (the indented
form datasets ship, e.g. ReXGradient's ``"PatientWeight": NaN,``) are read as ``None``; a raw
newline cannot occur inside a JSON string, so text that merely contains "NaN" is never
touched. Any other non-strict content (``Infinity``, compact files) falls back to the standard
library parser, which returns such values as floats (``nan``, ``inf``). Harmonizers treat ``None`` and NaN alike (missing).

With :mod:`msgspec` installed, ``load_json(..., entry_fields=...)`` parses a top-level object
of objects into records holding only the named fields (the rest is skipped unparsed);
:func:`entry_columns` reads fields column-wise from records and dicts alike.
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any

from ..errors import MetadataError, MetadataNotFoundError, shorten

try:
    import orjson
except ImportError:  # optional speed-up; the stdlib parser gives the same values
    orjson = None
try:
    import msgspec
except ImportError:  # optional: entry_fields then give plain dicts
    msgspec = None

#: what may follow a bare `` NaN`` for it to be rewritten: the end of its line
_LINE_ENDS = (b",\n", b"\n", b",\r\n", b"\r\n")


def load_json(path: str | os.PathLike, *, counted: tuple[str, ...] = (),
              entry_fields: tuple[str, ...] | None = None, raw_fields: tuple[str, ...] = ()):
    """Parse the JSON file at ``path``; raises ``ValueError`` (or ``UnicodeDecodeError``).

    ``entry_fields``: for a top-level object of objects (ReXGradient's studies), keep only
    these keys of each entry, as records (:func:`is_record`; a key an entry lacks reads as
    None) instead of dicts: with :mod:`msgspec` installed the other keys are skipped unparsed,
    which halves the parse of a large file and the time to free it. Read the fields with
    :func:`entry_columns`. Plain dicts come back when msgspec is absent or the file is not an
    object of objects (callers handle both). ``raw_fields`` (among ``entry_fields``) are kept
    unparsed, as views into the file's bytes (which they keep alive), for :func:`decoded_all` to
    parse where needed (e.g. once per study of a file repeating a study's fields in every
    entry).

    A JSON object with a repeated key loses all but the last value in every JSON reader. For
    each name in ``counted`` (a key of the entries of a top-level object or list, e.g.
    ReXGradient's ``"ImagePath"``) the raw occurrences of ``"name"`` are counted (one byte
    scan) and compared with the parsed entries holding it; only when they disagree is the file
    parsed again recording every object's keys, and a repeated key raises a
    :class:`MetadataError` naming the key and the file.
    """
    return _load(_read_bytes(path), path, counted, entry_fields, raw_fields)


#: where one top-level entry ends and the next begins in an object written with a two-space
#: indent (``json.dump(obj, fh, indent=2)``): the indent gives the depth, and a JSON string
#: holds no raw newline, so nothing else matches
_ENTRY_END = b'\n  },\n  "'
#: bytes of the file :func:`iter_json_entries` reads at a time
CHUNK_BYTES = 64 << 20


def iter_json_entries(path: str | os.PathLike, *, entry_fields: tuple[str, ...],
                      raw_fields: tuple[str, ...] = (), counted: tuple[str, ...] = (),
                      chunk_bytes: int | None = None, reuse_buffer: bool = False):
    """:func:`load_json` of a large top-level object a chunk of entries at a time: yields
    ``{key: record}`` dicts (plain dicts without msgspec), holding about ``chunk_bytes`` of the
    file at once instead of all of it. Chunks are cut between entries of an object written
    with a two-space indent (ReXGradient's and ReXVQA's files); any other file comes whole, in
    one piece. A key repeated *across* chunks is the caller's to find.

    ``reuse_buffer``: read every chunk into one buffer (no fresh memory, and its page faults,
    per chunk); the ``raw_fields`` values of a chunk then hold only until the next chunk is
    asked for, so the caller parses them first (:func:`decoded_all`).
    """
    chunk_bytes = chunk_bytes or CHUNK_BYTES
    with open(path, "rb") as fh:
        rest = fh.read(5)
        if rest != b'{\n  "' or msgspec is None:
            yield load_json(path, counted=counted, entry_fields=entry_fields,
                            raw_fields=raw_fields)
            return
        buf = bytearray()
        while True:  # each piece read straight into the buffer (records keep views of it)
            have = len(rest)
            if not reuse_buffer or len(buf) < have + chunk_bytes + 2:  # + 2: for "\n}"
                buf = bytearray(have + chunk_bytes + 2)
            buf[:have] = rest  # same length: never resized (records may hold views of it)
            with memoryview(buf) as view, view[have:have + chunk_bytes] as into:
                n = fh.readinto(into)
            end = have + n
            if n:
                cut = buf.rfind(_ENTRY_END, 0, end)
                if cut < 0:  # no entry ends in it yet: read on
                    rest = bytes(buf[:end])
                    continue
                rest = b"{\n" + buf[cut + 6:end]  # '  "<next key>": ...' (< an entry)
                buf[cut + 4:cut + 6] = b"\n}"  # after the entry's closing brace, the object's
                end = cut + 6
            yield _load(buf, path, counted, entry_fields, raw_fields, end)
            if not n:
                return


def _load(data: bytearray, path, counted, entry_fields, raw_fields, end: int | None = None):
    """Parse ``data[:end]`` (all of it when ``end`` is None); see :func:`load_json`."""
    end = len(data) if end is None else end
    raw = {name: data.count(b'"' + name.encode() + b'"', 0, end) for name in counted}
    if entry_fields and msgspec is not None:
        parsed = _parse_records(data, end, tuple(entry_fields), tuple(raw_fields))
        if parsed is not None:
            records, entries = parsed
            if entries != len(records):  # a key of the top-level object repeats
                _raise_repeated_keys(path, data[:end])
            elif all(raw[name] == sum(1 for e in records.values()
                                      if getattr(e, name, None) is not None)
                     for name in counted):
                return records  # else a repeated or null key: the full parse below tells
    if end != len(data):
        data = data[:end]
    parsed = _parse(data)
    for name in counted:
        entries = parsed.values() if isinstance(parsed, dict) else \
            parsed if isinstance(parsed, list) else ()
        have = sum(1 for e in entries if isinstance(e, dict) and name in e)
        if raw[name] != have:
            _raise_repeated_keys(path, data)
    if entry_fields and isinstance(parsed, dict):  # entries keyed by id: a repeated id?
        _raise_repeated_keys(path, data, top_only=True)
    return parsed


def _raise_repeated_keys(path, data: bytearray, *, top_only: bool = False) -> None:
    """Raise naming the keys any object of ``data`` repeats (``top_only``: the outermost
    object's); nothing when none does."""
    repeated: list[str] = []

    def pairs_hook(pairs):
        obj = dict(pairs)
        found = [] if top_only else repeated
        if len(obj) != len(pairs):
            seen: set = set()
            for k, _ in pairs:
                if k in seen and len(found) < 5:
                    first = next(((a, b) for a, b in pairs if isinstance(b, str)), None)
                    where = f" (in the object whose first text field is {first[0]}="\
                        f"{shorten(repr(first[1]), 60)})" if first else ""
                    found.append(f"{shorten(repr(k), 240)}{where}")
                seen.add(k)
        if top_only:  # the outermost object is the last one finished
            repeated[:] = found
        return obj

    json.loads(data, object_pairs_hook=pairs_hook)
    if repeated:
        raise MetadataError(f"{path}: a JSON object repeats a key", expected="each key once "
                            "per object (a JSON reader keeps only the last value, so images "
                            "would be lost)", found="repeated key " + "; ".join(repeated),
                            fix="merge the repeated entries into one (or re-download the file)")


def _read_bytes(path) -> bytearray:
    with open(path, "rb") as fh:
        data = bytearray(os.fstat(fh.fileno()).st_size)
        del data[fh.readinto(data):]
    return data


def _rewrite_nan(data: bytearray, start: int = 0, end: int | None = None) -> bool:
    """In place and length-preserving (" NaN" -> "null"), in one pass over ``data[start:end]``:
    no copy of a 400 MB file; only where the line ends after it (a JSON string holds no raw
    newline). True when anything was rewritten."""
    end = len(data) if end is None else end
    i, done = data.find(b" NaN", start, end), False
    while i >= 0:
        if data.startswith(_LINE_ENDS, i + 4, end):
            data[i:i + 4], done = b"null", True
        i = data.find(b" NaN", i + 4, end)
    return done


def _parse(data: bytearray):
    if orjson is not None:
        _rewrite_nan(data)
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # e.g. compact files with bare constants: the stdlib parser accepts them
    try:
        return json.loads(data)
    except RecursionError:  # arrays or objects nested about a thousand deep
        raise ValueError("JSON nested deeper than the parser's recursion limit") from None


#: entries the record decoders built, per thread (see :func:`_decoder`)
_BUILT = threading.local()


def _built(_record) -> None:
    _BUILT.n += 1


@functools.lru_cache(maxsize=None)
def _decoder(fields: tuple[str, ...], raw: tuple[str, ...] = ()):
    """A decoder of ``{key: record}``; each record built counts itself in ``_BUILT.n``, so
    a top-level key that repeats (the decoded dict keeps one entry of the two) shows."""
    record = msgspec.defstruct("Record", [(f, msgspec.Raw if f in raw else Any, None)
                                          for f in fields], gc=False,
                               namespace={"__post_init__": _built})
    return msgspec.json.Decoder(dict[str, record])


def decoded_all(values: list) -> list:
    """The values, those :func:`load_json` kept unparsed (``raw_fields``) parsed -- together,
    in one call; the others as they are (also what a reader without msgspec returns)."""
    if msgspec is None:
        return list(values)
    raw, kinds = msgspec.Raw, set(map(type, values))
    if kinds == {raw}:  # every value unparsed (the common case): no per-value work
        return msgspec.json.decode(b"[" + b",".join(values) + b"]")  # Raw: a buffer
    if raw not in kinds:
        return list(values)
    blob = b",".join([v if type(v) is raw else b"0" for v in values])
    parsed = msgspec.json.decode(b"[" + blob + b"]")
    return [p if isinstance(v, raw) else v for p, v in zip(parsed, values)]


def _parse_records(data: bytearray, end: int, fields: tuple[str, ...],
                   raw: tuple[str, ...] = ()) -> tuple[dict, int] | None:
    """``({key: record}, entries decoded)`` of the top-level object of objects in
    ``data[:end]``, or None when it is not one (or holds non-strict JSON): the caller then
    parses it in full. The records' raw fields are views of ``data``."""
    view = memoryview(data)[:end]
    if not data.isascii():  # msgspec skips the fields it does not keep without checking them
        try:
            str(view, "utf-8")
        except UnicodeDecodeError:
            return None  # the full parse names the line
    decode = _decoder(fields, raw).decode
    for attempt in range(2):
        _BUILT.n = 0
        try:  # strict JSON first: msgspec refuses a bare NaN anywhere, skipped fields
            return decode(view), _BUILT.n  # included, so a file it reads has none to rewrite
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            at = _MALFORMED_AT.search(str(exc))  # where it stopped: no bare NaN before that
        if attempt or not _rewrite_nan(data, max(0, int(at.group(1)) - 8) if at else 0, end):
            return None  # not a bare NaN: the full parse names the fault
    return None


#: the byte offset in msgspec's "JSON is malformed: ... (byte 123)"
_MALFORMED_AT = re.compile(r"\(byte (\d+)\)")


def is_record(entry) -> bool:
    """True for an entry :func:`load_json` returned as a record (``entry_fields``)."""
    return hasattr(type(entry), "__struct_fields__")


def entry_columns(entries: list, names: tuple[str, ...]) -> dict[str, list]:
    """``{name: [value of each entry]}`` over dicts or records (None where absent, and for an
    entry that is neither): a C-level pass per name when every entry has every name."""
    out: dict[str, list] = {n: [] for n in names}
    extend_columns(out, entries, names)
    return out


def extend_columns(columns: dict[str, list], entries: list, names: tuple[str, ...]) -> None:
    """Append each entry's value of every name to ``columns[name]`` (see
    :func:`entry_columns`)."""
    if not entries:
        return
    get = attrgetter if is_record(entries[0]) else itemgetter
    for n in names:
        col = columns[n]
        start = len(col)
        try:
            col.extend(map(get(n), entries))
        except (KeyError, AttributeError, TypeError):  # an entry without it, or not one
            del col[start:]
            col.extend(e.get(n) if isinstance(e, dict) else getattr(e, n, None)
                       if is_record(e) else None for e in entries)


def read_json_file(path: str | os.PathLike, *, what: str):
    """Parse a (small) JSON side file; invalid JSON raises a :class:`MetadataError` naming the
    file, the position and what it should hold. Bare ``NaN`` is accepted."""
    try:
        with open(path, "rb") as fh:
            return json.load(fh)  # the stdlib parser accepts the bare NaN these files hold
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # Recursion: nested deep
        raise MetadataError(f"{path} is not valid JSON", expected=what, found=str(exc),
                            fix="re-download the metadata file") from None


def read_jsonl(path: str | os.PathLike, *, what: str = "one JSON object per line") -> list:
    """One parsed object per line; ``None`` for a blank line, so ``result[i]`` is line i+1. A
    line that is not JSON raises a :class:`MetadataError` naming the file and line."""
    out = []
    with open(path, "rb") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                out.append(None)
                continue
            try:
                out.append(json.loads(line))
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                raise MetadataError(f"{path}, line {n}: is not valid JSON", expected=what,
                                    found=f"{type(exc).__name__}: {shorten(exc, 100)}",
                                    fix="re-download the file; do not edit it by hand"
                                    ) from None
    return out


def read_coco(path: str | os.PathLike, *, description: str) -> dict:
    """Parse a COCO JSON file; it must be an object with ``images``, ``annotations`` and
    ``categories`` lists."""
    path = Path(path)
    if not path.is_file():
        raise MetadataNotFoundError(description, [path], fix="check the csv_path argument")
    try:
        data = load_json(path)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MetadataError(f"{path} is not valid JSON", expected=description,
                            found=f"{type(exc).__name__}: {str(exc)[:120]}", fix="re-download the file") from None
    if not isinstance(data, dict) or not all(
            isinstance(data.get(k), list) for k in ("images", "annotations", "categories")):
        found = sorted(data)[:10] if isinstance(data, dict) else type(data).__name__
        raise MetadataError(f"{path} is not a COCO detection file", expected="an object with "
                            "'images', 'annotations' and 'categories' lists", found=repr(found),
                            fix=f"pass {description}")
    return data
