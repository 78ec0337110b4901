"""The Ray engine: decoding images for the cache, and writing export shards, on a Ray cluster.

``pre_cache(ds, engine="ray")`` (:mod:`radharmony.data.precache`) hands the images that are not
cached yet to :func:`decode_on_ray`; computing keys, packing and the report stay where they are
for the local engine, so both engines write the same entries and the same pack, byte for byte.

How the work is split:

* The driver (the process calling ``pre_cache``) computes every cache key, one ``stat`` per
  image, exactly as a training process will; it must therefore see the images at the paths the
  workers read them from (a shared filesystem, or a local cluster). Rows of a merged dataset
  simply carry different roots: each task gets absolute paths.
* Images are cut into batches of ``batch_size`` (64 by default) and each batch is one plain
  Ray task running the built-in pipeline (``DefaultTransform.encode``) on its paths. Plain
  tasks rather than Ray Data ``map_batches``: for this work (a list of paths in, one array per
  path out) tasks cost less per batch and start without a streaming executor (measurements in
  ``docs/scaling.md``), and they let the driver store each batch as it returns.
* Who writes the loose entries (``shared_fs``):

  - ``shared_fs=False`` -- tasks return ``(key, array, letterbox)`` and the driver writes each
    entry (``ImageCache.store``) as soon as its batch returns. Needed whenever the cache folder
    is not one folder that every node mounts at the same path; costs one ~50 KB transfer per
    224-pixel 8-bit image into the driver. The default with an ``address`` (or any cluster
    with a node other than the driver's).
  - ``shared_fs=True`` -- tasks write the entries themselves (the same atomic
    ``ImageCache.store``) and return only their keys; the driver then checks every entry is
    visible to it, and stops with an error naming ``shared_fs=False`` if not (the folder was
    not shared after all). The default on a local cluster (one node: the driver's).

  Either way the entry files are the ones the local engine writes: the same keys, the same
  pipeline, the same ``store``.
* Resuming: images with an entry (loose or packed) are never submitted, and entries are
  written batch by batch, so an interrupted run keeps every finished batch.
* Failures: an image the pipeline cannot read is returned with its error; a task that fails
  as a whole (a worker killed, an unexpected exception) fails every image of its batch with
  Ray's error. With ``keep_going`` they are all collected and reported with their
  ``sample_id``; without it the first one stops the run (its sample named) and the tasks still
  running are cancelled.

Ray is optional: ``pip install radharmony[ray]``.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from ..errors import ImageReadError, PathSafetyError, RadHarmonyError
from ..optional import RAY_EXTRA, require_ray

EXTRA = RAY_EXTRA
#: images per Ray task (Ray Data costs ~14 ms per batch here, a task ~1-2 ms: see docs/scaling.md)
BATCH_SIZE = 64


def _is_local(ray, address: str | None) -> bool:
    """True when every alive node of the connected cluster is the driver's own node."""
    if address is not None and str(address).startswith("ray://"):
        return False  # Ray Client: the driver runs outside the cluster
    here = ray.get_runtime_context().get_node_id()
    return all(n["NodeID"] == here for n in ray.nodes() if n.get("Alive"))


@contextlib.contextmanager
def ray_session(address: str | None = None, *, num_cpus: int = 0) -> Iterator[tuple[object, bool]]:
    """``(ray, local)`` on a Ray cluster: the one this process is already connected to, the
    cluster at ``address`` (``"auto"``, ``"ray://head:10001"``, ``"head:6379"``), or a local
    one with ``num_cpus`` CPUs (0: every core) started here and shut down at exit. ``local``
    says whether the cluster's only node is the driver's (then its filesystem is shared)."""
    ray = require_ray()
    started = False
    if not ray.is_initialized():
        try:
            if address is not None:
                ray.init(address=address, logging_level="ERROR")
            else:
                ray.init(num_cpus=num_cpus or None, include_dashboard=False,
                         logging_level="ERROR")
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"the Ray cluster at {address!r}" if address else "a local Ray cluster"
            raise RadHarmonyError(f"Could not connect to {where}",
                                  expected="a running cluster (ray start --head, ray up, "
                                  "KubeRay) reachable from here" if address else
                                  "ray.init() to start", found=f"{type(exc).__name__}: {exc}",
                                  fix="check the address (ray status on the head node prints "
                                      "it) or leave address=None for a local cluster") from None
        started = True
    try:
        yield ray, _is_local(ray, address)
    finally:
        if started:
            ray.shutdown()


def cluster_cpus(ray) -> int:
    return max(1, int(ray.cluster_resources().get("CPU", 1)))


# -- the task -------------------------------------------------------------------------------------
def encode_batch(pipeline, cache, items: list[tuple[int, str, str]], write: bool):
    """Run ``pipeline.encode`` on each ``(index, path, key)``; returns ``(done, failed)``:
    ``done`` holds ``(index, key, array, letterbox dict)`` (array and letterbox None when the
    task wrote the entry itself), ``failed`` holds ``(index, error type, message)``."""
    import cv2

    cv2.setNumThreads(1)  # one task per CPU already
    done, failed = [], []
    for index, path, key in items:
        try:
            arr, box = pipeline.encode(path)
        except RadHarmonyError as exc:  # missing, empty, corrupt or unsafe images
            failed.append((index, type(exc).__name__, str(exc)))
            continue
        if write:
            cache.store(key, arr, box.as_dict())
            done.append((index, key, None, None))
        else:
            done.append((index, key, arr, box.as_dict()))
    return done, failed


def _first_failure(ds, index: int, kind: str, detail: str) -> RadHarmonyError:
    """The error that stops a run without ``keep_going``: the standard one naming the sample
    (as the local engine raises it) when the driver reproduces it, else one built from the
    worker's message."""
    if kind in (ImageReadError.__name__, PathSafetyError.__name__):
        try:
            ds[index]
        except RadHarmonyError as named:
            return named
    return RadHarmonyError(f"Sample {ds.sample_ids[index]} could not be cached on Ray",
                           expected="an image the built-in pipeline decodes",
                           found=detail, fix="repair or remove the image, or pass "
                           "keep_going=True to collect every failure")


def decode_on_ray(ds, todo: list[int], keys: list[str | None], *, keep_going: bool,
                  progress: bool = True, num_workers: int = 0, address: str | None = None,
                  batch_size: int = BATCH_SIZE, shared_fs: bool | None = None
                  ) -> list[tuple[int, str]]:
    """Decode and cache images ``todo`` of ``ds`` (keys ``keys[i]``) on Ray; returns the
    failures as ``(index, message)``. See the module docstring for ``shared_fs``.

    Args:
        num_workers: CPUs of the local cluster started when none is running and no
            ``address`` is given (0: every core); a running cluster keeps its size.
        address: the cluster to join (``"auto"`` on a cluster node, ``"ray://head:10001"``).
        batch_size: images per task.
        shared_fs: whether the cache folder is the same folder on every node (tasks then
            write the entries); None: True on a local cluster, False otherwise.
    """
    from tqdm.auto import tqdm

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise RadHarmonyError("batch_size must be a positive integer",
                              expected=f"images per Ray task, e.g. {BATCH_SIZE}",
                              found=repr(batch_size), fix=f"pass batch_size={BATCH_SIZE}")
    if shared_fs not in (None, True, False):
        raise RadHarmonyError("shared_fs must be True, False or None", expected="a bool",
                              found=repr(shared_fs), fix="pass shared_fs=False")
    cache = ds.image_cache
    items = [(i, str(ds.image_file(i)), keys[i]) for i in todo]
    batches = [items[s:s + batch_size] for s in range(0, len(items), batch_size)]
    failures: list[tuple[int, str]] = []
    with ray_session(address, num_cpus=num_workers) as (ray, local):
        write = local if shared_fs is None else shared_fs
        task = ray.remote(num_cpus=1)(encode_batch)
        pipeline_ref, cache_ref = ray.put(ds.pipeline), ray.put(cache)
        window = 2 * cluster_cpus(ray)  # tasks in flight: every CPU busy, results drained
        queue = iter(batches)
        pending: dict = {}

        def submit() -> None:
            batch = next(queue, None)
            if batch is not None:
                pending[task.remote(pipeline_ref, cache_ref, batch, write)] = batch

        try:
            for _ in range(window):
                submit()
            with tqdm(total=len(items), unit="img", disable=not progress,
                      desc=f"caching {type(ds).__name__} on Ray") as bar:
                while pending:
                    ready, _ = ray.wait(list(pending), num_returns=1)
                    batch = pending.pop(ready[0])
                    try:
                        done, failed = ray.get(ready[0])
                    except ray.exceptions.RayError as exc:  # the task itself failed
                        message = f"Ray task failed: {type(exc).__name__}: " \
                                  f"{str(exc).strip().splitlines()[-1][:300]}"
                        done, failed = [], [(i, "RayError", message) for i, _, _ in batch]
                    for index, key, arr, info in done:
                        if arr is not None:
                            cache.store(key, arr, info)
                        elif not cache.has(key):
                            raise RadHarmonyError(
                                f"An entry a Ray worker wrote is not in {cache.root} as the "
                                "driver sees it", expected="the cache folder shared by every "
                                "node at the same path (shared_fs=True)",
                                found=f"no {cache.entry_file(key)} (sample "
                                f"{ds.sample_ids[index]})", fix="pass shared_fs=False (the "
                                "driver writes the entries), or put cache_dir on a filesystem "
                                "every node mounts at the same path")
                    if failed and not keep_going:
                        raise _first_failure(ds, *failed[0])
                    failures += [(index, detail) for index, _, detail in failed]
                    bar.update(len(batch))
                    submit()
        finally:
            for ref in pending:  # stopped early: nothing keeps running on the cluster
                ray.cancel(ref)
    return failures


__all__ = ["BATCH_SIZE", "EXTRA", "cluster_cpus", "decode_on_ray", "encode_batch",
           "ray_session", "require_ray"]
