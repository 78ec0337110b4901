"""Model presets: each 3-D model's input exactly, one small declarative record per model.

A :class:`Preset` turns a canonical volume (int16 HU, :mod:`radharmony.volumes`) into the
float32 array a model consumes, in two steps:

1. **geometry, in HU** (cached): reorient (flips and transposes), clip first where the model's
   own code clips before resampling, crop the foreground (M3D), resample to a spacing or a
   size, round to whole HU (int16: at most 0.5 HU off, the source's own precision), then
   pad and centre-crop to the model's size with the HU that maps to the model's pad value;
2. **intensity** (on every read, exact): the HU window (or the volume's min-max, or its
   percentiles, recorded in step 1) mapped linearly to the model's range, clipped.

Step 1's output is cached, keyed by the volume's key and the whole preset record
(:func:`preset_array`): a changed preset or changed resampling code never serves an old
array. The presets (``docs/volumes.md`` gives each model's source):

======== ============ ======================= =================== ==================
preset   orientation  spacing (mm), grid      size                intensity
======== ============ ======================= =================== ==================
ct_clip  canonical    1.5 x 0.75 x 0.75, zoom (240, 480, 480)     HU [-1000, 1000] / 1000, pad -1
merlin   RAS          1.5 x 1.5 x 3, grid     (224, 224, 160)     HU [-1000, 1000] -> [0, 1], pad 0
m3d      canonical    --                      (32, 256, 256)      min-max -> [0, 1], foreground crop
radfm    canonical    --                      (D, 512, 512) -> (3, 512, 512, D), D = 4..64 step 4
reference I, P, L     --                      longest side 112    0.5-99.5 percentiles -> [-1, 1], pad -1
======== ============ ======================= =================== ==================

Example::

    >>> PRESETS["merlin"].size
    (224, 224, 160)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .. import threads
from ..errors import RadHarmonyError, check_choice
from ..imaging import jit
from .cache import READER_SOURCES, VolumeCache
from .geometry import orient
from .resample import crop_or_pad_slices, grid_size, resample_spacing, resize
from .volume import CANONICAL_AXES, Volume

#: the code a preset's cached array depends on (the readers', and this)
PRESET_SOURCES = READER_SOURCES + ("volumes/resample.py", "volumes/presets.py")
WINDOWS = ("hu", "minmax", "percentile")
FITS = ("crop_or_pad", "resize", "longest", "depth_steps")


@dataclass(frozen=True)
class Preset:
    """A model's input contract. Spatial tuples follow the output's axes (``orientation``).

    ``window``: "hu" maps HU ``[lo, hi]`` to ``out``; "minmax" the volume's range;
    "percentile" its ``lo``-th and ``hi``-th percentiles. ``clip_first``: clip to the window
    before resampling (the model's code does) rather than after. ``fit``: "crop_or_pad" to
    ``size`` after resampling to ``spacing``; "resize" to ``size``; "longest": the longest
    side to ``size[0]``, then pad to the cube; "depth_steps": in-plane ``size[1:]``, depth
    rounded down to a multiple of 4 within [4, 64] (RadFM). ``layout``: "CDHW" or "CHWD".
    """

    name: str
    orientation: str = "".join(CANONICAL_AXES)
    spacing: tuple[float, float, float] | None = None
    convention: str = "grid"
    size: tuple[int, int, int] = (0, 0, 0)
    fit: str = "crop_or_pad"
    window: str = "hu"
    lo: float = -1000.0
    hi: float = 1000.0
    out: tuple[float, float] = (0.0, 1.0)
    clip: bool = True
    clip_first: bool = False
    pad: float = 0.0
    foreground: bool = False
    channels: int = 1
    layout: str = "CDHW"

    def __post_init__(self):
        check_choice("window", self.window, WINDOWS)
        check_choice("fit", self.fit, FITS)
        check_choice("layout", self.layout, ("CDHW", "CHWD"))

    def record(self) -> dict:
        """Every field, as the cache keys it."""
        return dataclasses.asdict(self)

    # -- step 1: geometry in HU -------------------------------------------------------------
    def geometry(self, volume: Volume) -> tuple[np.ndarray, dict]:
        """``(int16 array, info)``: the volume resampled, cropped and padded, in HU; ``info``
        holds the window in HU, the output's affine (LPS, output axes) and the source's
        (``source_affine``, ``source_shape``: annotations on the source's voxels are carried
        onto the output's by the two, :class:`~radharmony.volumes.placement.VolumeGrid`)."""
        source = volume.in_space("LPS")
        array, affine = orient(source.array, source.affine, self.orientation)
        lo, hi = self._window(array)
        maps = [(1.0, 0.0)] * 3  # output index i -> oriented index scale * i + offset
        if self.clip_first and self.clip:
            array = _clip(array, lo, hi)
        if self.foreground:
            array, maps = self._crop_foreground(array, lo, maps)
        spacing = np.linalg.norm(affine[:3, :3], axis=0)
        array, maps = self._resample(array, spacing, maps)
        array = np.clip(np.rint(array), -32768, 32767).astype(np.int16)
        if self.fit in ("crop_or_pad", "longest"):
            size = self.size if self.fit == "crop_or_pad" else (self.size[0],) * 3
            crop, pad = crop_or_pad_slices(array.shape, size)
            pad_hu = np.floor(lo + (self.pad - self.out[0]) / (self.out[1] - self.out[0])
                              * (hi - lo))
            array = np.pad(array, pad, constant_values=int(max(pad_hu, -32768)))[crop]
            maps = [(s, o + s * (c.start - p[0])) for (s, o), c, p in zip(maps, crop, pad)]
        out = affine.copy()
        for k, (s, o) in enumerate(maps):
            out[:3, 3] += affine[:3, k] * o
            out[:3, k] = affine[:3, k] * s
        return np.ascontiguousarray(array), {"lo": float(lo), "hi": float(hi),
                                             "affine": out.tolist(),
                                             "source_affine": source.affine.tolist(),
                                             "source_shape": list(source.shape)}

    def _window(self, array: np.ndarray) -> tuple[float, float]:
        if self.window == "hu":
            return self.lo, self.hi
        if self.window == "minmax":
            return float(array.min()), float(array.max())
        lo, hi = np.percentile(array, [self.lo, self.hi])
        return float(lo), float(hi)

    def _crop_foreground(self, array, lo, maps):
        """The bounding box of voxels above ``lo`` (MONAI ``CropForeground`` after min-max:
        values > 0), the whole volume when there are none."""
        found = np.nonzero(array > lo)
        if not len(found[0]):
            return array, maps
        box = tuple(slice(int(f.min()), int(f.max()) + 1) for f in found)
        return array[box], [(s, o + b.start) for (s, o), b in zip(maps, box)]

    def _resample(self, array, spacing, maps):
        if self.spacing is not None:
            out = resample_spacing(array, spacing, self.spacing, convention=self.convention)
            if self.convention == "grid":
                scales = [t / s for s, t in zip(spacing, self.spacing)]
                return out, [(s * r, o) for (s, o), r in zip(maps, scales)]
        else:
            out = resize(array, self._size(array.shape))
        scales = [n / m for n, m in zip(array.shape, out.shape)]  # align_corners=False
        return out, [(s * r, o + s * (r / 2 - 0.5)) for (s, o), r in zip(maps, scales)]

    def _size(self, shape: Sequence[int]) -> tuple[int, int, int]:
        if self.fit == "longest":
            scale = self.size[0] / max(shape)
            return tuple(int(round(n * scale)) for n in shape)
        if self.fit == "depth_steps":
            return (min(64, max(4, shape[0] // 4 * 4)), *self.size[1:])
        return self.size

    # -- step 2: intensity ------------------------------------------------------------------
    def finish(self, array: np.ndarray, info: dict) -> np.ndarray:
        """The model's float32 input from step 1's ``(array, info)``: ``(C, D, H, W)`` or, for
        layout "CHWD", ``(C, H, W, D)``."""
        return self.intensity(info)(array)

    def intensity(self, info: dict) -> "IntensityMap":
        """Step 2 for the volume whose step 1 gave ``info``, as a value: applied to the
        cached int16 array (NumPy) or to a tensor on any device, the same float32 result."""
        a, b = self.out
        lo, hi = info["lo"], info["hi"]
        scale = (b - a) / (hi - lo) if hi > lo else 0.0
        return IntensityMap(scale=float(np.float32(scale)),
                            offset=float(np.float32(a - lo * scale)),
                            bounds=(min(a, b), max(a, b)) if self.clip else None,
                            layout=self.layout, channels=self.channels)

    def apply(self, volume: Volume) -> np.ndarray:
        """The model's input for ``volume``, uncached."""
        return self.finish(*self.geometry(volume))


#: float32 bytes of one slab of step 2 (multiply, add and clip done while it is in cache)
_SLAB = 1 << 20


@dataclass(frozen=True)
class IntensityMap:
    """A preset's step 2 for one volume (:meth:`Preset.intensity`): int16 HU -> float32
    ``x * scale + offset`` (``scale`` and ``offset`` are float32 values: the product rounded
    to float32, then the sum), clipped to ``bounds`` when set, depth moved last for layout
    "CHWD", a leading channel axis (``channels`` copies). Called on a NumPy array it runs a
    slab at a time; on a ``torch`` tensor (any device, e.g. after copying the int16 values to
    the GPU: half the bytes of float32) the same operations in the same order, so the values
    are the same float32 numbers.

    >>> m = IntensityMap(scale=0.0005, offset=0.5, bounds=(0.0, 1.0), layout="CDHW", channels=1)
    >>> m(np.array([[[-2000, -1000, 0, 1000, 3000]]], dtype=np.int16)).tolist()
    [[[[0.0, 0.0, 0.5, 1.0, 1.0]]]]
    """
    scale: float
    offset: float
    bounds: tuple[float, float] | None
    layout: str = "CDHW"
    channels: int = 1

    def __call__(self, values):
        if isinstance(values, np.ndarray):
            out = self._numpy(values)
            if self.layout == "CHWD":
                out = np.ascontiguousarray(out.transpose(1, 2, 0))
            return np.broadcast_to(out, (self.channels, *out.shape)).copy() \
                if self.channels > 1 else out[None]
        import torch

        out = values.to(torch.float32) * torch.tensor(self.scale, dtype=torch.float32)
        out += torch.tensor(self.offset, dtype=torch.float32, device=out.device)
        if self.bounds is not None:
            out.clamp_(*self.bounds)
        if self.layout == "CHWD":
            out = out.permute(1, 2, 0).contiguous()
        return out[None].expand(self.channels, *out.shape).contiguous() \
            if self.channels > 1 else out[None]

    def _numpy(self, array: np.ndarray) -> np.ndarray:
        """The map in slabs shared by two threads where torch's thread count allows (one in a
        DataLoader worker): an int16 volume by the compiled kernel (one pass), else by
        :meth:`_numpy_steps` a slab of :data:`_SLAB` bytes at a time (its steps in cache)."""
        out = np.empty(array.shape, dtype=np.float32)
        kernel = _map_kernel() if array.dtype == np.int16 and array.ndim == 3 else None
        step = 1 if kernel is not None else max(1, _SLAB // max(1, out[0].nbytes))
        lo, hi = self.bounds or (0.0, 0.0)

        def work(first: int, stop: int) -> None:     # slabs [first, stop)
            if kernel is not None:
                kernel(array, out, np.float32(self.scale), np.float32(self.offset),
                       np.float32(lo), np.float32(hi), self.bounds is not None, first, stop)
                return
            for k in range(first * step, min(stop * step, len(out)), step):
                self._numpy_steps(array[k:k + step], out[k:k + step])

        threads.split(work, -(-len(out) // step), 2 if out.nbytes >= 2 * _SLAB else 1)
        return out

    def _numpy_steps(self, array: np.ndarray, out: np.ndarray) -> None:
        """``out`` = the map of ``array`` in NumPy: multiply, add, clip."""
        np.multiply(array, np.float32(self.scale), out=out)
        out += np.float32(self.offset)
        if self.bounds is not None:
            np.clip(out, *self.bounds, out=out)


def _map_kernel():
    return jit.loaded("intensity-map", _load_map_kernel)


def _load_map_kernel():
    module = jit.kernels("_intensity_jit")
    if module is None:
        return None
    return jit.compile_checked(
        module.intensity_map, _map_exact, what="intensity map",
        differs="it mapped an int16 value to other float32 bits than NumPy",
        instead="NumPy maps the intensities: the same values, about 2x slower")


def _map_exact(kernel) -> bool:
    """Whether ``kernel`` gives NumPy's bits for every int16 value (read-only, as a cache
    entry is), with and without clipping, for the presets' kinds of scale and offset."""
    values = np.arange(-32768, 32768, dtype=np.int16).reshape(4, 128, 128)
    values.flags.writeable = False
    for scale, offset, bounds in ((1 / 2000, 0.5, (0.0, 1.0)), (1 / 1000, 0.0, (-1.0, 1.0)),
                                  (1 / 4096.5, 0.123, None)):
        imap = IntensityMap(float(np.float32(scale)), float(np.float32(offset)), bounds)
        expected, got = np.empty(values.shape, np.float32), np.empty(values.shape, np.float32)
        imap._numpy_steps(values, expected)
        lo, hi = bounds or (0.0, 0.0)
        kernel(values, got, np.float32(imap.scale), np.float32(imap.offset), np.float32(lo),
               np.float32(hi), bounds is not None, 0, len(values))
        if not np.array_equal(got.view(np.int32), expected.view(np.int32)):
            return False
    return True


def _clip(array: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """``array`` clipped to ``[lo, hi]`` without widening it: in its integer type when both
    bounds are whole numbers (a window in HU), else in float32 (percentiles); numpy would
    make float64, four times an int16 volume."""
    if np.issubdtype(array.dtype, np.integer) and float(lo).is_integer() and \
            float(hi).is_integer():
        limits = np.iinfo(array.dtype)
        return np.clip(array, array.dtype.type(max(lo, limits.min)),
                       array.dtype.type(min(hi, limits.max)))
    return np.clip(array.astype(np.float32, copy=False), np.float32(lo), np.float32(hi))


PRESETS = {p.name: p for p in (
    # CT-CLIP: clip, / 1000, F.interpolate to int(n * spacing / target), centre crop / pad -1
    Preset("ct_clip", spacing=(1.5, 0.75, 0.75), convention="zoom", size=(240, 480, 480),
           out=(-1.0, 1.0), clip_first=True, pad=-1.0),
    # Merlin (MONAI): Orientation RAS, Spacing 1.5 x 1.5 x 3, window to [0, 1], pad, crop
    Preset("merlin", orientation="RAS", spacing=(1.5, 1.5, 3.0), size=(224, 224, 160),
           pad=0.0),
    # M3D-LaMed: min-max to [0, 1], foreground crop, resize to 32 x 256 x 256
    Preset("m3d", size=(32, 256, 256), fit="resize", window="minmax", clip=False,
           foreground=True),
    # RadFM: 3 x 512 x 512 x D, D a multiple of 4 in [4, 64]
    Preset("radfm", size=(0, 512, 512), fit="depth_steps", clip_first=True, channels=3,
           layout="CHWD"),
    # the reference library's RadiologyTransform3D defaults: axcodes "IPL", percentiles
    # 0.5-99.5 to [-1, 1], longest side 112 (trilinear), pad -1 to the cube
    Preset("reference", orientation="IPL", size=(112, 112, 112), fit="longest",
           window="percentile", lo=0.5, hi=99.5, out=(-1.0, 1.0), clip_first=True, pad=-1.0),
)}


def get_preset(name: str | Preset) -> Preset:
    """The preset called ``name`` (a :class:`Preset` passes through)."""
    if isinstance(name, Preset):
        return name
    if name not in PRESETS:
        raise RadHarmonyError(f"Unknown volume preset {name!r}", expected=", ".join(PRESETS),
                              found=repr(name), fix="pass one of those names, or a Preset")
    return PRESETS[name]


def preset_array(cache: VolumeCache, preset: str | Preset, inputs, params: dict,
                 load: Callable[[], Volume], *, with_info: bool = False,
                 intensity: str = "exact"):
    """``preset``'s input for the volume of ``inputs``: its geometry step cached (keyed by
    the volume's inputs and parameters and the whole preset record), the canonical volume
    cached too (a second preset of the same volume does not read the file again).
    ``with_info``: return ``(array, info)``, ``info`` holding the HU window and the output's
    LPS ``affine`` (:meth:`Preset.geometry`).

    ``intensity="deferred"``: instead of the float32 input, ``(values, intensity_map)``: the
    cached int16 geometry (half the bytes to move to the device) and the
    :class:`IntensityMap` that turns it, or a tensor of it on any device, into exactly the
    float32 input ``"exact"`` returns.

    >>> values, to_input = preset_array(cache, "merlin", inputs, params, load,
    ...                                 intensity="deferred")               # doctest: +SKIP
    >>> batch = to_input(torch.from_numpy(values).to("cuda"))           # doctest: +SKIP
    """
    check_choice("intensity", intensity, ("exact", "deferred"))
    preset = get_preset(preset)
    array, info = cache.fetch(inputs, {"volume": params, "preset": preset.record()},
                              lambda: preset.geometry(cache.get(inputs, params, load)),
                              sources=PRESET_SOURCES, flat=True)
    # the entry read in place: the intensity map reads the file's pages; deferred, a copy
    out = preset.finish(array, info) if intensity == "exact" else \
        (np.array(array), preset.intensity(info))
    return (out, info) if with_info else out


__all__ = ["PRESETS", "PRESET_SOURCES", "IntensityMap", "Preset", "get_preset",
           "preset_array"]
