"""Sources built in worker processes: their records spooled to Arrow files, replayed in order.

:func:`~radharmony.mixture.builder.build` builds each source (open the dataset, draft every
task, draw, render) in a process of its own when it may use more than one core. No process of
the build is ever a ``fork`` of the caller, whose other threads (image-audit readers, a training
script's, a notebook's, a viewer's) may hold a lock -- OpenCV's, the allocator's -- that a
forked child would inherit locked and wait on forever. :func:`start_server` starts a *fork
server*: a fresh interpreter (fork-and-exec, as :mod:`subprocess` does: safe whatever threads
run here), in which no caller code ever runs; it imports :data:`PRELOAD` once and forks the
source processes, so each starts with those imports done. Unlike :mod:`multiprocessing`'s
spawn and forkserver methods it never runs the caller's ``__main__`` again (a script without
an ``if __name__ == "__main__":`` guard builds once). The server is started at the start of a
build, so its imports overlap the hold-out's reading.

Each process is given the build's state once (the spec, the hold-out: :data:`INHERITED`) and
each source the dataset the hold-out opened for it, if any (pickled: never opened twice). It
writes the source's records to a :class:`Spool` (an Arrow IPC stream, LZ4-compressed, in the
mixture folder) and returns its counts; the parent replays the spools in the spec's order
into the one :class:`~radharmony.mixture.writer.RecordWriter`, whose row groups depend only on
the records: the file is the same bytes whatever the number of processes.

The parent never waits on a process forever (:meth:`Jobs.result`): a process that dies ends
the build with an error naming its source, and so does a build in which, for
:data:`STALL_SECONDS`, no source finished and no process of the build used CPU time (a
deadlock, a read that never returns).
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from importlib import import_module
from multiprocessing.connection import Connection, wait
from pathlib import Path

import pyarrow as pa

from ..errors import RadHarmonyError
from ..files import TMP_PREFIX
from .records import RECORD_SCHEMA

#: at most this many source processes unless ``workers`` says more (each holds one source's
#: table and drafts: memory grows with them)
DEFAULT_PROCESSES = 4
#: what the fork server imports once, before it forks the source processes: all a source
#: process would import (a module of an optional extra that is absent is passed over)
PRELOAD = ("radharmony.mixture.builder", "radharmony.registry", "radharmony.data.dataset",
           "radharmony.vqa.dataset", "radharmony.imaging._jit", "radharmony.imaging._png_jit",
           "tqdm.auto")
#: seconds in which no source finished and no process of the build used CPU: it is stalled
STALL_SECONDS = 600.0
#: how often the parent looks at its processes while it waits
POLL_SECONDS = 1.0
#: the fork server's program (``sys.path`` and the sockets of its processes as arguments)
_BOOT = ("import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
         "from radharmony.mixture.spool import serve; serve([int(a) for a in sys.argv[2:]])")


def process_count(workers: int | None, sources: int) -> int:
    """How many processes build the sources: ``workers`` (default: the usable cores, at most
    :data:`DEFAULT_PROCESSES`), never more than the sources; 1 (this process) off Linux."""
    if sys.platform != "linux":
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


def spool_path(folder: Path, name: str, suffix: str = ".arrows") -> Path:
    """Where the spool ``name`` is written (a temporary name: cleaned as the build's own)."""
    return Path(folder) / f"{TMP_PREFIX}{name}{suffix}"


def replay(path: Path, write) -> None:
    """Pass a spool's record batches to ``write`` in order, then delete it."""
    try:
        with pa.memory_map(str(path)) as source:
            for batch in pa.ipc.open_stream(source):
                write(pa.Table.from_batches([batch]))
    finally:
        Path(path).unlink(missing_ok=True)


#: the build's state in a source process (given once to each, as it starts)
INHERITED: dict = {}


# -- in the fork server and its processes -------------------------------------------------------
def serve(fds: list[int]) -> None:
    """The fork server: import :data:`PRELOAD`, fork one source process per socket of ``fds``,
    wait for them. Runs in a fresh interpreter where no caller code runs: no Python thread
    but this one (the imported libraries' native pools, idle, aside)."""
    for name in PRELOAD:
        try:
            import_module(name)
        except ImportError:  # an optional extra (numba) that is not installed
            pass
    me, pids = os.getpid(), []
    for fd in fds:
        pid = os.fork()
        if pid == 0:  # a source process: serves its socket until told to stop
            code = 1
            try:
                _die_with(me)
                for other in fds:
                    if other != fd:
                        os.close(other)
                _work(Connection(fd))
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    for fd in fds:
        os.close(fd)
    for pid in pids:
        os.waitpid(pid, 0)
    os._exit(0)  # nothing of this interpreter is worth tearing down


def _die_with(server: int) -> None:
    """Be killed when the fork server ends (however it ends: killed by the parent that stops
    a stuck build, too), so no source process outlives its build."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux's libc
        pass
    if os.getppid() != server:  # it ended before that
        os._exit(1)


def _work(conn: Connection) -> None:
    """A source process: sends its pid, receives the path of the state's pickle, then
    ``(key, job, path of the arguments' pickle)`` calls answered with ``("done", key,
    result)`` or ``("error", key, exception, traceback)``; None (or the parent gone) ends it."""
    conn.send(("pid", os.getpid()))
    try:
        INHERITED.clear()
        INHERITED.update(_load(conn.recv()))
        while (call := conn.recv()) is not None:
            key, job, path = call
            try:
                args = _load(path)
                Path(path).unlink(missing_ok=True)
                reply = ("done", key, job(*args))
            except BaseException as exc:  # raised again in the parent
                reply = ("error", key, exc, traceback.format_exc())
            try:
                conn.send(reply)
            except Exception:  # an unpicklable result or exception: its text
                conn.send(("error", key, RuntimeError(reply[-1] if reply[0] == "error" else
                                                      "an unpicklable result"), ""))
    except EOFError:  # the parent has gone
        pass


def _dump(obj, path: Path) -> str:
    with open(path, "wb") as fh:
        pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
    return str(path)


def _load(path: str):
    with open(path, "rb") as fh:
        return pickle.load(fh)


# -- in the parent ------------------------------------------------------------------------------
class RemoteTraceback(Exception):
    """The traceback of an error raised in a source process (the cause of the error raised
    again here)."""

    def __str__(self) -> str:
        return "\n\nIn the source process:\n" + str(self.args[0])


def start_server(processes: int) -> "Jobs":
    """Start the fork server and its ``processes`` source processes (they import while the
    caller goes on); :meth:`Jobs.start` gives them the work."""
    pairs = [socket.socketpair() for _ in range(processes)]
    theirs = [b.fileno() for _, b in pairs]
    server = subprocess.Popen([sys.executable, "-c", _BOOT, json.dumps(sys.path),
                               *map(str, theirs)], pass_fds=theirs, stdin=subprocess.DEVNULL)
    for _, b in pairs:
        b.close()
    return Jobs(server, [Connection(a.detach()) for a, _ in pairs])


class Jobs:
    """The fork server's source processes, seen from the parent: which call each runs, what
    each returned, and whether anything moved lately (see the module docs)."""

    def __init__(self, server: subprocess.Popen, conns: list[Connection]):
        self.server, self.conns = server, conns
        self.pids: dict[Connection, int] = {}
        self.busy: dict[Connection, object] = {}
        self.queue: list = []
        self.results: dict = {}
        self.names: dict = {}
        self._job = None
        self.cpu: dict = {}
        self.moved = time.monotonic()
        #: the pickles of the state and the calls: a folder of this build's own, 0700
        #: (mkdtemp), removed by stop(); only this build's processes read it
        self.private = Path(tempfile.mkdtemp(prefix="radharmony-build-"))

    def start(self, state: dict, job, calls: dict, *, names: dict,
              token: str) -> None:
        """Give each process ``state`` (:data:`INHERITED` there) and queue ``job(*args)`` for
        each ``key: args`` of ``calls``, in that order (``names``: each key's name, for
        messages). The state and each call's arguments are pickled once to the build's private
        temporary folder (0700, removed by :meth:`stop`; never the mixture folder, never a file
        a user hands in): only their paths go through the sockets, so no send waits on a
        process."""
        state_path = _dump(state, spool_path(self.private, f"{token}-state", ".pkl"))
        self.names, self._job = names, job
        self.queue = [(key, _dump(args, spool_path(self.private, f"{token}-call-{key}", ".pkl")))
                      for key, args in calls.items()]
        for conn in self.conns:
            self._send(conn, state_path)
        self.moved = time.monotonic()
        self._dispatch()

    def _dispatch(self) -> None:
        for conn in self.conns:
            if conn not in self.busy and self.queue:
                key, path = self.queue.pop(0)
                self.busy[conn] = key
                self._send(conn, (key, self._job, path))

    def _send(self, conn: Connection, msg) -> None:
        try:
            conn.send(msg)
        except OSError:
            self._died(conn)

    def result(self, key):
        """The result of ``key``'s call, as the processes finish; raises the call's own error,
        or an error naming the source when a process died or nothing moved for
        :data:`STALL_SECONDS`."""
        while key not in self.results:
            ready = wait(self.conns, timeout=POLL_SECONDS)
            for conn in ready:
                self._receive(conn)
            if not ready:
                self._check()
            self._dispatch()
        return self.results.pop(key)

    def _receive(self, conn: Connection) -> None:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            self._died(conn)
        self.moved = time.monotonic()
        if msg[0] == "pid":
            self.pids[conn] = msg[1]
        elif msg[0] == "done":
            del self.busy[conn]
            self.results[msg[1]] = msg[2]
        else:
            del self.busy[conn]
            raise msg[2] from RemoteTraceback(msg[3])

    def _died(self, conn: Connection):
        """Raise the error of a process that ended (its socket closed)."""
        which = self.busy.get(conn)
        code = self.server.poll()
        raise RadHarmonyError(
                "A process building the mixture's sources ended without finishing",
                expected="each source built in its process",
                found=(f"the process building {self.names.get(which, which)!r}" if which is not
                       None else "a source process") + " killed (most often: out of memory)" +
                (f"; the fork server exited with {code}" if code else ""),
                fix="build with fewer processes (workers=1, or --workers 1)") from None

    def _check(self) -> None:
        """Raise when nothing moved for :data:`STALL_SECONDS`."""
        cpu = {pid: _cpu_ticks(pid) for pid in [self.server.pid, *self.pids.values()]}
        now = time.monotonic()
        if cpu != self.cpu:
            self.cpu, self.moved = cpu, now
            return
        idle = now - self.moved
        if idle > STALL_SECONDS:
            names = ", ".join(repr(self.names.get(k, k)) for k in self.busy.values()) or \
                "none started"
            raise RadHarmonyError(
                f"The processes building the mixture's sources made no progress for "
                f"{idle:.0f} s", expected=f"a source finished or a process using CPU within "
                f"{STALL_SECONDS:g} s", found=f"sources in progress: {names}; processes "
                f"{sorted(self.pids.values())} idle (a deadlock, or a file read that never "
                "returns)", fix="build with workers=1 to see where it stops (or raise "
                "radharmony.mixture.spool.STALL_SECONDS for a very slow disk)")

    def stop(self, *, kill: bool) -> None:
        """End the processes: told to stop once their calls are done, or (``kill``) at once,
        even stuck or stopped ones."""
        if kill:  # the processes the server forked, even one that never said its pid
            for pid in {*self.pids.values(), *_children(self.server.pid)}:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            self.server.kill()
        else:
            for conn in self.conns:
                try:
                    conn.send(None)
                except OSError:
                    pass
        for conn in self.conns:
            conn.close()
        try:
            self.server.wait(timeout=None if kill else STALL_SECONDS)
        except subprocess.TimeoutExpired:
            self.stop(kill=True)
        shutil.rmtree(self.private, ignore_errors=True)


def _children(pid: int) -> set[int]:
    """The processes ``pid`` forked that still run (Linux ``/proc``)."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out.update(int(c) for c in task.read_text().split())
        except (OSError, ValueError):
            pass
    return out


def _cpu_ticks(pid: int) -> int | None:
    """User + system CPU time of process ``pid`` in clock ticks (None: gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


def remove_spools(folder: Path, prefix: str) -> None:
    """Remove the spools named ``prefix...`` left in ``folder``."""
    for left in Path(folder).glob(spool_path(Path("."), prefix + "*", "").name):
        left.unlink(missing_ok=True)


__all__ = ["DEFAULT_PROCESSES", "INHERITED", "Jobs", "POLL_SECONDS", "PRELOAD", "RemoteTraceback",
           "STALL_SECONDS", "Spool", "process_count", "remove_spools", "replay", "serve", "spool_path",
           "start_server"]
