"""Target lengths of a mixture: whitespace tokens per record, tallied per task as a histogram
while the build writes ``records.parquet`` (``mixture.json``'s ``target_lengths``), so the
composition plot of millions of records reads a few numbers instead of every target.

A target's length is its number of whitespace-separated tokens (``len(target.split())`` where
the whitespace is ASCII; a missing target counts 0). A histogram is a list of
``[length, records]`` pairs (lengths with at least one record, ascending); :func:`percentiles`
reads it as :func:`numpy.percentile` reads the values it counts.

>>> import pyarrow as pa
>>> tally = LengthTally()
>>> tally.add(pa.array(["a", "a", "b"]), token_counts(pa.array(["no finding", "x y z", "ok"])))
>>> tally.histograms()
{'a': [[2, 1], [3, 1]], 'b': [[1, 1]]}
>>> percentiles([[2, 1], [3, 1]], [0, 50, 100])
[2.0, 2.5, 3.0]
"""

from __future__ import annotations

import numpy as np


def token_counts(strings) -> np.ndarray:
    """Whitespace tokens of each string of a pyarrow string array, vectorized over its bytes:
    a token starts at a byte above the space (32) that begins its string or follows a byte
    at or below it (``len(text.split())`` for text whose whitespace is ASCII; a null: 0)."""
    import pyarrow as pa

    if pa.types.is_large_string(strings.type):
        width = np.int64
    else:
        strings, width = strings.cast(pa.string()), np.int32
    n = len(strings)
    bufs = strings.buffers()
    off = np.frombuffer(bufs[1], width)[strings.offset:strings.offset + n + 1].astype(np.int64)
    counts = np.zeros(n, np.int64)
    if n == 0 or bufs[2] is None or off[-1] == off[0]:
        return counts
    data = np.frombuffer(bufs[2], np.uint8)[off[0]:off[-1]]
    off = off - off[0]
    space = data <= 32
    start = np.zeros(len(data), np.uint8)
    np.greater(space[:-1], space[1:], out=start[1:].view(bool))  # space, then not
    filled = off[:-1] < off[1:]
    heads = off[:-1][filled]
    start[heads] = ~space[heads]  # a string's first byte follows no byte of its own
    counts[filled] = np.add.reduceat(start, heads, dtype=np.int64)
    if strings.null_count:
        counts[~np.asarray(strings.is_valid())] = 0
    return counts


class LengthTally:
    """Per task, how many targets have each length (a growing bincount)."""

    def __init__(self):
        self._bins: dict[str, np.ndarray] = {}

    def add(self, tasks, lengths: np.ndarray) -> None:
        """Count ``lengths`` (int array) under ``tasks`` (a pyarrow string or dictionary
        array, or a sequence of task names, one per length)."""
        import pyarrow as pa

        if not isinstance(tasks, (pa.Array, pa.ChunkedArray)):
            tasks = pa.array(list(tasks), pa.string())
        if isinstance(tasks, pa.ChunkedArray):
            tasks = tasks.combine_chunks()
        if not pa.types.is_dictionary(tasks.type):
            tasks = tasks.dictionary_encode()
        codes = tasks.indices.to_numpy(zero_copy_only=False)
        for i, name in enumerate(tasks.dictionary.to_pylist()):
            self.add_counts(str(name), np.bincount(lengths[codes == i]))

    def add_counts(self, task: str, bins: np.ndarray) -> None:
        """Add a bincount of lengths (``bins[k]`` targets of length ``k``) to ``task``."""
        have = self._bins.get(task)
        if have is None or len(have) < len(bins):
            grown = np.zeros(max(len(bins), 0 if have is None else len(have)), np.int64)
            if have is not None:
                grown[:len(have)] += have
            have = self._bins[task] = grown
        have[:len(bins)] += bins

    def histograms(self) -> dict[str, list]:
        """task -> ``[[length, records], ...]`` (sorted by task)."""
        return {t: histogram(b) for t, b in sorted(self._bins.items())}


def histogram(bins: np.ndarray) -> list:
    """A bincount as ``[[length, records], ...]`` over its non-zero entries."""
    nz = np.flatnonzero(bins)
    return [[int(k), int(bins[k])] for k in nz]


def lengths_histogram(values) -> list:
    """The histogram of an array of lengths."""
    values = np.asarray(values, np.int64)
    return histogram(np.bincount(values)) if len(values) else []


def percentiles(hist: list, qs) -> list[float]:
    """The percentiles ``qs`` (0-100) of the values ``hist`` counts, as :func:`numpy.percentile`
    (linear interpolation) gives them on those values."""
    if not hist:
        return [float("nan")] * len(qs)
    h = np.asarray(hist, np.int64)
    values, ends = h[:, 0].astype(np.float64), np.cumsum(h[:, 1])
    n = int(ends[-1])
    out = []
    for q in qs:
        pos = (n - 1) * float(q) / 100.0
        lo = int(np.floor(pos))
        hi = min(lo + 1, n - 1)
        v_lo = values[np.searchsorted(ends, lo, side="right")]
        v_hi = values[np.searchsorted(ends, hi, side="right")]
        out.append(float(v_lo + (v_hi - v_lo) * (pos - lo)))
    return out


__all__ = ["LengthTally", "histogram", "lengths_histogram", "percentiles", "token_counts"]
