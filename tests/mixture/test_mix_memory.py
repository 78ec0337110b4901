"""What a build holds while it draws records: a source drops its dataset (the whole harmonized
table) once its rows are taken, and freed memory goes back to the system."""

from __future__ import annotations

import gc
import warnings
import weakref

import pyarrow as pa
import pytest

from mix_replicas import replicas  # noqa: F401 (fixture)
from radharmony import gc_pause
from radharmony.gc_pause import paused_gc, release_memory
from radharmony.mixture import MANIFEST_NAME, RECORDS_NAME, build, builder
from radharmony.mixture.holdout import HoldOut, input_identity, open_dataset
from radharmony.mixture.spec import load_spec


class _Watch:
    """A sink that notes, at each table written, whether the dataset is still alive."""

    def __init__(self, ref):
        self.ref, self.alive, self.rows = ref, [], 0

    def write(self, table: pa.Table) -> None:
        self.alive.append(self.ref() is not None)
        self.rows += len(table)


@pytest.mark.parametrize("split", ["train", "all"])  # all: the rows are the dataset's own
def test_a_source_drops_the_dataset_the_hold_out_handed_it_before_drawing(replicas, tmp_path,
                                                                          split):
    spec = load_spec({"name": "drop", "seed": 1, "valid": 0.0, "cache_dir": str(tmp_path),
                      "sources": [{"dataset": "mimic_cxr_jpg", "root": replicas["mimic_cxr_jpg"],
                                   "split": split,
                                   "tasks": {"classify_view": "all", "report_findings": "x2"}}]})
    s = spec.sources[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds = open_dataset(s.dataset, s.root, s.kwargs)
    handed = builder._hand((ds, input_identity(ds)))
    table = weakref.ref(ds.harmonized_df)
    del ds
    sink = _Watch(table)
    tallies = builder.Tallies()
    info = builder._source(spec, s, HoldOut(), sink, tallies, 1, False, handed)
    assert sink.alive and not any(sink.alive)  # gone before the first record was written
    assert handed == []  # taken out of the list: the caller's arguments hold nothing
    assert sink.rows == sum(tallies.counts.values()) > 0
    assert info["rows"] > 0


def test_a_hand_of_nothing_is_an_empty_list():
    assert builder._hand(None) == []
    assert builder._hand(("ds", [])) == [("ds", [])]


def test_release_memory_collects_cycles_while_the_collector_is_paused():
    class Node:
        pass

    with paused_gc():
        a, b = Node(), Node()
        a.other, b.other = b, a
        ref = weakref.ref(a)
        del a, b
        assert ref() is not None  # a cycle: only the collector frees it
        release_memory()
        assert ref() is None
        assert not gc.isenabled()  # still paused
    assert gc.isenabled()


def test_release_memory_returns_arrows_unused_pages(monkeypatch):
    released = []
    pool = pa.default_memory_pool()
    monkeypatch.setattr(pa, "default_memory_pool", lambda: _Pool(pool, released))
    release_memory()
    assert released == [True]


class _Pool:
    def __init__(self, pool, released):
        self.pool, self.released = pool, released

    def release_unused(self):
        self.released.append(True)
        self.pool.release_unused()


def test_release_memory_without_malloc_trim(monkeypatch):
    monkeypatch.setattr(gc_pause, "_malloc_trim", lambda: None)  # musl, macOS, Windows
    release_memory()


@pytest.mark.skipif(gc_pause._malloc_trim() is None, reason="no glibc malloc_trim here")
def test_release_memory_trims_the_c_heap(monkeypatch):
    trimmed = []
    monkeypatch.setattr(gc_pause, "_malloc_trim", lambda: trimmed.append)
    release_memory()
    assert trimmed == [0]


def test_the_files_do_not_depend_on_how_many_records_are_rendered_at_a_time(
        replicas, tmp_path, monkeypatch):
    from mix_replicas import spec_for

    spec = spec_for(replicas, cache_dir=tmp_path / "cache")
    build(spec, tmp_path / "whole", workers=1, progress=False)
    monkeypatch.setattr(builder, "CHUNK", 7)  # in this process: workers=1
    build(spec, tmp_path / "sevens", workers=1, progress=False)
    for name in (RECORDS_NAME, MANIFEST_NAME):
        assert (tmp_path / "sevens" / name).read_bytes() == \
            (tmp_path / "whole" / name).read_bytes(), name
    files = sorted(p.name for p in (tmp_path / "whole" / "columns").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "sevens" / "columns").iterdir())
    for name in files:
        assert (tmp_path / "sevens" / "columns" / name).read_bytes() == \
            (tmp_path / "whole" / "columns" / name).read_bytes(), name


def test_the_parent_drops_the_hold_outs_datasets_once_pickled_for_the_processes(
        replicas, tmp_path, monkeypatch):
    """A source dataset the hold-out read (MIMIC for its test split, a source too) is pickled
    for the source processes; the parent then holds it no more while it writes records."""
    seen = {}
    real_start, real_gather = builder._start, builder._gather

    def start(spec, hold, pool, out, workers, jobs):
        seen["refs"] = [weakref.ref(ds.harmonized_df) for ds, _ in pool.values()]
        return real_start(spec, hold, pool, out, workers, jobs)

    def gather(children, writer, tallies, progress):
        gc.collect()
        seen["alive"] = [r() is not None for r in seen["refs"]]
        return real_gather(children, writer, tallies, progress)

    monkeypatch.setattr(builder, "_start", start)
    monkeypatch.setattr(builder, "_gather", gather)
    root = replicas["mimic_cxr_jpg"]
    build({"name": "parent", "seed": 1, "valid": 0.0, "cache_dir": str(tmp_path / "cache"),
           "sources": [{"dataset": "mimic_cxr_jpg", "root": root, "split": "train",
                        "tasks": {"classify_view": "all"}},
                       {"dataset": "mimic_cxr_jpg", "root": root, "split": "train",
                        "name": "again", "tasks": {"classify_view": "all"}}],
           "hold_out": [{"dataset": "mimic_cxr_jpg", "root": root, "split": "test"}]},
          tmp_path / "out", workers=2, progress=False)
    assert seen["refs"] and seen["alive"] == [False] * len(seen["refs"])


def test_sources_open_their_datasets_one_at_a_time(tmp_path, monkeypatch):
    """In a source process the opening lock is held while a dataset is opened (the source's
    peak), so a second source waits; outside one (no lock named) nothing is locked."""
    import fcntl

    from radharmony.mixture import spool

    with builder._one_opening():  # the parent: no lock named
        pass
    lock = tmp_path / "open.lock"
    monkeypatch.setitem(spool.INHERITED, "open_lock", str(lock))
    other = open(lock, "a")
    with builder._one_opening():
        with pytest.raises(BlockingIOError):  # another opener must wait
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released after the opening
    other.close()
