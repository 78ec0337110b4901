"""MixtureSampler's draw by rate from the records' groups (``columns/rows_by_group.npy``): a
group by its share, then a record inside it, with no array of one value per record in a
rank; the groups file as the build and ``write_columns`` write it, and an older columns
folder without it."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tracemalloc
from collections import Counter

import numpy as np
import pytest

from mixture_fixtures import write_mixture
from radharmony.data.samplers import _mix
from radharmony.errors import RadHarmonyError
from radharmony.mixture.column_groups import GroupRows
from radharmony.mixture.column_writer import write_columns
from radharmony.mixture.columns import MixtureColumns
from radharmony.mixture.dataset import MixtureDataset, MixtureSampler
from radharmony.mixture.sampler import _splitmix, _uniform

#: mimic 3/6 of the draws, ReXGradient's findings 2/6, its other tasks 1/6, ReXVQA none
RATES = {"mimic_cxr_jpg": 3, "rexgradient_train/findings": 2, "rexgradient_train": 1}


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    return write_mixture(tmp_path_factory.mktemp("groups"), images="original", size=32)


def test_the_groups_file_holds_every_row_once_group_after_group(mix):
    """The fixture's 18 records (their splits by patient) as the build writes their groups:
    split, then source, then task, each in the order its values first appear."""
    rows, segments = MixtureColumns(mix.out).group_rows()
    assert segments == [["train", "rexgradient_train", "findings", 0, 4],
                        ["train", "rexgradient_train", "summarise", 4, 5],
                        ["train", "rexgradient_train", "findings_with_prior", 5, 6],
                        ["train", "rexgradient_train", "view", 6, 7],
                        ["train", "mimic_cxr_jpg", "findings_multilabel", 7, 9],
                        ["valid", "rexgradient_train", "findings", 9, 13],
                        ["valid", "mimic_cxr_jpg", "findings_multilabel", 13, 15],
                        ["valid", "rexvqa_train", "vqa_mcq", 15, 18]]
    assert rows.dtype == np.int64 and len(rows) == 18  # read by pread: nothing mapped
    assert rows[:].tolist() == [0, 3, 5, 7, 1, 9, 10, 13, 14, 2, 4, 6, 8, 11, 12, 15, 16, 17]
    for split, source, task, a, b in segments:  # each row is of its group
        assert {(mix.records[r]["split"], mix.records[r]["source"], mix.records[r]["task"])
                for r in rows[a:b].tolist()} == {(split, source, task)}


def _reference(records, rates, *, split, n, seed=0, epoch=0):
    """The stream by rate written from its definition, record by record: the groups
    ``(split, source, task)`` ordered by each value's first appearance, a group's share its
    key's rate split among the key's records, the group where the cumulative shares pass
    the position's first uniform, then its record at the second uniform times its size."""
    first = {c: list(dict.fromkeys(r[c] for r in records)) for c in ("split", "source", "task")}
    mine = [r for r in records if split is None or r["split"] == split]
    groups: dict = {}
    for position, r in enumerate(mine):
        groups.setdefault(tuple(first[c].index(r[c]) for c in ("split", "source", "task")),
                          []).append(position)
    order = sorted(groups)
    names = [(first["source"][s], first["task"][t]) for _, s, t in order]
    key = [(s, t) if f"{s}/{t}" in rates else s if s in rates else None for s, t in names]
    count = Counter()
    for k, g in zip(key, order):
        count[k] += len(groups[g])
    total = sum(rates.values())
    cdf, at = [], 0.0
    for k, g in zip(key, order):
        rate = 0 if k is None else rates[k if isinstance(k, str) else "/".join(k)]
        at += len(groups[g]) * (rate / total / count[k])
        cdf.append(at)
    seed_key = _mix(seed, epoch)
    positions = np.arange(n, dtype=np.int64)
    u1 = (_uniform(positions, seed_key) * cdf[-1]).tolist()
    u2 = _uniform(positions, int(_splitmix(seed_key))).tolist()
    out = []
    for a, b in zip(u1, u2):
        g = next(j for j, c in enumerate(cdf) if c > a)
        members = groups[order[g]]
        out.append(members[int(b * len(members))])
    return out


def test_groups_get_their_share_and_records_theirs_inside_a_group(mix):
    ds = MixtureDataset(mix.out, split=None)
    s = MixtureSampler(ds, rates=RATES, num_samples=6000, seed=11)
    stream = s.stream().tolist()
    assert stream == _reference(mix.records, RATES, split=None, n=6000, seed=11)
    by_group = Counter()
    by_record = Counter(stream)
    for i in stream:
        r = mix.records[i]  # split=None: a position is the record's row
        by_group["mimic" if r["source"] == "mimic_cxr_jpg" else
                 "findings" if (r["source"], r["task"]) == ("rexgradient_train", "findings")
                 else "rex other" if r["source"] == "rexgradient_train" else "vqa"] += 1
    # the expected counts: 6000 draws x 3/6, 2/6, 1/6, 0; within 4 standard deviations
    for group, want, p in [("mimic", 3000, 3 / 6), ("findings", 2000, 2 / 6),
                           ("rex other", 1000, 1 / 6)]:
        assert abs(by_group[group] - want) <= 4 * math.sqrt(6000 * p * (1 - p)), by_group
    assert by_group["vqa"] == 0
    # inside a group every record alike: mimic's 4 records 750 each, the 8 findings 250 each,
    # the 3 other ReXGradient records (summarise, findings_with_prior, view) 333.3 each
    for i, r in enumerate(mix.records):
        want = {"mimic_cxr_jpg": 750, "rexvqa_train": 0}.get(
            r["source"], 250 if r["task"] == "findings" else 1000 / 3)
        p = want / 6000
        assert abs(by_record[i] - want) <= 4 * math.sqrt(6000 * p * (1 - p) + 1e-9), (i, r)


@pytest.mark.parametrize("batch_size", [None, 3])
def test_ranks_deal_one_stream_by_rate_whatever_their_number(mix, batch_size):
    ds = MixtureDataset(mix.out, split=None)
    stream = MixtureSampler(ds, rates=RATES, num_samples=30, seed=4).stream().tolist()
    for r in (1, 2, 3, 4, 7):
        parts = [MixtureSampler(ds, rates=RATES, num_samples=30, seed=4, num_replicas=r,
                                rank=k, batch_size=batch_size) for k in range(r)]
        mine = [sum(p, []) if batch_size else p for p in map(list, parts)]
        dealt = [mine[k][j] for j in range(len(mine[0])) for k in range(r)]
        assert dealt[:30] == stream and sorted(dealt[30:]) == sorted(stream[:len(dealt) - 30])
    other = MixtureSampler(ds, rates=RATES, num_samples=30, seed=4)
    other.set_epoch(1)
    assert other.stream().tolist() != stream


def test_a_state_by_rate_resumes_on_other_ranks(mix):
    ds = MixtureDataset(mix.out, split="train")
    stream = MixtureSampler(ds, rates=RATES, num_samples=20, seed=2).stream().tolist()
    a = MixtureSampler(ds, rates=RATES, num_samples=20, seed=2, num_replicas=2, rank=1)
    it = iter(a)
    [next(it) for _ in range(4)]
    state = a.state_dict()
    assert state["position"] == 8
    rest = []
    for k in range(3):
        b = MixtureSampler(ds, rates=RATES, num_samples=20, seed=2, num_replicas=3, rank=k)
        b.load_state_dict(state)
        rest.append(list(b))
    assert [rest[k][j] for j in range(4) for k in range(3)] == stream[8:20]
    with pytest.raises(RadHarmonyError, match="belongs to another draw"):
        MixtureSampler(ds, rates={**RATES, "mimic_cxr_jpg": 4}, num_samples=20,
                       seed=2).load_state_dict(state)


def test_a_filtered_dataset_draws_its_own_groups_at_its_positions(mix):
    sources, tasks = ["rexgradient_train", "mimic_cxr_jpg"], ["findings", "findings_multilabel"]
    ds = MixtureDataset(mix.out, split="train", sources=sources, tasks=tasks)
    assert len(ds) == 6  # the train split's 4 findings and 2 mimic records
    rates = {"mimic_cxr_jpg": 1, "rexgradient_train": 1}
    s = MixtureSampler(ds, rates=rates, num_samples=400, seed=1)
    assert [g[:2] for g in s.groups.segments] == [("rexgradient_train", "findings"),
                                                 ("mimic_cxr_jpg", "findings_multilabel")]
    mine = [r for r in mix.records if r["split"] == "train" and r["source"] in sources
            and r["task"] in tasks]
    stream = s.stream().tolist()
    assert stream == _reference(mine, rates, split=None, n=400, seed=1)
    ids = ds.table.column("record_id").to_pylist()
    assert ids == [r["record_id"] for r in mine]  # a position is the dataset's
    got = Counter(mine[i]["source"] for i in stream)
    assert set(got) == {"rexgradient_train", "mimic_cxr_jpg"}
    assert abs(got["mimic_cxr_jpg"] - 200) <= 4 * math.sqrt(100)
    folder = MixtureSampler(mix.out, split="train", sources=sources, tasks=tasks, rates=rates,
                            num_samples=400, seed=1)
    assert folder.stream().tolist() == stream
    assert sorted(MixtureSampler(ds, seed=1)) == list(range(6))  # without rates: each once
    with pytest.raises(RadHarmonyError, match="which no record"):  # not in the selection
        MixtureSampler(ds, rates={"rexvqa_train": 1})


def test_a_state_of_the_stream_before_the_groups_is_refused(mix):
    """A state saved by the sampler before the draw by group (stream ``feistel-v2``: its
    digest over the records' number and the per-record weights) is another draw."""
    ds = MixtureDataset(mix.out, split=None)
    old_digest = hashlib.sha256(b"feistel-v2:18:18").hexdigest()[:16]
    old = {"format": "radharmony-mixture-sampler", "epoch": 0, "seed": 0, "position": 4,
           "num_samples": 18, "digest": old_digest}
    with pytest.raises(RadHarmonyError, match="belongs to another draw"):
        MixtureSampler(ds).load_state_dict(old)
    s = MixtureSampler(ds)
    s.load_state_dict({**old, "digest": s.digest})  # the state of this stream: taken
    assert s.position == 4


def test_an_older_columns_folder_is_refused_by_rate_until_written_again(mix, tmp_path):
    out = tmp_path / "mix"
    shutil.copytree(mix.out, out)
    index_path = out / "columns" / "columns.json"
    index = json.loads(index_path.read_text())
    index.pop("groups", None)  # as the columns were written before the groups
    index_path.write_text(json.dumps(index))
    (out / "columns" / "rows_by_group.npy").unlink(missing_ok=True)
    ds = MixtureDataset(out, split=None)
    assert sorted(MixtureSampler(ds, seed=3)) == list(range(18))  # without rates: as before
    with pytest.raises(RadHarmonyError, match="have no rows by group") as err:
        MixtureSampler(ds, rates=RATES)
    assert "write_columns(OUT)" in str(err.value)
    write_columns(out)
    again = MixtureSampler(MixtureDataset(out, split=None), rates=RATES, num_samples=50)
    assert again.stream().tolist() == MixtureSampler(
        MixtureDataset(mix.out, split=None), rates=RATES, num_samples=50).stream().tolist()


def test_a_rank_holds_no_array_of_one_value_per_record(tmp_path):
    """20 M records in three groups (their rows a mapped file, never written: no page of it
    is read but the drawn rows'): the sampler by rate allocates a few kilobytes, holds
    arrays of one value per group, and draws its first batch from the groups."""
    n = 20_000_000
    rows = np.lib.format.open_memmap(tmp_path / "rows.npy", mode="w+", dtype=np.int64,
                                     shape=(n,))
    rows[[0, 5_000_000, n - 1]] = [7, 8, 9]
    rows.flush()
    mapped = np.load(tmp_path / "rows.npy", mmap_mode="r")

    class Large:
        def __len__(self):
            return n

        def grouped(self):
            return GroupRows(mapped, [("a", "x", 0, 5_000_000), ("a", "y", 5_000_000, 10_000_000),
                                      ("b", "x", 10_000_000, n)])

    tracemalloc.start()
    s = MixtureSampler(Large(), rates={"a/y": 0, "a": 1, "b": 1}, batch_size=64,
                       num_replicas=8, rank=3)
    first = next(iter(s))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 200_000, peak
    held = [v for v in [*vars(s).values(), *vars(s.groups).values()]
            if isinstance(v, np.ndarray) and not isinstance(v, np.memmap)]
    assert held and all(v.size <= 3 for v in held)
    assert s.shares.tolist() == [0.5, 0.0, 0.5] and len(first) == 64


@pytest.mark.parametrize("chunk", [7, 1000])
def test_the_groups_written_a_chunk_at_a_time_equal_a_stable_sort(tmp_path, monkeypatch, chunk):
    """Codes with nulls (-1) over chunks of 7 records (their groups found by sorting: more
    key values than a chunk's records) and of 1000 (counted): every record once, each group
    a run of the rows in file order, the groups in code order, a null first."""
    from radharmony.mixture import column_groups

    monkeypatch.setattr(column_groups, "_CHUNK", chunk)
    rng = np.random.default_rng(3)
    codes = {"split": rng.integers(-1, 2, 100), "source": rng.integers(-1, 3, 100),
             "task": rng.integers(-1, 4, 100)}
    for name, c in codes.items():
        np.save(tmp_path / f"{name}.codes.npy", c.astype(np.int16))
    values = {"split": ["train", "valid"], "source": ["a", "b", "c"],
              "task": ["w", "x", "y", "z"]}
    got = column_groups.write_groups(tmp_path, values)
    rows = np.load(tmp_path / "rows_by_group.npy").tolist()
    key = [(codes["split"][r], codes["source"][r], codes["task"][r]) for r in range(100)]
    assert rows == sorted(range(100), key=lambda r: key[r])  # Python's sort is stable
    found = sorted(set(key))
    name = {n: [None, *v] for n, v in values.items()}
    assert [g[:3] for g in got["segments"]] == [
        [name["split"][s + 1], name["source"][o + 1], name["task"][t + 1]] for s, o, t in found]
    assert [g[4] - g[3] for g in got["segments"]] == [key.count(k) for k in found]
    assert got["segments"][-1][4] == 100 and got["file"] == "rows_by_group.npy"
