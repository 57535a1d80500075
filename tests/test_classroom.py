"""The classroom (issue 21): nothing lost between assignments, the gradebook, feedback, written
answers and self-checks whose words a student can act on (the students' JupyterLab, `make lab`,
is tested in tests/test_lab.py).

The grading tests use the toy course of test_release.py (one chapter, ``99``, two coding exercises
and a written one) plus a copy of it as chapter ``98``, graded into per-chapter folders under a tmp
root; the real chapters are used where the question is about them (titles, hints).
"""

from __future__ import annotations

import ast
import csv
import importlib
import json
import re
import shutil
import stat
import time
from pathlib import Path

import nbformat
import pytest

from attention_book.cli import main
from attention_book.instructor.course import Course
from attention_book.instructor.grade import MARKER, GradeOptions, default_out, grade_folder
from attention_book.instructor.gradebook import ManualPointsError, read_manual_points
from attention_book.instructor.markup import NOT_IMPLEMENTED, cell_text
from attention_book.instructor.release import build_release
from attention_book.instructor.report import plain_title
from helpers import needs_isolation
from hostile.output import written_sections
from test_release import make_toy_course

ROOT = Path(__file__).resolve().parents[1]

TOY_HIDDEN = '''\
from attention_book.instructor.hidden import Hint, hidden_test


@hidden_test("ex-99-double", "small numbers")
def double_small(student, reference):
    for x in (0, 3, 7):
        if student.call("double", x) != reference.call("double", x):
            raise Hint(f"double({x}) is wrong")


@hidden_test("ex-99-double", "negative numbers")
def double_negative(student, reference):
    if student.call("double", -3) != reference.call("double", -3):
        raise Hint("double(-3) should be -6: do not take the absolute value")


@hidden_test("ex-99-square", "small numbers")
def square_small(student, reference):
    if student.call("square", 5) != reference.call("square", 5):
        raise Hint("square(5) should be 25")
'''
POINTS = "ex-99-double = 2\nex-99-square = 1\nex-99-why = 2\n"
WRITTEN_ANSWER = "Squares never go negative.\n## mallory: 2 of 2 points\n<script>alert(1)</script>"


def answer(nb, label: str, body: str):
    line = NOT_IMPLEMENTED.format(label=label)
    for cell in nb.cells:
        if line in cell.source:
            indent = cell.source.split(line)[0].split("\n")[-1]
            cell.source = cell.source.replace(indent + line, indent + body)
            return nb
    raise AssertionError(f"no answer cell for {label}")


def write_answer(nb, label: str, text: str):
    for cell in nb.cells:
        meta = cell.metadata.get("attention_book") or {}
        if cell.cell_type == "markdown" and meta == {"exercise": label, "role": "answer"}:
            cell.source = cell.source + "\n\n" + text
            return nb
    raise AssertionError(f"no written answer cell for {label}")


def add_chapter_98(root: Path) -> None:
    """A second toy chapter: chapter 99 with every ``99`` label renamed to ``98``."""
    text = (root / "notebooks" / "99_toy.ipynb").read_text().replace("ex-99-", "ex-98-").replace(
        "Chapter 99", "Chapter 98")
    (root / "notebooks" / "98_twin.ipynb").write_text(text)
    toc = (root / "_toc.yml").read_text().replace("  - file: notebooks/99_toy\n",
                                                  "  - file: notebooks/98_twin\n  - file: notebooks/99_toy\n")
    (root / "_toc.yml").write_text(toc)
    points = root / "instructor" / "points.toml"
    points.write_text(points.read_text() + POINTS.replace("99", "98"))
    (root / "instructor" / "hidden_tests" / "ch98.py").write_text(TOY_HIDDEN.replace("ex-99-", "ex-98-"))


@pytest.fixture(scope="module")
def classroom(tmp_path_factory):
    """A toy course with chapters 98 and 99; a folder of 99 submissions and one of 98, graded with
    the command line into the default per-chapter folders (99 first, then 98)."""
    base = tmp_path_factory.mktemp("classroom")
    needs_isolation(base)
    root = make_toy_course(base / "book", points=POINTS)
    (root / "instructor" / "hidden_tests" / "toy.py").unlink()
    (root / "instructor" / "hidden_tests" / "ch99.py").write_text(TOY_HIDDEN)
    add_chapter_98(root)
    course = Course.load(root)
    release = build_release(course, base / "release")
    student = lambda n: nbformat.read(str(release.out / f"notebooks/{n}"), as_version=4)  # noqa: E731
    subs = base / "ch99"
    subs.mkdir()
    shutil.copy(root / "notebooks/99_toy.ipynb", subs / "solved.ipynb")
    shutil.copy(release.out / "notebooks/99_toy.ipynb", subs / "untouched.ipynb")
    partly = answer(answer(student("99_toy.ipynb"), "ex-99-double", "return 2 * abs(x)"),
                    "ex-99-square", "return x * x")
    nbformat.write(write_answer(partly, "ex-99-why", WRITTEN_ANSWER), str(subs / "partly.ipynb"))
    subs98 = base / "ch98"
    subs98.mkdir()
    shutil.copy(root / "notebooks/98_twin.ipynb", subs98 / "solved.ipynb")
    started = time.monotonic()
    assert main(["grade", str(subs), "--root", str(root), "--chapter", "99"]) == 0
    first_run = time.monotonic() - started
    out99 = root / "_build" / "grades" / "ch99"
    snapshot = {p.relative_to(out99).as_posix(): p.read_bytes() for p in out99.rglob("*") if p.is_file()}
    assert main(["grade", str(subs98), "--root", str(root), "--chapter", "98"]) == 0
    after = {p.relative_to(out99).as_posix(): p.read_bytes() for p in out99.rglob("*") if p.is_file()}
    return {"after98": after, "root": root, "course": course, "subs": subs, "subs98": subs98, "out": out99,
            "out98": root / "_build" / "grades" / "ch98", "snapshot": snapshot, "first_run": first_run,
            "student": student}


def read_csv(path: Path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


# ------------------------------------------------------------------------------------------------ folders


@pytest.mark.slow
def test_each_chapter_grades_into_its_own_folder_and_leaves_the_other_alone(classroom):
    out99, out98 = classroom["out"], classroom["out98"]
    assert out99.name == "ch99" and out98.name == "ch98"
    assert json.loads((out99 / MARKER).read_text())["chapter"] == "notebooks/99_toy.ipynb"
    assert classroom["after98"] == classroom["snapshot"], "grading chapter 98 changed chapter 99's files"
    assert {r[0] for r in read_csv(out99 / "gradebook.csv")[1:]} == {"solved", "untouched", "partly"}
    assert [r[0] for r in read_csv(out98 / "gradebook.csv")[1:]] == ["solved"]
    for out in (out99, out98):
        for name in ("grades.csv", "summary.md", "gradebook.csv", "gradebook-canvas.csv"):
            assert (out / name).is_file(), out / name


@pytest.mark.slow
def test_a_folder_of_another_chapter_is_refused(classroom, capsys):
    code = main(["grade", str(classroom["subs98"]), "--root", str(classroom["root"]), "--chapter", "98",
                 "--out", str(classroom["out"])])
    assert code == 2 and "holds the grades of notebooks/99_toy.ipynb" in capsys.readouterr().err


def test_default_out_is_one_folder_per_chapter():
    course = Course.load(ROOT)
    chapter = next(c for c in course.chapters if c.number == 3)
    assert default_out(chapter) == Path("_build/grades/ch03")


@pytest.mark.slow
def test_output_files_are_readable_by_the_group(classroom):
    for path in classroom["out"].rglob("*"):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o755 if path.is_dir() else 0o644), (path, oct(mode))


# ------------------------------------------------------------------------------------------------ outputs


@pytest.mark.slow
def test_gradebook_has_one_row_per_student_and_a_column_per_exercise(classroom):
    rows = read_csv(classroom["out"] / "gradebook.csv")
    assert rows[0] == ["student", "99.1", "99.2", "99.3", "total", "max"]
    table = {row[0]: row[1:] for row in rows[1:]}
    assert table["solved"] == ["2", "1", "", "3", "5"]  # the written 99.3 is not graded yet
    assert table["untouched"] == ["0", "0", "", "0", "5"]
    assert table["partly"] == ["1", "1", "", "2", "5"]
    canvas = read_csv(classroom["out"] / "gradebook-canvas.csv")
    assert canvas[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert canvas[1][0] == "Points Possible" and canvas[1][5] == "5"
    assert ["partly", "", "", "partly", "", "2"] in canvas


@pytest.mark.slow
def test_feedback_gives_points_and_one_line_per_test(classroom):
    text = (classroom["out"] / "feedback" / "partly.md").read_text()
    assert text.startswith("# Feedback: Chapter 99: Toy chapter\n")
    assert "## Exercise 99.1: Double a number: 1 of 2 points" in text
    assert "## Exercise 99.2: Square a number: 1 of 1 point" in text
    assert "PASS  small numbers\nFAIL  negative numbers: double(-3) should be -6" in text
    assert "Exercise 99.3: Why square? (written, graded by hand): not graded yet" in text
    # the self-check's own words, as it ran in the grader
    assert "Your self-check" in text and "hint: double(-3) should be -6" in text
    untouched = (classroom["out"] / "feedback" / "untouched.md").read_text()
    assert "TODO  your answer: not implemented yet" in untouched and "0 of 2 points" in untouched
    for path in (classroom["out"] / "feedback").iterdir():
        body = path.read_text()
        assert "/tmp" not in body and "ab-grade-" not in body and ".py\", line" not in body
        assert not re.search(r"\(line \d+: `", body)


@pytest.mark.slow
def test_written_answers_are_collected_one_section_per_student(classroom):
    text = (classroom["out"] / "written" / "ex-99-why.md").read_text()
    assert text.startswith("# Exercise 99.3: Why square? (ex-99-why)")
    assert "> **Exercise 99.3 (ex-99-why): Why square?**" in text  # the exercise, as released
    for preset in ("commonmark", "gfm-like"):  # rendered: the answer is text in its own block, not a section
        headings, sections, intrusions = written_sections(text, preset)
        assert [h for h in headings if h.startswith("h2 ")] == [
            "h2 partly: not graded yet", "h2 solved: not graded yet", "h2 untouched: not graded yet"]
        assert not intrusions, intrusions
        assert sections["partly: not graded yet"] == [("code", WRITTEN_ANSWER + "\n")]
        assert sections["untouched: not graded yet"] == [("text", "(no answer)")]


@pytest.mark.slow
def test_summary_title_names_the_chapter_in_plain_words(classroom):
    summary = (classroom["out"] / "summary.md").read_text()
    assert summary.splitlines()[0] == "# Grades: Chapter 99: Toy chapter (ch99)"
    assert "3 submissions graded" in summary
    assert "1 submissions" not in (classroom["out98"] / "summary.md").read_text()
    assert "1 submission graded" in (classroom["out98"] / "summary.md").read_text()


def test_plain_title_has_no_backslashes():
    assert plain_title("Chapter 3: Softmax and the 1/√d_k scale") == "Chapter 3: Softmax and the 1/√dₖ scale"
    assert plain_title(r"Softmax and the $1/\sqrt{d_k}$ scale") == "Softmax and the 1/√dₖ scale"
    assert plain_title("snake_case stays") == "snake_case stays"


# ------------------------------------------------------------------------------------------------ reruns


@pytest.mark.slow
def test_rerun_with_nothing_changed_starts_no_kernel(classroom):
    course = Course.load(classroom["root"])
    report = grade_folder(course, classroom["subs"], classroom["out"], GradeOptions(chapter="99", quiet=True))
    assert report.graded == [] and sorted(report.skipped) == ["partly.ipynb", "solved.ipynb", "untouched.ipynb"]
    assert report.reference_seconds == 0.0


@pytest.mark.slow
def test_manual_points_are_merged_and_checked(classroom):
    out, course = classroom["out"], Course.load(classroom["root"])
    template = read_csv(out / "manual-points.csv")
    assert template[0][:6] == ["student", "exercise", "number", "title", "max", "points"]
    assert {(r[0], r[1], r[5]) for r in template[1:]} == {(s, "ex-99-why", "") for s in ("partly", "solved", "untouched")}
    filled = out.parent / "manual.csv"
    filled.write_text("student,exercise,points,comment\npartly,99.3,1.5,right idea; say why\n"
                      "solved,ex-99-why,,\n")
    before = {p.name: p.read_bytes() for p in (out / "records").iterdir()}
    report = grade_folder(course, classroom["subs"], out, GradeOptions(chapter="99", quiet=True, manual=filled))
    assert report.graded == [] and {p.name: p.read_bytes() for p in (out / "records").iterdir()} == before
    table = {row[0]: row[1:] for row in read_csv(out / "gradebook.csv")[1:]}
    assert table["partly"] == ["1", "1", "1.5", "3.5", "5"] and table["solved"][2] == ""
    assert "Why square? (written, graded by hand): 1.5 of 2 points" in (out / "feedback" / "partly.md").read_text()
    assert "right idea; say why" in (out / "feedback" / "partly.md").read_text()
    assert "## partly: 1.5 of 2 points" in (out / "written" / "ex-99-why.md").read_text()
    assert read_csv(out / "manual-points.csv") == template  # the instructor's file is never rewritten


@pytest.mark.parametrize("row, message", [
    ("zed,ex-99-why,1", "unknown student 'zed'"),
    ("partly,ex-99-double,1", "unknown written exercise 'ex-99-double'"),
    ("partly,99.3,3", "exceed its maximum 2"),
    ("partly,99.3,lots", "is not a number"),
    ("partly,99.3,-1", "negative"),
    ("partly,99.3,1\npartly,ex-99-why,2", "second row"),
])
def test_manual_points_errors_name_the_line_and_the_fix(tmp_path, row, message):
    root = make_toy_course(tmp_path / "book", points=POINTS)
    chapter = Course.load(root).chapters[0]
    written = [ex for ex in chapter.exercises if ex.kind == "written"]
    path = tmp_path / "manual.csv"
    path.write_text("student,exercise,points\n" + row + "\n")
    with pytest.raises(ManualPointsError, match=re.escape(message)) as error:
        read_manual_points(path, ["partly", "solved"], written, Course.load(root).points_for)
    assert "manual.csv, line" in str(error.value)


def test_manual_points_need_the_columns(tmp_path):
    root = make_toy_course(tmp_path / "book", points=POINTS)
    written = [ex for ex in Course.load(root).chapters[0].exercises if ex.kind == "written"]
    path = tmp_path / "manual.csv"
    path.write_text("name,points\nalice,1\n")
    with pytest.raises(ManualPointsError, match="lacks the column"):
        read_manual_points(path, ["alice"], written, Course.load(root).points_for)


@pytest.mark.slow
def test_one_student_is_regraded_and_the_others_records_stay(classroom, tmp_path):
    course = Course.load(classroom["root"])
    subs = tmp_path / "subs"
    shutil.copytree(classroom["subs"], subs)
    out = tmp_path / "out"
    shutil.copytree(classroom["out"], out)
    records = {p.name: p.read_bytes() for p in (out / "records").iterdir()}
    fixed = answer(answer(classroom["student"]("99_toy.ipynb"), "ex-99-double", "return x + x"),
                   "ex-99-square", "return x ** 2")
    nbformat.write(fixed, str(subs / "untouched.ipynb"))  # resubmitted
    nbformat.write(fixed, str(subs / "partly.ipynb"))  # also changed, but not asked for
    report = grade_folder(course, subs, out, GradeOptions(chapter="99", quiet=True, student="untouched"))
    assert report.graded == ["untouched.ipynb"] and report.references_cached
    after = {p.name: p.read_bytes() for p in (out / "records").iterdir()}
    assert after["solved.ipynb.json"] == records["solved.ipynb.json"]
    assert after["partly.ipynb.json"] == records["partly.ipynb.json"]
    assert after["untouched.ipynb.json"] != records["untouched.ipynb.json"]
    assert report.not_graded == ["partly.ipynb"]  # its record no longer matches its file
    table = {row[0]: row[1:] for row in read_csv(out / "gradebook.csv")[1:]}
    assert table["untouched"][:2] == ["2", "1"] and "partly" not in table
    assert "Not graded in this run" in (out / "summary.md").read_text()
    with pytest.raises(ValueError, match="no such submission"):
        grade_folder(course, subs, out, GradeOptions(chapter="99", quiet=True, student="nobody"))


@pytest.mark.slow
def test_reference_values_are_computed_again_when_the_hidden_tests_change(classroom, tmp_path):
    root = tmp_path / "book"
    shutil.copytree(classroom["root"], root)
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(classroom["subs"] / "solved.ipynb", subs / "solved.ipynb")
    out = tmp_path / "out"
    first = grade_folder(Course.load(root), subs, out, GradeOptions(chapter="99", quiet=True))
    (subs / "solved.ipynb").write_text((subs / "solved.ipynb").read_text() + "\n")  # a new file version
    cached = grade_folder(Course.load(root), subs, out, GradeOptions(chapter="99", quiet=True))
    hidden = root / "instructor" / "hidden_tests" / "ch99.py"
    hidden.write_text(hidden.read_text() + "\n# an edit\n")
    (subs / "solved.ipynb").write_text((subs / "solved.ipynb").read_text() + "\n")
    edited = grade_folder(Course.load(root), subs, out, GradeOptions(chapter="99", quiet=True))
    assert (first.references_cached, cached.references_cached, edited.references_cached) == (False, True, False)
    assert first.reference_seconds > 0 and cached.reference_seconds == 0 and edited.reference_seconds > 0
    assert len(list((out / ".cache").glob("reference-*"))) == 1


@pytest.mark.slow
def test_records_are_graded_again_when_the_hidden_tests_change(classroom, tmp_path):
    """An unchanged notebook keeps its record until the tests that scored it change."""
    root = tmp_path / "book"
    shutil.copytree(classroom["root"], root)
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(classroom["subs"] / "solved.ipynb", subs / "solved.ipynb")
    out = tmp_path / "out"
    first = grade_folder(Course.load(root), subs, out, GradeOptions(chapter="99", quiet=True))
    again = grade_folder(Course.load(root), subs, out, GradeOptions(chapter="99", quiet=True))
    hidden = root / "instructor" / "hidden_tests" / "ch99.py"
    hidden.write_text(hidden.read_text() + "\n# an edit\n")
    edited = grade_folder(Course.load(root), subs, out, GradeOptions(chapter="99", quiet=True))
    assert (first.graded, again.graded, edited.graded) == (["solved.ipynb"], [], ["solved.ipynb"])


# ------------------------------------------------------------------------------------------------ self-checks


def _checks_modules():
    import pkgutil

    import attention_book.checks as checks

    return [importlib.import_module(f"attention_book.checks.{info.name}")
            for info in pkgutil.iter_modules(checks.__path__) if re.fullmatch(r"ch\d\d", info.name)]


def test_every_self_check_title_equals_its_exercise_title():
    from attention_book.checks import REGISTRY

    _checks_modules()
    course = Course.load(ROOT)
    checked = 0
    for ex in course.exercises():
        if ex.kind != "code" or not ex.check_cells:
            continue
        assert ex.label in REGISTRY, f"{ex.label}: its self-check cell calls no registered check"
        assert REGISTRY[ex.label].title == ex.title, (
            f"{ex.label}: the self-check says {REGISTRY[ex.label].title!r}, the exercise {ex.title!r}")
        checked += 1
    assert checked >= 20


def _norm(text: str) -> str:
    return " ".join(text.split())


def _secret_lines(chapter) -> dict:
    """label -> solution lines a hint must not contain: whole statements of at least 12
    characters that the chapter does not show anywhere outside its solutions."""
    nb = nbformat.read(str(ROOT / chapter.path), as_version=4)
    public = _norm("\n".join(cell_text(c) for i, c in enumerate(nb.cells)
                             if i not in chapter.cell_exercise and chapter.roles.get(i) != "drop"))
    secret = {}
    for ex in chapter.exercises:
        lines = []
        for line in ex.solution_lines:
            line = _norm(line)
            if len(line) < 12 or line.startswith("#") or line.endswith(",") or line in public:
                continue
            try:
                ast.parse(line + (" pass" if line.endswith(":") else ""))
            except SyntaxError:
                continue  # a fragment of a longer statement
            lines.append(line)
        secret[ex.label] = lines
    return secret


def _hint_texts(path: Path, hints_only: bool):
    """The string constants of a checks module, or the literal parts of every ``Hint(...)`` call
    and module-level string of a hidden-test file (its other strings are code it runs)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if not hints_only:
        return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Hint":
            found += [n.value for arg in node.args for n in ast.walk(arg)
                      if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    found += [n.value.value for n in tree.body if isinstance(n, ast.Assign)
              and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)]
    return found


def test_no_hint_spells_out_a_solution_line():
    """The self-checks' and the hidden tests' hints name the mistake; none holds a line of the
    answer's code (a line the chapter shows elsewhere is no secret)."""
    course = Course.load(ROOT)
    leaks = []
    for chapter in course.chapters:
        if not chapter.exercises or chapter.number is None:
            continue
        secret = _secret_lines(chapter)
        for path, hints_only in ((ROOT / "src/attention_book/checks" / f"ch{chapter.number:02d}.py", False),
                                 (course.hidden_dir / f"ch{chapter.number:02d}.py", True)):
            if not path.is_file():
                continue
            texts = [_norm(t) for t in _hint_texts(path, hints_only)]
            for label, lines in secret.items():
                leaks += [(path.name, label, line) for line in lines for text in texts
                          if line in text and text != line]
    assert not leaks, leaks


@pytest.mark.slow
def test_no_verdict_of_a_wrong_answer_shows_a_solution_line_or_a_line_of_the_checks():
    """Every plausible wrong answer (tests/wrong_answers) through its self-check: the printed
    verdict holds no solution line, no line of the checks, and each hint at most once."""
    from wrong_answers import all_wrong_answers, load_answer

    tables = {}
    for module in _checks_modules():
        number = module.__name__[-2:]
        try:
            tests = importlib.import_module(f"test_checks_ch{number}")
        except ImportError:
            continue
        for label, (check, names) in tests.CHECKS.items():
            tables[label] = (check, [names] if isinstance(names, str) else list(names))
    course = Course.load(ROOT)
    problems = []
    checked = 0
    for chapter in course.chapters:
        secret = _secret_lines(chapter)
        for ex in chapter.exercises:
            if ex.label not in tables:
                continue
            check, names = tables[ex.label]
            for wrong in all_wrong_answers().get(ex.label, []):
                namespace = load_answer(wrong.code, wrong.name)
                verdict = check(*[namespace[n] for n in names])
                text = str(verdict)
                checked += 1
                # the student's own line, quoted back to them ("line 5 of your code: `...`"), is no leak
                shown = _norm(re.sub(r"line \d+ of your code: `[^`]*`", "", text))
                problems += [(ex.label, wrong.name, "solution line", line) for line in secret[ex.label]
                             if line in shown]
                if re.search(r"line \d+", text) and "of your code" not in text:
                    problems.append((ex.label, wrong.name, "a line of the checks", text))
                for _, hint in verdict.failed:
                    if hint and len(hint) > 20 and text.count(hint) > 1:
                        problems.append((ex.label, wrong.name, "hint printed twice", hint))
    assert checked >= 200 and not problems, problems


def test_the_manual_template_reads_back_names_a_spreadsheet_would_run(tmp_path):
    from attention_book.instructor.gradebook import manual_template

    root = make_toy_course(tmp_path / "book", points=POINTS)
    course = Course.load(root)
    written = [ex for ex in course.chapters[0].exercises if ex.kind == "written"]
    students = ["=HYPERLINK(1)", "alice"]
    path = tmp_path / "manual.csv"
    path.write_text(manual_template(students, written, course.points_for).replace(
        ",2,,\n", ",2,1,\n", 1))
    assert "'=HYPERLINK(1)" in path.read_text()  # escaped for spreadsheets
    manual = read_manual_points(path, students, written, course.points_for)
    assert manual.points == {("=HYPERLINK(1)", "ex-99-why"): 1.0}


def test_feedback_and_written_files_use_singular_forms():
    from types import SimpleNamespace

    from attention_book.instructor.feedback import ExerciseReport, feedback_markdown, written_markdown

    one = [ExerciseReport("ex-99-double", "99.1", "Double", "code", 1.0, 1.0)]
    text = feedback_markdown("alice", "Chapter 99", one)
    assert "1 of 1 point." in text and "1 of 1 points" not in text
    exercise = SimpleNamespace(label="ex-99-why", number="99.2", title="Why")
    entries = [{"student": "alice", "answer": "because", "points": None, "comment": ""}]
    written = written_markdown(exercise, "Say why.", entries, lambda label: 1.0, "manual-points.csv")
    assert "1 of 1 student answered." in written
