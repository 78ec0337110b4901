"""The conversion shared with the helper thread (radharmony.imaging.ahead): the same values as
the table, whichever thread converts which rows, whether the helper is looking for work or
asleep; one job at a time; a forked child's own helper; the exactness check guards it."""

import os
import time

import numpy as np
import pytest
import torch

from radharmony.imaging import convert, jit

pytest.importorskip("numba")
from radharmony.imaging import _ahead_jit, ahead  # noqa: E402


@pytest.fixture
def two_threads():
    n = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(n)


def _levels(seed: int, n: int = 60, side: int = 96) -> np.ndarray:
    q = np.random.default_rng(seed).integers(0, 256, (n, side, side), dtype=np.uint8)
    q.setflags(write=False)  # as a pack's memory map
    return q


def _run(q, rows, dtype, stream, pause: float = 0.0) -> torch.Tensor:
    out = torch.empty((len(rows), 1, *q.shape[1:]), dtype=dtype)
    out.view(torch.uint8).numpy()[:] = 7  # not torch's fill: a forked child cannot run its threads
    join = ahead.levels_ahead(q, dtype, rows, out, stream)
    assert join is not None
    time.sleep(pause)  # the helper converts meanwhile (or wakes first, when it slept)
    join()
    assert ahead._helper().box[_ahead_jit.DONE] == len(rows)  # each row once, all finished
    return out


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_shared_conversions_give_the_tables_values(dtype, two_threads, monkeypatch):
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    monkeypatch.setattr(ahead, "PIECE_BYTES", 1)  # one row per claim: the threads interleave
    q, rng = _levels(1), np.random.default_rng(2)
    for k in range(40):
        rows = rng.integers(-3, len(q), int(rng.integers(1, 50)))  # negative: padding
        got = _run(q, rows, dtype, stream=bool(k % 2), pause=0.002 * (k % 3 == 0))
        assert torch.equal(got, convert.to_tensor(q, dtype, rows=rows)), k


def test_the_helper_converts_its_share_awake_or_woken(two_threads, monkeypatch):
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    monkeypatch.setattr(ahead, "PIECE_BYTES", 1)
    q = _levels(3)
    rows = np.arange(len(q))
    helper = ahead._helper()
    for spin, pause in ((ahead.SPIN_TRIES, 0.0), (1, 0.02)):  # looking for work / asleep
        monkeypatch.setattr(ahead, "SPIN_TRIES", spin)
        _run(q, rows, torch.bfloat16, False, pause=0.02)  # the helper now spins, or sleeps
        time.sleep(pause)
        seen = int(helper.box[_ahead_jit.SEEN])
        got = _run(q, rows, torch.bfloat16, False, pause=0.02)
        deadline = time.monotonic() + 10  # a loaded machine may run it late
        while int(helper.box[_ahead_jit.SEEN]) == seen and time.monotonic() < deadline:
            time.sleep(0.001)
        assert int(helper.box[_ahead_jit.SEEN]) > seen  # it took up the job
        assert torch.equal(got, convert.to_tensor(q, torch.bfloat16, rows=rows))


def test_one_job_at_a_time_and_one_thread_converts_alone(two_threads, monkeypatch):
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    q = _levels(4)
    out = torch.empty((3, 1, *q.shape[1:]), dtype=torch.bfloat16)
    helper = ahead._helper()
    with helper.busy:  # another thread's job is running
        assert ahead.levels_ahead(q, torch.bfloat16, np.arange(3), out) is None
    torch.set_num_threads(1)  # a DataLoader worker
    assert ahead.levels_ahead(q, torch.bfloat16, np.arange(3), out) is None


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_helper(two_threads, monkeypatch):
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    q, rows = _levels(5), np.arange(-2, 40)
    parent = ahead._helper()
    _run(q, rows, torch.bfloat16, True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through its exit status (and runs no
        # torch op of its own threads: those of a parent that used them hang in a fork)
        ok = False
        try:
            got = _run(q, rows, torch.bfloat16, True, pause=0.01)
            want = convert.to_tensor(q, torch.bfloat16, rows=rows)
            ok = ahead._helper() is not parent and \
                np.array_equal(got.view(torch.int16).numpy(), want.view(torch.int16).numpy())
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_shared_conversion_that_differs_is_not_used(two_threads, monkeypatch):
    def idle_share(box, scale, tries):  # claims nothing: the rows stay unconverted
        return True

    post, _, finished, serve = _ahead_jit.FUNCTIONS
    monkeypatch.setattr(_ahead_jit, "FUNCTIONS", (post, idle_share, finished, serve))
    monkeypatch.setattr(jit, "_loaded", {})
    monkeypatch.setattr(ahead, "_helpers", {})
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    q = _levels(6)
    out = torch.empty((3, 1, *q.shape[1:]), dtype=torch.bfloat16)
    with pytest.warns(RuntimeWarning, match="shared conversion is not used"):
        assert ahead.levels_ahead(q, torch.bfloat16, np.arange(3), out) is None


def test_a_helper_that_never_finishes_raises_and_holds_its_job(two_threads, monkeypatch):
    """The calling thread gives up on the helper's last piece after WAIT_LIMIT_S, with an
    error naming the fix; the job's arrays stay referenced and no job is posted until it has
    finished, after which the next batch takes the helper again."""
    from radharmony.errors import RadHarmonyError

    real, state = ahead._helper(), {"finished": False}

    class Stalled:  # the real box and lock; a helper whose last piece never ends
        box, busy, wake, kinds, done = real.box, real.busy, real.wake, real.kinds, real.done

        def post(self, *args):
            return True

        def share(self, box, scale, tries):
            return False

        def finished(self, box, tries):
            return state["finished"]
    monkeypatch.setattr(ahead, "_helper", Stalled)
    monkeypatch.setattr(ahead, "WAIT_LIMIT_S", 0.01)
    monkeypatch.setattr(convert, "MIN_KERNEL_PIXELS", 0)
    q = _levels(7)
    out = torch.empty((3, 1, *q.shape[1:]), dtype=torch.bfloat16)
    join = ahead.levels_ahead(q, torch.bfloat16, np.arange(3), out)
    with pytest.raises(RadHarmonyError, match="RADHARMONY_JIT=0"):
        join()
    assert ahead._stuck and real.busy.locked()
    assert ahead.levels_ahead(q, torch.bfloat16, np.arange(3), out) is None  # still held
    state["finished"] = True  # it finished after all: the next batch takes the helper
    join = ahead.levels_ahead(q, torch.bfloat16, np.arange(3), out)
    assert join is not None and not ahead._stuck
    state["finished"], Stalled.share = True, lambda self, box, scale, tries: True
    join()
    assert not real.busy.locked()
