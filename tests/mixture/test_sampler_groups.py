"""The records' groups (``columns/rows_by_group.npy``) as the build and ``write_columns``
write them."""

from __future__ import annotations

import numpy as np
import pytest

from mixture_fixtures import write_mixture
from radharmony.mixture.columns import MixtureColumns


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
    assert isinstance(rows, np.memmap) and rows.dtype == np.int64
    assert rows.tolist() == [0, 3, 5, 7, 1, 9, 10, 13, 14, 2, 4, 6, 8, 11, 12, 15, 16, 17]
    for split, source, task, a, b in segments:  # each row is of its group
        assert {(mix.records[r]["split"], mix.records[r]["source"], mix.records[r]["task"])
                for r in rows[a:b].tolist()} == {(split, source, task)}
