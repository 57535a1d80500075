"""Running a grader on a class of notebooks in a process of its own, and watching the machine.

:func:`grade_in_process` starts ``python`` (today's grader or an earlier one, see
``tools/hostile_before.py``) on a folder with :func:`attention_book.instructor.grade.grade_folder`
and returns what happened: the exit status, the wall time, the grader's peak memory (``ru_maxrss``
of that process alone, measured by a wrapper process), its terminal output and the report.
:func:`snapshot` records a folder's files (mode, size, SHA-256) to compare before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional, Tuple

GRADE = r'''
import dataclasses, json, sys, time
from pathlib import Path
from attention_book.instructor.course import Course
from attention_book.instructor import grade
from attention_book.instructor.sandbox import Limits
spec = json.loads(sys.argv[1])
def known(cls, values):
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in values.items() if k in names}
options = grade.GradeOptions(**known(grade.GradeOptions, spec["options"]))
options.limits = Limits(**known(Limits, spec["limits"]))
started = time.monotonic()
course = Course.load(Path(spec["root"]), points_file=spec.get("points_file"))
report = grade.grade_folder(course, Path(spec["subs"]), Path(spec["out"]), options)
failed = getattr(report, "grader_errors", [])
print("GRADER-REPORT " + json.dumps({"seconds": time.monotonic() - started,
      "skipped_files": [[repr(n), w] for n, w in report.skipped_files], "graded": len(report.graded),
      "grader_errors": [[repr(n), w] for n, w in failed]}), flush=True)
sys.exit(4 if failed else 0)  # as `attention-book grade` does
'''

WRAP = r'''
import ctypes, os, resource, subprocess, sys, time, json
canary = sys.argv[3] if len(sys.argv) > 3 else ""
canary_name = (sys.argv[4] if len(sys.argv) > 4 else "attention-book-canary").encode()
keys = {}
if canary:  # the grader runs in a session keyring of its own holding a canary, and one is in the user keyring
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    nr = {"x86_64": (250, 248), "aarch64": (219, 217)}[os.uname().machine]
    def keyctl(*args):
        return libc.syscall(ctypes.c_long(nr[0]), *args)
    def contents(spec):
        buffer = ctypes.create_string_buffer(4096)
        size = keyctl(ctypes.c_long(11), ctypes.c_long(spec), buffer, ctypes.c_long(4096))
        return sorted(int.from_bytes(buffer.raw[i:i + 4], "little") for i in range(0, max(size, 0), 4))
    assert keyctl(ctypes.c_long(1), None) > 0, "join a new session keyring"
    # as a login's pam_keyinit does: the user keyring linked into the session one (its keys are then possessed)
    assert keyctl(ctypes.c_long(8), ctypes.c_long(-4), ctypes.c_long(-3)) == 0, "link the user keyring"
    payload = canary.encode()
    for spec, where in ((-3, "session"), (-4, "user")):
        serial = libc.syscall(ctypes.c_long(nr[1]), b"user", canary_name, payload,
                              ctypes.c_long(len(payload)), ctypes.c_long(spec))
        assert serial > 0, f"add the canary to the {where} keyring"
        keys[where] = {"canary": serial, "before": contents(spec)}
started = time.monotonic()
try:
    done = subprocess.run(json.loads(sys.argv[1]), timeout=float(sys.argv[2]), capture_output=True)
    code, out, err = done.returncode, done.stdout, done.stderr
except subprocess.TimeoutExpired as exc:
    code, out, err = "timeout", exc.stdout or b"", exc.stderr or b""
if canary:
    def describe(serial):  # "type;uid;gid;perm;description" (KEYCTL_DESCRIBE)
        buffer = ctypes.create_string_buffer(4096)
        size = keyctl(ctypes.c_long(6), ctypes.c_long(serial), buffer, ctypes.c_long(4096))
        return buffer.raw[:max(size - 1, 0)].decode("utf-8", "replace")
    for spec, where in ((-3, "session"), (-4, "user")):
        keys[where]["after"] = contents(spec)
        keys[where]["described_after"] = [describe(serial) for serial in keys[where]["after"]]
        buffer = ctypes.create_string_buffer(4096)
        size = keyctl(ctypes.c_long(11), ctypes.c_long(keys[where]["canary"]), buffer, ctypes.c_long(4096))
        keys[where]["still_readable_here"] = buffer.raw[:max(size, 0)].decode() == canary
    keyctl(ctypes.c_long(9), ctypes.c_long(keys["user"]["canary"]), ctypes.c_long(-4))  # KEYCTL_UNLINK
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
sys.stdout.write(json.dumps({"code": code, "seconds": time.monotonic() - started, "maxrss_mb": usage.ru_maxrss / 1024,
                             "stdout": out.decode("utf-8", "replace")[-20000:],
                             "stderr": err.decode("utf-8", "replace")[-200000:], "keys": keys}))
'''


def grade_in_process(root: Path, subs: Path, out: Path, options: dict, limits: dict, python: str = sys.executable,
                     env: Optional[Dict[str, str]] = None, timeout: float = 1800, canary: str = "",
                     points_file: Optional[Path] = None, canary_name: str = "attention-book-canary") -> dict:
    """Grade ``subs`` into ``out`` in a separate grader process; what happened, as a dict. With
    ``canary``, the grader runs in a new session keyring (the user keyring linked into it, as a
    login's ``pam_keyinit`` does) holding a key ``canary_name`` with that payload, and one is put
    in the user keyring for the run (a name of its own: other runs as the same user share that
    keyring): ``result["keys"]`` then
    says, per keyring, the keys before and after the run (``before``/``after``: serials)."""
    spec = json.dumps({"root": str(root), "subs": str(subs), "out": str(out), "options": options, "limits": limits,
                       "points_file": str(points_file) if points_file else None})
    command = [python, "-c", GRADE, spec]
    extra = [canary, canary_name] if canary else []
    wrapper = subprocess.run([sys.executable, "-c", WRAP, json.dumps(command), str(timeout)] + extra,
                             capture_output=True, env=env, check=False)
    try:
        result = json.loads(wrapper.stdout.decode("utf-8"))
    except ValueError:
        raise RuntimeError("the grading wrapper failed: " + wrapper.stderr.decode("utf-8", "replace")[-3000:]) from None
    for line in result["stdout"].splitlines():
        if line.startswith("GRADER-REPORT "):
            result["report"] = json.loads(line[len("GRADER-REPORT "):])
    return result


def snapshot(folder: Path) -> Dict[str, Tuple[int, int, str]]:
    """Every file and folder under ``folder``: (mode, size, SHA-256 of its content)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = os.lstat(path)
            digest = ""
            if stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(folder))] = (info.st_mode, info.st_size, digest)
    return found


def read_records(out: Path) -> Dict[str, dict]:
    records = {}
    for path in sorted((out / "records").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        records[record.get("student") or record.get("file")] = record
    return records
