"""Grading one submission in a process of its own, limited in memory and stopped from outside.

Everything a submission sends (its notebook file, its kernel's messages and replies) is read in a
*worker* process, not in the grader that writes ``grades.csv``. Workers are forked from a small
server (:func:`_zygote_main`) that has already imported torch and the grader's modules, so
starting one takes milliseconds. A worker

* caps its own address space at what it already maps (the server's libraries: torch's CUDA build
  maps about 3 GB, its CPU build under 1 GB; measured when it starts, never assumed) plus
  ``RunOptions.worker_memory_mb`` (a soft limit: the sandbox it starts sets its own) and dies with
  the server (``PR_SET_PDEATHSIG``), which dies with the grader;
* is killed by the grader at the submission's hard deadline (:func:`hard_deadline`: start-up +
  cells + hidden tests + ``GRACE_SECONDS``), whatever its kernel does; killing it kills its
  sandbox (bubblewrap dies with its parent) and the grader removes the sandbox's cgroup;
* sends back one JSON record, read with a size cap (a record is data, never unpickled).
"""

from __future__ import annotations

import json
import os
import pickle
import resource
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Optional

from .runner import START_SECONDS, RunOptions

__all__ = ["grade_isolated", "hard_deadline", "GRACE_SECONDS", "MAX_RESULT_BYTES"]

GRACE_SECONDS = 30.0
MAX_RESULT_BYTES = 64 * 1024 * 1024
_LENGTH = struct.Struct("<Q")


def hard_deadline(options: RunOptions) -> float:
    """Seconds after which a submission's worker (and sandbox) is killed, whatever it does."""
    return START_SECONDS + options.timeout + options.tests_timeout + GRACE_SECONDS


# ------------------------------------------------------------------------------------------------
# The server that forks workers (runs in its own process)
# ------------------------------------------------------------------------------------------------


def _recv_exactly(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def _zygote_main(fd: int) -> None:
    """Fork one worker per task received on socket ``fd`` (with the result socket's descriptor)."""
    import ctypes

    sock = socket.socket(fileno=fd)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: gone with the grader
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    import jupyter_client.session  # noqa: F401 - imported once here, shared by every worker
    import nbformat  # noqa: F401
    import torch  # noqa: F401
    import zmq  # noqa: F401

    from . import grade, hidden, references, runner  # noqa: F401
    from .sandbox import library_mb

    library_mb()  # measured once here: every worker and its sandboxes inherit the figure
    while True:
        try:
            header, fds, _, _ = socket.recv_fds(sock, _LENGTH.size, 1)
            if len(header) < _LENGTH.size or not fds:
                return
            task = _recv_exactly(sock, _LENGTH.unpack(header)[0])
        except (EOFError, OSError):
            return
        pid = os.fork()
        if pid == 0:  # the worker
            sock.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            libc.prctl(1, signal.SIGKILL)
            code = 0
            try:
                _worker(pickle.loads(task), fds[0])
            except BaseException:  # noqa: BLE001
                code = 1
            os._exit(code)
        os.close(fds[0])
        try:
            sock.sendall(struct.pack("<q", pid))
        except OSError:
            return


def _worker(task: Dict[str, Any], out_fd: int) -> None:
    """In the worker: limit memory, grade, send the record back as JSON."""
    from .sandbox import mapped_mb

    options: RunOptions = task["options"]
    mapped = mapped_mb()
    soft = (mapped + options.worker_memory_mb) * 1024 * 1024  # what it maps already, plus its budget
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or soft <= hard:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))  # soft only: the sandbox sets its own
    try:  # before any of the notebook is read: a failure here is the grader's, never the notebook's
        from . import grade
        from .hidden import load_hidden_tests
        from .references import ReferenceCache

        tests = load_hidden_tests(Path(task["hidden_path"])) if task["hidden_path"] else {}
        cache = ReferenceCache.from_bytes(task["cache"])
    except BaseException as err:  # noqa: BLE001 - reported to the grader, never raised there
        tests = cache = None
        data = json.dumps({"worker_error": "crash", "detail": f"{type(err).__name__}: {err}"[:500]}).encode()
    if cache is not None:
        try:
            record = grade.grade_submission(task["sub"], task["course"], task["chapter"], task["release_nb"],
                                            task["labels"], tests, cache, options, task["executed"])
            record["worker_peak_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
            record["worker_mapped_mb"] = mapped
            data = json.dumps(record, default=str).encode("utf-8")
        except MemoryError:  # what the notebook's outputs and replies took, once its kernel runs
            from .runner import KERNEL_STARTED

            peak = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
            data = json.dumps({"worker_error": "memory", "worker_peak_mb": peak} if KERNEL_STARTED[0] else
                              {"worker_error": "crash", "detail": f"MemoryError before the notebook's kernel "
                                                                  f"started (the worker's limit is too small: "
                                                                  f"{options.worker_memory_mb} MB)"}).encode()
        except BaseException as err:  # noqa: BLE001 - reported to the grader, never raised there
            data = json.dumps({"worker_error": "crash", "detail": f"{type(err).__name__}: {err}"[:500]}).encode()
    if len(data) > MAX_RESULT_BYTES:
        data = json.dumps({"worker_error": "crash", "detail": "the record is too large"}).encode()
    with os.fdopen(out_fd, "wb") as handle:
        handle.write(_LENGTH.pack(len(data)) + data)


# ------------------------------------------------------------------------------------------------
# The grader's side
# ------------------------------------------------------------------------------------------------


class _Zygote:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process: Optional[subprocess.Popen] = None
        self.sock: Optional[socket.socket] = None

    def _start(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        code = (f"import sys; sys.path[:0] = {[p for p in sys.path if p]!r}; "
                f"from attention_book.instructor.worker import _zygote_main; _zygote_main({theirs.fileno()})")
        self.process = subprocess.Popen([sys.executable, "-c", code], pass_fds=[theirs.fileno()],
                                        stdin=subprocess.DEVNULL)
        theirs.close()
        self.sock = mine

    def fork(self, task: bytes, result_fd: int) -> int:
        """Start a worker on ``task``; its result goes to ``result_fd``. Returns its PID."""
        with self.lock:
            for attempt in range(2):
                if self.process is None or self.process.poll() is not None:
                    self._start()
                try:
                    socket.send_fds(self.sock, [_LENGTH.pack(len(task))], [result_fd])
                    self.sock.sendall(task)
                    return struct.unpack("<q", _recv_exactly(self.sock, 8))[0]
                except (OSError, EOFError):
                    if self.process is not None:
                        self.process.kill()
                        self.process.wait()
                    self.process = None
                    if attempt:
                        raise
        raise RuntimeError("unreachable")  # pragma: no cover


_ZYGOTE = _Zygote()


def grade_isolated(sub, course, chapter, release_nb, labels, hidden_path: Optional[Path], cache_bytes: bytes,
                   options: RunOptions, executed: Optional[Path]) -> Dict[str, Any]:
    """``grade.grade_submission`` run in a worker; a record whatever happens. A worker that dies,
    runs out of memory or passes its hard deadline gives a record with ``worker_error``."""
    task = pickle.dumps({"sub": sub, "course": course, "chapter": chapter, "release_nb": release_nb,
                         "labels": labels, "hidden_path": str(hidden_path) if hidden_path else "",
                         "cache": cache_bytes, "options": options, "executed": executed})
    read_end, write_end = os.pipe()
    started = time.monotonic()
    limit = hard_deadline(options)
    try:
        pid = _ZYGOTE.fork(task, write_end)
    finally:
        os.close(write_end)
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:  # already finished
        pidfd = None
    data = b""
    complete = False
    try:
        need = None
        while time.monotonic() - started < limit:
            ready, _, _ = select.select([read_end], [], [], min(1.0, limit - (time.monotonic() - started)))
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            data += chunk
            if need is None and len(data) >= _LENGTH.size:
                need = _LENGTH.unpack(data[:_LENGTH.size])[0]
                if need > MAX_RESULT_BYTES:
                    break
            if need is not None and len(data) >= _LENGTH.size + need:
                complete = True
                break
    finally:
        os.close(read_end)
        seconds = time.monotonic() - started
        if pidfd is not None:
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)  # finished or not: nothing of it stays
            except OSError:
                pass
            os.close(pidfd)
        _remove_cgroups(pid)
    if not complete:
        if seconds >= limit - 1:
            return {"worker_error": "deadline", "seconds": round(seconds, 2)}
        return {"worker_error": "died", "detail": "no record", "seconds": round(seconds, 2)}
    try:
        record = json.loads(data[_LENGTH.size:_LENGTH.size + need].decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return {"worker_error": "crash", "detail": "unreadable record"}
    if not isinstance(record, dict):
        return {"worker_error": "crash", "detail": "unreadable record"}
    return record


def _remove_cgroups(worker_pid: Optional[int]) -> None:
    """Sandboxes of a worker that was killed: their cgroups (and anything still in them)."""
    if worker_pid is None or os.geteuid() != 0:
        return
    from .sandbox import Cgroup

    for base, version in ((Path("/sys/fs/cgroup/attention-book"), 2), (Path("/sys/fs/cgroup/memory/attention-book"), 1),
                          (Path("/sys/fs/cgroup/pids/attention-book"), 1)):
        try:
            entries = list(base.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir() and f"-{worker_pid}-" in entry.name:
                Cgroup([entry], version).remove()
