"""Versions that key caches: the package release and the formats its caches depend on.

* :data:`__version__` -- the release.
* :data:`PIPELINE_VERSION` -- the version of the code that turns an image file into the
  stored array (:mod:`radharmony.imaging.read`, :mod:`~radharmony.imaging.geometry`,
  :mod:`~radharmony.imaging.pipeline`) and of the image cache's entry layout. It is part of
  every image cache key, so cached arrays of an older pipeline are never served.
  :data:`PIPELINE_HISTORY` records, for each version, the digest of those modules' code
  (:func:`pipeline_source_digest`; comments, docstrings and formatting do not count); the test
  suite fails when the code's digest is not the newest entry. Changing the pipeline therefore
  means adding a new version with the new digest -- editing an old entry fails the test too.
* :func:`pipeline_digest` -- that digest of the code actually installed, computed once per
  process when the first image cache opens (20-60 ms: six files parsed). It is part of
  every image cache key too, so a user who edits the pipeline in an editable install, or
  installs a fork, never gets arrays the old code made, whether or not the version was bumped.
* Tables are cheap to rebuild: the table cache keys on the digest of the table code itself
  (:func:`source_digest`), so any edit to it rebuilds cached tables.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

__version__ = "0.2.0"

#: the modules (relative to the package) whose code decides an image's cached array
PIPELINE_SOURCES = ("imaging/read.py", "imaging/dicom.py", "imaging/gray.py", "imaging/png.py",
                    "imaging/_png_jit.py", "imaging/geometry.py", "imaging/pipeline.py")
#: version -> :func:`pipeline_source_digest` of that version's code (append, never edit)
PIPELINE_HISTORY = {
    1: "4caa047c0d40",  # first recorded: 8-bit storage, area resize, header guards
    2: "41fceb83c364",  # DICOM without TransferSyntaxUID, to_tensor(out=), messages name imaging.read
    3: "9ecca9d70495",  # to_tensor moved to imaging/convert.py, which no longer keys the cache
    4: "9de521d37769",  # grayscale PNGs decoded by imaging/png.py (OpenCV's arrays, bit for bit)
    5: "0bc3a1a05772",  # DICOM reading moved to imaging/dicom.py: deflated data sets on a budget
    6: "4bdb6706806f",  # colour to gray moved to imaging/gray.py (read.py and dicom.py share it)
}
PIPELINE_VERSION = max(PIPELINE_HISTORY)

_PACKAGE = Path(__file__).resolve().parent


def _canonical(node) -> object:
    """A Python-version-independent form of an AST: node names and non-empty fields, with
    docstrings removed."""
    if isinstance(node, ast.AST):
        fields = []
        for name, value in ast.iter_fields(node):
            if name == "body" and isinstance(value, list) and value and \
                    isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                      ast.AsyncFunctionDef)) and \
                    isinstance(value[0], ast.Expr) and isinstance(value[0].value, ast.Constant) \
                    and isinstance(value[0].value.value, str):
                value = value[1:]  # the docstring
            if value is None or value == [] or name in ("ctx", "kind", "type_comment"):
                continue
            fields.append((name, _canonical(value)))
        return (type(node).__name__, fields)
    if isinstance(node, list):
        return [_canonical(v) for v in node]
    return repr(node)


def pipeline_source_digest(files=PIPELINE_SOURCES) -> str:
    """A 12-hex-digit digest of the code (not comments, docstrings or layout) of ``files``."""
    h = hashlib.sha256()
    for rel in files:
        tree = ast.parse((_PACKAGE / rel).read_text(encoding="utf-8"))
        h.update(rel.encode() + b"\0" + repr(_canonical(tree)).encode() + b"\0")
    return h.hexdigest()[:12]


@functools.cache
def pipeline_digest() -> str:
    """:func:`pipeline_source_digest` of the installed pipeline, once per process; where the
    sources cannot be read or parsed (an install without ``.py`` files), ``"unreadable"``
    (the key then rests on :data:`PIPELINE_VERSION` and the release alone)."""
    try:
        return pipeline_source_digest()
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return "unreadable"


def source_digest(files) -> str:
    """SHA-256 (16 hex digits) of the raw bytes of ``files`` (paths relative to the package);
    a file that cannot be read counts as empty."""
    h = hashlib.sha256()
    for rel in files:
        try:
            data = (_PACKAGE / rel).read_bytes()
        except OSError:
            data = b""
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()[:16]
