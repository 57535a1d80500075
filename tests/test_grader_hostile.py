"""Hostile submissions (issues 13, 19 and 29): every attack as a notebook, graded once in a real sandbox.

The class: chapter 3's solution (full marks), its untouched release (0), a partly solved notebook
(exact partial points), every attack of tests/hostile/attacks.py (issue 13) and
tests/hostile/round2.py (issue 19: host files, forged replies, hangs and starvation, points
without solving, leaks), honest notebooks graded while a process hog runs next to them
(``--jobs 2``), and file names that collide, inject a CSV formula, forge rows with a bare CR,
are not UTF-8 or hold terminal escape sequences. The grader runs in a process of its own
(tests/hostile/harness.py: its peak memory is that process's ``ru_maxrss``) with a secret in its
environment and home folder, and one in another student's file. A watched folder of the
grader's machine is the target of the planted links. Afterwards: host files unchanged, every
notebook ended within its budget, the grader stayed under 1 GB (and so did each worker reading
replies), every other student was graded, cheating scored 0 and was flagged, no secret, hidden
input or grader path reached an output, no process outlived grading, grades.csv did not change.

Issue 29 (tests/hostile/round3.py): the grader runs inside a session keyring holding a canary
(and one is in the user keyring): a notebook that reads and plants keys finds neither and adds
none; a notebook trying every refused family of system calls gets EPERM and is graded as usual;
file names of any length and any leading or trailing character are graded (each its own
student), and the next run does not refuse them; a byte-order mark and cell magics grade
normally. Separate small runs check regrading (points change: no notebook runs; a timed-out
notebook is graded again under a longer limit), a grader that fails on a notebook (no points
written, exit status 4), an install whose libraries map as much as PyTorch's CUDA build, and
``--student`` with any file name.

``tools/hostile_before.py`` runs the same class against the grader of an earlier commit: the
attacks of issues 19 and 29 fail there (see its report).
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from attention_book.instructor.course import Course
from attention_book.instructor.grade import GradeOptions, grade_folder, hidden_tests_of
from attention_book.instructor.release import release_notebook
from attention_book.instructor.report import read_grades
from attention_book.instructor.runner import RunOptions
from attention_book.instructor.sandbox import UID_BASE, IsolationError, Sandbox, stray_processes
from attention_book.instructor.submissions import NAME_BYTES, display_name, file_name_part, pick_chapter
from attention_book.instructor.worker import hard_deadline
from helpers import needs_isolation
from hostile.attacks import ATTACKS, solved_subset
from hostile.harness import grade_in_process, read_records, snapshot
from hostile.round2 import NAMES, ROUND2
from hostile.round3 import CANARY, CUDA_FOOTPRINT, LONG_NAME, NAMES3, ROUND3, SYSCALLS, with_bom

ROOT = Path(__file__).resolve().parents[1]
SECRET_ENV = "SECRET-H2-env-3f9a"
SECRET_HOME = "SECRET-H2-home-77c1"
SECRET_OTHER = "SECRET-H2-other-student-1b2e"
SECRET_WATCHED = "SECRET-H2-watched-5d0c"
#: max_output_mb 64 instead of 512: the 4 MB-message flood reaches the output cap after 16 messages,
#: long before the 90 s limit even on a loaded machine (at 512 MB the limit came first once, CI 2026-11-27)
OPTIONS = dict(chapter="03", jobs=2, quiet=False, timeout=90, tests_timeout=60, check_timeout=20, max_output_mb=64)
LIMITS = dict(processes=64, memory_mb=6144, disk_mb=256, total_memory_mb=2048)
HOLD_SECONDS = 30  # the process hog keeps its processes this long (the two notebooks beside it take ~3 s each)

pytestmark = pytest.mark.slow


def _write(folder: Path, name, nb) -> None:
    data = json.dumps(nb).encode("utf-8")
    path = os.path.join(os.fsencode(folder), name if isinstance(name, bytes) else name.encode("utf-8"))
    with open(path, "wb") as handle:
        handle.write(data)


def _processes(marker: bytes):
    """Processes of this grader's sandboxes whose command line holds ``marker`` (other graders may
    run the same attacks on this machine at the same time, as other users)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
                ours = UID_BASE <= uid < UID_BASE + 1000 if os.geteuid() == 0 else uid == os.getuid()
                if ours and marker in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    needs_isolation(base)
    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    other = nbformat.read(str(ROOT / next(c.path for c in course.chapters if c.number == 1)), as_version=4)
    watched = base / "watched"
    watched.mkdir()
    (watched / "secret-0600").write_text(SECRET_WATCHED)
    (watched / "secret-0600").chmod(0o600)
    shutil.copy(ROOT / "instructor" / "hidden_tests" / "ch03.py", watched / "hidden_tests_ch99.py")
    subs = base / "submissions"
    subs.mkdir()
    coding = [ex.label for ex in chapter.exercises if ex.answer_cells and course.points_for(ex.label) > 0]
    canary_name = f"attention-book-canary-{os.getpid()}-{time.time_ns()}"  # runs as one user share its keyring
    context = {"watched": str(watched), "hold_seconds": HOLD_SECONDS, "canary_name": canary_name}
    # the process hog sorts first; the honest notebooks after it are graded while it holds its slots
    _write(subs, "00-hog.ipynb", ROUND2["process-hog"].build(source=source, release=release, chapter=chapter,
                                                              other=other, context=context))
    _write(subs, "01-beside-hog-solution.ipynb", source)
    _write(subs, "02-beside-hog-partial.ipynb", solved_subset(source, chapter, coding[:2]))
    _write(subs, "solution.ipynb", source)
    _write(subs, "release.ipynb", release)
    _write(subs, "partial.ipynb", solved_subset(source, chapter, coding[:1]))
    for name, attack in ATTACKS.items():
        _write(subs, f"attack-{name}.ipynb", attack.build(source=source, release=release, chapter=chapter,
                                                          other=other))
    for name, attack in ROUND2.items():
        if name != "process-hog":
            _write(subs, f"r2-{name}.ipynb", attack.build(source=source, release=release, chapter=chapter,
                                                          other=other, context=context))
    # names: two that an underscore-for-space scheme merges, a formula, a Markdown row forger,
    # a CR forging rows, bytes that are not UTF-8, terminal escapes
    _write(subs, "a b.ipynb", release)
    _write(subs, "a_b.ipynb", source)
    _write(subs, "=HYPERLINK(1).ipynb", release)
    _write(subs, "x | 99 | 99 | 100 | forged |.ipynb", release)
    for raw in NAMES:
        _write(subs, raw, solved_subset(source, chapter, coding[:1]))
    for name, attack in ROUND3.items():  # issue 29: keyrings, refused calls, honest cell magics
        _write(subs, f"r3-{name}.ipynb", attack.build(source=source, release=release, chapter=chapter,
                                                      other=other, context=context))
    (subs / "r3-bom.ipynb").write_bytes(with_bom(source))
    for name in NAMES3:  # each its own student: the solution, except "carol " (trailing space): the release
        _write(subs, name, release if name == "carol .ipynb" else source)
    secret_nb = json.loads(json.dumps(release))
    secret_nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": SECRET_OTHER})
    _write(subs, "zz-other.ipynb", secret_nb)
    (subs / ".hidden.ipynb").write_text(json.dumps(source))
    (subs / "notes.txt").write_text("not a notebook")
    (subs / "link.ipynb").symlink_to(ROOT / chapter.path)
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET_HOME)
    out = base / "out"
    temp = base / "grader-tmp"  # the grader's own temporary folder: it must be empty afterwards
    temp.mkdir()
    before = {"sandbox": set(stray_processes()), "watched": snapshot(watched),
              "instructor": snapshot(ROOT / "instructor"), "subs": snapshot(subs)}
    env = dict(os.environ, H2_GRADER_SECRET=SECRET_ENV, HOME=str(home), TMPDIR=str(temp))
    result = grade_in_process(ROOT, subs, out, OPTIONS, LIMITS, env=env, canary=CANARY, canary_name=canary_name)
    assert result["code"] == 0, result["stderr"][-3000:]
    csv_before = (out / "grades.csv").read_bytes()
    time.sleep(5)  # the detached forger of the "detach" attack would strike after 3 s
    return {"result": result, "out": out, "subs": subs, "course": course, "chapter": chapter, "base": base,
            "temp": temp,
            "rows": read_grades(out / "grades.csv"), "csv_before": csv_before, "before": before,
            "watched": watched, "records": read_records(out), "tests": hidden_tests_of(course, chapter)}


def _points(graded, student):
    rows = {label: value for (name, label), value in graded["rows"].items() if name == student}
    assert rows, f"{student} missing from grades.csv"
    return rows


def _graded_labels(graded):
    return [label for label in graded["tests"] if graded["course"].points_for(label) > 0]


def _flags(graded, student):
    with open(graded["out"] / "grades.csv", newline="", encoding="utf-8") as handle:
        return " ".join(row[6] for row in csv.reader(handle) if row[0] == student)


def _outputs(path: Path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            text = "".join(text) if isinstance(text, list) else str(text)
            yield text + str(output.get("evalue", "")) + str(output.get("data", ""))


def _executed(graded, name: str) -> Path:
    return graded["out"] / "executed" / file_name_part(name)


def _printed(graded, name: str, marker: str):
    return [line for text in _outputs(_executed(graded, name)) for line in text.splitlines() if marker in line]


# ------------------------------------------------------------------------------------------------ honest work


def test_honest_submissions_keep_their_exact_points(graded):
    labels = _graded_labels(graded)
    solution, release, partial = (_points(graded, s) for s in ("solution", "release", "partial"))
    for label in labels:
        assert solution[label][0] == solution[label][1] > 0, (label, solution[label])
        assert release[label][0] == 0, (label, release[label])
    first = labels[0]
    assert partial[first][0] == partial[first][1]
    assert all(partial[label][0] == 0 for label in labels[1:])
    assert _flags(graded, "release").strip() == ""  # an untouched release is not flagged
    assert "changed" not in _flags(graded, "solution")  # nor the course cells of a solved notebook


def test_notebooks_graded_beside_a_process_hog_keep_their_points(graded):
    """Issue 19: with --jobs 2 a notebook took every process slot of the shared sandbox user."""
    hog = _printed(graded, "00-hog.ipynb", "HOG processes:")
    assert hog and int(hog[0].split(":")[1]) >= 40, hog  # it did take its slots
    labels = _graded_labels(graded)
    solution, partial = _points(graded, "01-beside-hog-solution"), _points(graded, "02-beside-hog-partial")
    for label in labels:
        assert solution[label][0] == solution[label][1], (label, solution[label])
    assert [partial[label][0] == partial[label][1] for label in labels] == [True, True] + [False] * (len(labels) - 2)
    records = graded["records"]
    hog_window = records["00-hog"]["wall_seconds"]
    assert hog_window >= HOLD_SECONDS  # and the honest notebooks were graded while it held them
    assert records["01-beside-hog-solution"]["wall_seconds"] < hog_window


@pytest.mark.parametrize("attack", sorted(n for n in ATTACKS if n not in ("tamper-cells", "other-chapter")))
def test_attacks_score_zero(graded, attack):
    rows = _points(graded, f"attack-{attack}")
    assert all(points == 0 for points, _, _ in rows.values()), rows


@pytest.mark.parametrize("attack", sorted(n for n in ROUND2 if n not in ("process-hog", "leak-inputs", "leak-code")))
def test_round_two_attacks_score_zero(graded, attack):
    rows = _points(graded, f"r2-{attack}")
    assert all(points == 0 for points, _, _ in rows.values()), rows


def test_tampered_cells_are_restored_and_flagged(graded):
    rows = _points(graded, "attack-tamper-cells")
    for label in _graded_labels(graded):
        assert rows[label][0] == rows[label][1], rows[label]  # the answers are right: full marks
    flags = _flags(graded, "attack-tamper-cells")
    assert "self-check cell" in flags and "setup cell 1 changed" in flags


@pytest.mark.parametrize("attack, flag", [
    ("attack-patch-checks", "imports the course package"), ("attack-allclose", "assigns to torch.allclose"),
    ("attack-spy", "reads /proc"), ("attack-detach", "os.fork"), ("attack-print-flood", "printed more than"),
    ("attack-other-chapter", "handed in 01_"), ("r2-iopub-flood", "printed more than"),
    ("r2-reply-shared", "refused"), ("r2-reply-expand", "refused"), ("r2-reply-deflate", "refused"),
    ("r2-cheat-softmax", "breaks the exercise's rule"), ("r2-cheat-finished", "write your own"),
])
def test_tampering_is_flagged(graded, attack, flag):
    assert flag in _flags(graded, attack)
    summary = (graded["out"] / "summary.md").read_text()
    assert "## Flagged submissions" in summary and attack in summary


# ------------------------------------------------------------------------------------------------ host files


def test_host_files_are_never_touched(graded):
    """Links and FIFOs planted where the grader of issue 13 wrote its requests; 3 GB written."""
    assert snapshot(graded["watched"]) == graded["before"]["watched"]
    assert not (graded["watched"] / "created-by-grader").exists()
    assert snapshot(ROOT / "instructor") == graded["before"]["instructor"]
    assert snapshot(graded["subs"]) == graded["before"]["subs"]
    for name in ("r2-plant-links.ipynb", "r2-plant-fifo.ipynb"):
        assert _printed(graded, name, "planted")  # the attack ran (and planted nothing the grader used)


def test_writes_stop_at_the_sandbox_disk_cap_and_nothing_is_left(graded):
    wrote = _printed(graded, "r2-fill-disk.ipynb", "DISK-WROTE-MB")
    assert wrote, "the disk attack did not report"
    assert int(wrote[0].split()[-1]) <= LIMITS["disk_mb"], wrote
    assert list(graded["temp"].iterdir()) == []  # nothing left in the grader's temporary folder


def test_sandbox_memory_is_capped_for_the_whole_sandbox(graded):
    record = graded["records"]["r2-memory-hog"]
    if os.geteuid() != 0:  # no cgroup without root: the limits are per process (instructor/README.md)
        assert record.get("sandbox_peak_mb") is None
        return
    assert record.get("sandbox_peak_mb") is not None, "as root every sandbox has a memory cgroup"
    held = _printed(graded, "r2-memory-hog.ipynb", "MEMORY-HELD-GIB")
    if held:  # the kernel may itself be the process the cgroup's OOM killer picked
        assert int(held[0].split()[-1]) * 1024 < LIMITS["total_memory_mb"], held
    else:
        assert "kernel died" in (record.get("stop") or "")


# ------------------------------------------------------------------------------------------------ replies, memory, time


def test_grader_memory_stays_under_1_gb(graded):
    assert graded["result"]["maxrss_mb"] < 1024, graded["result"]["maxrss_mb"]
    peaks = {name: r.get("worker_peak_mb") for name, r in graded["records"].items()}
    assert all(p is not None and p < 1024 for p in peaks.values()), peaks


def test_every_notebook_ends_within_its_budget(graded):
    options = RunOptions(timeout=OPTIONS["timeout"], tests_timeout=OPTIONS["tests_timeout"])
    limit = hard_deadline(options)
    slow = {name: r["wall_seconds"] for name, r in graded["records"].items() if r["wall_seconds"] > limit}
    assert not slow, (limit, slow)
    strangers = graded["records"]["r2-strangers"]
    assert "time limit" in json.dumps(strangers) or "stopped responding" in json.dumps(strangers)


def test_huge_notebook_is_planned_quickly(graded):
    record = graded["records"]["r2-huge-plan"]
    assert record["wall_seconds"] - record.get("seconds", 0) < 60, record["wall_seconds"]


# ------------------------------------------------------------------------------------------------ points


def test_cheating_answers_score_zero_and_are_flagged(graded):
    softmax = _points(graded, "r2-cheat-softmax")
    assert softmax["ex-03-stable-softmax"][0] == 0 and "torch.softmax" in softmax["ex-03-stable-softmax"][2]
    finished = _points(graded, "r2-cheat-finished")
    for label in ("ex-03-stable-softmax", "ex-03-scaled-weights", "ex-03-temperature"):
        assert finished[label][0] == 0 and "write your own" in finished[label][2], finished[label]
    zeroed = _points(graded, "r2-cheat-zero-inputs")
    assert all(points == 0 for points, _, _ in zeroed.values()), zeroed
    assert "changed the inputs of a hidden test in place" in _flags(graded, "r2-cheat-zero-inputs")


# ------------------------------------------------------------------------------------------------ leaks


def test_no_secret_or_grader_file_reaches_a_kernel(graded):
    executed = graded["out"] / "executed"
    assert len(list(executed.glob("*.ipynb"))) >= len(ATTACKS) + len(ROUND2)
    for path in executed.glob("*.ipynb"):
        for line in _outputs(path):
            assert "LEAK:" not in line and "SECRET-H2-" not in line, (path.name, line[:200])


def test_hidden_inputs_and_code_stay_with_the_grader(graded):
    numbers = re.compile(r"LEAK-(INPUT|CODE)[^\n]*\d\.\d")
    for path in (graded["out"] / "executed").glob("*.ipynb"):
        for text in _outputs(path):
            assert not numbers.search(text), (path.name, text[:300])
            assert "LEAK-CODE" not in text, (path.name, text[:300])
    raw = (graded["out"] / "grades.csv").read_text()
    assert "LEAK-CODE" not in raw and not numbers.search(raw)
    leaky = _points(graded, "r2-leak-inputs")  # a right answer that keeps its inputs still scores
    assert all(points == top for points, top, _ in leaky.values()), leaky


def test_no_grader_path_reaches_an_output_or_a_message(graded):
    paths = [str(graded["subs"]), str(graded["out"]), str(ROOT / "instructor"), str(graded["base"]),
             "ab-grade-", "/exchange"]
    lines = _printed(graded, "r2-leak-paths.ipynb", "PATHS")
    assert lines, "the paths attack did not report"
    for line in lines:
        for path in paths:
            assert path not in line, (path, line[:300])
    raw = (graded["out"] / "grades.csv").read_text()
    for path in paths[:4]:
        assert path not in raw


# ------------------------------------------------------------------------------------------------ processes, names


def test_no_process_outlives_grading_and_grades_stay(graded):
    assert _processes(b"HOSTILE-SLEEPER") == []
    assert _processes(b"sleep\x00600") == []
    if os.geteuid() == 0:
        # other graders may run beside this one (pytest-xdist): their sandboxes hold their user ids
        assert set(stray_processes()) <= graded["before"]["sandbox"]
    assert (graded["out"] / "grades.csv").read_bytes() == graded["csv_before"]
    assert "mallory," not in graded["csv_before"].decode()


def test_names_are_kept_apart_and_escaped(graded):
    students = {name for name, _ in graded["rows"]}
    assert {"a b", "a_b", "=HYPERLINK(1)", "x | 99 | 99 | 100 | forged |"} <= students
    raw = (graded["out"] / "grades.csv").read_text()
    assert "\n'=HYPERLINK(1)," in raw and "\n=HYPERLINK" not in raw
    for line in (graded["out"] / "summary.md").read_text().splitlines():
        if line.startswith("| ") and "forged" in line:
            unescaped = line.replace("\\|", "")
            assert unescaped.count("|") == 7, line
    assert _points(graded, "a_b") != _points(graded, "a b")


def test_odd_file_names_are_graded_escaped_and_read_back(graded):
    """A bare CR forged rows, a name that is not UTF-8 aborted the run, escapes reached the terminal."""
    expected = {display_name(os.fsdecode(raw)[:-6]) for raw in NAMES}
    students = {name for name, _ in graded["rows"]}
    assert expected <= students, expected - students
    with open(graded["out"] / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert all(len(row) == 7 for row in rows)  # no row was split or forged
    assert not [row for row in rows if row[0] in ("alice", '=HYPERLINK("x")')]
    for name in expected:  # each graded like any partly solved notebook
        assert _points(graded, name)["ex-03-stable-softmax"][0] == 2
    for text in ((graded["out"] / "grades.csv").read_text(), (graded["out"] / "summary.md").read_text(),
                 graded["result"]["stderr"]):
        assert "\x1b" not in text and "\r" not in text.replace("\r\n", "\n")


def test_skipped_files_are_listed(graded):
    skipped = {eval(name): why for name, why in graded["result"]["report"]["skipped_files"]}  # noqa: S307
    assert set(skipped) == {".hidden.ipynb", "notes.txt", "link.ipynb"}
    summary = (graded["out"] / "summary.md").read_text()
    assert "## Files not graded" in summary and "notes.txt" in summary and "link.ipynb" in summary


def test_rerun_reuses_records_of_the_same_files(graded):
    """Also: the manual-points template holds "'=carol" now, and the run does not refuse it."""
    options = GradeOptions(chapter="03", quiet=True, unsafe=False, timeout=OPTIONS["timeout"],
                           tests_timeout=OPTIONS["tests_timeout"], check_timeout=OPTIONS["check_timeout"])
    report = grade_folder(graded["course"], graded["subs"], graded["out"], options)
    assert report.graded == [] and len(report.skipped) == len(report.students)
    assert read_grades(report.csv_path) == graded["rows"]


def test_refuses_without_isolation_unless_unsafe(tmp_path, monkeypatch):
    monkeypatch.setattr(Sandbox, "bwrap_args", lambda self: (_ for _ in ()).throw(IsolationError("bwrap missing")))
    subs = tmp_path / "subs"
    subs.mkdir()
    with pytest.raises(IsolationError, match="--unsafe"):
        grade_folder(Course.load(ROOT), subs, tmp_path / "out", GradeOptions(chapter="03", quiet=True))
    from attention_book.cli import main

    assert main(["grade", str(subs), "--root", str(ROOT), "--chapter", "03", "--out", str(tmp_path / "o")]) == 3


def test_sandbox_view_hides_instructor_files(tmp_path):
    box = Sandbox(ROOT, hidden=[tmp_path / "secret"])
    args = box.bwrap_args()
    pairs = set(zip(args, args[1:]))
    bound = {value for flag, value in pairs if flag in ("--bind", "--ro-bind")}
    assert not {flag for flag, _ in pairs if flag == "--bind"}  # nothing of the host is writable
    for private in (ROOT / "instructor", ROOT / "notebooks", ROOT / "_build", tmp_path / "secret"):
        assert not any(private.resolve().is_relative_to(Path(path)) for path in bound) or (
            ("--tmpfs", str(private.resolve())) in pairs), private
    assert {"--unshare-net", "--unshare-pid", "--die-with-parent"} <= set(args)
    assert ("--remount-ro", "/") in pairs and ("--remount-ro", "/dev") in pairs


# ------------------------------------------------------------------------------------------------ issue 29: the sandbox


def test_keyrings_of_the_grader_are_out_of_reach(graded):
    """The grader ran in a session keyring holding a canary (and one was in the user keyring): the
    notebook could read neither, find neither, add nothing, and /proc/keys told it nothing."""
    lines = _printed(graded, "r3-keyring.ipynb", "KEYRING")
    assert lines, "the keyring attack did not report"
    text = "\n".join(lines)
    assert "KEYRING-LEAK" not in text and CANARY not in text, text
    for call in ("read session", "read user", "search session", "search user", "add_key session", "add_key user",
                 "request_key"):
        assert f"KEYRING {call} EPERM" in text, (call, text)
    assert "KEYRING /proc/keys readable" not in text, text
    keys = graded["result"]["keys"]
    # the grader's own session keyring is exactly as it was; the user keyring (shared with every
    # process of this user: other runs may add their canaries) holds no key the notebook planted
    assert keys["session"]["after"] == keys["session"]["before"], keys["session"]
    for ring in ("session", "user"):
        assert keys[ring]["canary"] in keys[ring]["after"] and keys[ring]["still_readable_here"], (ring, keys[ring])
        assert not [d for d in keys[ring]["described_after"] if "planted-by-student" in d], keys[ring]
    assert all(points == top for points, top, _ in _points(graded, "r3-keyring").values())


def test_refused_system_calls_fail_with_eperm_and_the_notebook_is_graded(graded):
    lines = _printed(graded, "r3-syscalls.ipynb", "SYSCALL")
    got = {line.split()[1]: line.split()[2] for line in lines}
    assert set(got) == {name for name, *_ in SYSCALLS}, lines
    assert {name: err for name, err in got.items() if err != "EPERM"} == {}, lines
    assert all(points == top for points, top, _ in _points(graded, "r3-syscalls").values())


# ------------------------------------------------------------------------------------------------ issue 29: names, odd notebooks


def test_any_file_name_is_graded_as_its_own_student(graded):
    """117 bytes of Cyrillic stopped the whole class (ENAMETOOLONG); 255 bytes is the most a file
    system holds; "carol " (trailing space) is not "carol"; "'=carol" is a student like any other."""
    for name in NAMES3:
        student = name[:-6]
        rows = _points(graded, student)  # grades.csv reads back every name exactly ('=carol too)
        full = name != "carol .ipynb"
        assert all((points == top) == full for points, top, _ in rows.values()), (student, rows)
        for folder, path in (("records", graded["out"] / "records" / file_name_part(name, ".json")),
                             ("executed", _executed(graded, name)),
                             ("feedback", graded["out"] / "feedback" / file_name_part(student, ".md"))):
            assert path.is_file(), (folder, name)
            assert len(path.name.encode()) <= NAME_BYTES
    record = json.loads((graded["out"] / "records" / file_name_part(LONG_NAME, ".json")).read_text())
    assert record["file"] == LONG_NAME and record["student"] == LONG_NAME[:-6]
    assert file_name_part(LONG_NAME, ".json") == LONG_NAME + ".json"  # readable as it is
    gradebook = (graded["out"] / "gradebook.csv").read_text(encoding="utf-8")
    assert "\ncarol ," in gradebook and "\ncarol," in gradebook and LONG_NAME[:-6] in gradebook


@pytest.mark.parametrize("name", ["r3-bom", "r3-magic-time", "r3-magic-capture"])
def test_honest_odd_notebooks_score_full_marks(graded, name):
    """A UTF-8 byte-order mark ("not a notebook") and %%time / %%capture on the first line of an
    answer cell ("does not define my_softmax") are honest work."""
    rows = _points(graded, name)
    assert all(points == top > 0 for points, top, _ in rows.values()), rows
    assert "does not define" not in _flags(graded, name)


# ------------------------------------------------------------------------------------------------ issue 29: regrading


SLEEPER = "import time\ntime.sleep(150)  # more than the first run's time limit, less than the second's\n"


@pytest.fixture(scope="module")
def regraded(tmp_path_factory):
    """A small class graded three times into one folder: under a short time limit without the
    self-checks' second run, after a change of points only, and under a longer time limit with
    that second run (the default)."""
    from hostile.round2 import _with_added_cell

    base = tmp_path_factory.mktemp("regrade")
    needs_isolation(base)
    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    coding = [ex.label for ex in chapter.exercises if ex.answer_cells and course.points_for(ex.label) > 0]
    subs = base / "submissions"
    subs.mkdir()
    _write(subs, "solution.ipynb", source)
    out = base / "out"
    grade_folder(course, subs, out, GradeOptions(chapter="03", quiet=True))  # the reference values, cached
    _write(subs, "partial.ipynb", solved_subset(source, chapter, coding[:1]))
    _write(subs, "sleeper.ipynb", _with_added_cell(source, SLEEPER))
    # time for an honest notebook on a busy machine, not for the sleeper
    short = GradeOptions(chapter="03", quiet=True, timeout=60, tests_timeout=60, check_timeout=20,
                         self_check_rerun=False)
    first = grade_folder(course, subs, out, short)
    rows_first = read_grades(out / "grades.csv")
    points = base / "points.toml"  # the instructor gives the first exercise 5 points instead of 2
    text = course.points_file.read_text(encoding="utf-8")
    points.write_text(text.replace(f"{coding[0]} = {course.points_for(coding[0]):g}", f"{coding[0]} = 5"))
    changed = Course.load(ROOT, points_file=points)
    assert changed.points_for(coding[0]) == 5
    started = time.monotonic()
    second = grade_folder(changed, subs, out, short)
    second_seconds = time.monotonic() - started
    rows_second = read_grades(out / "grades.csv")
    records_second = read_records(out)
    longer = dataclasses.replace(short, timeout=240, self_check_rerun=True)
    third = grade_folder(changed, subs, out, longer)
    return {"first": first, "second": second, "third": third, "rows": [rows_first, rows_second,
            read_grades(out / "grades.csv")], "second_seconds": second_seconds, "label": coding[0],
            "records": read_records(out), "records_second": records_second, "out": out}


def test_a_change_of_points_recomputes_totals_without_running_a_notebook(regraded):
    second = regraded["second"]
    assert second.graded == [] and second.reference_seconds == 0, second.graded  # nothing ran
    label = regraded["label"]
    before, after = regraded["rows"][0], regraded["rows"][1]
    assert before[("solution", label)][:2] == (2, 2) and after[("solution", label)][:2] == (5, 5)
    assert after[("partial", label)][:2] == (5, 5)
    for key, value in before.items():
        if key[1] != label:
            assert after[key] == value, key
    print(f"regrading after a change of points: {regraded['second_seconds']:.1f} s (no notebook ran)")


def test_a_timed_out_notebook_is_graded_again_when_the_limit_grows(regraded):
    first, _, third = regraded["rows"]
    assert all(p == 0 for (student, _label), (p, _top, _why) in first.items() if student == "sleeper")
    assert "time limit" in first[("sleeper", regraded["label"])][2]
    assert "sleeper.ipynb" not in regraded["second"].graded  # same limit: its record stands
    assert "sleeper.ipynb" in regraded["third"].graded  # the limit grew: graded again
    assert "solution.ipynb" not in regraded["third"].graded  # full marks in time: its record stands
    assert all(points == top > 0 for (student, _), (points, top, _) in third.items() if student == "sleeper")
    assert regraded["records"]["sleeper"]["limits"]["timeout"] == 240


def test_turning_the_self_checks_second_run_on_grades_again_only_who_needed_it(regraded):
    """The second run (feedback.complete_self_checks) shows the self-checks that ran after the
    hidden tests began; a record made while it was off says which exercises needed it, and a run
    with it on grades that notebook again (and only that one), its page then showing them."""
    before, after = regraded["records_second"], regraded["records"]
    assert before["partial"]["self_check_rerun_off"] and not before["solution"]["self_check_rerun_off"]
    assert regraded["third"].graded == ["partial.ipynb", "sleeper.ipynb"]  # not solution.ipynb
    shown = after["partial"]["self_check_rerun"]
    assert shown and set(shown) <= set(before["partial"]["self_check_rerun_off"]), shown
    assert not after["partial"]["self_check_rerun_off"] and not after["partial"]["self_check_rerun_timed_out"]
    page = (regraded["out"] / "feedback" / "partial.md").read_text(encoding="utf-8")
    assert page.count("as it ran in a second run of your notebook") == len(after["partial"]["self_check_rerun"])
    assert "turned that second run off" not in page


# ------------------------------------------------------------------------------------------------ issue 29: installs, failures


def test_libraries_as_large_as_torchs_cuda_build_grade_chapter_3_right(tmp_path):
    """PyTorch's default (CUDA) build maps about 3 GB on import, even without a GPU: the worker's
    fixed 3 GB address-space limit made every notebook score 0 ("hidden tests ... failed to load:
    MemoryError"). Here the grader and its workers map 4 GB more than the CPU build (a module
    imported at their start reserves it, as the CUDA libraries do) and chapter 3 grades right."""
    needs_isolation(tmp_path)
    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    subs = tmp_path / "submissions"
    subs.mkdir()
    _write(subs, "solution.ipynb", source)
    _write(subs, "release.ipynb", release)
    simulation = tmp_path / "simulation"
    simulation.mkdir()
    (simulation / "sitecustomize.py").write_text(CUDA_FOOTPRINT)
    env = dict(os.environ, AB_SIMULATE_MAPPED_MB="4096",
               PYTHONPATH=os.pathsep.join([str(simulation)] + [p for p in os.environ.get("PYTHONPATH", "").split(
                   os.pathsep) if p]))
    result = grade_in_process(ROOT, subs, tmp_path / "out", dict(OPTIONS, jobs=1), LIMITS, env=env)
    assert result["code"] == 0, result["stderr"][-3000:]
    rows = read_grades(tmp_path / "out" / "grades.csv")
    assert all(points == top > 0 for (student, _), (points, top, _) in rows.items() if student == "solution"), rows
    assert all(points == 0 for (student, _), (points, _, _) in rows.items() if student == "release"), rows
    records = read_records(tmp_path / "out")
    assert all(r["worker_mapped_mb"] > 4096 for r in records.values()), {n: r.get("worker_mapped_mb")
                                                                          for n, r in records.items()}


def test_a_grader_failure_is_never_a_grade(tmp_path, monkeypatch):
    """When the grader itself fails on a notebook (here: an exception in the grader while it grades
    bob, as the worker's MemoryError loading the hidden tests was) the run exits non-zero, and no 0
    reaches grades.csv or the gradebooks: the notebook is listed as not graded, and the next run
    grades it."""
    from attention_book.cli import main
    from attention_book.instructor import grade

    needs_isolation(tmp_path)
    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    subs = tmp_path / "submissions"
    subs.mkdir()
    _write(subs, "alice.ipynb", source)
    _write(subs, "bob.ipynb", source)
    out = tmp_path / "out"
    real_folder, real_submission = grade.grade_folder, grade.grade_submission

    def failing_for_bob(sub, *args, **kwargs):
        if sub.name == "bob.ipynb":
            raise RuntimeError("hidden tests failed to load: MemoryError")
        return real_submission(sub, *args, **kwargs)

    monkeypatch.setattr(grade, "grade_folder", lambda course, folder, out, options: real_folder(
        course, folder, out, dataclasses.replace(options, isolate_workers=False)))
    monkeypatch.setattr(grade, "grade_submission", failing_for_bob)
    common = ["grade", str(subs), "--root", str(ROOT), "--chapter", "03", "--out", str(out), "--timeout", "90"]
    assert main(common) == 4
    rows = read_grades(out / "grades.csv")
    assert {student for student, _ in rows} == {"alice"}, rows  # alice is graded, bob has no 0
    assert all(points == top > 0 for (_, _), (points, top, _) in rows.items())
    for name in ("gradebook.csv", "gradebook-canvas.csv"):
        assert "bob" not in (out / name).read_text(encoding="utf-8"), name
    assert not (out / "feedback" / "bob.md").exists()
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "bob.ipynb" in summary and "the autograder failed on this notebook" in summary
    monkeypatch.setattr(grade, "grade_submission", real_submission)
    assert main(common) == 0  # the next run grades bob (and only bob)
    rows = read_grades(out / "grades.csv")
    assert all(points == top > 0 for (student, _), (points, top, _) in rows.items()), rows
    assert {student for student, _ in rows} == {"alice", "bob"}


@pytest.mark.parametrize("problem, grader_error", [("crash", True), ("died", True), ("memory", False),
                                                   ("deadline", False)])
def test_only_failures_of_the_grader_itself_are_kept_out_of_the_grades(problem, grader_error, tmp_path):
    """A worker that crashed or died is the grader's failure (no points); one stopped at the hard
    time limit or by its replies' memory limit is the notebook's doing (0 points, flagged)."""
    from attention_book.instructor.grade import _worker_record
    from attention_book.instructor.submissions import Submission

    chapter = pick_chapter(Course.load(ROOT), "03")
    sub = Submission("alice.ipynb", tmp_path / "alice.ipynb", "0" * 64)
    record = _worker_record({"worker_error": problem, "detail": "x"}, sub, chapter, RunOptions())
    assert bool(record.get("grader_error")) is grader_error
    assert record["timed_out"] is (problem == "deadline")


def test_the_student_option_takes_any_file_name(tmp_path):
    from attention_book.instructor.grade import _pick_student
    from attention_book.instructor.submissions import list_submissions

    folder = tmp_path / "subs"
    folder.mkdir()
    for name in NAMES3 + [os.fsdecode(b"\xff\xfe-latin1.ipynb")]:
        with open(os.path.join(os.fsencode(folder), os.fsencode(name)), "wb") as handle:
            handle.write(b"{}")
    subs, skipped = list_submissions(folder)
    assert skipped == [] and len(subs) == len(NAMES3) + 1
    for sub in subs:
        stem = sub.name[:-6]
        for wanted in (sub.name, stem, sub.student):
            assert _pick_student(subs, wanted) is sub, (wanted, sub.name)
    assert _pick_student(subs, "carol").name == "carol.ipynb"
    assert _pick_student(subs, "carol ").name == "carol .ipynb"
    assert _pick_student(subs, "'=carol").name == "'=carol.ipynb"
    with pytest.raises(ValueError, match="no such submission"):
        _pick_student(subs, "alic")
