"""radharmony's own decoder for the PNGs chest X-ray datasets ship: grayscale, 8 or 16 bits,
not interlaced (ReXGradient's 16-bit PNGs, NIH's 8-bit ones).

Why: OpenCV's decoder (libpng) takes ~8 ms for one of the bench corpus's 16-bit images, of which
inflating the compressed stream is ~5.5 ms with zlib. Here the stream is inflated with Intel's
ISA-L (``isal``, ~3.3 ms; zlib when it is not installed) and the rows are rebuilt by a compiled
kernel (:mod:`radharmony.imaging._png_jit`, ~0.5 ms for Sub-filtered rows) straight into the
output array: about 1.7x faster decoding in all (1.6-1.9x on the bench corpus). Both are in the
``fast`` extra.

The result is the array ``cv2.imread(path, cv2.IMREAD_UNCHANGED)`` gives, bit for bit. The
kernels are used only after they rebuilt every filter type at both depths exactly, and
:func:`decode` returns None -- OpenCV then decodes the file, and reports what is wrong with it
-- for anything else: other colour types or depths, interlacing, a chunk that could change what
OpenCV returns (only those in :data:`HARMLESS` are passed over), a failed CRC, a stream that
does not inflate to exactly the image's rows, or an unknown filter byte.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from . import jit

try:  # ISA-L inflates ~1.7x faster than zlib (the same bytes)
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - isal is in the fast extra
    _zlib = zlib

SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: ancillary chunks that do not change what OpenCV decodes for a grayscale image (each one is
#: checked against OpenCV in the test suite); any other chunk hands the file to OpenCV
HARMLESS = frozenset({b"tEXt", b"zTXt", b"iTXt", b"tIME", b"pHYs", b"gAMA", b"cHRM", b"sRGB",
                      b"iCCP", b"bKGD", b"sBIT"})
#: larger images are left to OpenCV (its own limit is 2^30 pixels)
MAX_PIXELS = 1 << 30
_CHUNK = struct.Struct(">I4s")
_IHDR = struct.Struct(">IIBBBBB")


def decode(data: bytes) -> np.ndarray | None:
    """The image of PNG bytes ``data`` as a 2-D uint8/uint16 array, or None when this decoder
    does not take the file (see the module docstring) or its kernels are not in use."""
    kernel = _kernel()
    if kernel is None:
        return None
    parsed = _parse(data)
    if parsed is None:
        return None
    (w, h, depth), stream = parsed
    size = h * (w * depth // 8 + 1)
    try:
        raw = _inflate(stream, size)
    except Exception:  # noqa: BLE001 - a damaged stream: OpenCV decodes it and reports
        return None
    if len(raw) != size:
        return None
    out = np.empty((h, w), np.uint16 if depth == 16 else np.uint8)
    return out if kernel(np.frombuffer(raw, np.uint8), out) else None


def _parse(data: bytes):
    """``((width, height, depth), compressed stream)`` of a PNG this decoder takes, else None."""
    if not data.startswith(SIGNATURE):
        return None
    view, pos, header, parts, last = memoryview(data), len(SIGNATURE), None, [], None
    while pos + 12 <= len(data):
        n, kind = _CHUNK.unpack_from(data, pos)
        end = pos + 8 + n
        if end + 4 > len(data):
            return None
        body = view[pos + 8:end]
        if _crc(body, _crc(kind)) != struct.unpack_from(">I", data, end)[0]:
            return None
        if header is None:
            if kind != b"IHDR" or n != _IHDR.size:
                return None
            w, h, depth, colour, compression, filtering, interlace = _IHDR.unpack_from(body)
            if colour != 0 or depth not in (8, 16) or compression or filtering or interlace \
                    or not 0 < w * h <= MAX_PIXELS:
                return None
            header = (w, h, depth)
        elif kind == b"IDAT":
            if parts and last != b"IDAT":
                return None  # IDAT chunks must be consecutive
            parts.append(body)
        elif kind == b"IEND":
            return (header, b"".join(parts)) if parts else None
        elif kind not in HARMLESS:
            return None
        last, pos = kind, end + 4
    return None  # no IEND: OpenCV reports the truncated file


def _inflate(stream: bytes, size: int) -> bytes:
    """The stream inflated (expected: ``size`` bytes, allocated at once, but never more than
    deflate's largest ratio, ~1032:1, allows: a header cannot make it allocate more)."""
    return _zlib.decompress(stream, bufsize=min(size, 1032 * len(stream) + 64))


def _crc(data, value: int = 0) -> int:
    return _zlib.crc32(data, value)


def encode(img: np.ndarray, filters=(0,)) -> bytes:
    """A grayscale PNG of ``img`` (2-D uint8 or uint16) whose row ``r`` is filtered with
    ``filters[r % len(filters)]`` (0-4): for the kernels' check and the tests, which need each
    filter type (encoders choose their own)."""
    depth = 16 if img.dtype == np.uint16 else 8
    rows = img.astype(">u2").view(np.uint8) if depth == 16 else np.asarray(img, np.uint8)
    bpp, (h, rb) = depth // 8, rows.shape
    b = rows.astype(np.int32)
    out = np.empty((h, rb + 1), np.uint8)
    for r in range(h):
        f = filters[r % len(filters)]
        up = b[r - 1] if r else np.zeros(rb, np.int32)
        a = np.concatenate([np.zeros(bpp, np.int32), b[r, :-bpp]])
        c = np.concatenate([np.zeros(bpp, np.int32), up[:-bpp]])
        pa, pb, pc = abs(up - c), abs(a - c), abs(a + up - 2 * c)
        paeth = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, up, c))
        predicted = (0, a, up, (a + up) >> 1, paeth)[f]
        out[r, 0], out[r, 1:] = f, (b[r] - predicted) & 0xFF

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + \
            struct.pack(">I", zlib.crc32(kind + body))

    return SIGNATURE + chunk(b"IHDR", _IHDR.pack(img.shape[1], h, depth, 0, 0, 0, 0)) + \
        chunk(b"IDAT", zlib.compress(out.tobytes())) + chunk(b"IEND", b"")


# -- the kernels (numba, optional) --------------------------------------------------------------
def accelerated() -> bool:
    """Whether grayscale 8/16-bit PNGs are decoded here (numba is installed, the kernels
    rebuilt every filter type exactly, ``RADHARMONY_JIT`` is not ``0``) rather than by OpenCV.
    The first call per process loads the kernels (~0.3 s); a dataset makes it when it is built,
    so forked DataLoader workers inherit them."""
    return _kernel() is not None


def _kernel():
    return jit.loaded("png", _load)


def _load():
    module = jit.kernels("_png_jit")
    if module is None:
        return None
    return jit.compile_checked(
        module.unfilter, lambda kernel: _exact(kernel, 8) and _exact(kernel, 16),
        what="PNG decoder", differs="it rebuilt a test image wrongly",
        instead="PNGs are decoded by OpenCV instead: the same arrays, about 1.7x slower")


def _exact(kernel, depth: int) -> bool:
    """Whether ``kernel`` rebuilds a random image written with each filter type (as the first
    row too), from read-only bytes as :func:`decode` passes them."""
    dtype = np.uint16 if depth == 16 else np.uint8
    img = np.random.default_rng(depth).integers(0, 1 << depth, (12, 7)).astype(dtype)
    for filters in ((0, 1, 2, 3, 4, 4, 3, 2, 1, 0), (1,), (2,), (3,), (4,)):
        stream = _parse(encode(img, filters))[1]
        out = np.empty(img.shape, dtype)
        if not kernel(np.frombuffer(zlib.decompress(stream), np.uint8), out) or \
                not np.array_equal(out, img):
            return False
    return True
