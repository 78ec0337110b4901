"""Pages mapped ahead by a helper thread: the memory is never written, only mapped."""

import mmap

import numpy as np

from radharmony.imaging import pages


def test_pages_mapped_ahead_keep_what_the_array_holds(monkeypatch):
    monkeypatch.setattr(pages, "AHEAD", 3 * mmap.PAGESIZE + 5)   # blocks of no whole pages
    monkeypatch.setattr(pages.threads, "wanted", lambda n: 2)
    array = np.arange(100_000, dtype=np.int32)[7:]                 # starts mid-page
    before = array.copy()
    helper = pages.map_ahead(array)
    assert helper is not None
    helper.result()
    assert np.array_equal(array, before)


def test_no_helper_for_small_arrays_views_or_one_thread(monkeypatch):
    monkeypatch.setattr(pages, "AHEAD", 4096)
    assert pages.map_ahead(np.zeros(100, np.uint8)) is None                   # small
    assert pages.map_ahead(np.zeros((100, 1000), np.uint8)[:, ::2]) is None   # strided
    monkeypatch.setattr(pages.threads, "wanted", lambda n: 1)                # a worker
    assert pages.map_ahead(np.zeros(1 << 20, np.uint8)) is None
