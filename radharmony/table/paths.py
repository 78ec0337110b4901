"""Image paths in tables: the one check that a path is relative and stays inside the image
root (:func:`check_relative_path`), and its fast pre-checks."""

from __future__ import annotations

import posixpath
import re
from itertools import repeat
from operator import itemgetter

from ..errors import PathSafetyError, SchemaError


def plainly_clean(p: str) -> bool:
    """True when ``p`` is certainly a clean relative POSIX path (normpath would keep it); a
    fast pre-check, False for anything doubtful (which then goes through the full check)."""
    return not (not p or p[0] in "/ " or p[-1] in "/ " or "\\" in p or "//" in p or
                "/." in p or p[:2] in ("./", "..") or p == "." or p[1:2] == ":" or
                "\x00" in p)


def all_plainly_clean(paths: list) -> bool:
    """``all(map(plainly_clean, paths))``, with whole-column checks at C speed: the first,
    second and last characters as sets, the substrings per path (each path in full only
    when a first, second or last character is doubtful)."""
    if not paths:
        return True
    if set(map(type, paths)) != {str} or not all(paths):
        return False
    if set(map(itemgetter(0), paths)) & {"/", " ", "."} or \
            set(map(itemgetter(-1), paths)) & {"/", " "} or \
            ":" in set(map(itemgetter(slice(1, 2)), paths)):
        return all(map(plainly_clean, paths))
    return not (any(map(_EMPTY_OR_DOT_PART.search, paths)) or
                any(any(map(str.__contains__, paths, repeat(s))) for s in ("\\", "\x00")))


#: ``//`` or ``/.`` (one search per path finds either)
_EMPTY_OR_DOT_PART = re.compile(r"/[/.]")


def check_relative_path(path: object, *, where: str) -> str:
    """``path`` if it is a clean relative POSIX path inside the image root, else raise.

    Refused: non-text or empty values, NUL bytes, absolute paths (POSIX, ``C:``, UNC), and
    paths that leave the root through ``..``. (Symlinks are resolved when the image is read,
    by :func:`radharmony.imaging.read.safe_path`.)
    """
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise SchemaError(f"{where}: image_path is not a path", expected="a non-empty string "
                          "without NUL bytes", found=repr(path)[:120],
                          fix="check the metadata entry for this image")
    norm = posixpath.normpath(path.replace("\\", "/"))
    if norm == ".":
        raise SchemaError(f"{where}: image_path {path!r} names the image root itself",
                          expected="the path of an image file", found=repr(path),
                          fix="check the metadata entry for this image")
    if posixpath.isabs(norm) or norm.startswith("../") or norm == ".." or (
            len(norm) > 1 and norm[1] == ":"):
        raise PathSafetyError(f"{where}: image_path {path!r} leaves base_image_dir",
                              expected="a path relative to base_image_dir without '..'",
                              found=f"{'an absolute' if posixpath.isabs(norm) else 'an escaping'}"
                                    f" path", fix="correct the metadata entry; radharmony never "
                                                  "reads files outside the dataset")
    return norm
