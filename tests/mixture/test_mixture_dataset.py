"""MixtureDataset, mixture_collate and MixtureSampler: records with their images through the
sources' own pipelines, packed batches of mixed tasks, a draw that ranks partition and that
resumes where it stopped (DataLoader workers too)."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
import torch

from mixture_fixtures import write_mixture
from radharmony import collate, pad_packed
from radharmony.errors import RadHarmonyError
from radharmony.mixture.dataset import (MixtureBatch, MixtureDataset, MixtureSampler,
                                        mixture_collate)
from radharmony.registry import get_dataset_class
from radharmony.imaging.pipeline import DefaultTransform

MIMIC_LABELS = "34cb60876203bc02"
STUDY_PA_LAT = "bbd49eab9436b7c4"
WITH_PRIOR = "7c152cc69fb95085"


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    return write_mixture(tmp_path_factory.mktemp("mix"), images="cache", size=32)


@pytest.fixture(scope="module")
def ds(mix, tmp_path_factory):
    return MixtureDataset(mix.out, split=None, cache_dir=tmp_path_factory.mktemp("cache"))


def _index(ds, record_id):
    return ds.table.column("record_id").to_pylist().index(record_id)


def test_a_record_with_its_images_through_the_source_pipeline(mix, ds):
    assert len(ds) == 18 and ds.size == 32
    s = ds[_index(ds, STUDY_PA_LAT)]
    assert s["img"].shape == (3, 1, 32, 32) and s["num_images"] == 3
    assert s["img"].dtype == torch.float32 and -1 <= s["img"].min() and s["img"].max() <= 1
    assert s["prior_img"].shape == (0, 1, 32, 32) and s["prior_num_images"] == 0
    assert s["views"] == ["PA", "LATERAL", None] and s["split"] == "valid"
    assert s["fields"]["findings"] == s["target"]
    # the same pixels as the source dataset's own sample of that image
    m = ds[_index(ds, MIMIC_LABELS)]
    src = mix.manifest["sources"][1]
    own = get_dataset_class("mimic_cxr_jpg")(src["root"], **src["kwargs"], cache_dir=None,
                                            transform=DefaultTransform(size=32),
                                            dtype=torch.float32)
    row = own.harmonized_df["image_path"].tolist().index(m["image_paths"][0])
    assert torch.equal(m["img"][0], own[row]["img"])
    assert m["fields"]["labels"]["Atelectasis"] == 1 and m["fields"]["silver"] is False


def test_priors_and_text_only_records(ds):
    p = ds[_index(ds, WITH_PRIOR)]
    assert p["prior_num_images"] == 2 and p["prior_img"].shape == (2, 1, 32, 32)
    assert p["fields"]["days"] == 7
    t = ds[_index(ds, "4080f7f86750183f")]
    assert t["img"].shape == (0, 1, 32, 32) and t["num_images"] == 0


def test_collate_packs_images_of_mixed_tasks(ds):
    loader = torch.utils.data.DataLoader(ds, batch_size=6, collate_fn=mixture_collate)
    batch = next(iter(loader))
    counts = [3, 0, 3, 2, 2, 2]  # the fixture's first six records
    assert batch["num_images"].tolist() == counts
    assert batch["img"].shape == (sum(counts), 1, 32, 32)
    assert batch["task"][:3] == ["findings", "summarise", "findings"]
    assert isinstance(batch["fields"], list) and len(batch["fields"]) == 6
    padded, mask = pad_packed(batch["img"], batch["num_images"])
    assert padded.shape == (6, 3, 1, 32, 32) and mask.sum().item() == 12
    assert torch.equal(padded[2, :3], ds[2]["img"])
    with pytest.raises(RadHarmonyError, match="not a mixture record"):
        mixture_collate([{"img": torch.zeros(1)}])
    with pytest.raises(RadHarmonyError, match="one sample, not a list"):  # batch_size=None
        mixture_collate(ds[0])  # with a sampler of single indices


def test_a_batch_with_and_without_priors(ds):
    j = _index(ds, WITH_PRIOR)
    batch = mixture_collate(ds.__getitems__([0, j, 1]))
    assert batch["prior_num_images"].tolist() == [0, 2, 0]
    assert batch["prior_img"].shape == (2, 1, 32, 32) and batch["num_images"].tolist() == [3, 2, 0]
    assert torch.equal(batch["prior_img"], ds[j]["prior_img"])
    none = mixture_collate(ds.__getitems__([0, 1]))
    assert none["prior_img"].shape == (0, 1, 32, 32) and none["prior_num_images"].tolist() == [0, 0]


def _same(a, b) -> bool:
    """Equal samples or batches: the same keys in the same order, equal values (tensors of
    the same dtype, shape and values)."""
    if list(a) != list(b):
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, torch.Tensor):
            if not (isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape
                    and torch.equal(x, y)):
                return False
        elif x != y or type(x) is not type(y):
            return False
    return True


@pytest.mark.parametrize("order", ["all", "reversed", "one_source", "mixed", "negative"])
def test_a_batch_read_equals_its_records_read_apart(ds, order):
    n = len(ds)
    indices = {"all": list(range(n)), "reversed": list(range(n))[::-1],
               "one_source": [12, 11, 14], "mixed": [0, 1, 15, 9, 11, 3],
               "negative": [-1, 2, -18]}[order]
    together = ds.__getitems__(indices)
    apart = [ds[i] for i in indices]
    assert len(together) == len(apart) == len(indices)
    assert all(_same(a, b) for a, b in zip(together, apart))
    batch = mixture_collate(together)
    assert _same(batch, collate(list(together)))  # the columns handed over = the generic one
    assert _same(batch, collate(apart))
    # the batch read straight from the columns (no sample dicts) is that batch too
    read = ds[indices]
    assert isinstance(read, MixtureBatch) and _same(read, batch)
    assert mixture_collate(read) is read  # DataLoader(batch_size=None) hands it on
    assert _same(ds.batch(np.array(indices)), batch)


def test_a_batch_of_no_records_and_indices_that_are_not_a_list(ds):
    empty = ds.batch([])
    assert empty["img"].shape == (0, 1, 32, 32) and empty["record_id"] == []
    assert empty["num_images"].tolist() == []
    with pytest.raises(RadHarmonyError, match="batch_size=None"):
        ds.__getitems__([[0, 1], [2, 3]])  # batches from the sampler, batched again
    with pytest.raises(RadHarmonyError, match="whole-number indices"):
        ds.batch(["a"])


def test_a_changed_sample_is_collated_as_it_now_is(ds):
    for key, value in (("target", "changed"), ("fields", {}), ("num_images", 2)):
        samples = ds.__getitems__([11, 12, 13])
        samples[1][key] = value
        batch = mixture_collate(samples)
        assert batch[key][1] == value and _same(batch, collate(list(samples)))
    samples = ds.__getitems__([11, 12, 13])
    samples[2]["img"] = torch.zeros_like(samples[2]["img"])
    batch = mixture_collate(samples)
    assert not batch["img"][2].any() and _same(batch, collate(list(samples)))
    added = ds.__getitems__([11, 12])
    added[0]["extra"] = 1
    assert mixture_collate(added)["extra"] == [1, None]
    fewer = ds.__getitems__([11, 12, 13])
    del fewer[2]  # the list itself changed
    assert _same(mixture_collate(fewer), collate(list(fewer)))


def test_samples_carry_the_records_of_the_parquet_file(mix, ds):
    """Every column of every record, read from the memory-mapped columns, is the Parquet
    file's value (text, codes, lists of paths and of views with their nulls)."""
    import pyarrow.parquet as pq

    from radharmony.mixture.columns import MixtureColumns
    from radharmony.mixture.reading import table_records
    from radharmony.mixture.records import RECORD_COLUMNS, fields_of

    want = table_records(pq.read_table(mix.out / "records.parquet"))
    cols = MixtureColumns(mix.out)
    rows = np.array([17, 0, 5, 4, 12, 11, 3, 3])
    got = cols.take(rows, RECORD_COLUMNS)
    assert [dict(zip(got, v)) for v in zip(*got.values())] == [want[r] for r in rows]
    assert ["PA", "LATERAL", None] in [r["views"] for r in want]  # a null view among them
    every = list(range(len(ds)))
    for sample, record in zip(ds.__getitems__(every), want):
        assert {k: sample[k] for k in ds.columns} == \
            {**{k: record[k] for k in ds.columns}, "fields": fields_of(record["fields"])}
    assert cols.rows("train").tolist() == [r for r in every if want[r]["split"] == "train"]


def test_record_columns_equal_the_arrow_rows(ds):
    import pyarrow as pa

    from radharmony.mixture.reading import ColumnRows, table_records

    table = ds.table
    chunked = pa.concat_tables([table.slice(0, 5), table.slice(5, 7), table.slice(12)])
    rows = np.array([17, 0, 5, 4, 12, 11, 3])
    want = table_records(table.take(rows))
    for t in (table, chunked):
        got = ColumnRows(t).take(rows)
        assert list(got) == table.column_names
        assert [dict(zip(got, v)) for v in zip(*got.values())] == want


def test_column_readers_of_every_kind_equal_the_arrow_rows():
    """Repeating strings (read as codes), unique ones, nulls, lists of any length and null
    lists (one flat take), on whole, sliced and chunked tables."""
    import pyarrow as pa

    from radharmony.mixture.reading import ColumnRows, table_records

    n = 40
    paths = [None if i % 7 == 3 else [f"p{i}/{k}.png" for k in range(i % 3)] for i in
             range(n)]
    paths[5] = ["a.png", None]
    table = pa.table({
        "record_id": [f"{i:04x}" for i in range(n)],
        "target": [None if i % 9 == 0 else ("None", "Cardiomegaly")[i % 2] for i in range(n)],
        "fields": ["{}" if i % 5 else '{"a":1}' for i in range(n)],
        "image_paths": pa.array(paths, pa.list_(pa.string())),
        "one": pa.array([[f"x{i}"] for i in range(n)], pa.list_(pa.string())),
        "variant": pa.array(np.arange(n) % 3, pa.int16())})
    reader = ColumnRows(table)
    assert set(reader.codes) == {"target", "fields"}  # the repeating ones, as codes
    rows = np.array([3, 0, 39, 5, 9, 21, 7, 7, 14])
    parts = pa.concat_tables([table.slice(0, 11), table.slice(11, 20), table.slice(31)])
    for t, idx in ((table, rows), (table.slice(10), rows[rows < 30]), (parts, rows),
                   (table, rows[rows % 3 == 0]), (table, rows[:0])):
        got = ColumnRows(t).take(idx)
        assert list(got) == t.column_names
        assert [dict(zip(got, v)) for v in zip(*got.values())] == \
            table_records(t.take(pa.array(idx, pa.int64())))
    got = reader.take(np.array([1, 1]), ["image_paths", "one"])
    assert got["image_paths"][0] is not got["image_paths"][1]  # each row its own list
    assert got["one"][0] is not got["one"][1]


def test_columns_choose_what_a_sample_carries(mix):
    lean = MixtureDataset(mix.out, columns=("record_id", "prompt"))
    assert set(lean[0]) == {"record_id", "prompt", "source", "task", "image_paths", "fields",
                            "img", "num_images", "prior_img", "prior_num_images"}
    assert "dataset" not in MixtureDataset(mix.out)[0]
    with pytest.raises(RadHarmonyError, match="columns must be record columns"):
        MixtureDataset(mix.out, columns=("record_id", "answer"))


def test_filters_and_their_errors(mix):
    train = MixtureDataset(mix.out, split="train")
    assert len(train) == 9 and set(train.table.column("split").to_pylist()) == {"train"}
    vqa = MixtureDataset(mix.out, split=None, tasks="vqa_mcq")
    assert len(vqa) == 3
    with pytest.raises(RadHarmonyError, match="has no task 'vqa'"):
        MixtureDataset(mix.out, tasks=["vqa"])
    with pytest.raises(RadHarmonyError, match="split must be"):
        MixtureDataset(mix.out, split="test")


# -- the sampler ----------------------------------------------------------------------------
def test_default_draw_is_each_record_once_per_epoch(ds):
    s = MixtureSampler(ds, seed=3)
    first = list(s)
    assert sorted(first) == list(range(18)) and first != list(range(18))
    assert list(s) == first  # the same epoch again
    s.set_epoch(1)
    assert sorted(list(s)) == list(range(18)) and list(s) != first


def test_rates_give_each_group_its_share(ds):
    s = MixtureSampler(ds, rates={"mimic_cxr_jpg": 3, "rexvqa_train/vqa_mcq": 1},
                       num_samples=4000, seed=0)
    sources = ds.table.column("source").to_pylist()
    got = Counter(sources[i] for i in s)
    assert set(got) == {"mimic_cxr_jpg", "rexvqa_train"}
    assert abs(got["mimic_cxr_jpg"] / 4000 - 0.75) < 0.03
    with pytest.raises(RadHarmonyError, match="which no record"):
        MixtureSampler(ds, rates={"nih": 1})


def test_ranks_partition_one_stream_whatever_their_number(ds):
    stream = MixtureSampler(ds, seed=5).stream().tolist()
    for r in (1, 2, 3, 4):
        parts = [list(MixtureSampler(ds, seed=5, num_replicas=r, rank=k)) for k in range(r)]
        assert all(len(p) == math.ceil(18 / r) for p in parts)
        dealt = [parts[k][j] for j in range(len(parts[0])) for k in range(r)]
        assert dealt[:18] == stream  # rank k holds positions k, k + r, ...
    dropped = [list(MixtureSampler(ds, seed=5, num_replicas=4, rank=k, drop_last=True))
               for k in range(4)]
    assert sorted(sum(dropped, [])) == sorted(stream[:16])
    for k in range(3):  # in batches: the same share, cut in lists (the last one shorter)
        batched = MixtureSampler(ds, seed=5, num_replicas=3, rank=k, batch_size=4)
        assert list(batched) == [list(MixtureSampler(ds, seed=5, num_replicas=3, rank=k))[j:j + 4]
                                 for j in (0, 4)] and len(batched) == 2
    with pytest.raises(RadHarmonyError, match="batch_size must be an integer >= 1"):
        MixtureSampler(ds, batch_size=0)


def _ids(loader, skip_batches=None):
    out = []
    for j, batch in enumerate(loader):
        out += batch["record_id"]
        if skip_batches is not None and j + 1 == skip_batches:
            break
    return out


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("batches", [False, True], ids=["samples", "batches"])
def test_a_resumed_stream_equals_the_uninterrupted_one(ds, workers, batches):
    def loader(sampler):
        if batches:  # the sampler yields lists of 4: each read as one batch
            return torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler,
                                               collate_fn=mixture_collate, num_workers=workers,
                                               timeout=60 if workers else 0)
        return torch.utils.data.DataLoader(ds, batch_size=4, sampler=sampler,
                                           collate_fn=mixture_collate, num_workers=workers,
                                           timeout=60 if workers else 0)  # a hang fails
    rates = {"rexgradient_train": 1, "mimic_cxr_jpg": 1, "rexvqa_train": 1}
    size = 4 if batches else None
    whole = MixtureSampler(ds, rates=rates, num_samples=24, seed=9, batch_size=size)
    full = _ids(loader(whole))
    whole.set_epoch(1)
    full_next = _ids(loader(whole))
    if batches:  # the same records, in the same batches, as the sample-by-sample stream
        plain = MixtureSampler(ds, rates=rates, num_samples=24, seed=9)
        assert full == _ids(torch.utils.data.DataLoader(ds, batch_size=4, sampler=plain,
                                                        collate_fn=mixture_collate))
        assert len(whole) == 6 and all(len(b) == 4 for b in whole)

    first = MixtureSampler(ds, rates=rates, num_samples=24, seed=9, batch_size=size)
    head = _ids(loader(first), skip_batches=2)  # stop after 2 batches (read ahead: workers)
    state = first.state_dict(consumed=len(head))
    assert state["position"] == 8 and state["epoch"] == 0

    resumed = MixtureSampler(ds, rates=rates, num_samples=24, seed=9,  # another batch size
                             batch_size=2 if batches else None)
    resumed.load_state_dict(state)
    resumed.set_epoch(0)  # a training loop's call at the top of the epoch keeps the place
    tail = _ids(loader(resumed))
    assert head + tail == full
    resumed.set_epoch(1)
    assert _ids(loader(resumed)) == full_next


def test_resume_on_another_number_of_ranks_continues_the_stream(ds):
    a = MixtureSampler(ds, seed=2, num_replicas=2, rank=0)
    it = iter(a)
    [next(it) for _ in range(3)]
    state = a.state_dict()
    assert state["position"] == 6
    stream = a.stream().tolist()
    rest = [MixtureSampler(ds, seed=2, num_replicas=3, rank=k) for k in range(3)]
    for s in rest:
        s.load_state_dict(state)
    parts = [list(s) for s in rest]
    assert [parts[k][j] for j in range(4) for k in range(3)] == stream[6:18]


def test_a_state_of_another_draw_is_refused(ds):
    state = MixtureSampler(ds, seed=1).state_dict()
    with pytest.raises(RadHarmonyError, match="belongs to another draw"):
        MixtureSampler(ds, seed=2).load_state_dict(state)
    with pytest.raises(RadHarmonyError, match="no sampler state"):
        MixtureSampler(ds).load_state_dict({"epoch": 1})
    with pytest.raises(RadHarmonyError, match="rank is out of range"):
        MixtureSampler(ds, num_replicas=2, rank=2)


def test_a_sampler_from_the_folder_reads_no_images(mix, ds):
    from_folder = MixtureSampler(mix.out, split=None, seed=4)
    assert list(from_folder) == list(MixtureSampler(ds, seed=4))
    assert np.array_equal(from_folder.stream().numpy(), MixtureSampler(ds, seed=4).stream())


def test_batches_from_workers_equal_the_batches_read_here(ds):
    sampler = MixtureSampler(ds, seed=1, batch_size=5)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, sampler=sampler, num_workers=2,
                                         collate_fn=mixture_collate, timeout=60)
    got = [dict(b) for b in loader]  # each worker's batch, handed over in its slot
    want = [ds.batch(idx) for idx in sampler]
    assert len(got) == len(want) == 4
    assert all(_same(g, w) for g, w in zip(got, want))


@pytest.mark.parametrize("ranks,drop_last,batch_size,taken",
                         [(1, False, None, 0), (4, False, None, 3), (4, True, 5, 2),
                          (5, False, 4, 7), (4, True, None, 3), (3, True, None, 18)])
def test_the_length_is_what_an_iteration_hands_out_without_drawing(ds, ranks, drop_last,
                                                                   batch_size, taken):
    s = MixtureSampler(ds, seed=2, num_replicas=ranks, rank=ranks - 1, drop_last=drop_last,
                       batch_size=batch_size)
    s.load_state_dict({**s.state_dict(), "position": taken})
    assert len(s) == len(list(s.__iter__()))
    s.load_state_dict({**s.state_dict(), "position": taken})
    assert len(s) == len(list(s))


def test_the_sampler_weighs_codes_as_it_weighs_names(mix):
    """Per-record weights from the memory-mapped codes equal those from the names (a null
    code: the last name), so a state taken with either resumes with the other."""
    from radharmony.mixture.columns import MixtureColumns
    from radharmony.mixture.sampler import coded_weights, record_weights

    cols = MixtureColumns(mix.out)
    s_codes, s_names, t_codes, t_names = cols.groups()
    rates = {"mimic_cxr_jpg": 3, "rexvqa_train/vqa_mcq": 1, "rexgradient_train": 2}
    names = record_weights(s_names[s_codes.astype(np.int64)], t_names[t_codes.astype(np.int64)],
                           rates)
    assert np.array_equal(coded_weights(s_codes, s_names, t_codes, t_names, rates), names)
    assert names.sum() == pytest.approx(1.0)
    assert names[0] == pytest.approx(2 / 6 / sum(r["source"] == "rexgradient_train"
                                                 for r in mix.records))


@pytest.mark.parametrize("n", [1, 2, 3, 17, 1000, 4097])
def test_the_seeded_order_is_a_permutation_at_any_positions(n):
    """Every record once per ``n`` positions (each repeat its own order), whatever positions
    are asked, and the same values asked in any order or alone."""
    from radharmony.mixture.sampler import _permuted, _splitmix

    keys = _splitmix(np.arange(3, dtype=np.uint64))
    for key in keys:
        assert sorted(_permuted(np.arange(n), n, key).tolist()) == list(range(n))
    whole = _permuted(np.arange(n), n, keys[0])
    pick = np.array([n - 1, 0, n // 2, n - 1])
    assert _permuted(pick, n, keys[0]).tolist() == whole[pick].tolist()
    if n > 3:
        assert whole.tolist() != list(range(n))
        assert whole.tolist() != _permuted(np.arange(n), n, keys[1]).tolist()


def test_the_first_batch_of_a_large_mixture_draws_no_whole_stream():
    class Groups:  # 20 M records (their groups read only when rates weigh them)
        def __len__(self):
            return 20_000_000

        def grouped(self):
            raise AssertionError("read without rates")

    s = MixtureSampler(Groups(), batch_size=64, num_replicas=8, rank=5, seed=1)
    first = next(iter(s))
    assert len(first) == 64 and len(set(first)) == 64
    assert first == s.at(5 + 8 * np.arange(64)).tolist()


def test_pickled_for_a_spawned_worker_the_columns_are_mapped_again_not_copied(mix):
    import pickle

    train = MixtureDataset(mix.out, split="train")
    train.batch([0, 1])  # the columns it read are mapped now
    assert isinstance(train.index, np.memmap) and train.records._maps
    data = pickle.dumps(train)
    assert len(data) < 20_000  # names and the index of files, no column
    again = pickle.loads(data)
    assert isinstance(again.index, np.memmap) and list(again.records._maps) == ["rows.train.npy"]
    assert _same(again.batch([3, 0]), train.batch([3, 0]))


def test_a_packed_batch_is_read_out_of_its_pack_and_never_stale(mix, tmp_path):
    """The images of a batch lying in one pack are converted straight out of it (one
    lookup per batch), equal to the source dataset's own samples; an image rewritten after
    packing is read anew (its key changed), and a symlinked file reaching outside the root
    is refused."""
    import os
    import shutil

    from radharmony.errors import PathSafetyError

    cache = tmp_path / "cache"
    src = mix.manifest["sources"][1]
    root = tmp_path / "root"
    shutil.copytree(src["root"], root)
    own = get_dataset_class(src["dataset"])(root, **src["kwargs"], cache_dir=cache,
                                            transform=DefaultTransform(size=32),
                                            dtype=torch.float32)
    own.pre_cache(progress=False)  # every image, then one pack
    ds = MixtureDataset(mix.out, split=None, cache_dir=cache)
    ds.images.reading[src["name"]]["image_root"] = str(root)
    picks = [i for i in range(len(ds)) if ds[i]["source"] == src["name"]
             and ds[i]["num_images"] == 1]
    calls = []
    original = own.image_cache.locate
    ds.images.reader(src["name"]).image_cache.locate = \
        lambda keys: calls.append(len(keys)) or original(keys)
    def gathered(items):
        raise AssertionError("the batch was gathered, not read out of the pack")

    ds.images.quantized = gathered
    batch = ds.batch(picks)
    assert calls == [len(picks)]  # one lookup for the batch, found whole in the pack
    del ds.images.quantized
    paths = own.harmonized_df["image_path"].tolist()
    for k, i in enumerate(picks):
        rel = ds[i]["image_paths"][0]
        assert torch.equal(batch["img"][k], own[paths.index(rel)]["img"])
    rel = ds[picks[0]]["image_paths"][0]
    before = ds.batch(picks[:1])["img"][0].clone()
    import cv2

    path = root / rel
    cv2.imwrite(str(path), 255 - cv2.imread(str(path), cv2.IMREAD_UNCHANGED))
    os.utime(path, ns=(10**18, 10**18))
    after = ds.batch(picks[:1])["img"][0]
    assert not torch.equal(after, before)  # the new pixels, not the packed ones
    outside = tmp_path / "outside.png"
    shutil.copy(path, outside)
    path.unlink()
    path.symlink_to(outside)
    with pytest.raises(PathSafetyError, match="outside"):
        ds.batch(picks[:1])
