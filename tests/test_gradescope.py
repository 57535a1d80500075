"""The Gradescope bundle (`attention-book gradescope`): its files follow Gradescope's autograder
specification, and `run_autograder`, run in a temporary root the way Gradescope runs it
(``$AUTOGRADER_ROOT/source`` = the unpacked zip, the notebook in ``submission/``), writes
``results/results.json`` with the right points: the solution full marks, the untouched release 0,
a partly solved notebook its exact points (toy chapter, and chapter 3 for real).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest

from attention_book.cli import main
from attention_book.instructor.course import Course
from attention_book.instructor.gradescope import build_bundle
from attention_book.instructor.release import build_release, release_notebook
from helpers import needs_isolation
from test_classroom import POINTS, TOY_HIDDEN, answer
from test_release import make_toy_course

ROOT = Path(__file__).resolve().parents[1]


def toy_course(base: Path) -> Path:
    root = make_toy_course(base / "book", points=POINTS)
    (root / "instructor" / "hidden_tests" / "toy.py").unlink()
    (root / "instructor" / "hidden_tests" / "ch99.py").write_text(TOY_HIDDEN)
    return root


def unpack(bundle: Path, root: Path) -> Path:
    """What Gradescope does: the zip into ROOT/source, run_autograder copied to ROOT."""
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(bundle) as archive:
        for info in archive.infolist():
            archive.extract(info, root / "source")
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(root / "source" / info.filename, mode)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    return root


def environment(root: Path) -> dict:
    """run_autograder's environment: the bundle's own copy of the package first (what setup.sh
    installs on Gradescope), whatever this checkout's virtual environment links to."""
    return dict(os.environ, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=sys.executable,
                PYTHONPATH=str(root / "source" / "course" / "src"))


def prepare(root: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "attention_book.instructor.gradescope", "prepare",
                           "--source", str(root / "source")], env=environment(root), capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def run_autograder(root: Path, notebook=None, name: str = "submission.ipynb", fails: bool = False) -> dict:
    """Put ``notebook`` (a path, a notebook or the file's bytes) alone into ROOT/submission, run
    ROOT/run_autograder. ``fails``: the grader is expected to fail (non-zero exit, no results)."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir()
    if isinstance(notebook, Path):
        shutil.copy(notebook, root / "submission" / name)
    elif isinstance(notebook, bytes):
        (root / "submission" / name).write_bytes(notebook)
    elif notebook is not None:
        nbformat.write(notebook, str(root / "submission" / name))
    done = subprocess.run([str(root / "run_autograder")], env=environment(root), capture_output=True,
                          text=True, timeout=900)
    if fails:
        assert done.returncode != 0 and not (root / "results" / "results.json").exists(), done.stdout + done.stderr
        return {"_stdout": done.stdout + done.stderr}
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    results["_stdout"] = done.stdout + done.stderr
    return results


def check_format(results: dict) -> None:
    """The fields Gradescope reads, with the types its specification gives."""
    assert isinstance(results["score"], (int, float)) and isinstance(results["tests"], list)
    for test in results["tests"]:
        assert set(test) >= {"name", "score", "max_score", "output"}
        assert isinstance(test["score"], (int, float)) and 0 <= test["score"] <= test["max_score"]
        assert "/tmp" not in test["output"] and "ab-grade" not in test["output"]
    assert results["score"] == pytest.approx(sum(t["score"] for t in results["tests"]))


# ------------------------------------------------------------------------------------------------ the zip


def test_bundle_follows_the_specification(tmp_path):
    root = toy_course(tmp_path)
    course = Course.load(root)
    bundle = build_bundle(course, "99", tmp_path / "out")
    again = build_bundle(course, "99", tmp_path / "again")
    assert bundle.name == "gradescope-ch99.zip" and bundle.read_bytes() == again.read_bytes()  # deterministic
    with zipfile.ZipFile(bundle) as archive:
        names = archive.namelist()
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in archive.infolist()}
        config = json.loads(archive.read("gradescope.json"))
        setup = archive.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "gradescope.json"} <= set(names)  # at the zip's root
    assert modes["setup.sh"] == modes["run_autograder"] == 0o755
    assert {"course/_toc.yml", "course/notebooks/99_toy.ipynb", "course/instructor/points.toml",
            "course/instructor/hidden_tests/ch99.py", "course/pyproject.toml",
            "course/src/attention_book/instructor/gradescope.py"} <= set(names)
    assert not any(n.startswith("course/notebooks/") and "99_toy" not in n for n in names)  # one chapter
    assert config["chapter"] == "99" and config["container_only"] is False
    import torch

    assert f"torch=={torch.__version__.split('+')[0]}" in setup and "bubblewrap" in setup
    unpacked = unpack(bundle, tmp_path / "gs")
    for script in ("setup.sh", "run_autograder"):
        assert subprocess.run(["bash", "-n", str(unpacked / "source" / script)]).returncode == 0
    assert stat.S_IMODE((unpacked / "run_autograder").stat().st_mode) == 0o755


def test_the_command_line_writes_the_zip(tmp_path, capsys):
    root = toy_course(tmp_path)
    assert main(["gradescope", "--root", str(root), "--chapter", "99", "--out", str(tmp_path / "z")]) == 0
    assert (tmp_path / "z" / "gradescope-ch99.zip").is_file() and "gradescope-ch99.zip" in capsys.readouterr().out
    assert main(["gradescope", "--root", str(root), "--chapter", "42", "--out", str(tmp_path / "z")]) == 2


# ------------------------------------------------------------------------------------------------ toy runs


@pytest.fixture(scope="module")
def toy_bundle(tmp_path_factory):
    base = tmp_path_factory.mktemp("gradescope-toy")
    needs_isolation(base)
    root = toy_course(base)
    course = Course.load(root)
    bundle = build_bundle(course, "99", base / "out")
    gs = unpack(bundle, base / "autograder")
    said = prepare(gs)
    release = build_release(course, base / "release")
    return {"root": root, "gs": gs, "prepared": said,
            "solution": root / "notebooks" / "99_toy.ipynb",
            "release": release.out / "notebooks" / "99_toy.ipynb"}


@pytest.mark.slow
def test_toy_solution_full_marks_untouched_zero_partial_exact(toy_bundle):
    assert "computed" in toy_bundle["prepared"]
    solved = run_autograder(toy_bundle["gs"], toy_bundle["solution"])
    check_format(solved)
    assert [(t["number"], t["score"], t["max_score"]) for t in solved["tests"]] == [("99.1", 2, 2), ("99.2", 1, 1)]
    assert solved["score"] == 3 and "reference values cached" in solved["_stdout"]
    assert "graded by hand" in solved["output"]  # the written exercise 99.3 is left to Gradescope
    untouched = run_autograder(toy_bundle["gs"], toy_bundle["release"])
    check_format(untouched)
    assert untouched["score"] == 0 and all("not implemented" in t["output"] for t in untouched["tests"])
    partly = answer(answer(nbformat.read(str(toy_bundle["release"]), as_version=4), "ex-99-double",
                           "return 2 * abs(x)"), "ex-99-square", "return x * x")
    result = run_autograder(toy_bundle["gs"], partly)
    check_format(result)
    assert [t["score"] for t in result["tests"]] == [1, 1] and result["score"] == 2
    assert "FAIL  negative numbers: double(-3) should be -6" in result["tests"][0]["output"]


@pytest.mark.slow
def test_no_notebook_or_a_broken_one_still_gives_results(toy_bundle, tmp_path):
    empty = run_autograder(toy_bundle["gs"], None)
    check_format(empty)
    assert empty["score"] == 0 and "No .ipynb file" in empty["output"]
    broken = tmp_path / "broken.ipynb"
    broken.write_text("this is not a notebook")
    result = run_autograder(toy_bundle["gs"], broken)
    check_format(result)
    assert result["score"] == 0 and "not a notebook" in result["output"]


@pytest.mark.slow
def test_a_crashing_grader_writes_no_score(toy_bundle, tmp_path):
    """The grader's own failure is not a grade (issue 29): no results.json (Gradescope then shows
    an autograder failure and no score, never a 0), a non-zero exit, the reason in the output."""
    gs = tmp_path / "gs"
    shutil.copytree(toy_bundle["gs"], gs, symlinks=True)
    (gs / "source" / "gradescope.json").write_text("{broken")
    result = run_autograder(gs, toy_bundle["solution"], fails=True)
    assert "the autograder failed on this submission" in result["_stdout"]


# ------------------------------------------------------------------------------------------------ chapter 3


@pytest.mark.slow
def test_the_bundle_holds_every_file_of_the_package(tmp_path):
    """The grader in the bundle is the grader here: modules and package data (the own-work list,
    the explorers' JavaScript, chapter 9's novels) all travel; a file missing here would make
    Gradescope grade differently (no own-work list: helper reuse would score)."""
    import attention_book

    package = Path(attention_book.__file__).resolve().parent
    bundle = build_bundle(Course.load(ROOT), "03", tmp_path)
    with zipfile.ZipFile(bundle) as archive:
        inside = {name[len("course/src/attention_book/"):] for name in archive.namelist()
                  if name.startswith("course/src/attention_book/")}
    here = {p.relative_to(package).as_posix() for p in package.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc",)}
    assert here - inside == set()
    assert {"checks/chapter_code.json", "texts/README.md"} <= inside


def test_chapter_3_solution_full_marks_and_release_zero(tmp_path):
    needs_isolation(tmp_path)
    course = Course.load(ROOT)
    chapter = next(c for c in course.chapters if c.number == 3)
    gs = unpack(build_bundle(course, "03", tmp_path / "out"), tmp_path / "autograder")
    prepare(gs)
    solved = run_autograder(gs, ROOT / chapter.path, "03_softmax_and_scaling.ipynb")
    check_format(solved)
    coding = [ex for ex in chapter.exercises if ex.kind == "code" and course.points_for(ex.label) > 0]
    assert len(solved["tests"]) == len(coding)
    assert all(t["score"] == t["max_score"] > 0 for t in solved["tests"]), solved["tests"]
    untouched = run_autograder(gs, ROOT / "student" / chapter.path, "03_softmax_and_scaling.ipynb")
    check_format(untouched)
    assert untouched["score"] == 0 and len(untouched["tests"]) == len(coding)
    # the chapter's own helper as the answer: 0 and "write your own", as `attention-book grade` says
    from hostile.round2 import _with_answers

    release = release_notebook(nbformat.read(str(ROOT / chapter.path), as_version=4), chapter, course.context())
    reused = run_autograder(gs, nbformat.from_dict(_with_answers(release, chapter, {
        "ex-03-stable-softmax": "return stable_softmax(scores, dim=dim)"})), "03_softmax_and_scaling.ipynb")
    check_format(reused)
    from attention_book.checks.numbering import exercise_number

    softmax = next(t for t in reused["tests"] if t["number"] == exercise_number("ex-03-stable-softmax"))
    assert softmax["score"] == 0 and "write your own" in softmax["output"], softmax
    # issue 29: an honest notebook saved with a byte-order mark, %%time on its answer cells, under
    # a 117-byte file name (ENAMETOOLONG before): full marks
    from hostile.round3 import LONG_NAME, ROUND3, with_bom

    timed = ROUND3["magic-time"].build(source=nbformat.read(str(ROOT / chapter.path), as_version=4),
                                       release=release, chapter=chapter, other=None)
    odd = run_autograder(gs, with_bom(timed), LONG_NAME)
    check_format(odd)
    assert all(t["score"] == t["max_score"] > 0 for t in odd["tests"]), odd["tests"]
