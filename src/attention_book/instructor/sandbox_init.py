"""First process inside a grading sandbox: size-limited folders, limits, no privileges, then the kernel.

bubblewrap starts this file with ``python -I -S`` (the standard library only, nothing from the
virtual environment runs with privileges). It reads its settings (JSON) from the file descriptor
given as its only argument, then

1. mounts a fresh tmpfs of ``size`` bytes and ``inodes`` files at ``/sandbox``: ``home`` (the
   kernel's HOME and working folder), ``tmp`` (``/tmp`` is a link to it) and ``kernel`` (the
   kernel's connection file and sockets). Nothing the notebook writes reaches the host's disk,
   and everything is gone when the sandbox's mount namespace ends;
2. writes the kernel's connection file;
3. sets the limits (address space, processes, file size, CPU seconds, open files, no core
   dumps) and moves the grader's two call pipes to the fixed descriptors ``REQUEST_FD`` and
   ``REPLY_FD``; every other inherited descriptor is closed;
4. drops every privilege: as root, it changes to the sandbox's own user id (a different one for
   each sandbox running at the same time), with no groups and an empty capability bounding set;
   in a user namespace (grader not root), it locks the "root has no capabilities" secure bits
   and empties the bounding set, so the kernel keeps none; ``no_new_privs`` is set either way;
5. joins a new, empty session keyring (the grader's keyrings, and any credentials a login put
   there, are no longer its own) and loads the system-call filter of
   :mod:`attention_book.instructor.seccomp` (the grader sends the compiled program): keyrings,
   mounts, namespaces, ``bpf``, ``ptrace`` and the rest fail with ``EPERM`` from here on;
6. executes the kernel (``python -m ipykernel_launcher -f /sandbox/kernel/kernel.json``).

Any failure stops here with exit status 70 (the grader reports "the kernel did not start").
"""

import ctypes
import errno
import json
import os
import resource
import sys

REQUEST_FD = 200  # the grader's requests (read end of a pipe)
REPLY_FD = 201  # the kernel's replies (write end of a pipe)
ROOT = "/sandbox"

PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE, each with its lock
SECURE_BITS = 0b1 | 0b10 | 0b100 | 0b1000 | 0b100000 | 0b1000000 | 0b10000000
MS_NOSUID, MS_NODEV = 2, 4
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
KEYCTL_JOIN_SESSION_KEYRING = 1
KEYCTL_NUMBERS = {"x86_64": 250, "aarch64": 219}


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            return int(handle.read())
    except OSError:
        return 40


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def join_new_session_keyring(libc) -> None:
    """An anonymous session keyring of its own: nothing of the grader's session keyring is reachable."""
    libc.syscall.restype = ctypes.c_long
    serial = libc.syscall(ctypes.c_long(KEYCTL_NUMBERS[os.uname().machine]),
                          ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), ctypes.c_void_p(None))
    if serial < 0:
        err = ctypes.get_errno()
        if err != errno.ENOSYS:  # ENOSYS: a kernel without keyrings, nothing to leave
            raise OSError(err, f"join a new session keyring: {os.strerror(err)}")


def load_filter(libc, program: bytes) -> None:
    """Install the classic BPF program ``program`` (the calls the kernel may not make)."""
    if not program or len(program) % 8:
        raise OSError("no system-call filter")
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0), "seccomp filter")


def main() -> None:
    fd = int(sys.argv[1])
    with os.fdopen(fd, "rb") as handle:
        config = json.loads(handle.read(1 << 20).decode("utf-8"))
    libc = _libc()
    uid = config.get("uid")  # None: a user namespace (the grader is not root)
    owner = uid if uid is not None else os.getuid()
    options = f"size={int(config['size'])},nr_inodes={int(config['inodes'])},mode=0755"
    _check(libc.mount(b"tmpfs", ROOT.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options.encode()), "mount /sandbox")
    for name, mode in (("home", 0o700), ("tmp", 0o700), ("kernel", 0o700)):
        path = f"{ROOT}/{name}"
        os.mkdir(path, mode)
        os.chown(path, owner, owner)
    connection = f"{ROOT}/kernel/kernel.json"
    with open(connection, "w") as handle:
        json.dump(config["connection"], handle)
    os.chown(connection, owner, owner)
    os.chmod(connection, 0o600)

    for name, value in config["rlimits"].items():
        limit = getattr(resource, name)
        resource.setrlimit(limit, (int(value), int(value)))
    request, reply = config["fds"]
    os.dup2(request, REQUEST_FD)
    os.dup2(reply, REPLY_FD)
    keep = {0, 1, 2, REQUEST_FD, REPLY_FD}
    for number in range(3, 1024):
        if number not in keep:
            try:
                os.close(number)
            except OSError:
                pass
    for number in (REQUEST_FD, REPLY_FD):
        os.set_inheritable(number, True)

    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    if uid is None:  # user namespace: stay "root" of the namespace, but one that gains nothing at exec
        _check(libc.prctl(PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0), "secure bits")
    for cap in range(_last_cap() + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop capabilities")
    if uid is None:  # and the inheritable set too (capset: version 3 header, empty sets)
        header = (ctypes.c_uint32 * 2)(0x20080522, 0)
        data = (ctypes.c_uint32 * 6)()
        libc.syscall.restype = ctypes.c_long
        _check(libc.syscall(126 if os.uname().machine == "x86_64" else 91, header, data), "clear capabilities")
    if uid is not None:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)  # from root to another user: every capability is gone
        if os.geteuid() != uid or os.getuid() != uid:
            raise OSError("the user id did not change")
    os.chdir(f"{ROOT}/home")
    null = os.open("/dev/null", os.O_RDWR)
    for number in (0, 1, 2):  # the kernel talks over its sockets; its own stdout/stderr go nowhere
        os.dup2(null, number)
    join_new_session_keyring(libc)
    load_filter(libc, bytes.fromhex(config["seccomp"]))  # last: nothing below may mount or use keys
    command = config["command"]
    os.execve(command[0], command, config["env"])


if __name__ == "__main__":
    try:
        main()
    except BaseException as err:  # noqa: BLE001 - report and stop; never run the kernel half set up
        sys.stderr.write(f"sandbox_init: {type(err).__name__}: {err}\n")
        os._exit(70)
