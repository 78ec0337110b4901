"""Presets: each model's input equals its reference pipeline run with MONAI (mean absolute
difference <= 1e-3), and preset outputs are cached, keyed by the preset."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from radharmony.errors import RadHarmonyError
from radharmony.volumes import Volume
from radharmony.volumes.cache import VolumeCache
from radharmony.volumes.presets import PRESETS, Preset, get_preset, preset_array

monai = pytest.importorskip("monai")
pytest.importorskip("blosc2")
from monai.data import MetaTensor  # noqa: E402
from monai.transforms import (CenterSpatialCrop, Compose, CropForeground,  # noqa: E402
                              Orientation, RepeatChannel, Resize, ScaleIntensity,
                              ScaleIntensityRange, ScaleIntensityRangePercentiles, Spacing,
                              SpatialPad)

RAS = np.diag([-1.0, -1.0, 1.0, 1.0])


def fake_ct(shape, spacing, *, seed=0) -> Volume:
    """A chest-like canonical CT (S, P, L) in HU: air, a body, two lungs, a spine, CT noise,
    -1024 outside the scanner's field of view."""
    d, h, w = shape
    rng = np.random.default_rng(seed)
    z, y, x = np.meshgrid(np.linspace(-1, 1, d), np.linspace(-1, 1, h), np.linspace(-1, 1, w),
                          indexing="ij")
    hu = np.full(shape, -1000.0)
    body = (x / 0.85) ** 2 + (y / 0.65) ** 2 < 1 - 0.1 * z ** 2
    hu[body] = 40
    hu[body & (((np.abs(x) - 0.4) / 0.3) ** 2 + (y / 0.45) ** 2 < 1)] = -850
    hu[(x / 0.08) ** 2 + ((y - 0.5) / 0.08) ** 2 < 1] = 900
    hu += rng.normal(0, 15, shape)
    hu[x ** 2 + y ** 2 > 0.98] = -1024
    affine = np.zeros((4, 4))
    affine[2, 0], affine[1, 1], affine[0, 2] = spacing  # canonical: d->+z, h->+y, w->+x
    affine[:3, 3] = (-150.0, -120.0, 35.0)
    affine[3, 3] = 1
    return Volume.from_array(np.rint(hu).astype(np.int16), affine)


def _meta(volume: Volume) -> MetaTensor:
    return MetaTensor(torch.from_numpy(volume.array[None].astype(np.float32)),
                      affine=torch.from_numpy(RAS @ volume.affine))


def _close(ours: np.ndarray, ref) -> None:
    ref = ref.numpy() if hasattr(ref, "numpy") else np.asarray(ref)
    assert ours.dtype == np.float32 and ours.shape == ref.shape
    assert np.abs(ours - ref).mean() <= 1e-3
    assert np.abs(ours - ref).max() <= 5e-3


def test_merlin_equals_its_monai_pipeline():
    vol = fake_ct((80, 300, 320), (3.0, 1.2, 1.2))
    ref = Compose([Orientation("RAS", labels=None), Spacing((1.5, 1.5, 3.0), mode="bilinear"),
                   ScaleIntensityRange(-1000, 1000, 0.0, 1.0, clip=True),
                   SpatialPad((224, 224, 160)), CenterSpatialCrop((224, 224, 160))])
    ours = PRESETS["merlin"].apply(vol)
    assert ours.shape == (1, 224, 224, 160)
    _close(ours, ref(_meta(vol)))


def test_ct_clip_equals_its_reference_steps():
    preset = dataclasses.replace(PRESETS["ct_clip"], size=(60, 120, 120))  # small for tests
    vol = fake_ct((40, 200, 190), (2.5, 0.5, 0.5))
    size = [int(n * s / t) for n, s, t in zip(vol.shape, vol.spacing, preset.spacing)]
    ref = Compose([ScaleIntensityRange(-1000, 1000, -1.0, 1.0, clip=True),
                   Resize(size, mode="trilinear"), SpatialPad(preset.size, value=-1),
                   CenterSpatialCrop(preset.size)])
    _close(preset.apply(vol), ref(torch.from_numpy(vol.array[None].astype(np.float32))))


def test_declared_records_as_the_models_define_them():
    clip, merlin = PRESETS["ct_clip"], PRESETS["merlin"]
    assert (clip.spacing, clip.size, clip.out, clip.pad) == \
        ((1.5, 0.75, 0.75), (240, 480, 480), (-1.0, 1.0), -1.0)
    assert (clip.lo, clip.hi, clip.convention, clip.clip_first) == (-1000, 1000, "zoom", True)
    assert (merlin.orientation, merlin.spacing, merlin.size, merlin.out) == \
        ("RAS", (1.5, 1.5, 3.0), (224, 224, 160), (0.0, 1.0))
    assert PRESETS["m3d"].size == (32, 256, 256) and PRESETS["radfm"].channels == 3


def test_m3d_equals_its_monai_pipeline():
    vol = fake_ct((40, 200, 220), (2.0, 0.8, 0.8))
    vol.array[:, :6] = vol.array.min()  # a background band the foreground crop removes
    ref = Compose([ScaleIntensity(minv=0.0, maxv=1.0), CropForeground(),
                   Resize((32, 256, 256), mode="trilinear")])
    ours = PRESETS["m3d"].apply(vol)
    assert ours.shape == (1, 32, 256, 256)
    _close(ours, ref(torch.from_numpy(vol.array[None].astype(np.float32))))


def test_radfm_equals_its_monai_pipeline():
    vol = fake_ct((10, 160, 150), (5.0, 0.9, 0.9))
    ref = Compose([ScaleIntensityRange(-1000, 1000, 0.0, 1.0, clip=True),
                   Resize((8, 512, 512), mode="trilinear"), RepeatChannel(3)])
    ours = PRESETS["radfm"].apply(vol)
    assert ours.shape == (3, 512, 512, 8)  # D = 10 rounded down to a multiple of 4
    _close(ours, ref(torch.from_numpy(vol.array[None].astype(np.float32))).permute(0, 2, 3, 1))


def test_reference_equals_its_monai_pipeline():
    vol = fake_ct((60, 150, 170), (2.0, 0.7, 0.7))
    ref = Compose([Orientation("IPL", labels=None),
                   ScaleIntensityRangePercentiles(0.5, 99.5, -1.0, 1.0, clip=True),
                   Resize(112, size_mode="longest", mode="trilinear"),
                   SpatialPad((112, 112, 112), value=-1)])
    ours = PRESETS["reference"].apply(vol)
    assert ours.shape == (1, 112, 112, 112)
    _close(ours, ref(_meta(vol)))


def test_the_output_affine_follows_the_voxels():
    vol = fake_ct((20, 40, 44), (3.0, 1.2, 1.2))
    corner = (0, 39, 43)  # most inferior, posterior, left: merlin's (RAS) first voxel
    vol.array[corner] = 1234
    array, info = PRESETS["merlin"].geometry(vol)
    affine = np.asarray(info["affine"])
    assert np.allclose(np.abs(affine[:3, :3]).sum(axis=0), (1.5, 1.5, 3.0))
    # merlin pads every axis here: the voxel sits where the output's affine says it is
    index = np.linalg.solve(affine[:3, :3], vol.world([corner])[0] - affine[:3, 3])
    assert np.allclose(index, np.rint(index), atol=1e-6)
    assert array[tuple(np.rint(index).astype(int))] == 1234


def test_preset_outputs_are_cached_keyed_by_the_preset(tmp_path):
    source = tmp_path / "ct.nii.gz"
    source.write_bytes(b"stands for the file")
    vol = fake_ct((30, 120, 110), (2.5, 0.8, 0.8))
    calls = []

    def load():
        calls.append(1)
        return vol

    cache = VolumeCache(tmp_path / "cache")
    small = Preset("small", spacing=(2.0, 2.0, 2.0), size=(40, 48, 48), pad=0.0)
    first = preset_array(cache, small, [source], {"reader": "nifti"}, load)
    assert np.array_equal(first, small.apply(vol))
    again = preset_array(VolumeCache(tmp_path / "cache"), small, [source], {"reader": "nifti"},
                         load)
    assert np.array_equal(again, first) and len(calls) == 1
    other = dataclasses.replace(small, hi=400.0)  # another window: another entry
    assert not np.array_equal(preset_array(cache, other, [source], {"reader": "nifti"}, load),
                              first)
    assert len(calls) == 1  # built from the cached canonical volume
    assert len(list((tmp_path / "cache").rglob("*.b2nd"))) == 1    # the canonical volume
    assert len(list((tmp_path / "cache").rglob("*.raw"))) == 2     # a preset's outputs
    out, info = preset_array(cache, small, [source], {"reader": "nifti"}, load, with_info=True)
    assert np.array_equal(out, first) and info["affine"] == small.geometry(vol)[1]["affine"]


def test_clipping_first_keeps_int16_volumes_narrow():
    from radharmony.volumes.presets import _clip

    a = np.array([-3000, -1000, 5, 1000, 3000], np.int16)
    assert _clip(a, -1000.0, 1000.0).dtype == np.int16  # numpy alone gives float64
    assert _clip(a, -1000.0, 1000.0).tolist() == [-1000, -1000, 5, 1000, 1000]
    assert _clip(a, -999.5, 10.25).dtype == np.float32
    assert _clip(a, -999.5, 10.25).tolist() == [-999.5, -999.5, 5.0, 10.25, 10.25]


def test_unknown_names_list_the_presets():
    with pytest.raises(RadHarmonyError, match="ct_clip, merlin, m3d, radfm, reference"):
        get_preset("clip")
    with pytest.raises(RadHarmonyError):
        Preset("bad", fit="stretch")


def _finish_as_before(preset: Preset, array: np.ndarray, info: dict) -> np.ndarray:
    """Step 2 as it was written before the slab-wise map: three whole-array passes."""
    a, b = preset.out
    lo, hi = info["lo"], info["hi"]
    scale = (b - a) / (hi - lo) if hi > lo else 0.0
    out = np.multiply(array, np.float32(scale), dtype=np.float32)
    out += np.float32(a - lo * scale)
    if preset.clip:
        np.clip(out, min(a, b), max(a, b), out=out)
    if preset.layout == "CHWD":
        out = np.ascontiguousarray(out.transpose(1, 2, 0))
    return np.broadcast_to(out, (preset.channels, *out.shape)).copy() \
        if preset.channels > 1 else out[None]


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("name", sorted(PRESETS))
@pytest.mark.parametrize("lo,hi", [(-1000.0, 1000.0), (-1024.0, 3071.0), (-160.5, 240.25),
                                   (7.0, 7.0)])
def test_the_intensity_map_gives_the_same_float32_numbers_in_numpy_and_torch(
        monkeypatch, name, lo, hi, kernel):
    """The compiled one-pass map (numba) and NumPy's three steps, each on two threads."""
    from radharmony.volumes import presets

    if not kernel:
        monkeypatch.setattr(presets, "_map_kernel", lambda: None)
    elif presets._map_kernel() is None:
        pytest.skip("numba (the fast extra) is not installed")
    monkeypatch.setattr(presets, "_SLAB", 3 * 5 * 7 * 4)  # 3 slices a slab: a ragged last one
    preset = PRESETS[name]
    values = np.random.default_rng(1).integers(-3000, 3000, (10, 5, 7)).astype(np.int16)
    values[0, 0, :4] = [-32768, 32767, int(lo), int(hi)]
    info = {"lo": lo, "hi": hi}
    expected = _finish_as_before(preset, values, info)
    ours = preset.finish(values, info)
    assert ours.dtype == np.float32 and np.array_equal(ours, expected)
    to_input = preset.intensity(info)
    tensor = to_input(torch.from_numpy(values))
    assert tensor.dtype == torch.float32 and np.array_equal(tensor.numpy(), expected)


def test_merlin_maps_hand_written_hu_to_its_range():
    values = np.array([[[-2000, -1000, -500, 0, 500, 1000, 3000]]], np.int16)
    out = get_preset("merlin").finish(values, {"lo": -1000.0, "hi": 1000.0})
    assert out.tolist() == [[[[0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0]]]]


def test_deferred_intensity_gives_the_cached_int16_and_the_map_of_the_exact_input(tmp_path):
    source = tmp_path / "ct.nii.gz"
    source.write_bytes(b"stands for the file")
    vol = fake_ct((30, 120, 110), (2.5, 0.8, 0.8))
    cache = VolumeCache(tmp_path / "cache")
    small = Preset("small", spacing=(2.0, 2.0, 2.0), size=(40, 48, 48), pad=0.0)
    exact = preset_array(cache, small, [source], {"reader": "nifti"}, lambda: vol)
    values, to_input = preset_array(cache, small, [source], {"reader": "nifti"}, lambda: vol,
                                    intensity="deferred")
    assert values.dtype == np.int16 and values.shape == exact.shape[1:]
    assert np.array_equal(to_input(torch.from_numpy(values)).numpy(), exact)
    assert np.array_equal(to_input(values), exact)
    with pytest.raises(RadHarmonyError, match="intensity must be one of 'exact', 'deferred'"):
        preset_array(cache, small, [source], {"reader": "nifti"}, lambda: vol,
                     intensity="late")


def test_a_map_kernel_is_used_only_when_it_gives_numpys_bits():
    from radharmony.volumes import presets

    def rounded_once(src, out, scale, offset, lo, hi, clip, first, stop):   # float64 inside
        x = src[first:stop].astype(np.float64) * float(scale) + float(offset)
        out[first:stop] = np.clip(x, lo, hi) if clip else x

    assert not presets._map_exact(rounded_once)
    if presets._map_kernel() is not None:
        assert presets._map_exact(presets._map_kernel())
