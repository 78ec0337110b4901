"""Many ranks in real processes (gloo on loopback): DistributedSampler and BalancedSampler over a
dataset split give each rank its own equal shard; augmentations on real dataset samples."""

import json
import socket
import sys
import threading
import time
import warnings

import cv2
import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, DistributedSampler

from radharmony.augment import Compose, RandomAffine, RandomFlip, RandomIntensity
from radharmony.data.collate import collate
from radharmony.datasets.nih import LABELS, NIHChestXray14Dataset
from radharmony.fake.nih import write_nih
from radharmony.data.samplers import BalancedSampler

pytestmark = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


@pytest.fixture(scope="module")
def nih(tmp_path_factory):
    root = tmp_path_factory.mktemp("nih")
    images = write_nih(root, n_patients=9, size=48, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the replica's one RGBA image
        return NIHChestXray14Dataset(images, output_bbox=True, output_cls=True, cache_dir=None,
                                     dtype=torch.float32)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ids(loader) -> list[str]:
    return [sid for batch in loader for sid in batch["sample_id"]]


def _rank(rank: int, world: int, port: int, split, out: str) -> None:
    # as in DataLoader workers: thread pools the parent used do not survive a fork (without
    # this a forked rank hangs once the parent ran parallel torch or OpenCV ops)
    torch.set_num_threads(1)
    cv2.setNumThreads(0)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    try:
        result = {}
        sampler = DistributedSampler(split, shuffle=True, seed=0)
        sampler.set_epoch(1)
        result["distributed"] = _ids(DataLoader(split, batch_size=2, sampler=sampler,
                                                collate_fn=collate))
        # num_replicas and rank come from torch.distributed
        by_view = BalancedSampler.by_column(split.harmonized_df, "view", num_samples=30, seed=3)
        by_view.set_epoch(2)
        result["balanced"] = _ids(DataLoader(split, batch_size=4, sampler=by_view,
                                             collate_fn=collate))
        labels = split.harmonized_df[list(LABELS)].to_numpy(np.float64)
        distinct = BalancedSampler.by_labels(labels, replacement=False, seed=3)
        result["distinct"] = list(distinct)
        result["world"] = [distinct.num_replicas, distinct.rank]
        gathered = [None] * world
        dist.all_gather_object(gathered, result)
        if rank == 0:
            with open(out, "w") as fh:
                json.dump(gathered, fh)
    finally:
        dist.destroy_process_group()


def _run(world: int, split, out) -> list[dict]:
    # fork when this process runs no other thread (fork is then safe and the children inherit
    # the imported modules); spawn otherwise (~15 s more: each child imports torch again)
    single = threading.active_count() == 1 and sys.platform == "linux"
    ctx = mp.start_processes(_rank, args=(world, _free_port(), split, str(out)), nprocs=world,
                             start_method="fork" if single else "spawn", join=False)
    deadline = time.monotonic() + 120
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"{world} ranks did not finish within 120 s")
    with open(out) as fh:
        return json.load(fh)


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_get_disjoint_equal_shards(nih, tmp_path, world):
    train, _ = nih.get_datasets(3)
    ids = list(train.harmonized_df["sample_id"])
    n = len(ids)
    got = _run(world, train, tmp_path / "ranks.json")

    shards = [r["distributed"] for r in got]
    per = -(-n // world)
    assert [len(s) for s in shards] == [per] * world
    flat = [sid for s in shards for sid in s]
    assert set(flat) == set(ids)  # covers the split
    assert len(flat) - len(set(flat)) == per * world - n  # repeats: only the sampler's padding
    if n % world == 0:
        assert len(set(flat)) == len(flat)

    assert [r["world"] for r in got] == [[world, k] for k in range(world)]
    balanced = [r["balanced"] for r in got]
    assert [len(s) for s in balanced] == [-(-30 // world)] * world
    expected = BalancedSampler.by_column(train.harmonized_df, "view", num_samples=30, seed=3,
                                         num_replicas=world, rank=0)
    expected.set_epoch(2)
    draw = [ids[i] for i in expected.draw().tolist()]
    assert [draw[k::world] for k in range(world)] == balanced  # one draw, dealt to the ranks

    distinct = [r["distinct"] for r in got]
    flat = [i for s in distinct for i in s]
    assert [len(s) for s in distinct] == [n // world] * world
    assert len(set(flat)) == len(flat) and set(flat) <= set(range(n))


def test_augmented_dataset_samples_keep_boxes_in_step(nih):
    aug = Compose([RandomFlip(p=0.5), RandomAffine(p=1, degrees=15, translate=(0.2, 0.2)),
                   RandomIntensity(p=0.5)])
    torch.manual_seed(0)
    boxed = [i for i in range(len(nih)) if len(nih[i]["bbox"])]
    assert boxed
    for i in boxed:
        sample = nih[i]
        out = aug(sample)
        assert out["img"].shape == sample["img"].shape and out["img"].dtype == torch.float32
        assert len(out["bbox"]) == len(out["bbox_labels"]) == len(out["bbox_annotators"])
        assert len(out["bbox"]) <= len(sample["bbox"])
        if len(out["bbox"]):
            assert (out["bbox"] >= 0).all() and (out["bbox"] <= 224).all()
            assert (out["bbox"][:, 2:] > out["bbox"][:, :2]).all()
        assert torch.equal(out["cls"], sample["cls"]) and out["sample_id"] == sample["sample_id"]
