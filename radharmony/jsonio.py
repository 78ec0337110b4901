"""Fast reading of large metadata JSON files that may hold bare ``NaN`` (not strict JSON).

With :mod:`orjson` installed, bare ``NaN``/``Infinity`` values that end a line (the indented
form datasets ship, e.g. ReXGradient's ``"PatientWeight": NaN,``) are read as ``None``; a raw
newline cannot occur inside a JSON string, so text that merely contains "NaN" is never
touched. Any other non-strict content falls back to the standard library parser, which
returns them as ``float('nan')``. Harmonizers treat ``None`` and NaN alike (missing).
"""

from __future__ import annotations

import json
import os

try:
    import orjson
except ImportError:  # optional speed-up; the stdlib parser gives the same values
    orjson = None

_CONSTANTS = (b"-Infinity", b"Infinity", b"NaN")  # longest first: "-Infinity" before "Infinity"


def load_json(path: str | os.PathLike):
    """Parse the JSON file at ``path``; raises ``ValueError`` (or ``UnicodeDecodeError``)."""
    with open(path, "rb") as fh:
        data = fh.read()
    if orjson is not None:
        fast = data
        ends = (b",\n", b"\n", b",\r\n", b"\r\n") if b"\r" in data else (b",\n", b"\n")
        for const in (c for c in _CONSTANTS if c in data):
            for end in ends:
                fast = fast.replace(const + end, b"null" + end)
        try:
            return orjson.loads(fast)
        except orjson.JSONDecodeError:
            del fast  # compact files with bare constants: the stdlib parser accepts them
    return json.loads(data)
