"""A content-keyed cache of preprocessed images.

Each entry is one file named by the SHA-256 of everything that changes the output: the
image's resolved path, size and modification time, the transform's parameters, the output
dtype and the radharmony version. Entries are written to a temporary file and renamed into
place (atomic on POSIX), carry a CRC-32, and are rebuilt when the check fails. Nothing is
unpickled: an entry is a fixed header, a JSON description and raw array bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
import warnings
import zlib
from pathlib import Path

import numpy as np

from . import __version__

MAGIC = b"RHCACHE1"
_HEAD = struct.Struct("<8sI")  # magic, JSON length
_TAIL = struct.Struct("<I")  # crc32 of JSON + payload


class ImageCache:
    """Stores ``(array, info)`` pairs under ``root`` keyed by file identity and ``params``."""

    def __init__(self, root: str | os.PathLike, params: dict):
        self.root = Path(root)
        self._salt = json.dumps({"params": params, "version": __version__}, sort_keys=True)

    def key(self, path: str | os.PathLike) -> str:
        st = os.stat(path)
        ident = f"{os.path.realpath(path)}\0{st.st_size}\0{st.st_mtime_ns}\0{self._salt}"
        return hashlib.sha256(ident.encode()).hexdigest()

    def _file(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.rhc"

    def load(self, key: str) -> tuple[np.ndarray, dict] | None:
        """The entry for ``key``, or None when absent or failing its check (then removed)."""
        f = self._file(key)
        try:
            blob = f.read_bytes()
        except FileNotFoundError:
            return None
        try:
            magic, n = _HEAD.unpack_from(blob)
            if magic != MAGIC or len(blob) < _HEAD.size + n + _TAIL.size:
                raise ValueError("bad header or truncated")
            body = memoryview(blob)[_HEAD.size:len(blob) - _TAIL.size]
            if zlib.crc32(body) != _TAIL.unpack_from(blob, len(blob) - _TAIL.size)[0]:
                raise ValueError("checksum mismatch")
            info = json.loads(bytes(body[:n]))
            if info.get("key") != key:
                raise ValueError("entry belongs to another key")
            arr = np.frombuffer(body[n:], dtype=info["dtype"]).reshape(info["shape"])
        except (ValueError, KeyError, TypeError, struct.error) as exc:
            warnings.warn(f"Cache entry {f} failed its check ({exc}); rebuilding it.",
                          RuntimeWarning, stacklevel=3)
            f.unlink(missing_ok=True)
            return None
        return arr, info["info"]

    def store(self, key: str, arr: np.ndarray, info: dict) -> None:
        arr = np.ascontiguousarray(arr)
        meta = json.dumps({"key": key, "dtype": arr.dtype.str, "shape": list(arr.shape),
                           "info": info}).encode()
        body = meta + arr.tobytes()
        f = self._file(key)
        f.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=f.parent, prefix=".tmp-", suffix=".rhc")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(_HEAD.pack(MAGIC, len(meta)) + body + _TAIL.pack(zlib.crc32(body)))
            os.replace(tmp, f)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
