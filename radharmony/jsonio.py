"""Fast reading of large metadata JSON files that may hold bare ``NaN`` (not strict JSON).

With :mod:`orjson` installed, bare ``NaN`` values after a space that end a line (the indented
form datasets ship, e.g. ReXGradient's ``"PatientWeight": NaN,``) are read as ``None``; a raw
newline cannot occur inside a JSON string, so text that merely contains "NaN" is never
touched. Any other non-strict content (``Infinity``, compact files) falls back to the standard
library parser, which returns such values as floats (``nan``, ``inf``). Harmonizers treat ``None`` and NaN alike (missing).
"""

from __future__ import annotations

import json
import os

try:
    import orjson
except ImportError:  # optional speed-up; the stdlib parser gives the same values
    orjson = None

_NANS = (b" NaN,\n", b" NaN\n", b" NaN,\r\n", b" NaN\r\n")


def load_json(path: str | os.PathLike):
    """Parse the JSON file at ``path``; raises ``ValueError`` (or ``UnicodeDecodeError``)."""
    with open(path, "rb") as fh:
        data = bytearray(os.fstat(fh.fileno()).st_size)
        del data[fh.readinto(data):]
    if orjson is not None:
        # in place and length-preserving (" NaN" -> "null"): no copy of a 400 MB file
        for pattern in _NANS[:2] if b"\r" not in data else _NANS:
            i = data.find(pattern)
            while i >= 0:
                data[i:i + 4] = b"null"
                i = data.find(pattern, i + 4)
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # e.g. compact files with bare constants: the stdlib parser accepts them
    return json.loads(data)
