"""Running one notebook in an isolated kernel and asking it for values (the grader's side).

:func:`run_notebook` starts a kernel in a :class:`~.sandbox.Sandbox`, executes a list of code
cells and, after the cells listed in ``points``, calls ``on_point(labels, session)`` with a live
:class:`KernelSession`: the grader's hidden tests then ask the kernel for values.

Everything the kernel sends is hostile data, and every wait has a deadline:

* the kernel's sockets live inside the sandbox's own tmpfs; the grader reaches them through
  ``/proc/<pid>/root`` one path component at a time without following links and connects to the
  socket it found (``/proc/self/fd/N``): a link or FIFO planted there is refused, never opened;
* messages are read with ZeroMQ's size and queue limits; per cell at most ``max_output_chars``
  characters are kept, and beyond ``max_messages`` outputs or ``max_output_mb`` MB of them the cell
  is interrupted and the grader stops reading that cell's outputs. Messages answering another request are dropped;
* the cells share one deadline (``timeout``), the grader's calls another (``tests_timeout``,
  each call at most ``call_timeout``): replies that never end or come with strange ids change
  nothing; at a deadline the kernel is interrupted and, if it does not answer, killed;
* a call is a fixed execute request (``kernel_side.serve()``, no code of the tests) and one
  frame of :mod:`.wire` data on a pipe the grader owns; the reply comes back on another pipe and
  is decoded under :class:`~.wire.Bounds` (size, depth, items, tensors that own their storage).
  A reply that breaks a bound fails that test and flags the submission;
* at the end the sandbox is killed (bubblewrap is PID 1 of its namespace) and nothing of it is
  left: its files were in its own tmpfs, its processes in its PID namespace (and cgroup).
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import wire
from .hidden import AnswerError, Session, answer_error
from .sandbox import (INSIDE_KERNEL, IsolationError, Limits, Sandbox, SandboxProcess,
                      kernel_env, open_inside, sandbox_python)

__all__ = ["RunOptions", "RunResult", "KernelSession", "run_notebook", "TIMEOUT_ENAME", "ReplyRefused", "PAUSE_STOP",
           "TRIGGER", "HIDDEN_OUTPUTS_NOTE", "COULD_NOT_RUN"]

TIMEOUT_ENAME = "AutograderTimeLimit"
MAX_REPLY_BYTES = 64 * 1024 * 1024
MAX_MESSAGE_BYTES = 8 * 1024 * 1024  # one ZeroMQ frame; larger: the connection is dropped
RECEIVE_QUEUE = 32  # messages ZeroMQ may hold for us per socket
PORTS = {"shell": 1, "iopub": 2, "stdin": 3, "control": 4, "hb": 5}
TRIGGER = "__import__('attention_book.instructor.kernel_side', fromlist=['serve']).serve()"
START_SECONDS = 90.0  # starting the kernel (not counted in the notebook's time)
INTERRUPT_GRACE = 5.0
COULD_NOT_RUN = "the autograder could not run the notebook"  # a stop that is the grader's failure
#: whether this process has started a kernel yet (a worker grades one notebook): before that, nothing
#: the notebook's code sent has been read, so a failure is the grader's own
KERNEL_STARTED = [False]
HIDDEN_OUTPUTS_NOTE = ("[autograder: this cell ran after the hidden tests had started; its outputs are not kept "
                       "in the executed copy, since they could show the tests' inputs]\n")


@dataclass
class RunOptions:
    timeout: float = 120.0  # seconds for the notebook's cells
    call_timeout: float = 30.0  # seconds for one call of a hidden test
    tests_timeout: float = 120.0  # seconds for all calls of the hidden tests of one notebook
    max_output_chars: int = 20_000  # per cell, kept in the executed copy
    max_messages: int = 2_000  # output messages per cell; beyond: the cell is interrupted
    max_output_mb: int = 64 * MAX_MESSAGE_BYTES // 2 ** 20  # output read per cell; beyond: interrupted
    max_reply_bytes: int = MAX_REPLY_BYTES
    unsafe: bool = False  # no sandbox (the instructor said so)
    limits: Limits = field(default_factory=Limits)
    hidden_paths: List[Path] = field(default_factory=list)  # never visible in the sandbox
    keep_all_outputs: bool = False  # keep outputs of cells run after the hidden tests started
    self_check_rerun: bool = True  # grade: run again without tests for self-checks whose output was not kept
    slot: str = "grade"  # a name for the sandbox's cgroup
    worker_memory_mb: int = 3072  # address space of the worker reading one submission (soft limit)


@dataclass
class RunResult:
    stop: Optional[str] = None  # why the run ended early
    cell_errors: List[dict] = field(default_factory=list)
    seconds: float = 0.0
    truncated: List[int] = field(default_factory=list)  # cells whose output was capped
    flags: List[str] = field(default_factory=list)  # misbehaviour of the kernel (flood, forged replies, ...)
    calls: int = 0
    memory_peak_mb: Optional[float] = None  # the sandbox's peak memory (cgroup), when known
    escaped: List[int] = field(default_factory=list)  # processes alive after the sandbox was killed
    timed_out: bool = False  # a deadline (cells, hidden-test calls) cut the run: more time may change it
    first_call_cell: Optional[int] = None  # the cell after which the hidden tests began (None: no call)


class ReplyRefused(AnswerError):
    """A reply that is not data within the bounds: the test fails and the submission is flagged."""


def _refused(text: str) -> ReplyRefused:
    return ReplyRefused("BadReply", text, from_grader=True)


class KernelDied(Exception):
    pass


# ------------------------------------------------------------------------------------------------
# The kernel
# ------------------------------------------------------------------------------------------------


class Kernel:
    """One kernel: its sandbox, its sockets, its call pipes."""

    def __init__(self, options: RunOptions, course_root: Path):
        self.options, self.course_root = options, course_root
        self.box: Optional[SandboxProcess] = None
        self.plain = None  # subprocess.Popen in unsafe mode
        self.temp: Optional[str] = None  # unsafe mode: the socket folder
        self.sockets: Dict[str, Any] = {}
        self.path_fds: List[int] = []
        self.context = None
        self.session = None
        self.responsive = True
        self.flags: List[str] = []
        self.request_w = self.request_r = self.reply_r = -1

    # -------------------------------------------------------------------- start

    def start(self, deadline: float) -> None:
        import zmq
        from jupyter_client.session import Session as WireSession

        key = secrets.token_hex(32)
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        for fd in (request_w, reply_r):
            try:
                fcntl.fcntl(fd, 1031, 1 << 20)  # F_SETPIPE_SZ: 1 MB, fewer round trips for big values
            except OSError:
                pass
        self.request_w, self.request_r, self.reply_r = request_w, request_r, reply_r
        for fd in (request_w, request_r, reply_r):
            os.set_blocking(fd, False)
            os.set_inheritable(fd, False)
        command = [sandbox_python(), "-m", "ipykernel_launcher", "-f", f"{INSIDE_KERNEL}/kernel.json",
                   "--HistoryManager.hist_file=:memory:"]
        inside_ip = f"{INSIDE_KERNEL}/k"
        if self.options.unsafe:
            import subprocess

            self.temp = tempfile.mkdtemp(prefix="ab-kernel-")
            inside_ip = f"{self.temp}/k"
            connection = self._connection(key, inside_ip)
            conn_file = Path(self.temp) / "kernel.json"
            conn_file.write_text(json.dumps(connection))
            command[4] = str(conn_file)
            env = kernel_env(home=self.temp, extra={"ATTENTION_BOOK_GRADER_FDS": f"{request_r},{reply_w}"})
            env["TMPDIR"] = self.temp
            self.plain = subprocess.Popen(command, pass_fds=[request_r, reply_w], env=env, cwd=self.temp,
                                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                          stderr=subprocess.DEVNULL, start_new_session=True)
        else:
            box = Sandbox(self.course_root, hidden=list(self.options.hidden_paths), limits=self.options.limits)
            connection = self._connection(key, inside_ip)
            self.box = box.start(command, kernel_env(), connection, (request_r, reply_w), self.options.slot)
        os.close(reply_w)  # the kernel holds the only writer: EOF when it is gone
        self.context = zmq.Context()
        self.session = WireSession(key=key.encode(), signature_scheme="hmac-sha256", username="grader")
        urls = self._socket_urls(deadline)
        kinds = {"shell": zmq.DEALER, "iopub": zmq.SUB, "control": zmq.DEALER}
        for name, kind in kinds.items():
            sock = self.context.socket(kind)
            sock.linger = 0
            sock.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
            sock.setsockopt(zmq.RCVHWM, RECEIVE_QUEUE)
            if kind == zmq.SUB:
                sock.setsockopt(zmq.SUBSCRIBE, b"")
            sock.connect(urls[name])
            self.sockets[name] = sock
        # the kernel is ready when it answers kernel_info (IOPub may take a moment to connect)
        while True:
            msg = self.session.send(self.sockets["shell"], "kernel_info_request", {})
            reply = self._wait_shell(msg["header"]["msg_id"], min(deadline, time.monotonic() + 2.0))
            if reply is not None:
                break
            if time.monotonic() > deadline:
                raise IsolationError("the kernel did not answer in time")
        self._drain_iopub(time.monotonic() + 0.5)

    @staticmethod
    def _connection(key: str, ip: str) -> dict:
        info = {f"{name}_port": port for name, port in PORTS.items()}
        info.update({"ip": ip, "key": key, "transport": "ipc", "signature_scheme": "hmac-sha256",
                     "kernel_name": "python3"})
        return info

    def _socket_urls(self, deadline: float) -> Dict[str, str]:
        if self.plain is not None:
            urls = {name: f"ipc://{self.temp}/k-{port}" for name, port in PORTS.items()}
            while not all(os.path.exists(f"{self.temp}/k-{PORTS[n]}") for n in ("shell", "iopub", "control")):
                if time.monotonic() > deadline or self.plain.poll() is not None:
                    raise IsolationError("the kernel did not start")
                time.sleep(0.05)
            return urls
        child = self.box.wait_child_pid(deadline)
        urls: Dict[str, str] = {}
        for name in ("shell", "iopub", "control"):
            relative = f"{INSIDE_KERNEL}/k-{PORTS[name]}"
            while True:
                try:
                    fd = open_inside(child, relative)
                    break
                except FileNotFoundError:
                    pass
                except OSError as err:  # a link, FIFO, ... where the socket belongs: refuse
                    raise IsolationError(f"the kernel's socket is not a socket ({err.strerror})") from None
                if time.monotonic() > deadline or not self.box.alive():
                    raise IsolationError("the kernel did not start" + (
                        f": {self.box.error_text()}" if not self.box.alive() else " in time"))
                time.sleep(0.05)
            self.path_fds.append(fd)
            urls[name] = f"ipc:///proc/self/fd/{fd}"
        return urls

    # -------------------------------------------------------------------- messages

    def alive(self) -> bool:
        if self.plain is not None:
            return self.plain.poll() is None
        return self.box is not None and self.box.alive()

    def _recv(self, name: str):
        """One message from socket ``name`` (None if none is waiting or it is not valid)."""
        import zmq

        try:
            frames = self.sockets[name].recv_multipart(zmq.NOBLOCK, copy=True)
        except zmq.Again:
            return None, 0
        size = sum(len(f) for f in frames)
        try:
            _, frames = self.session.feed_identities(frames, copy=True)
            return self.session.deserialize(frames, content=True, copy=True), size
        except Exception:  # forged, unsigned or malformed: dropped
            return {}, size

    def _poll(self, names: List[str], timeout: float) -> List[str]:
        import zmq

        poller = zmq.Poller()
        for name in names:
            poller.register(self.sockets[name], zmq.POLLIN)
        events = dict(poller.poll(max(0, int(timeout * 1000))))
        return [name for name in names if self.sockets[name] in events]

    def _wait_shell(self, msg_id: str, deadline: float) -> Optional[dict]:
        """The shell reply to ``msg_id``, or None at the deadline; other messages are dropped."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self.alive():
                raise KernelDied()
            if self._poll(["shell"], min(remaining, 0.5)):
                for _ in range(100):  # a bounded batch: a flood cannot keep us here past the deadline
                    msg, _ = self._recv("shell")
                    if msg is None:
                        break
                    if (msg.get("parent_header") or {}).get("msg_id") == msg_id:
                        return msg

    def _drain_iopub(self, deadline: float) -> None:
        while time.monotonic() < deadline and self._poll(["iopub"], 0):
            for _ in range(100):
                msg, _ = self._recv("iopub")
                if msg is None:
                    break

    def interrupt(self) -> None:
        try:
            self.session.send(self.sockets["control"], "interrupt_request", {})
        except Exception:
            pass

    def execute(self, cell: dict, deadline: float) -> str:
        """Run one cell; its outputs go into ``cell["outputs"]``. Returns "ok", "timeout",
        "flood" (interrupted for too many outputs), "capped" (outputs truncated) or raises KernelDied."""
        self._drain_iopub(time.monotonic() + 0.2)
        content = {"code": cell.get("source", ""), "silent": False, "store_history": True,
                   "user_expressions": {}, "allow_stdin": False, "stop_on_error": False}
        msg = self.session.send(self.sockets["shell"], "execute_request", content)
        msg_id = msg["header"]["msg_id"]
        options = self.options
        outputs = Outputs(cell, options.max_output_chars)
        reply = None
        idle = False
        messages = 0
        read_bytes = 0
        reading_outputs = True
        outcome = "ok"
        interrupted_at: Optional[float] = None
        iopub_grace: Optional[float] = None
        while True:
            now = time.monotonic()
            if reply is not None and (idle or not reading_outputs):
                break
            if reply is not None and iopub_grace is not None and now > iopub_grace:
                break  # the reply came, the idle status did not: stop waiting for stray outputs
            if now > deadline and interrupted_at is None:
                self.interrupt()
                interrupted_at = now
                outcome = "timeout"
            if interrupted_at is not None and now > interrupted_at + INTERRUPT_GRACE:
                raise TimeoutError("the kernel ignored the interrupt")
            if not self.alive():
                raise KernelDied()
            limit = (interrupted_at + INTERRUPT_GRACE) if interrupted_at is not None else deadline
            wait = max(0.0, min(limit - now, 0.5))
            names = ["shell"] + (["iopub"] if reading_outputs else [])
            ready = self._poll(names, wait)
            if "shell" in ready:
                for _ in range(100):
                    got, _ = self._recv("shell")
                    if got is None:
                        break
                    if (got.get("parent_header") or {}).get("msg_id") == msg_id:
                        reply = got
                        iopub_grace = time.monotonic() + 3.0
                        break
            if "iopub" in ready and reading_outputs:
                for _ in range(200):
                    got, size = self._recv("iopub")
                    if got is None:
                        break
                    read_bytes += size
                    if (got.get("parent_header") or {}).get("msg_id") != msg_id:
                        continue
                    kind = (got.get("header") or {}).get("msg_type")
                    if kind == "status":
                        if (got.get("content") or {}).get("execution_state") == "idle":
                            idle = True
                        continue
                    if kind in ("execute_input", "comm_open", "comm_msg", "comm_close"):
                        continue
                    messages += 1
                    if messages >= options.max_messages or read_bytes > options.max_output_mb * 2 ** 20:
                        outputs.note(f"\n[autograder: more than {options.max_messages} outputs (or "
                                     f"{options.max_output_mb} MB of them): cell interrupted]\n")
                        self.interrupt()
                        reading_outputs = False
                        outcome = "flood"
                        if interrupted_at is None:
                            interrupted_at = time.monotonic()
                        break
                    outputs.add(kind, got.get("content") or {})
            if reply is not None and interrupted_at is not None and outcome == "flood":
                break
        if outcome == "timeout":
            cell.setdefault("outputs", []).append({"output_type": "error", "ename": TIMEOUT_ENAME,
                                                   "evalue": "time limit reached", "traceback": []})
        if outputs.capped:
            outcome = outcome if outcome != "ok" else "capped"
        return outcome

    # -------------------------------------------------------------------- calls

    def call(self, payload: bytes, deadline: float, limit: int) -> bytes:
        """Send one request frame, get one reply frame (the call's execute request is TRIGGER)."""
        wire.drain(self.reply_r)
        wire.drain(self.request_r)  # anything the kernel left unread from an earlier call
        nonce = secrets.randbits(63)
        content = {"code": TRIGGER, "silent": True, "store_history": False, "user_expressions": {},
                   "allow_stdin": False, "stop_on_error": False}
        msg = self.session.send(self.sockets["shell"], "execute_request", content)
        msg_id = msg["header"]["msg_id"]
        try:
            wire.write_frame(self.request_w, nonce, payload, deadline)
            data = wire.read_frame(self.reply_r, nonce, limit, deadline)
        except TimeoutError:
            self._recover(msg_id)
            raise AnswerError("TimeLimit", "the call ran past its time limit", from_grader=True) from None
        except EOFError:
            raise KernelDied() from None
        except wire.WireError as err:
            self._recover(msg_id)
            raise _refused(f"the kernel's reply broke the grader's bounds ({err})") from None
        now = time.monotonic()
        if self._wait_shell(msg_id, max(min(deadline, now + INTERRUPT_GRACE), now + 1.0)) is None:
            self._recover(msg_id)
        return data

    def _recover(self, msg_id: str) -> None:
        """After a failed call: interrupt; a kernel that does not come back is unresponsive."""
        self.interrupt()
        if self._wait_shell(msg_id, time.monotonic() + INTERRUPT_GRACE) is None:
            self.responsive = False

    # -------------------------------------------------------------------- end

    def close(self) -> RunResult:
        result = RunResult()
        for sock in self.sockets.values():
            try:
                sock.close(linger=0)
            except Exception:
                pass
        if self.context is not None:
            try:
                self.context.term()
            except Exception:
                pass
        for fd in self.path_fds + [self.request_w, self.request_r, self.reply_r]:
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self.box is not None:
            if self.box.cgroup is not None:
                peak = self.box.cgroup.peak_bytes()
                result.memory_peak_mb = round(peak / 2 ** 20, 1) if peak else None
                if self.box.cgroup.oom_killed():
                    self.flags.append("reached the sandbox's memory limit")
            result.escaped = self.box.close()
        if self.plain is not None:
            import signal

            try:
                os.killpg(self.plain.pid, signal.SIGKILL)
            except OSError:
                pass
            self.plain.wait()
        if self.temp is not None:
            import shutil

            shutil.rmtree(self.temp, ignore_errors=True)
        return result


class Outputs:
    """A cell's outputs, capped: at most ``limit`` characters are kept."""

    def __init__(self, cell: dict, limit: int):
        self.cell, self.limit = cell, limit
        self.used = 0
        self.capped = False
        self.clear_pending = False
        cell["outputs"] = []

    def note(self, text: str) -> None:
        self.cell["outputs"].append({"output_type": "stream", "name": "stderr", "text": text})

    def add(self, kind: str, content: dict) -> None:
        outs = self.cell["outputs"]
        if kind == "clear_output":
            if content.get("wait"):
                self.clear_pending = True
            else:
                outs.clear()
            return
        if kind not in ("stream", "display_data", "execute_result", "error"):
            return  # update_display_data, comms, ...: not kept
        if self.clear_pending:
            outs.clear()
            self.clear_pending = False
        if kind == "stream":
            size = len(str(content.get("text", "")))
        elif kind == "error":
            size = len(str(content.get("evalue", ""))) + sum(len(str(t)) for t in (content.get("traceback") or [])[:50])
        else:
            data = content.get("data") if isinstance(content.get("data"), dict) else {}
            size = sum(len(str(v)) for v in data.values())
        if self.used + size > self.limit:
            if not self.capped:
                self.note("\n[autograder: output truncated]\n")
                self.capped = True
            return
        self.used += size
        if kind == "stream":
            name = "stderr" if content.get("name") == "stderr" else "stdout"
            text = str(content.get("text", ""))
            if outs and outs[-1].get("output_type") == "stream" and outs[-1].get("name") == name:
                outs[-1]["text"] += text
            else:
                outs.append({"output_type": "stream", "name": name, "text": text})
        elif kind == "error":
            outs.append({"output_type": "error", "ename": str(content.get("ename", ""))[:200],
                         "evalue": str(content.get("evalue", ""))[:2000],
                         "traceback": [str(t)[:2000] for t in (content.get("traceback") or [])[:50]]})
        else:
            data = content.get("data") if isinstance(content.get("data"), dict) else {}
            output = {"output_type": kind, "data": {str(k): v for k, v in data.items()
                                                    if isinstance(v, (str, list, dict))},
                      "metadata": content.get("metadata") if isinstance(content.get("metadata"), dict) else {}}
            if kind == "execute_result":
                count = content.get("execution_count")
                output["execution_count"] = count if isinstance(count, int) else None
            outs.append(output)


# ------------------------------------------------------------------------------------------------
# The grader's session on a kernel
# ------------------------------------------------------------------------------------------------


class KernelSession(Session):
    """Asks a running kernel for values: fixed requests (:mod:`.kernel_side`), data both ways."""

    def __init__(self, kernel: Kernel, options: RunOptions):
        self.kernel, self.options = kernel, options
        self.source = ""
        self.calls = 0
        self.tests_deadline: Optional[float] = None  # set at the first call
        self.first_call_cell: Optional[int] = None
        self.current_cell = -1
        self.refused: List[str] = []
        self.mutating: List[str] = []
        self.timed_out = False  # a call ran past its own or the tests' time limit

    @property
    def flags(self) -> List[str]:
        """What the instructor should look at: refused replies, answers that changed their inputs."""
        flags = []
        if self.refused:
            count = len(self.refused)
            flags.append(f"sent {count} {'reply' if count == 1 else 'replies'} the grader refused "
                         f"(first: {self.refused[0]})"[:300])
        if self.mutating:
            names = ", ".join(f"`{name}`" for name in self.mutating)
            flags.append(f"changed the inputs of a hidden test in place ({names}); expected values came "
                         "from the grader's own copies"[:300])
        return flags

    def note_mutation(self, name: str) -> None:
        if name not in self.mutating:
            self.mutating.append(name)

    @property
    def responsive(self) -> bool:
        return self.kernel.responsive

    def request(self, op: str, /, **payload: Any) -> dict:
        if not self.kernel.responsive:
            raise AnswerError("KernelUnresponsive", "the notebook stopped responding", from_grader=True)
        now = time.monotonic()
        if self.tests_deadline is None:
            self.tests_deadline = now + self.options.tests_timeout
            self.first_call_cell = self.current_cell
        deadline = min(now + self.options.call_timeout, self.tests_deadline)
        if deadline - now < 0.2:
            self.timed_out = True
            raise AnswerError("TimeLimit", f"the hidden tests of this notebook used up their time "
                                           f"({self.options.tests_timeout:g} s)", from_grader=True)
        try:
            data = wire.encode(dict(payload, op=op), strict=True)
        except (TypeError, wire.WireError) as err:
            raise TypeError(f"hidden-test inputs must be tensors and plain data: {err}") from None
        self.calls += 1
        try:
            raw = self.kernel.call(data, deadline, self.options.max_reply_bytes)
            try:
                reply = wire.decode(raw, wire.Bounds(max_bytes=self.options.max_reply_bytes))
            except wire.WireError as err:
                raise _refused(f"the kernel's reply broke the grader's bounds ({err})") from None
            if not isinstance(reply, dict) or not isinstance(reply.get("ok"), bool):
                raise _refused("the kernel's reply is not in the expected form")
        except KernelDied:
            self.kernel.responsive = False
            raise AnswerError("KernelDied", "the kernel died during the call", from_grader=True) from None
        except ReplyRefused as err:
            self._flag(err.evalue)
            raise
        except AnswerError as err:
            self.timed_out = self.timed_out or (err.from_grader and err.ename == "TimeLimit")
            raise
        if not reply["ok"]:
            raise answer_error(str(reply.get("ename"))[:100], str(reply.get("evalue"))[:2000])
        return reply

    def _flag(self, text: str) -> None:
        self.refused.append(text)


# ------------------------------------------------------------------------------------------------
# A whole notebook
# ------------------------------------------------------------------------------------------------


#: RunResult.stop of a run its caller ended at the pause (see :func:`run_notebook`)
PAUSE_STOP = "stopped at the pause: not needed"


def run_notebook(cells: List[dict], points: Dict[int, List[str]], on_point: Callable[[List[str], KernelSession], None],
                 options: RunOptions, course_root: Path,
                 pause: Optional[Tuple[int, Callable[[], bool]]] = None) -> RunResult:
    """Execute ``cells`` (code cells, in order; outputs written into them) in a fresh isolated kernel.

    After cell ``i`` (index in ``cells``) the labels ``points[i]`` are handed to ``on_point``;
    ``points[-1]`` are handed over at the end. ``pause = (i, wait)``: after cell ``i`` the run
    calls ``wait()`` (it may block; the cells' time limit starts again after it) and stops there
    when it returns False (the own-work run starts its kernel while the notebook runs). Never
    raises for the notebook's misbehaviour.
    """
    started = time.monotonic()
    result = RunResult()
    kernel = Kernel(options, course_root)
    session: Optional[KernelSession] = None
    running = 0
    flooded = False
    limit_text = f"the notebook ran past its time limit ({options.timeout:g} s)"
    try:
        kernel.start(time.monotonic() + START_SECONDS)
        KERNEL_STARTED[0] = True
        session = KernelSession(kernel, options)
        deadline = time.monotonic() + options.timeout
        for index, cell in enumerate(cells):
            session.current_cell = index
            if cell.get("source", "").strip():
                if time.monotonic() >= deadline:
                    result.stop = limit_text
                    break
                running = index + 1
                outcome = kernel.execute(cell, deadline)
                if outcome == "timeout":
                    result.stop = limit_text
                elif outcome in ("flood", "capped"):
                    result.truncated.append(index)
                    flooded = flooded or outcome == "flood"
            if points.get(index) and kernel.responsive and kernel.alive():
                on_point(points[index], session)
            if pause is not None and index == pause[0]:
                if not pause[1]():
                    result.stop = PAUSE_STOP
                    break
                deadline = time.monotonic() + options.timeout  # the wait was not the notebook's time
            if not kernel.alive():
                raise KernelDied()
            if not kernel.responsive:
                result.stop = result.stop or "the notebook stopped responding"
            if result.stop:
                break
        if not result.stop and points.get(-1) and kernel.alive():
            session.current_cell = len(cells)
            on_point(points[-1], session)
    except KernelDied:
        result.stop = result.stop or (f"the kernel died in cell {running} (the code crashed, exited or "
                                      "ran out of memory)")
    except TimeoutError:
        result.stop = result.stop or f"{limit_text}; it ignored the interrupt and was stopped"
    except IsolationError as err:
        result.stop = result.stop or f"{COULD_NOT_RUN}: {err}"
    except Exception as err:  # noqa: BLE001 - a grader problem: reported, the run goes on
        result.stop = result.stop or f"{COULD_NOT_RUN}: {type(err).__name__}: {err}"
    finally:
        closing = kernel.close()
        result.memory_peak_mb, result.escaped = closing.memory_peak_mb, closing.escaped
    result.flags = list(dict.fromkeys(kernel.flags + (session.flags if session else [])))
    if session is not None:
        result.calls = session.calls
        result.timed_out = session.timed_out
    result.timed_out = result.timed_out or (result.stop or "").startswith(limit_text)
    if flooded:
        result.flags.append(f"printed more than {options.max_messages} outputs or {options.max_output_mb} MB "
                            "in a cell (interrupted)")
    first = session.first_call_cell if session is not None else None
    result.first_call_cell = first
    result.cell_errors = [
        {"cell": i, "ename": str(o.get("ename"))[:100],
         "evalue": "" if first is not None and i > first else str(o.get("evalue"))[:200]}
        for i, c in enumerate(cells) for o in c.get("outputs", []) if o.get("output_type") == "error"
    ][:50]
    if first is not None and not options.keep_all_outputs:
        for i, cell in enumerate(cells):
            if i > first and cell.get("outputs"):
                cell["outputs"] = [{"output_type": "stream", "name": "stderr", "text": HIDDEN_OUTPUTS_NOTE}]
    result.seconds = round(time.monotonic() - started, 2)
    return result
