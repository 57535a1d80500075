"""Running one notebook in an isolated kernel and asking it for values (the grader's side).

:func:`run_notebook` executes a list of code cells in a fresh kernel started inside the
:class:`~.sandbox.Sandbox` (or, with ``unsafe``, a plain kernel) and, after the cells listed in
``points``, calls ``on_point(labels, session)`` with a live :class:`KernelSession`: the grader's
hidden tests then ask the kernel for values (``session.call(...)``), one request file and one
reply file per call in the exchange folder. Replies are read without following links, size-capped
and loaded with ``torch.load(weights_only=True)``; anything but data is refused.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import shutil
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from .hidden import AnswerError, Opaque, Session, answer_error
from .sandbox import NOBODY, Limits, Sandbox, kernel_env

__all__ = ["RunOptions", "RunResult", "KernelSession", "run_notebook", "read_reply", "TIMEOUT_ENAME"]

TIMEOUT_ENAME = "AutograderTimeLimit"
MAX_REPLY_BYTES = 64 * 1024 * 1024


@dataclass
class RunOptions:
    timeout: float = 120.0  # seconds for the whole notebook
    call_timeout: float = 30.0  # seconds for one call of a hidden test
    max_output_chars: int = 20_000  # per cell, kept in the executed copy
    max_messages: int = 2_000  # output messages per cell; beyond: the cell is interrupted
    unsafe: bool = False  # no sandbox (the instructor said so)
    limits: Limits = field(default_factory=Limits)
    hidden_paths: List[Path] = field(default_factory=list)  # never visible in the sandbox


@dataclass
class RunResult:
    stop: Optional[str] = None  # why the run ended early
    cell_errors: List[dict] = field(default_factory=list)
    seconds: float = 0.0
    truncated: List[int] = field(default_factory=list)  # cells whose output was capped


def _kernel_manager(box: Optional[Sandbox], exchange: Path):
    from jupyter_client.manager import AsyncKernelManager

    class IsolatedKernelManager(AsyncKernelManager):
        """Starts the kernel behind the sandbox prefix; interrupts by message (a signal would
        stop bubblewrap, not the kernel)."""

        def format_kernel_cmd(self, extra_arguments=None):
            cmd = super().format_kernel_cmd(extra_arguments)
            return (box.prefix() if box is not None else []) + cmd

        def write_connection_file(self, **kwargs):
            super().write_connection_file(**kwargs)
            if box is not None and os.geteuid() == 0:
                os.chown(self.connection_file, NOBODY, NOBODY)

        async def _async_interrupt_kernel(self):
            msg = self.session.msg("interrupt_request", content={})
            self._connect_control_socket()
            self.session.send(self._control_socket, msg)

        interrupt_kernel = _async_interrupt_kernel

    km = IsolatedKernelManager(kernel_name="python3", transport="ipc", ip=str(exchange / "k"))
    km.connection_file = str(exchange / "kernel.json")
    return km


def _client_class():
    from nbclient import NotebookClient
    from nbformat.v4 import new_output

    class CappedClient(NotebookClient):
        """Keeps ``max_output_chars`` per cell; interrupts a cell after ``max_messages`` outputs."""

        max_output_chars = 20_000
        max_messages = 2_000

        def output(self, outs, msg, display_id, cell_index):
            counts = self.__dict__.setdefault("_ab_counts", {})
            used, messages = counts.get(cell_index, (0, 0))
            content = msg.get("content", {})
            size = len(str(content.get("text", ""))) + sum(len(str(v)) for v in (content.get("data") or {}).values())
            counts[cell_index] = (used + size, messages + 1)
            if messages + 1 == self.max_messages:
                outs.append(new_output("stream", name="stderr", text=(
                    f"\n[autograder: more than {self.max_messages} outputs: cell interrupted]\n")))
                self.__dict__.setdefault("_ab_truncated", []).append(cell_index)
                import asyncio

                asyncio.ensure_future(self.km.interrupt_kernel())  # output() runs inside the loop
                return None
            if messages + 1 > self.max_messages:
                return None
            if used + size > self.max_output_chars:
                if used <= self.max_output_chars:
                    outs.append(new_output("stream", name="stderr", text="\n[autograder: output truncated]\n"))
                return None
            return super().output(outs, msg, display_id, cell_index)

    return CappedClient


def _is_data(value: Any, depth: int = 0) -> bool:
    import torch

    if depth > 8:
        return False
    if value is None or isinstance(value, (bool, int, float, str, torch.Tensor)):
        return True
    if isinstance(value, (tuple, list)):
        return all(_is_data(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_data(v, depth + 1) for k, v in value.items())
    return False


def plain_values(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"__opaque__"} and isinstance(value["__opaque__"], str):
            return Opaque(value["__opaque__"])
        return {k: plain_values(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(plain_values(v) for v in value)
    if isinstance(value, list):
        return [plain_values(v) for v in value]
    return value


def read_reply(path: Path, limit: int = MAX_REPLY_BYTES) -> Any:
    """Load a file the kernel wrote: a regular file (no link), at most ``limit`` bytes, data only."""
    import torch

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as err:
        raise AnswerError("NoReply", f"the kernel wrote no answer ({err.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise AnswerError("BadReply", "the answer file is not a plain file")
        if info.st_size > limit:
            raise AnswerError("BadReply", f"the answer is larger than {limit // 2**20} MB")
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    try:
        value = torch.load(io.BytesIO(data), weights_only=True, map_location="cpu")
    except Exception as err:
        raise AnswerError("BadReply", f"the answer is not data ({type(err).__name__})") from None
    if not isinstance(value, dict) or not isinstance(value.get("ok"), bool) or not _is_data(value):
        raise AnswerError("BadReply", "the answer is not in the expected form")
    return value


class KernelSession(Session):
    """Asks a running kernel for values (see :mod:`.kernel_side`)."""

    def __init__(self, client, exchange: Path, call_timeout: float):
        self.client, self.exchange, self.call_timeout = client, exchange, call_timeout
        self.counter = itertools.count(1)
        self.responsive = True
        self.source = ""
        self.calls = 0

    def run(self, code: str, **inputs: Any) -> Any:
        import torch

        if not self.responsive:
            raise AnswerError("KernelUnresponsive", "the notebook stopped responding")
        number = next(self.counter)
        request, reply = self.exchange / f"call-{number}.pt", self.exchange / f"reply-{number}.pt"
        torch.save({"code": code, "inputs": inputs}, request)
        os.chmod(request, 0o644)
        self.calls += 1
        source = ("__import__('attention_book.instructor.kernel_side', fromlist=['answer']).answer("
                  f"get_ipython().user_ns, {str(request)!r}, {str(reply)!r})")
        kc = self.client.kc
        msg_id = kc.execute(source, silent=True, store_history=False, allow_stdin=False)
        self.client.timeout = max(1, int(math.ceil(self.call_timeout)))
        answer = self.client.wait_for_reply(msg_id)
        try:
            if answer is None:
                probe = kc.execute("pass", silent=True, store_history=False, allow_stdin=False)
                self.client.timeout = 10
                self.responsive = self.client.wait_for_reply(probe) is not None
                raise AnswerError("TimeLimit", f"the call ran past its time limit ({self.call_timeout:g} s)")
            data = read_reply(reply)
        finally:
            for path in (request, reply):
                try:
                    os.unlink(path)
                except OSError:
                    pass
        if not data["ok"]:
            raise answer_error(str(data.get("ename")), str(data.get("evalue")))
        return plain_values(data["value"])


def run_notebook(cells: List[dict], points: Dict[int, List[str]], on_point: Callable[[List[str], KernelSession], None],
                 options: RunOptions, course_root: Path, files: Optional[Dict[str, bytes]] = None) -> RunResult:
    """Execute ``cells`` (code cells, in order; outputs written into them) in a fresh isolated kernel.

    After cell ``i`` (index in ``cells``) the labels ``points[i]`` are handed to ``on_point``;
    ``points[-1]`` are handed over at the end. Never raises for the notebook's misbehaviour.
    """
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    started = time.monotonic()
    result = RunResult()
    temp = Path(tempfile.mkdtemp(prefix="ab-grade-"))
    temp.chmod(0o755)
    work, exchange = temp / "work", temp / "exchange"
    box = None if options.unsafe else Sandbox(course_root, work, exchange, hidden=options.hidden_paths,
                                              limits=options.limits)
    if box is not None:
        box.prepare()
    else:
        work.mkdir()
        exchange.mkdir()
    for name, data in (files or {}).items():
        (work / name).write_bytes(data)
        if box is not None and os.geteuid() == 0:
            os.chown(work / name, NOBODY, NOBODY)
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    client = _client_class()(
        nb, km=_kernel_manager(box, exchange), timeout=int(math.ceil(options.timeout)), allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={"ename": TIMEOUT_ENAME, "evalue": "time limit reached", "traceback": []},
        record_timing=False, iopub_timeout=4, shutdown_kernel="immediate",
        resources={"metadata": {"path": str(work)}},
    )
    client.max_output_chars = options.max_output_chars
    client.max_messages = options.max_messages
    running = 0
    session: Optional[KernelSession] = None
    try:
        with client.setup_kernel(env=kernel_env(work), cwd=str(work), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL):
            session = KernelSession(client, exchange, options.call_timeout)
            deadline = time.monotonic() + options.timeout
            for index, cell in enumerate(cells):
                if cell.get("source", "").strip():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        result.stop = f"the notebook ran past its time limit ({options.timeout:g} s)"
                        break
                    client.timeout = max(1, int(math.ceil(remaining)))
                    running = index + 1
                    try:
                        client.execute_cell(cell, index)
                    except CellTimeoutError:
                        result.stop = f"the notebook ran past its time limit ({options.timeout:g} s)"
                    if any(o.get("ename") == TIMEOUT_ENAME for o in cell.get("outputs", [])):
                        result.stop = f"the notebook ran past its time limit ({options.timeout:g} s)"
                if points.get(index):
                    on_point(points[index], session)
                if not session.responsive:
                    result.stop = result.stop or "the notebook stopped responding"
                if result.stop:
                    break
            if not result.stop and points.get(-1):
                on_point(points[-1], session)
    except DeadKernelError:
        result.stop = result.stop or (f"the kernel died in cell {running} (the code crashed, exited or "
                                      "ran out of memory)")
    except Exception as err:  # kernel failed to start, ...
        result.stop = result.stop or f"the autograder could not run the notebook: {type(err).__name__}: {err}"
    finally:
        _cleanup(client)
        shutil.rmtree(temp, ignore_errors=True)
    result.truncated = sorted(set(client.__dict__.get("_ab_truncated", [])))
    result.cell_errors = [
        {"cell": i, "ename": str(o.get("ename"))[:100], "evalue": str(o.get("evalue"))[:200]}
        for i, c in enumerate(cells) for o in c.get("outputs", []) if o.get("output_type") == "error"
    ][:50]
    result.seconds = round(time.monotonic() - started, 2)
    return result


def _cleanup(client) -> None:
    """Make sure the kernel's process (bubblewrap: the whole PID namespace with it) is gone."""
    from jupyter_core.utils import run_sync

    km = getattr(client, "km", None)
    kc = getattr(client, "kc", None)
    if kc is not None:
        try:
            kc.stop_channels()
        except Exception:
            pass
    if km is not None:
        try:
            if run_sync(km.is_alive)():
                run_sync(km.shutdown_kernel)(now=True)
        except Exception:
            pass
    provisioner = getattr(km, "provisioner", None) if km is not None else None
    process = getattr(provisioner, "process", None) if provisioner is not None else None
    if process is not None and process.poll() is None:
        try:
            process.kill()
            process.wait(timeout=10)
        except Exception:
            pass
