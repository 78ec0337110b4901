"""A mixture at a glance (``radharmony mix info OUT --plot FILE.png``): records per source and
task with the split shown, the excluded records by reason beside them, and the length of the
targets per task with the 99th percentile marked.

Counts come from ``mixture.json``, and so do the target lengths of a mixture the build tallied
(``target_lengths``: a histogram per task, :mod:`radharmony.mixture.lengths`); for an older
manifest without them, from ``records.parquet``'s ``task`` and ``target`` columns, streamed row
group by row group (in threads), never loaded whole. A target's length is its number of
whitespace-separated tokens (``len(target.split())`` where the whitespace is ASCII; a missing
target counts 0).
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import RadHarmonyError
from .lengths import lengths_histogram, percentiles, token_counts
from .records import MIXTURE_SPLITS, RECORDS_NAME, read_manifest

SPLIT_COLOURS = {"train": "#4c72b0", "valid": "#dd8452"}


def target_lengths(out, *, workers: int | None = None) -> dict[str, np.ndarray]:
    """task -> the whitespace-token length of each of its targets, reading only the ``task``
    and ``target`` columns of ``out/records.parquet``, one row group at a time."""
    import pyarrow.parquet as pq

    path = Path(out) / RECORDS_NAME
    try:
        groups = pq.ParquetFile(path).metadata.num_row_groups
    except (OSError, ValueError) as exc:
        raise RadHarmonyError(f"Cannot read the mixture's records {path}",
                              expected="the records.parquet `radharmony mix build` wrote",
                              found=f"{type(exc).__name__}: {exc}",
                              fix="rebuild the mixture, or check the folder") from None
    local = threading.local()

    def one(g: int) -> dict[str, np.ndarray]:
        if not hasattr(local, "file"):
            local.file = pq.ParquetFile(path)
        table = local.file.read_row_group(g, columns=["task", "target"])
        lengths = token_counts(table.column("target").combine_chunks())
        tasks = table.column("task").combine_chunks().dictionary_encode()
        codes = tasks.indices.to_numpy(zero_copy_only=False)
        return {str(t): lengths[codes == i] for i, t in enumerate(tasks.dictionary.to_pylist())}

    with ThreadPoolExecutor(max_workers=workers or min(8, os.cpu_count() or 1)) as pool:
        parts = list(pool.map(one, range(groups)))
    names = sorted({t for p in parts for t in p})
    return {t: np.concatenate([p[t] for p in parts if t in p]) for t in names}


def _compact(n: float) -> str:
    """``1234567`` -> ``"1.23M"``; ``12`` -> ``"12"``."""
    for unit, div in (("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.3g}{unit}"
    return f"{n:.3g}"


def _table(rows: list[dict], row_key: str, col_key: str, rows_order, cols_order) -> np.ndarray:
    grid = np.zeros((len(rows_order), len(cols_order)))
    ri = {r: i for i, r in enumerate(rows_order)}
    ci = {c: i for i, c in enumerate(cols_order)}
    for r in rows:
        if r.get(row_key) in ri and r.get(col_key) in ci:
            grid[ri[r[row_key]], ci[r[col_key]]] += int(r["records"])
    return grid


def plot_composition(out, path=None, *, lengths: dict | None = None):
    """The composition of the mixture folder ``out`` as a matplotlib Figure (saved to ``path``
    when given): a source x task grid of record counts (colour: log scale; the number in each
    cell), the records per task and per source split by ``split`` (train / valid), the
    excluded records per source by reason, and a box plot of target lengths per task
    (whitespace tokens; box: quartiles, whiskers: 1st-99th percentile, red tick and number:
    the 99th percentile). ``lengths``: precomputed :func:`target_lengths` (task -> lengths);
    None: the manifest's ``target_lengths`` histograms, else :func:`target_lengths`."""
    try:
        import matplotlib

        if path is not None and "matplotlib.pyplot" not in sys.modules:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm
        from matplotlib.ticker import FuncFormatter, NullFormatter
    except ImportError:
        raise RadHarmonyError("plot_composition needs matplotlib", expected="matplotlib "
                              "installed", found="it is not", fix="pip install matplotlib") \
            from None
    manifest = read_manifest(out)
    counts, excluded = manifest.get("counts") or [], manifest.get("excluded") or []
    if lengths is not None:
        hists = {t: lengths_histogram(v) for t, v in lengths.items()}
    elif manifest.get("target_lengths") is not None:
        hists = manifest["target_lengths"]
    else:
        hists = {t: lengths_histogram(v) for t, v in target_lengths(out).items()}
    totals = {}
    for r in counts:
        totals[r["task"]] = totals.get(r["task"], 0) + int(r["records"])
    tasks = sorted(set(totals) | set(hists), key=lambda t: (-totals.get(t, 0), t))
    sources = sorted({r["source"] for r in counts} | {r["source"] for r in excluded})
    splits = list(MIXTURE_SPLITS) + sorted({r["split"] for r in counts} - set(MIXTURE_SPLITS))
    reasons = sorted({r["reason"] for r in excluded})

    nt, ns = max(len(tasks), 1), max(len(sources), 1)
    label_in = 0.075 * max([len(t) for t in tasks + sources] + [8])  # rotated/side labels
    width, height = 1.6 + label_in + 0.34 * nt + 7.6, 1.0 + label_in + 0.3 * ns + 6.5
    fig = plt.figure(figsize=(width, height))  # fixed margins: no layout engine pass
    gs = fig.add_gridspec(3, 3, width_ratios=[0.34 * nt + 0.4, 3.5, 3.5],
                          height_ratios=[2, 0.3 * ns + 0.4, 4],
                          left=(0.7 + label_in) / width, right=1 - 0.25 / width,
                          bottom=(0.5 + label_in) / height, top=1 - 0.35 / height,
                          wspace=0.08, hspace=1.2 / (0.3 * ns + 6.4))
    ax_task = fig.add_subplot(gs[0, 0])
    ax_grid = fig.add_subplot(gs[1, 0], sharex=ax_task)
    ax_len = fig.add_subplot(gs[2, 0], sharex=ax_task)
    ax_src = fig.add_subplot(gs[1, 1], sharey=ax_grid)
    ax_exc = fig.add_subplot(gs[1, 2], sharey=ax_grid)
    ax_note = fig.add_subplot(gs[0, 1:])
    ax_note.axis("off")
    for ax, name in ((ax_task, "tasks"), (ax_grid, "grid"), (ax_len, "lengths"),
                     (ax_src, "sources"), (ax_exc, "excluded"), (ax_note, "note")):
        ax.set_label(f"composition:{name}")  # how a caller (or a test) finds each panel

    grid = _table(counts, "source", "task", sources, tasks)
    shown = np.ma.masked_equal(grid, 0)
    image = ax_grid.imshow(shown, aspect="auto", cmap="viridis", interpolation="nearest",
                           norm=LogNorm(vmin=max(shown.min(), 1), vmax=max(shown.max(), 2))
                           if shown.count() else None)
    bright = np.asarray(image.norm(np.maximum(grid, 1))) > 0.6 if shown.count() else grid > 0
    for i, j in zip(*np.nonzero(grid)):
        ax_grid.text(j, i, _compact(grid[i, j]), ha="center", va="center", fontsize=6,
                     color="black" if bright[i, j] else "white")
    ax_grid.set_yticks(range(len(sources)), sources, fontsize=8)
    ax_grid.set_ylabel("source")
    ax_grid.tick_params(axis="x", labelbottom=False)
    bar = fig.colorbar(image, cax=ax_note.inset_axes([0.0, 0.42, 0.5, 0.09]),
                       orientation="horizontal")
    bar.ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _compact(v)))
    bar.ax.xaxis.set_minor_formatter(NullFormatter())
    bar.set_label("records per source and task (the grid's colour, log scale)", fontsize=8)

    x, y = np.arange(len(tasks)), np.arange(len(sources))
    by_task = _table(counts, "split", "task", splits, tasks)
    by_source = _table(counts, "split", "source", splits, sources)
    bottom_t, left_s = np.zeros(len(tasks)), np.zeros(len(sources))
    for k, split in enumerate(splits):
        colour = SPLIT_COLOURS.get(split)
        ax_task.bar(x, by_task[k], bottom=bottom_t, color=colour, label=split, width=0.8,
                    log=True)
        ax_src.barh(y, by_source[k], left=left_s, color=colour, label=split, height=0.8)
        bottom_t += by_task[k]
        left_s += by_source[k]
    ax_task.set_title("records per task (by split; log scale)", fontsize=10, loc="left")
    ax_task.tick_params(axis="x", labelbottom=False)
    ax_task.set_ylim(bottom=0.5)  # a task of one record still shows
    ax_task.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _compact(v)))
    ax_task.yaxis.set_minor_formatter(NullFormatter())
    ax_task.legend(fontsize=8, loc="upper right")
    ax_src.set_title("records per source (by split)", fontsize=10)
    ax_src.tick_params(axis="y", labelleft=False)

    for ax in (ax_task, ax_src):
        ax.grid(axis="y" if ax is ax_task else "x", alpha=0.3)
    ax_src.tick_params(axis="x", labelsize=8)

    exc = _table(excluded, "source", "reason", sources, reasons)
    left_e = np.zeros(len(sources))
    cmap = plt.get_cmap("tab10")
    for k, reason in enumerate(reasons):
        ax_exc.barh(y, exc[:, k], left=left_e, color=cmap(k % 10), label=reason, height=0.8)
        left_e += exc[:, k]
    ax_exc.set_title("excluded per source (by reason)", fontsize=10)
    ax_exc.tick_params(axis="y", labelleft=False)
    if reasons:
        ax_note.legend(*ax_exc.get_legend_handles_labels(), loc="lower right", fontsize=8,
                       title="excluded, by reason", title_fontsize=8, ncols=2)
    ax_exc.grid(axis="x", alpha=0.3)

    _length_boxes(ax_len, tasks, hists)
    ax_len.set_xticks(x, tasks, rotation=60, ha="right", fontsize=8)
    ax_len.set_xlim(-0.5, len(tasks) - 0.5)

    total = sum(int(r["records"]) for r in counts)
    split_text = ", ".join(f"{s} {_compact(by_task[k].sum())}" for k, s in enumerate(splits)
                           if by_task[k].sum())
    reason_text = ", ".join(f"{r} {_compact(exc[:, k].sum())}" for k, r in enumerate(reasons))
    ax_note.text(0, 1, f"{manifest.get('name') or Path(out).name}\n{_compact(total)} records "
                 f"({split_text}) from {len(sources)} sources, {len(tasks)} tasks\n"
                 f"excluded: {reason_text or 'none'}", va="top", fontsize=11)
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def _length_boxes(ax, tasks: list[str], hists: dict) -> None:
    """Target lengths per task from their histograms' percentiles (a box plot of millions of
    values without handing them to matplotlib); the 99th percentile in red."""
    stats, where = [], []
    for i, t in enumerate(tasks):
        h = hists.get(t)
        if not h:
            continue
        p1, q1, med, q3, p99 = percentiles(h, [1, 25, 50, 75, 99])
        stats.append({"whislo": p1, "q1": q1, "med": med, "q3": q3, "whishi": p99,
                      "fliers": [], "label": t})
        where.append(i)
        ax.plot([i - 0.35, i + 0.35], [p99, p99], color="red", lw=1.6)
        ax.annotate(f"{p99:.0f}", (i, p99), textcoords="offset points", xytext=(0, 3),
                    ha="center", fontsize=6, color="red")
    if stats:
        ax.bxp(stats, positions=where, widths=0.6, showfliers=False,
               medianprops={"color": "black"})
    ax.set_ylabel("target length (whitespace tokens)")
    ax.set_title("target length per task (box: quartiles, whiskers: 1st-99th percentile, "
                 "red: 99th percentile)", fontsize=10, loc="left")
    ax.grid(axis="y", alpha=0.3)
