"""WebDataset export: read back through the real ``webdataset`` reader it equals ``ds[i]``;
manifest checksums; byte-reproducible, resumable shards; failures reported; equal, disjoint
per-rank portions with 2 and 3 gloo ranks in real processes."""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import socket
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

import radharmony
from radharmony.errors import RowsDroppedWarning
from radharmony.export import (ExportError, ShardedWebDataset, decode_sample, rank_shards,
                               read_manifest, to_webdataset)
from radharmony.export.shards import worker_skip
from radharmony.fake import make_fake, write_xraydar
from radharmony.imaging.pipeline import DefaultTransform

wds = pytest.importorskip("webdataset")

N_XRAYDAR = 11  # shards of 5, 5, 1: not divisible by 2, 3 or 4 consumers


def xraydar(root: Path, **kw):
    cls = radharmony.get_dataset_class("xraydar_multimodal")
    return cls(root, output_cls=True, output_bbox=True, output_report=True,
               output_report_spans=True, output_report_labels=True, **kw)


@pytest.fixture(scope="module")
def xroot(tmp_path_factory) -> Path:
    return write_xraydar(tmp_path_factory.mktemp("xraydar"), n=N_XRAYDAR, sizes=(150, 130))


@pytest.fixture(scope="module")
def exported(xroot, tmp_path_factory):
    """(dataset, export folder, manifest) written in this process."""
    ds = xraydar(xroot, cache_dir=None, dtype=torch.float32)
    out = tmp_path_factory.mktemp("export")
    return ds, out, to_webdataset(ds, out, shard_size=5, progress=False)


def assert_same_sample(got: dict, ref: dict) -> None:
    assert list(got) == list(ref)
    for k, want in ref.items():
        have = got[k]
        if isinstance(want, torch.Tensor):
            assert isinstance(have, torch.Tensor), k
            assert (have.dtype, have.shape) == (want.dtype, want.shape), k
            assert torch.equal(have, want), k
        else:
            assert type(have) is type(want) and have == want, k


def read_back(folder: Path, manifest: dict, **kw) -> dict[int, dict]:
    urls = [str(folder / s["name"]) for s in manifest["shards"]]
    return {int(raw["__key__"]): decode_sample(raw, **kw)
            for raw in wds.WebDataset(urls, shardshuffle=False, empty_check=False)}


# -- the export ---------------------------------------------------------------------------------
def test_every_sample_reads_back_as_ds_i(exported):
    ds, out, manifest = exported
    back = read_back(out, manifest, dtype=torch.float32)
    assert sorted(back) == list(range(len(ds)))
    for i in range(len(ds)):
        assert_same_sample(back[i], ds[i])
    assert {"cls", "bbox", "bbox_labels", "bbox_annotators", "report", "report_spans",
            "report_cls"} <= set(back[1])
    assert any(len(s["bbox"]) for s in back.values())
    assert any(len(s["bbox"]) == 0 for s in back.values())  # empty (0, 4) boxes survive too


def test_bfloat16_img_equals_a_bfloat16_dataset(exported, xroot):
    _, out, manifest = exported
    ds16 = xraydar(xroot, cache_dir=None, dtype=torch.bfloat16)
    back = read_back(out, manifest, dtype=torch.bfloat16)
    for i in (0, 3):
        assert back[i]["img"].dtype == torch.bfloat16
        assert torch.equal(back[i]["img"], ds16[i]["img"])


def test_shard_layout_and_manifest_checksums(exported):
    ds, out, manifest = exported
    assert [(s["name"], s["start"], s["stop"], s["count"]) for s in manifest["shards"]] == [
        ("xraydar_multimodal-000000.tar", 0, 5, 5),
        ("xraydar_multimodal-000001.tar", 5, 10, 5),
        ("xraydar_multimodal-000002.tar", 10, 11, 1)]
    assert manifest["num_samples"] == N_XRAYDAR and manifest["complete"]
    assert manifest == read_manifest(out) == read_manifest(out / "manifest.json")
    for s in manifest["shards"]:
        data = (out / s["name"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == s["sha256"] and len(data) == s["bytes"]
    fp = manifest["fingerprint"]
    ids = "\n".join(ds.harmonized_df["sample_id"]).encode()
    assert fp["sample_ids_sha256"] == hashlib.sha256(ids).hexdigest()
    assert (fp["key"], fp["num_samples"], fp["dtype"]) == ("xraydar_multimodal", 11, "float32")
    assert fp["outputs"] == ["bbox", "cls", "report", "report_labels", "report_spans"]
    assert fp["pipeline"]["bits"] == 8 and fp["pipeline"]["size"] == 224
    with tarfile.open(out / manifest["shards"][0]["name"]) as tar:
        members = tar.getmembers()
    assert [m.name for m in members[:2]] == ["000000000.json", "000000000.png"]
    assert {(m.mtime, m.uid, m.gid, m.mode) for m in members} == {(946684800, 0, 0, 0o644)}


def test_parallel_export_writes_the_same_bytes_and_the_cache_path_too(exported, xroot,
                                                                    tmp_path):
    _, out, manifest = exported
    ds = xraydar(xroot, cache_dir=tmp_path / "cache", dtype=torch.float32)
    again = to_webdataset(ds, tmp_path / "par", shard_size=5, num_workers=2, progress=False)
    assert [s["sha256"] for s in again["shards"]] == [s["sha256"] for s in manifest["shards"]]
    assert again["fingerprint"] == manifest["fingerprint"]
    assert any((tmp_path / "cache").rglob("*"))  # the dataset's cache was filled


def test_resume_keeps_intact_shards_and_rewrites_damaged_ones(xroot, tmp_path):
    ds = xraydar(xroot, cache_dir=None, dtype=torch.float32)
    first = to_webdataset(ds, tmp_path, shard_size=5, progress=False)
    paths = [tmp_path / s["name"] for s in first["shards"]]
    stamps = [p.stat().st_mtime_ns for p in paths]
    os.utime(paths[0], ns=(1, 1))  # a rewrite would change the mtime back to now
    paths[1].write_bytes(b"damaged")
    second = to_webdataset(ds, tmp_path, shard_size=5, progress=False)
    assert second["shards"] == first["shards"]
    assert paths[0].stat().st_mtime_ns == 1  # intact: kept
    assert paths[1].stat().st_mtime_ns != 1 and \
        hashlib.sha256(paths[1].read_bytes()).hexdigest() == first["shards"][1]["sha256"]
    assert paths[2].stat().st_mtime_ns == stamps[2]
    # another pipeline changes the fingerprint: everything is rewritten at 16 bits
    third = to_webdataset(ds, tmp_path, shard_size=5, progress=False, dtype_bits=16)
    assert third["fingerprint"]["pipeline"]["bits"] == 16
    assert all(a["sha256"] != b["sha256"] for a, b in zip(first["shards"], third["shards"]))


def test_sixteen_bit_export_equals_a_sixteen_bit_dataset(rex_images, tmp_path):
    cls = radharmony.get_dataset_class("rexgradient_valid")
    ds = cls(rex_images, output_report=True, cache_dir=None, dtype=torch.float32,
             transform=DefaultTransform(bits=16))
    manifest = to_webdataset(ds, tmp_path, shard_size=8, progress=False)
    raw = next(iter(wds.WebDataset([str(tmp_path / manifest["shards"][0]["name"])],
                                   shardshuffle=False)))
    import cv2
    assert cv2.imdecode(np.frombuffer(raw["png"], np.uint8), cv2.IMREAD_UNCHANGED).dtype \
        == np.uint16
    back = read_back(tmp_path, manifest)
    for i in range(len(ds)):
        assert_same_sample(back[i], ds[i])
    assert isinstance(back[0]["report"], str) and back[0]["report"]


def test_mask_outputs_travel_as_png_members(tmp_path):
    kwargs = make_fake("siim_acr_ptx", tmp_path / "siim")
    ds = radharmony.get_dataset_class("siim_acr_ptx")(**kwargs, output_mask=True,
                                                      cache_dir=None, dtype=torch.float32)
    manifest = to_webdataset(ds, tmp_path / "out", shard_size=4, progress=False)
    names = tarfile.open(tmp_path / "out" / manifest["shards"][0]["name"]).getnames()
    assert "000000000.mask.png" in names
    back = read_back(tmp_path / "out", manifest)
    for i in range(len(ds)):
        assert_same_sample(back[i], ds[i])
    assert any(back[i]["mask"].any() for i in back) and back[0]["mask"].shape == (1, 224, 224)


def test_a_missing_image_is_reported_never_dropped_silently(xroot, tmp_path):
    root = write_xraydar(tmp_path / "x", n=N_XRAYDAR, sizes=(150, 130))
    ds = xraydar(root, cache_dir=None)
    lost = root / ds.harmonized_df["image_path"].iat[6]
    saved = lost.read_bytes()
    lost.unlink()
    sid = ds.harmonized_df["sample_id"].iat[6]
    with pytest.raises(ExportError, match="1 of 11 samples could not be exported") as err:
        to_webdataset(ds, tmp_path / "out", shard_size=5, progress=False)
    assert sid in str(err.value)
    manifest = read_manifest(tmp_path / "out")
    assert not manifest["complete"] and manifest["num_samples"] == 10
    assert [f["sample_id"] for f in manifest["failures"]] == [sid]
    assert "ImageReadError" in manifest["failures"][0]["error"]
    with pytest.warns(RowsDroppedWarning, match=sid):
        skipped = to_webdataset(ds, tmp_path / "out", shard_size=5, progress=False,
                                on_error="skip")
    assert skipped["complete"] and skipped["shards"][1]["count"] == 4
    plans = [rank_shards(tmp_path / "out", rank=r, world_size=2, pad=False) for r in range(2)]
    assert [len(p) for p in plans] == [5, 5] and "000000006" not in plans[0].keys() + \
        plans[1].keys()
    lost.write_bytes(saved)  # repaired: only the shard that had the failure is redone
    kept = tmp_path / "out" / skipped["shards"][0]["name"]
    os.utime(kept, ns=(1, 1))
    fixed = to_webdataset(ds, tmp_path / "out", shard_size=5, progress=False)
    assert fixed["complete"] and fixed["num_samples"] == 11 and not fixed["failures"]
    assert kept.stat().st_mtime_ns == 1


def test_bad_arguments_raise_four_part_errors(exported, tmp_path):
    ds = exported[0]
    with pytest.raises(ExportError, match="shard_size must be a positive integer"):
        to_webdataset(ds, tmp_path, shard_size=0)
    with pytest.raises(ExportError, match="on_error must be"):
        to_webdataset(ds, tmp_path, on_error="ignore")
    with pytest.raises(ExportError, match="No export manifest"):
        read_manifest(tmp_path / "nowhere")
    with pytest.raises(ExportError, match="has no .json member"):
        decode_sample({"__key__": "000000000", "png": b""})


# -- per-rank plans -----------------------------------------------------------------------------
MANIFEST = {"shards": [{"name": "a.tar", "start": 0, "stop": 5, "count": 5, "failed": []},
                       {"name": "b.tar", "start": 5, "stop": 10, "count": 4,
                        "failed": [{"index": 7, "sample_id": "x:7", "error": "e"}]},
                       {"name": "c.tar", "start": 10, "stop": 12, "count": 2, "failed": []}]}


def test_plan_rows_pinned_by_hand():
    # export order a0..a4 b5 b6 b8 b9 c10 c11 (11 samples; 7 failed), 3 ranks
    plans = [rank_shards(MANIFEST, rank=r, world_size=3, shuffle=False, pad=True)
             for r in range(3)]
    assert [[int(k) for k in p.keys()] for p in plans] == [[0, 1, 2, 3], [4, 5, 6, 8],
                                                           [9, 10, 11, 0]]
    assert [s.url for s in plans[2].segments] == ["b.tar", "c.tar", "a.tar"]
    drop = [rank_shards(MANIFEST, rank=r, world_size=3, shuffle=False, pad=False).keys()
            for r in range(3)]
    assert [[int(k) for k in p] for p in drop] == [[0, 1, 2], [3, 4, 5], [6, 8, 9]]
    # two workers per rank: 6 consumers of 2 (pad) each
    w = [rank_shards(MANIFEST, rank=1, world_size=3, worker=k, num_workers=2, shuffle=False)
         .keys() for k in range(2)]
    assert [[int(x) for x in p] for p in w] == [[4, 5], [6, 8]]  # consumers 2 and 3
    assert rank_shards(MANIFEST, rank=0, world_size=1, base_url="s3://b/x").segments[0] \
        .url.startswith("s3://b/x/")
    assert rank_shards(MANIFEST, rank=0, world_size=1, base_url="pipe:cat {name}") \
        .segments[0].url.startswith("pipe:cat ")


def test_plans_equal_disjoint_and_seeded_for_many_world_sizes():
    total = 11
    for world in (1, 2, 3, 4, 5, 7, 11, 13):
        for workers in (1, 2, 3):
            for pad in (True, False):
                plans = [rank_shards(MANIFEST, rank=r, world_size=world, worker=k,
                                     num_workers=workers, pad=pad, seed=3, epoch=2)
                         for r in range(world) for k in range(workers)]
                per = math.ceil(total / (world * workers)) if pad else \
                    total // (world * workers)
                assert {len(p) for p in plans} == {per}
                keys = [k for p in plans for k in p.keys()]
                if pad:
                    assert len(set(keys)) == total  # everything seen
                else:
                    assert len(set(keys)) == len(keys)  # disjoint
    a = rank_shards(MANIFEST, rank=0, world_size=1, seed=0, epoch=0).keys()
    assert a == rank_shards(MANIFEST, rank=0, world_size=1, seed=0, epoch=0).keys()
    orders = {tuple(rank_shards(MANIFEST, rank=0, world_size=1, seed=0, epoch=e).keys())
              for e in range(6)}
    assert len(orders) > 1 and all(sorted(o) == sorted(a) for o in orders)


def test_resume_counts_of_a_rank_map_to_each_worker():
    # rank consumed 5 batches of 4 from 2 workers taking turns: worker 0 gave batches 0, 2, 4
    assert worker_skip(20, worker=0, num_workers=2, batch_size=4, per_consumer=40) == 12
    assert worker_skip(20, worker=1, num_workers=2, batch_size=4, per_consumer=40) == 8
    assert worker_skip(7, worker=0, num_workers=1, batch_size=4, per_consumer=40) == 7
    with pytest.raises(ExportError, match="whole number of batches"):
        worker_skip(7, worker=0, num_workers=2, batch_size=4, per_consumer=40)
    full = rank_shards(MANIFEST, rank=1, world_size=2, seed=5).keys()
    assert rank_shards(MANIFEST, rank=1, world_size=2, seed=5, start=2).keys() == full[2:]


def test_sharded_dataset_checks_its_worker_count(exported):
    _, out, _ = exported
    data = ShardedWebDataset(out, rank=0, world_size=1, num_workers=2)
    with pytest.raises(ExportError, match="another number of DataLoader workers"):
        next(iter(data))
    buffered = ShardedWebDataset(out, rank=0, world_size=1, shuffle_buffer=4, decode=False)
    keys = [s["__key__"] for s in buffered]
    assert sorted(keys) == [f"{i:09d}" for i in range(N_XRAYDAR)]
    assert keys == [s["__key__"] for s in buffered]  # deterministic
    resumed = ShardedWebDataset(out, rank=0, world_size=1, shuffle_buffer=4, decode=False,
                                start=3)
    assert [s["__key__"] for s in resumed] == keys[3:] and len(resumed) == N_XRAYDAR - 3


# -- real ranks -----------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_main(rank: int, world: int, export: str, result_dir: str, port: int) -> None:
    """One process of a ``world``-rank gloo group: runs the 3-rank scenarios on the whole
    group, then the 2-rank ones on the subgroup of ranks 0 and 1."""
    import torch.distributed as dist
    from torch.utils.data import DataLoader

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    pair = dist.new_group([0, 1])

    def epoch_ids(group, size, workers=0, batch=2, **kw):
        data = ShardedWebDataset(export, rank=rank, world_size=size, num_workers=workers,
                                 batch_size=batch, **kw)
        ids = []
        loader = DataLoader(data, batch_size=batch, num_workers=workers,
                            collate_fn=radharmony.collate,
                            multiprocessing_context="fork" if workers else None)
        for b in loader:
            step = torch.ones(1)
            dist.all_reduce(step, group=group)  # a training step: unequal counts stall here
            ids += list(b["sample_id"])
            assert b["img"].shape[1:] == (1, 224, 224)
        return ids, len(data)

    def scenarios(group, size):
        out = {}
        out["pad"], out["len_pad"] = epoch_ids(group, size, pad=True, seed=1, epoch=0)
        out["pad_again"], _ = epoch_ids(group, size, pad=True, seed=1, epoch=0)
        out["pad_epoch1"], _ = epoch_ids(group, size, pad=True, seed=1, epoch=1)
        out["drop"], _ = epoch_ids(group, size, pad=False, seed=1, epoch=0)
        out["resume"], _ = epoch_ids(group, size, pad=False, seed=1, epoch=0, start=2)
        out["workers"], out["len_workers"] = epoch_ids(group, size, workers=2, batch=1,
                                                       pad=True, seed=1)
        out["workers_resume"], _ = epoch_ids(group, size, workers=2, batch=1, pad=True,
                                             seed=1, start=2)
        Path(result_dir, f"world{size}_rank{rank}.json").write_text(json.dumps(out))

    scenarios(dist.group.WORLD, world)
    if rank < 2:
        scenarios(pair, 2)
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def rank_results(exported, tmp_path_factory):
    """Per world size (2, 3), every rank's sample ids from one spawn of 3 gloo processes."""
    import torch.multiprocessing as mp

    _, out, _ = exported
    results = tmp_path_factory.mktemp("ranks")
    mp.spawn(_rank_main, args=(3, str(out), str(results), _free_port()), nprocs=3, join=True)
    return {w: [json.loads((results / f"world{w}_rank{r}.json").read_text())
                for r in range(w)] for w in (2, 3)}


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_get_equal_disjoint_portions_through_webdataset(exported, rank_results, world):
    ds = exported[0]
    res = rank_results[world]
    every = set(ds.harmonized_df["sample_id"])
    pad, drop = math.ceil(N_XRAYDAR / world), N_XRAYDAR // world
    assert [len(r["pad"]) for r in res] == [pad] * world == [r["len_pad"] for r in res]
    assert set().union(*(r["pad"] for r in res)) == every  # covers the export
    assert [len(r["drop"]) for r in res] == [drop] * world
    dropped = [s for r in res for s in r["drop"]]
    assert len(set(dropped)) == len(dropped) == drop * world  # disjoint
    assert all(r["pad"] == r["pad_again"] for r in res)  # deterministic for (seed, epoch)
    assert any(r["pad"] != r["pad_epoch1"] for r in res)
    assert all(r["resume"] == r["drop"][2:] for r in res)
    per_worker = math.ceil(N_XRAYDAR / (world * 2))
    assert [len(r["workers"]) for r in res] == [2 * per_worker] * world == \
        [r["len_workers"] for r in res]
    assert set().union(*(r["workers"] for r in res)) == every
    assert all(r["workers_resume"] == r["workers"][2:] for r in res)


# -- the command ----------------------------------------------------------------------------------
def test_cli_export_writes_a_split(rex_images, tmp_path, capsys):
    from radharmony.cli import export as cli

    parser = argparse.ArgumentParser(prog="radharmony")
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["export", "rexgradient", "--split", "valid", "--root",
                              str(rex_images), "-o", str(tmp_path / "v"), "--shard-size", "8",
                              "--json", "-q"])
    assert args.func(args) == 0
    summary = json.loads(capsys.readouterr().out)
    manifest = read_manifest(tmp_path / "v")
    assert summary["key"] == "rexgradient_valid" and summary["samples"] == \
        manifest["num_samples"] > 0
    args = parser.parse_args(["export", "rexgradient_train", "--split", "valid", "--n-splits",
                              "5", "--root", str(rex_images), "-o", str(tmp_path / "t"),
                              "-q"])
    assert args.func(args) == 0
    manifest = read_manifest(tmp_path / "t")
    assert manifest["prefix"] == "rexgradient_train-valid" and manifest["split"] == "valid"
    assert "exported" in capsys.readouterr().out
    from radharmony.cli.output import UsageError

    bad = parser.parse_args(["export", "rexgradient", "--split", "nope", "--root",
                             str(rex_images), "-o", str(tmp_path / "x")])
    with pytest.raises(UsageError, match="no split 'nope'"):
        bad.func(bad)
