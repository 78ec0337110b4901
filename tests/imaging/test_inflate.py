"""Whole-stream inflate (libdeflate) gives the same bytes as zlib, and steps aside (None)
for anything it cannot vouch for, so the streaming reader names the fault."""

import gzip

import numpy as np
import pytest

from radharmony.imaging import inflate

DATA = np.random.default_rng(0).integers(-1024, 2000, 50_000).astype("<i2").tobytes()

pytestmark = pytest.mark.skipif(inflate._c_api() is None,
                                reason="deflate (the fast extra) is not installed")


def _into(path, size: int):
    out = np.zeros(size, np.uint8)
    return out.tobytes() if inflate.inflate_gzip_into(path, out) else None


@pytest.mark.parametrize("ahead", [0, 4096, 3 * 4096 + 5])
def test_a_one_member_gzip_file_is_inflated_whole_its_pages_mapped_ahead(tmp_path, monkeypatch,
                                                                         ahead):
    """``ahead``: bytes mapped a block at a time by the helper thread (0: no helper); a block
    that is not whole pages; a kernel without MADV_POPULATE_WRITE (advice refused)."""
    from radharmony.imaging import pages

    path = tmp_path / "v.nii.gz"
    path.write_bytes(gzip.compress(DATA, compresslevel=1))
    monkeypatch.setattr(pages, "AHEAD", ahead or 1 << 40)
    assert _into(path, len(DATA)) == DATA
    monkeypatch.setattr(pages, "POPULATE_WRITE", 0x7FFF)     # refused: the helper stops
    assert _into(path, len(DATA)) == DATA
    assert not inflate.inflate_gzip_into(path, np.zeros(len(DATA), np.uint8)[::2])  # strided


@pytest.mark.parametrize("case", ["two members", "size not the trailer's", "truncated",
                                  "corrupt", "not gzip", "empty", "missing"])
def test_what_it_cannot_vouch_for_is_left_to_the_streaming_reader(tmp_path, case):
    path = tmp_path / "v.nii.gz"
    whole, size = gzip.compress(DATA), len(DATA)
    if case == "two members":   # the trailer is the last member's: its size is made to match
        half = size // 2
        whole = gzip.compress(DATA[:half]) + gzip.compress(DATA[half:] + DATA[:half])
        size = len(DATA) - half + half
    elif case == "size not the trailer's":
        size -= 2
    elif case == "truncated":
        whole = whole[:len(whole) // 2] + whole[-8:]
    elif case == "corrupt":
        whole = whole[:40] + bytes(b ^ 0xFF for b in whole[40:80]) + whole[80:]
    elif case == "not gzip":
        whole = DATA
    elif case == "empty":
        whole = b""
    if case != "missing":
        path.write_bytes(whole)
    assert _into(path, size) is None


def test_the_streaming_reader_reads_members_one_after_another(tmp_path):
    path = tmp_path / "m.gz"
    path.write_bytes(gzip.compress(DATA[:1001]) + gzip.compress(DATA[1001:]))
    out = np.empty(len(DATA), dtype=np.uint8)
    with open(path, "rb", buffering=0) as file:
        pieces = inflate.GzipPieces(file, 7)
        assert pieces.fill(out[:500]) == 500 and pieces.fill(out[500:]) == len(DATA) - 500
        assert pieces.fill(np.empty(4, np.uint8)) == 0
    assert out.tobytes() == DATA
