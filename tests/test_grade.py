"""The autograder (`attention-book grade`), the points file and the "For instructors" page.

The reliability tests grade small synthetic notebooks (the toy course of test_release.py, with
grader-side hidden tests written here as ``instructor/hidden_tests/ch99.py``) that raise, loop
forever, print megabytes, delete their files, crash the kernel or are no notebook at all; one test
grades the real chapter 1 (solutions -> full marks, release -> zero). The attacks of issue 13 are
in test_grader_hostile.py, the hidden tests of the chapters in test_grader_hidden.py.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from attention_book.cli import main, points_table, update_page
from attention_book.instructor.course import Course, collect_hidden_tests
from attention_book.instructor.grade import CSV_COLUMNS, GradeOptions, grade_folder, read_grades
from attention_book.instructor.hidden import HiddenTest, hidden_test, load_hidden_tests
from attention_book.instructor.markup import NOT_IMPLEMENTED
from attention_book.instructor.release import build_release
from attention_book.instructor.report import csv_cell, md_cell
from attention_book.instructor.scoring import score_exercise
from helpers import needs_isolation
from test_release import make_toy_course

ROOT = Path(__file__).resolve().parents[1]

TOY_GRADER_TESTS = '''\
from attention_book.instructor.hidden import Hint, hidden_test


@hidden_test("ex-99-double", "small numbers")
def double_small(student, reference):
    for x in (0, 3, 7):
        got, want = student.call("double", x), reference.call("double", x)
        if got != want:
            raise Hint(f"double({x}) should be {want}, got {got}")


@hidden_test("ex-99-double", "negative numbers")
def double_negative(student, reference):
    if student.call("double", -3) != reference.call("double", -3):
        raise Hint("double(-3) should be -6: do not take the absolute value")


@hidden_test("ex-99-square", "small numbers")
def square_small(student, reference):
    if student.call("square", 5) != reference.call("square", 5):
        raise Hint("square(5) should be 25")


@hidden_test("ex-99-square", "large numbers")
def square_large(student, reference):
    if student.call("square", 10**6) != reference.call("square", 10**6):
        raise Hint("square(10**6) should be 10**12")
'''


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_rows(csv_path: Path):
    assert csv_path.read_text().splitlines()[0] == ",".join(CSV_COLUMNS)
    return read_grades(csv_path)


def answer(nb, label: str, body: str):
    """A student's answer: the release's `raise NotImplementedError` line replaced by ``body``."""
    line = NOT_IMPLEMENTED.format(label=label)
    for cell in nb.cells:
        if line in cell.source:
            indent = cell.source.split(line)[0].split("\n")[-1]
            cell.source = cell.source.replace(indent + line, "\n".join(indent + b for b in body.split("\n")))
            return nb
    raise AssertionError(f"no answer cell for {label}")


def insert_after(nb, needle: str, source: str):
    """Insert a code cell after the first cell that starts with ``needle``."""
    index = next(i for i, c in enumerate(nb.cells) if c.source.startswith(needle))
    nb.cells.insert(index + 1, new_code_cell(source))
    return nb


# ------------------------------------------------------------------------------------------------ scoring


def _tests(*specs):
    return [HiddenTest("ex-99-x", name, weight, lambda s, r: None, guard) for name, weight, guard in specs]


def test_score_counts_only_the_graders_tests_and_weights():
    tests = _tests(("a", 1.0, False), ("b", 3.0, False))
    results = [{"name": "a", "passed": True}, {"name": "b", "passed": False, "hint": "use dim=-1"},
               {"name": "forged", "passed": True}, {"name": "a", "passed": False}]
    assert score_exercise(results, tests, 2) == (0.5, "1/4 test weight passed; b: use dim=-1")
    assert score_exercise([{"name": "a", "passed": True}, {"name": "b", "passed": True}], tests, 3) == (
        3, "all 2 tests passed")
    todo = [{"name": "a", "not_implemented": True}, {"name": "b", "not_implemented": True}]
    points, message = score_exercise(todo, tests, 2)
    assert points == 0 and message.startswith("not implemented")
    assert score_exercise(None, tests, 2, reason="not evaluated: the kernel died") == (
        0, "not evaluated: the kernel died")
    assert score_exercise([{"name": "a", "passed": True}], tests, 2, zero_reason="imports the course package")[0] == 0


def test_guards_count_only_with_right_values():
    tests = _tests(("values", 1.0, False), ("input unchanged", 1.0, True))
    points, message = score_exercise([{"name": "values", "passed": False, "hint": "wrong"},
                                      {"name": "input unchanged", "passed": True}], tests, 2)
    assert points == 0 and "counts once the values are right" in message
    assert score_exercise([{"name": "values", "passed": True}, {"name": "input unchanged", "passed": True}],
                          tests, 2)[0] == 2


@pytest.mark.parametrize("weight", [float("nan"), -1.0, 0.0, float("inf")])
def test_bad_weights_are_refused_when_the_file_loads(tmp_path, weight):
    path = tmp_path / "ch42.py"
    path.write_text("from attention_book.instructor.hidden import hidden_test\n"
                    f"@hidden_test('ex-42-x', 't', weight=float({str(weight)!r}))\n"
                    "def t(student, reference):\n    pass\n")
    with pytest.raises(RuntimeError, match="weight must be a finite number > 0"):
        load_hidden_tests(path)
    with pytest.raises(ValueError):
        hidden_test("ex-42-x", "t", weight=weight)


def test_csv_and_markdown_cells_are_escaped():
    assert csv_cell("=HYPERLINK(1)") == "'=HYPERLINK(1)" and csv_cell("@x") == "'@x" and csv_cell("-2") == "-2"
    assert csv_cell("alice") == "alice"
    assert md_cell("a | b\n| c") == "a \\| b \\| c" and "\\[" in md_cell("[x](y)")


# ------------------------------------------------------------------------------------------------ toy course


@pytest.fixture(scope="module")
def toy_graded(tmp_path_factory):
    """Grade a folder of tricky submissions to the toy chapter once; the tests read the results."""
    base = tmp_path_factory.mktemp("toy")
    needs_isolation(base)
    root = make_toy_course(base / "book")
    (root / "instructor" / "hidden_tests" / "ch99.py").write_text(TOY_GRADER_TESTS)
    course = Course.load(root)
    release = build_release(course, base / "release")
    student_nb = lambda: nbformat.read(str(release.out / "notebooks/99_toy.ipynb"), as_version=4)  # noqa: E731
    good = lambda: answer(answer(student_nb(), "ex-99-double", "return 2 * x"),  # noqa: E731
                          "ex-99-square", "return x * x")
    subs = base / "submissions"
    subs.mkdir()
    shutil.copy(root / "notebooks/99_toy.ipynb", subs / "solution.ipynb")
    shutil.copy(release.out / "notebooks/99_toy.ipynb", subs / "untouched.ipynb")
    notebooks = {
        "partial": answer(answer(student_nb(), "ex-99-double", "return 2 * abs(x)"),
                          "ex-99-square", "return x * x if x < 1000 else 0"),
        "raises": insert_after(good(), "# Setup", 'raise RuntimeError("boom")'),
        "loops": insert_after(good(), "check_double(double)", "while True:\n    pass"),
        "stubborn": insert_after(good(), "# Setup", "import time\nwhile True:\n    try:\n        time.sleep(0.1)\n"
                                 "    except KeyboardInterrupt:\n        pass"),
        "chatty": insert_after(good(), "# Setup", "print('x' * 5_000_000)\nfor i in range(100_000):\n    print(i)"),
        "vandal": insert_after(good(), "# Setup", "import glob, os\nfor p in glob.glob('*'):\n    os.remove(p)\n"
                               "os.chdir('/')"),
        "crash": insert_after(good(), "check_double(double)", "import os\nos._exit(1)"),
    }
    stripped = good()  # Colab-like: cell metadata lost, the check cell of square deleted
    for cell in stripped.cells:
        cell.metadata = {}
    stripped.metadata = {}
    stripped.cells = [c for c in stripped.cells if c.source != "check_square(square)"]
    notebooks["no-metadata"] = stripped
    slow = answer(answer(student_nb(), "ex-99-double", "return 2 * x"), "ex-99-square", "while True:\n    pass")  # only the grader's check calls it
    slow.cells = [c for c in slow.cells if c.source != "check_square(square)"]
    notebooks["slow-check"] = slow
    for name, nb in notebooks.items():
        nbformat.write(nb, str(subs / f"{name}.ipynb"))
    (subs / "garbage.ipynb").write_text("this is not json")
    (subs / "photo.png").write_bytes(bytes(range(256)) * 4)
    before = {p.name: digest(p) for p in subs.iterdir()}
    options = GradeOptions(chapter="99", timeout=25, check_timeout=10, jobs=2, quiet=True)
    report = grade_folder(course, subs, base / "grades", options)
    return {"course": course, "subs": subs, "out": base / "grades", "report": report, "before": before,
            "rows": read_rows(base / "grades" / "grades.csv"), "options": options}


@pytest.mark.slow
def test_every_student_is_scored_and_files_are_untouched(toy_graded):
    rows, report = toy_graded["rows"], toy_graded["report"]
    students = sorted({s for s, _ in rows})
    assert students == sorted(["solution", "untouched", "partial", "raises", "loops", "stubborn", "chatty",
                               "vandal", "crash", "no-metadata", "slow-check", "garbage"])
    assert report.skipped_files == [("photo.png", "not a notebook (.ipynb)")]
    for student in students:  # the written exercise (0 points) is left out
        assert {e for s, e in rows if s == student} == {"ex-99-double", "ex-99-square"}
        assert rows[(student, "ex-99-double")][1] == 2 and rows[(student, "ex-99-square")][1] == 1
    after = {p.name: digest(p) for p in toy_graded["subs"].iterdir()}
    assert after == toy_graded["before"] and report.modified == []
    summary = (toy_graded["out"] / "summary.md").read_text()
    assert "| solution | 3 | 3 | 100 |" in summary and "| Exercise 99.1 (ex-99-double) |" in summary
    assert "photo.png" in summary


@pytest.mark.slow
@pytest.mark.parametrize("student", ["solution", "raises", "chatty", "vandal", "no-metadata"])
def test_full_marks(toy_graded, student):
    rows = toy_graded["rows"]
    assert rows[(student, "ex-99-double")][:2] == (2, 2), rows[(student, "ex-99-double")]
    assert rows[(student, "ex-99-square")] == (1, 1, "all 2 tests passed")


@pytest.mark.slow
def test_untouched_release_scores_zero(toy_graded):
    for label in ("ex-99-double", "ex-99-square"):
        points, _, message = toy_graded["rows"][("untouched", label)]
        assert points == 0 and message.startswith("not implemented")


@pytest.mark.slow
def test_wrong_answers_get_partial_credit_with_hints(toy_graded):
    rows = toy_graded["rows"]
    assert rows[("partial", "ex-99-double")] == (1, 2, "1/2 test weight passed; negative numbers: double(-3) "
                                                 "should be -6: do not take the absolute value")
    points, _, message = rows[("partial", "ex-99-square")]
    assert points == 0.5 and "large numbers: square(10**6) should be 10**12" in message


@pytest.mark.slow
def test_broken_submissions_score_zero_with_the_reason(toy_graded):
    rows = toy_graded["rows"]
    # an endless loop after the first exercise: the first still counts
    assert rows[("loops", "ex-99-double")][0] == 2
    assert rows[("loops", "ex-99-square")][0] == 0 and "time limit" in rows[("loops", "ex-99-square")][2]
    # a loop that swallows the interrupt: nothing runs after it, grading goes on
    for label in ("ex-99-double", "ex-99-square"):
        assert rows[("stubborn", label)][0] == 0 and "time limit" in rows[("stubborn", label)][2]
    # the grader's own check of an answer that never returns is interrupted; the rest counts
    assert rows[("slow-check", "ex-99-double")][0] == 2
    points, _, message = rows[("slow-check", "ex-99-square")]
    assert points == 0 and "time limit" in message, message
    # the kernel dies after the first exercise
    assert rows[("crash", "ex-99-double")][0] == 2
    assert rows[("crash", "ex-99-square")][0] == 0 and "kernel died" in rows[("crash", "ex-99-square")][2]
    assert rows[("garbage", "ex-99-double")][0] == 0
    assert rows[("garbage", "ex-99-double")][2].startswith("not a notebook")


@pytest.mark.slow
def test_output_is_capped_in_the_executed_copy(toy_graded):
    executed = toy_graded["out"] / "executed" / "chatty.ipynb"
    assert executed.stat().st_size < 200_000
    text = executed.read_text()
    assert "[autograder: output truncated]" in text or "[autograder: more than" in text


@pytest.mark.slow
def test_rerun_resumes_without_losing_scores(toy_graded, tmp_path):
    out, subs, course = toy_graded["out"], toy_graded["subs"], toy_graded["course"]
    csv_before = (out / "grades.csv").read_bytes()
    # a run interrupted after some students: their records survive, grades.csv may be stale
    (out / "records" / "garbage.ipynb.json").unlink()
    (out / "grades.csv").write_text("student,exercise\n")
    report = grade_folder(course, subs, out, toy_graded["options"])
    assert report.graded == ["garbage.ipynb"] and len(report.skipped) == 11
    assert (out / "grades.csv").read_bytes() == csv_before
    # --force regrades (on a folder without kernels to start, to stay fast)
    only = tmp_path / "only"
    only.mkdir()
    shutil.copy(subs / "garbage.ipynb", only / "garbage.ipynb")
    first = grade_folder(course, only, tmp_path / "g", toy_graded["options"])
    again = grade_folder(course, only, tmp_path / "g", toy_graded["options"])
    forced = grade_folder(course, only, tmp_path / "g", GradeOptions(chapter="99", force=True, quiet=True))
    name = ["garbage.ipynb"]
    assert (first.graded, again.graded, again.skipped, forced.graded) == (name, [], name, name)
    # a changed submission (same name) is graded again
    (only / "garbage.ipynb").write_text("still not json")
    assert grade_folder(course, only, tmp_path / "g", toy_graded["options"]).graded == name


def test_grade_refuses_to_write_into_the_submissions(tmp_path):
    root = make_toy_course(tmp_path / "book")
    (tmp_path / "subs").mkdir()
    with pytest.raises(ValueError, match="must not contain each other"):
        grade_folder(Course.load(root), tmp_path / "subs", tmp_path / "subs" / "grades")
    with pytest.raises(ValueError, match="--chapter is required"):
        grade_folder(Course.load(root), tmp_path / "subs", tmp_path / "grades")


# ------------------------------------------------------------------------------------------------ chapter 1


@pytest.mark.slow
def test_chapter_1_solutions_full_marks_release_zero(tmp_path):
    needs_isolation(tmp_path)
    course = Course.load(ROOT)
    chapter = next(c for c in course.chapters if c.number == 1)
    release = build_release(course, tmp_path / "release")
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(ROOT / chapter.path, subs / "solutions.ipynb")
    shutil.copy(release.out / chapter.path, subs / "release.ipynb")
    wrong = nbformat.read(str(release.out / chapter.path), as_version=4)
    answer(wrong, "ex-01-positions",
           "return token_embeddings + position_embedding(torch.arange(1, token_embeddings.shape[1] + 1))")
    # and the cell importing the checks module is gone: the grader's own check still runs
    wrong.cells = [c for c in wrong.cells if "from attention_book.checks import" not in c.source]
    nbformat.write(wrong, str(subs / "off-by-one.ipynb"))
    grade_folder(course, subs, tmp_path / "grades", GradeOptions(chapter="01", timeout=120, jobs=2, quiet=True))
    rows = read_rows(tmp_path / "grades" / "grades.csv")
    hidden = load_hidden_tests(ROOT / "instructor" / "hidden_tests" / "ch01.py")
    coded = [ex.label for ex in chapter.exercises if course.points_for(ex.label) > 0 and ex.label in hidden]
    assert coded and {e for s, e in rows if s == "solutions"} >= set(coded)
    for label in coded:
        points, top, message = rows[("solutions", label)]
        assert points == top > 0, (label, message)
        points, top, message = rows[("release", label)]
        assert points == 0 and message.startswith("not implemented"), (label, message)
    points, top, message = rows[("off-by-one", "ex-01-positions")]
    assert 0 <= points < top and "position" in message, message
    # the release runs top to bottom in a fresh kernel: the only errors are the exercises' stubs
    executed = nbformat.read(str(tmp_path / "grades" / "executed" / "release.ipynb"), as_version=4)
    errors = [o.ename for c in executed.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert set(errors) <= {"NotImplementedError"}, errors


# ------------------------------------------------------------------------------------------------ points, docs


def test_every_exercise_has_points_and_a_way_to_be_graded():
    course = Course.load(ROOT)
    assert list(course.exercises()), "no exercises found in the chapters of _toc.yml"
    assert course.problems() == []


def test_hidden_tests_load_and_name_real_exercises():
    course = Course.load(ROOT)
    hidden = collect_hidden_tests(course.hidden_dir)
    labels = {ex.label for ex in course.exercises()}
    assert hidden and set(hidden) <= labels
    assert not (ROOT / "src" / "attention_book" / "hidden_tests").exists()


def test_instructor_page_points_table_is_in_sync():
    course = Course.load(ROOT)
    page = ROOT / "book" / "for_instructors.md"
    assert update_page(page, points_table(course), write=False), (
        "the points table on book/for_instructors.md is out of date: run "
        "`.venv/bin/attention-book exercises --write-table`")


TOY_INFO = {"ex-99-double": "Difficulty ★☆☆ · 5 min · practises: returning a value",
            "ex-99-square": "Difficulty ★★☆ · 10 min · practises: multiplying | squaring",
            "ex-99-why": "Difficulty ★☆☆ · 5 min · practises: explaining a choice"}


def add_info_lines(notebook: Path) -> None:
    """Give each exercise of the toy chapter its first body line (difficulty, minutes, practises)."""
    nb = nbformat.read(str(notebook), as_version=4)
    for cell in nb.cells:
        for label, info in TOY_INFO.items():
            if cell.source.startswith("```{exercise}") and f":label: {label}\n" in cell.source:
                cell.source = cell.source.replace(f":label: {label}\n\n", f":label: {label}\n\n{info}\n\n", 1)
    nbformat.write(nb, str(notebook))


def test_exercises_command_reports_problems(tmp_path, capsys):
    root = make_toy_course(tmp_path / "book", points="ex-99-double = 2\nex-99-square = 1\n")
    (root / "instructor" / "hidden_tests" / "toy.py").unlink()
    (root / "instructor" / "hidden_tests" / "ch99.py").write_text(TOY_GRADER_TESTS)
    (root / "book" / "for_instructors.md").write_text(
        "# For instructors\n\n% points-table:start (generated by `attention-book exercises --write-table`)\n"
        "% points-table:end\n")
    assert main(["exercises", "--root", str(root)]) == 1
    err = capsys.readouterr().err
    assert "ex-99-why" in err and "out of date" in err
    assert "ex-99-double: the exercise's body must start with a line like `Difficulty" in err  # no info line
    (root / "instructor" / "points.toml").write_text("[points]\nex-99-double = 2\nex-99-square = 1\nex-99-why = 0\n")
    assert main(["exercises", "--root", str(root), "--write-table"]) == 1  # the info lines still lack
    add_info_lines(root / "notebooks" / "99_toy.ipynb")
    capsys.readouterr()
    assert main(["exercises", "--root", str(root)]) == 1  # the table on the page is the one without them
    assert "out of date" in capsys.readouterr().err
    assert main(["exercises", "--root", str(root), "--write-table"]) == 0
    assert main(["exercises", "--root", str(root)]) == 0
    page = (root / "book" / "for_instructors.md").read_text(encoding="utf-8")
    assert ("| Exercise 99.2 (`ex-99-square`) | Square a number | code | ★★☆ core | 10 | "
            "multiplying \\| squaring | 1 | 2 hidden tests (+ a self-check for students) |") in page
    assert "About 0 hours 20 minutes for every exercise of the course" in page
