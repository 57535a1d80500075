"""The grader's bounds, one by one, without a sandbox (issue 19): fast unit tests.

What a hostile kernel sends is read by :mod:`attention_book.instructor.wire` (size, depth, items,
tensors that own their storage, frames on pipes); names are escaped one-to-one; the planning step
has size caps and a linear pairing; the exercise's rules and "own work only" are read from the
source; hidden tests send inputs only; error messages do not repeat value dumps. The whole
pipeline under attack is tests/test_grader_hostile.py.
"""

from __future__ import annotations

import copy
import json
import os
import struct
import time
from pathlib import Path

import nbformat
import pytest
import torch

from attention_book.checks.answers import StaticAnswer
from attention_book.checks.rules import CHAPTER_CODE_FILE, RULES, SOFTMAX_NAMES, chapter_code, rule
from attention_book.instructor import wire
from attention_book.instructor.course import Course
from attention_book.instructor.hidden import LocalSession, Session, answer, shown_error
from attention_book.instructor.kernel_side import encode_reply, handle, plain
from attention_book.instructor.planning import MAX_CODE_CELLS, PlanRefused, plan_submission
from attention_book.instructor.release import release_notebook
from attention_book.instructor.remote import RemoteNamespace
from attention_book.instructor.report import read_grades, write_outputs
from attention_book.instructor.submissions import display_name, pick_chapter, record_name
from helpers import in_ci

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------ the data format


def test_values_round_trip():
    value = {"a": [1, 2 ** 70, -3.5, 1 + 2j, "héllo", None, True, torch.float64],
             "t": (torch.randn(2, 3), torch.tensor([True, False]), torch.zeros(0, 4, dtype=torch.int64),
                   torch.randn(3, 4).T, torch.randn(2, 2, dtype=torch.bfloat16)),
             "o": wire.Opaque("module")}
    back = wire.decode(wire.encode(value))
    assert back["a"] == value["a"] and back["o"] == value["o"]
    for got, want in zip(back["t"], value["t"]):
        assert got.dtype == want.dtype and torch.equal(got, want) and got.is_contiguous()
    assert isinstance(back["t"], tuple) and isinstance(back["a"], list)


@pytest.mark.parametrize("data, reason", [
    (b"L" + struct.pack("<I", 0xFFFFFFFF) + b"N" * 64, "longer than its bytes"),
    (b"L\x01\x00\x00\x00" * 1000 + b"N", "nested deeper"),
    (b"U" + struct.pack("<I", 250_000) + b"N" * 250_000, "more than 200000 items"),
    (b"X" + bytes([0, 1]) + struct.pack("<Q", int(5e8)) + b"\0" * 4, "needs 2000000000 bytes"),
    (b"X" + bytes([0, 2]) + struct.pack("<QQ", 1 << 62, 1 << 62) + b"\0" * 8, "size above"),
    (b"X" + bytes([0, 2]) + struct.pack("<QQ", 1 << 30, 1 << 30) + b"\0" * 8, "needs"),
    (b"X" + bytes([99, 0]), "unknown dtype"),
    (b"X" + bytes([0, 40]), "dimensions"),
    (b"M" + struct.pack("<I", 1) + b"N", "not a str"),
    (b"S" + struct.pack("<I", 2) + b"\xff\xfe", "not UTF-8"),
    (b"NN", "bytes left"),
    (b"Z", "unknown tag"),
    (b"J" + struct.pack("<H", 500) + b"9" * 500, "digits"),
    (b"Y" + struct.pack("<I", 7) + b"Storage", "unknown dtype"),
    (b"J" + struct.pack("<H", 3) + b"--5", "malformed int"),  # int() would raise a plain ValueError
    (b"J" + struct.pack("<H", 3) + b"1-2", "malformed int"),
    (b"X" + bytes([0, 2]) + struct.pack("<QQ", 0, 1 << 63), "size above"),  # empty, yet 2**63 rows
])
def test_replies_that_break_a_bound_are_refused_quickly(data, reason):
    started = time.process_time()  # CPU time: the work a bound saves, whatever else runs beside
    with pytest.raises(wire.WireError, match=reason):
        wire.decode(data)
    assert time.process_time() - started < 2.0


def test_whatever_a_library_raises_on_odd_bytes_is_a_wire_error(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a C++ traceback\nat some/grader/path.cpp:12")

    monkeypatch.setattr(torch, "frombuffer", broken)
    with pytest.raises(wire.WireError, match=r"^a malformed value \(RuntimeError\)$"):
        wire.decode(wire.encode(torch.ones(2)))


def test_size_is_checked_before_anything_is_read():
    with pytest.raises(wire.WireError, match="more than 1024"):
        wire.decode(b"N" * 2048, wire.Bounds(max_bytes=1024))


@pytest.mark.parametrize("view", [
    lambda: torch.zeros(1).expand(10),  # a zero stride: 4 bytes posing as 40
    lambda: torch.zeros(8).as_strided((3, 2), (1, 1)),  # overlapping rows
    lambda: torch.zeros(8)[::2],  # gaps
])
def test_tensor_views_are_refused(view):
    with pytest.raises(wire.WireError):
        wire.check_tensor(view())
    wire.check_tensor(torch.randn(3, 4).T)  # a permuted dense view is fine


def test_an_expanded_tensor_is_never_materialised_to_be_sent():
    with pytest.raises(wire.WireError, match="more than"):
        wire.encode(torch.zeros(1).expand(int(5e8)))
    assert plain(torch.zeros(1).expand(int(5e8))) == wire.Opaque("tensor too large")


def test_frames_check_nonce_length_deadline_and_end():
    read, write = os.pipe()
    os.set_blocking(read, False)
    wire.write_frame(write, 7, b"abc")
    with pytest.raises(wire.WireError, match="another call"):
        wire.read_frame(read, 8, 100, time.monotonic() + 5)
    wire.drain(read)
    wire.write_frame(write, 7, b"x" * 200)
    with pytest.raises(wire.WireError, match="more than 100"):
        wire.read_frame(read, 7, 100, time.monotonic() + 5)
    wire.drain(read)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        wire.read_frame(read, 7, 100, time.monotonic() + 0.3)
    assert time.monotonic() - started < 2
    os.write(write, b"ABW1")
    os.close(write)
    with pytest.raises(EOFError):
        wire.read_frame(read, 7, 100, time.monotonic() + 5)
    os.close(read)


def test_the_kernel_side_sends_shared_references_as_a_bounded_tree():
    shared = [0] * 100
    for _ in range(7):
        shared = [shared] * 100
    reply = wire.decode(encode_reply({"ok": True, "value": plain(shared)}))
    assert reply["ok"] is False and reply["ename"] == "UnsavableValue"  # refused, quickly


def test_kernel_sockets_are_reached_without_following_links(tmp_path):
    """A link or FIFO where the kernel's socket belongs is refused, never opened (or waited on)."""
    import socket

    from attention_book.instructor.sandbox import open_inside

    folder = tmp_path / "kernel"
    folder.mkdir()
    target = tmp_path / "grader-file"
    target.write_text("the grader's")
    (folder / "k-1").symlink_to(target)
    os.mkfifo(folder / "k-2")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(folder / "k-3"))
    (tmp_path / "swapped").symlink_to(folder)
    me = os.getpid()
    with pytest.raises(OSError):
        open_inside(me, f"{folder}/k-1")
    started = time.monotonic()
    with pytest.raises(OSError, match="not a socket"):
        open_inside(me, f"{folder}/k-2")
    assert time.monotonic() - started < 1  # a FIFO is never opened for reading or writing
    with pytest.raises(OSError):
        open_inside(me, f"{tmp_path}/swapped/k-3")  # a link among the folders, too
    fd = open_inside(me, f"{folder}/k-3")
    os.close(fd)
    listener.close()
    assert target.read_text() == "the grader's"


# ------------------------------------------------------------------------------------------------ requests


def test_hidden_tests_send_inputs_only_never_code():
    with pytest.raises(TypeError, match="inputs only"):
        Session().run("1 + 1")
    for path in sorted((ROOT / "instructor" / "hidden_tests").glob("ch*.py")):
        assert ".run(" not in path.read_text(), path.name
    request = handle({}, {"op": "exec", "code": "1"})
    assert request["ok"] is False and "unknown request" in request["evalue"]


def test_in_place_changes_are_reported_not_copied_back():
    code = "def f(x):\n    x.zero_()\n    return x + 1\n"
    ns: dict = {}
    exec(code, ns)  # noqa: S102 - test code
    session = LocalSession(ns)
    f = answer(RemoteNamespace(session), "f")
    mine = torch.ones(3)
    assert torch.equal(f(mine), torch.ones(3)) and torch.equal(mine, torch.ones(3))
    assert f.mutated == ["argument 1"]


def test_error_messages_do_not_repeat_value_dumps():
    assert shown_error("RuntimeError", "The size of tensor a (4) must match the size of tensor b (3)") == (
        "RuntimeError: The size of tensor a (4) must match the size of tensor b (3)")
    assert "not repeated" in shown_error("ValueError", "tensor([[ 0.1234, -1.2345, 2.3456]])")
    assert "not repeated" in shown_error("ValueError", "share 0.995 for target 0")  # one input is one too many
    assert shown_error("ValueError", "temperature must be > 0") == "ValueError: temperature must be > 0"
    assert shown_error("Leak2024", "x").startswith("an exception")


# ------------------------------------------------------------------------------------------------ names


NAMES = ["alice", "a\rb", "a\nb", "x\x1b[31mred", os.fsdecode(b"\xff\xfeab"), "back\\slash", "é ü", "a\u2028b",
         "a\u202eb", "a\\x0db"]


def test_names_are_escaped_one_to_one():
    shown = [display_name(n) for n in NAMES]
    assert len(set(shown)) == len(NAMES) and len({record_name(n) for n in NAMES}) == len(NAMES)
    for text in shown:
        assert all(ch.isprintable() for ch in text) and not any(0xDC80 <= ord(ch) <= 0xDCFF for ch in text)
    assert display_name("é ü") == "é ü"


def test_grades_with_odd_names_read_back(tmp_path):
    rows = [[display_name(n), "ex-99-x", "Exercise 99.1", "1", "2", "msg\rwith\x1b[2Jescapes", ""] for n in NAMES]
    csv_path, summary = write_outputs(tmp_path, "t", rows, [], [], "points.toml")
    back = read_grades(csv_path)
    assert set(name for name, _ in back) == {display_name(n) for n in NAMES}
    assert "\x1b" not in summary.read_text()


# ------------------------------------------------------------------------------------------------ planning


@pytest.fixture(scope="module")
def chapter3():
    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    labels = [ex.label for ex in chapter.exercises if ex.answer_cells and course.points_for(ex.label) > 0]
    return course, chapter, source, release, labels


def test_planning_refuses_notebooks_over_its_caps(chapter3):
    _, chapter, _, release, labels = chapter3
    nb = copy.deepcopy(release)
    nb["cells"] += [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": "1"}
                    for _ in range(MAX_CODE_CELLS + 1)]
    with pytest.raises(PlanRefused, match="code cells"):
        plan_submission(nbformat.from_dict(nb), release, chapter, labels)


def test_planning_a_huge_edited_notebook_takes_seconds(chapter3):
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from hostile.round2 import ROUND2

    course, chapter, source, release, labels = chapter3
    nb = ROUND2["huge-plan"].build(source=source, release=release, chapter=chapter, other=None)
    assert len(json.dumps(nb)) > 1_500_000
    started = time.process_time()  # CPU time: a busy machine stretches the wall clock, not the work
    plan = plan_submission(nbformat.from_dict(nb), release, chapter, labels)
    assert time.process_time() - started < 20 and plan.cells


def _answered(chapter, release, bodies):
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from hostile.round2 import _with_answers

    return nbformat.from_dict(_with_answers(release, chapter, bodies))


def test_rules_and_own_work_are_read_from_the_source(chapter3):
    _, chapter, source, release, labels = chapter3
    plan = plan_submission(_answered(chapter, release, {
        "ex-03-stable-softmax": "return torch.softmax(scores, dim=dim)",
        "ex-03-scaled-weights": "return scaled_attention_weights(queries, keys)",
        "ex-03-temperature": "sm = stable_softmax\nreturn sm(scores / temperature)",
    }), release, chapter, labels)
    assert "torch.softmax" in plan.zero["ex-03-stable-softmax"]
    assert "scaled_attention_weights" in plan.zero["ex-03-scaled-weights"]
    assert "stable_softmax" in plan.zero["ex-03-temperature"]
    assert "ex-03-attend" not in plan.zero
    solved = plan_submission(nbformat.from_dict(copy.deepcopy(source)), release, chapter, labels)
    assert solved.zero == {}, solved.zero


def test_a_definition_moved_to_an_added_cell_is_read_too(chapter3):
    _, chapter, _, release, labels = chapter3
    nb = copy.deepcopy(release)
    index = next(i for i, cell in enumerate(nb["cells"])
                 if ((cell.get("metadata") or {}).get("attention_book") or {}).get("role") == "answer")
    nb["cells"].insert(index + 1, {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                                   "source": "def my_softmax(scores, dim=-1):\n    return scores.softmax(dim)\n"})
    plan = plan_submission(nbformat.from_dict(nb), release, chapter, labels)
    assert "softmax" in plan.zero["ex-03-stable-softmax"]


def test_an_answer_that_drops_its_definition_scores_zero(chapter3):
    _, chapter, _, release, labels = chapter3
    nb = copy.deepcopy(release)
    for cell in nb["cells"]:
        info = (cell.get("metadata") or {}).get("attention_book") or {}
        if info.get("exercise") == "ex-03-scaled-weights" and info.get("role") == "answer":
            cell["source"] = "# nothing here\n"
    plan = plan_submission(nbformat.from_dict(nb), release, chapter, labels)
    assert "does not define `scaled_weights`" in plan.zero["ex-03-scaled-weights"]


@pytest.mark.parametrize("code, forbidden, chapter_names", [
    ("def my_softmax(scores, dim=-1):\n    count = scores.exp()\n    return count / count.sum(dim, keepdim=True)",
     [], []),
    ("def my_softmax(scores, dim=-1):\n    return torch.softmax(scores, dim)", ["torch.softmax", "softmax"], []),
    ("def my_softmax(scores, dim=-1):\n    return F.softmax(scores, dim)",
     ["torch.nn.functional.softmax", "F.softmax", "softmax"], []),
    ("def my_softmax(scores, dim=-1):\n    return scores.softmax(dim)", ["softmax"], []),
    ("sm = torch.softmax\ndef my_softmax(scores, dim=-1):\n    return sm(scores, dim)", ["torch.softmax", "softmax"], []),
    ("my_softmax = stable_softmax", [], ["stable_softmax"]),
    ("import functools\nmy_softmax = functools.partial(stable_softmax, dim=-1)", [], ["stable_softmax"]),
    ("def my_softmax(scores, dim=-1):\n    return helper(scores, dim)", ["torch.nn.functional.softmax", "F.softmax",
                                                                        "softmax"], []),
    ("def my_softmax(scores, dim=-1):\n    return count(scores)", [], ["count"]),
    ("def stable_softmax(s, dim=-1):\n    e = (s - s.amax(dim, keepdim=True)).exp()\n"
     "    return e / e.sum(dim, keepdim=True)\nmy_softmax = stable_softmax", [], []),
])
def test_static_rules(code, forbidden, chapter_names):
    course = ["import torch\nimport torch.nn.functional as F\nfrom attention_book.softmax import stable_softmax\n"
              "def count(x):\n    return 1\n"]
    added = ["def helper(s, d):\n    return torch.nn.functional.softmax(s, d)\n"]
    static = StaticAnswer([code], [code] + added, course)
    names = [n for n in SOFTMAX_NAMES if n in ("torch.softmax", "torch.nn.functional.softmax", "F.softmax", "softmax")]
    assert static.forbidden(names) == forbidden
    assert static.chapter_names(["stable_softmax", "count", "heatmap"]) == chapter_names


@pytest.mark.parametrize("code, dynamic", [
    ("def f(x):\n    return globals()['stable_' + 'softmax'](x)", ["globals"]),
    ("import torch\ndef f(x):\n    return getattr(torch, 'soft' + 'max')(x, -1)", ["getattr"]),
    ("def f(x):\n    return eval('x.exp()')", ["eval"]),
    ("import importlib\ndef f(x):\n    return importlib.import_module('torch').softmax(x, -1)",
     ["importlib.import_module"]),
    ("def f(module):\n    return getattr(module, 'weight')", []),  # a constant name is plain code
])
def test_code_made_at_run_time_is_noticed(code, dynamic):
    assert StaticAnswer([code], [code], []).dynamic == dynamic


def test_chapter_code_list_is_up_to_date():
    from attention_book.instructor.own_work import render

    assert CHAPTER_CODE_FILE.read_text(encoding="utf-8") == render(Course.load(ROOT)), (
        "src/attention_book/checks/chapter_code.json is out of date: run "
        "`.venv/bin/python -m attention_book.instructor.own_work --write`")
    assert "stable_softmax" in chapter_code("ex-03-temperature")
    assert rule("ex-03-stable-softmax").forbidden == SOFTMAX_NAMES
    assert set(RULES) <= set(json.loads(CHAPTER_CODE_FILE.read_text()))


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5, 6, 7, 8, 10])
def test_every_chapter_solution_keeps_every_rule(number):
    """The rules read from the source never refuse the course's own solutions."""
    course = Course.load(ROOT)
    chapter = next((c for c in course.chapters if c.number == number), None)
    if chapter is None:
        pytest.skip(f"no chapter {number} in this checkout")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    labels = [ex.label for ex in chapter.exercises if ex.answer_cells and course.points_for(ex.label) > 0]
    plan = plan_submission(nbformat.from_dict(copy.deepcopy(source)), release, chapter, labels)
    assert plan.zero == {}, plan.zero


def test_a_contiguous_tensor_with_odd_strides_travels():
    """A (1, 1) view of a transposed matrix counts as contiguous but has stride (1, 3): it is
    data like any other (found by chapter 9's Conv1D exercise, whose answers return such views)."""
    import torch

    from attention_book.instructor import wire

    view = torch.randn(1, 3).T.split(1, dim=0)[0]
    assert view.is_contiguous() and view.stride() == (1, 3)
    back = wire.decode(wire.encode(view))
    assert torch.equal(back, view)


def test_the_grader_says_when_a_sandbox_has_no_memory_limit_of_its_own():
    from attention_book.instructor.sandbox import memory_isolation_warning
    from helpers import in_ci

    warning = memory_isolation_warning()
    if os.geteuid() != 0:
        assert warning and "not root" in warning and "--jobs 1" in warning
    elif in_ci():  # CI's machine (root) has cgroups: every sandbox gets its own memory limit
        assert warning is None, warning
    else:
        assert warning is None or "cgroup" in warning


def test_a_process_under_a_sandbox_user_id_no_grader_holds_is_a_stray():
    """What the hostile suite counts as "outlived grading": processes of a sandbox user id whose
    lock no grader holds (a grader running beside it keeps its own ids locked)."""
    import subprocess

    from attention_book.instructor.sandbox import claim_uid, stray_processes

    if os.geteuid() != 0:  # without root there are no sandbox user ids to leave behind
        assert stray_processes() == []
        return
    claim = claim_uid()
    child = subprocess.Popen(["sleep", "60"], user=claim.uid, group=claim.uid, cwd="/")
    try:
        time.sleep(0.2)
        assert child.pid not in stray_processes()  # its grader is still at work
        claim.release()
        assert child.pid in stray_processes()
    finally:
        child.kill()
        child.wait()
        claim.release()
    assert child.pid not in stray_processes()


# ------------------------------------------------------------------------------------------------ the system-call filter


def _run_filter(program: bytes, nr: int, arch: int, args=(0,) * 6) -> int:
    """What a classic BPF seccomp program returns for one call (the kernel's interpreter, in Python:
    the instructions the filter uses, so both architectures are checked on any machine)."""
    args = (tuple(args) + (0,) * 6)[:6]
    data = struct.pack("=iIQ6Q", nr, arch, 0, *[a & (2 ** 64 - 1) for a in args])
    insns = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:  # ld word at k
            acc = struct.unpack_from("=I", data, k)[0]
        elif code == 0x15:  # jeq
            pc += jt if acc == k else jf
        elif code == 0x35:  # jge
            pc += jt if acc >= k else jf
        elif code == 0x45:  # jset
            pc += jt if acc & k else jf
        elif code == 0x06:  # ret
            return k
        else:
            raise AssertionError(f"unexpected instruction {code:#x}")
        pc += 1


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_the_system_call_filter_refuses_every_listed_call_and_nothing_else(arch):
    import errno

    from attention_book.instructor import seccomp

    program, native = seccomp.kernel_filter(arch), seccomp.AUDIT_ARCH[arch]
    eperm, enosys, allow = 0x50000 | errno.EPERM, 0x50000 | errno.ENOSYS, 0x7FFF0000
    refused = {seccomp.SYSCALLS[name][arch] for name in seccomp.BLOCKED} - {None}
    assert {seccomp.SYSCALLS[name][arch] for name in ("keyctl", "add_key", "request_key", "bpf", "ptrace",
                                                       "mount", "unshare", "setns", "userfaultfd")} <= refused
    for nr in range(seccomp.NEWEST + 1):
        want = eperm if nr in refused else allow
        if nr == seccomp.SYSCALLS["clone3"][arch]:
            want = enosys
        assert _run_filter(program, nr, native) == want, (arch, nr)
    assert _run_filter(program, seccomp.NEWEST + 1, native) == enosys  # newer than the table
    assert _run_filter(program, 1, 0x40000003) == eperm  # another ABI (i386: int 0x80)
    if arch == "x86_64":
        assert _run_filter(program, 0x40000000 + 39, native) == eperm  # the x32 ABI
    clone = seccomp.SYSCALLS["clone"][arch]
    assert _run_filter(program, clone, native, (0x01200011,)) == allow  # fork()'s flags
    assert _run_filter(program, clone, native, (0x003D0F00,)) == allow  # a thread's flags
    for flag in (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000):
        assert _run_filter(program, clone, native, (0x01200011 | flag,)) == eperm, hex(flag)
    personality = seccomp.SYSCALLS["personality"][arch]
    for value in seccomp.PERSONALITIES:
        assert _run_filter(program, personality, native, (value,)) == allow
    assert _run_filter(program, personality, native, (0x0040000,)) == eperm  # ADDR_NO_RANDOMIZE
    init = seccomp.init_filter(arch)  # what bubblewrap loads: the init may still mount and join a keyring
    assert _run_filter(init, seccomp.SYSCALLS["mount"][arch], native) == allow
    assert _run_filter(init, seccomp.SYSCALLS["keyctl"][arch], native) == allow
    assert _run_filter(init, seccomp.SYSCALLS["add_key"][arch], native) == eperm


def test_the_system_call_numbers_match_the_kernel_headers():
    """The table's numbers, checked against the C headers where they are installed (linux-libc-dev):
    x86-64's own table and the generic one aarch64 uses."""
    import re

    from attention_book.instructor import seccomp

    headers = {"x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
               "aarch64": Path("/usr/include/asm-generic/unistd.h")}
    checked = 0
    for arch, header in headers.items():
        if not header.is_file():
            assert not in_ci() or arch != "x86_64" or os.uname().machine != "x86_64", f"{header} missing"
            continue
        numbers = {m[0]: int(m[1]) for m in re.findall(r"#define __NR(?:3264)?_(\w+)\s+(\d+)\b", header.read_text())}
        for name, by_arch in seccomp.SYSCALLS.items():
            if name in numbers:
                assert by_arch[arch] == numbers[name], (arch, name, by_arch[arch], numbers[name])
                checked += 1
            elif by_arch[arch] is not None and by_arch[arch] <= 450:  # the headers here stop at 450
                assert name in ("_sysctl", "create_module", "get_kernel_syms", "query_module", "nfsservctl",
                                "uselib", "ustat", "sysfs"), (arch, name)
    assert checked >= 60 or not in_ci()
