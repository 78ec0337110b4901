"""Batch tensors that leave a batched read, and a DataLoader worker, without fresh memory pages.

A batched read (``dataset.__getitems__``) converts the whole batch into one tensor and hands
out its rows as the samples' ``img``. Three things make that batch cheap to deliver:

- **No stack.** The samples are :class:`Sample` dicts (plain dicts in every use) that know the
  batch they came from, and the default collate is told, through its documented
  ``default_collate_fn_map``, that the samples of one batch, all of them in order, collate to
  the batch tensors whose rows their values still are; any other value, order or number is
  collated as usual. :func:`radharmony.collate` does the same through :func:`batch_of` and
  :func:`whole`. The rows themselves are plain tensor views (no per-row subclass).
- **Reused buffers.** A page of memory touched for the first time costs more than converting
  the pixels written into it (a batch of 64 bfloat16 images is 1,568 pages). In the main process
  a batch is written into one of a few buffers (:func:`own_batch`), reused once nothing holds
  it; a training loop holds the previous batch while the next is read.
- **Slots across processes.** PyTorch's own hand-over from a worker writes every batch into a
  new shared-memory block and passes its handle over a socket. Inside a worker the batch is
  written instead into one of a few ``memfd`` *slots* that the worker keeps (:func:`worker_batch`).
  Pickled to the main process, it arrives through :func:`receive`: the slot is mapped once
  (its handle travels only until the slot says it is mapped) and the batch is handed out where
  it lies, as a tensor over the slot. Once nothing in the main process holds that tensor (nor
  a view or slice of it), a finalizer marks the slot free in a byte after the batch; the
  worker writes a slot again only once it is marked free and nothing in the worker holds it.

A worker's small batch tensors (``cls``, ``cls_mask``: up to :data:`BY_VALUE_BYTES`) travel
inside the pickle itself rather than in a new shared-memory file each.

A batch a user holds is never written under it: keeping batches, or views of them, is safe,
and so is sending them on to another process (PyTorch first moves a tensor to new shared
memory, which lets go of the slot; a main-process buffer moved so is never reused).
"""

from __future__ import annotations

import itertools
import math
import mmap
import os
import secrets
import threading
import weakref
from multiprocessing.reduction import DupFd

import numpy as np
import torch

from ..errors import RadHarmonyError
from ..files import process_alive
from ..threads import unheld_after_fork

try:  # the documented extension point of torch's default collate
    from torch.utils.data._utils.collate import collate as default_collate_impl
    from torch.utils.data._utils.collate import default_collate_fn_map
except ImportError:  # pragma: no cover - a torch without it stacks the rows as usual
    default_collate_impl = default_collate_fn_map = None

#: bytes after a slot's batch; the first holds the slot's state
TAIL = 64
FREE, BUSY, RETIRED = 0, 1, 2
#: slots a worker keeps (more than the batches a DataLoader lets it have in flight)
RING = 8


class Sample(dict):
    """A sample dict from a batched read: a plain dict in every use, which also knows the batch
    it came from. Copied or pickled (sent to another process) it becomes the plain dict it is."""

    __slots__ = ("_radharmony_batch",)

    def __reduce__(self):
        return dict, (dict(self),)


class _Batch:
    """The batch tensors of one batched read and the row views handed out of each."""

    __slots__ = ("tensors", "rows", "size")

    def __init__(self, tensors: dict, rows: dict, size: int):
        self.tensors, self.rows, self.size = tensors, rows, size


def _nbytes(shape: tuple, dtype: torch.dtype) -> int:
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def mark(samples: list[dict], tensors: dict, rows: dict) -> list[Sample]:
    """``samples`` as :class:`Sample` dicts of one batch: ``tensors`` are its batch tensors
    and ``rows[key]`` the row views of ``tensors[key]`` (``tensors[key].unbind(0)``) that went
    into the samples, in order."""
    return _tag([Sample(s) for s in samples], tensors, rows)


def mark_rows(keys: tuple, values: list[tuple], tensors: dict, rows: dict) -> list[Sample]:
    """:func:`mark` of ``dict(zip(keys, v))`` for each ``v`` of ``values``, each made a
    :class:`Sample` at once (half the time of a dict, then a Sample of it)."""
    return _tag([Sample(zip(keys, v)) for v in values], tensors, rows)


def _tag(samples: list[Sample], tensors: dict, rows: dict) -> list[Sample]:
    batch = _Batch(tensors, rows, len(samples))
    for j, sample in enumerate(samples):
        sample._radharmony_batch = (batch, j)
    return samples


def batch_of(samples) -> _Batch | None:
    """The batch whose samples ``samples`` are, all of them in order; else None."""
    mark = getattr(samples[0], "_radharmony_batch", None) if len(samples) else None
    if mark is None or mark[0].size != len(samples):
        return None
    batch = mark[0]
    for j, sample in enumerate(samples):
        m = getattr(sample, "_radharmony_batch", None)
        if m is None or m[0] is not batch or m[1] != j:
            return None
    return batch


def whole(batch: _Batch | None, key: str, values: list) -> torch.Tensor | None:
    """The batch tensor of ``key`` (as collated output: see :func:`outgoing`) when ``values``
    are exactly its row views, in order (a value a transform replaced is not); else None."""
    rows = batch.rows.get(key) if batch is not None else None
    if rows is None or len(rows) != len(values):
        return None
    for value, row in zip(values, rows):
        if value is not row:
            return None
    return outgoing(batch.tensors[key])


#: a packed study sample's image keys -> the key counting them (``packed=True``, see
#: :mod:`radharmony.data.studies`): collated, the samples' images one after another
PACKED_KEYS = {"img": "num_images", "prior_img": "prior_num_images"}


def collate_keys(batch: list, fallback) -> dict:
    """Per key of the first sample: the batch tensor when the samples' values are its rows
    (:func:`whole`: no copy), a packed key's values concatenated (:data:`PACKED_KEYS`), else
    ``fallback(key, values)``. A sample without the key gives None there."""
    marked = batch_of(batch)
    if marked is None:
        _one_layout(batch)
    out = {}
    for key in batch[0]:
        values = [sample.get(key) for sample in batch]
        tensor = whole(marked, key, values)
        if tensor is None and PACKED_KEYS.get(key) in batch[0]:
            tensor = _concatenated(values)
        out[key] = tensor if tensor is not None else fallback(key, values)
    return out


def _one_layout(batch: list) -> None:
    """Refuse a batch that mixes packed study samples with padded ones (their images would
    be joined as if they were alike)."""
    packed = sum(isinstance(s, dict) and PACKED_KEYS["img"] in s for s in batch)
    if 0 < packed < len(batch) and all(isinstance(s, dict) and "img" in s for s in batch):
        raise RadHarmonyError("A batch mixes packed and padded study samples",
                              expected="study samples of datasets built alike",
                              found=f"{packed} of {len(batch)} samples packed (num_images)",
                              fix="build every study dataset of the batch with the same "
                                  "packed=")


def _concatenated(values: list) -> torch.Tensor | None:
    """Tensors of one dtype and one shape past the first dimension, one after another."""
    if not all(isinstance(v, torch.Tensor) for v in values) or \
            len({(v.dtype, tuple(v.shape[1:])) for v in values}) != 1:
        return None
    return torch.cat(values)


def _collate_samples(batch, *, collate_fn_map=None):
    """torch's default collate of radharmony samples: what it can batch it batches; a field it
    cannot (a ``None`` among the values, e.g. a study's absent section, or lists of different
    lengths, e.g. the views of studies with different image counts) stays a per-sample list, as
    :func:`radharmony.collate` keeps it, instead of failing the whole batch."""
    def fallback(key, values):
        if any(v is None for v in values) or _ragged(values):
            return list(values)
        return default_collate_impl(values, collate_fn_map=collate_fn_map)
    return collate_keys(batch, fallback)


def _ragged(values: list) -> bool:
    """Lists / tuples of different lengths, or tensors of different shapes."""
    if all(isinstance(v, (list, tuple)) for v in values):
        return len({len(v) for v in values}) > 1
    if all(isinstance(v, torch.Tensor) for v in values):
        return len({tuple(v.shape) for v in values}) > 1
    return False


if default_collate_fn_map is not None:
    default_collate_fn_map[Sample] = _collate_samples


# -- the worker side -----------------------------------------------------------------------------
def _use_count(storage) -> int:
    """How many tensors and handles hold ``storage`` (a large number when torch cannot say)."""
    count = getattr(torch._C, "_storage_Use_Count", None)
    return count(storage._cdata) if count is not None else 1 << 30


#: a slot's tail: byte 0 its state, byte 1 set once the main process has it mapped
STATE, MAPPED = 0, 1
_tokens = itertools.count()


class _Slot:
    """An anonymous shared-memory file (``memfd``) for one batch, plus :data:`TAIL` bytes."""

    def __init__(self, nbytes: int):
        self.nbytes = nbytes
        self.fd = os.memfd_create("radharmony-batch", os.MFD_CLOEXEC)
        weakref.finalize(self, os.close, self.fd)
        os.ftruncate(self.fd, nbytes + TAIL)
        mm = mmap.mmap(self.fd, nbytes + TAIL)
        self.storage = torch.frombuffer(mm, dtype=torch.uint8).untyped_storage()
        self.tail = np.frombuffer(mm, np.uint8, count=TAIL, offset=nbytes)
        self.token = (os.getpid(), secrets.randbits(63), next(_tokens))
        self.sent = False

    def reusable(self) -> bool:
        return _use_count(self.storage) == 1 and (not self.sent or self.tail[STATE] == FREE)


#: this worker process's slots
_ring: list[_Slot] = []
_ring_lock = threading.Lock()


def worker_batch(shape: tuple, dtype: torch.dtype) -> torch.Tensor | None:
    """An uninitialized batch tensor in one of this worker's slots (see the module doc), or
    None where anonymous shared memory is not available or not granted (the batch then goes
    PyTorch's usual way)."""
    if not hasattr(os, "memfd_create"):  # not Linux
        return None
    nbytes = _nbytes(shape, dtype)
    with _ring_lock:
        try:
            return _take_slot(shape, dtype, nbytes)
        except OSError:  # no memory file to be had (a limit on open files or memory)
            return None


def _take_slot(shape: tuple, dtype: torch.dtype, nbytes: int) -> torch.Tensor:
    slot = next((s for s in _ring if s.nbytes == nbytes and s.reusable()), None)
    if slot is None:
        slot = _Slot(nbytes)
        if len(_ring) >= RING:  # make room: retire a slot nothing waits for
            idle = next((s for s in _ring if s.reusable()), None)
            if idle is not None:
                idle.tail[STATE] = RETIRED
                _ring.remove(idle)
        slot.once = len(_ring) >= RING  # all busy: this one is used once
        if not slot.once:
            _ring.append(slot)
    slot.tail[STATE] = BUSY
    slot.sent = False
    out = torch.empty(0, dtype=dtype).set_(slot.storage, 0, shape)
    out._radharmony_slot = slot
    return out


class _Outgoing(torch.Tensor):
    """A batch tensor in a slot; pickled, it is delivered through :func:`receive`."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __reduce_ex__(self, protocol):
        slot = getattr(self, "_radharmony_slot", None)
        if slot is None or slot.sent:  # pickled before: the slot may be reused, send a copy
            return self.as_subclass(torch.Tensor).clone().__reduce_ex__(protocol)
        slot.sent = True
        fd = None if slot.tail[MAPPED] else DupFd(slot.fd)
        return receive, (slot.token, slot.nbytes, self.dtype, tuple(self.shape), slot.once, fd)


#: a worker's batch tensors up to this size (``cls``, ``cls_mask``) travel inside the pickle
BY_VALUE_BYTES = 1 << 16


class _ByValue(torch.Tensor):
    """A small batch tensor of a worker, pickled as its bytes: PyTorch's own reducer would
    move it to a new shared-memory file and pass that file's handle over a socket, which
    costs far more than the few kilobytes themselves."""

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __reduce_ex__(self, protocol):
        t = self.as_subclass(torch.Tensor).detach().contiguous()
        return _from_bytes, (t.view(-1).view(torch.uint8).numpy().tobytes(), t.dtype,
                             tuple(t.shape))


def _from_bytes(data: bytes, dtype: torch.dtype, shape: tuple) -> torch.Tensor:
    flat = torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
        torch.empty(0, dtype=torch.uint8)
    return flat.view(dtype).view(shape)


def outgoing(batch: torch.Tensor) -> torch.Tensor:
    """``batch`` as collated output: itself, or in a worker its deliverable form (a slot's
    batch, or a small tensor pickled by value)."""
    slot = getattr(batch, "_radharmony_slot", None)
    if slot is None:
        if torch.utils.data.get_worker_info() is not None and batch.layout == torch.strided \
                and not batch.requires_grad and \
                batch.numel() * batch.element_size() <= BY_VALUE_BYTES:
            return batch.as_subclass(_ByValue)
        return batch
    out = batch.as_subclass(_Outgoing)
    out._radharmony_slot = slot
    return out


# -- the main-process side -------------------------------------------------------------------
#: the slots of workers this process received batches from: token -> (mmap, tail)
_mapped: dict = {}
_lock = threading.Lock()
#: per size, the main process's batch buffers, reused once nothing holds them
_own: dict = {}
#: buffers kept per size
OWN = 4
_own_lock = threading.Lock()


def own_buffer(nbytes: int) -> torch.Tensor:
    """A uint8 buffer of ``nbytes`` in ordinary memory whose pages are already mapped when one
    is free again: nothing holds it, and it was never moved to shared memory (by pickling it
    to another process), which would make it another process's too."""
    with _own_lock:  # threads (CachedLoader's, a pin-memory thread) share the pool
        pool = _own.setdefault(nbytes, [])
        pool[:] = [s for s in pool if not s.is_shared()]
        storage = next((s for s in pool if _use_count(s) == 1), None)
        if storage is None:
            storage = torch.UntypedStorage(nbytes)
            pool.insert(0, storage)
            del pool[OWN:]
        return torch.empty(0, dtype=torch.uint8).set_(storage)  # held before the lock ends


def own_batch(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """An uninitialized batch tensor in one of this process's reused buffers (see
    :func:`own_buffer`): a training loop holds the previous batch while the next is read."""
    nbytes = _nbytes(shape, dtype)
    return own_buffer(nbytes).view(dtype).view(shape)


def _map(token: tuple, size: int, fd) -> tuple:
    """Map a worker's slot (``fd``: its handle, sent until the slot is known mapped here)."""
    for key in [k for k, (_, tail) in _mapped.items()
                if tail[STATE] == RETIRED or k[0] != token[0] and not process_alive(k[0])]:
        del _mapped[key]  # retired by its worker, or its worker is gone
    handle = fd.detach()
    try:
        mm = mmap.mmap(handle, size)
    finally:
        os.close(handle)
    return mm, np.frombuffer(mm, np.uint8, offset=size - TAIL)


def _release(tail: np.ndarray) -> None:
    tail[STATE] = FREE


def receive(token: tuple, nbytes: int, dtype: torch.dtype, shape: tuple, once: bool, fd
            ) -> torch.Tensor:
    """A worker's batch, handed out where it lies: a tensor over the worker's slot, which is
    marked free for the worker to write again once nothing in this process holds it any more
    (the batch, a view or a slice of it). Pickling it to another process, or
    ``share_memory_()``, moves it to new shared memory first, which frees the slot as well."""
    with _lock:
        if fd is not None:  # first batch of this slot here
            _mapped[token] = _map(token, nbytes + TAIL, fd)
        try:
            mm, tail = _mapped[token]
        except KeyError:
            raise RadHarmonyError(
                "A DataLoader worker's batch arrived for a shared-memory slot this process "
                "never mapped", expected="the slot's first batch (which carries its handle) "
                "received in this process", found=f"slot {token}",
                fix="receive the DataLoader's batches in the process that created it") from None
        held = np.frombuffer(mm, np.uint8, count=nbytes)  # one per batch: its lifetime is the batch's
        if once:
            del _mapped[token]  # the worker never writes this slot again
        else:
            tail[MAPPED] = 1
            weakref.finalize(held, _release, tail)
    return torch.from_numpy(held).view(dtype).view(shape)


unheld_after_fork(globals(), "_lock", "_own_lock", "_ring_lock")


__all__ = ["BY_VALUE_BYTES", "Sample", "batch_of", "mark", "outgoing", "own_batch",
           "own_buffer", "receive", "whole", "worker_batch"]
