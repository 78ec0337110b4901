"""masked_bce: only known cells count; shapes and options are checked."""

import math

import pytest
import torch

from radharmony.losses import LossInputError, masked_bce


def test_masked_cells_do_not_count_even_when_nan():
    logits = torch.tensor([[0.0, 2.0, -1.0]])
    targets = torch.tensor([[1.0, float("nan"), 0.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0]])
    expected = (math.log(2) + math.log(1 + math.exp(-1))) / 2  # softplus(0), softplus(-1)
    assert masked_bce(logits, targets, mask).item() == pytest.approx(expected, rel=1e-6)
    assert masked_bce(logits, targets, mask, reduction="sum").item() == \
        pytest.approx(2 * expected, rel=1e-6)
    cells = masked_bce(logits, targets, mask, reduction="none")
    assert cells[0, 1].item() == 0.0 and torch.isfinite(cells).all()


def test_gradient_is_zero_on_masked_cells_and_nothing_known_gives_zero():
    logits = torch.zeros(2, 2, requires_grad=True)
    targets = torch.tensor([[1.0, float("nan")], [0.0, 1.0]])
    mask = torch.tensor([[True, False], [False, False]])
    masked_bce(logits, targets, mask).backward()
    assert logits.grad[0, 1] == 0 and logits.grad[1].abs().sum() == 0 and logits.grad[0, 0] < 0
    assert masked_bce(logits, targets, torch.zeros(2, 2)).item() == 0.0


def test_pos_weight_weighs_positives():
    logits, targets, mask = torch.zeros(1, 2), torch.tensor([[1.0, 0.0]]), torch.ones(1, 2)
    w = masked_bce(logits, targets, mask, pos_weight=torch.tensor([3.0, 3.0]), reduction="none")
    assert w[0, 0].item() == pytest.approx(3 * math.log(2)) and \
        w[0, 1].item() == pytest.approx(math.log(2))


def test_bad_inputs_raise():
    with pytest.raises(LossInputError, match="differ in shape"):
        masked_bce(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 2))
    with pytest.raises(LossInputError, match="unknown reduction"):
        masked_bce(torch.zeros(1), torch.zeros(1), torch.ones(1), reduction="avg")
