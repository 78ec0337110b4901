"""DICOM series read exactly: every in-plane orientation and an oblique one against SimpleITK
and nibabel; per-slice rescale, 12-bit signed pixels, compressed syntaxes; the named errors
for several series, a stray slice, a missing slice, duplicates and gantry tilt."""

import itertools

import numpy as np
import pytest
from volume_oracles import assert_same_voxels, nibabel_dicom_voxels, sitk_series_files, sitk_voxels

from radharmony.errors import ImageReadError
from radharmony.fake.volumes import AXIAL, CORONAL, SAGITTAL, slice_positions, write_dicom_series
from radharmony.volumes import read_volume
from radharmony.volumes.dicom import (DicomSeriesError, DuplicateSliceError, GantryTiltError,
                                      SeveralSeriesError, SliceSpacingError)
from radharmony.volumes.geometry import axis_codes

#: every in-plane orientation whose rows and columns run along signed world axes (24)
ALIGNED = [tuple(np.concatenate([np.eye(3)[r] * sr, np.eye(3)[c] * sc]))
           for r, c in itertools.permutations(range(3), 2) for sr in (1, -1) for sc in (1, -1)]


def _oblique():
    a, b = np.radians(20), np.radians(-35)
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
    m = rz @ rx
    return tuple(np.round(np.concatenate([m[:, 0], m[:, 1]]), 8))


def _stored(slices=5, rows=4, columns=6, offset=1000):
    """Distinct stored values (CT-like after intercept -1024: -24 .. +95 HU plus offset)."""
    return (np.arange(slices * rows * columns).reshape(slices, rows, columns)
            + offset).astype(np.int16)


def _series(folder, orientation=AXIAL, **kw):
    kw.setdefault("positions", slice_positions(5, orientation, origin=(-12.5, 30.25, 101.0),
                                               step=2.5))
    return write_dicom_series(folder, _stored(), orientation=orientation, spacing=(0.7, 0.9),
                              **kw)


@pytest.mark.parametrize("orientation", ALIGNED + [_oblique()],
                         ids=[f"iop{i}" for i in range(len(ALIGNED))] + ["oblique"])
def test_every_pixel_lies_where_simpleitk_and_nibabel_put_it(tmp_path, orientation):
    paths = _series(tmp_path / "s", orientation)
    volume = read_volume(tmp_path / "s", ct=True, check=False)
    assert axis_codes(volume.affine) == ("S", "P", "L") or orientation == _oblique()
    assert volume.array.dtype == np.int16 and volume.source.rescale == (1.0, -1024.0)
    assert volume.source.files == tuple(str(p) for p in paths)   # sorted along the normal
    assert_same_voxels(volume, *nibabel_dicom_voxels(paths))
    values, world = sitk_voxels(sitk_series_files(tmp_path / "s"))
    assert_same_voxels(volume, values, world)
    assert np.allclose(sorted(volume.spacing), [0.7, 0.9, 2.5])


@pytest.mark.parametrize("name,orientation", [("axial", AXIAL), ("sagittal", SAGITTAL),
                                              ("coronal", CORONAL)])
def test_the_canonical_order_reads_as_radiologists_do(tmp_path, name, orientation):
    """Whatever the acquisition plane, array[d] is axial with anterior at the top and the
    patient's right on the image's left; d runs toward the head."""
    _series(tmp_path / name, orientation)
    volume = read_volume(tmp_path / name, ct=True, check=False)
    assert axis_codes(volume.affine) == ("S", "P", "L")
    d, h, w = np.diag(volume.affine[(2, 1, 0), :3])
    assert d > 0 and h > 0 and w > 0


def test_files_are_sorted_by_position_not_by_name_or_instance_number(tmp_path):
    """Names shuffled, InstanceNumber descending along the stack, positions given out of
    order: the volume follows the positions only."""
    positions = slice_positions(5, AXIAL, step=2.0)
    paths = write_dicom_series(tmp_path / "s", _stored(), positions=positions[[3, 0, 4, 1, 2]],
                               shuffle=True, reverse_instances=True)
    volume = read_volume(tmp_path / "s", check=False)
    expected = _stored()[[1, 3, 4, 0, 2]].astype(np.int32) - 1024   # slices from foot to head
    assert np.array_equal(volume.array, expected)   # axial rows run toward P, columns toward L
    assert volume.source.files == tuple(str(paths[i]) for i in (1, 3, 4, 0, 2))
    assert volume.affine[2, 0] == 2.0 and volume.affine[2, 3] == 0.0


def test_the_step_comes_from_positions_not_slice_thickness(tmp_path):
    _series(tmp_path / "s")   # SliceThickness "5" in every file; positions 2.5 mm apart
    assert read_volume(tmp_path / "s", check=False).spacing[0] == 2.5


def test_each_slice_has_its_own_rescale_applied_once(tmp_path):
    paths = _series(tmp_path / "s", slope=[1, 1, 2, 1, 1], intercept=[-1024, -1000, -2048,
                                                                      -1024, -1024])
    volume = read_volume(tmp_path / "s", check=False)
    assert volume.array.dtype == np.int16 and volume.source.rescale is None
    assert "per-slice RescaleSlope/RescaleIntercept applied" in volume.source.notes
    stored = _stored()
    assert volume.array[2, 0, 0] == 2 * int(stored[2, 0, 0]) - 2048 == 2 * 1048 - 2048
    assert volume.array[1, 0, 0] == int(stored[1, 0, 0]) - 1000 == 1024 - 1000
    assert_same_voxels(volume, *nibabel_dicom_voxels(paths))
    half = _series(tmp_path / "f", slope=[1, 1, 0.5, 1, 1], series_uid="1.2.3")
    assert read_volume(half, check=False).array.dtype == np.float32


@pytest.mark.parametrize("intercepts", [[-1024] * 5, [-1024, -1000, -1024, -2048, -1024]])
def test_12_bit_unsigned_slices_rescale_to_exact_int16(tmp_path, intercepts):
    """The usual CT export (uint16, BitsStored 12): every slice rescaled while it is read."""
    stored = (_stored() + 2000).view(np.uint16)
    paths = write_dicom_series(tmp_path / "s", stored, bits_stored=12, intercept=intercepts,
                               positions=slice_positions(5, AXIAL, step=2.5))
    volume = read_volume(tmp_path / "s", check=False)
    assert volume.array.dtype == np.int16
    expected = stored.astype(np.int32) + np.array(intercepts)[:, None, None]
    assert np.array_equal(volume.array, expected)
    assert volume.source.rescale == ((1.0, -1024.0) if len(set(intercepts)) == 1 else None)
    assert_same_voxels(volume, *nibabel_dicom_voxels(paths))


def test_signed_12_bit_pixels_are_sign_extended_from_the_stored_bits(tmp_path):
    """PixelRepresentation 1, BitsStored 12 of 16, high bits left zero by the scanner (RSNA
    abdominal trauma files): -100 stored as 0x0F9C reads -100, not 3996."""
    stored = np.array([[[-100, 0], [5, -2048]]] * 3, dtype=np.int16)
    raw = (stored.astype(np.int32) & 0x0FFF).astype(np.int16)      # 3996, 0, 5, 2048
    write_dicom_series(tmp_path / "s", raw, bits_stored=12, signed=True, intercept=0,
                       modality="CT")
    volume = read_volume(tmp_path / "s", check=False)
    assert sorted(np.unique(volume.array)) == [-2048, -100, 0, 5]
    masked = raw | np.int16(0x7000)          # unsigned 12 of 16 with garbage in the high bits
    write_dicom_series(tmp_path / "u", masked.view(np.uint16), bits_stored=12, intercept=0,
                       modality="MR")
    mr = read_volume(tmp_path / "u")
    assert mr.array.dtype == np.uint16 and sorted(np.unique(mr.array)) == [0, 5, 2048, 3996]


@pytest.mark.parametrize("syntax", ["implicit", "big", "rle", "deflated"])
def test_other_transfer_syntaxes_read_the_same_values(tmp_path, syntax):
    paths = _series(tmp_path / "s", syntax=syntax)
    volume = read_volume(tmp_path / "s", ct=True, check=False)
    assert_same_voxels(volume, *nibabel_dicom_voxels(paths))


def test_a_folder_of_several_series_names_them_all_and_series_uid_picks_one(tmp_path):
    _series(tmp_path / "study" / "a", series_uid="1.2.840.1", SeriesDescription="Lung 1mm")
    _series(tmp_path / "study" / "b", series_uid="1.2.840.2", SeriesDescription="Mediastinum")
    with pytest.raises(SeveralSeriesError, match=r"study holds 2 DICOM series.*"
                                                 r"1\.2\.840\.1 \(CT, 'Lung 1mm', series 1, "
                                                 r"5 files.*1\.2\.840\.2 .*'Mediastinum'.*"
                                                 r"Fix: pass series_uid="):
        read_volume(tmp_path / "study")
    volume = read_volume(tmp_path / "study", series_uid="1.2.840.2", check=False)
    assert volume.source.series_uid == "1.2.840.2" and volume.shape[0] == 5
    with pytest.raises(DicomSeriesError, match="no series 9.9.*Fix: pass one of"):
        read_volume(tmp_path / "study", series_uid="9.9")


def test_a_slice_of_another_series_dropped_into_the_folder_is_named(tmp_path):
    _series(tmp_path / "s", series_uid="1.2.840.1")
    write_dicom_series(tmp_path / "s", _stored(1), series_uid="1.2.840.77", names="stray{}")
    with pytest.raises(SeveralSeriesError, match=r"1\.2\.840\.77 \(CT, series 1, 1 file, "
                                                 r"e\.g\. stray1\).*stray file"):
        read_volume(tmp_path / "s")


def test_a_missing_slice_in_the_middle_is_named_with_its_neighbours(tmp_path):
    positions = slice_positions(6, AXIAL, step=1.25)
    write_dicom_series(tmp_path / "s", _stored(5), positions=np.delete(positions, 3, axis=0),
                       shuffle=False, names="slice{}")
    with pytest.raises(SliceSpacingError, match=r"not evenly spaced.*a gap of 2\.5 mm between "
                                                r"slice3 and slice4 \(the median step is 1\.25 "
                                                r"mm: 1 slice missing\).*Fix: restore"):
        read_volume(tmp_path / "s")


def test_uneven_steps_beyond_one_percent_are_refused_and_within_it_read(tmp_path):
    along = np.array([0, 1, 2, 3.05, 4])
    write_dicom_series(tmp_path / "s", _stored(5), positions=np.c_[0 * along, 0 * along, along])
    with pytest.raises(SliceSpacingError, match="spread 5.0% around the median"):
        read_volume(tmp_path / "s")
    along = np.array([0, 1, 2, 3.005, 4])
    write_dicom_series(tmp_path / "t", _stored(5), positions=np.c_[0 * along, 0 * along, along])
    assert read_volume(tmp_path / "t", check=False).spacing[0] == 1.0


def test_duplicate_positions_are_refused(tmp_path):
    positions = slice_positions(5, AXIAL)
    positions[3] = positions[2]
    write_dicom_series(tmp_path / "s", _stored(5), positions=positions, shuffle=False,
                       names="slice{}")
    with pytest.raises(DuplicateSliceError, match=r"two slices at one position.*slice3 and "
                                                  r"slice4 at 2\.000 mm"):
        read_volume(tmp_path / "s")


def test_gantry_tilt_is_refused_or_kept_as_an_exact_shear(tmp_path):
    positions = slice_positions(5, AXIAL, step=2.0, tilt=(0.0, 0.35))   # y drifts 0.35 mm/slice
    paths = write_dicom_series(tmp_path / "s", _stored(5), positions=positions)
    with pytest.raises(GantryTiltError, match=r"gantry tilt 9\.93 degrees.*Fix: pass "
                                              r"tilt='shear'"):
        read_volume(tmp_path / "s")
    volume = read_volume(tmp_path / "s", tilt="shear", check=False)
    assert volume.source.notes == ("gantry tilt 9.93 degrees kept as a sheared affine",)
    assert_same_voxels(volume, *nibabel_dicom_voxels(paths))   # every pixel where DICOM puts it


def test_a_multi_stack_series_is_split_by_orientation(tmp_path):
    write_dicom_series(tmp_path / "s", _stored(3), series_uid="1.2.5", orientation=AXIAL,
                       names="ax{}", modality="MR", intercept=0)
    write_dicom_series(tmp_path / "s", _stored(4), series_uid="1.2.5", orientation=_oblique(),
                       names="ob{}", modality="MR", intercept=0)
    with pytest.raises(SeveralSeriesError, match=r"series 1\.2\.5 holds 2 stacks.*stack 0: 3 "
                                                 r"slices.*stack 1: 4 slices.*Fix: pass stack="):
        read_volume(tmp_path / "s")
    assert read_volume(tmp_path / "s", stack=1).shape[0] == 4


def test_other_files_and_symlink_loops_in_the_folder_are_passed_over(tmp_path):
    _series(tmp_path / "s")
    (tmp_path / "s" / "README.txt").write_text("exported by a PACS")
    (tmp_path / "s" / "loop").symlink_to(tmp_path / "s")
    volume = read_volume(tmp_path / "s", check=False)
    assert volume.shape[0] == 5
    assert volume.source.notes == ("1 non-image file(s) skipped, e.g. README.txt",)
    with pytest.raises(DicomSeriesError, match="no DICOM image found"):
        read_volume([tmp_path / "s" / "README.txt"])


def test_mr_keeps_its_stored_type_and_ct_gets_the_hounsfield_check(tmp_path):
    write_dicom_series(tmp_path / "mr", _stored().view(np.uint16), modality="MR", intercept=0)
    assert read_volume(tmp_path / "mr").array.dtype == np.uint16
    _series(tmp_path / "ct", intercept=0)   # stored values with the rescale dropped
    from radharmony.volumes.checks import HounsfieldError
    with pytest.raises(HounsfieldError, match="ct: the air in this CT is not near -1000"):
        read_volume(tmp_path / "ct")


def test_a_header_claiming_huge_slices_is_refused_before_allocating(tmp_path):
    import tracemalloc

    paths = _series(tmp_path / "s", shuffle=False)
    for path in paths:                      # Rows 4 -> 60000 (uint16 at a fixed offset)
        raw = bytearray(path.read_bytes())
        at = raw.find(b"\x28\x00\x10\x00US\x02\x00")
        raw[at + 8:at + 10] = (60000).to_bytes(2, "little")
        path.write_bytes(bytes(raw))
    tracemalloc.start()
    try:
        with pytest.raises(ImageReadError, match=r"IM00001 holds less pixel data than its "
                                                 r"header says.*720,000 bytes.*export it"):
            read_volume(tmp_path / "s", check=False)
        assert tracemalloc.get_traced_memory()[1] < 20 << 20
    finally:
        tracemalloc.stop()


def test_a_truncated_slice_is_named(tmp_path):
    paths = _series(tmp_path / "s", shuffle=False)
    paths[2].write_bytes(paths[2].read_bytes()[:-10])
    with pytest.raises(ImageReadError, match=r"IM00003 holds less pixel data"):
        read_volume(tmp_path / "s", check=False)


def test_jpeg_compressed_slices_decode_through_the_pylibjpeg_plugins(tmp_path):
    """JPEG Baseline slices (8-bit, as some MR and secondary exports are) are decoded by
    pydicom's plugins: the same values and places as nibabel's wrapper reads them."""
    from radharmony.fake.dicom import write_dicom

    rng = np.random.default_rng(3)
    paths = []
    for k, position in enumerate(slice_positions(4, AXIAL, step=3.0)):
        image = (rng.integers(0, 255, (16, 24)) // 32 * 32).astype(np.uint8)
        paths.append(write_dicom(tmp_path / "s" / f"{k}.dcm", image, jpeg=True, Modality="MR",
                                 SeriesInstanceUID="1.2.3.4", PixelSpacing=["0.5", "0.5"],
                                 ImagePositionPatient=[f"{v:g}" for v in position],
                                 ImageOrientationPatient=["1", "0", "0", "0", "1", "0"]))
    volume = read_volume(tmp_path / "s")
    assert volume.array.dtype == np.uint8 and volume.shape == (4, 16, 24)
    assert volume.spacing == (3.0, 0.5, 0.5)
    assert_same_voxels(volume, *nibabel_dicom_voxels(paths))


def _with_decoy_sequence(path):
    """Rewrite ``path`` with a sequence of undefined length after its geometry (before the
    pixels) whose item holds a decoy ImagePositionPatient (what a nested dataset may
    carry)."""
    import pydicom
    from pydicom.dataset import Dataset
    from pydicom.sequence import Sequence

    ds = pydicom.dcmread(path)
    item = Dataset()
    item.ReferencedSOPInstanceUID = "1.2.3"
    item.ImagePositionPatient = ["999", "999", "999"]
    ds.RequestAttributesSequence = Sequence([item])
    ds["RequestAttributesSequence"].is_undefined_length = True
    ds.save_as(path, enforce_file_format=True)
    return path


def test_the_header_scan_reads_top_level_tags_past_nested_ones(tmp_path):
    from radharmony.volumes.dicom_headers import read_header

    path = _with_decoy_sequence(_series(tmp_path / "s")[0])
    assert b"\xff\xff\xff\xff" in path.read_bytes()          # the sequence's undefined length
    header = read_header(path)
    assert header.floats("ImagePositionPatient") == (-12.5, 30.25, 101.0)
    assert header.pixel_offset == len(path.read_bytes()) - 4 * 6 * 2


def test_a_meta_group_without_its_group_length_is_walked_to_the_same_header(tmp_path):
    """The scan finds the syntax in the meta group's bytes through its group length; a file
    without that element (non-conformant, found) is walked element by element instead."""
    from radharmony.volumes.dicom_headers import read_header

    path = _series(tmp_path / "s", syntax="implicit")[0]
    data = path.read_bytes()
    assert data[132:136] == b"\x02\x00\x00\x00"                # (0002,0000) first
    bare = tmp_path / "bare.dcm"
    bare.write_bytes(data[:132] + data[144:])
    full, walked = read_header(path), read_header(bare)
    assert full.get("TransferSyntaxUID") == walked.get("TransferSyntaxUID") == \
        "1.2.840.10008.1.2"
    assert full.raw == walked.raw and full.pixel_offset == walked.pixel_offset + 12
    assert np.array_equal(read_volume([bare], check=False).array,
                          read_volume([path], check=False).array)
