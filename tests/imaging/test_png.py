"""radharmony's own PNG decoder (imaging/png.py): the arrays OpenCV gives, bit for bit, or
OpenCV itself for everything it does not take."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest

from radharmony.errors import ImageReadError
from radharmony.imaging import jit, png
from radharmony.imaging.read import read_image

REAL = Path(__file__).resolve().parents[3] / "shared" / "real" / "cxr"


def _cv2(data: bytes) -> np.ndarray:
    return cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)


def _image(depth: int, shape=(41, 53), seed=0) -> np.ndarray:
    dtype = np.uint16 if depth == 16 else np.uint8
    rng = np.random.default_rng(seed)
    smooth = cv2.GaussianBlur(rng.integers(0, 1 << depth, shape).astype(dtype), (5, 5), 0)
    return np.where(rng.random(shape) < 0.1, rng.integers(0, 1 << depth, shape), smooth) \
        .astype(dtype)  # smooth rows with outliers: every predictor branch is taken


def _chunks(data: bytes) -> list[tuple[bytes, bytes]]:
    out, pos = [], 8
    while pos < len(data):
        n, kind = struct.unpack_from(">I4s", data, pos)
        out.append((kind, data[pos + 8:pos + 8 + n]))
        pos += 12 + n
    return out


def _assemble(chunks) -> bytes:
    return png.SIGNATURE + b"".join(struct.pack(">I", len(b)) + k + b +
                                    struct.pack(">I", zlib.crc32(k + b)) for k, b in chunks)


@pytest.fixture(autouse=True)
def _kernels():
    pytest.importorskip("numba", reason="radharmony's PNG decoder needs the fast extra")
    assert png.accelerated()  # with numba, the kernels passed their check


@pytest.mark.parametrize("depth", [8, 16])
@pytest.mark.parametrize("filters", [(0,), (1,), (2,), (3,), (4,), (0, 1, 2, 3, 4),
                                     (4, 3, 2, 1, 0, 3, 3, 1)])
def test_every_filter_type_decodes_as_opencv_does(depth, filters):
    img = _image(depth)
    data = png.encode(img, filters)
    got = png.decode(data)
    assert got is not None and got.dtype == img.dtype
    assert np.array_equal(got, img) and np.array_equal(got, _cv2(data))


@pytest.mark.parametrize("shape", [(1, 1), (1, 9), (9, 1), (2, 3), (300, 257)])
@pytest.mark.parametrize("depth", [8, 16])
def test_odd_shapes(depth, shape):
    img = _image(depth, shape, seed=3)
    data = png.encode(img, (4, 1, 3, 2, 0))
    assert np.array_equal(png.decode(data), img)


@pytest.mark.parametrize("depth", [8, 16])
def test_opencvs_and_pillows_files_and_split_idat_chunks(depth, tmp_path):
    img = _image(depth, (120, 90), seed=5)
    for strategy in range(5):  # libpng's choice of filters
        f = tmp_path / f"s{strategy}.png"
        cv2.imwrite(str(f), img, [cv2.IMWRITE_PNG_STRATEGY, strategy])
        assert np.array_equal(png.decode(f.read_bytes()), img)
    from PIL import Image

    for optimize in (False, True):  # Pillow's adaptive filters and its zlib levels
        f = tmp_path / f"pil{optimize}.png"
        (Image.fromarray(img) if depth == 8 else Image.fromarray(img).convert("I;16")) \
            .save(f, optimize=optimize)
        assert np.array_equal(png.decode(f.read_bytes()), _cv2(f.read_bytes()))
    chunks = _chunks(png.encode(img, (1, 4)))
    stream = b"".join(b for k, b in chunks if k == b"IDAT")
    split = [chunks[0], *((b"IDAT", stream[i:i + 97]) for i in range(0, len(stream), 97)),
             chunks[-1]]
    assert np.array_equal(png.decode(_assemble(split)), img)


@pytest.mark.parametrize("kind", sorted(png.HARMLESS))
def test_chunks_passed_over_do_not_change_what_opencv_decodes(kind):
    img = _image(16, (20, 30), seed=kind[0])
    bodies = {b"gAMA": struct.pack(">I", 45455), b"sBIT": bytes([12]), b"bKGD": b"\x00\x07",
              b"pHYs": struct.pack(">IIB", 2835, 2835, 1), b"sRGB": b"\x00",
              b"cHRM": struct.pack(">8I", *range(8)), b"tIME": struct.pack(">HBBBBB", 2026, 1, 2,
                                                                           3, 4, 5),
              b"iCCP": b"x\x00\x00" + zlib.compress(b"not a profile"),
              b"tEXt": b"Comment\x00hello", b"zTXt": b"Comment\x00\x00" + zlib.compress(b"hi"),
              b"iTXt": b"Comment\x00\x00\x00\x00\x00hello"}
    chunks = _chunks(png.encode(img, (1,)))
    data = _assemble([chunks[0], (kind, bodies[kind]), *chunks[1:]])
    reference = _cv2(data)
    assert reference is not None and np.array_equal(reference, img)
    assert np.array_equal(png.decode(data), reference)


def _with(data: bytes, **change) -> bytes:
    chunks = _chunks(data)
    w, h, depth, colour, comp, filt, inter = struct.unpack(">IIBBBBB", chunks[0][1])
    header = {"depth": depth, "colour": colour, "interlace": inter, **change}
    chunks[0] = (b"IHDR", struct.pack(">IIBBBBB", w, h, header["depth"], header["colour"], comp,
                                      filt, header["interlace"]))
    return _assemble(chunks)


def test_what_it_does_not_take_is_left_to_opencv(tmp_path):
    """None for each: colour, palette, low bit depths, interlacing, transparency, an unknown
    filter byte, a failed CRC, a damaged or short stream, no IEND; read_image then gives
    OpenCV's array or its standard error."""
    gray = _image(8, (16, 16))
    data = png.encode(gray, (1,))
    for colour in (2, 6):
        f = tmp_path / f"c{colour}.png"
        cv2.imwrite(str(f), np.dstack([gray] * (3 if colour == 2 else 4)))
        assert png.decode(f.read_bytes()) is None
        assert read_image(f)[0].shape == gray.shape
    f = tmp_path / "low.png"
    cv2.imwrite(str(f), (gray > 128).astype(np.uint8), [cv2.IMWRITE_PNG_BILEVEL, 1])
    assert png.decode(f.read_bytes()) is None
    assert np.array_equal(read_image(f)[0], _cv2(f.read_bytes()))
    chunks = _chunks(data)
    trns = _assemble([chunks[0], (b"tRNS", b"\x00\x05"), *chunks[1:]])
    assert png.decode(trns) is None
    assert png.decode(_with(data, interlace=1)) is None
    assert png.decode(_with(data, depth=4)) is None
    bad_filter = bytearray(zlib.decompress(chunks[1][1]))
    bad_filter[17 * 3] = 5  # row 3 names filter type 5
    assert png.decode(_assemble([chunks[0], (b"IDAT", zlib.compress(bytes(bad_filter))),
                                 chunks[-1]])) is None
    bad_crc = bytearray(data)
    bad_crc[-13] ^= 1  # the IDAT chunk's CRC
    assert png.decode(bytes(bad_crc)) is None
    short = _assemble([chunks[0], (b"IDAT", zlib.compress(bytes(bad_filter)[:-17])),
                       chunks[-1]])
    assert png.decode(short) is None
    assert png.decode(_assemble([chunks[0], (b"IDAT", chunks[1][1][:-9]), chunks[-1]])) is None
    assert png.decode(data[:-12]) is None  # no IEND
    f = tmp_path / "cut.png"
    f.write_bytes(data[:len(data) // 2])
    with pytest.raises(ImageReadError, match="could not be decoded"):
        read_image(f)


def test_read_image_uses_it_and_gives_opencvs_arrays(tmp_path, monkeypatch):
    img = _image(16, (700, 650), seed=9)
    f = tmp_path / "x.png"
    cv2.imwrite(str(f), img)
    used = []
    decode = png.decode
    monkeypatch.setattr(png, "decode", lambda d: used.append(1) or decode(d))
    arr, src = read_image(f)
    assert used and arr.dtype == np.uint16 and np.array_equal(arr, cv2.imread(str(f), -1))
    assert src == img.shape


@pytest.mark.skipif(not REAL.is_dir(), reason="../shared/real is absent")
def test_real_nih_pngs():
    files = sorted(REAL.glob("*.png"))
    assert len(files) == 2
    for f in files:
        got = png.decode(f.read_bytes())
        assert got is not None and got.dtype == np.uint8 and got.shape == (512, 512)
        assert np.array_equal(got, cv2.imread(str(f), cv2.IMREAD_UNCHANGED))


def test_a_kernel_is_used_only_when_it_rebuilds_every_filter_exactly(monkeypatch):
    from radharmony.imaging import _png_jit

    def paeth_as_sub(raw, out):  # a kernel that gets one filter wrong
        stride = out.shape[1] * out.itemsize + 1
        for r in range(out.shape[0]):
            left = 0
            for x in range(out.shape[1]):
                left = (raw[r * stride + 1 + x] + left) & 0xFF
                out[r, x] = left
        return True

    monkeypatch.setattr(_png_jit, "unfilter", paeth_as_sub)
    monkeypatch.setattr(jit, "_loaded", {})
    with pytest.warns(RuntimeWarning, match="PNG decoder is not used"):
        assert not png.accelerated()
    data = png.encode(_image(8), (1,))
    assert png.decode(data) is None  # OpenCV decodes instead
    monkeypatch.undo()  # the right kernel, switched off: not used, no warning
    monkeypatch.setattr(jit, "_loaded", {})
    monkeypatch.setenv("RADHARMONY_JIT", "0")
    assert not png.accelerated()


def test_a_dataset_of_pngs_loads_the_decoder_when_it_is_built(tmp_path, monkeypatch):
    """So forked DataLoader workers inherit the loaded kernel (none loads it again)."""
    from radharmony.datasets.rexgradient import ReXGradientTrainDataset
    from radharmony.fake.rexgradient import write_rexgradient

    root = write_rexgradient(tmp_path / "rex", studies={"train": 2})
    monkeypatch.setattr(jit, "_loaded", {})
    ds = ReXGradientTrainDataset(root)
    assert jit._loaded.get("png") is not None
    arr = ds[0]["img"]
    assert arr.shape == (1, 224, 224)


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.sampled_from([8, 16]), h=st.integers(1, 12), w=st.integers(1, 12),
       filters=st.lists(st.integers(0, 4), min_size=1, max_size=6),
       split=st.integers(1, 200), seed=st.integers(0, 2**16),
       flip=st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(1, 255))))
def test_any_file_decodes_as_opencv_does_or_is_left_to_it(depth, h, w, filters, split, seed,
                                                          flip):
    """Random images, filters and IDAT splits decode exactly; a file with one byte changed
    anywhere decodes to OpenCV's array or goes to OpenCV (None), never to another array."""
    rng = np.random.default_rng(seed)
    img = rng.integers(0, 1 << depth, (h, w)).astype(np.uint16 if depth == 16 else np.uint8)
    chunks = _chunks(png.encode(img, tuple(filters)))
    stream = b"".join(b for k, b in chunks if k == b"IDAT")
    data = _assemble([chunks[0], *((b"IDAT", stream[i:i + split])
                                   for i in range(0, len(stream), split)), chunks[-1]])
    assert np.array_equal(png.decode(data), img)
    if flip is not None:
        bad = bytearray(data)
        pos = flip[0] % len(bad)
        bad[pos] ^= flip[1]
        got = png.decode(bytes(bad))
        if got is not None:
            ref = _cv2(bytes(bad))
            assert ref is not None and ref.dtype == got.dtype and np.array_equal(got, ref)
