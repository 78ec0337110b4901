"""Any bytes as an image cache pack: opening it raises ValueError (the cache then drops it
with a warning) or gives a pack whose records that pass their checksum are exactly the ones
written -- never another exception, never wrong pixels or letterbox for a key."""

from __future__ import annotations

import functools
import json
import shutil
import tempfile
import warnings
from pathlib import Path

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from radharmony.imaging.cache import ImageCache
from radharmony.imaging.packs import Pack

PROFILE = settings.get_profile("radharmony-property")
PARAMS = {"name": "prop", "size": 16}
_TMP = tempfile.TemporaryDirectory(prefix="rh-prop-pack-")  # removed at exit


@functools.cache
def _original() -> tuple[bytes, str, dict]:
    """A valid pack of 5 records (16 x 16 uint8, 3 info fields): its bytes, the cache salt
    and key -> (pixels, info)."""
    root = Path(_TMP.name) / "original"
    cache = ImageCache(root, PARAMS)
    rng = np.random.default_rng(0)
    want = {}
    for i in range(5):
        key = f"{i:064x}"
        want[key] = (rng.integers(0, 256, (16, 16), dtype=np.uint8),
                     {"top": i, "left": 2 * i, "scale": 100 + i})
    cache.pack(list(want), lambda k: want[k])
    (path,) = (root / "images" / "packs").glob("*.rhp")
    return path.read_bytes(), cache.salt, want


def _header_edit(blob: bytes, field: str, value) -> bytes:
    n = int.from_bytes(blob[8:12], "little")
    head = json.loads(blob[12:12 + n])
    head[field] = value
    meta = json.dumps(head).encode()[:1023]
    return blob[:8] + len(meta).to_bytes(4, "little") + meta.ljust(1024, b"\0") + blob[1036:]


JSONISH = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() |
                       st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=3) |
                       st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)


@st.composite
def packs(draw):
    blob = _original()[0]
    how = draw(st.sampled_from(["random", "flip", "truncate", "splice", "header"]))
    if how == "random":
        return draw(st.binary(max_size=2000))
    if how == "flip":
        out = bytearray(blob)
        for _ in range(draw(st.integers(1, 4))):
            i = draw(st.integers(0, len(out) - 1))
            out[i] ^= draw(st.integers(1, 255))
        return bytes(out)
    if how == "truncate":
        return blob[:draw(st.integers(0, len(blob)))]
    if how == "splice":
        i = draw(st.integers(0, len(blob)))
        return blob[:i] + draw(st.binary(min_size=1, max_size=64)) + blob[i:]
    field = draw(st.sampled_from(["count", "shape", "dtype", "info_fields", "checksum",
                                  "offsets", "salt", "extra"]))
    return _header_edit(blob, field, draw(JSONISH))


@PROFILE
@given(packs())
@example(b"")
@example(b"RHPACK03" + (5).to_bytes(4, "little") + b"[" * 5)
@example(b"RHPACK03" + (1000).to_bytes(4, "little") + b"[" * 1000 + b"]" * 1000)
@example(_header_edit(_original()[0], "dtype", []))  # unhashable: was a TypeError
@example(_header_edit(_original()[0], "checksum", {}))
def test_pack_reader(data):
    _, salt, want = _original()
    path = Path(_TMP.name) / "x.rhp"  # rewritten by each example
    path.write_bytes(data)
    try:
        pack = Pack(path, salt)
    except ValueError:
        return
    keys = np.array([bytes.fromhex(k) for k in want], dtype="S32")
    rows = pack.rows(keys)
    for key, row in zip(want, rows.tolist()):
        if row < 0:
            continue
        arr, ok = pack.read(np.array([row]))
        if ok[0]:
            pixels, info = want[key]
            assert arr[0].shape == pixels.shape and np.array_equal(arr[0], pixels)
            assert pack.info_dict(row) == info


@PROFILE
@given(packs())
def test_cache_drops_a_bad_pack_without_raising(data):
    _, _, want = _original()
    root = Path(_TMP.name) / "cache"
    shutil.rmtree(root, ignore_errors=True)  # a fresh cache for each example
    cache = ImageCache(root, PARAMS)
    folder = root / "images" / "packs"
    folder.mkdir(parents=True)
    (folder / f"{cache.prefix}-0000000000000000.rhp").write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for key, (pixels, info) in want.items():
            got = cache.load(key)
            assert got is None or (np.array_equal(got[0], pixels) and got[1] == info)
