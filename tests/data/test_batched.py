"""Batched reads through the DataLoader's own hook, the automatic pack, transforms after the
cache, the per-build file table, and many readers (workers, ranks) sharing one pack."""

from __future__ import annotations

import os
import socket
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler

import radharmony
from radharmony.data import batches, sampling
from radharmony.datasets.rexgradient import ReXGradientTrainDataset
from radharmony.errors import PathSafetyError, RadHarmonyError
from radharmony.fake.images import synthetic_cxr, write_png


def _ds(rex_images, cache, **kw):
    return ReXGradientTrainDataset(rex_images, cache_dir=cache, dtype=torch.float32, **kw)


def _copy(rex_images: Path, tmp_path: Path) -> Path:
    """A private copy of the replica (metadata and images) to change files in."""
    import shutil

    shutil.copytree(rex_images.parent, tmp_path / "rex")
    return tmp_path / "rex" / rex_images.name


def _packs(cache: Path) -> list[Path]:
    return sorted((cache / "images" / "packs").glob("*.rhp"))


def _loose(cache: Path) -> list[Path]:
    return sorted((cache / "images").glob("??/*.rhc"))


@pytest.fixture(scope="module")
def reference(rex_images, tmp_path_factory):
    """Every sample's image read one by one without a cache."""
    ds = ReXGradientTrainDataset(rex_images, cache_dir=None, dtype=torch.float32)
    return torch.stack([ds[i]["img"] for i in range(len(ds))])


def test_getitems_equals_getitem_and_collate_copies_nothing(rex_images, tmp_path, reference):
    ds = _ds(rex_images, tmp_path, output_report=True)
    idx = [3, -1, 0, 7]
    samples = ds.__getitems__(idx)
    assert [s["sample_id"] for s in samples] == [ds.sample_ids[i] for i in idx]
    for s, i in zip(samples, idx):
        assert torch.equal(s["img"], reference[i]) and s["report"] == ds[i]["report"]
    batch = radharmony.collate(samples)
    assert batch["img"].shape == (4, 1, 224, 224)
    assert batch["img"].data_ptr() == samples[0]["img"].data_ptr()  # the batch tensor itself
    samples[1]["img"] = samples[1]["img"].clone()  # no longer a row of the batch: stacked
    assert radharmony.collate(samples)["img"].data_ptr() != samples[0]["img"].data_ptr()
    with pytest.raises(IndexError):
        ds.__getitems__([0, len(ds)])


class _OwnOutputs(ReXGradientTrainDataset):
    """A dataset whose own add_outputs places something with the letterbox."""

    def add_outputs(self, index, sample, letterbox):
        super().add_outputs(index, sample, letterbox)
        sample["content"] = torch.tensor([letterbox.top, letterbox.left, letterbox.new_h])


def test_a_batched_read_hands_the_letterbox_to_outputs_that_may_use_it(rex_images, tmp_path):
    plain = _ds(rex_images, tmp_path, labels="report", output_cls=True)
    assert not sampling.wants_letterbox(plain)  # cls and the image need no geometry
    own = _OwnOutputs(rex_images, cache_dir=tmp_path, dtype=torch.float32)
    assert sampling.wants_letterbox(own)
    idx = [4, 1, 6]
    for _ in range(2):  # loose entries, then the pack the first full pass made
        own.__getitems__(list(range(len(own))))
        for s, i in zip(own.__getitems__(idx), idx):
            assert torch.equal(s["content"], own[i]["content"])


@pytest.mark.parametrize("merged", [False, True])
def test_batched_cls_equals_per_sample_and_collates_without_a_stack(rex_images, tmp_path,
                                                                   merged):
    ds = _ds(rex_images, tmp_path, labels="report", output_cls=True)
    df = ds.harmonized_df.copy()
    df.loc[[0, 2], ds.spec.label_cols[0]] = -1.0  # an uncertain label too
    ds = _ds(rex_images, tmp_path, labels="report", output_cls=True, harmonized_df=df)
    if merged:  # the merged dataset's own uncertain policy
        ds = radharmony.merge([ds], uncertain="ones")
    rows = np.asarray(ds.rows.labels)
    assert (rows == 1).any() and (rows == -1).any() and np.isnan(rows).any()  # every case
    idx = list(range(len(ds)))[::-1]
    samples = ds.__getitems__(idx)
    for s, i in zip(samples, idx):
        one = ds[i]
        assert torch.equal(s["cls"], one["cls"]) and torch.equal(s["cls_mask"], one["cls_mask"])
        assert s["cls"].dtype == one["cls"].dtype == torch.float32
    for batch in (torch.utils.data.default_collate(samples), radharmony.collate(samples)):
        assert batch["cls"].data_ptr() == samples[0]["cls"].data_ptr()  # no stack
        assert torch.equal(batch["cls_mask"], torch.stack([ds[i]["cls_mask"] for i in idx]))
    if not merged:  # from a worker (the small tensors travel inside the pickle)
        loader = DataLoader(ds, batch_size=3, num_workers=1)
        for b, batch in enumerate(loader):
            rows = range(3 * b, min(3 * b + 3, len(ds)))
            assert torch.equal(batch["cls"], torch.stack([ds[i]["cls"] for i in rows]))
            assert torch.equal(batch["cls_mask"], torch.stack([ds[i]["cls_mask"] for i in rows]))


def test_a_pack_made_between_the_lookup_and_the_loose_read_is_read(rex_images, tmp_path,
                                                                   reference, monkeypatch):
    writer, reader = _ds(rex_images, tmp_path), _ds(rex_images, tmp_path)
    for i in range(len(writer)):
        writer[i]  # loose entries only (a per-sample read never packs)
    assert _loose(tmp_path) and not _packs(tmp_path)
    find = batches._find

    def find_then_pack(ds, indices):  # another process packs right after this one looked
        found = find(ds, indices)
        if not _packs(tmp_path):
            assert batches.try_pack(writer) == 0
        return found

    monkeypatch.setattr(batches, "_find", find_then_pack)
    decoded = []
    encode = reader.pipeline.encode
    monkeypatch.setattr(type(reader.pipeline), "encode",
                        lambda self, path: decoded.append(path) or encode(path))
    idx = list(range(len(reader)))
    imgs = torch.stack([s["img"] for s in reader.__getitems__(idx)])
    assert torch.equal(imgs, reference[idx])
    assert _packs(tmp_path) and not _loose(tmp_path)  # read from the pack: no entry rebuilt
    assert decoded == []


def test_plain_dataloader_packs_after_one_epoch_then_reads_the_pack(rex_images, tmp_path,
                                                                    reference):
    ds = _ds(rex_images, tmp_path)
    for collate in (radharmony.collate, None):
        kw = {"collate_fn": collate} if collate else {}
        imgs = torch.cat([b["img"] for b in DataLoader(ds, batch_size=8, **kw)])
        assert torch.equal(imgs, reference)
        assert len(_packs(tmp_path)) == 1 and not _loose(tmp_path)  # packed, loose removed
    files = ds._file_table()
    assert (files.pack >= 0).all()  # every row read from the pack, located once
    shuffled = DataLoader(ds, batch_size=5, shuffle=True, collate_fn=radharmony.collate,
                          generator=torch.Generator().manual_seed(0))
    got = {sid: img for b in shuffled for sid, img in zip(b["sample_id"], b["img"])}
    assert all(torch.equal(got[sid], reference[i]) for i, sid in enumerate(ds.sample_ids))


def test_no_realpath_per_sample_and_a_rewritten_file_is_never_stale(rex_images, tmp_path,
                                                                    monkeypatch):
    root = _copy(rex_images, tmp_path)
    ds = _ds(root, tmp_path / "cache")
    list(DataLoader(ds, batch_size=8, collate_fn=radharmony.collate))
    calls = []
    real = os.path.realpath
    monkeypatch.setattr(os.path, "realpath", lambda *a, **k: calls.append(a) or real(*a, **k))
    list(DataLoader(ds, batch_size=8, collate_fn=radharmony.collate))
    assert calls == []  # directories were resolved once, at the first read
    monkeypatch.undo()
    path = ds.image_file(2)
    st = os.stat(path)
    write_png(path, synthetic_cxr(300, 280, rng=np.random.default_rng(5)))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime restored, ctime/inode not
    fresh = ReXGradientTrainDataset(root, cache_dir=None, dtype=torch.float32)[2]["img"]
    assert torch.equal(ds.__getitems__([2])[0]["img"], fresh)
    assert torch.equal(ds[2]["img"], fresh)


def test_a_conversion_started_ahead_of_the_file_checks_is_kept_only_when_they_agree(
        rex_images, tmp_path, monkeypatch):
    """A packed batch whose records this process checked before is converted on a helper
    thread while the files are checked: the same values; a file rewritten in between is
    served from the file (the early conversion is dropped), not from the pack."""
    from radharmony.imaging import convert

    if not convert.accelerated(torch.float32):
        pytest.skip("the early conversion uses the compiled kernel (numba)")
    root = _copy(rex_images, tmp_path)
    ds = _ds(root, tmp_path / "cache")
    ds.pre_cache(progress=False)
    reference = ReXGradientTrainDataset(root, cache_dir=None, dtype=torch.float32)
    started, kept = [], []
    ahead, read = batches.levels_ahead, batches.cached_rows_ahead

    def spy(q, dtype, rows, out, stream):  # per read: (pack data, records, tensor, join)
        join = ahead(q, dtype, rows, out, stream)
        started[-1] = None if join is None else (q, rows, out, join)
        return join
    monkeypatch.setattr(batches, "levels_ahead", spy)
    monkeypatch.setattr(batches, "cached_rows_ahead",
                        lambda *a, **k: started.append(None) or read(*a, **k))
    mark = batches.handoff.mark
    monkeypatch.setattr(batches.handoff, "mark", lambda samples, tensors, rows: kept.append(
        started[-1] is not None and tensors["img"] is started[-1][2]) or mark(
        samples, tensors, rows))
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        order = [5, 0, 7, 2, 6, 1, 4, 3]
        ds.__getitems__(order)  # this process checks the records once
        started.clear(), kept.clear()
        got = ds.__getitems__(order)
        assert started[-1] is not None and kept == [True]
        assert all(torch.equal(s["img"], reference[i]["img"]) for s, i in zip(got, order))
        path, st = ds.image_file(2), os.stat(ds.image_file(2))
        write_png(path, synthetic_cxr(300, 280, rng=np.random.default_rng(5)))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # mtime restored
        kept.clear()
        got = ds.__getitems__(order)
        assert started[-1] is not None and kept == [False]  # started, then dropped
        fresh = ReXGradientTrainDataset(root, cache_dir=None, dtype=torch.float32)
        assert all(torch.equal(s["img"], fresh[i]["img"]) for s, i in zip(got, order))
    finally:
        torch.set_num_threads(before)


def test_path_safety_resolved_per_directory_still_refuses_links(rex_images, tmp_path):
    root = _copy(rex_images, tmp_path)
    outside = tmp_path / "outside.png"
    write_png(outside, synthetic_cxr(64, 64, rng=np.random.default_rng(1)))
    ds = _ds(root, tmp_path / "cache")
    first, second = ds.image_file(0), ds.image_file(1)
    assert first == Path(os.path.realpath(first))
    first.unlink()
    first.symlink_to(outside)  # a file link pointing outside the root: refused
    with pytest.raises(PathSafetyError, match="resolves outside"):
        ds.__getitems__([0])
    second.unlink()
    second.symlink_to(ds.image_file(2))  # a link inside the root: followed
    assert torch.equal(ds[1]["img"], ds[2]["img"])
    df = ds.harmonized_df.copy()
    df.loc[0, "image_path"] = "../outside.png"
    with pytest.raises(PathSafetyError):
        ReXGradientTrainDataset(root, harmonized_df=df.drop(columns=["sample_id", "view"]),
                                cache_dir=tmp_path / "c2")[0]


class _Noise:
    """Adds torch-random noise: fresh on every read, reproducible under torch.manual_seed."""

    def __call__(self, sample):
        sample["img"] = sample["img"] + torch.rand(()) + 1.0
        return sample


def test_train_transform_after_the_cache_val_untouched(rex_images, tmp_path, reference):
    ds = _ds(rex_images, tmp_path)
    train, val = ds.get_datasets(3, seed=0, train_transform=_Noise())
    assert val.sample_transform is None and ds.sample_transform is None
    rows = {sid: i for i, sid in enumerate(ds.sample_ids)}
    for epoch in range(2):
        b = next(iter(DataLoader(train, batch_size=4, collate_fn=radharmony.collate)))
        shift = [float((img - reference[rows[s]]).mean()) for s, img in
                 zip(b["sample_id"], b["img"])]
        assert all(s >= 1.0 for s in shift) and len(set(np.round(shift, 5))) == 4
        if epoch == 0:
            first = shift
    assert shift != first  # fresh randomness on every epoch
    v = next(iter(DataLoader(val, batch_size=4)))
    assert all(torch.equal(img, reference[rows[s]]) for s, img in zip(v["sample_id"], v["img"]))
    assert torch.equal(ds[0]["img"], reference[0])  # the cache holds the plain image
    torch.manual_seed(1)
    a = train[0]["img"]
    torch.manual_seed(1)
    assert torch.equal(train[0]["img"], a)
    folds = ds.get_folds(3, val_transform=_Noise())
    assert folds[0][0].sample_transform is None and folds[0][1].sample_transform is not None
    with pytest.raises(RadHarmonyError, match="must be callable"):
        ds.get_datasets(3, train_transform="flip")


def test_monai_dictionary_transforms_as_train_transform(rex_images, tmp_path, reference):
    monai = pytest.importorskip("monai.transforms")
    ds = _ds(rex_images, tmp_path)
    train = ds.get_datasets(None, train_transform=monai.Compose([
        monai.RandFlipd(keys="img", prob=1.0, spatial_axis=1),
        monai.RandAffined(keys="img", prob=0.0, rotate_range=0.1)]))
    b = next(iter(DataLoader(train, batch_size=3, collate_fn=radharmony.collate)))
    assert type(b["img"]) is torch.Tensor and b["img"].dtype == torch.float32
    assert torch.equal(b["img"], reference[:3].flip(-1))


def test_workers_persistent_pin_memory(rex_images, tmp_path, reference):
    ds = _ds(rex_images, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pin_memory without an accelerator warns
        loader = DataLoader(ds, batch_size=6, num_workers=2, persistent_workers=True,
                            pin_memory=True, collate_fn=radharmony.collate)
        for epoch in range(3):
            imgs = torch.cat([b["img"] for b in loader])
            assert torch.equal(imgs, reference)
        plain = DataLoader(ds, batch_size=6, num_workers=2)  # default collate, fresh workers
        assert torch.equal(torch.cat([b["img"] for b in plain]), reference)
    assert len(_packs(tmp_path)) == 1 and not _loose(tmp_path)


@pytest.mark.parametrize("world", [2, 3])
def test_distributed_sampler_shards_are_disjoint_equal_and_cover(rex_images, tmp_path, world):
    ds = _ds(rex_images, tmp_path).get_datasets(4)[0]
    shards = []
    for rank in range(world):
        sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=3,
                                     drop_last=True)
        sampler.set_epoch(1)
        shards.append([s for b in DataLoader(ds, batch_size=4, sampler=sampler,
                                             collate_fn=radharmony.collate)
                       for s in b["sample_id"]])
    assert len({len(s) for s in shards}) == 1 and len(shards[0]) == len(ds) // world
    flat = [s for shard in shards for s in shard]
    assert len(set(flat)) == len(flat) and len(flat) >= len(ds) - world + 1


def test_pack_lock_is_exclusive_and_a_dead_holders_lock_is_taken_over(tmp_path):
    lock = tmp_path / "packs" / ".lock-x"
    with batches.exclusive(lock) as held:
        assert held and lock.exists()
        with batches.exclusive(lock) as again:
            assert not again
    assert not lock.exists()
    lock.write_text(f"{socket.gethostname()} 999999999\n")  # no such process
    with batches.exclusive(lock) as held:
        assert held
    lock.write_text(f"{socket.gethostname()} {os.getpid()}\n")  # alive: respected
    with batches.exclusive(lock) as held:
        assert not held


def _rank(rank, world, port, base, cache, out):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        ds = ReXGradientTrainDataset(base, cache_dir=cache, dtype=torch.float32)
        sampler = DistributedSampler(ds, shuffle=True, seed=0)
        loader = DataLoader(ds, batch_size=4, sampler=sampler, collate_fn=radharmony.collate)
        seen = {}
        for epoch in range(3):
            sampler.set_epoch(epoch)
            last = []
            for b in loader:
                seen.update(zip(b["sample_id"], b["img"]))
                last += b["sample_id"]
            dist.barrier()
        mine = np.array([i for i, s in enumerate(ds.sample_ids) if s in set(last)])
        files = ds._file_table()
        torch.save({"seen": seen, "packed": bool((files.pack[mine] >= 0).all()),
                    "names": files.pack_names}, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


def test_two_ranks_share_one_pack(rex_images, tmp_path, reference):
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cache = tmp_path / "cache"
    mp.start_processes(_rank, args=(2, port, str(rex_images), str(cache), str(tmp_path)),
                       nprocs=2, start_method="fork")
    res = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    assert len(_packs(cache)) == 1 and not _loose(cache)
    assert [(r["packed"], r["names"]) for r in res] == [(True, [_packs(cache)[0].name])] * 2
    ids = ReXGradientTrainDataset(rex_images, cache_dir=None).sample_ids
    seen = {**res[0]["seen"], **res[1]["seen"]}
    assert set(seen) == set(ids)
    assert all(torch.equal(seen[s], reference[i]) for i, s in enumerate(ids))


def test_worker_batches_stay_intact_while_held(rex_images, tmp_path, reference):
    ds = _ds(rex_images, tmp_path)
    for collate in (None, radharmony.collate):
        extra = {"collate_fn": collate} if collate else {}
        loader = DataLoader(ds, batch_size=2, num_workers=1, persistent_workers=True, **extra)
        for _ in range(2):
            held = list(loader)  # every batch kept while later ones are read
            assert torch.equal(torch.cat([b["img"] for b in held]), reference)


def test_first_epoch_decodes_over_threads_first_bad_sample_in_order_named(
        rex_images, tmp_path, reference, monkeypatch):
    # a main-process batch decodes its loose images over torch.get_num_threads() threads;
    # the images equal the one-by-one reference whatever the thread count, and with two
    # unreadable files in a batch the error names the first of them in batch order
    import threading

    seen = set()
    load_one = batches.load_one

    def spy(*args, **kw):
        seen.add(threading.current_thread().name)
        return load_one(*args, **kw)

    monkeypatch.setattr(batches, "load_one", spy)
    threads = torch.get_num_threads()
    try:
        for n in (1, 3):
            torch.set_num_threads(n)
            ds = _ds(rex_images, tmp_path / f"cache{n}")
            idx = list(range(len(ds)))[::-1]
            got = ds.__getitems__(idx)
            assert all(torch.equal(s["img"], reference[i]) for s, i in zip(got, idx)), n
        assert "MainThread" in seen and any(s.startswith("radharmony-helper") for s in seen)
        root = _copy(rex_images, tmp_path)
        ds = _ds(root, tmp_path / "cache-bad")
        files = ds._file_table()
        for i in (2, 5):
            files.file(int(ds._file_rows[i])).write_bytes(b"not an image")
        torch.set_num_threads(2)
        for order, first in (([0, 5, 1, 2], 5), ([2, 5, 1], 2)):
            name = files.file(int(ds._file_rows[first])).name
            with pytest.raises(RadHarmonyError, match=name.replace(".", r"\.")):
                ds.__getitems__(order)
    finally:
        torch.set_num_threads(threads)
