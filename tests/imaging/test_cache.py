"""The image cache, its packs, the batch loader and the harmonized-table cache."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import radharmony
from radharmony.spec import DERIVED_COLUMNS
from radharmony.imaging import cache as cache_mod
from radharmony.imaging.cache import ImageCache
from radharmony.table.store import TableCache
from radharmony.datasets.rexgradient import ReXGradientTrainDataset, ReXGradientTrainHarmonizer
from radharmony.fake.rexgradient import BBOX_FILE
from radharmony.fake import write_rexgradient
from radharmony.data.loader import CachedLoader
from radharmony.imaging.pipeline import DefaultTransform


@pytest.fixture(scope="module")
def replica(tmp_path_factory) -> Path:
    return write_rexgradient(tmp_path_factory.mktemp("rex"), studies={"train": 12})


def _ds(root, cache_dir, **kw):
    return ReXGradientTrainDataset(root, cache_dir=cache_dir, **kw)


def _entries(cache_dir: Path) -> list[Path]:
    return sorted(p for p in (Path(cache_dir) / "images").rglob("*.rhc")
                  if not p.name.startswith(".tmp-"))


def _packs(cache_dir: Path) -> list[Path]:
    return sorted((Path(cache_dir) / "images" / "packs").glob("*.rhp"))


# -- cached == uncached --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("bits", [8, 16])
def test_cached_equals_uncached_bit_for_bit(replica, tmp_path, dtype, bits):
    tf = DefaultTransform(bits=bits)
    plain = _ds(replica, None, transform=tf, dtype=dtype)
    cached = _ds(replica, tmp_path, transform=tf, dtype=dtype)
    for i in range(4):
        ref = plain[i]["img"]
        assert ref.dtype == dtype and ref.shape == (1, 224, 224)
        assert torch.equal(cached[i]["img"], ref)  # miss: decoded and stored
        assert torch.equal(cached[i]["img"], ref)  # hit: read back
    assert len(_entries(tmp_path)) == 4
    cached.pre_cache(progress=False)  # packed: still the same values
    assert not _entries(tmp_path) and len(_packs(tmp_path)) == 1
    fresh = _ds(replica, tmp_path, transform=tf, dtype=dtype)
    for i in range(len(fresh)):
        assert torch.equal(fresh[i]["img"], plain[i]["img"])


def test_output_within_stated_tolerance_of_float_pipeline(replica):
    """8-bit storage is within half a step (1/255) of the unquantized window."""
    tf = DefaultTransform()
    ds = _ds(replica, None, dtype=torch.float32)
    path = ds.image_file(0)
    q, box = tf.encode(path)
    hi_res = DefaultTransform(bits=16).encode(path)[0].astype(np.float64) / 65535 * 2 - 1
    assert np.abs(q.astype(np.float64) / 255 * 2 - 1 - hi_res).max() <= 1 / 255 + 2 / 65535
    assert torch.equal(ds[0]["img"][0], torch.from_numpy(q.astype(np.float32) * (2 / 255) - 1))


@pytest.mark.parametrize("workers", [0, 2])
def test_cached_loader_batches_equal_dataloader_batches(replica, tmp_path, workers):
    ds = _ds(replica, tmp_path, output_report=True)
    plain = _ds(replica, None, output_report=True)
    loader = CachedLoader(ds, batch_size=5, shuffle=True, num_workers=workers, seed=3,
                          progress=False)
    for epoch in range(2):
        order = np.concatenate(loader.batches())
        assert sorted(order.tolist()) == list(range(len(ds)))
        batches = list(loader)
        assert len(batches) == len(loader) == -(-len(ds) // 5)
        for j, got in enumerate(batches):
            ref = radharmony.collate([plain[int(i)] for i in order[5 * j:5 * j + 5]])
            assert got["sample_id"] == ref["sample_id"]
            assert got["report"] == ref["report"]
            assert torch.equal(got["img"], ref["img"])
    assert loader.epoch == 2


def test_cached_loader_threads_read_their_batch_in_place(replica, tmp_path, monkeypatch):
    # CachedLoader's read-ahead threads are the parallelism: the batch each reads does not
    # fan out over the helper threads as well (the main process's own batch does)
    import threading

    from radharmony import threads
    seen = []
    wanted = threads.wanted
    monkeypatch.setattr(threads, "wanted", lambda n: seen.append(
        (threading.current_thread().name, wanted(n))) or seen[-1][1])
    ds = _ds(replica, tmp_path)
    ds.pre_cache(progress=False)
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        list(CachedLoader(ds, batch_size=4, num_workers=2, progress=False))
        loader = [k for name, k in seen if "loader" in name]
        assert loader and set(loader) == {1}
        seen.clear()
        ds.__getitems__(list(range(4)))
        assert seen and {k for _, k in seen} == {2}
    finally:
        torch.set_num_threads(n)


def test_shuffle_differs_between_epochs_and_repeats_with_seed(replica, tmp_path):
    ds = _ds(replica, tmp_path)
    a = CachedLoader(ds, batch_size=4, shuffle=True, seed=1, progress=False)
    first = np.concatenate(a.batches())
    a.set_epoch(1)
    assert not np.array_equal(first, np.concatenate(a.batches()))
    b = CachedLoader(ds, batch_size=4, shuffle=True, seed=1, progress=False)
    assert np.array_equal(first, np.concatenate(b.batches()))
    drop = CachedLoader(ds, batch_size=4, drop_last=True, progress=False)
    assert all(len(x) == 4 for x in drop.batches()) and len(drop) == len(ds) // 4


def test_splits_and_folds_share_one_cache(replica, tmp_path):
    ds = _ds(replica, tmp_path)
    ds.pre_cache(progress=False)
    before = sorted(p.name for p in _packs(tmp_path))
    for train, val in ds.get_folds(3):
        for part in (train, val):
            loader = CachedLoader(part, batch_size=4, progress=False)
            assert sum(len(b["img"]) for b in loader) == len(part)
    train, val = ds.get_datasets(4)
    _ = train[0], val[0]
    assert sorted(p.name for p in _packs(tmp_path)) == before  # no per-split copies
    assert not _entries(tmp_path)
    other_dtype = _ds(replica, tmp_path, dtype=torch.float32)  # output dtype: same entries
    assert other_dtype.pre_cache(progress=False) == ds.cache_keys()
    assert sorted(p.name for p in _packs(tmp_path)) == before


def test_pre_cache_with_workers_shows_progress(replica, tmp_path, capsys):
    ds = _ds(replica, tmp_path)
    keys = ds.pre_cache(num_workers=2)
    err = capsys.readouterr().err
    assert "caching ReXGradientTrainDataset" in err and "packing cache" in err
    assert len(keys) == len(set(keys)) == len(ds)
    assert len(_packs(tmp_path)) == 1
    ds.pre_cache(num_workers=2, progress=False)  # nothing left to do: no new pack
    assert len(_packs(tmp_path)) == 1


def test_no_cache_errors_clearly(replica):
    ds = _ds(replica, None)
    with pytest.raises(radharmony.RadHarmonyError, match="has no image cache.*Fix: build it"):
        ds.pre_cache()


# -- keys ----------------------------------------------------------------------------------------
def test_key_changes_with_every_parameter_and_file_change(replica, tmp_path):
    ds = _ds(replica, None)
    src = tmp_path / "img.png"
    src.write_bytes(ds.image_file(0).read_bytes())
    base = DefaultTransform()
    variants = [DefaultTransform(size=192), DefaultTransform(low_percentile=1.0),
                DefaultTransform(high_percentile=99.0), DefaultTransform(bits=16)]
    key = ImageCache(tmp_path, base.params()).key(src)
    keys = {key} | {ImageCache(tmp_path, v.params()).key(src) for v in variants}
    assert len(keys) == 1 + len(variants)
    assert ImageCache(tmp_path, base.params()).key(src) == key  # deterministic
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # touched
    touched = ImageCache(tmp_path, base.params()).key(src)
    assert touched != key
    src.write_bytes(src.read_bytes() + b"\0")  # size changes
    assert ImageCache(tmp_path, base.params()).key(src) not in (key, touched)
    copy = tmp_path / "copy.png"
    copy.write_bytes(src.read_bytes())
    os.utime(copy, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns))
    assert ImageCache(tmp_path, base.params()).key(copy) != \
        ImageCache(tmp_path, base.params()).key(src)  # another path


def test_key_changes_with_library_version(tmp_path, monkeypatch):
    src = tmp_path / "f.png"
    src.write_bytes(b"x")
    key = ImageCache(tmp_path, {}).key(src)
    monkeypatch.setattr(cache_mod, "__version__", "999.0")
    assert ImageCache(tmp_path, {}).key(src) != key


def test_changed_image_is_not_served_stale(replica, tmp_path):
    root = write_rexgradient(tmp_path / "data", studies={"train": 2})
    ds = _ds(root, tmp_path / "cache")
    ds.pre_cache(progress=False)
    before = ds[0]["img"]
    path = ds.image_file(0)
    from radharmony.fake.images import synthetic_cxr, write_png

    write_png(path, synthetic_cxr(150, 140, rng=np.random.default_rng(99)))
    after = _ds(root, tmp_path / "cache")[0]["img"]
    assert not torch.equal(before, after)
    assert torch.equal(after, _ds(root, None)[0]["img"])


# -- corruption ----------------------------------------------------------------------------------
def test_corrupted_loose_entry_is_detected_and_rebuilt(replica, tmp_path):
    ds = _ds(replica, tmp_path)
    ref = ds[0]["img"]
    (entry,) = _entries(tmp_path)
    blob = bytearray(entry.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    entry.write_bytes(bytes(blob))
    with pytest.warns(RuntimeWarning, match="failed its check.*checksum"):
        assert torch.equal(_ds(replica, tmp_path)[0]["img"], ref)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.equal(_ds(replica, tmp_path)[0]["img"], ref)  # rebuilt entry is sound
    entry.write_bytes(entry.read_bytes()[:100])  # truncated
    with pytest.warns(RuntimeWarning, match="truncated"):
        assert torch.equal(_ds(replica, tmp_path)[0]["img"], ref)


def test_corrupted_pack_record_is_bypassed_by_a_rebuilt_entry(replica, tmp_path):
    ds = _ds(replica, tmp_path)
    plain = _ds(replica, None)
    ds.pre_cache(progress=False)
    (pack_file,) = _packs(tmp_path)
    pack = cache_mod.Pack(pack_file)
    row = int(pack.rows(np.array([bytes.fromhex(ds.cache_keys()[2])], "S32"))[0])
    with open(pack_file, "r+b") as fh:
        fh.seek(pack.data_offset + row * 224 * 224 + 5000)
        fh.write(b"\x07" * 16)
    fresh = _ds(replica, tmp_path)
    with pytest.warns(RuntimeWarning, match="record .* failed its checksum"):
        assert torch.equal(fresh[2]["img"], plain[2]["img"])
    with pytest.warns(RuntimeWarning, match="failed its checksum"):
        batch = next(iter(CachedLoader(fresh, batch_size=len(fresh), progress=False)))
    assert torch.equal(batch["img"], torch.stack([plain[i]["img"] for i in range(len(plain))]))


def test_pack_records_are_checked_once_per_reader(replica, tmp_path, monkeypatch):
    ds = _ds(replica, tmp_path)
    ds.pre_cache(progress=False)
    (pack_file,) = _packs(tmp_path)
    pack = cache_mod.Pack(pack_file)
    checked = []
    from radharmony.imaging import packs as packs_mod

    real = packs_mod.record_checksums
    monkeypatch.setattr(packs_mod, "record_checksums",
                        lambda keys, *a: checked.append(len(keys)) or real(keys, *a))
    rows = np.array([1, 3, 2])  # the first and last records were checked when it opened
    assert pack.read(rows)[1].all() and checked == [3]
    assert pack.read(np.array([2, 0, 4]))[1].all() and checked == [3, 1]  # only row 4 is new
    with open(pack_file, "r+b") as fh:  # damaged in place after it was checked here
        fh.seek(pack.data_offset + 5000)
        fh.write(b"\x07" * 16)
    assert not cache_mod.Pack(pack_file).read(np.array([0]))[1].any()  # a new reader sees it


def test_truncated_pack_is_removed_and_rebuilt(replica, tmp_path):
    ds = _ds(replica, tmp_path)
    ds.pre_cache(progress=False)
    (pack_file,) = _packs(tmp_path)
    with open(pack_file, "r+b") as fh:
        fh.truncate(os.path.getsize(pack_file) - 1000)
    fresh = _ds(replica, tmp_path)
    with pytest.warns(RuntimeWarning, match="pack .* failed its check"):
        fresh.pre_cache(progress=False)
    assert len(_packs(tmp_path)) == 1 and os.path.getsize(_packs(tmp_path)[0]) > 1000
    assert torch.equal(fresh[0]["img"], _ds(replica, None)[0]["img"])


# -- concurrency and interruption ------------------------------------------------------------------
def _hammer(root, cache_dir, workers, start):
    mp.set_start_method("fork", force=True)  # as a user's script on Linux: workers forked
    ds = _ds(root, cache_dir)                # (else they would start as this process did)
    dl = torch.utils.data.DataLoader(ds, batch_size=3, num_workers=workers,
                                     collate_fn=radharmony.collate)
    start.wait(WRITERS_START_S)  # every writer begins at once, however loaded the machine is
    for _ in range(2):
        for _ in dl:
            pass
    ds.pre_cache(num_workers=workers, progress=False)


#: how long a writer waits for its siblings, and the test for the writers: hang guards only
#: (the writers start together at a barrier; nothing is timed)
WRITERS_START_S, WRITERS_DONE_S = 600, 1200


def test_concurrent_writers_leave_no_corrupt_entry(replica, tmp_path):
    _ds(replica, tmp_path)  # the table cache, so that the writers reach the barrier soon
    ctx = mp.get_context("forkserver")  # forked from a process that runs no torch threads;
    ctx.set_forkserver_preload([__name__])  # torch and radharmony imported there, once
    start = ctx.Barrier(3)
    procs = [ctx.Process(target=_hammer, args=(replica, tmp_path, w, start)) for w in (2, 2, 0)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(WRITERS_DONE_S)
        assert p.exitcode == 0, f"writer {p.pid} ended with {p.exitcode} (None: still running)"
    plain = _ds(replica, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any failed check would warn
        ds = _ds(replica, tmp_path)
        for i in range(len(ds)):
            assert torch.equal(ds[i]["img"], plain[i]["img"])
        cache = ds.image_cache
        for entry in _entries(tmp_path):
            assert cache.load(entry.stem) is not None
        for pack in cache.packs(rescan=True):
            assert pack.read(np.arange(pack.count))[1].all()
    assert not list((tmp_path / "images").rglob(".tmp-*"))


def _die_while_writing(root, cache_dir, where):
    ds = _ds(root, cache_dir)
    if where == "entry":
        real_fdopen = os.fdopen

        def dying_fdopen(fd, *a, **k):
            fh = real_fdopen(fd, *a, **k)
            real_write = fh.write

            def write(data):
                real_write(data[:len(data) // 2])
                fh.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            fh.write = write
            return fh
        os.fdopen = dying_fdopen
        ds[0]
    else:  # killed after the pack's bytes are written, before its rename
        def dying_replace(src, dst):
            os.kill(os.getpid(), signal.SIGKILL)
        os.replace = dying_replace
        ds.pre_cache(progress=False)


@pytest.mark.parametrize("where", ["entry", "pack"])
def test_writer_killed_mid_write_leaves_nothing_served(replica, tmp_path, where):
    if where == "pack":
        _ds(replica, tmp_path)[0]  # one loose entry to be packed
    p = mp.get_context("spawn").Process(target=_die_while_writing,
                                       args=(replica, tmp_path, where))
    p.start()
    p.join(60)
    assert p.exitcode == -signal.SIGKILL
    assert list((tmp_path / "images").rglob(".tmp-*"))  # the partial file is left aside...
    assert not _packs(tmp_path)
    assert len(_entries(tmp_path)) == (1 if where == "pack" else 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ...and never read
        assert torch.equal(_ds(replica, tmp_path)[0]["img"], _ds(replica, None)[0]["img"])


# -- harmonized-table cache ------------------------------------------------------------------------
def _meta(root: Path) -> Path:
    return root.parent / "download" / "metadata" / "train_metadata_view_position.json"


def test_table_cache_serves_the_same_table_without_parsing(tmp_path, monkeypatch):
    root = write_rexgradient(tmp_path / "data", studies={"train": 6}, images=False)
    first = ReXGradientTrainHarmonizer(csv_path=_meta(root)).harmonize(cache_dir=tmp_path / "c")
    assert len(list((tmp_path / "c" / "tables").glob("*.arrow"))) == 1
    built = ReXGradientTrainDataset(root, _meta(root), cache_dir=tmp_path / "c")

    def no_parse(self, path):
        raise AssertionError("metadata parsed although the table is cached")
    monkeypatch.setattr(ReXGradientTrainHarmonizer, "read", no_parse)
    again = ReXGradientTrainHarmonizer(csv_path=_meta(root)).harmonize(cache_dir=tmp_path / "c")
    assert again.equals(first) and list(again.dtypes) == list(first.dtypes)
    rebuilt = ReXGradientTrainDataset(root, _meta(root), cache_dir=tmp_path / "c")
    assert rebuilt.harmonized_df.equals(built.harmonized_df)
    assert rebuilt.harmonized_df.drop(columns=list(DERIVED_COLUMNS)).equals(first)


def test_table_cache_invalidated_when_metadata_changes(tmp_path):
    root = write_rexgradient(tmp_path / "data", studies={"train": 6}, images=False)
    meta = _meta(root)
    first = ReXGradientTrainHarmonizer(csv_path=meta).harmonize(cache_dir=tmp_path / "c")
    write_rexgradient(tmp_path / "data", studies={"train": 9}, images=False, seed=5)
    changed = ReXGradientTrainHarmonizer(csv_path=meta).harmonize(cache_dir=tmp_path / "c")
    assert not changed.equals(first)
    assert changed.equals(ReXGradientTrainHarmonizer(csv_path=meta).harmonize())
    st = meta.stat()  # same bytes, new modification time: a new entry too
    os.utime(meta, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    ReXGradientTrainHarmonizer(csv_path=meta).harmonize(cache_dir=tmp_path / "c")
    assert len(list((tmp_path / "c" / "tables").glob("*.arrow"))) == 3


def test_table_cache_key_follows_the_declared_side_file(tmp_path):
    root = write_rexgradient(tmp_path / "data", studies={"train": 4}, images=False)
    meta = _meta(root)
    h = ReXGradientTrainHarmonizer(csv_path=meta)
    tables = TableCache(tmp_path / "c")
    owner = {"class": "x"}
    before = tables.path(owner, h.inputs(meta).identity())
    (meta.parent / "unrelated.txt").write_text("not an input\n")
    assert tables.path(owner, h.inputs(meta).identity()) == before  # only inputs key it
    (meta.parent / BBOX_FILE).write_text("[]")
    assert tables.path(owner, h.inputs(meta).identity()) != before


def test_damaged_table_cache_is_rebuilt(tmp_path):
    root = write_rexgradient(tmp_path / "data", studies={"train": 5}, images=False)
    first = ReXGradientTrainHarmonizer(csv_path=_meta(root)).harmonize(cache_dir=tmp_path / "c")
    (entry,) = (tmp_path / "c" / "tables").glob("*.arrow")
    entry.write_bytes(entry.read_bytes()[:200])
    with pytest.warns(RuntimeWarning, match="Table cache .* is unreadable"):
        again = ReXGradientTrainHarmonizer(csv_path=_meta(root)).harmonize(
            cache_dir=tmp_path / "c")
    assert again.equals(first)
    time.sleep(0.01)
    assert len(list((tmp_path / "c" / "tables").glob("*.arrow"))) == 1


def test_cached_loader_stopped_mid_epoch_then_reused(replica, tmp_path):
    ds = _ds(replica, tmp_path)
    loader = CachedLoader(ds, batch_size=3, num_workers=2, pin_memory=True, progress=False)
    for _ in loader:
        break  # the read-ahead threads are stopped, nothing hangs
    assert sum(len(b["img"]) for b in loader) == len(ds)
    with pytest.raises(radharmony.RadHarmonyError, match="batch_size must be a positive"):
        CachedLoader(ds, batch_size=0)


def test_table_cache_round_trips_nested_and_nullable_columns(tmp_path):
    import pandas as pd

    df = pd.DataFrame({"image_path": pd.Series(["a.png", "b.png", "c.png"], dtype=object),
                       "report": pd.Series(["x", None, "z"], dtype=object),
                       "study_date": pd.array([20200101, None, 19991231], dtype="Int64"),
                       "label": np.array([1.0, np.nan, -1.0], np.float32),
                       "boxes": pd.Series([[{"x_min": 1.0, "label": "a"}], [], None],
                                          dtype=object),
                       # repeated text is stored dictionary-encoded and read back as text
                       "sex": pd.Series(["F", None, "F"], dtype=object),
                       "view": pd.Series([None, None, None], dtype=object)})
    tables = TableCache(tmp_path)
    built = []
    got = tables.get({"o": 1}, [], lambda: built.append(1) or df)
    again = tables.get({"o": 1}, [], lambda: built.append(1) or df)
    assert built == [1]
    for table in (got, again):
        assert list(table.dtypes) == list(df.dtypes)
        assert table["report"].tolist() == ["x", None, "z"]
        assert table["boxes"].tolist() == df["boxes"].tolist()
        assert table.drop(columns="boxes").equals(df.drop(columns="boxes"))
        assert table["sex"].tolist() == ["F", None, "F"] and table["sex"].dtype == object
    import pyarrow.feather as feather
    (entry,) = (tmp_path / "tables").glob("*.arrow")
    assert str(feather.read_table(entry).schema.field("sex").type).startswith("dictionary")
    empty = tables.get({"o": 2}, [], lambda: df.iloc[:0])
    assert empty.empty and list(empty.columns) == list(df.columns)


def test_pre_cache_names_the_sample_of_a_missing_image(tmp_path):
    root = write_rexgradient(tmp_path / "data", studies={"train": 3})
    ds = _ds(root, tmp_path / "c")
    ds.image_file(1).unlink()
    with pytest.raises(radharmony.RadHarmonyError, match=r"Sample rexgradient_train:.*"
                       r"does not exist"):
        ds.pre_cache(progress=False)
    ds.image_file(1).write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 40)  # present but undecodable
    with pytest.raises(radharmony.RadHarmonyError, match=r"Sample rexgradient_train:.*PNG"):
        _ds(root, tmp_path / "c").pre_cache(progress=False)


def test_odd_output_size_packs_and_reads_back(replica, tmp_path):
    tf = DefaultTransform(size=101)  # 101 * 101 bytes: not a whole number of 64-bit words
    ds = _ds(replica, tmp_path, transform=tf)
    batch = next(iter(CachedLoader(ds, batch_size=len(ds), progress=False)))
    plain = _ds(replica, None, transform=tf)
    assert batch["img"].shape == (len(ds), 1, 101, 101)
    assert torch.equal(batch["img"], torch.stack([plain[i]["img"] for i in range(len(ds))]))
