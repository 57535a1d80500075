"""The student release (`attention-book release`) and the exercise markup it reads.

Most tests use a small synthetic course written to a tmp folder (``make_toy_course``), so they do
not depend on chapter text that is still changing; the last ones check the real chapters.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attention_book.cli import main
from attention_book.instructor.course import Course
from attention_book.instructor.markup import (
    MarkupError,
    analyse_notebook,
    cell_text,
    convert_markdown,
    ConvertContext,
    strip_solution,
)
from attention_book.instructor.release import MARKER, ZIP_NAME, build_release

ROOT = Path(__file__).resolve().parents[1]

TOY_CHECKS = '''\
from attention_book.checks.core import Hint, register

@register("ex-99-double", "Double a number")
def check_double(double):
    def small():
        if double(2) != 4:
            raise Hint("double(2) should be 4")
    def negative():
        if double(-3) != -6:
            raise Hint("double(-3) should be -6: do not take the absolute value")
    return [("small numbers", small), ("negative numbers", negative)]

@register("ex-99-square", "Square a number")
def check_square(square):
    def three():
        if square(3) != 9:
            raise Hint("square(3) should be 9: multiply x by itself")
    return [("square(3)", three)]
'''

TOY_HIDDEN = '''\
from attention_book.instructor.hidden import Hint, answer, hidden_test

@hidden_test("ex-99-square", "large numbers", weight=1)
def _(ns):
    square = answer(ns, "square")
    if square(10**6) != 10**12:
        raise Hint("square(10**6) should be 10**12")
'''


def toy_cells(double_body="    return 2 * x", square_body="    return x * x"):
    """The cells of the toy chapter (the solution bodies can be swapped for wrong answers)."""
    return [
        new_code_cell("# Setup\n" + TOY_CHECKS),
        new_markdown_cell("# Chapter 99: Toy chapter\n\n(sec-toy-start)=\n## Warm-up\n\nSee {ref}`ex-99-square`."),
        new_code_cell("offset = 0  # shared with later cells\nprint('warm-up done')"),
        new_markdown_cell("## Exercises\n\n```{note}\nTry first, then open the solution.\n```"),
        new_markdown_cell("```{exercise} Double a number\n:label: ex-99-double\n\n"
                          "Write `double(x)`; compare {numref}`ex-99-square`.\n```"),
        new_markdown_cell("```{solution-start} ex-99-double\n:class: dropdown\n```", metadata={"tags": ["solution"]}),
        new_code_cell("def double(x):\n    # twice x\n    # BEGIN SOLUTION\n" + double_body + "\n    # END SOLUTION",
                      metadata={"tags": ["solution"]}),
        new_markdown_cell("```{solution-end}\n```", metadata={"tags": ["solution"]}),
        new_code_cell("check_double(double)"),
        new_markdown_cell("```{exercise} Square a number\n:label: ex-99-square\n\nWrite `square(x)`.\n```"),
        new_code_cell("def square(x):\n    # BEGIN SOLUTION\n" + square_body + "\n    # END SOLUTION",
                      metadata={"tags": ["solution"]}),
        new_code_cell("check_square(square)"),
        new_markdown_cell("```{exercise} Why square?\n:label: ex-99-why\n\nExplain.\n```"),
        new_markdown_cell("```{solution} ex-99-why\n:class: dropdown\n\nBECAUSE-SECRET-ANSWER\n```",
                          metadata={"tags": ["solution"]}),
        new_markdown_cell("## Summary\n\nDone."),
    ]


def write_notebook(path: Path, cells) -> Path:
    nb = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                            "language": "python"}})
    for index, cell in enumerate(nb.cells):
        cell["id"] = f"99-{index:03d}"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(path))
    return path


def make_toy_course(root: Path, points: str = "ex-99-double = 2\nex-99-square = 1\nex-99-why = 0\n") -> Path:
    """A minimal book: _toc.yml, _config.yml, one chapter notebook, points and hidden tests."""
    (root / "book").mkdir(parents=True)
    (root / "_toc.yml").write_text("format: jb-book\nroot: book/index\nchapters:\n"
                                   "  - file: notebooks/99_toy\n  - file: book/for_instructors\n")
    (root / "_config.yml").write_text("repository:\n  url: https://github.com/example/toy-book\n")
    (root / "book" / "index.md").write_text("# Toy\n")
    write_notebook(root / "notebooks" / "99_toy.ipynb", toy_cells())
    (root / "instructor" / "hidden_tests").mkdir(parents=True)
    (root / "instructor" / "points.toml").write_text("[points]\n" + points)
    (root / "instructor" / "hidden_tests" / "toy.py").write_text(TOY_HIDDEN)
    return root


@pytest.fixture
def toy(tmp_path):
    return make_toy_course(tmp_path / "book")


# ------------------------------------------------------------------------------------------------ markup


def test_strip_solution_keeps_indentation_and_code_around():
    source = ("def f(x):\n    y = x  # kept\n    # BEGIN SOLUTION\n    y = y + 1\n    # END SOLUTION\n"
              "    return y\n# BEGIN SOLUTION\nz = 3\n# END SOLUTION")
    out = strip_solution(source, "ex-99-f")
    assert out.split("\n") == [
        "def f(x):", "    y = x  # kept",
        '    raise NotImplementedError("ex-99-f: replace this line with your code")',
        "    return y", 'raise NotImplementedError("ex-99-f: replace this line with your code")',
    ]
    compile(out, "<release>", "exec")


@pytest.mark.parametrize("source, message", [
    ("# BEGIN SOLUTION\nx = 1\n", "never closed"),
    ("x = 1\n# END SOLUTION\n", "without `# BEGIN SOLUTION`"),
    ("# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION\n", "second"),
])
def test_unbalanced_markers_are_errors(source, message):
    with pytest.raises(MarkupError, match=message):
        strip_solution(source, "ex-99-f")


def test_analyse_finds_exercises_answers_and_checks(toy):
    nb = nbformat.read(str(toy / "notebooks/99_toy.ipynb"), as_version=4)
    chapter = analyse_notebook(nb, "notebooks/99_toy.ipynb")
    assert chapter.number == 99 and chapter.title == "Chapter 99: Toy chapter"
    summary = [(e.label, e.number, e.kind, e.answer_cells, e.check_cells) for e in chapter.exercises]
    assert summary == [
        ("ex-99-double", "99.1", "code", [6], [8]),
        ("ex-99-square", "99.2", "code", [10], [11]),
        ("ex-99-why", "99.3", "written", [], []),
    ]
    assert {i for i, role in chapter.roles.items() if role == "drop"} == {5, 7, 13}
    assert chapter.labels["sec-toy-start"] == "Warm-up"


@pytest.mark.parametrize("change, message", [
    (lambda cells: cells[6].update(source="def double(x):\n    return 2 * x"), "no `# BEGIN SOLUTION`"),
    (lambda cells: cells.pop(7), "cell missing above it"),
    (lambda cells: cells.__delitem__(slice(7, 9)), "never closed"),
    (lambda cells: cells[4].update(source="```{exercise} Double\n\nNo label.\n```"), "no `:label:"),
    (lambda cells: cells[4].update(source="```{exercise} Double\n:label: double\n```"), "ex-NN-slug"),
    (lambda cells: cells[9].update(source="```{exercise} Again\n:label: ex-99-double\n```"), "used twice"),
])
def test_markup_mistakes_are_reported(tmp_path, change, message):
    cells = toy_cells()
    change(cells)
    nb = new_notebook(cells=cells)
    with pytest.raises(MarkupError, match=message):
        analyse_notebook(nb, "notebooks/99_toy.ipynb")


def test_convert_markdown_makes_plain_jupyter_markdown():
    ctx = ConvertContext(exercises={"ex-01-positions": "Exercise 1.2"}, titles={"sec-x": "Scaled scores"})
    text = (
        "(sec-x)=\n## Title\n\n% a MyST comment\nSee {ref}`ex-01-positions`, {numref}`Ex. %s <ex-01-positions>`,"
        " {ref}`the section <sec-x>`, {ref}`sec-x`, {math}`x^2` and {doc}`../book/how_to_run`.\n\n"
        "````{exercise} Add positions\n:label: ex-01-positions\n:class: dropdown\n\nWrite it.\n\n"
        "```{tip}\nUse `torch.arange`.\n```\n\n```python\nx = {ref}`kept` \n```\n````\n\n"
        ":::{warning}\nCareful\n:::\n\n$$ a = b $$ (eq-1)\n\n```{solution} ex-01-positions\nSECRET\n```\n"
        "```{figure} images/fig.png\n:width: 50%\n\nA caption.\n```"
    )
    out = convert_markdown(text, ctx)
    assert "**Exercise 1.2 (ex-01-positions): Add positions**" in out
    assert "> Write it." in out and "> > **Tip**" in out and "> > Use `torch.arange`." in out
    assert "> x = {ref}`kept`" in out  # code is left alone
    assert "See Exercise 1.2, Ex. 1.2, the section, Scaled scores, $x^2$ and ../book/how_to_run." in out
    assert "> **Warning**" in out and "> Careful" in out
    assert "$$ a = b $$" in out and "(eq-1)" not in out
    assert "![A caption.](images/fig.png)" in out
    for gone in ("SECRET", "(sec-x)=", "MyST comment", "```{", ":::{", ":label:", ":class:"):
        assert gone not in out


# ------------------------------------------------------------------------------------------------ release


def release_files(folder: Path):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_toy_release(toy, tmp_path):
    course = Course.load(toy)
    out = tmp_path / "release"
    report = build_release(course, out)
    assert report.notebooks == ["notebooks/99_toy.ipynb"] and report.exercises == 3
    nbformat.validate(nbformat.read(str(out / "notebooks/99_toy.ipynb"), as_version=4))
    nb = json.loads((out / "notebooks/99_toy.ipynb").read_text())
    texts = [cell_text(c) for c in nb["cells"]]
    everything = "\n".join(texts)
    # solutions gone, answers replaced at the same indentation, checks kept
    for secret in ("return 2 * x", "return x * x", "BECAUSE-SECRET-ANSWER", "BEGIN SOLUTION", "{solution"):
        assert secret not in everything
    assert 'def double(x):\n    # twice x\n    raise NotImplementedError("ex-99-double: replace this line with your code")' in texts
    assert "check_double(double)" in texts and "check_square(square)" in texts
    assert "**Exercise 99.1 (ex-99-double): Double a number**\n\n> Write `double(x)`; compare Exercise 99.2." in texts
    assert "See Exercise 99.2." in everything and "(sec-toy-start)=" not in everything
    assert not re.search(r"```\{|:::\{|\{(ref|numref|doc)\}`", everything)
    # cells: no outputs, no solution tags, exercise metadata for the grader, a note after setup
    assert all(c.get("outputs") == [] and c.get("execution_count") is None for c in nb["cells"] if c["cell_type"] == "code")
    assert not any("solution" in c["metadata"].get("tags", []) for c in nb["cells"])
    roles = [(c["metadata"].get("attention_book") or {}).get("role") for c in nb["cells"]]
    assert roles.count("answer") == 3 and roles.count("check") == 2  # the written one gets an answer cell
    assert "Student edition" in texts[1] and nb["metadata"]["attention_book"]["source"] == "notebooks/99_toy.ipynb"
    # README with the Colab link; zip with the same files
    readme = (out / "README.md").read_text()
    assert "https://colab.research.google.com/github/example/toy-book/blob/release/notebooks/99_toy.ipynb" in readme
    with zipfile.ZipFile(out / ZIP_NAME) as archive:
        names = archive.namelist()
        assert names == ["attention-book-release/README.md", "attention-book-release/notebooks/99_toy.ipynb"]
        assert archive.read(names[1]) == (out / "notebooks/99_toy.ipynb").read_bytes()


def test_release_is_deterministic_and_replaces_itself(toy, tmp_path):
    course = Course.load(toy)
    first = release_files(build_release(course, tmp_path / "a").out)
    (tmp_path / "a" / "stale.txt").write_text("left over")
    second = release_files(build_release(course, tmp_path / "a").out)  # rebuild in place
    other = release_files(build_release(Course.load(toy), tmp_path / "b").out)
    assert first == second == other
    assert MARKER in first and "stale.txt" not in second


def test_release_refuses_a_foreign_folder(toy, tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    with pytest.raises(FileExistsError, match="not written by"):
        build_release(Course.load(toy), precious)
    assert (precious / "thesis.tex").read_text() == "do not delete"


def test_release_command_line(toy, tmp_path, capsys):
    assert main(["release", "--root", str(toy), "--out", str(tmp_path / "rel")]) == 0
    assert "1 notebooks, 3 exercises" in capsys.readouterr().out
    bad = toy / "notebooks" / "99_toy.ipynb"
    nb = nbformat.read(str(bad), as_version=4)
    nb.cells[6].source = "def double(x):\n    return 2 * x"  # solution without markers
    nbformat.write(nb, str(bad))
    assert main(["release", "--root", str(toy), "--out", str(tmp_path / "rel")]) == 2
    assert "no `# BEGIN SOLUTION`" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ the real chapters


@pytest.fixture(scope="module")
def real_release(tmp_path_factory):
    course = Course.load(ROOT)
    out = tmp_path_factory.mktemp("real") / "release"
    return course, build_release(course, out)


def test_real_release_contains_no_solution_line(real_release):
    course, report = real_release
    assert report.notebooks == [c.path for c in course.chapters] and report.notebooks
    released = {path: (report.out / path).read_text() for path in report.notebooks}
    with zipfile.ZipFile(report.zip_path) as archive:
        zipped = "\n".join(archive.read(n).decode() for n in archive.namelist())
    sources = {c.path: nbformat.read(str(course.root / c.path), as_version=4) for c in course.chapters}
    # text every chapter shows outside its solutions (a short line may recur in another chapter)
    public_everywhere = "\n".join(
        cell_text(cell) for c in course.chapters for i, cell in enumerate(sources[c.path].cells)
        if i not in c.cell_exercise
    )
    for chapter in course.chapters:
        nb = sources[chapter.path]
        public = "\n".join(cell_text(c) for i, c in enumerate(nb.cells) if i not in chapter.cell_exercise)
        nbformat.validate(nbformat.reads(released[chapter.path], as_version=4))
        text = "\n".join(cell_text(c) for c in json.loads(released[chapter.path])["cells"])
        for ex in chapter.exercises:
            assert f"({ex.label}): " in text, f"{ex.label} heading missing from the release"
            for line in ex.solution_lines:
                needle = line.strip()
                if len(needle) < 8 or needle.startswith("#") or needle in public:
                    continue  # too short to be telling, or also printed outside the solution
                assert needle not in text, f"solution line of {ex.label} leaked: {needle!r}"
                if needle not in public_everywhere:
                    assert needle not in zipped, f"solution line of {ex.label} leaked into the zip: {needle!r}"
            if ex.kind == "code":
                assert f'raise NotImplementedError("{ex.label}: ' in text
        assert not re.search(r"```\{|:::\{|\{(ref|numref|doc|eq)\}`|^\(\S+\)=$", text, re.M)
        assert "BEGIN SOLUTION" not in text and "{solution" not in text


def test_release_says_it_has_no_solutions_instead_of_a_dropdown(tmp_path):
    """The book hides solutions in dropdowns; the release has none: its text must not send a
    student to one (issue 21)."""
    from attention_book.instructor.release import NO_SOLUTIONS

    root = make_toy_course(tmp_path / "book")
    path = root / "notebooks" / "99_toy.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    nb.cells[3].source = ("## Exercises\n\nEach exercise ends with a self-check. The solutions are hidden "
                          "behind a\ndropdown: try first.")
    nbformat.write(nb, str(path))
    out = build_release(Course.load(root), tmp_path / "release").out
    text = "\n".join(cell_text(c) for c in json.loads((out / "notebooks/99_toy.ipynb").read_text())["cells"])
    assert "dropdown" not in text.lower()
    assert "## Exercises\n\nEach exercise ends with a self-check. " + NO_SOLUTIONS in text


def test_real_release_has_no_dropdown_promise(real_release):
    course, report = real_release
    for path in report.notebooks:
        cells = json.loads((report.out / path).read_text())["cells"]
        prose = "\n".join(cell_text(c) for c in cells if c["cell_type"] == "markdown")
        assert not re.search(r"\bdrop-?downs?\b", prose, re.IGNORECASE), path


def test_real_release_keeps_setup_cell_first(real_release):
    course, report = real_release
    for chapter in course.chapters:
        source = nbformat.read(str(course.root / chapter.path), as_version=4)
        student = json.loads((report.out / chapter.path).read_text())
        first_code = next(c for c in student["cells"] if c["cell_type"] == "code")
        assert cell_text(first_code) == next(cell_text(c) for c in source.cells if c.cell_type == "code")


# ------------------------------------------------------------------------------------------------ generated files


def test_student_notebooks_are_the_release_without_its_version(toy, tmp_path):
    from attention_book.instructor.release import STUDENT_DIR, student_notebooks

    course = Course.load(toy)
    files = student_notebooks(course)
    assert list(files) == [f"{STUDENT_DIR}/notebooks/99_toy.ipynb"]
    released = json.loads((build_release(course, tmp_path / "rel").out / "notebooks/99_toy.ipynb").read_text())
    student = json.loads(files[f"{STUDENT_DIR}/notebooks/99_toy.ipynb"])
    assert released["metadata"]["attention_book"].pop("version")
    assert "version" not in student["metadata"]["attention_book"]
    # the student notebook carries its own digest (make_student_notebooks keeps a copy edited since)
    assert len(student["metadata"]["attention_book"].pop("generated_sha256")) == 64
    assert student == released
    assert student_notebooks(Course.load(toy)) == files  # deterministic


def test_release_readme_names_exercises_by_number(toy, tmp_path):
    readme = (build_release(Course.load(toy), tmp_path / "rel").out / "README.md").read_text()
    assert "99.1 `ex-99-double`, 99.2 `ex-99-square`, 99.3 `ex-99-why`" in readme


def test_numbering_table_is_rewritten_between_its_markers(toy):
    from attention_book.instructor.release import TABLE_BEGIN, TABLE_END, numbering_table

    current = f'"""doc"""\n{TABLE_BEGIN}\nNUMBERS = {{"old": "1.1"}}\n{TABLE_END}\n\ndef after(): ...\n'
    new = numbering_table(Course.load(toy), current)
    assert new.startswith(f'"""doc"""\n{TABLE_BEGIN}\nNUMBERS: Dict[str, str] = {{\n')
    assert '    "ex-99-double": "99.1",\n    "ex-99-square": "99.2",\n    "ex-99-why": "99.3",\n}\n' in new
    assert '"old"' not in new and new.endswith(f"{TABLE_END}\n\ndef after(): ...\n")
    assert numbering_table(Course.load(toy), new) == new
    with pytest.raises(ValueError, match="lacks the lines"):
        numbering_table(Course.load(toy), "NUMBERS = {}\n")


def test_the_package_numbering_module_has_its_markers():
    from attention_book.checks import numbering
    from attention_book.instructor.release import TABLE_BEGIN, TABLE_END

    text = Path(numbering.__file__).read_text()
    assert text.count(TABLE_BEGIN) == 1 and text.count(TABLE_END) == 1
