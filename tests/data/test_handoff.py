"""Batch tensors from batched reads: the default collate returns the batch tensor itself, and a
DataLoader worker hands batches over through reused shared-memory slots, written again only
once nothing holds their batch, so held batches never change."""

from __future__ import annotations

import pickle
from multiprocessing.reduction import ForkingPickler

import pytest
import torch
from torch.utils.data import DataLoader, default_collate

import radharmony
from radharmony.data import handoff
from radharmony.datasets.rexgradient import ReXGradientTrainDataset
from radharmony.errors import RadHarmonyError


@pytest.fixture
def fresh(monkeypatch):
    """Empty worker ring and main-process maps for an in-process test."""
    monkeypatch.setattr(handoff, "_ring", [])
    monkeypatch.setattr(handoff, "_mapped", {})
    monkeypatch.setattr(handoff, "_own", {})


def _send(tensor):
    """A worker's pickling of a collated batch and the main process's unpickling of it."""
    return pickle.loads(ForkingPickler.dumps(handoff.outgoing(tensor)))


def _batch(value: float, shape=(4, 1, 8, 8)) -> torch.Tensor:
    out = handoff.worker_batch(shape, torch.bfloat16)
    out.fill_(value)
    return out


def test_default_collate_returns_the_batch_tensor_itself(rex_images, tmp_path):
    ds = ReXGradientTrainDataset(rex_images, cache_dir=tmp_path, dtype=torch.float32)
    samples = ds.__getitems__([2, 0, 5])
    assert all(type(s) is handoff.Sample and isinstance(s, dict) for s in samples)
    assert all(type(s["img"]) is torch.Tensor for s in samples)  # rows are plain views
    batch = default_collate(samples)
    assert type(batch) is dict and type(batch["img"]) is torch.Tensor
    assert batch["img"].shape == (3, 1, 224, 224)
    assert batch["img"].data_ptr() == samples[0]["img"].data_ptr()  # no stack
    assert torch.equal(batch["img"], torch.stack([ds[i]["img"] for i in (2, 0, 5)]))
    assert batch["sample_id"] == [s["sample_id"] for s in samples]
    # anything but the whole batch in order is stacked as usual
    for rows in (samples[::-1], samples[:2], [dict(s) for s in samples]):
        out = default_collate(rows)["img"]
        assert out.data_ptr() != samples[0]["img"].data_ptr()
        assert torch.equal(out, torch.stack([s["img"] for s in rows]))


def test_a_replaced_value_is_collated_as_usual_and_the_rest_stays_whole(rex_images, tmp_path):
    ds = ReXGradientTrainDataset(rex_images, cache_dir=tmp_path, dtype=torch.float32)
    samples = ds.__getitems__([1, 3, 4])
    kept = samples[0]["img"].clone()
    samples[1]["img"] = samples[1]["img"] * 0 + 0.5  # e.g. a transform's new tensor
    for out in (default_collate(samples), radharmony.collate(samples)):
        assert out["img"].data_ptr() != samples[0]["img"].data_ptr()  # stacked
        assert torch.equal(out["img"][0], kept) and torch.all(out["img"][1] == 0.5)


def test_a_sample_copied_or_pickled_is_a_plain_dict(rex_images, tmp_path):
    import copy

    ds = ReXGradientTrainDataset(rex_images, cache_dir=tmp_path, dtype=torch.float32)
    sample = ds.__getitems__([0, 1])[0]
    for other in (pickle.loads(pickle.dumps(sample)), copy.copy(sample), copy.deepcopy(sample)):
        assert type(other) is dict and other.keys() == sample.keys()
        assert torch.equal(other["img"], sample["img"])


def _slot_bytes(slot) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8).set_(slot.storage)[:slot.nbytes]


def test_a_slot_is_written_again_only_once_the_main_process_let_go_of_its_batch(fresh):
    first = _batch(1.0)
    slot, ptr = first._radharmony_slot, first.data_ptr()
    sent = handoff.outgoing(first)
    del first
    assert _batch(2.0).data_ptr() != ptr  # not yet received: a second slot
    got = pickle.loads(ForkingPickler.dumps(sent))
    del sent
    assert torch.all(got == 1.0) and not handoff._own  # handed out where it lies: no copy
    _slot_bytes(slot)[:2] = torch.tensor([0, 0x40], dtype=torch.uint8)  # bfloat16 2.0
    assert got.flatten()[0] == 2.0 and torch.all(got.flatten()[1:] == 1.0)
    view = got[1:]  # a view outlives the batch
    del got
    assert _batch(3.0).data_ptr() != ptr  # still held in the main process: not written
    assert torch.all(view == 1.0)
    del view
    again = _batch(4.0)
    assert again.data_ptr() == ptr  # let go of: the slot is used again
    assert len(handoff._ring) == 2 and len(handoff._mapped) == 1


def test_a_slot_still_held_in_the_worker_is_not_reused(fresh):
    first = _batch(1.0)
    row = first[1]  # a worker-side view outlives the batch
    ptr = first.data_ptr()
    got = _send(first)
    del first, got
    assert _batch(2.0).data_ptr() != ptr and torch.all(row == 1.0)
    del row
    assert _batch(3.0).data_ptr() == ptr


def test_a_batch_sent_on_to_another_process_moves_and_frees_its_slot(fresh):
    first = _batch(1.0)
    ptr = first.data_ptr()
    got = _send(first)
    del first
    got.share_memory_()  # what pickling it to another process does first
    assert got.is_shared() and torch.all(got == 1.0)
    assert _batch(2.0).data_ptr() == ptr  # the slot is free although the batch lives on
    assert torch.all(got == 1.0)  # and writing the slot again does not touch it


def test_the_handle_travels_until_the_slot_is_mapped_and_then_never(fresh):
    first = _batch(1.0)
    slot = first._radharmony_slot
    data = bytes(ForkingPickler.dumps(handoff.outgoing(first)))
    assert b"DupFd" in data
    pickle.loads(data)
    del first
    second = _batch(2.0)
    assert second._radharmony_slot is slot
    data = bytes(ForkingPickler.dumps(handoff.outgoing(second)))
    assert b"DupFd" not in data
    assert torch.all(pickle.loads(data) == 2.0)
    handoff._mapped.clear()  # a process that never saw the slot's first batch
    with pytest.raises(RadHarmonyError, match="never mapped"):
        handoff.receive(slot.token, slot.nbytes, torch.bfloat16, (4, 1, 8, 8), False, None)


def test_pickled_twice_the_second_sends_a_copy(fresh):
    out = handoff.outgoing(_batch(1.0))
    a, b = (pickle.loads(ForkingPickler.dumps(out)) for _ in range(2))
    assert torch.equal(a, b) and torch.all(a == 1.0)


def test_a_workers_small_batch_tensors_travel_inside_the_pickle(monkeypatch):
    cls = torch.arange(64 * 14, dtype=torch.float32).view(64, 14)
    assert type(handoff.outgoing(cls)) is torch.Tensor  # the main process: as it is
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: object())
    data = bytes(ForkingPickler.dumps(handoff.outgoing(cls)))
    assert b"rebuild_storage" not in data and b"DupFd" not in data  # no shared-memory file
    got = pickle.loads(data)
    assert type(got) is torch.Tensor and torch.equal(got, cls) and got.is_contiguous()
    big = torch.zeros(handoff.BY_VALUE_BYTES // 4 + 1)
    assert type(handoff.outgoing(big)) is torch.Tensor  # larger ones go PyTorch's way
    empty = pickle.loads(ForkingPickler.dumps(handoff.outgoing(torch.zeros(0, 3))))
    assert empty.shape == (0, 3)


def test_main_process_buffers_are_reused_only_when_free_and_private(fresh):
    shape = (4, 1, 8, 8)
    a = handoff.own_batch(shape, torch.bfloat16).fill_(1.0)
    ptr = a.data_ptr()
    b = handoff.own_batch(shape, torch.bfloat16).fill_(2.0)
    assert b.data_ptr() != ptr and torch.all(a == 1.0)  # a is held: not reused
    del a
    c = handoff.own_batch(shape, torch.bfloat16).fill_(3.0)
    assert c.data_ptr() == ptr and torch.all(b == 2.0)
    c.share_memory_()  # pickled on to another process: that one's memory too
    ptr = c.data_ptr()
    del c
    assert handoff.own_buffer(4 * 64 * 2).data_ptr() != ptr


def test_a_full_ring_retires_an_idle_slot_or_uses_a_slot_once(fresh, monkeypatch):
    monkeypatch.setattr(handoff, "RING", 2)
    held = [_batch(1.0), _batch(2.0)]  # both busy (unsent)
    once = _batch(3.0)
    assert once._radharmony_slot.once and len(handoff._ring) == 2
    got = _send(once)
    assert torch.all(got == 3.0) and once._radharmony_slot.token not in handoff._mapped
    idle = held.pop()
    slot = idle._radharmony_slot
    del idle  # never sent and nothing holds it: reusable, so retired for another size
    small = _batch(4.0, shape=(2, 1, 8, 8))
    assert slot.tail[handoff.STATE] == handoff.RETIRED and small._radharmony_slot in \
        handoff._ring and slot not in handoff._ring


def test_workers_reuse_a_few_slots_and_held_batches_stay_intact(rex_images, tmp_path, fresh):
    ds = ReXGradientTrainDataset(rex_images, cache_dir=tmp_path, dtype=torch.float32)
    ref = torch.stack([ds[i]["img"] for i in range(len(ds))])
    for collate in (None, radharmony.collate):
        kw = {"collate_fn": collate} if collate else {}
        loader = DataLoader(ds, batch_size=2, num_workers=2, persistent_workers=True, **kw)
        for _ in range(3):
            held = list(loader)
            assert torch.equal(torch.cat([b["img"] for b in held]), ref)
            assert all(not b["img"].is_shared() for b in held)  # the main process's copies
        # every batch after the first few came through a slot mapped before
        assert 0 < len(handoff._mapped) <= 2 * handoff.RING
        del loader


def test_spawned_workers_hand_over_through_slots_too(rex_images, tmp_path, fresh):
    ds = ReXGradientTrainDataset(rex_images, cache_dir=tmp_path, dtype=torch.float32)
    ref = torch.stack([ds[i]["img"] for i in range(len(ds))])
    loader = DataLoader(ds, batch_size=2, num_workers=1, multiprocessing_context="spawn")
    assert torch.equal(torch.cat([b["img"] for b in loader]), ref)
    assert handoff._mapped  # the batches came through slots


def test_a_refused_memory_file_sends_the_batch_the_usual_way(monkeypatch, fresh):
    def refuse(*args):
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(handoff.os, "memfd_create", refuse)
    assert handoff.worker_batch((2, 1, 8, 8), torch.bfloat16) is None and not handoff._ring


def test_without_anonymous_shared_memory_batches_go_the_usual_way(rex_images, tmp_path,
                                                                  monkeypatch, fresh):
    monkeypatch.delattr(handoff.os, "memfd_create")
    assert handoff.worker_batch((2, 1, 8, 8), torch.bfloat16) is None
    ds = ReXGradientTrainDataset(rex_images, cache_dir=tmp_path, dtype=torch.float32)
    ref = torch.stack([ds[i]["img"] for i in range(len(ds))])
    loader = DataLoader(ds, batch_size=2, num_workers=1)
    assert torch.equal(torch.cat([b["img"] for b in loader]), ref)
    assert not handoff._mapped


def test_threads_never_get_one_buffer_twice(fresh):
    import sys
    import threading

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    clashes, held = [], {}

    def read(t):
        mine = []
        for _ in range(1500):
            mine = [handoff.own_batch((2, 1, 4, 4), torch.bfloat16)] + mine[:1]
            mine[0].fill_(t)
            if not torch.all(mine[0] == t):
                clashes.append(t)
        held[t] = mine

    try:
        threads = [threading.Thread(target=read, args=(t,)) for t in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    ptrs = [b.data_ptr() for mine in held.values() for b in mine]
    assert not clashes and len(set(ptrs)) == len(ptrs)


def test_cached_loader_threads_keep_held_batches_intact(rex_images, tmp_path, fresh):
    from radharmony.data.loader import CachedLoader

    ds = ReXGradientTrainDataset(rex_images, cache_dir=tmp_path, dtype=torch.float32)
    ref = torch.stack([ds[i]["img"] for i in range(len(ds))])
    loader = CachedLoader(ds, batch_size=2, num_workers=3, progress=False)
    for _ in range(3):
        held = list(loader)
        assert torch.equal(torch.cat([b["img"] for b in held]), ref)
