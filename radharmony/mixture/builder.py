"""``radharmony.mixture.build(spec, out)``: a spec -> ``OUT/records.parquet`` + ``OUT/mixture.json``.

The data flows one way: the hold-out sets are read (patients, image fingerprints); then, for
each source (so memory holds one source's table per process, never the whole mixture): the
dataset is built with the spec's arguments (its table harmonized, or read from the table
cache), its rows of the drawn split kept, every task's eligible items drafted, each task's rule
drawn with a seed of (spec seed, source, task), ``max_records`` applied, units of hold-out
patients and images dropped (counted), and the records written in fixed row groups. The
sources are built side by side in the processes of a fork server (never a ``fork`` of this
process: :mod:`radharmony.mixture.spool`) or one after another in this one; either way the
file is the same bytes for the same spec on the same files, whatever ``workers``.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import catalog
from ..errors import RadHarmonyError
from ..files import atomic_write
from ..gc_pause import paused_gc, release_memory
from ..version import __version__
from .columns import column_sources
from .context import HELD_REASONS, SourceContext
from .grounding import choose_readers
from .holdout import (HoldOut, dataset_key, input_identity, missing_side_files, open_dataset,
                      read_hold_out, split_rows)
from .records import MANIFEST_FORMAT, MANIFEST_NAME, RECORDS_NAME
from .rules import derive_seed
from .spec import load_spec
from .spool import INHERITED, Spool, process_count, remove_spools, replay, start_server
from .tasks import TASKS
from .writer import ROW_GROUP, RecordWriter, assemble, repeat_index

#: draft items rendered at a time (the records do not depend on it; a chunk's lists and
#: strings are what a source process holds beside its table: 16,384 keeps them to ~0.1 GB)
CHUNK = 16_384


def build(spec, out: str | os.PathLike, *, workers: int | None = None,
          progress: bool = True) -> dict:
    """Build the mixture ``spec`` (a YAML / JSON path, a dict, or a
    :class:`~radharmony.mixture.spec.MixtureSpec`) into the folder ``out``.

    Writes ``out/records.parquet`` (one row per record,
    :data:`~radharmony.mixture.records.RECORD_SCHEMA`), the same records as memory-mapped
    columns in ``out/columns/`` (:mod:`radharmony.mixture.columns`: what training reads)
    and ``out/mixture.json`` (the resolved spec, radharmony's version, each input file's
    identity, the counts per source x task x split, every exclusion by reason, the hold-out summary) and returns the manifest.

    ``workers``: the processes building sources side by side (default: the usable cores, at
    most :data:`~radharmony.mixture.spool.DEFAULT_PROCESSES`; 1 builds them in this process,
    as off Linux), and the threads reading image files for the hold-out check; the records
    do not depend on it. ``progress``: show progress bars.
    """
    spec = load_spec(spec)
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RadHarmonyError(f"Cannot create the mixture folder {out}",
                              expected="a writable folder", found=f"{type(exc).__name__}: "
                              f"{exc}", fix="choose another OUT") from None
    processes = process_count(workers, len(spec.sources))
    # the fork server's processes start (and import) while the hold-out is read
    jobs = start_server(processes) if processes > 1 else None
    pool: dict = {}  # datasets read for the hold-out that a source reads too
    try:
        hold, hold_inputs = read_hold_out(spec.hold_out, workers=workers, progress=progress,
                                          keep={dataset_key(s) for s in spec.sources},
                                          pool=pool)
    except BaseException:
        if jobs is not None:
            jobs.stop(kill=True)
        raise
    tallies = Tallies()
    children = _start(spec, hold, pool, out, workers, jobs) if jobs is not None else None
    release_memory()  # the hold-out's datasets: read, pickled for the processes, dropped
    writer = RecordWriter(out / RECORDS_NAME, row_group=ROW_GROUP, columns=out)
    try:
        if children is None:
            sources = [_source(spec, s, hold, writer, tallies, workers, progress,
                               _hand(pool.pop(dataset_key(s), None))) for s in spec.sources]
        else:
            sources = _gather(children, writer, tallies, progress)
        writer.close(column_sources({"sources": sources}))
    except BaseException:
        writer.abort()
        if children is not None:
            _stop(children, out, kill=True)
        raise
    if children is not None:
        _stop(children, out, kill=False)
    counts, excluded, counted = tallies.counts, tallies.excluded, tallies.counted
    manifest = {
        "format": MANIFEST_FORMAT, "radharmony_version": __version__, "name": spec.name,
        "seed": spec.seed, "spec": spec.to_dict(), "images": spec.images, "boxes": spec.boxes,
        "readers": choose_readers([], spec.readers)[1], "sources": sources,
        "hold_out": [{**h, "inputs": i} for h, i in zip(hold.sets, hold_inputs)],
        "counts": [{"source": s, "task": t, "split": sp, "records": n}
                   for (s, t, sp), n in counts.items()],
        "excluded": [{"source": s, "task": t, "reason": r, "records": n}
                     for (s, t, r), n in excluded.items() if n],
        "counted": [{"source": s, "task": t, "what": w, "records": n}
                    for (s, t, w), n in counted.items()],
        "records": writer.rows,
        "target_lengths": writer.lengths.histograms(),
        "row_group": ROW_GROUP,
    }
    text = json.dumps(manifest, indent=1, ensure_ascii=False, default=str) + "\n"
    atomic_write(out / MANIFEST_NAME, lambda fh: fh.write(text.encode("utf-8")))
    return manifest


@dataclass
class Tallies:
    """What a build counts, per (source, task, ...): records per split, exclusions by reason,
    and what a task counts without excluding (``without_prior``)."""

    counts: Counter = field(default_factory=Counter)
    excluded: Counter = field(default_factory=Counter)
    counted: Counter = field(default_factory=Counter)

    def merge(self, other: "Tallies") -> None:
        for mine, theirs in ((self.counts, other.counts), (self.excluded, other.excluded),
                             (self.counted, other.counted)):
            mine.update(theirs)


def _hand(opened) -> list:
    """``opened`` (a dataset the hold-out read, and its input identity) in a list the source
    empties as it takes it (:func:`_build_source`): no caller's frame, nor the arguments a
    source process was called with, keeps the dataset's table alive while records are drawn."""
    return [] if opened is None else [opened]


def _source(spec, s, hold: HoldOut, sink, tallies: Tallies, workers, progress: bool,
            handed: list | None = None) -> dict:
    """Build the source ``s``: its records go to ``sink.write``, its counts to ``tallies``;
    returns its entry of the manifest's ``sources``. ``handed``: :func:`_hand` of the dataset
    the hold-out opened for it, if any (taken out of the list). The garbage collector is paused
    throughout (:mod:`radharmony.gc_pause`: its units, drafts and records make millions of
    objects and no cycles)."""
    with paused_gc():
        return _build_source(spec, s, hold, sink, tallies, workers, progress, handed or [])


def _build_source(spec, s, hold, sink, tallies, workers, progress, handed: list) -> dict:
    counts, excluded, counted = tallies.counts, tallies.excluded, tallies.counted
    opened = handed.pop() if handed else None
    if opened is None:
        with warnings.catch_warnings(), _one_opening():
            warnings.simplefilter("ignore")
            ds = open_dataset(s.dataset, s.root, s.kwargs)
        opened = (ds, input_identity(ds))
    ds, identity = opened
    del opened
    table = split_rows(ds.harmonized_df, s.split)
    if not len(table):
        splits = sorted(set(ds.harmonized_df["split"].dropna())) \
            if "split" in ds.harmonized_df.columns else []
        raise RadHarmonyError(f"Mixture source {s.name!r}: {s.dataset} has no rows in split "
                              f"{s.split!r}", expected="a split with rows",
                              found=f"{len(ds.harmonized_df)} rows, splits {splits}",
                              fix="set the source's split: to one of those (or all)")
    _check_boxes(s, table, missing_side_files(ds))
    bad, images = hold.duplicates(s.root, table, workers=workers, progress=progress)
    ctx = SourceContext(name=s.name, key=s.dataset, spec=ds.spec, table=table,
                        kwargs=s.kwargs, seed=spec.seed, valid_share=spec.valid,
                        held_patients=hold.patients, bad_paths=bad)
    ctx.mixture = {"boxes": spec.boxes, "images": spec.images, "readers": spec.readers,
                   "root": ds.base_image_dir,  # what grounded tasks read (grounded_source)
                   "without_prior": spec.without_prior}
    info = {"name": s.name, "dataset": s.dataset, "root": s.root, "split": s.split,
            "kwargs": s.kwargs, "rows": int(len(table)), "inputs": identity,
            "silver_labels": ctx.silver, "hold_out_images": images}
    # the dataset (its whole table) and the split's rows go: the context holds its own rows
    # (the collector is paused: the dataset's cycles are collected here, once)
    del ds, table
    release_memory()
    drafts = {t: TASKS[t].build(ctx) for t in s.rules}
    picks = {t: s.rules[t].pick(len(d), seed=derive_seed(spec.seed, s.name, t))
             for t, d in drafts.items()}
    for t, d in drafts.items():
        for reason, n in d.skipped.items():
            excluded[(s.name, t, reason)] += n
        for what, n in getattr(d, "counted", {}).items():  # records kept, counted
            counted[(s.name, t, what)] += n
    if s.max_records is not None:
        picks = _cap(picks, s.max_records, derive_seed(spec.seed, s.name, "max_records"),
                     lambda t, n: excluded.__setitem__((s.name, t, "max_records"), n))
    from tqdm.auto import tqdm

    total = sum(len(p) for p in picks.values())
    with tqdm(total=total, desc=f"mixture: {s.name}", unit="rec", disable=not progress) as bar:
        for t, draft in drafts.items():
            task = TASKS[t]
            prompts = tuple(spec.prompts.get(t, task.prompts))
            units = ctx.units(draft.unit)
            p = picks[t]
            held = units.held[draft.pos[p]] if len(p) else np.zeros(0, np.int8)
            for code, reason in HELD_REASONS.items():
                excluded[(s.name, t, reason)] += int((held == code).sum())
            rep = repeat_index(p)
            keep = held == 0
            p, rep = p[keep], rep[keep]
            for start in range(0, len(p), CHUNK):
                chunk = assemble(ctx, task, draft, units, p[start:start + CHUNK],
                                 rep[start:start + CHUNK], prompts, source_split=s.split)
                sink.write(chunk)
                for split, n in zip(*np.unique(chunk.column("split").to_numpy(
                        zero_copy_only=False), return_counts=True)):
                    counts[(s.name, t, str(split))] += int(n)
                bar.update(len(chunk))
            bar.update(int((~keep).sum()))
    return info


def _check_boxes(s, table, missing: dict) -> None:
    """Raise when a task of source ``s`` needs boxes and its table has none (no boxes column,
    or one of nulls or empty lists only) because the dataset's optional box file was looked
    for and is absent (naming it and where)."""
    tasks = [t for t in s.rules if "boxes" in TASKS[t].needs]
    if not tasks or "boxes" not in missing or ("boxes" in table.columns and any(
            b is not None and len(b) for b in table["boxes"])):
        return  # a boxes column of nulls or empty lists only: the file absent all the same
    where = missing["boxes"]
    name = where[0].name if where else "its box file"
    raise RadHarmonyError(
        f"Mixture source {s.name!r}: {', '.join(tasks)} needs boxes, and {s.dataset}'s "
        f"optional box file {name} is absent", expected=f"{name} (it carries the dataset's "
        "boxes; without it the table has none)",
        found=_where_looked(where),
        fix=f"put {name} there (it comes with the release), or remove {', '.join(tasks)} "
            f"from the tasks of {s.name!r}")


def _where_looked(where: list) -> str:
    """The paths a side file was looked for at, short: each one up to three, else the names
    and the first folders of the many searched."""
    if not where:
        return "no file at the places searched"
    if len(where) <= 3:
        return "no file at " + ", ".join(str(p) for p in where)
    names = ", ".join(dict.fromkeys(p.name for p in where))
    dirs = list(dict.fromkeys(str(p.parent) for p in where))
    more = f" and {len(dirs) - 3} more" if len(dirs) > 3 else ""
    return f"no {names} in {', '.join(dirs[:3])}{more}"


def _start(spec, hold: HoldOut, pool: dict, out: Path, workers, jobs) -> dict:
    """Give the fork server's processes (``jobs``) every source, the longest first, each with
    the dataset the hold-out opened for it, if any."""
    token = f"{os.getpid()}-{id(spec):x}-source"
    order = _longest_first(spec.sources, together=len(getattr(jobs, "conns", ())) or 2)
    calls = {i: (i, _hand(pool.get(dataset_key(spec.sources[i])))) for i in order}
    try:
        jobs.start({"spec": spec, "hold": hold, "out": out, "workers": workers, "token": token,
                    "open_lock": str(jobs.private / f"{token}-open.lock")},
                   _child, calls, names={i: s.name for i, s in enumerate(spec.sources)},
                   token=token)
    except BaseException:
        jobs.stop(kill=True)
        remove_spools(out, token + "-")
        raise
    pool.clear()  # pickled for the processes
    return {"jobs": jobs, "token": token, "sources": len(spec.sources)}


def _longest_first(sources, *, together: int = 2) -> list[int]:
    """The sources' positions, the likely longest to build first (so the last to end is not a
    long one started late): by the release's expected image count times the number of tasks,
    a dataset without one (question sets) first; but a source whose dataset (key, root,
    arguments) is among the ``together - 1`` before it waits for the next place where it is
    not, so two sources on one dataset do not open it at once (a ReXVQA-sized table read twice
    side by side was the build's peak: 2.5 GB each; the second now finds the first's cached
    table). Only the order of work depends on it.

    >>> from types import SimpleNamespace as S
    >>> src = [S(dataset="rexvqa_train", root="/r", kwargs={}, rules={"vqa_mcq": 1}),
    ...        S(dataset="rexvqa_train", root="/r", kwargs={}, rules={"vqa_mcq": 1}),
    ...        S(dataset="chexpert", root="/c", kwargs={}, rules={"classify_view": 1})]
    >>> _longest_first(src)
    [0, 2, 1]
    """
    def weight(i: int) -> float:
        s = sources[i]
        expected = catalog.spec(s.dataset).expected
        n = expected.get("images") or expected.get("rows")
        return float("inf") if not n else float(n) * len(s.rules)

    waiting = sorted(range(len(sources)), key=lambda i: (-weight(i), i))
    order: list[int] = []
    while waiting:
        recent = {dataset_key(sources[j]) for j in order[len(order) - together + 1:]} \
            if together > 1 else set()
        pick = next((i for i in waiting if dataset_key(sources[i]) not in recent), waiting[0])
        waiting.remove(pick)
        order.append(pick)
    return order


@contextlib.contextmanager
def _one_opening():
    """In a source process: hold the build's opening lock while a dataset is opened (its
    table read and harmonized, the source's peak: 2-2.5 GB for a ReXVQA- or MIMIC-sized
    release read cold), so two sources never open at once; other sources draw meanwhile.
    Nothing outside a source process (no lock named)."""
    path = INHERITED.get("open_lock")
    if path is None:
        yield
        return
    import fcntl

    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _child(i: int, handed: list):
    """In a source process: build source ``i`` (``handed``: :func:`_hand` of its dataset,
    when the hold-out read it) into its spool."""
    st = INHERITED
    spec = st["spec"]
    s = spec.sources[i]
    tallies = Tallies()
    spool = Spool(st["out"], f"{st['token']}-{i}")
    try:
        info = _source(spec, s, st["hold"], spool, tallies, st["workers"], False, handed)
    finally:
        path = spool.close()
    return info, tallies, path


def _gather(children: dict, writer: RecordWriter, tallies: Tallies, progress: bool) -> list:
    """The sources' records into ``writer`` in the spec's order, as their processes end
    (never waiting on a dead or stalled one: :meth:`~radharmony.mixture.spool.Jobs.result`)."""
    from tqdm.auto import tqdm

    jobs, infos = children["jobs"], []
    with tqdm(total=children["sources"], desc="mixture: sources", unit="source",
              disable=not progress) as bar:
        for i in range(children["sources"]):
            info, theirs, path = jobs.result(i)
            tallies.merge(theirs)
            replay(path, writer.write)
            infos.append(info)
            bar.update()
    return infos


def _stop(children: dict, out: Path, *, kill: bool) -> None:
    """End the processes (``kill``: at once, on an error) and remove what they spooled."""
    children["jobs"].stop(kill=kill)
    remove_spools(out, children["token"] + "-")


def _cap(picks: dict, cap: int, seed: int, note) -> dict:
    """At most ``cap`` records over a source's tasks: a seeded random subset of all its
    draws, each task keeping its drawn order; the cut is counted per task."""
    sizes = [len(p) for p in picks.values()]
    total = sum(sizes)
    if total <= cap:
        return picks
    keep = np.zeros(total, bool)
    keep[np.random.default_rng(seed).choice(total, size=cap, replace=False)] = True
    out, start = {}, 0
    for (t, p), n in zip(picks.items(), sizes):
        k = keep[start:start + n]
        out[t] = p[k]
        note(t, int(n - k.sum()))
        start += n
    return out


__all__ = ["build"]
