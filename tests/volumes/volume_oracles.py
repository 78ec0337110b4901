"""Oracles for volume geometry: every voxel's world position as nibabel and SimpleITK compute
it, compared with a radharmony Volume (tests skip cleanly when an oracle is not installed)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

#: the 48 signed axis orders: (world axis of each array axis, its sign)
ORDERS = [(perm, signs) for perm in itertools.permutations(range(3))
          for signs in itertools.product((1, -1), repeat=3)]
TOLERANCE_MM = 1e-4


def order_affine(perm, signs, spacing=(0.7, 1.25, 2.5), origin=(3.0, -2.0, 7.5)) -> np.ndarray:
    """A 4x4 affine whose array axis ``a`` runs along world axis ``perm[a]`` with ``signs[a]``."""
    m = np.eye(4)
    m[:3, :3] = 0
    for axis, (world, sign) in enumerate(zip(perm, signs)):
        m[world, axis] = sign * spacing[axis]
    m[:3, 3] = origin
    return m


def assert_same_voxels(volume, values: np.ndarray, world_lps: np.ndarray) -> None:
    """``values`` (N,) at ``world_lps`` (N, 3) as an oracle reads them: each lies exactly on a
    voxel of ``volume`` (within :data:`TOLERANCE_MM`) holding the same value."""
    index = volume.voxel(world_lps)
    nearest = np.rint(index).astype(int)
    assert (nearest >= 0).all() and (nearest < np.array(volume.shape)).all()
    assert np.abs(volume.world(nearest) - world_lps).max() < TOLERANCE_MM
    assert np.array_equal(volume.array[tuple(nearest.T)], values)
    assert len(np.unique(nearest, axis=0)) == len(nearest) == volume.array.size


def nibabel_voxels(path):
    """(values, LPS world positions) of every voxel of a NIfTI file, read by nibabel."""
    nib = pytest.importorskip("nibabel")
    image = nib.load(str(path))
    data = np.asarray(image.dataobj)
    index = np.argwhere(np.ones(data.shape, bool))
    world = index @ image.affine[:3, :3].T + image.affine[:3, 3]
    world[:, :2] *= -1
    return data[tuple(index.T)], world


def sitk_voxels(path):
    """(values, LPS world positions) of every voxel, read by SimpleITK (a NIfTI file, or a
    DICOM series given as its list of files in SimpleITK's own order)."""
    sitk = pytest.importorskip("SimpleITK")
    sitk.ProcessObject_SetGlobalWarningDisplay(False)
    if isinstance(path, (list, tuple)):
        reader = sitk.ImageSeriesReader()
        reader.SetFileNames([str(p) for p in path])
        image = reader.Execute()
    else:
        image = sitk.ReadImage(str(path))
    data = sitk.GetArrayFromImage(image)          # (k, j, i)
    index = np.argwhere(np.ones(data.shape, bool))[:, ::-1].astype(np.float64)   # (i, j, k)
    direction = np.array(image.GetDirection()).reshape(3, 3)
    world = (index * image.GetSpacing()) @ direction.T + image.GetOrigin()
    return data[tuple(index[:, ::-1].astype(int).T)], world


def nibabel_dicom_voxels(paths):
    """(values, LPS world positions) of every pixel of each DICOM slice, by nibabel's DICOM
    wrapper (its per-slice affine and its rescaled data), slice by slice."""
    pytest.importorskip("nibabel")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # "the DICOM readers are experimental"
        from nibabel.nicom.dicomwrappers import wrapper_from_file

    values, world = [], []
    for path in paths:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            wrapper = wrapper_from_file(str(path))
            data = wrapper.get_data()
        index = np.argwhere(np.ones(data.shape, bool)).astype(np.float64)   # (row, column)
        affine = wrapper.affine
        world.append(index @ affine[:3, :2].T + affine[:3, 3])
        values.append(data[tuple(index.astype(int).T)])
    return np.concatenate(values), np.concatenate(world)


def sitk_series_files(folder):
    """SimpleITK's (GDCM's) file order of the one series in ``folder``."""
    sitk = pytest.importorskip("SimpleITK")
    return list(sitk.ImageSeriesReader.GetGDCMSeriesFileNames(str(folder)))
