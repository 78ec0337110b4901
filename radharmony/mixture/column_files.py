"""A mixture column's random rows read by ``pread``: :class:`ColumnFile`.

A batch takes a few dozen rows scattered over a column of millions. Read through a memory map,
each of those rows faults in the file's pages around it: on current kernels (large page-cache
folios) about 1-2 MB per row, which count as the process's own (private clean) memory until
another process touches the same pages -- a 64-record batch of a 15 M-record mixture maps
about 1 GB per process. ``pread`` copies only the bytes asked for out of the page cache, which
every rank and worker on the machine shares: nothing is mapped, nothing counts as the
process's memory, and the file is still read from the cache once.

Whole-column scans (the sampler's codes, ``select``) keep the memory map: they read every page
once, sequentially, and the pages are shared.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import numpy as np

from ..errors import RadHarmonyError


class ColumnFile:
    """One 1-D ``.npy`` column read by ``pread``: ``col[rows]`` (an int array), ``col[i]``,
    ``col[a:b]``, :meth:`pairs` (``col[rows]`` and ``col[rows + 1]`` in one read per row) and
    :meth:`span` (the raw bytes of items ``a`` to ``b``). The descriptor is opened on first
    use in each process (a pickled column reopens it; a forked one shares it: ``pread`` has
    no file position).

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "c.npy"
    >>> np.save(path, np.arange(10, dtype=np.int64) * 3)
    >>> col = ColumnFile(path)
    >>> col[np.array([7, 2, 7])].tolist(), int(col[4]), col[8:].tolist(), len(col)
    ([21, 6, 21], 12, [24, 27], 10)
    >>> [a.tolist() for a in col.pairs(np.array([0, 8]))]
    [[0, 24], [3, 27]]
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._fd: int | None = None
        self._pid = None
        fd = self.fd
        try:
            stream = io.BytesIO(os.pread(fd, 65536, 0))
            major, _ = np.lib.format.read_magic(stream)
            read_header = np.lib.format.read_array_header_1_0 if major == 1 else \
                np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(stream)
        except (OSError, ValueError) as exc:
            raise RadHarmonyError(f"Cannot read the mixture column {self.path}",
                                  expected="a .npy file written by radharmony mix build",
                                  found=f"{type(exc).__name__}: {exc}",
                                  fix="rebuild the mixture (radharmony mix build)") from None
        if len(shape) != 1 or fortran or dtype.hasobject:
            raise RadHarmonyError(f"The mixture column {self.path} is not a flat array",
                                  expected="a 1-D .npy array", found=f"shape {shape}, {dtype}",
                                  fix="rebuild the mixture (radharmony mix build)")
        self.dtype, self.size, self.offset = dtype, int(shape[0]), stream.tell()
        self.shape = (self.size,)

    @property
    def fd(self) -> int:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError as exc:
                raise RadHarmonyError(f"Cannot open the mixture column {self.path}",
                                      expected="the file radharmony mix build wrote",
                                      found=f"{type(exc).__name__}: {exc}",
                                      fix="rebuild the mixture (radharmony mix build)") from None
        return self._fd

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_fd": None}  # each process opens its own descriptor

    def __del__(self):
        fd = getattr(self, "_fd", None)
        if fd is not None:
            try:
                os.close(fd)
            except OSError:
                pass

    def __len__(self) -> int:
        return self.size

    def _read(self, start: int, count: int) -> np.ndarray:
        width = self.dtype.itemsize
        data = os.pread(self.fd, count * width, self.offset + start * width)
        if len(data) != count * width:
            raise RadHarmonyError(f"The mixture column {self.path} is shorter than its header "
                                  "says", expected=f"{self.size} values",
                                  found=f"{len(data)} bytes at value {start}",
                                  fix="rebuild the mixture (radharmony mix build)")
        return np.frombuffer(data, self.dtype)

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, step = key.indices(self.size)
            if step != 1:
                return self[np.arange(start, stop, step)]
            return self._read(start, max(0, stop - start))
        if isinstance(key, (int, np.integer)):
            i = int(key) + (self.size if key < 0 else 0)
            if not 0 <= i < self.size:
                raise IndexError(f"row {int(key)} of a column of {self.size}")
            return self._read(i, 1)[0]
        rows = np.asarray(key, np.int64).reshape(-1)
        return self._gather(rows, 1)[:, 0] if len(rows) else np.zeros(0, self.dtype)

    def pairs(self, rows) -> tuple[np.ndarray, np.ndarray]:
        """``(col[rows], col[rows + 1])``: an offsets column's starts and ends, one read per
        row."""
        rows = np.asarray(rows, np.int64).reshape(-1)
        if not len(rows):
            return np.zeros(0, self.dtype), np.zeros(0, self.dtype)
        both = self._gather(rows, 2)
        return both[:, 0].copy(), both[:, 1].copy()

    def _gather(self, rows: np.ndarray, width: int) -> np.ndarray:
        """``(len(rows), width)``: ``width`` consecutive values from each row (rows checked)."""
        if rows.min() < 0 or rows.max() + width > self.size:
            raise IndexError(f"rows {int(rows.min())}..{int(rows.max())} (+{width - 1}) of a "
                             f"column of {self.size}")
        out = np.empty((len(rows), width), self.dtype)
        for k, r in enumerate(rows.tolist()):
            out[k] = self._read(r, width)
        return out

    def searchsorted(self, values, *, fence: int = 4096) -> np.ndarray:
        """``np.searchsorted(col, values)`` of a sorted column (side ``left``): each value's
        block found among every ``fence``-th value (read once, kept), then that one block
        read and searched: two reads per value, nothing mapped.

        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "s.npy"
        >>> np.save(path, np.arange(0, 30000, 3, dtype=np.int64))
        >>> ColumnFile(path).searchsorted(np.array([0, 3, 4, 29997, 40000]), fence=7).tolist()
        [0, 1, 2, 9999, 10000]
        """
        values = np.asarray(values).reshape(-1)
        fences = getattr(self, "_fences", None)
        if fences is None or fences[0] != fence:
            fences = self._fences = (fence, self[::fence] if self.size else
                                     np.zeros(0, self.dtype))
        marks = fences[1]
        out = np.empty(len(values), np.int64)
        for k, v in enumerate(values.tolist()):
            b = int(np.searchsorted(marks, v, side="left"))  # marks[b-1] < v <= marks[b]
            lo = max(0, (b - 1) * fence)
            hi = min(self.size, b * fence + 1)
            out[k] = lo + int(np.searchsorted(self._read(lo, hi - lo), v, side="left"))
        return out

    def span(self, start: int, stop: int) -> bytes:
        """The raw bytes of values ``start`` to ``stop`` (a UTF-8 column's text)."""
        width = self.dtype.itemsize
        return os.pread(self.fd, (stop - start) * width, self.offset + start * width)


__all__ = ["ColumnFile"]
