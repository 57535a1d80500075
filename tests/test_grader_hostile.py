"""Hostile submissions (issue 13): every attack as a notebook, graded once in a real sandbox.

The class: chapter 3's solution (full marks), its untouched release (0), a partly solved notebook
(exact partial points) and every attack of tests/hostile/attacks.py, plus file names that try
to collide, inject a CSV formula or forge summary rows, and files that must be skipped. The grader
runs with a secret planted in its environment and in its home folder and one in another
student's file; after grading no secret may appear in anything the kernels produced, no process
may outlive grading, and grades.csv must not change afterwards.
"""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path

import nbformat
import pytest

from attention_book.instructor.course import Course
from attention_book.instructor.grade import GradeOptions, grade_folder, hidden_tests_of
from attention_book.instructor.release import release_notebook
from attention_book.instructor.report import read_grades
from attention_book.instructor.sandbox import IsolationError, Limits, Sandbox, check_isolation
from attention_book.instructor.submissions import pick_chapter
from hostile.attacks import ATTACKS, solved_subset

ROOT = Path(__file__).resolve().parents[1]
SECRET_ENV = "SECRET-H2-env-3f9a"
SECRET_HOME = "SECRET-H2-home-77c1"
SECRET_OTHER = "SECRET-H2-other-student-1b2e"

pytestmark = pytest.mark.slow


def _isolation_works(tmp_path) -> bool:
    try:
        check_isolation(ROOT, tmp_path)
    except IsolationError as err:
        if os.environ.get("CI"):
            pytest.fail(f"the sandbox must work in CI: {err}")
        pytest.skip(f"no isolation on this machine: {err}")
    return True


def _write(folder: Path, name: str, nb) -> None:
    (folder / name).write_text(json.dumps(nb), encoding="utf-8")


def _processes(marker: str):
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def _nobody_processes():
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == 65534:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    _isolation_works(base)
    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    other = nbformat.read(str(ROOT / next(c.path for c in course.chapters if c.number == 1)), as_version=4)
    subs = base / "submissions"
    subs.mkdir()
    coding = [ex.label for ex in chapter.exercises if ex.answer_cells and course.points_for(ex.label) > 0]
    _write(subs, "solution.ipynb", source)
    _write(subs, "release.ipynb", release)
    _write(subs, "partial.ipynb", solved_subset(source, chapter, coding[:1]))
    for name, attack in ATTACKS.items():
        _write(subs, f"attack-{name}.ipynb", attack.build(source=source, release=release, chapter=chapter,
                                                          other=other))
    # names: two that an underscore-for-space scheme merges, a formula, a Markdown row forger
    _write(subs, "a b.ipynb", release)
    _write(subs, "a_b.ipynb", source)
    _write(subs, "=HYPERLINK(1).ipynb", release)
    _write(subs, "x | 99 | 99 | 100 | forged |.ipynb", release)
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
    before_nobody = set(_nobody_processes())
    old_env = {k: os.environ.get(k) for k in ("H2_GRADER_SECRET", "HOME")}
    os.environ["H2_GRADER_SECRET"], os.environ["HOME"] = SECRET_ENV, str(home)
    try:
        options = GradeOptions(chapter="03", jobs=2, quiet=True, timeout=240, check_timeout=60,
                               limits=Limits(processes=64, memory_mb=6144))
        report = grade_folder(course, subs, out, options)
    finally:
        for key, value in old_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    csv_before = report.csv_path.read_bytes()
    time.sleep(5)  # the detached forger of the "detach" attack would strike after 3 s
    return {"report": report, "out": out, "subs": subs, "course": course, "chapter": chapter,
            "rows": read_grades(report.csv_path), "csv_before": csv_before, "before_nobody": before_nobody,
            "tests": hidden_tests_of(course, chapter)}


def _points(graded, student):
    rows = {label: value for (name, label), value in graded["rows"].items() if name == student}
    assert rows, f"{student} missing from grades.csv"
    return rows


def _graded_labels(graded):
    return [label for label in graded["tests"] if graded["course"].points_for(label) > 0]


def _flags(graded, student):
    with open(graded["report"].csv_path, newline="", encoding="utf-8") as handle:
        return " ".join(row[6] for row in csv.reader(handle) if row[0] == student)


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


@pytest.mark.parametrize("attack", sorted(n for n in ATTACKS if n not in ("tamper-cells", "other-chapter")))
def test_attacks_score_zero(graded, attack):
    rows = _points(graded, f"attack-{attack}")
    assert all(points == 0 for points, _, _ in rows.values()), rows


def test_tampered_cells_are_restored_and_flagged(graded):
    rows = _points(graded, "attack-tamper-cells")
    for label in _graded_labels(graded):
        assert rows[label][0] == rows[label][1], rows[label]  # the answers are right: full marks
    flags = _flags(graded, "attack-tamper-cells")
    assert "self-check cell" in flags and "setup cell 1 changed" in flags


@pytest.mark.parametrize("attack, flag", [
    ("patch-checks", "imports the course package"), ("allclose", "assigns to torch.allclose"),
    ("spy", "reads /proc"), ("detach", "os.fork"), ("print-flood", "printed more than"),
    ("other-chapter", "handed in 01_"),
])
def test_tampering_is_flagged(graded, attack, flag):
    assert flag in _flags(graded, f"attack-{attack}")
    summary = graded["report"].summary_path.read_text()
    assert "## Flagged submissions" in summary and f"attack-{attack}" in summary


def test_no_secret_or_grader_file_reaches_a_kernel(graded):
    executed = graded["out"] / "executed"
    texts = [p.read_text() for p in executed.glob("*.ipynb")]
    assert len(texts) >= len(ATTACKS)
    for path in executed.glob("*.ipynb"):
        for line in _outputs(path):
            assert "LEAK:" not in line and "SECRET-H2-" not in line, (path.name, line[:200])


def _outputs(path: Path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            yield str(output.get("text", "")) + str(output.get("evalue", "")) + str(output.get("data", ""))


def test_no_process_outlives_grading_and_grades_stay(graded):
    assert _processes("HOSTILE-SLEEPER") == []
    if os.geteuid() == 0:
        assert set(_nobody_processes()) <= graded["before_nobody"]
    assert graded["report"].csv_path.read_bytes() == graded["csv_before"]
    assert "mallory" not in graded["csv_before"].decode()


def test_names_are_kept_apart_and_escaped(graded):
    students = {name for name, _ in graded["rows"]}
    assert {"a b", "a_b", "=HYPERLINK(1)", "x | 99 | 99 | 100 | forged |"} <= students
    raw = graded["report"].csv_path.read_text()
    assert "\n'=HYPERLINK(1)," in raw and "\n=HYPERLINK" not in raw
    for line in graded["report"].summary_path.read_text().splitlines():
        if line.startswith("| ") and "forged" in line:
            unescaped = line.replace("\\|", "")
            assert unescaped.count("|") == 7, line
    assert _points(graded, "a_b") != _points(graded, "a b")


def test_skipped_files_are_listed(graded):
    skipped = dict(graded["report"].skipped_files)
    assert set(skipped) == {".hidden.ipynb", "notes.txt", "link.ipynb"}
    summary = graded["report"].summary_path.read_text()
    assert "## Files not graded" in summary and "notes.txt" in summary and "link.ipynb" in summary


def test_rerun_reuses_records_of_the_same_files(graded):
    options = GradeOptions(chapter="03", quiet=True, unsafe=False)
    report = grade_folder(graded["course"], graded["subs"], graded["out"], options)
    assert report.graded == [] and len(report.skipped) == len(report.students)
    assert read_grades(report.csv_path) == graded["rows"]


def test_refuses_without_isolation_unless_unsafe(tmp_path, monkeypatch):
    monkeypatch.setattr(Sandbox, "prefix", lambda self: (_ for _ in ()).throw(IsolationError("bwrap missing")))
    subs = tmp_path / "subs"
    subs.mkdir()
    with pytest.raises(IsolationError, match="--unsafe"):
        grade_folder(Course.load(ROOT), subs, tmp_path / "out", GradeOptions(chapter="03", quiet=True))
    from attention_book.cli import main

    assert main(["grade", str(subs), "--root", str(ROOT), "--chapter", "03", "--out", str(tmp_path / "o")]) == 3


def test_sandbox_view_hides_instructor_files(tmp_path):
    box = Sandbox(ROOT, tmp_path / "w", tmp_path / "x", hidden=[tmp_path / "secret"])
    prefix = box.prefix()
    pairs = set(zip(prefix, prefix[1:]))
    bound = {value for flag, value in pairs if flag in ("--bind", "--ro-bind")}
    assert str((tmp_path / "w").resolve()) in bound
    for private in (ROOT / "instructor", ROOT / "notebooks", ROOT / "_build", tmp_path / "secret"):
        assert not any(private.resolve().is_relative_to(Path(path)) for path in bound) or (
            ("--tmpfs", str(private.resolve())) in pairs), private
    assert {"--unshare-net", "--unshare-pid", "--die-with-parent"} <= set(prefix)
