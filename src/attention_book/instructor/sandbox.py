"""Isolation of one submission's kernel, without Docker: bubblewrap + setpriv + prlimit.

Each kernel starts as ``bwrap ... -- [setpriv ... --] prlimit ... -- python -m ipykernel_launcher``:

* its own PID, network, IPC and UTS namespaces (``--unshare-*``); bubblewrap is PID 1 of the
  namespace and dies with the grader (``--die-with-parent``): killing it ends every process the
  notebook started (``Popen(start_new_session=True)``, double forks, ...);
* no network at all: the grader talks to the kernel over Unix sockets in the exchange folder
  (``transport="ipc"``), which the sandbox sees at the same path;
* an allow-list file system: read-only system folders (``/usr``, ``/etc``), the Python install,
  the virtual environment and the course package's source (not the rest of the course folder:
  no notebooks with solutions, no ``instructor/``; anything of those under a bound folder is
  hidden under an empty one), a private ``/tmp``; read-write only its work folder (``HOME``) and
  the exchange folder. The submissions folder, the output folder and the home folders are not there;
* a cleared environment (a short allow-list, ``HOME`` = the work folder);
* when the grader runs as root: the kernel runs as user ``nobody`` (``setpriv``), without
  capabilities or new privileges;
* limits (``prlimit``): address space, processes, file size, CPU seconds, open files, no core
  dumps. The number of output messages is capped by the grader (:mod:`.runner`).

:func:`check_isolation` tries the whole recipe once and says why it fails (tool missing, user
namespaces not permitted, ...).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

__all__ = ["Limits", "Sandbox", "check_isolation", "IsolationError", "kernel_env", "NOBODY"]

NOBODY = 65534
ENV_ALLOW = ("LANG", "LC_ALL", "TZ", "TIKTOKEN_CACHE_DIR")


class IsolationError(RuntimeError):
    """The isolation tools are missing or not permitted here."""


@dataclass
class Limits:
    memory_mb: int = 6144  # address space of the kernel (torch maps a lot; 6 GiB leaves room)
    processes: int = 256  # new processes the kernel's user may have
    file_mb: int = 256  # largest file it may write
    cpu_seconds: int = 600  # CPU time of the kernel (and each process it starts)
    open_files: int = 1024


def kernel_env(home: Path, extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The kernel's environment: an allow-list, nothing else from the grader's environment."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": "/tmp",
        "MPLBACKEND": "Agg",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
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


@dataclass
class Sandbox:
    """Builds the command prefix that runs a kernel isolated."""

    course_root: Path
    work: Path  # the submission's folder (HOME, cwd), read-write
    exchange: Path  # sockets and call files shared with the grader, read-write
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
        try:  # an editable install points into the course's src/ (or elsewhere)
            import attention_book

            paths.append(Path(attention_book.__file__).resolve().parents[1])
        except ImportError:  # pragma: no cover
            pass
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

    def prefix(self) -> List[str]:
        bwrap = self.bwrap or shutil.which("bwrap")
        if not bwrap:
            raise IsolationError("bubblewrap (`bwrap`) is not installed: `apt-get install bubblewrap`")
        cmd = [bwrap, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-net",
               "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", "sandbox",
               "--unsetenv", "JPY_PARENT_PID",  # ipykernel would poll a parent it cannot see
               "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        for name in ("bin", "sbin", "lib", "lib64", "lib32"):
            path = Path("/") / name
            if path.is_symlink():
                cmd += ["--symlink", os.readlink(path), str(path)]
            elif path.is_dir():
                cmd += ["--ro-bind", str(path), str(path)]
        binds = [(path, "--ro-bind") for path in self.read_only()]
        binds += [(Path(os.path.realpath(p)), "--bind") for p in (self.work, self.exchange)]
        made = {Path("/"), Path("/tmp"), Path("/usr"), Path("/etc"), Path("/proc"), Path("/dev")}
        # parents first; the folders bwrap creates on the way are 0700 unless made 0755 here
        for path, how in sorted(binds, key=lambda item: len(item[0].parts)):
            for parent in reversed(path.parents):
                if parent not in made and not any(parent == p for p, _ in binds):
                    cmd += ["--perms", "0755", "--dir", str(parent)]
                    made.add(parent)
            cmd += [how, str(path), str(path)]
            made.add(path)
        for path in self.masked():  # after every bind: an empty folder over each
            cmd += ["--tmpfs", str(path)]
        cmd += ["--chdir", str(self.work)]
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if not setpriv:
                raise IsolationError("setpriv (util-linux) is missing: needed to drop root in the sandbox")
            cmd += ["--", setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                    "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
        else:
            cmd += ["--cap-drop", "ALL", "--"]
        prlimit = shutil.which("prlimit")
        if not prlimit:
            raise IsolationError("prlimit (util-linux) is missing")
        limits = self.limits
        processes = limits.processes
        if os.geteuid() != 0:  # RLIMIT_NPROC counts every process of the user: add the current ones
            processes += _processes_of(os.getuid())
        mb = 1024 * 1024
        cmd += [prlimit, f"--as={limits.memory_mb * mb}", f"--nproc={processes}",
                f"--fsize={limits.file_mb * mb}", f"--cpu={limits.cpu_seconds}",
                f"--nofile={limits.open_files}", "--core=0", "--"]
        return cmd

    def prepare(self) -> None:
        """Folders owned by the sandbox's user (``nobody`` when the grader is root)."""
        for path in (self.work, self.exchange):
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o700)
            if os.geteuid() == 0:
                os.chown(path, NOBODY, NOBODY)


def _processes_of(uid: int) -> int:
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def check_isolation(course_root: Path, scratch: Path) -> None:
    """Run ``true`` with the full recipe; raise IsolationError saying why it cannot run."""
    work, exchange = scratch / "probe-work", scratch / "probe-exchange"
    box = Sandbox(course_root, work, exchange)
    box.prepare()
    cmd = box.prefix() + [sys.executable, "-c", "import os; print(os.getuid())"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=kernel_env(work))
    except OSError as err:
        raise IsolationError(f"could not start bubblewrap: {err}") from err
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no message"]
        hint = ""
        if "namespace" in detail[0].lower() or "permitted" in detail[0].lower():
            hint = (" (user namespaces are not permitted for this user: run the grader as root, or "
                    "allow them: `sysctl kernel.unprivileged_userns_clone=1`, or on Ubuntu 24.04 "
                    "`sysctl kernel.apparmor_restrict_unprivileged_userns=0`)")
        raise IsolationError(f"the sandbox does not work here: {detail[0]}{hint}")
