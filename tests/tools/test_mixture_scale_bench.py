"""The scale benchmark's pieces on a tiny mixture: its spec (twelve sources, every rule a
repeat), the open (timed, its private memory), and one rank reading batches with a worker."""

from pathlib import Path

import pytest

from benchmarks.mixture_scale import bench_rates, open_run, private_kib, rank_run, scale_spec


def test_the_spec_draws_every_source_twice_every_rule_repeated(tmp_path):
    roots = {k: str(tmp_path / k) for k in ("rexgradient", "mimic", "chexpert", "padchest",
                                            "vindr")}
    spec = scale_spec(roots, tmp_path / "cache", 2.5)
    names = [s["name"] for s in spec["sources"]]
    assert len(names) == len(set(names)) == 12
    assert names[0] == "rexgradient_train_a" and names[6] == "rexgradient_train_b"
    assert {r for s in spec["sources"] for r in s["tasks"].values()} == {"x2.5"}
    assert {r for s in scale_spec(roots, tmp_path, 1)["sources"]
            for r in s["tasks"].values()} == {"all"}


@pytest.fixture(scope="module")
def mix(tmp_path_factory):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "mixture"))
    from mixture_fixtures import write_mixture

    return write_mixture(tmp_path_factory.mktemp("mix"), images="cache", size=32)


def test_the_open_and_a_rank_read_the_columns(mix):
    assert private_kib() > 0
    r = open_run(mix.out)
    assert r["records"] == 9 and r["batch"] == 9  # the train split: one batch
    assert 0 < r["open_s"] < 60 and r["open_private_gb"] > 0
    one = rank_run(mix.out, 1, 2, 1, 1)  # rank 1 of 2, one worker, its one batch
    assert one["rank"] == 1 and one["processes"] >= 2  # this process and its worker
    assert all(kib > 0 for kib in one["private_kib"].values())


def test_by_rate_the_open_and_a_rank_draw_from_the_groups(mix):
    rates = bench_rates(mix.out, True)
    assert rates == {"rexgradient_train": 1.0, "mimic_cxr_jpg": 2.0,  # ReXVQA: no train
                     "rexgradient_train/findings": 2.0}
    assert bench_rates(mix.out, False) is None
    r = open_run(mix.out, rates=True)
    assert r["batch"] == 9 and r["first_batch_s"] < 60  # 9 draws (the records), by rate
    one = rank_run(mix.out, 0, 2, 0, 1, rates=1)
    assert one["processes"] >= 1
