"""16-bit images in WebDataset shards: webdataset's built-in decoders cut them to 8 bits;
radharmony.export.exact_decoder gives the source arrays back exactly, and the export warns."""

from __future__ import annotations

import json
import warnings

import cv2
import numpy as np
import pytest

from radharmony.datasets.rexgradient import ReXGradientTestDataset
from radharmony.errors import StudyWarning
from radharmony.export import (DeepImageWarning, ExportError, exact_decoder, read_image_bytes,
                               to_study_webdataset)
from radharmony.export.decoders import bit_depth
from radharmony.fake import write_rexgradient
from radharmony.imaging.read import read_image

wds = pytest.importorskip("webdataset")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(study dataset, shard paths, study id -> source files) of a 16-bit PNG replica
    exported with images="original"."""
    tmp = tmp_path_factory.mktemp("deep")
    write_rexgradient(tmp, studies={"test": 12}, seed=5, image_size=(64, 56))
    meta = tmp / "download" / "metadata" / "test_metadata_view_position.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StudyWarning)
        ds = ReXGradientTestDataset(tmp / "deid_png", meta, level="study", cache_dir=None)
    with pytest.warns(DeepImageWarning, match=r"to_study_webdataset: 3 of 3 shards hold "
                      r"16-bit images \(rexgradient_test-000000.tar, rexgradient_test-000001"
                      r".tar, rexgradient_test-000002.tar\).*exact_decoder"):
        man = to_study_webdataset(ds, tmp / "wds", shard_size=5, images="original",
                                  progress=False)
    assert [s["bits"] for s in man["shards"]] == [16, 16, 16]
    sources = {str(ds.index.study_ids[s]): [ds.images.image_file(int(r)) for r in rows]
               for s, rows in enumerate(ds.index.rows)}
    return ds, [str(tmp / "wds" / s["name"]) for s in man["shards"]], sources


def _pairs(samples, sources):
    """(decoded member, source array) for every image member of every sample."""
    out = []
    for s in samples:
        meta = s["json"] if isinstance(s["json"], dict) else json.loads(s["json"])
        for j, f in enumerate(sources[meta["study_id"]]):
            out.append((s[f"{j}.png"], cv2.imread(str(f), cv2.IMREAD_UNCHANGED)))
    return out


def test_exact_decoder_returns_every_source_array(exported):
    ds, shards, sources = exported
    samples = list(wds.WebDataset(shards, shardshuffle=False).decode(exact_decoder))
    assert len(samples) == 12 and isinstance(samples[0]["json"], dict)  # json left to wds
    pairs = _pairs(samples, sources)
    assert len(pairs) == sum(len(v) for v in sources.values()) > 12
    assert all(src.dtype == np.uint16 and src.max() > 255 for _, src in pairs)
    assert all(got.dtype == src.dtype and np.array_equal(got, src) for got, src in pairs)


@pytest.mark.parametrize("spec", ["l8", "pil", "torch"])
def test_the_builtin_decoders_lose_the_16_bits(exported, spec):
    _, shards, sources = exported
    pairs = _pairs(wds.WebDataset(shards, shardshuffle=False).decode(spec), sources)
    equal = 0
    for got, src in pairs:
        arr = np.asarray(got)
        arr = arr.squeeze(0) if arr.ndim == 3 and arr.shape[0] == 1 else arr
        arr = arr[..., 0] if arr.ndim == 3 else arr
        equal += arr.shape == src.shape and np.array_equal(arr.astype(np.int64), src)
        assert arr.max() <= 255 or arr.dtype.kind == "f"  # eight bits (or [0, 1] floats)
    assert equal == 0


def test_cache_exports_at_8_bits_do_not_warn(exported, tmp_path):
    ds = exported[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeepImageWarning)
        man = to_study_webdataset(ds, tmp_path / "c", progress=False)
    assert [s["bits"] for s in man["shards"]] == [8]


def test_read_image_bytes_dicom_jpeg_and_refusals(tmp_path):
    from radharmony.fake.dicom import write_dicom

    rng = np.random.default_rng(0)
    img = rng.integers(0, 4096, (40, 32)).astype(np.uint16)
    dcm = write_dicom(tmp_path / "a.dcm", img, bits_stored=12)
    data = dcm.read_bytes()
    assert bit_depth(data) == 12
    got = exact_decoder(".3.dcm", data)
    assert got.dtype == np.float32 and np.array_equal(got, read_image(dcm)[0])
    jpg = tmp_path / "b.jpg"
    cv2.imwrite(str(jpg), rng.integers(0, 256, (24, 20)).astype(np.uint8))
    assert np.array_equal(exact_decoder(".ref0.jpg", jpg.read_bytes()), read_image(jpg)[0])
    assert bit_depth(jpg.read_bytes()) == 8
    png = tmp_path / "c.png"
    cv2.imwrite(str(png), img)
    assert np.array_equal(exact_decoder(".0", png.read_bytes()), img)  # no suffix: sniffed
    assert exact_decoder(".json", b"{}") is None and exact_decoder(".txt", b"x") is None
    with pytest.raises(ExportError, match=r"Export member 0.png is not a PNG, JPEG or DICOM"):
        read_image_bytes(b"not an image", name="0.png")
    with pytest.raises(ExportError, match=r"Export member 1.png could not be read as PNG.*"
                                          r"Found: .*declares"):
        huge = bytearray(png.read_bytes())
        huge[16:24] = (100_000).to_bytes(4, "big") * 2  # IHDR: 100,000 x 100,000
        read_image_bytes(bytes(huge), name="1.png")
