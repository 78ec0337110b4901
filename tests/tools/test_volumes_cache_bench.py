"""The volume cache benchmark runs end to end at a small scale, and its peer follows nnU-Net's
chunk rule."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("blosc2")
pytest.importorskip("monai")
pytest.importorskip("nibabel")
pytest.importorskip("torchio")

from benchmarks.volumes_cache import TARGETS, nnunet_blocks_chunks, run  # noqa: E402


def test_nnunet_rule_for_a_128_patch_of_int16():
    blocks, chunks = nnunet_blocks_chunks((300, 512, 512), (128, 128, 128), 2)
    assert blocks == (32, 16, 16)  # halved from 128^3, the last axis first on ties
    assert np.prod(blocks) * 2 <= 0.8 * 32768
    assert all(c % b == 0 for c, b in zip(chunks, blocks))
    assert np.prod(chunks) * 2 <= 0.8 * 1441792 + np.prod(blocks) * 2 * max(chunks)
    assert nnunet_blocks_chunks((40, 60, 60), (128, 128, 128), 2)[1][1:] == (60, 60)


def test_the_benchmark_runs_at_a_small_scale(tmp_path):
    res = run(volumes=2, side=64, depths=(12, 20), patch_count=2, epochs=1, work=tmp_path)
    assert set(res["ratios"]) == set(TARGETS) == set(res["met"])
    assert all(v > 0 for v in res["ratios"].values())
    assert res["ours_deferred_epoch_s"] > 0 and res["merlin_deferred_vs_monai"] > 0
    assert res["bytes_merlin"] < res["bytes_monai"]  # int16, compressed vs float32 .pt
    assert res["decoded_volume"] == 20 * 64 * 64 * 2
