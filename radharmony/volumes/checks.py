"""Hounsfield units: the rescale applied exactly once, and a histogram that says it went right.

:func:`apply_rescale` turns stored values into ``stored x slope + intercept`` in one pass,
writing straight into the canonical (contiguous) output: int16 when the slope and intercept are
integers and every result fits int16 (CT; computed in wrapping int16 arithmetic, exact whenever
the true result fits), the stored type when there is nothing to apply, float32 otherwise.

:func:`check_hu` refuses a CT volume whose histogram says the rescale went wrong:

- **below range**: values under :data:`HU_FLOOR` (−3024, the lowest padding value scanners
  write; air is −1000): a rescale applied twice, or a wrong intercept (−8192 for −1024);
- **air not near −1000**: the lowest populated part of the histogram (padding excluded: the
  minimum when it lies below the air range as one exact value covering ≥ 1 % of the voxels;
  air itself is noisy) must lie within
  :data:`AIR` — a chest or body CT always holds air (lungs, outside the body). Stored values
  that were never rescaled put air at 0 or +1024; a second rescale puts it at −2024.
"""

from __future__ import annotations

import mmap

import numpy as np

from .. import threads
from ..errors import RadHarmonyError
from ..imaging.pages import POPULATE_WRITE, map_ahead

#: the lowest value a CT in Hounsfield units holds (pixel padding; air is -1000)
HU_FLOOR = -3024
#: where the air peak of a CT in Hounsfield units lies
AIR = (-1100.0, -800.0)
_I16 = np.iinfo(np.int16)
#: arrays from this many bytes are mapped whole (:func:`allocate`)
_MAPPED = 1 << 24
#: private (copy-on-write) anonymous memory: ``mmap``'s default is shared, i.e. shmem pages,
#: which fault in at about half the speed
_PRIVATE = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
#: volumes up to this many voxels are checked whole, larger ones on a 1/128 subsample
_SAMPLE = 1 << 22
#: a volume of this many bytes or more is read or reordered by two threads (where torch's
#: thread count allows: one inside a DataLoader worker)
SPLIT_BYTES = 1 << 22


class HounsfieldError(RadHarmonyError, ValueError):
    """A CT volume's values are not Hounsfield units (rescale missing, doubled or wrong)."""


def allocate(shape, dtype, *, populate: bool | str = True) -> np.ndarray:
    """An uninitialised C-contiguous array for a whole volume, its pages mapped in one call
    (private anonymous ``mmap`` + ``MADV_POPULATE_WRITE`` where the kernel has it): on
    virtual machines page faults one by one cost as much as decoding the volume, and private
    pages populate at about twice the speed of the shared (shmem) pages ``mmap`` gives by
    default. Transparent huge pages are not asked for: where free memory is fragmented the
    kernel compacts it first (seconds). ``populate=False`` for a size only a header vouches
    for: pages then come as the data fills them. ``populate="ahead"`` for an array the caller
    fills from the start: a second thread maps the pages meanwhile, ahead of it
    (:func:`~radharmony.imaging.pages.map_ahead`)."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes < _MAPPED:
        return np.empty(shape, dtype=dtype)
    block = mmap.mmap(-1, nbytes, flags=_PRIVATE) if _PRIVATE else mmap.mmap(-1, nbytes)
    if populate == "ahead":
        array = np.frombuffer(block, dtype=dtype).reshape(shape)
        map_ahead(array)        # nothing written: the caller need not wait for it
        return array
    if populate:
        try:
            block.madvise(POPULATE_WRITE)
        except (OSError, ValueError):   # an older kernel: pages come on first touch
            pass
    return np.frombuffer(block, dtype=dtype).reshape(shape)


def apply_rescale(stored: np.ndarray, slope: float | None, intercept: float | None, *,
                  bounds: tuple[int, int] | None = None) -> np.ndarray:
    """``stored x slope + intercept`` as a C-contiguous array (``stored`` may be any view:
    transposed, flipped). No rescale (``slope`` None, or 1 and 0): ``stored`` itself when it is
    already C-contiguous, writable and native, else a contiguous copy in the stored type.
    A C-contiguous, writable 2-byte ``stored`` is rescaled to int16 in place (the bytes are
    reused: the caller must not keep using ``stored``). ``bounds``: the stored values' known
    range (DICOM's ``BitsStored``), sparing a pass over the voxels."""
    slope = 1.0 if slope is None else float(slope)
    intercept = 0.0 if intercept is None else float(intercept)
    own = stored.flags.c_contiguous and stored.flags.writeable and stored.dtype.isnative
    if (slope, intercept) == (1.0, 0.0):
        if own:
            return stored                  # already the canonical layout (decoded for us)
        out = allocate(stored.shape, stored.dtype.newbyteorder("="))
        np.copyto(out, stored)
        return out
    if stored.dtype.kind in "iub" and fits_int16(stored, slope, intercept, bounds):
        if own and stored.dtype.itemsize == 2:
            out = stored.view(np.int16)    # the same bits: a modular cast, exact as below
        else:
            out = allocate(stored.shape, np.int16)
            np.copyto(out, stored, casting="unsafe")   # modular: exact when the result fits
        return rescale_int16(out, slope, intercept)
    out = allocate(stored.shape, np.float32)
    np.copyto(out, stored, casting="unsafe")
    if slope != 1:
        out *= np.float32(slope)
    if intercept:
        out += np.float32(intercept)
    return out


def as_hu(array: np.ndarray) -> np.ndarray:
    """A CT's integer array as int16 when its values fit (unsigned stored values with no
    rescale), else as it is."""
    if array.dtype == np.int16 or array.dtype.kind not in "iu" or array.size == 0:
        return array
    if array.min() >= _I16.min and array.max() <= _I16.max:
        out = allocate(array.shape, np.int16)
        np.copyto(out, array, casting="unsafe")
        return out
    return array


def int16_exact(slope: float, intercept: float, bounds: tuple[int, int]) -> bool:
    """Whether every stored value within ``bounds`` rescales to an exact int16."""
    slope, intercept = float(slope), float(intercept)
    if not (slope.is_integer() and intercept.is_integer()) or abs(slope) > _I16.max:
        return False
    ends = np.array(bounds, dtype=np.float64) * slope + intercept
    return bool(ends.min() >= _I16.min and ends.max() <= _I16.max)


def rescale_int16(out: np.ndarray, slope: float, intercept: float) -> np.ndarray:
    """``out`` (int16, holding the stored bits) x slope + intercept in place, in wrapping
    int16 arithmetic: exact whenever the true result fits int16."""
    if slope != 1:
        np.multiply(out, np.int16(slope), out=out, casting="unsafe")
    if intercept:
        np.add(out, np.int16(intercept), out=out, casting="unsafe")
    return out


def fits_int16(stored: np.ndarray, slope: float, intercept: float, bounds=None) -> bool:
    """Whether ``stored`` x slope + intercept is an exact int16 for every value: from
    ``bounds`` or the stored type's range when they tell, else from the data's own range."""
    slope, intercept = float(slope), float(intercept)
    if not (slope.is_integer() and intercept.is_integer()) or abs(slope) > _I16.max or \
            abs(intercept) > 1 << 20:
        return False
    info = np.iinfo(stored.dtype) if stored.dtype.kind in "iu" else np.iinfo(np.uint8)
    if any(int16_exact(slope, intercept, b) for b in [bounds, (info.min, info.max)] if b):
        return True
    if stored.size == 0:
        return True
    ends = np.array([stored.min(), stored.max()], dtype=np.float64) * slope + intercept
    return bool(ends.min() >= _I16.min and ends.max() <= _I16.max)


def check_hu(array: np.ndarray, where: object) -> None:
    """Raise :class:`HounsfieldError` naming ``where`` when ``array`` (a CT, rescaled) does
    not look like Hounsfield units (see the module text). A subsample of the voxels is read
    of a large volume (every 2nd slice, every 8th row and column) make the histogram; the
    minimum is exact."""
    if array.size == 0:
        return
    low = float(minimum(array))
    if low < HU_FLOOR:
        raise HounsfieldError(
            f"{where}: values below {HU_FLOOR} HU: not Hounsfield units",
            expected=f"a CT in HU (air -1000, nothing below {HU_FLOOR})",
            found=f"minimum {low:g}",
            fix="the rescale was applied twice or with a wrong intercept (e.g. the metadata's "
                "RescaleIntercept applied to a file already in HU): apply it exactly once")
    sample = (array if array.size <= _SAMPLE else array[::2, ::8, ::8]).ravel()
    air = _air_level(sample)
    if air is not None and not AIR[0] <= air <= AIR[1]:
        cause = ("the stored values were never rescaled (pass the RescaleSlope/RescaleIntercept "
                 "of the series' metadata)" if air > AIR[1] else
                 "the rescale was applied twice or with a wrong intercept")
        raise HounsfieldError(
            f"{where}: the air in this CT is not near -1000 HU",
            expected=f"the lowest populated HU range (air) within {AIR[0]:g}..{AIR[1]:g}",
            found=f"air at about {air:g} (minimum {low:g})",
            fix=cause + "; or pass check=False for a volume without air (a phantom, a mask)")


def minimum(array: np.ndarray):
    """``array.min()``, a large C-contiguous volume's halves read by two threads (where
    torch's thread count allows: one inside a DataLoader worker)."""
    if array.ndim == 0 or array.nbytes < SPLIT_BYTES or not array.flags.c_contiguous:
        return array.min()
    lows = []
    threads.split(lambda a, b: lows.append(array[a:b].min()), len(array), 2)
    return min(lows)


def _air_level(sample: np.ndarray) -> float | None:
    """The lowest value range holding >= 0.5 % of ``sample`` (padding excluded), as the
    middle of its 25-HU bin; None when nothing is left."""
    low = sample.min()
    padding = low < AIR[0] and np.count_nonzero(sample == low) >= 0.01 * sample.size
    if padding:
        sample = sample[sample != low]
    if sample.size == 0:
        return None
    low = HU_FLOOR - 25
    bins = (33000 - low) // 25
    if sample.dtype.kind in "iu":   # the same counts as the histogram below, ~3x faster
        index = (sample.astype(np.int32) - low) // 25
        counts = np.bincount(index[(index >= 0) & (index < bins)], minlength=bins)
    else:
        counts, _ = np.histogram(sample, bins=bins, range=(low, low + 25 * bins))
    dense = np.flatnonzero(counts >= 0.005 * sample.size)
    if dense.size == 0:
        return None
    return float(low + 25 * dense[0] + 12.5)
