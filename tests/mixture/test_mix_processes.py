"""The processes that build a mixture's sources: never a ``fork`` of the caller (whose other
threads may hold a lock a child would inherit locked), and never waited on forever (a process
that dies or stops making progress ends the build with an error naming it)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mix_replicas import replicas  # noqa: F401 (fixture)
from radharmony.errors import RadHarmonyError
from radharmony.mixture import RECORDS_NAME, build
from radharmony.mixture import builder, spool

#: ``threading.active_count()`` at every fork of this process while :data:`_RECORDING` is set
_FORKS: list[int] = []
_RECORDING: list[bool] = []


def _before_fork() -> None:
    if _RECORDING:
        _FORKS.append(threading.active_count())


os.register_at_fork(before=_before_fork)  # sees os.fork and multiprocessing's fork alike


def _spec(roots: dict, cache_dir) -> dict:
    """Two sources (so two processes build them) and a hold-out set with image files (so the
    hold-out's image-audit threads run in this process first)."""
    return {"name": "threads", "seed": 3, "valid": 0.3, "cache_dir": str(cache_dir),
            "sources": [{"dataset": "chexpert", "root": roots["chexpert"],
                         "tasks": {"classify_findings": "all", "classify_view": "all"}},
                        {"dataset": "vindr_cxr", "root": roots["vindr_cxr"],
                         "tasks": {"classify_findings": "all"}}],
            "hold_out": [{"dataset": "mimic_cxr_jpg", "root": roots["mimic_cxr_jpg"],
                          "split": "test"}]}


def test_no_fork_happens_while_another_thread_of_the_caller_resizes_images(replicas, tmp_path):
    cv2 = pytest.importorskip("cv2")
    stop, resized = threading.Event(), [0]
    img = np.random.default_rng(0).integers(0, 65535, (512, 512), dtype=np.uint16)

    def resize_forever():
        while not stop.is_set():
            cv2.resize(img, (317, 301), interpolation=cv2.INTER_AREA)
            resized[0] += 1

    spec = _spec(replicas, tmp_path / "cache")
    build(spec, tmp_path / "one", workers=1, progress=False)
    want = (tmp_path / "one" / RECORDS_NAME).read_bytes()
    thread = threading.Thread(target=resize_forever, daemon=True)
    _FORKS.clear()
    _RECORDING.append(True)
    thread.start()
    try:
        for n in range(3):
            before = resized[0]
            build(spec, tmp_path / f"two-{n}", workers=2, progress=False)
            assert resized[0] > before  # the caller's thread resized all along
            assert (tmp_path / f"two-{n}" / RECORDS_NAME).read_bytes() == want
    finally:
        _RECORDING.clear()
        stop.set()
        thread.join()
    assert _FORKS == []  # not one fork of this process, let alone one beside a live thread


def _on_source_processes(monkeypatch, act):
    """Call ``act(pid)`` on each source process as soon as the fork server has forked it."""
    start = builder.start_server

    def watched(processes):
        jobs = start(processes)

        def find():
            done: set = set()
            deadline = time.monotonic() + 120
            while len(done) < processes and time.monotonic() < deadline:
                for task in Path(f"/proc/{jobs.server.pid}/task").glob("*/children"):
                    try:
                        pids = {int(p) for p in task.read_text().split()}
                    except OSError:
                        continue
                    for pid in pids - done:
                        act(pid)
                        done.add(pid)
                time.sleep(0.005)

        threading.Thread(target=find, daemon=True).start()
        return jobs

    monkeypatch.setattr(builder, "start_server", watched)


def test_a_stopped_source_process_is_reported_not_waited_on(replicas, tmp_path, monkeypatch):
    monkeypatch.setattr(spool, "STALL_SECONDS", 3.0)
    monkeypatch.setattr(spool, "POLL_SECONDS", 0.2)
    stopped: list[int] = []
    _on_source_processes(monkeypatch, lambda pid: (os.kill(pid, signal.SIGSTOP),
                                                   stopped.append(pid)))
    t = time.monotonic()
    with pytest.raises(RadHarmonyError, match=r"made no progress for \d+ s") as err:
        build(_spec(replicas, tmp_path / "cache"), tmp_path / "out", workers=2, progress=False)
    assert time.monotonic() - t < 60
    assert "'chexpert'" in str(err.value) or "'vindr_cxr'" in str(err.value) or \
        "none started" in str(err.value)
    assert list((tmp_path / "out").iterdir()) == []  # no spool, no pickle left
    assert len(stopped) == 2
    deadline = time.monotonic() + 10
    while [p for p in stopped if _alive(p)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in stopped if _alive(p)]  # killed, stopped as they were


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_source_process_is_reported(replicas, tmp_path, monkeypatch):
    _on_source_processes(monkeypatch, lambda pid: os.kill(pid, signal.SIGKILL))
    with pytest.raises(RadHarmonyError, match="ended without finishing"):
        build(_spec(replicas, tmp_path / "cache"), tmp_path / "out", workers=2, progress=False)
    assert list((tmp_path / "out").iterdir()) == []


def test_the_argument_pickles_live_in_a_private_folder_removed_after_the_build(
        replicas, tmp_path, monkeypatch):
    monkeypatch.setattr(spool.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    seen = []
    start = builder.start_server

    def watched(processes):
        jobs = start(processes)
        seen.append((jobs.private, jobs.private.stat().st_mode & 0o777))
        return jobs

    monkeypatch.setattr(builder, "start_server", watched)
    build(_spec(replicas, tmp_path / "cache"), tmp_path / "out", workers=2, progress=False)
    assert [mode for _, mode in seen] == [0o700]
    assert seen[0][0].parent == tmp_path / "tmp" and not seen[0][0].exists()
    assert not list((tmp_path / "out").glob("*.pkl"))  # never in the mixture folder
