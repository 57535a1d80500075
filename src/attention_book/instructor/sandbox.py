"""Isolation of one submission's kernel, without Docker: bubblewrap, a small init, cgroups.

A kernel starts as ``bwrap --args FD`` (its settings come through a pipe, so the sandbox's
``/proc/1/cmdline`` shows no path of the grader) followed by :mod:`.sandbox_init`, which sets
up the rest and executes ``python -m ipykernel_launcher``. What the kernel gets:

* its own PID, network, IPC and UTS namespaces; bubblewrap is PID 1 of the namespace and dies
  with the grader's worker (``--die-with-parent``): killing it ends every process the notebook
  started, whatever they did (new sessions, double forks, ...);
* no network; the grader reaches the kernel's sockets through ``/proc/<pid>/root`` (see
  :mod:`.runner`): no folder of the host is shared with the sandbox for writing;
* read-only: the system folders, the Python install, the virtual environment, the package's
  source and the tokenizer cache (nothing else of the course: no notebooks with solutions, no
  ``instructor/``, no submissions, no outputs, no home folders);
* writable: only ``/sandbox``, a tmpfs of ``Limits.disk_mb`` (home, ``/tmp``, the kernel's
  sockets), which disappears with the sandbox; ``/`` and ``/dev`` are read-only;
* a cleared environment (a short allow-list);
* no privileges: as root, the kernel runs as a user id of its own (one per sandbox running at
  the same time, from ``UID_BASE``: the per-user process limit then counts this sandbox only);
  without root, bubblewrap's user namespace (the kernel is "root" of that namespace without any
  capability; the process limit counts per namespace);
* a system-call filter (:mod:`.seccomp`: keyrings, mounts, namespaces, ``bpf``, ``ptrace``,
  ``perf_event_open``, ``userfaultfd``, kernel modules, clocks, ... fail with ``EPERM``; bubblewrap
  loads one before the init runs, the init the full one before it executes the kernel), a new
  empty session keyring, and ``/proc/keys``, ``/proc/kcore`` and the like hidden (as Docker does);
* limits per process (address space, processes, file size, CPU seconds, open files, no core
  dumps) and, as root where the cgroup file system allows it, a memory and process limit for the
  whole sandbox (:class:`Cgroup`): one notebook cannot take the memory or the process slots the
  other notebooks graded at the same time need.

:func:`check_isolation` tries the whole recipe once and says why it fails.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from . import seccomp
from .sandbox_init import REPLY_FD, REQUEST_FD

__all__ = ["Limits", "Sandbox", "SandboxProcess", "check_isolation", "IsolationError", "kernel_env", "Cgroup",
           "UID_BASE", "sandbox_python", "library_mb", "mapped_mb", "INSIDE_HOME", "INSIDE_KERNEL", "REQUEST_FD", "REPLY_FD", "claim_uid",
           "stray_processes"]

ENV_ALLOW = ("LANG", "LC_ALL", "TZ", "TIKTOKEN_CACHE_DIR")
UID_BASE = 61000  # root: sandbox user ids UID_BASE .. UID_BASE + UID_COUNT - 1
UID_COUNT = 1000
INSIDE_ROOT = "/sandbox"
INSIDE_HOME = "/sandbox/home"
INSIDE_KERNEL = "/sandbox/kernel"
LOCK_DIRS = ("/run/attention-book", "/tmp/attention-book-uids-0")
#: files of /proc the sandbox sees as empty (Docker's masked paths): keys, kernel memory, timers
MASKED_PROC = ("/proc/keys", "/proc/key-users", "/proc/kcore", "/proc/timer_list", "/proc/sched_debug",
               "/proc/latency_stats", "/proc/sysrq-trigger")


class IsolationError(RuntimeError):
    """The isolation tools are missing or not permitted here."""


def mapped_mb() -> int:
    """This process's address space in MiB (``VmSize``): what its libraries map and what it holds."""
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


_LIBRARY_MB: List[int] = []


def library_mb() -> int:
    """The address space that importing the grader's libraries maps, in MiB, measured once per
    process (this process's ``VmSize`` once torch, ZeroMQ and Jupyter's client are imported).

    It depends on the install, not on the notebook: PyTorch's default (CUDA) build maps about
    3 GB of libraries on import even without a GPU (measured: VmSize 3062 MB after ``import
    torch`` 2.14.1+cu130 on a machine without one, 624 MB with 2.13.0+cpu), so a fixed
    address-space limit that suits one build makes the other fail before any student code runs.
    Each limit below is this footprint plus the memory the notebook (or worker) may use."""
    if not _LIBRARY_MB:
        import jupyter_client.session  # noqa: F401 - what a worker and a kernel import
        import torch  # noqa: F401
        import zmq  # noqa: F401

        _LIBRARY_MB.append(mapped_mb())
    return _LIBRARY_MB[0]


@dataclass
class Limits:
    #: address space of each process beyond what importing the libraries maps (:func:`library_mb`)
    memory_mb: int = 6144
    processes: int = 256  # processes (and threads) of the sandbox
    file_mb: int = 256  # largest file it may write
    cpu_seconds: int = 600  # CPU time of each process
    open_files: int = 1024
    disk_mb: int = 512  # everything it writes (home, /tmp): a tmpfs of this size
    disk_inodes: int = 65536  # files and folders it may create
    total_memory_mb: int = 4096  # the whole sandbox, tmpfs included (memory cgroup; root only)


def package_root() -> Path:
    """The folder holding the ``attention_book`` package the grader runs (the source of an editable
    install, or site-packages)."""
    return Path(__file__).resolve().parents[2]


def sandbox_python() -> str:
    """The grader's Python as the sandbox sees it: the virtual environment's folder resolved (a venv
    reached through a link, e.g. a worktree's ``.venv``, is bound at its real place), the file name
    kept (resolving it too would leave the venv for the base interpreter)."""
    folder, name = os.path.split(sys.executable)
    return os.path.join(os.path.realpath(folder), name)


def kernel_env(home: str = INSIDE_HOME, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The kernel's environment: an allow-list, nothing else from the grader's environment."""
    env = {
        "PATH": f"{Path(sandbox_python()).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": f"{INSIDE_ROOT}/tmp",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": f"{home}/.config/matplotlib",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        # the kernel imports the grader's own package (its kernel side speaks the grader's format),
        # not whatever an editable install's link names: this folder is bound read-only
        "PYTHONPATH": str(package_root()),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "LANG": "C.UTF-8",
    }
    for key in ENV_ALLOW:
        if key in os.environ:
            env[key] = os.environ[key]
    if "TIKTOKEN_CACHE_DIR" in env:  # the sandbox binds the real folder, not a symlink to it
        env["TIKTOKEN_CACHE_DIR"] = os.path.realpath(env["TIKTOKEN_CACHE_DIR"])
    env.update(extra or {})
    return env


def _existing(paths: Sequence[Path]) -> List[Path]:
    seen, out = set(), []
    for path in paths:
        real = Path(os.path.realpath(path))
        if real.exists() and real not in seen:
            seen.add(real)
            out.append(real)
    return out


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


# ------------------------------------------------------------------------------------------------
# Sandbox user ids (root) and cgroups
# ------------------------------------------------------------------------------------------------


def _lock_dir() -> Path:
    for name in LOCK_DIRS:
        path = Path(name)
        try:
            path.mkdir(mode=0o700, exist_ok=True)
            info = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == 0 and stat.S_IMODE(info.st_mode) & 0o022 == 0:
            return path
    raise IsolationError("no private folder for the sandbox user locks (/run/attention-book)")


def _uid_busy(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True  # a real account: never borrow it
    except KeyError:
        pass
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    return True
            except OSError:
                pass
    return False


class UidClaim:
    """A sandbox user id held with a lock file until :meth:`release` (root only)."""

    def __init__(self, uid: int, fd: int):
        self.uid, self.fd = uid, fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _lock_uid(folder: Path, uid: int) -> Optional[int]:
    """The descriptor holding ``uid``'s lock, or None when a grader holds it (closing it lets go)."""
    fd = os.open(folder / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def claim_uid() -> UidClaim:
    """A user id no account and no process uses, locked for this sandbox (across graders)."""
    folder = _lock_dir()
    for uid in range(UID_BASE, UID_BASE + UID_COUNT):
        fd = _lock_uid(folder, uid)
        if fd is None:
            continue
        if _uid_busy(uid):
            os.close(fd)
            continue
        return UidClaim(uid, fd)
    raise IsolationError(f"every sandbox user id {UID_BASE}..{UID_BASE + UID_COUNT - 1} is in use")


def stray_processes() -> List[int]:
    """PIDs running as a sandbox user id that no grader holds (root only): what an escape left.

    A grader locks a user id before its sandbox starts and lets go only once no process of it is
    left (:meth:`SandboxProcess.close`), so the processes of a locked id belong to a sandbox that
    is still grading (perhaps another grader's, at the same time) and are not counted."""
    if os.geteuid() != 0:
        return []
    uids = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                uid = entry.stat(follow_symlinks=False).st_uid
            except OSError:
                continue
            if UID_BASE <= uid < UID_BASE + UID_COUNT:
                uids.add(uid)
    strays: List[int] = []
    folder = _lock_dir() if uids else None
    for uid in sorted(uids):
        fd = _lock_uid(folder, uid)
        if fd is None:
            continue  # a grader holds it: its sandbox is still running
        os.close(fd)
        strays += _processes_of(uid)  # alive under a free id: no grader waits for them
    return strays


class Cgroup:
    """A memory + process limit for one sandbox (cgroup v2, or v1's memory and pids hierarchies).

    Only root can create one; :meth:`create` returns None where the cgroup file system is missing
    or read-only (the per-process limits still hold)."""

    def __init__(self, dirs: List[Path], version: int):
        self.dirs, self.version = dirs, version

    @staticmethod
    def create(name: str, memory_bytes: int, processes: int) -> Optional["Cgroup"]:
        if os.geteuid() != 0:
            return None
        base = Path("/sys/fs/cgroup")
        try:
            if (base / "cgroup.controllers").is_file():  # v2 (unified)
                parent = base / "attention-book"
                parent.mkdir(exist_ok=True)
                wanted = {"memory", "pids"} & set((base / "cgroup.controllers").read_text().split())
                (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(wanted)))
                group = parent / name
                group.mkdir()
                (group / "memory.max").write_text(str(memory_bytes))
                (group / "memory.swap.max").write_text("0") if (group / "memory.swap.max").exists() else None
                (group / "pids.max").write_text(str(processes))
                return Cgroup([group], 2)
            memory, pids = base / "memory", base / "pids"
            if (memory / "cgroup.procs").is_file():  # v1
                dirs = []
                group = memory / "attention-book" / name
                group.mkdir(parents=True)
                dirs.append(group)
                (group / "memory.limit_in_bytes").write_text(str(memory_bytes))
                swap = group / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    try:
                        swap.write_text(str(memory_bytes))
                    except OSError:
                        pass
                if (pids / "cgroup.procs").is_file():
                    group = pids / "attention-book" / name
                    group.mkdir(parents=True)
                    (group / "pids.max").write_text(str(processes))
                    dirs.append(group)
                return Cgroup(dirs, 1)
        except OSError:
            return None
        return None

    def procs_files(self) -> List[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def pids(self) -> List[int]:
        found = set()
        for d in self.dirs:
            try:
                found |= {int(x) for x in (d / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return sorted(found)

    def kill(self) -> None:
        if self.version == 2 and (self.dirs[0] / "cgroup.kill").exists():
            try:
                (self.dirs[0] / "cgroup.kill").write_text("1")
            except OSError:
                pass
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def peak_bytes(self) -> Optional[int]:
        name = "memory.peak" if self.version == 2 else "memory.max_usage_in_bytes"
        try:
            return int((self.dirs[0] / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_killed(self) -> bool:
        try:
            if self.version == 2:
                events = (self.dirs[0] / "memory.events").read_text()
                return any(line.split()[0] == "oom_kill" and int(line.split()[1]) > 0 for line in events.splitlines())
            return int((self.dirs[0] / "memory.failcnt").read_text()) > 0
        except (OSError, ValueError, IndexError):
            return False

    def remove(self) -> None:
        for _ in range(50):
            self.kill()
            left = []
            for d in self.dirs:
                try:
                    d.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    left.append(d)
            self.dirs = left
            if not left:
                return
            time.sleep(0.1)


# ------------------------------------------------------------------------------------------------
# The sandbox
# ------------------------------------------------------------------------------------------------


@dataclass
class Sandbox:
    """Builds and starts the sandboxed kernel command."""

    course_root: Path
    hidden: List[Path] = field(default_factory=list)  # folders to hide even if under a bound path
    limits: Limits = field(default_factory=Limits)
    bwrap: Optional[str] = None

    def read_only(self) -> List[Path]:
        """Folders the kernel sees read-only."""
        # not the course folder itself: its notebooks hold the solutions, instructor/ the tests
        paths = [Path("/usr"), Path("/etc"), Path(sys.base_prefix), Path(sys.prefix),
                 Path(sysconfig.get_paths()["purelib"])]
        if "TIKTOKEN_CACHE_DIR" in os.environ:
            paths.append(Path(os.environ["TIKTOKEN_CACHE_DIR"]))
        paths.append(package_root())  # the package's source (an editable install)
        return _existing(paths)

    def masked(self) -> List[Path]:
        """Folders under a read-only path that the kernel must not see (replaced by empty ones)."""
        candidates = [self.course_root / "instructor", self.course_root / "_build", Path.home(),
                      *self.hidden]
        bound = self.read_only()
        found = []
        for path in _existing(candidates):
            if any(_inside(path, folder) for folder in bound) and path not in found:
                if not any(_inside(folder, path) for folder in bound if folder != path):
                    found.append(path)
                else:  # hiding it would hide the Python install (e.g. a pyenv under $HOME)
                    found += [child for child in path.iterdir()
                              if not any(_inside(folder, child) for folder in bound)
                              and child.is_dir() and not child.is_symlink()]
        return found

    def bwrap_args(self) -> List[str]:
        """bubblewrap's options (they travel through a pipe: ``bwrap --args FD``)."""
        root = os.geteuid() == 0
        args = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net", "--unshare-ipc",
                "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox"]
        if not root:  # a user namespace; "root" inside only until sandbox_init has set up /sandbox
            args += ["--unshare-user", "--uid", "0", "--gid", "0", "--cap-add", "CAP_SYS_ADMIN",
                     "--cap-add", "CAP_SETPCAP"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        for name in MASKED_PROC:
            if os.path.exists(name):
                args += ["--ro-bind", "/dev/null", name]
        for name in ("bin", "sbin", "lib", "lib64", "lib32"):
            path = Path("/") / name
            if path.is_symlink():
                args += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                args += ["--ro-bind", str(path), str(path)]
        binds = self.read_only()
        made = {Path("/"), Path("/usr"), Path("/etc"), Path("/proc"), Path("/dev")}
        # parents first; the folders bwrap creates on the way are 0700 unless made 0755 here
        for path in sorted(binds, key=lambda item: len(item.parts)):
            for parent in reversed(path.parents):
                if parent not in made and parent not in binds:
                    args += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            args += ["--ro-bind", str(path), str(path)]
            made.add(path)
        for path in self.masked():  # after every bind: an empty folder over each
            args += ["--tmpfs", str(path)]
        args += ["--perms", "0755", "--dir", INSIDE_ROOT]
        if Path("/tmp") not in made:  # else a bound path lives under /tmp: TMPDIR still points away
            args += ["--symlink", f"{INSIDE_ROOT}/tmp", "/tmp"]
        args += ["--remount-ro", "/dev", "--remount-ro", "/"]
        return args

    def start(self, kernel_cmd: List[str], env: Dict[str, str], connection: dict, fds: Sequence[int],
              slot_name: str) -> "SandboxProcess":
        """Start ``kernel_cmd`` in a new sandbox; ``fds`` = (request read end, reply write end)."""
        bwrap = self.bwrap or shutil.which("bwrap")
        if not bwrap:
            raise IsolationError("bubblewrap (`bwrap`) is not installed: `apt-get install bubblewrap`")
        limits = self.limits
        options = self.bwrap_args()  # first: a problem here leaves nothing behind
        claim = claim_uid() if os.geteuid() == 0 else None
        cgroup = None
        if claim is not None:
            cgroup = Cgroup.create(f"{slot_name}-{os.getpid()}-{claim.uid}", limits.total_memory_mb * 1024 * 1024,
                                   limits.processes + 16)

        def give_back() -> None:  # the sandbox did not start: its cgroup and user id are free again
            if cgroup:
                cgroup.remove()
            if claim:
                claim.release()

        mb = 1024 * 1024
        config = {
            "uid": claim.uid if claim else None,
            "size": limits.disk_mb * mb,
            "inodes": limits.disk_inodes,
            "connection": connection,
            "rlimits": {"RLIMIT_AS": (limits.memory_mb + library_mb()) * mb, "RLIMIT_NPROC": limits.processes,
                        "RLIMIT_FSIZE": limits.file_mb * mb, "RLIMIT_CPU": limits.cpu_seconds,
                        "RLIMIT_NOFILE": limits.open_files, "RLIMIT_CORE": 0},
            "fds": list(fds),
            "seccomp": seccomp.kernel_filter().hex(),
            "command": kernel_cmd,
            "env": env,
        }
        config_bytes = json.dumps(config).encode()
        if len(config_bytes) > 60_000 or sum(len(a) + 1 for a in options) > 60_000:  # they must fit the pipes
            give_back()
            raise IsolationError("the sandbox's settings are too long")
        args_r, args_w = os.pipe()
        conf_r, conf_w = os.pipe()
        info_r, info_w = os.pipe()
        filter_r, filter_w = os.pipe()
        init = str(Path(__file__).with_name("sandbox_init.py"))
        payload = b"".join(a.encode() + b"\0" for a in options + ["--info-fd", str(info_w),
                                                                   "--seccomp", str(filter_r)])
        command = [bwrap, "--args", str(args_r), "--", sandbox_python(), "-I", "-S", init, str(conf_r)]
        os.write(args_w, payload)
        os.close(args_w)
        os.write(conf_w, config_bytes)
        os.close(conf_w)
        os.write(filter_w, seccomp.init_filter())
        os.close(filter_w)
        procs = cgroup.procs_files() if cgroup else []

        def enter_cgroup() -> None:  # runs in the child before bwrap: everything it starts is inside
            for name in procs:
                with open(name, "w") as handle:
                    handle.write(str(os.getpid()))

        try:
            process = subprocess.Popen(command, pass_fds=[args_r, conf_r, info_w, filter_r, *fds],
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, env=env, start_new_session=True,
                                       preexec_fn=enter_cgroup if procs else None)
        except BaseException:
            for fd in (args_r, conf_r, info_r, info_w, filter_r):
                os.close(fd)
            give_back()
            raise
        for fd in (args_r, conf_r, info_w, filter_r):
            os.close(fd)
        return SandboxProcess(process, info_r, claim, cgroup)


class SandboxProcess:
    """A running sandbox: bubblewrap's process, the PID of the sandbox's init, its user id and cgroup."""

    def __init__(self, process: subprocess.Popen, info_fd: int, claim: Optional[UidClaim], cgroup: Optional[Cgroup]):
        self.process, self.info_fd, self.claim, self.cgroup = process, info_fd, claim, cgroup
        self.child_pid: Optional[int] = None
        self.stderr = b""

    @property
    def uid(self) -> Optional[int]:
        return self.claim.uid if self.claim else None

    def wait_child_pid(self, deadline: float) -> int:
        """The sandbox's init as seen from here (bubblewrap's ``--info-fd``)."""
        import select

        data = b""
        while b"}" not in data and time.monotonic() < deadline:
            ready, _, _ = select.select([self.info_fd], [], [], 0.2)
            if ready:
                chunk = os.read(self.info_fd, 4096)
                if not chunk:
                    break
                data += chunk
            elif self.process.poll() is not None:
                break
        try:
            self.child_pid = int(json.loads(data[: data.index(b"}") + 1])["child-pid"])
        except (ValueError, KeyError, TypeError):
            raise IsolationError("bubblewrap did not start: " + self.error_text()) from None
        return self.child_pid

    def error_text(self) -> str:
        import select

        if self.process.poll() is not None and self.process.stderr is not None:
            try:
                ready, _, _ = select.select([self.process.stderr], [], [], 1.0)
                if ready:
                    self.stderr += os.read(self.process.stderr.fileno(), 4000)
            except (OSError, ValueError):
                pass
        text = self.stderr.decode("utf-8", "replace").strip().splitlines()
        return text[-1] if text else f"exit status {self.process.poll()}"

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """End the sandbox: bubblewrap (PID 1 of the namespace goes with it), the cgroup, the uid."""
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except OSError:
                pass
            try:
                self.process.kill()
            except OSError:
                pass
        if self.child_pid is not None:
            try:
                os.kill(self.child_pid, signal.SIGKILL)
            except OSError:
                pass
        if self.cgroup is not None:
            self.cgroup.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass

    def close(self) -> List[int]:
        """Kill, make sure no process of the sandbox is left, release its user id; returns the PIDs
        that had to be killed after bubblewrap was gone (none, unless something escaped)."""
        self.kill()
        leftovers: List[int] = []
        if self.claim is not None:
            deadline = time.monotonic() + 5.0  # the PID namespace's processes die a moment after its init
            while _processes_of(self.claim.uid) and time.monotonic() < deadline:
                time.sleep(0.05)
            for _ in range(50):
                found = _processes_of(self.claim.uid)
                if not found:
                    break
                leftovers += found
                for pid in found:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                time.sleep(0.1)
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.claim is not None and not _processes_of(self.claim.uid):
            self.claim.release()
        for fd in (self.info_fd,):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.process.stderr is not None:
            self.process.stderr.close()
        return sorted(set(leftovers))


def _processes_of(uid: int) -> List[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def open_inside(child_pid: int, relative: str) -> int:
    """An ``O_PATH`` descriptor of the socket ``relative`` inside the sandbox of ``child_pid``, reached through
    ``/proc/<pid>/root`` one component at a time, never following a link: a link, FIFO or file the
    kernel planted there is refused (OSError), never opened, read or written."""
    fd = os.open(f"/proc/{child_pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        parts = [p for p in relative.split("/") if p]
        for index, part in enumerate(parts):
            last = index == len(parts) - 1
            flags = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC | (0 if last else os.O_DIRECTORY)
            new = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = new
        info = os.fstat(fd)
        if not stat.S_ISSOCK(info.st_mode):
            raise OSError(errno.ENOTSOCK, f"{relative} is not a socket")
        return fd
    except BaseException:
        os.close(fd)
        raise


def memory_isolation_warning() -> Optional[str]:
    """None when each sandbox gets a memory and process limit of its own (a cgroup), else the
    sentence the grader prints: without one, memory is limited per process only, and under
    ``--jobs`` one notebook's processes together can crowd out the one graded beside it."""
    if os.geteuid() != 0:
        return ("not root: no cgroup per sandbox, so memory is limited per process only "
                "(grade with --jobs 1, as root, or on Gradescope for a hard limit per notebook)")
    probe = Cgroup.create(f"probe-{os.getpid()}", 64 * 1024 * 1024, 8)
    if probe is None:
        return ("no cgroup could be created under /sys/fs/cgroup (read-only, or the memory controller "
                "is off): memory is limited per process only; grade with --jobs 1 or on Gradescope")
    probe.remove()
    return None


def check_isolation(course_root: Path, scratch: Optional[Path] = None) -> None:
    """Run a tiny program with the full recipe; raise IsolationError saying why it cannot run."""
    box = Sandbox(course_root, limits=Limits(total_memory_mb=512, processes=16))
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    code = (f"import os; os.write({REPLY_FD}, b'uid=%d ' % os.geteuid() + "
            "open('/sandbox/kernel/kernel.json').read().encode())")
    try:
        proc = box.start([sandbox_python(), "-I", "-c", code], kernel_env(), {"probe": True}, (request_r, reply_w),
                         "probe")
    except OSError as err:
        for fd in (request_r, request_w, reply_r, reply_w):
            os.close(fd)
        raise IsolationError(f"could not start bubblewrap: {err}") from err
    os.close(request_r)
    os.close(reply_w)
    try:
        deadline = time.monotonic() + 60
        try:
            proc.wait_child_pid(deadline)
        except IsolationError:
            pass
        out = b""
        import select

        while time.monotonic() < deadline:
            ready, _, _ = select.select([reply_r], [], [], 0.5)
            if ready:
                chunk = os.read(reply_r, 4096)
                if not chunk:
                    break
                out += chunk
            elif not proc.alive():
                ready, _, _ = select.select([reply_r], [], [], 0)
                if not ready:
                    break
        if b'"probe": true' not in out:
            detail = proc.error_text()
            hint = ""
            if "namespace" in detail.lower() or "permitted" in detail.lower():
                hint = (" (user namespaces are not permitted for this user: run the grader as root, or "
                        "allow them: `sysctl kernel.unprivileged_userns_clone=1`, or on Ubuntu 24.04 "
                        "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`)")
            raise IsolationError(f"the sandbox does not work here: {detail}{hint}")
        if os.geteuid() == 0 and out.startswith(b"uid=0 "):
            raise IsolationError("the sandbox did not drop root")
    finally:
        proc.close()
        for fd in (request_w, reply_r):
            os.close(fd)
