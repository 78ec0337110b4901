"""NIfTI read exactly: every signed axis order, qform only, sform only and both disagreeing,
against nibabel and SimpleITK; the rescale applied once; bad files refused with their fix."""

import gzip

import numpy as np
import pytest
from volume_oracles import ORDERS, assert_same_voxels, nibabel_voxels, order_affine, sitk_voxels

from radharmony.fake.volumes import write_nifti
from radharmony.volumes import read_volume
from radharmony.volumes.checks import HounsfieldError
from radharmony.volumes.geometry import axis_codes
from radharmony.volumes.nifti import NiftiError
from radharmony.volumes.volume import VolumeGeometryError

STORED = np.arange(4 * 5 * 6, dtype=np.int16).reshape(4, 5, 6) - 60
#: the qform of a file whose sform disagrees: another order, another origin, same zooms
OTHER = order_affine((2, 0, 1), (-1, 1, -1), origin=(40.0, 50.0, -60.0))


def _ras(perm, signs):
    return order_affine(perm, signs)


@pytest.fixture(params=["libdeflate", "pieces"])
def inflater(request, monkeypatch):
    """Both ways a .nii.gz is inflated: whole in one call, or a piece at a time."""
    from radharmony.imaging import inflate
    from radharmony.volumes import nifti

    if request.param == "pieces":
        monkeypatch.setattr(nifti, "inflate_gzip_into", lambda *_: False)
    elif inflate._c_api() is None:
        pytest.skip("deflate (the fast extra) is not installed")
    return request.param


@pytest.mark.parametrize("perm,signs", ORDERS)
@pytest.mark.parametrize("transforms", ["qform", "sform", "both_disagreeing"])
def test_every_voxel_lies_where_nibabel_and_simpleitk_put_it(tmp_path, perm, signs, transforms,
                                                             inflater):
    codes = {"qform": (1, 0), "sform": (0, 1), "both_disagreeing": (1, 1)}[transforms]
    path = write_nifti(tmp_path / "v.nii.gz", STORED, _ras(perm, signs), qform=codes[0],
                       sform=codes[1], qform_affine=OTHER if codes == (1, 1) else None)
    volume = read_volume(path)
    assert axis_codes(volume.affine) == ("S", "P", "L") and volume.space == "LPS"
    assert volume.array.dtype == np.int16 and volume.array.flags.c_contiguous
    assert_same_voxels(volume, *nibabel_voxels(path))
    assert_same_voxels(volume, *sitk_voxels(path))   # sform code 1 wins in SimpleITK too
    used = "qform" if transforms == "qform" else "sform"
    assert volume.source.notes[0] == f"{used} used (code 1)"
    if transforms == "both_disagreeing":
        assert volume.source.notes[1] == "sform used (code 1); the qform (code 1) disagrees"


def test_an_aligned_sform_beside_a_scanner_qform_follows_nibabel_not_simpleitk(tmp_path):
    """nibabel takes the sform whenever its code is set; SimpleITK takes the qform unless the
    sform's code is 1 (scanner): radharmony follows nibabel and says so."""
    path = write_nifti(tmp_path / "v.nii", STORED, _ras((0, 1, 2), (1, 1, 1)), qform=1, sform=2,
                       qform_affine=OTHER)
    volume = read_volume(path)
    assert_same_voxels(volume, *nibabel_voxels(path))
    assert volume.source.notes == ("sform used (code 2)",
                                   "sform used (code 2); the qform (code 1) disagrees")
    values, world = sitk_voxels(path)
    with pytest.raises(AssertionError):
        assert_same_voxels(volume, values, world)


def test_no_transform_set_uses_the_analyze_fallback_as_nibabel_does(tmp_path):
    path = write_nifti(tmp_path / "v.nii", STORED, _ras((0, 1, 2), (1, 1, 1)), qform=0, sform=0)
    volume = read_volume(path)
    assert_same_voxels(volume, *nibabel_voxels(path))
    assert volume.source.notes[0] == "base affine"


@pytest.mark.parametrize("byteorder", ["<", ">"])
@pytest.mark.parametrize("dtype", ["u1", "i2", "u2", "i4", "f4", "f8"])
def test_stored_types_and_byte_orders_read_as_stored(tmp_path, byteorder, dtype):
    path = write_nifti(tmp_path / "v.nii", STORED + 60, np.diag([1, 1, 1, 1.0]), dtype=dtype,
                       byteorder=byteorder)
    volume = read_volume(path)
    assert volume.array.dtype == np.dtype(dtype).newbyteorder("=")
    assert_same_voxels(volume, *nibabel_voxels(path))


def _ct(shape=(16, 16, 8)):
    """Stored values of a small CT whose rescale is intercept -1024: noisy air (outside the
    body) 14..34, tissue 1064, exact padding 0 in two rows."""
    noise = np.random.default_rng(0).integers(-10, 11, shape)
    stored = np.full(shape, 1064, dtype=np.int16)
    stored[:3] = stored[-3:] = 24 + noise[:3]
    stored[:, :2] = 0
    return stored


def test_the_header_rescale_is_applied_once_to_int16_hounsfield_units(tmp_path):
    path = write_nifti(tmp_path / "v.nii.gz", _ct(), np.eye(4), slope=1, intercept=-1024)
    volume = read_volume(path, ct=True)
    assert volume.array.dtype == np.int16 and volume.source.rescale == (1.0, -1024.0)
    assert volume.array.min() == -1024 and np.median(volume.array) == 40
    assert sorted(np.unique(volume.array))[1:3] == [-1010, -1009]


@pytest.mark.parametrize("slope", [1.0, 0.0])  # CT-RATE v1: 1/0 or 0/0 in the header
def test_the_side_metadata_rescale_is_applied_when_the_header_has_none(tmp_path, slope):
    path = write_nifti(tmp_path / "v.nii.gz", _ct(), np.eye(4), slope=slope, intercept=0)
    volume = read_volume(path, rescale=(1, -1024), ct=True)
    assert volume.source.rescale == (1.0, -1024.0)
    assert volume.array.min() == -1024 and np.median(volume.array) == 40
    assert sorted(np.unique(volume.array))[1:3] == [-1010, -1009]
    with pytest.raises(HounsfieldError, match="air in this CT is not near -1000.*never rescaled"):
        read_volume(path, ct=True)


def test_a_rescale_on_top_of_the_header_scaling_is_refused(tmp_path):
    path = write_nifti(tmp_path / "v.nii", _ct(), np.eye(4), slope=1, intercept=-1024)
    with pytest.raises(NiftiError, match=r"v\.nii: a rescale was passed but the header "
                                         r"already scales.*Fix: pass rescale=None"):
        read_volume(path, rescale=(1, -1024))


def test_a_rescale_applied_twice_is_named_by_the_histogram(tmp_path):
    path = write_nifti(tmp_path / "v.nii", _ct() - 1024, np.eye(4))   # already HU (CT-RATE v2)
    assert read_volume(path, ct=True).array.min() == -1024
    with pytest.raises(HounsfieldError, match=r"v\.nii: the air.*about -2036.5 \(minimum -2048\).*applied twice"):
        read_volume(path, rescale=(1, -1024), ct=True)
    floor = write_nifti(tmp_path / "w.nii", _ct(), np.eye(4), slope=1, intercept=-8192)
    with pytest.raises(HounsfieldError, match=r"w\.nii: values below -3024 HU.*minimum -8192"):
        read_volume(floor, ct=True)
    assert read_volume(floor, ct=True, check=False).array.min() == -8192


def test_the_hounsfield_check_reads_what_it_read_before_on_two_threads(monkeypatch):
    """The minimum from two threads' halves, the air level from integer bins: the same as
    ``array.min()`` and the float histogram."""
    from radharmony.volumes import checks

    rng = np.random.default_rng(5)
    volume = rng.integers(-3024, 3000, (7, 9, 11)).astype(np.int16)
    monkeypatch.setattr(checks, "SPLIT_BYTES", 0)
    assert checks.minimum(volume) == volume.min()
    assert checks.minimum(volume[:, ::2]) == volume[:, ::2].min()   # not contiguous
    for sample in (volume.ravel(), rng.integers(-1100, -900, 5000).astype(np.int16),
                   np.concatenate([np.full(900, -3024, np.int16),    # padding left out
                                   rng.integers(-1010, 40, 100).astype(np.int16)])):
        assert checks._air_level(sample) == checks._air_level(sample.astype(np.float32))


def test_a_non_integer_slope_gives_float32(tmp_path):
    path = write_nifti(tmp_path / "v.nii", STORED, np.eye(4), slope=0.5, intercept=1)
    volume = read_volume(path)
    assert volume.array.dtype == np.float32
    values, world = nibabel_voxels(path)     # nibabel applies scl_slope/scl_inter too
    assert values.dtype == np.float64 and values.min() == -29
    assert_same_voxels(volume, values, world)


def _patch(path, offset: int, data: bytes, *, decoded: bool = True) -> None:
    """Overwrite ``data`` at ``offset`` of the file (of its decoded bytes for a .nii.gz when
    ``decoded``; else of the bytes on disk)."""
    gz = decoded and path.name.endswith(".gz")
    raw = bytearray(gzip.decompress(path.read_bytes()) if gz else path.read_bytes())
    raw[offset:offset + len(data)] = data
    path.write_bytes(gzip.compress(bytes(raw)) if gz else bytes(raw))


def test_a_truncated_gzip_file_is_refused_naming_it(tmp_path):
    path = write_nifti(tmp_path / "v.nii.gz", STORED, np.eye(4))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(NiftiError, match=r"v\.nii\.gz: the file is truncated.*"
                                         r"Fix: download or convert the file again"):
        read_volume(path)


def test_a_corrupt_gzip_stream_is_refused_naming_it(tmp_path):
    path = write_nifti(tmp_path / "v.nii.gz", STORED, np.eye(4))
    _patch(path, 20, b"\xff" * 20, decoded=False)
    with pytest.raises(NiftiError, match=r"v\.nii\.gz: the gzip stream is corrupt"):
        read_volume(path)


@pytest.mark.parametrize("name", ["v.nii", "v.nii.gz"])
def test_a_header_claiming_a_billion_voxels_is_refused_before_allocating(tmp_path, name):
    import tracemalloc

    path = write_nifti(tmp_path / name, STORED, np.eye(4))
    _patch(path, 40, np.array([3, 1000, 1000, 1000, 1, 1, 1, 1], "<i2").tobytes())
    tracemalloc.start()
    try:
        with pytest.raises(NiftiError, match="claims more voxels than the file can hold.*"
                                             r"\(1000, 1000, 1000\) of int16 = 2,000,000,352"):
            read_volume(path)
        assert tracemalloc.get_traced_memory()[1] < 50 << 20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("affine", [np.zeros((4, 4)), np.full((4, 4), np.nan)])
def test_a_zero_or_non_finite_affine_is_refused_naming_the_file(tmp_path, affine):
    path = write_nifti(tmp_path / "v.nii", STORED, np.eye(4), qform=0, sform=1)
    _patch(path, 280, affine[:3].astype("<f4").tobytes())   # srow_x, srow_y, srow_z
    with pytest.raises(VolumeGeometryError, match=r"v\.nii \(the sform transform\): the affine "
                                                  r"is not a usable.*Fix: check the file's"):
        read_volume(path)


def test_a_4d_file_and_not_nifti_are_refused_with_the_fix(tmp_path):
    path = write_nifti(tmp_path / "v.nii", STORED, np.eye(4))
    _patch(path, 40, np.array([4, 4, 5, 6, 2], "<i2").tobytes())   # dim: 4-D, 2 volumes
    with pytest.raises(NiftiError, match="a 4-D NIfTI.*Fix: split it into 3-D volumes"):
        read_volume(path)
    other = tmp_path / "x.nii"
    other.write_bytes(b"\x00" * 400)
    with pytest.raises(NiftiError, match=r"x\.nii: not a NIfTI-1 header"):
        read_volume(other)


def test_a_symlink_loop_is_named(tmp_path):
    (tmp_path / "a.nii.gz").symlink_to(tmp_path / "b.nii.gz")
    (tmp_path / "b.nii.gz").symlink_to(tmp_path / "a.nii.gz")
    from radharmony.errors import ImageReadError
    with pytest.raises(ImageReadError, match=r"a\.nii\.gz.*Found: a symlink loop.*Fix: point"):
        read_volume(tmp_path / "a.nii.gz")


@pytest.mark.parametrize("depth", [5, 6])                # a middle slice, or none
@pytest.mark.parametrize("threads", [1, 2])             # small arrays: one thread
@pytest.mark.parametrize("perm,signs", ORDERS[:8])   # k along z: flips only, done in place
def test_flips_are_made_in_place_and_match_a_copy(perm, signs, threads, depth, monkeypatch):
    from radharmony.volumes import geometry
    from radharmony.volumes.geometry import to_canonical, to_canonical_in_place

    if threads == 2:
        monkeypatch.setattr(geometry, "SPLIT_BYTES", 0)
    affine = order_affine(perm[::-1], signs)
    source = np.arange(depth * 4 * 3, dtype=np.int16).reshape(depth, 4, 3)
    expected, canonical = to_canonical(source.copy(), affine)
    work = source.copy()
    array, again = to_canonical_in_place(work, affine)
    assert array.flags.c_contiguous and np.array_equal(array, expected)
    assert np.array_equal(again, canonical)
    assert np.shares_memory(array, work)


@pytest.mark.parametrize("perm,signs", ORDERS)
@pytest.mark.parametrize("name", ["v.nii", "v.nii.gz"])
def test_slab_by_slab_decoding_into_the_canonical_order_matches_nibabel(tmp_path, monkeypatch,
                                                                        perm, signs, name):
    from radharmony.volumes import nifti

    monkeypatch.setattr(nifti, "_SLAB", 1)      # one k-slice a slab: every slab boundary
    monkeypatch.setattr(nifti, "_PIECE", 7)     # 7 compressed bytes a read: tails carried
    monkeypatch.setattr(nifti, "inflate_gzip_into", lambda *_: False)   # never whole
    path = write_nifti(tmp_path / name, STORED, _ras(perm, signs))
    volume = read_volume(path)
    assert volume.array.flags.c_contiguous and volume.array.dtype == np.int16
    assert_same_voxels(volume, *nibabel_voxels(path))


@pytest.mark.parametrize("perm,signs", [((0, 1, 2), (-1, 1, 1)), ((0, 1, 2), (1, -1, -1)),
                                        ((2, 1, 0), (1, 1, 1)), ((1, 0, 2), (-1, 1, 1))])
def test_a_file_in_canonical_order_up_to_flips_is_inflated_whole_the_others_by_slab(
        tmp_path, monkeypatch, perm, signs):
    """Whole (libdeflate, then flipped in place) only where no axis moves: a transposed file
    is decoded slab by slab into the canonical array (no second volume in memory)."""
    from radharmony.imaging import inflate
    from radharmony.volumes import nifti
    from radharmony.volumes.geometry import flips_only

    if inflate._c_api() is None:
        pytest.skip("deflate (the fast extra) is not installed")
    calls = []
    monkeypatch.setattr(nifti, "inflate_gzip_into", lambda path, out: calls.append(
        out.nbytes) or inflate.inflate_gzip_into(path, out))
    path = write_nifti(tmp_path / "v.nii.gz", STORED, _ras(perm, signs))
    volume = read_volume(path, ct=False)
    assert_same_voxels(volume, *nibabel_voxels(path))
    assert volume.array.flags.c_contiguous and volume.array.flags.writeable
    whole = flips_only(STORED.shape[::-1], np.diag([-1.0, -1, 1, 1]) @ _ras(perm, signs)
                       @ np.eye(4)[[2, 1, 0, 3]])
    assert whole == (perm == (0, 1, 2))
    assert calls == ([352 + STORED.nbytes] if whole else [])


def test_a_multi_member_gzip_with_an_extension_is_read_whole(tmp_path):
    path = write_nifti(tmp_path / "v.nii", STORED, _ras((0, 1, 2), (-1, 1, 1)))
    raw = bytearray(path.read_bytes())
    raw[108:112] = np.array([352 + 16], "<f4").tobytes()      # vox_offset past an extension
    raw[348:352] = b"\x01\x00\x00\x00"
    raw = raw[:352] + np.array([16, 0], "<i4").tobytes() + b"x" * 8 + raw[352:]
    gz = tmp_path / "m.nii.gz"
    gz.write_bytes(gzip.compress(bytes(raw[:500])) + gzip.compress(bytes(raw[500:])))
    volume = read_volume(gz)
    assert_same_voxels(volume, *nibabel_voxels(gz))
    assert np.array_equal(np.sort(volume.array, axis=None), np.sort(STORED, axis=None))


@pytest.mark.parametrize("perm,signs", ORDERS)
def test_the_canonical_target_orders_as_to_canonical_does(perm, signs):
    from radharmony.volumes.geometry import canonical_target, to_canonical

    affine = order_affine(perm, signs, origin=(3.0, -4.0, 5.0))
    expected, canonical = to_canonical(STORED, affine)
    out, target, again = canonical_target(STORED.shape, affine,
                                          lambda shape: np.zeros(shape, np.int16))
    target[...] = STORED
    assert out.flags.c_contiguous and np.array_equal(out, expected)
    assert np.array_equal(again, canonical) and np.shares_memory(out, target)
