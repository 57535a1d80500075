"""The attacks of issue 29 on the sandbox, names, regrading, odd notebooks and installs (round three).

Builders take the same arguments as round two's (``source``, ``release``, ``chapter``, ``other``,
``context``) and return a notebook. Markers printed by an attack, read by
tests/test_grader_hostile.py and tools/hostile_before.py:

* ``KEYRING name result``: each keyring call (``keyctl`` read, search, ``add_key``, /proc/keys),
  ``KEYRING-LEAK ...`` if it read the canary the test planted in the grader's session keyring;
* ``SYSCALL name errno``: each refused family (``EPERM`` expected; ``OK`` if the call went through).

The honest odd notebooks (``bom``, ``magic-time``, ``magic-capture``) are the solution as a
student could hand it in: saved with a UTF-8 byte-order mark, or with ``%%time`` / ``%%capture``
on the first line of every answer cell. ``NAMES3`` are file names that stopped a class or mixed
two students up.
"""

from __future__ import annotations

import copy
import json
from typing import Dict

from .attacks import _answer_indexes, _text
from .round2 import Attack, _with_added_cell

#: the canary's payload: a run passes only if no output holds it
CANARY = "SECRET-H3-keyring-canary-9e41"

KEYRING = r'''
import ctypes, errno, os
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_nr = {"x86_64": {"keyctl": 250, "add_key": 248, "request_key": 249},
       "aarch64": {"keyctl": 219, "add_key": 217, "request_key": 218}}[os.uname().machine]

def _call(name, *args):
    ctypes.set_errno(0)
    got = _libc.syscall(ctypes.c_long(_nr[name]), *args)
    return got, errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno())) if got < 0 else "OK"

def _read(serial):
    buffer = ctypes.create_string_buffer(4096)
    got, err = _call("keyctl", ctypes.c_long(11), ctypes.c_long(serial), buffer, ctypes.c_long(4096))
    return got, err, buffer.raw[:max(got, 0)]

for _ring, _spec in (("session", -3), ("user", -4), ("user-session", -5)):
    _got, _err, _data = _read(_spec)  # KEYCTL_READ of a keyring: the serials of its keys
    print("KEYRING read", _ring, _err)
    for _i in range(0, len(_data) - len(_data) % 4, 4):
        _serial = int.from_bytes(_data[_i:_i + 4], "little")
        _g, _e, _payload = _read(_serial)
        print("KEYRING-LEAK" if b"SECRET-H3" in _payload else "KEYRING key", _serial, _e, _payload[:80])
    _found, _err = _call("keyctl", ctypes.c_long(10), ctypes.c_long(_spec), b"user", {name!r},
                         ctypes.c_long(0))  # KEYCTL_SEARCH
    print("KEYRING search", _ring, _err)
    if _found > 0:
        print("KEYRING-LEAK" if b"SECRET-H3" in _read(_found)[2] else "KEYRING found", _found, _read(_found)[2][:80])
    _got, _err = _call("add_key", b"user", b"planted-by-student", b"x" * 8, ctypes.c_long(8), ctypes.c_long(_spec))
    print("KEYRING add_key", _ring, _err)
_got, _err = _call("request_key", b"user", {name!r}, None, ctypes.c_long(0))
print("KEYRING request_key", _err)
try:
    _keys = open("/proc/keys").read()
    print("KEYRING-LEAK /proc/keys" if {name!r}.decode() in _keys else "KEYRING /proc/keys readable",
          len(_keys.splitlines()))
except OSError as _e:
    print("KEYRING /proc/keys", type(_e).__name__)
'''

#: (name, x86-64 number, aarch64 number, arguments): harmless arguments (NULL pointers, invalid
#: values), so a call that is not refused fails or does nothing
SYSCALLS = [
    ("keyctl", 250, 219, (0, -3, 0)), ("add_key", 248, 217, (0, 0, 0, 0, -3)),
    ("request_key", 249, 218, (0, 0, 0, 0)), ("mount", 165, 40, (0, 0, 0, 0, 0)),
    ("umount2", 166, 39, (0, 0)), ("pivot_root", 155, 41, (0, 0)), ("unshare", 272, 97, (0x10000000,)),
    ("setns", 308, 268, (-1, 0)), ("clone-newuser", 56, 220, (0x10000000 | 17, 0, 0, 0, 0)),
    ("bpf", 321, 280, (0, 0, 0)), ("perf_event_open", 298, 241, (0, 0, -1, -1, 0)),
    ("ptrace", 101, 117, (16, 1, 0, 0)), ("process_vm_readv", 310, 270, (1, 0, 0, 0, 0, 0)),
    ("userfaultfd", 323, 282, (0,)), ("init_module", 175, 105, (0, 0, 0)),
    ("finit_module", 313, 273, (-1, 0, 0)), ("kexec_load", 246, 104, (0, 0, 0, 0)),
    ("reboot", 169, 142, (0, 0, 0, 0)), ("swapon", 167, 224, (0, 0)), ("swapoff", 168, 225, (0,)),
    ("clock_settime", 227, 112, (0, 0)), ("settimeofday", 164, 170, (0, 0)), ("acct", 163, 89, (0,)),
    ("quotactl", 179, 60, (0, 0, 0, 0)), ("lookup_dcookie", 212, 18, (0, 0, 0)),
    ("open_by_handle_at", 304, 265, (-1, 0, 0)), ("name_to_handle_at", 303, 264, (-1, 0, 0, 0, 0)),
    ("personality", 135, 92, (0x0040000,)), ("syslog", 103, 116, (3, 0, 0)),
    ("io_uring_setup", 425, 425, (1, 0)), ("fsopen", 430, 430, (0, 0)),
]

SYSCALL_PROBE = r'''
import ctypes, errno, os
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_column = 1 if os.uname().machine == "x86_64" else 2
for _entry in {calls!r}:
    ctypes.set_errno(0)
    _got = _libc.syscall(ctypes.c_long(_entry[_column]), *[ctypes.c_long(a) for a in _entry[3]])
    print("SYSCALL", _entry[0], errno.errorcode.get(ctypes.get_errno(), "?") if _got < 0 else "OK")
'''


def _keyring(source, release, chapter, other, context=None):
    """The solution, with a cell that reads and plants kernel keys before the exercises (it reads
    every key of the keyrings it reaches, and searches for the canary's name, ``context["canary_name"]``)."""
    name = (context or {}).get("canary_name", "attention-book-canary").encode()
    return _with_added_cell(source, KEYRING.replace("{name!r}", repr(name)))


def _syscalls(source, release, chapter, other, context=None):
    """The solution, with a cell that tries every refused family of system calls."""
    return _with_added_cell(source, SYSCALL_PROBE.format(calls=SYSCALLS))


def _magic(source, chapter, line: str) -> dict:
    """The solution with ``line`` (a cell magic) on the first line of every answer cell."""
    nb = copy.deepcopy(source)
    for index in _answer_indexes(nb, chapter):
        nb["cells"][index]["source"] = f"{line}\n" + _text(nb["cells"][index])
    return nb


def with_bom(nb) -> bytes:
    """A notebook's bytes as a Windows editor saves them: a UTF-8 byte-order mark first."""
    return b"\xef\xbb\xbf" + json.dumps(nb, ensure_ascii=False).encode("utf-8")


ROUND3: Dict[str, Attack] = {
    attack.name: attack
    for attack in [
        Attack("keyring", "sandbox", "reads the grader's session and user keyrings, plants keys", _keyring),
        Attack("syscalls", "sandbox", "tries keyrings, mount, namespaces, bpf, perf, ptrace, userfaultfd, "
               "modules, kexec, reboot, swap, clocks, acct, quotas, file handles, personality, syslog, "
               "io_uring, the new mount API (then solves everything)", _syscalls),
        Attack("magic-time", "honest", "%%time on the first line of every answer cell",
               lambda source, release, chapter, other, context=None: _magic(source, chapter, "%%time")),
        Attack("magic-capture", "honest", "%%capture on the first line of every answer cell",
               lambda source, release, chapter, other, context=None: _magic(source, chapter, "%%capture")),
    ]
}

#: honest file names: an ordinary LMS download of 117 bytes (ENAMETOOLONG before issue 29), a
#: trailing space (a different student from "carol"), a leading quote-and-equals (the issue's
#: "'=alice.ipynb": the next run refused it as "unknown student '=alice'"), one of 255 bytes (the
#: most a file system allows)
LONG_NAME = "Глава 3 Softmax и масштабирование - Иванова Александра Сергеевна.ipynb"
NAMES3 = [LONG_NAME, "carol .ipynb", "carol.ipynb", "'=carol.ipynb", "ж" * 124 + "a.ipynb"]

#: a module imported at start by the grader and its workers (through PYTHONPATH) that reserves
#: address space the way PyTorch's CUDA build does on a machine without a GPU (measured: VmSize
#: 3062 MB after `import torch` 2.14.1+cu130, 624 MB with 2.13.0+cpu); AB_SIMULATE_MAPPED_MB says how much
CUDA_FOOTPRINT = r'''
import ctypes, os
_mb = int(os.environ.get("AB_SIMULATE_MAPPED_MB", "0") or 0)
if _mb:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.mmap.restype = ctypes.c_void_p
    _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    # PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE: address space only, no memory
    SIMULATED_LIBRARIES = _libc.mmap(None, _mb << 20, 0, 0x02 | 0x20 | 0x4000, -1, 0)
'''
