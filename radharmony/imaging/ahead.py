"""Converting a batch on a helper thread while the calling thread checks its files.

:func:`levels_ahead` starts converting a batch's cached levels into its output tensor before
the calling thread has checked that the cache files still hold them (it keeps the result only
if they do: :func:`radharmony.data.batches.cached_rows_ahead`). The conversion is shared by
the calling thread, once its checks are done, and one helper thread per process that waits
for work in compiled code (:mod:`radharmony.imaging._ahead_jit`): without the GIL, and
without being put to sleep between batches. Handing a batch to a pooled Python thread cost
more than it saved: ~25 us to submit, ~45 us until the thread ran (waking a sleeping thread
on a VM), and the GIL passed back and forth when it returned. After each batch the helper
looks for the next for :data:`SPIN_TRIES` looks (0.35 ms on a 2-core x86 VM: a loader-bound
loop posts its next batch well within that), then sleeps until one is posted, as OpenMP's
threads do. ``torch.set_num_threads(1)`` (a DataLoader worker), or a job posted while
another thread's is running, converts in the calling thread after the checks, as before.
Measured (``benchmarks/studies.py``): the cached image-level epoch went from ~65,000 to
~90,000 images/s, the study level from ~52,000 to ~65,000, 512 px from ~24,000 to ~26,000.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import torch

from .. import threads
from ..errors import RadHarmonyError
from . import convert, jit

#: looks for work before the helper sleeps (each a ``pause``: 0.35 ms on a 2-core x86 VM)
SPIN_TRIES = 1 << 15
#: looks at the helper's last piece before the calling thread yields its core between looks
WAIT_TRIES = 1 << 15
#: seconds the calling thread waits for the helper's last piece before it gives up (a piece
#: takes microseconds; this guards against a helper that stopped, rather than hang)
WAIT_LIMIT_S = 60.0
#: the job given up on (an interrupt during its wait, or the limit), its arrays referenced
#: until it has finished
_stuck: list = []
#: output bytes per claim: whole images that either thread claims next (1 image at 512 x 512
#: in bfloat16, 5 at 224 x 224), so both finish together
PIECE_BYTES = 512 << 10


class _Helper:
    """This process's helper thread, its box (see :mod:`._ahead_jit`) and compiled calls."""

    def __init__(self, module, compiled: tuple):
        self.post, self.share, self.finished, self.serve = compiled
        self.box = convert._aligned((module.BOX,), np.int64)
        self.box[:] = 0
        self.kinds = {np.dtype(np.uint16): module.BFLOAT16, np.dtype(np.float32): module.FLOAT32}
        self.done = module.DONE
        self.busy = threading.Lock()  # one job at a time
        self.wake = threading.Event()
        threading.Thread(target=self._run, name=f"{threads.PREFIX}-ahead", daemon=True).start()

    def _run(self) -> None:
        while True:
            self.serve(self.box, convert.SCALE, SPIN_TRIES)
            self.wake.wait()
            self.wake.clear()


_helpers: dict[int, _Helper] = {}
_helpers_lock = threading.Lock()


def _helper() -> _Helper | None:
    """This process's helper (a forked child starts its own), or None without numba."""
    compiled = jit.loaded(("convert", "ahead"), _load)
    if compiled is None:
        return None
    helper = _helpers.get(os.getpid())
    if helper is None:
        with _helpers_lock:
            helper = _helpers.get(os.getpid())
            if helper is None:
                _helpers.clear()  # a parent's, whose thread is not in this process
                helper = _helpers[os.getpid()] = _Helper(*compiled)
    return helper


def _load():
    module = jit.kernels("_ahead_jit")
    if module is None:
        return None
    compiled = jit.compile_checked(
        module.FUNCTIONS, lambda fns: _exact(module, fns), what="shared conversion",
        differs="its values differ from the table's",
        instead="a batch is converted after its files are checked, by the calling thread")
    return None if compiled is None else (module, compiled)


def _exact(module, fns) -> bool:
    """Whether a job posted to a box, converted by the calling thread's share or by the
    helper's loop (run here, in turn), gives each of the 256 levels as the table does."""
    post, share, finished, serve = fns
    for dtype, writable, stream, helper in np.ndindex(2, 2, 2, 2):
        view, lut = ((np.uint16, convert._lut(torch.bfloat16)),
                     (np.float32, convert._lut(torch.float32)))[dtype]
        src = np.arange(256, dtype=np.uint8).reshape(1, 16, 16)
        src.flags.writeable = bool(writable)
        box, got = np.zeros(module.BOX, np.int64), convert._aligned((2, 16, 16), view)
        got[:] = 7
        post(box, src, np.array([0, -1], np.int64), got, (module.BFLOAT16, module.FLOAT32)[
            dtype], bool(stream), 1)
        if helper:
            serve(box, convert.SCALE, 1)
        if not (finished(box, 1) if helper else share(box, convert.SCALE, 1)) or \
                not convert.gives_table(got, lut):
            return False
    return True


def _resumed(helper: _Helper) -> bool:
    """Whether a job given up on (see ``join``) has finished since: its hold on the helper
    passes to the caller, once."""
    with _helpers_lock:
        if not _stuck or not helper.finished(helper.box, 1):
            return False
        _stuck.clear()
        return True


def levels_ahead(q: np.ndarray, dtype: torch.dtype, rows: np.ndarray, out: torch.Tensor,
                 stream: bool | None = None):
    """Start converting ``q[rows]`` into ``out`` (as :func:`convert.to_tensor` would, through
    the compiled kernel) on the helper while the caller does other work; returns ``join()``
    (the caller converts its share of the rows still left, then waits for the helper's last
    piece), or None when this conversion does not take that path (no kernel, a small batch,
    uint16 storage, one thread, a job already running)."""
    if q.dtype != np.uint8 or not q.flags.c_contiguous or convert._lut(dtype) is None or \
            not convert.fits(out, dtype, (len(rows), 1, *q.shape[-2:])) or not len(rows) or \
            threads.wanted(2) < 2:
        return None
    target = convert.kernel_target(dtype, convert._bytes(out, len(rows), q.shape[-2:]), stream)
    helper = _helper() if target is not None else None
    if helper is None or not (helper.busy.acquire(blocking=False) or _resumed(helper)):
        return None
    _, dst, stream = target
    rows = np.ascontiguousarray(rows, np.int64)
    try:
        serving = helper.post(helper.box, q, rows, dst, helper.kinds[dst.dtype], stream,
                              max(1, PIECE_BYTES // dst[0].nbytes))
    except BaseException:  # not posted
        helper.busy.release()
        raise
    if not serving:
        helper.wake.set()

    def join(job: tuple = (q, rows, dst)) -> None:
        """Once: the caller's share, then the helper's last piece (``job``: the arrays the
        job names, kept alive until then; nothing writes them after it returns)."""
        try:
            if not helper.share(helper.box, convert.SCALE, WAIT_TRIES):
                start = time.monotonic()
                while not helper.finished(helper.box, WAIT_TRIES):
                    time.sleep(0)  # the helper was preempted mid-piece: let it run
                    if time.monotonic() - start > WAIT_LIMIT_S:
                        raise RadHarmonyError(
                            "radharmony's helper thread did not finish its piece of a batch "
                            "conversion", expected=f"every row within {WAIT_LIMIT_S:.0f} s",
                            found=f"{int(helper.box[helper.done])} of {len(rows)} rows "
                                  "finished", fix="report it; meanwhile set RADHARMONY_JIT=0 "
                            "(the same values through OpenCV's table) or "
                            "torch.set_num_threads(1)")
        except BaseException:  # an interrupt, or the limit: the helper may still write
            _stuck.append(job)  # kept alive, and no job is posted until it has finished
            raise
        helper.busy.release()
    return join
