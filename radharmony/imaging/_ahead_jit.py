"""Compiled side of :mod:`radharmony.imaging.ahead`: a conversion shared by the calling thread
and one helper thread that waits for work without the GIL and without sleeping.

The two threads meet in a *box*, an int64 array (its fields each on their own cache line):

- ``CLAIM``: the job's number in the high 32 bits, the next unclaimed row in the low 32. A
  thread claims ``CHUNK`` rows by one compare-and-swap, and only while the number is still
  its job's: a job's rows are never claimed once the next job is posted.
- ``DONE``: rows finished (each piece adds its rows once its stores are visible).
- ``SERVING``: 1 while the helper looks at ``CLAIM`` (it is woken the usual way when 0).
- the job: addresses and sizes of the levels, the rows, the output; the output's kind
  (bfloat16 bits or float32), streamed stores, rows per claim.

The calling thread writes a job's fields before it publishes the job's number (:func:`post`)
and does not post the next job before every row of this one is finished
(:func:`share`, :func:`finished`), so the arrays a job names stay alive while anyone may
write for it; a helper that read a later job's fields meanwhile claims nothing with them.
The rows are converted by the same row loops as the kernels of :mod:`radharmony.imaging._jit`.
"""

from __future__ import annotations

import platform

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from ._jit import _bfloat16_rows, _fence, _float32_rows

#: the box's fields (int64 positions, each on its own 64-byte line) and its length
CLAIM, DONE, SERVING, SEEN = 0, 8, 16, 24
LEVELS, LEVEL_ROWS, PIXELS, ROWS, N, OUT, KIND, STREAM, CHUNK = range(32, 41)
BOX = 48
#: ``KIND``: the output as bfloat16 bits (uint16) or float32
BFLOAT16, FLOAT32 = 0, 1
_LOW = (1 << 32) - 1
_X86 = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686")


def _slot(context, builder, signature, args):
    arr = context.make_array(signature.args[0])(context, builder, args[0])
    return builder.gep(arr.data, [args[1]])


def _checked(box):
    return isinstance(box, types.Array) and box.dtype == types.int64


@intrinsic
def _read(typingctx, box, i):
    """``box[i]`` as another thread's atomic step left it."""
    def codegen(context, builder, signature, args):
        return builder.load_atomic(_slot(context, builder, signature, args), "acquire", 8)
    return types.int64(box, types.intp) if _checked(box) else None, codegen


@intrinsic
def _write(typingctx, box, i, value):
    """``box[i] = value``, ordered with every other atomic step."""
    def codegen(context, builder, signature, args):
        builder.store_atomic(args[2], _slot(context, builder, signature, args), "seq_cst", 8)
        return context.get_dummy_value()
    return types.void(box, types.intp, types.int64) if _checked(box) else None, codegen


@intrinsic
def _add(typingctx, box, i, value):
    """``box[i] += value`` in one atomic step."""
    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", _slot(context, builder, signature, args), args[2],
                                  "seq_cst")
    return types.int64(box, types.intp, types.int64) if _checked(box) else None, codegen


@intrinsic
def _swap(typingctx, box, i, old, new):
    """Whether ``box[i]`` was ``old`` and is now ``new`` (one atomic step)."""
    def codegen(context, builder, signature, args):
        pair = builder.cmpxchg(_slot(context, builder, signature, args), args[2], args[3],
                               "seq_cst", "seq_cst")
        return builder.extract_value(pair, 1)
    return (types.boolean(box, types.intp, types.int64, types.int64) if _checked(box)
            else None), codegen


@intrinsic
def _pause(typingctx):
    """A spin-wait hint to the processor (``pause`` on x86; nothing elsewhere)."""
    def codegen(context, builder, signature, args):
        if _X86:
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
                ir.VoidType(), []), "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _address(typingctx, value):
    """The pointer whose address is int64 ``value``."""
    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())
    return types.voidptr(types.int64), codegen


@numba.njit(inline="always", nogil=True, boundscheck=False)
def _job(box, scale, seq):
    """Claim and convert pieces of job ``seq`` until none is left (or a later job is posted)."""
    n, pixels, chunk, stream = box[N], box[PIXELS], max(box[CHUNK], 1), box[STREAM] != 0
    levels = numba.carray(_address(box[LEVELS]), (box[LEVEL_ROWS], pixels), np.uint8)
    rows = numba.carray(_address(box[ROWS]), (n,), np.int64)
    while True:
        w = _read(box, CLAIM)
        a = w & _LOW
        if (w >> 32) != seq or a >= n:
            return
        if not _swap(box, CLAIM, w, w + chunk):
            continue
        b = min(a + chunk, n)
        if box[KIND] == BFLOAT16:
            _bfloat16_rows(levels, numba.carray(_address(box[OUT]), (n, pixels), np.uint16),
                           rows, a, b, scale, stream)
        else:
            _float32_rows(levels, numba.carray(_address(box[OUT]), (n, pixels), np.float32),
                          rows, a, b, scale, stream)
        if stream:
            _fence()
        _add(box, DONE, b - a)


def post(box, levels, rows, out, kind, stream, chunk):
    """Publish the job ``out[j]`` = levels ``levels[rows[j]]`` (C-contiguous arrays that
    stay alive until it is finished); whether the helper is looking (else wake it)."""
    box[LEVELS], box[LEVEL_ROWS] = levels.ctypes.data, levels.shape[0]
    box[PIXELS] = levels.shape[1] * levels.shape[2]
    box[ROWS], box[N], box[OUT] = rows.ctypes.data, rows.shape[0], out.ctypes.data
    box[KIND], box[STREAM], box[CHUNK] = kind, 1 if stream else 0, chunk
    seq = (_read(box, CLAIM) >> 32) + 1
    _write(box, DONE, 0)
    _write(box, CLAIM, seq << 32)
    return _read(box, SERVING) != 0


@numba.njit(inline="always", nogil=True, boundscheck=False)
def _finished(box, tries):
    n = box[N]
    for _ in range(tries):
        if _read(box, DONE) >= n:
            return True
        _pause()
    return False


def finished(box, tries):
    """Whether every row of the posted job is finished, looked at up to ``tries`` times."""
    return _finished(box, tries)


def share(box, scale, tries):
    """The calling thread's share of the posted job, then :func:`finished`."""
    _job(box, scale, _read(box, CLAIM) >> 32)
    return _finished(box, tries)


def serve(box, scale, tries):
    """The helper: converts its share of every job posted, until none has come for ``tries``
    looks; then returns (``SERVING`` 0), to be woken when the next job is posted."""
    _write(box, SERVING, 1)
    seen, idle = box[SEEN], 0
    while True:
        seq = _read(box, CLAIM) >> 32
        if seq != seen:
            seen = seq
            box[SEEN] = seen
            _job(box, scale, seq)
            idle = 0
        elif idle < tries:
            idle += 1
            _pause()
        else:
            _write(box, SERVING, 0)
            if (_read(box, CLAIM) >> 32) == seen:
                return
            _write(box, SERVING, 1)  # posted meanwhile: the poster may not have woken us


#: what :mod:`radharmony.imaging.ahead` compiles, in this order
FUNCTIONS = (post, share, finished, serve)
