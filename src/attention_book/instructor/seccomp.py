"""The system calls a notebook never needs, refused below Python: a seccomp filter for the sandbox.

bubblewrap gives the kernel its own namespaces, but not a system-call filter: without one a
notebook could read the keys of the grader's kernel keyrings (``keyctl``), plant keys there
(``add_key``), or reach the kernel's rarely used and often vulnerable interfaces (``bpf``,
``perf_event_open``, ``userfaultfd``, ``io_uring``, new namespaces, ...). Container runtimes refuse
these calls; this module builds the same refusal as a classic BPF program (what
``seccomp(2)`` and ``bwrap --seccomp FD`` take), written here with :mod:`struct` so it needs no
library:

1. the architecture is checked first: a call made through another ABI (``int 0x80`` on x86-64,
   the x32 ABI, 32-bit ARM) is refused, whatever its number;
2. the calls of :data:`BLOCKED` fail with ``EPERM``; ``clone`` fails with ``EPERM`` when it asks
   for a namespace, ``clone3`` with ``ENOSYS`` (its flags are out of a filter's reach, so C
   libraries fall back to ``clone``, as under Docker), ``personality`` allows only the values
   Docker's default profile allows;
3. a call newer than this table (:data:`NEWEST`) fails with ``ENOSYS`` (the C library then falls
   back to an older call), so a call added to a future kernel is not open by default;
4. everything else is allowed.

The list is at least Docker's default profile (moby/profiles/seccomp) for what a notebook never
needs. Two programs are built: :func:`init_filter` (loaded by bubblewrap, before the sandbox's
init runs: everything but ``mount`` and ``keyctl``, which the init needs for the sandbox's tmpfs
and its new session keyring) and
:func:`kernel_filter` (loaded by the init right before it starts the kernel: everything).
Filters stack, so the kernel and every process it starts run under both.
"""

from __future__ import annotations

import errno
import os
import struct
from typing import Dict, Iterable, List, Optional, Tuple

__all__ = ["BLOCKED", "SYSCALLS", "NEWEST", "build_filter", "init_filter", "kernel_filter", "FAMILIES",
           "native_arch", "NAMESPACE_FLAGS", "PERSONALITIES"]

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
NR, ARCH, ARGS = 0, 4, 16
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000

# classic BPF
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000

#: clone flags that make a namespace (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET)
NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
#: personality(2) values Docker's default profile allows (PER_LINUX, PER_LINUX32, UNAME26, both, query)
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)

#: the refused calls, by what they reach (the instructor README's threat-model table lists these)
FAMILIES: Dict[str, Tuple[str, ...]] = {
    "kernel keyrings": ("keyctl", "add_key", "request_key"),
    "mounts and the root": ("mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
                            "fsconfig", "fsmount", "fspick", "mount_setattr", "open_tree_attr", "statmount",
                            "listmount"),
    "namespaces": ("unshare", "setns"),  # and clone with a namespace flag, clone3
    "other processes' memory": ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
                                "process_madvise"),
    "kernel programs and tracing": ("bpf", "perf_event_open", "lookup_dcookie", "fanotify_init"),
    "page-fault handling": ("userfaultfd",),
    "io_uring": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    "kernel modules": ("init_module", "finit_module", "delete_module", "create_module", "query_module",
                       "get_kernel_syms"),
    "kexec and reboot": ("kexec_load", "kexec_file_load", "reboot"),
    "swap": ("swapon", "swapoff"),
    "clocks": ("settimeofday", "clock_settime", "clock_adjtime", "adjtimex"),
    "accounting and quotas": ("acct", "quotactl", "quotactl_fd"),
    "file handles": ("name_to_handle_at", "open_by_handle_at"),
    "kernel log": ("syslog",),
    "host and domain names": ("sethostname", "setdomainname"),
    "memory policy (NUMA)": ("mbind", "set_mempolicy", "get_mempolicy", "migrate_pages", "move_pages",
                             "set_mempolicy_home_node"),
    "hardware ports and old interfaces": ("iopl", "ioperm", "modify_ldt", "uselib", "ustat", "sysfs", "_sysctl",
                                          "nfsservctl", "vhangup"),
}
BLOCKED: Tuple[str, ...] = tuple(name for names in FAMILIES.values() for name in names)

#: system-call numbers (x86-64: arch/x86/entry/syscalls/syscall_64.tbl; aarch64: the generic table,
#: include/uapi/asm-generic/unistd.h); None where the architecture has no such call
SYSCALLS: Dict[str, Dict[str, Optional[int]]] = {
    #                       x86_64  aarch64
    "keyctl":              {"x86_64": 250, "aarch64": 219},
    "add_key":             {"x86_64": 248, "aarch64": 217},
    "request_key":         {"x86_64": 249, "aarch64": 218},
    "mount":               {"x86_64": 165, "aarch64": 40},
    "umount2":             {"x86_64": 166, "aarch64": 39},
    "pivot_root":          {"x86_64": 155, "aarch64": 41},
    "chroot":              {"x86_64": 161, "aarch64": 51},
    "open_tree":           {"x86_64": 428, "aarch64": 428},
    "move_mount":          {"x86_64": 429, "aarch64": 429},
    "fsopen":              {"x86_64": 430, "aarch64": 430},
    "fsconfig":            {"x86_64": 431, "aarch64": 431},
    "fsmount":             {"x86_64": 432, "aarch64": 432},
    "fspick":              {"x86_64": 433, "aarch64": 433},
    "mount_setattr":       {"x86_64": 442, "aarch64": 442},
    "statmount":           {"x86_64": 457, "aarch64": 457},
    "listmount":           {"x86_64": 458, "aarch64": 458},
    "open_tree_attr":      {"x86_64": 467, "aarch64": 467},
    "unshare":             {"x86_64": 272, "aarch64": 97},
    "setns":               {"x86_64": 308, "aarch64": 268},
    "ptrace":              {"x86_64": 101, "aarch64": 117},
    "process_vm_readv":    {"x86_64": 310, "aarch64": 270},
    "process_vm_writev":   {"x86_64": 311, "aarch64": 271},
    "kcmp":                {"x86_64": 312, "aarch64": 272},
    "pidfd_getfd":         {"x86_64": 438, "aarch64": 438},
    "process_madvise":     {"x86_64": 440, "aarch64": 440},
    "bpf":                 {"x86_64": 321, "aarch64": 280},
    "perf_event_open":     {"x86_64": 298, "aarch64": 241},
    "lookup_dcookie":      {"x86_64": 212, "aarch64": 18},
    "fanotify_init":       {"x86_64": 300, "aarch64": 262},
    "userfaultfd":         {"x86_64": 323, "aarch64": 282},
    "io_uring_setup":      {"x86_64": 425, "aarch64": 425},
    "io_uring_enter":      {"x86_64": 426, "aarch64": 426},
    "io_uring_register":   {"x86_64": 427, "aarch64": 427},
    "init_module":         {"x86_64": 175, "aarch64": 105},
    "finit_module":        {"x86_64": 313, "aarch64": 273},
    "delete_module":       {"x86_64": 176, "aarch64": 106},
    "create_module":       {"x86_64": 174, "aarch64": None},
    "query_module":        {"x86_64": 178, "aarch64": None},
    "get_kernel_syms":     {"x86_64": 177, "aarch64": None},
    "kexec_load":          {"x86_64": 246, "aarch64": 104},
    "kexec_file_load":     {"x86_64": 320, "aarch64": 294},
    "reboot":              {"x86_64": 169, "aarch64": 142},
    "swapon":              {"x86_64": 167, "aarch64": 224},
    "swapoff":             {"x86_64": 168, "aarch64": 225},
    "settimeofday":        {"x86_64": 164, "aarch64": 170},
    "clock_settime":       {"x86_64": 227, "aarch64": 112},
    "clock_adjtime":       {"x86_64": 305, "aarch64": 266},
    "adjtimex":            {"x86_64": 159, "aarch64": 171},
    "acct":                {"x86_64": 163, "aarch64": 89},
    "quotactl":            {"x86_64": 179, "aarch64": 60},
    "quotactl_fd":         {"x86_64": 443, "aarch64": 443},
    "name_to_handle_at":   {"x86_64": 303, "aarch64": 264},
    "open_by_handle_at":   {"x86_64": 304, "aarch64": 265},
    "syslog":              {"x86_64": 103, "aarch64": 116},
    "sethostname":         {"x86_64": 170, "aarch64": 161},
    "setdomainname":       {"x86_64": 171, "aarch64": 162},
    "mbind":               {"x86_64": 237, "aarch64": 235},
    "set_mempolicy":       {"x86_64": 238, "aarch64": 237},
    "get_mempolicy":       {"x86_64": 239, "aarch64": 236},
    "migrate_pages":       {"x86_64": 256, "aarch64": 238},
    "move_pages":          {"x86_64": 279, "aarch64": 239},
    "set_mempolicy_home_node": {"x86_64": 450, "aarch64": 450},
    "iopl":                {"x86_64": 172, "aarch64": None},
    "ioperm":              {"x86_64": 173, "aarch64": None},
    "modify_ldt":          {"x86_64": 154, "aarch64": None},
    "uselib":              {"x86_64": 134, "aarch64": None},
    "ustat":               {"x86_64": 136, "aarch64": None},
    "sysfs":               {"x86_64": 139, "aarch64": None},
    "_sysctl":             {"x86_64": 156, "aarch64": None},
    "nfsservctl":          {"x86_64": 180, "aarch64": 42},
    "vhangup":             {"x86_64": 153, "aarch64": 58},
    # not refused outright: their arguments are checked
    "clone":               {"x86_64": 56, "aarch64": 220},
    "clone3":              {"x86_64": 435, "aarch64": 435},
    "personality":         {"x86_64": 135, "aarch64": 92},
}
#: the newest call this table knows (file_setattr, Linux 6.17); newer ones fail with ENOSYS
NEWEST = 469


def native_arch() -> str:
    machine = os.uname().machine
    if machine not in AUDIT_ARCH:
        raise OSError(errno.ENOSYS, f"no seccomp filter for the architecture {machine} (x86_64 and aarch64 only)")
    return machine


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(blocked: Iterable[str], arch: Optional[str] = None) -> bytes:
    """A classic BPF program (``struct sock_filter[]``, native byte order) refusing ``blocked`` (names
    of :data:`SYSCALLS`) with EPERM on ``arch``, with the argument checks of ``clone``, ``clone3``
    and ``personality`` (see the module's docstring)."""
    arch = arch or native_arch()
    eperm, enosys = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    code: List[bytes] = [
        _insn(LD_W_ABS, ARCH),
        _insn(JEQ, AUDIT_ARCH[arch], jt=1),
        _insn(RET, eperm),  # another ABI (int 0x80, 32-bit ARM): nothing of it is allowed
        _insn(LD_W_ABS, NR),
    ]
    if arch == "x86_64":  # the x32 ABI shares x86-64's audit arch: its numbers have bit 30 set
        code += [_insn(JGE, X32_SYSCALL_BIT, jf=1), _insn(RET, eperm)]
    code += [_insn(JGE, NEWEST + 1, jf=1), _insn(RET, enosys)]
    numbers = sorted({SYSCALLS[name][arch] for name in blocked if SYSCALLS[name][arch] is not None})
    for number in numbers:
        code += [_insn(JEQ, number, jf=1), _insn(RET, eperm)]
    # clone: refused when it asks for a namespace (the flags are in the low word of its first argument)
    code += [_insn(JEQ, SYSCALLS["clone"][arch], jf=4), _insn(LD_W_ABS, ARGS),
             _insn(JSET, NAMESPACE_FLAGS, jf=1), _insn(RET, eperm), _insn(RET, RET_ALLOW)]
    # clone3's flags live in memory a filter cannot read: ENOSYS, so the C library uses clone
    code += [_insn(JEQ, SYSCALLS["clone3"][arch], jf=1), _insn(RET, enosys)]
    # personality: only the values Docker allows (the kernel reads the low 32 bits)
    allowed = PERSONALITIES
    code += [_insn(JEQ, SYSCALLS["personality"][arch], jf=len(allowed) + 3), _insn(LD_W_ABS, ARGS)]
    for index, value in enumerate(allowed):
        code.append(_insn(JEQ, value, jt=len(allowed) - index))
    code += [_insn(RET, eperm), _insn(RET, RET_ALLOW)]
    code.append(_insn(RET, RET_ALLOW))
    if len(code) > 4096:  # BPF_MAXINSNS
        raise ValueError("seccomp filter too long")
    return b"".join(code)


#: what the sandbox's init itself calls before it loads :func:`kernel_filter`
INIT_NEEDS = ("mount", "keyctl")


def init_filter(arch: Optional[str] = None) -> bytes:
    """What bubblewrap loads before the sandbox's init runs: all of :data:`BLOCKED` but
    :data:`INIT_NEEDS` (the init mounts the sandbox's size-limited tmpfs and joins a new, empty
    session keyring, then loads :func:`kernel_filter`)."""
    return build_filter([name for name in BLOCKED if name not in INIT_NEEDS], arch)


def kernel_filter(arch: Optional[str] = None) -> bytes:
    """What the init loads right before it executes the kernel: all of :data:`BLOCKED`."""
    return build_filter(BLOCKED, arch)
