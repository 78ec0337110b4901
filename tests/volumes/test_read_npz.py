"""NumPy volumes with declared geometry: the axis letters place every voxel; missing or
unusable declarations are refused with the fix."""

import numpy as np
import pytest

from radharmony.errors import ImageReadError
from radharmony.volumes import read_volume
from radharmony.volumes.geometry import axis_codes
from radharmony.volumes.npz import DeclaredGeometryError

ARRAY = np.arange(2 * 3 * 4, dtype=np.int16).reshape(2, 3, 4)


def test_rad_chestct_axes_ipl_become_spl_with_each_voxel_in_place(tmp_path):
    """(I, P, L) at 0.8 mm, as RAD-ChestCT ships: the first axis flips to run toward S."""
    np.savez_compressed(tmp_path / "trn00001.npz", ct=ARRAY)
    volume = read_volume(tmp_path / "trn00001.npz", axes="IPL", spacing=0.8)
    assert axis_codes(volume.affine) == ("S", "P", "L") and volume.spacing == (0.8, 0.8, 0.8)
    assert np.array_equal(volume.array, ARRAY[::-1])
    assert np.allclose(volume.world([[0, 0, 0]]), [[0, 0, -0.8]])   # the last stored slice
    assert volume.array.flags.c_contiguous


def test_a_declared_rsa_order_and_an_npy_file(tmp_path):
    np.save(tmp_path / "v.npy", ARRAY)
    volume = read_volume(tmp_path / "v.npy", axes="RSA", spacing=(1, 2, 3), origin=(5, 6, 7))
    assert axis_codes(volume.affine) == ("S", "P", "L")
    # voxel (i, j, k) of the file lies at (5 - i, 6 - 3k, 7 + 2j) in LPS
    assert np.allclose(volume.world(volume.voxel([[4.0, 3.0, 9.0]])), [[4.0, 3.0, 9.0]])
    i, j, k = 1, 2, 1
    at = np.rint(volume.voxel([[5 - i, 6 - 3 * k, 7 + 2 * j]])).astype(int)[0]
    assert volume.array[tuple(at)] == ARRAY[i, j, k]


@pytest.mark.parametrize("declared,match", [
    ({"spacing": 1}, "axis order is not declared.*Fix: pass axes="),
    ({"axes": "IPP", "spacing": 1}, "axis order is not declared.*'IPP'"),
    ({"axes": "IPL"}, "spacing is not declared"),
    ({"axes": "IPL", "spacing": (1, 0, 1)}, "spacing is not declared"),
])
def test_missing_or_unusable_declarations_are_refused(tmp_path, declared, match):
    np.savez(tmp_path / "v.npz", ct=ARRAY)
    with pytest.raises(DeclaredGeometryError, match=match):
        read_volume(tmp_path / "v.npz", **declared)


def test_an_ambiguous_key_and_a_truncated_file_are_named(tmp_path):
    np.savez(tmp_path / "v.npz", a=ARRAY, b=ARRAY)
    with pytest.raises(DeclaredGeometryError, match=r"which array.*\['a', 'b'\]"):
        read_volume(tmp_path / "v.npz", axes="IPL", spacing=1)
    assert read_volume(tmp_path / "v.npz", axes="IPL", spacing=1, key="b").shape == (2, 3, 4)
    data = (tmp_path / "v.npz").read_bytes()
    (tmp_path / "w.npz").write_bytes(data[:100])
    with pytest.raises(ImageReadError, match=r"w\.npz.*Fix: download or write"):
        read_volume(tmp_path / "w.npz", axes="IPL", spacing=1)


def test_options_of_another_reader_are_refused(tmp_path):
    from radharmony.volumes.read import VolumePathError

    np.save(tmp_path / "v.npy", ARRAY)
    with pytest.raises(VolumePathError, match="rescale= is for NIfTI files only"):
        read_volume(tmp_path / "v.npy", axes="IPL", spacing=1, rescale=(1, -1024))
    with pytest.raises(TypeError, match="stack"):
        read_volume(tmp_path / "v.npy", axes="IPL", spacing=1, stack=1)
