"""Sources built in worker processes: their records spooled to Arrow files, replayed in order.

:func:`~radharmony.mixture.builder.build` builds each source (open the dataset, draft every
task, draw, render) in a process of its own when it may use more than one core: the
processes are forked once the hold-out sets are read, so each starts with the hold-out and
the datasets already opened for it, never pickled. A process writes its source's records to a
:class:`Spool` (an Arrow IPC stream, LZ4-compressed, in the mixture folder) and returns its
counts; the parent replays the spools in the spec's order into the one
:class:`~radharmony.mixture.writer.RecordWriter`, whose row groups depend only on the records:
the file is the same bytes whatever the number of processes.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa

from ..files import TMP_PREFIX
from .records import RECORD_SCHEMA

#: at most this many source processes unless ``workers`` says more (each holds one source's
#: table and drafts: memory grows with them)
DEFAULT_PROCESSES = 4


def process_count(workers: int | None, sources: int) -> int:
    """How many processes build the sources: ``workers`` (default: the usable cores, at most
    :data:`DEFAULT_PROCESSES`), never more than the sources; 1 (this process) where ``fork``
    is not the platform's way to start them (their state is inherited, never pickled)."""
    if sys.platform != "linux" or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if workers is None:
        workers = min(DEFAULT_PROCESSES, len(os.sched_getaffinity(0)))
    return max(1, min(int(workers), sources))


class Spool:
    """One source's records, written by its process to ``folder`` as an Arrow IPC stream."""

    def __init__(self, folder: Path, name: str):
        self.path = spool_path(folder, name)
        self._sink = pa.OSFile(str(self.path), "wb")
        self._writer = pa.ipc.new_stream(self._sink, RECORD_SCHEMA,
                                         options=pa.ipc.IpcWriteOptions(compression="lz4"))

    def write(self, table: pa.Table) -> None:
        self._writer.write_table(table)

    def close(self) -> Path:
        self._writer.close()
        self._sink.close()
        return self.path


def spool_path(folder: Path, name: str) -> Path:
    """Where the spool ``name`` is written (a temporary name: cleaned as the build's own)."""
    return Path(folder) / f"{TMP_PREFIX}{name}.arrows"


def replay(path: Path, write) -> None:
    """Pass a spool's record batches to ``write`` in order, then delete it."""
    try:
        with pa.memory_map(str(path)) as source:
            for batch in pa.ipc.open_stream(source):
                write(pa.Table.from_batches([batch]))
    finally:
        Path(path).unlink(missing_ok=True)


#: what the forked processes inherit (set just before they are started)
INHERITED: dict = {}


def fork_jobs(processes: int, state: dict, job, args) -> tuple[ProcessPoolExecutor, dict]:
    """``(pool, {arg: future})``: ``job(arg)`` for each of ``args`` (submitted in that order)
    on a pool of ``processes`` forked processes that see ``state`` as :data:`INHERITED`.
    The objects alive now are frozen out of the garbage collector while the processes start,
    so they do not copy the pages the collector would touch."""
    INHERITED.clear()
    INHERITED.update(state)
    pool = ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("fork"))
    gc.freeze()
    try:  # the processes start at the first submit
        futures = {a: pool.submit(job, a) for a in args}
    finally:
        gc.unfreeze()
        INHERITED.clear()  # the processes' now
    return pool, futures


def remove_spools(folder: Path, prefix: str) -> None:
    """Remove the spools named ``prefix...`` left in ``folder`` (a failed build's)."""
    for left in Path(folder).glob(spool_path(Path("."), prefix + "*").name):
        left.unlink(missing_ok=True)


__all__ = ["DEFAULT_PROCESSES", "INHERITED", "Spool", "fork_jobs", "process_count",
           "remove_spools", "replay", "spool_path"]
