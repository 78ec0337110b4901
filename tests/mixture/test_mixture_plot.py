"""The composition plot of a mixture (``plot_composition``) and the target lengths it shows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from radharmony.errors import RadHarmonyError
from radharmony.mixture.plots import plot_composition, target_lengths, token_counts

import view_fixtures as vf


@pytest.fixture(scope="module")
def mixture(tmp_path_factory):
    sources = vf.make_sources(tmp_path_factory.mktemp("sources"))
    return vf.write_mixture(tmp_path_factory.mktemp("mix") / "out", sources,
                            vf.make_records(sources), row_group_size=3)


def test_token_counts_are_whitespace_tokens():
    texts = ["a b", "  lead  trail ", "", None, "one", "tab\tsep\nnl", "naïve café au lait",
             "x"]
    assert token_counts(pa.array(texts)).tolist() == [2, 2, 0, 0, 1, 3, 4, 1]
    assert token_counts(pa.array(texts, pa.large_string())).tolist() == [2, 2, 0, 0, 1, 3, 4, 1]
    assert token_counts(pa.array(texts).slice(4, 3)).tolist() == [1, 3, 4]  # an offset slice
    assert token_counts(pa.array(["", None], pa.string())).tolist() == [0, 0]
    assert token_counts(pa.array([" ab", "cd "])).tolist() == [1, 1]  # no token across rows


def test_target_lengths_per_task(mixture):
    lengths = target_lengths(mixture)
    # "FINDINGS: clear ... clear." with 5, 15, 25, 35 words of "clear"
    assert lengths["report_generation"].tolist() == [6, 16, 26, 36]
    assert lengths["finding_labels"].tolist() == [2, 2, 2]
    assert lengths["vqa_open"].tolist() == [1, 1, 1]
    assert lengths["phrase_grounding"].tolist() == [7]  # the box in the pixels dialect's JSON
    assert lengths["progression"].tolist() == [1, 1]


def _panel(fig, name):
    return next(ax for ax in fig.axes if ax.get_label() == f"composition:{name}")


def test_composition_figure(mixture, tmp_path):
    fig = plot_composition(mixture, tmp_path / "mix.png")
    assert (tmp_path / "mix.png").read_bytes().startswith(b"\x89PNG")
    grid = _panel(fig, "grid")
    # tasks by records, most first (ties by name); sources by name
    tasks = [t.get_text() for t in _panel(fig, "lengths").get_xticklabels()]
    assert tasks == ["report_generation", "finding_labels", "vqa_open", "progression",
                     "phrase_grounding"]
    assert [t.get_text() for t in grid.get_yticklabels()] == ["nih", "rexgradient"]
    cells = grid.images[0].get_array()
    assert cells.filled(0).tolist() == [[4, 3, 0, 0, 1], [0, 0, 3, 2, 0]]
    assert sorted(t.get_text() for t in grid.texts) == ["1", "2", "3", "3", "4"]
    # split: report_generation has 3 train and 1 valid record
    bars = _panel(fig, "tasks").patches
    assert [b.get_height() for b in bars[:5]] == [3, 3, 3, 2, 1]  # train
    assert [b.get_height() for b in bars[5:]] == [1, 0, 0, 0, 0]  # valid
    # excluded per source, stacked by reason: nih 1 empty target + 3 no box; rex 2 held out
    widths = [round(b.get_width()) for b in _panel(fig, "excluded").patches]
    assert widths == [1, 0, 0, 2, 3, 0]  # reasons sorted: empty target, held out, no box
    # the 99th percentile of report_generation's lengths [6, 16, 26, 36] is 35.7, in red
    p99 = [t for t in _panel(fig, "lengths").texts]
    assert p99[0].get_text() == "36" and p99[0].xy == pytest.approx((0, 35.7))
    note = _panel(fig, "note").texts[0].get_text()
    assert "13 records (train 12, valid 1) from 2 sources, 5 tasks" in note
    assert "excluded: empty target 1, held out patient 2, no box 3" in note


def test_the_manifest_s_length_histograms_serve_without_reading_records(mixture, tmp_path):
    """A build tallies target lengths into mixture.json: the plot then reads no record (the
    same 99th percentile as from the records themselves)."""
    import json
    import shutil

    from radharmony.mixture.lengths import lengths_histogram

    out = tmp_path / "out"
    shutil.copytree(mixture, out)
    manifest = json.loads((out / "mixture.json").read_text())
    manifest["target_lengths"] = {t: lengths_histogram(v)
                                  for t, v in target_lengths(mixture).items()}
    (out / "mixture.json").write_text(json.dumps(manifest))
    (out / "records.parquet").unlink()
    p99 = _panel(plot_composition(out), "lengths").texts
    assert p99[0].get_text() == "36" and p99[0].xy == pytest.approx((0, 35.7))


def test_a_folder_without_a_mixture_is_refused(tmp_path):
    with pytest.raises(RadHarmonyError, match="Cannot read the mixture manifest"):
        plot_composition(tmp_path)
    (tmp_path / "mixture.json").write_text('{"format": "radharmony-mixture"}')
    with pytest.raises(RadHarmonyError, match="Cannot read the mixture's records"):
        target_lengths(tmp_path)
