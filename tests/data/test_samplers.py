"""BalancedSampler: weights, groups, labels, epochs and ranks (one process; see
test_distributed.py for real ranks)."""

import numpy as np
import pandas as pd
import pytest
import torch

from radharmony.errors import RadHarmonyError
from radharmony.data.samplers import BalancedSampler, group_weights, rarest_label_weights


def test_group_weights_are_inverse_frequencies():
    w = group_weights(["nih", "nih", "nih", "vindr", None, np.nan])
    assert w.tolist() == [1 / 3, 1 / 3, 1 / 3, 1.0, 0.5, 0.5]  # None and NaN: one group
    assert group_weights(["a"] * 4 + ["b"], power=0.5).tolist() == [0.5] * 4 + [1.0]


def test_rarest_label_weights_pin_the_rule():
    y = np.array([[1, 0, 0],        # only the common label (4 positives)
                  [1, 0, 0],
                  [1, 1, 0],        # carries the rare label (1 positive) too
                  [0, 0, 0],        # no finding (2 such rows)
                  [0, 0, np.nan],   # unknown is not positive
                  [1, 0, 1]])       # label 2 has 1 known positive
    assert rarest_label_weights(y).tolist() == [0.25, 0.25, 1.0, 0.5, 0.5, 1.0]
    mask = np.ones_like(y, dtype=bool)
    mask[2, 1] = False  # that positive is not known: row 2 falls back to label 0
    assert rarest_label_weights(y, mask).tolist() == [0.25, 0.25, 0.25, 0.5, 0.5, 1.0]


def test_sources_come_out_balanced():
    df = pd.DataFrame({"source": ["nih"] * 90 + ["vindr"] * 9 + ["rsna"]})
    sampler = BalancedSampler.by_column(df, "source", num_samples=6000, seed=1)
    counts = df["source"].iloc[list(sampler)].value_counts()
    assert all(1800 < counts[s] < 2200 for s in ("nih", "vindr", "rsna"))
    assert len(sampler) == 6000


def test_floats_are_weights_and_anything_else_is_groups():
    assert BalancedSampler([0.0, 1.0, 0.0]).weights.tolist() == [0.0, 1.0, 0.0]
    assert set(BalancedSampler(np.array([0.0, 1.0, 0.0]))) == {1}
    assert BalancedSampler([0, 1, 1]).weights.tolist() == [1.0, 0.5, 0.5]  # integer groups
    assert BalancedSampler(pd.Series(["a", "b", "b"])).weights.tolist() == [1.0, 0.5, 0.5]
    assert BalancedSampler(torch.tensor([2.0, 2.0])).weights.tolist() == [2.0, 2.0]


def test_epochs_are_deterministic_and_differ():
    a, b = BalancedSampler(np.ones(50), seed=4), BalancedSampler(np.ones(50), seed=4)
    torch.manual_seed(0)
    first = list(a)
    torch.manual_seed(1)  # the global RNG plays no part
    assert list(b) == first
    a.set_epoch(1)
    assert list(a) != first
    b.set_epoch(1)
    assert list(a) == list(b)
    assert list(BalancedSampler(np.ones(50), seed=5)) != first


def test_ranks_deal_one_draw():
    w = np.linspace(0.1, 1, 23)
    ranks = [BalancedSampler(w, num_replicas=3, rank=r, seed=2) for r in range(3)]
    assert [len(s) for s in ranks] == [8, 8, 8]  # ceil(23 / 3), the draw extended to 24
    draw = ranks[0].draw().tolist()
    assert [list(s) for s in ranks] == [draw[r::3] for r in range(3)]
    distinct = [BalancedSampler(w, replacement=False, num_replicas=3, rank=r) for r in range(3)]
    shards = [list(s) for s in distinct]
    flat = sum(shards, [])
    assert [len(s) for s in shards] == [7, 7, 7] and len(set(flat)) == 21  # tail left out


def test_without_replacement_favours_heavy_weights_and_skips_zeros():
    w = np.r_[np.full(10, 100.0), np.ones(10), np.zeros(5)]
    order = list(BalancedSampler(w, replacement=False, seed=0))
    assert len(order) == 20 and set(order) == set(range(20))
    assert np.mean([i < 10 for i in order[:10]]) >= 0.8


@pytest.mark.parametrize("kwargs, match", [
    (dict(weights_or_groups=[1.0, -1.0]), "weights are invalid"),
    (dict(weights_or_groups=[0.0, 0.0]), "weights are invalid"),
    (dict(weights_or_groups=[1.0, float("nan")]), "weights are invalid"),
    (dict(weights_or_groups=[]), "one weight or group per sample"),
    (dict(weights_or_groups=[1.0, 0.0], replacement=False, num_samples=2), "distinct"),
    (dict(weights_or_groups=[1.0], num_samples=0), "num_samples must be a positive integer"),
    (dict(weights_or_groups=[1.0, 1.0], num_replicas=2, rank=2), "rank is out of range"),
    (dict(weights_or_groups=[1.0, 1.0], num_replicas=0), "num_replicas must be"),
    (dict(weights_or_groups=[1.0, 1.0], replacement=False, num_replicas=3),
     "nothing to give each rank"),
])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(RadHarmonyError, match=match):
        BalancedSampler(kwargs.pop("weights_or_groups"), **kwargs)


def test_constructor_errors():
    with pytest.raises(RadHarmonyError, match="no column 'source'.*columns \\['view'\\]"):
        BalancedSampler.by_column(pd.DataFrame({"view": ["PA"]}), "source")
    with pytest.raises(RadHarmonyError, match=r"label matrix.*shape \(3,\)"):
        BalancedSampler.by_labels([1, 0, 1])
    with pytest.raises(RadHarmonyError, match="differ in shape"):
        BalancedSampler.by_labels([[1, 0]], [[True]])
