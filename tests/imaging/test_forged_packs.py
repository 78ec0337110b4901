"""Forged pack headers: a pack whose header lies in any one field -- and is otherwise
consistent, so that no simple type check sees it -- is dropped with a warning and rebuilt;
every image then equals a fresh decode (pixels and letterbox), never a crash."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import torch

from radharmony.datasets.rexgradient import ReXGradientValidDataset
from radharmony.fake.rexgradient import write_rexgradient
from radharmony.files import HEAD
from radharmony.imaging import packs as packs_mod

ALIGN = 4096


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    return write_rexgradient(tmp_path_factory.mktemp("rex"), studies={"valid": 4},
                             image_size=(96, 80))


def _ds(root, cache):
    return ReXGradientValidDataset(root, cache_dir=cache, dtype=torch.float32)


def _layout(head: dict, count: int) -> dict:
    """``head`` with ``count`` records and offsets recomputed so that they fit each other."""
    keys = HEAD.size + 1024
    sums = keys + 32 * count
    info = sums + 8 * count
    data = -(-(info + 8 * count * len(head["info_fields"])) // ALIGN) * ALIGN
    return {**head, "count": count, "offsets": {"keys": keys, "sums": sums, "info": info,
                                                "data": data}}


def _forge(blob: bytearray, how: str) -> bytearray:
    n = int.from_bytes(blob[8:12], "little")
    head = json.loads(bytes(blob[12:12 + n]))
    count, shape = head["count"], head["shape"]
    record = int(np.prod(shape)) * np.dtype(head["dtype"]).itemsize
    if how == "magic":  # another format version
        blob[:8] = b"RHPACK01"
        return blob
    if how == "header_length":  # longer than the JSON: the block's zero bytes join it
        blob[8:12] = (n + 5).to_bytes(4, "little")
        return blob
    if how == "count":  # fewer records, the data section moved so that the size still fits
        lost = next(k for k in range(1, count) if (k * record) % ALIGN == 0)
        head = _layout(head, count - lost)
        head["offsets"]["data"] += lost * record
    elif how == "shape":  # same bytes per record, another shape
        head["shape"] = [shape[0] // 2, shape[1] * 2]
    elif how == "dtype":  # same bytes per record, 16-bit
        assert head["dtype"] == "|u1"
        head["dtype"], head["shape"] = "<u2", [shape[0], shape[1] // 2]
    elif how == "info_fields":  # the letterbox fields named in another order
        head["info_fields"] = head["info_fields"][::-1]
    elif how == "checksum":  # the other algorithm
        head["checksum"] = "crc32" if head["checksum"] == "xxh3_64" else "xxh3_64"
    elif how == "salt":  # written for other pipeline parameters
        head["salt"] = head["salt"].replace('"size": 224', '"size": 225')
        assert head["salt"] != json.loads(bytes(blob[12:12 + n]))["salt"]
    elif how in ("offsets.keys", "offsets.sums", "offsets.info"):  # a section moved
        field = how.split(".")[1]
        order = ["keys", "sums", "info"]
        for f in order[order.index(field):]:
            head["offsets"][f] += 8
    elif how == "offsets.data":  # records moved a page on, the file grown to match
        head["offsets"]["data"] += ALIGN
        d = json.loads(bytes(blob[12:12 + n]))["offsets"]["data"]
        blob[d:d] = bytes(ALIGN)
    else:
        raise AssertionError(how)
    meta = json.dumps(head).encode()
    blob[8:12] = len(meta).to_bytes(4, "little")
    blob[12:12 + 1024] = meta.ljust(1024, b"\0")
    return blob


FORGERIES = ["magic", "header_length", "count", "shape", "dtype", "info_fields", "checksum",
             "salt", "offsets.keys", "offsets.sums", "offsets.info", "offsets.data"]


@pytest.mark.parametrize("how", FORGERIES)
def test_forged_pack_header_is_dropped_and_rebuilt(replica, tmp_path, how):
    root = tmp_path / "r"
    shutil.copytree(replica.parent, root)
    root = root / replica.name
    fresh = _ds(root, None)
    want = [fresh.load_image(i) for i in range(len(fresh))]
    _ds(root, tmp_path / "c").pre_cache(progress=False)
    (pack,) = (tmp_path / "c" / "images" / "packs").glob("*.rhp")
    pack.write_bytes(_forge(bytearray(pack.read_bytes()), how))
    ds = _ds(root, tmp_path / "c")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        got = [ds.load_image(i) for i in range(len(ds))]
    for (a, box_a), (b, box_b) in zip(got, want):
        assert a.shape == b.shape and np.array_equal(a, b)
        assert box_a == box_b
    texts = [str(w.message) for w in rec]
    assert any(f"Cache pack {pack}" in t and "failed its check" in t for t in texts), texts
    assert not pack.exists()  # dropped
    ds.pre_cache(progress=False)  # and rebuilt
    (again,) = (tmp_path / "c" / "images" / "packs").glob("*.rhp")
    assert packs_mod.Pack(again).read(np.arange(len(ds)))[1].all()
