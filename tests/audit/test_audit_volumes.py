"""``radharmony.audit`` on volumes: exact and near-duplicate CTs across two volume datasets.

Planted: scan A (a smooth random CT, 40 x 128 x 128 at 2.5 x 0.8 x 0.8 mm) in dataset one, and
in dataset two A re-saved (uncompressed NIfTI instead of gzip, another header text: the same
voxels), A cropped by 3 slices (its origin moved so its slices stay where they were), A
resampled to 2.0 x 1.0 x 1.0 mm over the same extent, and an unrelated scan B. The expected
pairs are written out below.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
from scipy.ndimage import map_coordinates, zoom

from radharmony.audit import audit
from radharmony.audit.volumes import fingerprint, near_volume_pairs
from radharmony.data.volumes import VolumeDataset
from radharmony.fake.volumes import write_nifti
from radharmony.spec import DatasetSpec
from radharmony.table.harmonizer import BaseHarmonizer

SPACING = (2.5, 0.8, 0.8)   # (d, h, w) mm
SHAPE = (40, 128, 128)
ORIGIN_Z = -37.0            # world height (LPS z) of slice 0


def smooth_ct(seed: int, shape=SHAPE) -> np.ndarray:
    """A smooth random field in HU (int16): structure at every scale a slab hash sees."""
    rng = np.random.default_rng(seed)
    coarse = rng.normal(size=(10, 24, 24))
    return (zoom(coarse, np.divide(shape, coarse.shape), order=3) * 300).astype(np.int16)


def resampled(vol: np.ndarray, spacing, new_spacing) -> np.ndarray:
    """``vol`` on a grid of ``new_spacing`` over the same extent (voxel centres from the
    first voxel's centre), trilinear."""
    shape = [int(round((n - 1) * s / t)) + 1 for n, s, t in zip(vol.shape, spacing, new_spacing)]
    grid = np.meshgrid(*[np.arange(n) * t / s for n, s, t in zip(shape, spacing, new_spacing)],
                       indexing="ij")
    return map_coordinates(vol.astype(np.float32), grid, order=1).round().astype(np.int16)


def _write(path: Path, vol: np.ndarray, spacing, origin_z: float, **kw) -> None:
    """Canonical ``(D, H, W)`` as NIfTI: RAS (i, j, k) = (W, H, D)."""
    affine = np.diag([-spacing[2], -spacing[1], spacing[0], 1.0])
    affine[2, 3] = origin_z
    write_nifti(path, vol.transpose(2, 1, 0), affine, **kw)


class OneHarmonizer(BaseHarmonizer):
    spec: ClassVar[DatasetSpec] = DatasetSpec(key="stubct_one", title="Stub CT one",
                                              outputs=frozenset(), row_unit="volume")


class TwoHarmonizer(BaseHarmonizer):
    spec: ClassVar[DatasetSpec] = DatasetSpec(key="stubct_two", title="Stub CT two",
                                              outputs=frozenset(), row_unit="volume")


class OneDataset(VolumeDataset):
    harmonizer_class = OneHarmonizer


class TwoDataset(VolumeDataset):
    harmonizer_class = TwoHarmonizer


def _table(names: list[str]) -> pd.DataFrame:
    return pd.DataFrame([{"patient_id": f"p-{n}", "study_id": f"s-{n}", "image_path": n,
                          "view_position": None, "report": None} for n in names])


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("ctdup")
    a, b = smooth_ct(1), smooth_ct(2)
    _write(root / "one" / "a.nii.gz", a, SPACING, ORIGIN_Z)
    _write(root / "two" / "a_resaved.nii", a, SPACING, ORIGIN_Z, descrip="re-saved")
    _write(root / "two" / "a_cropped.nii.gz", a[3:], SPACING, ORIGIN_Z + 3 * SPACING[0])
    new = (2.0, 1.0, 1.0)
    _write(root / "two" / "a_resampled.nii.gz", resampled(a, SPACING, new), new, ORIGIN_Z)
    _write(root / "two" / "b.nii.gz", b, SPACING, ORIGIN_Z)
    one = OneDataset(root / "one", harmonized_df=_table(["a.nii.gz"]), cache_dir=None)
    two = TwoDataset(root / "two", harmonized_df=_table(
        ["a_resaved.nii", "a_cropped.nii.gz", "a_resampled.nii.gz", "b.nii.gz"]),
        cache_dir=root / "cache")
    return one, two


def test_fingerprints_of_planted_copies():
    a = smooth_ct(1)
    affine = np.zeros((4, 4))
    affine[0, 2], affine[1, 1], affine[2, 0], affine[3, 3] = SPACING[2], SPACING[1], \
        SPACING[0], 1.0
    affine[2, 3] = ORIGIN_Z  # LPS: w -> x (L), h -> y (P), d -> z (S)
    fa = fingerprint(a, affine)
    # 40 slices from z = -37 to 60.5 mm: slab centres (n + 0.5) * 10 mm inside, n = -4 .. 5
    assert fa.slabs.tolist() == list(range(-4, 6)) and fa.hashes.shape == (10, 32)
    assert fa.shape == SHAPE
    assert fingerprint(a.copy(), affine).digest == fa.digest
    fc = fingerprint(a[3:], affine @ _shift(3))  # from z = -29.5 mm: slab -4 is gone
    assert fc.slabs.tolist() == list(range(-3, 6)) and fc.digest != fa.digest
    assert (fc.hashes == fa.hashes[1:]).all()  # the same planes at the same heights
    fb = fingerprint(smooth_ct(2), affine)
    pairs = near_volume_pairs([fa, None, fb, fc])
    assert [(i, j) for i, j, _ in pairs] == [(0, 3)]
    assert pairs[0][2] <= 10


def _shift(slices: int) -> np.ndarray:
    m = np.eye(4)
    m[0, 3] = slices
    return m


def test_audit_finds_resaved_cropped_and_resampled_volumes_across_datasets(planted):
    one, two = planted
    report = audit([one, two], progress=False, workers=1)
    found = {(a, b): kind for a, b, kind in  # (a, b) in audit order; b.nii.gz in none
             report.pairs[["a", "b", "kind"]].itertuples(index=False)}
    assert found == {
        ("stubct_one:a.nii", "stubct_two:a_resaved"): "exact",
        ("stubct_one:a.nii", "stubct_two:a_cropped.nii"): "near",
        ("stubct_one:a.nii", "stubct_two:a_resampled.nii"): "near",
        ("stubct_two:a_resaved", "stubct_two:a_cropped.nii"): "near",
        ("stubct_two:a_resaved", "stubct_two:a_resampled.nii"): "near",
        ("stubct_two:a_cropped.nii", "stubct_two:a_resampled.nii"): "near"}
    assert not report.pairs["same_file"].any()
    assert report.pairs["straddles_patient"].all()
    assert report.flags.empty  # volumes are not read as radiographs
    images = report.images.set_index("sample_id")
    assert (images.loc["stubct_two:a_resampled.nii", ["height", "width"]].tolist()
            == [103, 103])  # 127 x 0.8 mm = 101.6 mm at 1 mm: 103 voxels
    assert images.loc["stubct_one:a.nii", "digest"] == \
        images.loc["stubct_two:a_resaved", "digest"]
    near = report.pairs[report.pairs["kind"] == "near"]
    assert near["distance"].max() <= 16  # planted copies; unrelated scans are > 100 bits off
    assert report.exclusions() == ["stubct_two:a_cropped.nii", "stubct_two:a_resampled.nii",
                                   "stubct_two:a_resaved"]
    page = report.to_html()  # each pair with the middle axial slices of its two volumes
    assert "unreadable" not in page and page.count('<img alt="thumbnail"') == 12
