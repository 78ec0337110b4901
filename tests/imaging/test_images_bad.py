"""Bad images: every fault raises naming the file and the sample; validate() and on_missing."""

from __future__ import annotations

import struct
import warnings
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from radharmony.imaging import gray
from radharmony.imaging import read as imaging
from radharmony.dataset import ReXGradientValidDataset
from radharmony.errors import (ColourImageWarning, ImageReadError, RadHarmonyError,
                               RowsDroppedWarning)
from radharmony.fake import synthetic_cxr, write_rexgradient
from radharmony.imaging.read import read_image


@pytest.fixture
def ds(tmp_path):
    root = write_rexgradient(tmp_path, studies={"valid": 4}, image_size=(96, 80))
    return ReXGradientValidDataset(root, cache_dir=None)


def _file(ds, i: int = 0) -> Path:
    return ds.image_file(i)


def _png_bytes(img: np.ndarray) -> bytes:
    ok, buf = cv2.imencode(".png", img)
    assert ok
    return buf.tobytes()


def _jpeg_bytes(img: np.ndarray, **kw) -> bytes:
    ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return buf.tobytes()


def _gray8(h=64, w=48):
    return synthetic_cxr(h, w, rng=np.random.default_rng(0), bits=8)


def _with_png_size(data: bytes, w: int, h: int) -> bytes:
    """The same PNG with its IHDR claiming ``w`` x ``h`` (CRC fixed, pixels unchanged)."""
    ihdr = data[12:16] + struct.pack(">II", w, h) + data[24:29]
    return data[:16] + ihdr[4:] + struct.pack(">I", zlib.crc32(ihdr)) + data[33:]


def _with_jpeg_size(data: bytes, w: int, h: int) -> bytes:
    i = 2
    while True:  # find the SOF0 marker and patch height/width
        assert data[i] == 0xFF
        code, length = data[i + 1], int.from_bytes(data[i + 2:i + 4], "big")
        if code == 0xC0:
            return data[:i + 5] + struct.pack(">HH", h, w) + data[i + 9:]
        i += 2 + length


def _dicom(path: Path, *, rows: int, cols: int, pixels: bool = True, frames: int = 1,
           data: np.ndarray | None = None) -> Path:
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID = meta.MediaStorageSOPClassUID
    ds.SOPInstanceUID = meta.MediaStorageSOPInstanceUID
    ds.Modality, ds.PhotometricInterpretation = "DX", "MONOCHROME2"
    ds.Rows, ds.Columns, ds.SamplesPerPixel = rows, cols, 1
    ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 16, 12, 11, 0
    if frames > 1:
        ds.NumberOfFrames = frames
    if data is not None:
        ds.PixelData = data.astype(np.uint16).tobytes()
    elif pixels:
        ds.PixelData = np.zeros((min(rows, 64), min(cols, 64)), np.uint16).tobytes()
    ds.save_as(path, enforce_file_format=True)
    return path


# -- every fault raises ImageReadError naming the file and the sample ---------------------------
FAULTS = {
    "zero_byte": lambda p: p.write_bytes(b""),
    "truncated_png": lambda p: p.write_bytes(p.read_bytes()[:len(p.read_bytes()) // 2]),
    "png_missing_tail": lambda p: p.write_bytes(p.read_bytes()[:-12]),
    "text_behind_png": lambda p: p.write_text("not an image\n"),
    "html_behind_png": lambda p: p.write_text("<!DOCTYPE html><html>403 Forbidden</html>"),
    "gif_behind_png": lambda p: p.write_bytes(b"GIF89a" + b"\0" * 200),
    "truncated_jpeg_behind_png": lambda p: p.write_bytes(_jpeg_bytes(_gray8())[:-300]),
    "one_by_one": lambda p: p.write_bytes(_png_bytes(np.zeros((1, 1), np.uint8))),
    "png_bomb": lambda p: p.write_bytes(_with_png_size(_png_bytes(_gray8()), 60000, 60000)),
    "jpeg_bomb": lambda p: p.write_bytes(_with_jpeg_size(_jpeg_bytes(_gray8()), 65000, 65000)),
    "dicom_bomb": lambda p: _dicom(p, rows=40000, cols=40000),
    "dicom_without_pixels": lambda p: _dicom(p, rows=64, cols=64, pixels=False),
    "directory": lambda p: (p.unlink(), p.mkdir()),
    "missing": lambda p: p.unlink(),
}
EXPECT = {"zero_byte": "empty file", "text_behind_png": "not a PNG, JPEG or DICOM",
          "html_behind_png": "HTML page", "gif_behind_png": "GIF", "one_by_one": "1 x 1",
          "png_bomb": "decompression-bomb", "jpeg_bomb": "decompression-bomb",
          "dicom_bomb": "decompression-bomb", "truncated_jpeg_behind_png": "truncated",
          "missing": "does not exist", "dicom_without_pixels": "DICOM"}


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("cached", [False, True])
def test_bad_image_raises_naming_file_and_sample(ds, fault, cached, tmp_path):
    if cached:
        ds = ReXGradientValidDataset(ds.base_image_dir, cache_dir=tmp_path / "cache")
    path = _file(ds, 1)
    FAULTS[fault](path)
    with pytest.raises(ImageReadError) as info:
        ds[1]
    msg = str(info.value)
    assert ds.harmonized_df["sample_id"][1] in msg
    assert path.name in msg
    assert "Fix:" in msg
    if fault in EXPECT:
        assert EXPECT[fault] in msg
    ds[0]  # the other samples still load


def test_bomb_guard_reads_header_before_decoding(tmp_path, monkeypatch):
    p = tmp_path / "big.png"
    p.write_bytes(_with_png_size(_png_bytes(_gray8()), 20000, 20000))

    def never(*a, **k):
        raise AssertionError("decoder called despite the header guard")
    monkeypatch.setattr(imaging, "_READERS", {k: never for k in imaging._READERS})
    with pytest.raises(ImageReadError, match="400,000,000 pixels"):
        read_image(p)


def test_bomb_limit_is_a_documented_setting(tmp_path, monkeypatch):
    p = tmp_path / "ok.png"
    p.write_bytes(_png_bytes(_gray8(64, 48)))
    assert read_image(p)[0].shape == (64, 48)
    assert imaging.MAX_PIXELS > 30_000_000  # room for the largest real radiographs
    monkeypatch.setattr(imaging, "MAX_PIXELS", 64 * 48 - 1)
    with pytest.raises(ImageReadError, match="MAX_PIXELS"):
        read_image(p)


def test_jpeg_behind_png_extension_is_read_by_content(tmp_path):
    p = tmp_path / "really_a_jpeg.png"
    p.write_bytes(_jpeg_bytes(_gray8(64, 48)))
    arr, src = read_image(p)
    assert src == (64, 48) and arr.ndim == 2


@pytest.mark.parametrize("channels", [3, 4])
def test_colour_png_converted_to_gray_with_one_warning(tmp_path, monkeypatch, channels):
    monkeypatch.setattr(gray, "_colour_warned", False)
    g = _gray8()
    colour = np.dstack([g, g // 2, 255 - g] + ([np.full_like(g, 128)] if channels == 4 else []))
    p = tmp_path / "colour.png"
    p.write_bytes(_png_bytes(colour))
    with pytest.warns(ColourImageWarning, match="colour.png"):
        arr, _ = read_image(p)
    assert arr.shape == g.shape and arr.dtype == np.uint8
    expected = cv2.cvtColor(np.ascontiguousarray(colour[:, :, :3]), cv2.COLOR_BGR2GRAY)
    assert np.array_equal(arr, expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process: no second warning
        read_image(p)


def test_gray_stored_as_rgb_converts_silently(tmp_path, monkeypatch):
    monkeypatch.setattr(gray, "_colour_warned", False)
    g = _gray8()
    p = tmp_path / "gray_rgb.png"
    p.write_bytes(_png_bytes(np.dstack([g, g, g])))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        arr, _ = read_image(p)
    assert np.array_equal(arr, g)


def test_colour_jpeg_warns(tmp_path, monkeypatch):
    monkeypatch.setattr(gray, "_colour_warned", False)
    g = _gray8()
    p = tmp_path / "colour.jpg"
    p.write_bytes(_jpeg_bytes(np.dstack([g, g // 2, 255 - g])))
    with pytest.warns(ColourImageWarning):
        arr, _ = read_image(p)
    assert arr.ndim == 2


def test_real_samples_still_read():
    real = Path(__file__).resolve().parents[3] / "shared" / "real" / "cxr"
    if not real.is_dir():
        pytest.skip("shared real samples absent")
    for f in sorted(real.iterdir()):
        arr, (h, w) = read_image(f)
        assert arr.ndim == 2 and min(h, w) >= 512


# -- validate(): a report of every problem --------------------------------------------------------
def _damage(ds) -> dict[str, str]:
    """Damage four images in four ways; returns sample_id -> expected problem."""
    kinds = ["missing", "empty", "undecodable", "undecodable"]
    faults = [lambda p: p.unlink(), lambda p: p.write_bytes(b""),
              lambda p: p.write_bytes(p.read_bytes()[:200]), FAULTS["png_bomb"]]
    out = {}
    for i, (kind, fault) in enumerate(zip(kinds, faults)):
        fault(_file(ds, i))
        out[ds.harmonized_df["sample_id"][i]] = kind
    return out


@pytest.mark.parametrize("num_workers", [0, 2])
def test_validate_reports_every_problem(ds, num_workers):
    assert ds.validate(progress=False).ok
    expected = _damage(ds)
    report = ds.validate(progress=False, num_workers=num_workers)
    assert not report.ok and report.checked == len(ds)
    assert dict(zip(report.problems["sample_id"], report.problems["problem"])) == expected
    assert report.counts()["undecodable"] == 2 and report.counts()["missing"] == 1
    text = str(report)
    assert "1 missing" in text and "1 empty" in text and "2 undecodable" in text
    with pytest.raises(ImageReadError, match="4 of"):
        report.raise_if_problems()


def test_validate_header_only_is_fast_path(ds):
    expected = _damage(ds)
    report = ds.validate(progress=False, decode=False)
    found = dict(zip(report.problems["sample_id"], report.problems["problem"]))
    # without decoding, a PNG cut after its header passes; everything else is caught
    assert {k: v for k, v in expected.items() if k in found} == found
    assert len(found) >= 3


def test_validate_shows_progress_bar(ds, capsys):
    ds.validate()
    assert "validating ReXGradientValidDataset" in capsys.readouterr().err


def test_validate_rejects_bad_worker_count(ds):
    with pytest.raises(RadHarmonyError, match="num_workers"):
        ds.validate(num_workers=-1, progress=False)


# -- on_missing ------------------------------------------------------------------------------------
def test_on_missing_drop_warns_with_count_and_paths(ds):
    gone = [ds.harmonized_df["image_path"][i] for i in (0, 2)]
    for i in (0, 2):
        _file(ds, i).unlink()
    with pytest.warns(RowsDroppedWarning, match="dropped 2 of") as rec:
        dropped = ReXGradientValidDataset(ds.base_image_dir, cache_dir=None, on_missing="drop")
    assert gone[0] in str(rec[0].message)
    assert len(dropped) == len(ds) - 2
    assert not set(gone) & set(dropped.harmonized_df["image_path"])
    for i in range(len(dropped)):
        dropped[i]
    tr, va = dropped.get_datasets(n_splits=2)
    assert len(tr) + len(va) == len(dropped)


def test_on_missing_raise_is_the_default(ds):
    _file(ds, 0).unlink()
    fresh = ReXGradientValidDataset(ds.base_image_dir, cache_dir=None)
    assert len(fresh) == len(ds)
    with pytest.raises(ImageReadError, match="on_missing='drop'"):
        fresh[0]


def test_on_missing_drop_with_no_image_at_all_raises(tmp_path):
    root = write_rexgradient(tmp_path, studies={"valid": 2}, images=False)
    with pytest.raises(ImageReadError, match="none of the"):
        ReXGradientValidDataset(root, cache_dir=None, on_missing="drop")


def test_on_missing_bad_value(ds):
    with pytest.raises(RadHarmonyError, match="on_missing"):
        ReXGradientValidDataset(ds.base_image_dir, cache_dir=None, on_missing="skip")


def test_error_in_dataloader_worker_keeps_type_and_names_sample(ds):
    import torch

    from radharmony import collate

    _file(ds, 1).write_bytes(b"")
    loader = torch.utils.data.DataLoader(ds, batch_size=2, num_workers=1, collate_fn=collate)
    with pytest.raises(ImageReadError) as info:
        list(loader)
    assert ds.harmonized_df["sample_id"][1] in str(info.value)


@pytest.mark.parametrize("head,what", [
    (b"BM\x00\x00", "BMP"), (b"II*\x00", "TIFF"), (b"MM\x00*", "TIFF"),
    (b"\x00\x00\x00\x0cjP  \r\n", "JPEG 2000"), (b"RIFF\x00\x00\x00\x00WEBP", "WebP"),
    (b"\x1f\x8b\x08", "gzip"), (b"PK\x03\x04", "ZIP"), (b"  <html><body>", "HTML")])
def test_other_formats_are_named(tmp_path, head, what):
    p = tmp_path / "x.png"
    p.write_bytes(head + b"\x00" * 300)
    with pytest.raises(ImageReadError, match=what):
        read_image(p)


def _pil_variant(path: Path, kind: str) -> None:
    from PIL import Image

    g = Image.fromarray(_gray8())
    {"1bit": lambda: g.convert("1").save(path, format="PNG"),
     "palette": lambda: g.convert("P").save(path, format="PNG"),
     "gray_alpha": lambda: g.convert("LA").save(path, format="PNG"),
     "cmyk": lambda: g.convert("CMYK").save(path, format="JPEG"),
     "progressive": lambda: g.save(path, format="JPEG", progressive=True),
     "rgb16": lambda: cv2.imwrite(str(path), np.dstack([_gray8()] * 3).astype(np.uint16) * 257),
     }[kind]()


@pytest.mark.parametrize("kind", ["1bit", "palette", "gray_alpha", "cmyk", "progressive",
                                  "rgb16"])
def test_unusual_but_valid_images_are_read(tmp_path, kind):
    p = tmp_path / f"{kind}.png"  # the content decides, not the name
    _pil_variant(p, kind)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ColourImageWarning)
        arr, src = read_image(p)
    assert arr.ndim == 2 and src == (64, 48)


def test_multiframe_dicom_reads_first_frame(tmp_path):
    frames = np.stack([np.full((32, 24), v, np.uint16) for v in (100, 200, 300)])
    p = _dicom(tmp_path / "mf.dcm", rows=32, cols=24, frames=3, data=frames)
    arr, src = read_image(p)
    assert src == (32, 24) and float(arr.mean()) == 100.0


def test_user_transform_error_keeps_type_and_gains_a_note(ds):
    import sys

    def transform(sample):
        raise KeyError("image")  # what a MONAI LoadImaged with the wrong key raises

    custom = ReXGradientValidDataset(ds.base_image_dir, cache_dir=None, transform=transform)
    with pytest.raises(KeyError) as info:
        custom[2]
    if sys.version_info >= (3, 11):
        assert any(custom.harmonized_df["sample_id"][2] in n for n in info.value.__notes__)
