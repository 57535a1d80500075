"""``attention-book gradescope --chapter 03 --out DIR``: the autograder as a Gradescope bundle.

Gradescope's autograder specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
a zip with ``setup.sh`` (run once, as root, when Gradescope builds the image; Ubuntu, ``apt``) and
``run_autograder`` (run for every submission) at its root. The zip is unpacked into
``/autograder/source``; the student's files arrive in ``/autograder/submission/``; the results go
to ``/autograder/results/results.json``: ``score``, and ``tests`` with ``name``, ``score``,
``max_score``, ``output`` per test. The bundle holds

* ``setup.sh``: installs Python, bubblewrap, torch (the CPU wheel of the version used here) and the
  course package with the grader (``course/``), then computes the chapter's reference values once
  (``prepare``), so each submission runs one notebook, not two;
* ``run_autograder``: runs :func:`run` with ``$AUTOGRADER_PYTHON`` when set (testing it anywhere),
  else the Python ``setup.sh`` installed; ``$AUTOGRADER_ROOT`` (default ``/autograder``) replaces
  ``/autograder``. When the grader itself fails on the notebook (a crash, its worker dying: not the
  student's doing) it writes no ``results.json`` and exits non-zero, so Gradescope shows an
  autograder failure and no score (never a 0 that looks like a grade); the autograder output says
  why and a rerun grades it;
* ``course/``: a one-chapter book: the chapter notebook (the reference solution), its hidden
  tests, the points, the course package's source; ``gradescope.json``: the settings.

Each exercise becomes one Gradescope test (``Exercise 3.1: title``, its points, and the lines of
the student's feedback as ``output``); written exercises are left to Gradescope's manual grading.
The hidden tests and the reference values stay in the grader's process. Gradescope runs every
submission in its own container (one student cannot reach another); inside it, the bundle still
isolates the student's kernel with the grader's sandbox (bubblewrap), as ``attention-book grade``
does. If the container does not permit the sandbox, the submission scores 0 with a message that
says so, unless the bundle was built with ``--container-only`` (then the container is the only
isolation: the student's code can read the bundle and its own results; see the For instructors
page).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import List, Optional

__all__ = ["build_bundle", "run", "prepare", "results_for", "SETUP_SH", "RUN_AUTOGRADER", "main"]

ZIP_DATE = (2020, 1, 1, 0, 0, 0)

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu).
set -euo pipefail
SOURCE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(dirname "$SOURCE")"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip bubblewrap util-linux >/dev/null
python3 -m venv "$ROOT/venv"
"$ROOT/venv/bin/python" -m pip install -q --upgrade pip
# the CPU build of torch (no CUDA download): the version the bundle was made with
"$ROOT/venv/bin/python" -m pip install -q "torch==@TORCH@" --index-url https://download.pytorch.org/whl/cpu \
  || "$ROOT/venv/bin/python" -m pip install -q "torch==@TORCH@"
"$ROOT/venv/bin/python" -m pip install -q "$SOURCE/course[grade]"
"$ROOT/venv/bin/python" -m ipykernel install --sys-prefix --name python3 >/dev/null
# GPT-2's tokenizer files (chapter 1): outside source/, which only root may read, for the sandbox's user
export TIKTOKEN_CACHE_DIR="$ROOT/tiktoken-cache"
mkdir -p "$TIKTOKEN_CACHE_DIR"
if [ -d "$SOURCE/tiktoken-cache" ]; then cp "$SOURCE"/tiktoken-cache/* "$TIKTOKEN_CACHE_DIR"/; fi
"$ROOT/venv/bin/python" -c "import tiktoken; tiktoken.get_encoding('gpt2')" >/dev/null \
  || echo "note: tiktoken's GPT-2 files could not be fetched (only chapter 1 needs them)"
chmod -R a+rX "$TIKTOKEN_CACHE_DIR"
# the chapter's reference values, computed once here instead of for every submission
"$ROOT/venv/bin/python" -m attention_book.instructor.gradescope prepare --source "$SOURCE" \
  || echo "note: the reference values will be computed for each submission"
chmod -R go-rwx "$SOURCE"  # the solution notebook and the hidden tests: root only
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for every submission, in a fresh container: grade the notebook in
# $AUTOGRADER_ROOT/submission and write $AUTOGRADER_ROOT/results/results.json.
set -u
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PYTHON="${AUTOGRADER_PYTHON:-$ROOT/venv/bin/python}"
mkdir -p "$ROOT/results"
if [ -d "$ROOT/tiktoken-cache" ] && [ -z "${TIKTOKEN_CACHE_DIR:-}" ]; then
  export TIKTOKEN_CACHE_DIR="$ROOT/tiktoken-cache"  # written by setup.sh
fi
"$PYTHON" -m attention_book.instructor.gradescope run --source "$ROOT/source" \
  --submission "$ROOT/submission" --results "$ROOT/results/results.json"
status=$?
if [ ! -s "$ROOT/results/results.json" ]; then
  # the grader failed (not the student): no score at all, Gradescope shows an autograder failure
  echo "the autograder failed on this submission (exit status $status): no score written; rerun it" >&2
  exit $(( status == 0 ? 1 : status ))
fi
exit 0
"""


def package_files(package: Path, pyproject: Path) -> List[Path]:
    """Every file the installed package needs: its modules and the package data ``pyproject.toml``
    lists (the own-work list ``checks/chapter_code.json``, the explorers' JavaScript, chapter 9's
    novels). Without the data the bundle would grade differently from ``attention-book grade``."""
    import tomllib

    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    patterns = config.get("tool", {}).get("setuptools", {}).get("package-data", {}).get("attention_book", [])
    found = {p for p in package.rglob("*.py") if "__pycache__" not in p.parts}
    for pattern in patterns:
        found |= {p for p in package.glob(pattern) if p.is_file()}
    return sorted(found)


def _course_files(course, chapter) -> dict:
    """``{path in the zip: bytes}`` of the one-chapter course (under ``course/``)."""
    import attention_book

    files = {}
    stem = chapter.path[:-6] if chapter.path.endswith(".ipynb") else chapter.path
    files["course/_toc.yml"] = f"format: jb-book\nroot: {stem}\n".encode()
    config = course.root / "_config.yml"
    if config.is_file():
        files["course/_config.yml"] = config.read_bytes()
    files[f"course/{chapter.path}"] = (course.root / chapter.path).read_bytes()
    files["course/instructor/points.toml"] = course.points_file.read_bytes()
    hidden = course.hidden_file(chapter)
    if hidden is not None and hidden.is_file():
        files[f"course/instructor/hidden_tests/{hidden.name}"] = hidden.read_bytes()
    package = Path(attention_book.__file__).resolve().parent
    pyproject = course.root / "pyproject.toml"
    if not pyproject.is_file():
        pyproject = package.parents[1] / "pyproject.toml"
    for path in package_files(package, pyproject):
        files[f"course/src/attention_book/{path.relative_to(package).as_posix()}"] = path.read_bytes()
    files["course/pyproject.toml"] = pyproject.read_bytes()
    files["course/README.md"] = (f"# {chapter.title}: the autograder's copy of the course\n\n"
                                 "Generated by `attention-book gradescope`; see the book's For instructors page.\n").encode()
    return files


def _tiktoken_files() -> dict:
    folder = os.environ.get("TIKTOKEN_CACHE_DIR")
    if not folder or not Path(folder).is_dir():
        return {}
    return {f"tiktoken-cache/{p.name}": p.read_bytes() for p in sorted(Path(folder).iterdir())
            if p.is_file() and not p.name.startswith(".")}


def build_bundle(course, chapter_wanted: str, out: Path, *, container_only: bool = False,
                 timeout: float = 600.0, check_timeout: float = 30.0, memory_mb: int = 6144) -> Path:
    """Write ``out/gradescope-chNN.zip`` (deterministic bytes) and return its path."""
    import torch

    from .submissions import pick_chapter

    chapter = pick_chapter(course, chapter_wanted)
    if chapter.number is None:
        raise ValueError(f"--chapter {chapter_wanted!r}: {chapter.stem} has no chapter number")
    if not any(ex.kind == "code" for ex in chapter.exercises):
        raise ValueError(f"{chapter.stem} has no coding exercise: nothing for an autograder to grade")
    torch_version = torch.__version__.split("+")[0]
    config = {"chapter": f"{chapter.number:02d}", "chapter_path": chapter.path, "title": chapter.title,
              "container_only": bool(container_only), "timeout": float(timeout),
              "check_timeout": float(check_timeout), "memory_mb": int(memory_mb), "torch": torch_version}
    files = {"setup.sh": SETUP_SH.replace("@TORCH@", torch_version).encode(),
             "run_autograder": RUN_AUTOGRADER.encode(),
             "gradescope.json": (json.dumps(config, indent=1, sort_keys=True) + "\n").encode()}
    files.update(_course_files(course, chapter))
    files.update(_tiktoken_files())
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"gradescope-ch{chapter.number:02d}.zip"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            mode = 0o755 if name in ("setup.sh", "run_autograder") else 0o644
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, files[name])
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.chmod(0o644)
    os.replace(tmp, target)
    return target


# ------------------------------------------------------------------------------------------------
# Inside the container
# ------------------------------------------------------------------------------------------------


def _load(source: Path):
    from .course import Course

    config = json.loads((source / "gradescope.json").read_text(encoding="utf-8"))
    course = Course.load(source / "course")
    return config, course


def _options(config: dict, unsafe: bool):
    from .grade import GradeOptions
    from .sandbox import Limits

    return GradeOptions(chapter=config["chapter"], timeout=config.get("timeout", 600.0),
                        check_timeout=config.get("check_timeout", 30.0), quiet=True, keep_executed=False,
                        unsafe=unsafe, limits=Limits(memory_mb=config.get("memory_mb", 6144)))


def _isolation(course) -> str:
    """"" when the sandbox works here, else why not."""
    from .sandbox import IsolationError, check_isolation

    with tempfile.TemporaryDirectory(prefix="ab-isolation-") as scratch:
        try:
            check_isolation(course.root, Path(scratch))
        except IsolationError as err:
            return str(err)
    return ""


def prepare(source: Path) -> Path:
    """Compute the chapter's reference values into ``source/cache`` (``setup.sh`` does it once)."""
    from .grade import hidden_tests_of, reference_run_options, reference_values
    from .runner import RunOptions
    from .submissions import pick_chapter

    config, course = _load(source)
    chapter = pick_chapter(course, config["chapter"])
    problem = _isolation(course)
    if problem and not config.get("container_only"):
        raise SystemExit(f"prepare: {problem}")
    tests = hidden_tests_of(course, chapter)
    labels = [ex.label for ex in chapter.exercises
              if ex.kind == "code" and course.points_for(ex.label) > 0 and tests.get(ex.label)]
    options = _options(config, unsafe=bool(problem))
    run_options = reference_run_options(RunOptions(
        timeout=options.timeout, call_timeout=options.check_timeout, unsafe=options.unsafe,
        limits=options.limits, hidden_paths=[course.hidden_dir.resolve()]))
    out = source / "cache"
    _, seconds, cached = reference_values(course, chapter, tests, labels, run_options, out)
    print(f"reference values of {chapter.stem}: " + ("already cached" if cached else f"computed in {seconds:.1f} s"))
    return out


def _pick_notebook(submission: Path, course, chapter) -> tuple:
    """The submitted notebook to grade and a note about the choice ("" when there was one)."""
    from .submissions import recognise_chapter

    found = sorted(p for p in submission.rglob("*.ipynb") if p.is_file() and not p.is_symlink()
                   and not any(part.startswith(".") for part in p.relative_to(submission).parts))
    if not found:
        return None, ""
    if len(found) == 1:
        return found[0], ""
    import nbformat

    from .submissions import notebook_text

    for path in found:
        try:
            nb = nbformat.reads(notebook_text(path.read_bytes()), as_version=4)
        except Exception:  # noqa: BLE001 - not a notebook: try the next one
            continue
        hit = recognise_chapter(nb, course)
        if hit is not None and hit.path == chapter.path:
            break
    else:
        path = found[0]
    names = ", ".join(p.name for p in found)
    return path, f"You uploaded {len(found)} notebooks ({names}); {path.name} was graded."


def results_for(record: dict, course, chapter, tests, title: str, note: str = "") -> dict:
    """Gradescope's results.json from a grading record: one test per coding exercise."""
    from .feedback import clean, exercise_reports

    coding = [ex for ex in chapter.exercises if ex.kind == "code" and course.points_for(ex.label) > 0]
    written = [ex for ex in chapter.exercises if ex.kind == "written"]
    reports = exercise_reports(record, coding, tests, course.points_for)
    out_tests = []
    for report in reports:
        lines = [f"{'....' if s == 'WAIT' else s}  {name}" + (f": {hint}" if hint else "")
                 for s, name, hint in report.lines]
        if report.self_check.strip():
            lines += ["", "Your self-check, as it ran when the notebook was graded:", report.self_check.strip()]
        out_tests.append({"name": f"Exercise {report.number}: {report.title}", "number": report.number,
                          "score": report.points or 0.0, "max_score": report.max,
                          "status": "passed" if (report.points or 0) >= report.max > 0 else "failed",
                          "output": "\n".join(lines), "visibility": "visible"})
    score = round(sum(t["score"] for t in out_tests), 2)
    top = sum(t["max_score"] for t in out_tests)
    parts = [f"{title}: {score:g} of {top:g} points from the autograder."]
    if record.get("error"):
        parts.append(clean(record["error"]))
    if note:
        parts.append(note)
    flags = list(record.get("flags") or [])
    if flags:
        parts.append("Noticed: " + "; ".join(flags))
    if written:
        numbers = ", ".join(ex.number for ex in written)
        parts.append(f"The written exercises ({numbers}) are graded by hand.")
    return {"score": score, "output": "\n\n".join(parts), "visibility": "visible",
            "stdout_visibility": "hidden", "tests": out_tests}


def _write_results(path: Path, results: dict) -> None:
    from .report import atomic_write

    atomic_write(path, json.dumps(results, indent=1) + "\n")


def _zero(course, chapter, tests, title: str, why: str) -> dict:
    record = {"student": "", "error": why, "flags": []}
    return results_for(record, course, chapter, tests, title)


class GraderFailed(RuntimeError):
    """The grader failed on the notebook (not the student's doing): no results, no score."""


def run(source: Path, submission: Path, results: Path) -> dict:
    """Grade the notebook in ``submission`` and write ``results`` (Gradescope's results.json)."""
    from .grade import grade_folder, hidden_tests_of
    from .report import plain_title
    from .submissions import pick_chapter, record_name

    started = time.monotonic()
    config, course = _load(source)
    chapter = pick_chapter(course, config["chapter"])
    tests = hidden_tests_of(course, chapter)
    title = plain_title(chapter.title or chapter.stem)
    notebook, note = _pick_notebook(Path(submission), course, chapter)
    if notebook is None:
        outcome = _zero(course, chapter, tests, title, "No .ipynb file in your submission: upload your notebook "
                        "(in Colab: File > Download > Download .ipynb).")
        _write_results(results, outcome)
        return outcome
    problem = _isolation(course)
    if problem and not config.get("container_only"):
        print(f"ISOLATION: {problem}\nThe bundle refuses to run students' code without its sandbox. "
              "Rebuild it with `attention-book gradescope --container-only` to rely on Gradescope's "
              "per-submission container alone (read the For instructors page first).", flush=True)
        outcome = _zero(course, chapter, tests, title, "The autograder could not isolate your notebook on this "
                        "server, so it did not run it. Your instructor can see why; nothing is wrong with your file.")
        _write_results(results, outcome)
        return outcome
    with tempfile.TemporaryDirectory(prefix="ab-gradescope-") as scratch:
        scratch = Path(scratch)
        folder, out = scratch / "submissions", scratch / "out"
        folder.mkdir()
        name = notebook.name if notebook.name.endswith(".ipynb") else notebook.name + ".ipynb"
        shutil.copyfile(notebook, folder / name)
        cached = source / "cache" / ".cache"
        if cached.is_dir():
            shutil.copytree(cached, out / ".cache")
        report = grade_folder(course, folder, out, _options(config, unsafe=bool(problem)))
        record = json.loads((out / "records" / record_name(name)).read_text(encoding="utf-8"))
    if record.get("grader_error"):
        raise GraderFailed(record["grader_error"])
    record["student"] = name[:-6]
    outcome = results_for(record, course, chapter, tests, title, note)
    outcome["execution_time"] = round(time.monotonic() - started)
    _write_results(results, outcome)
    print(f"graded {name}: {outcome['score']:g} points in {time.monotonic() - started:.1f} s "
          f"(reference values {'cached' if report.references_cached else 'computed'}; "
          f"{'container only' if problem else 'sandboxed'})", flush=True)
    return outcome


def main(argv: Optional[List[str]] = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m attention_book.instructor.gradescope",
                                     description="the commands setup.sh and run_autograder call")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="compute the chapter's reference values once")
    p.add_argument("--source", type=Path, required=True)
    r = sub.add_parser("run", help="grade the submission and write results.json")
    r.add_argument("--source", type=Path, required=True)
    r.add_argument("--submission", type=Path, required=True)
    r.add_argument("--results", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "prepare":
        prepare(args.source)
        return 0
    try:
        run(args.source, args.submission, args.results)
    except Exception as err:  # noqa: BLE001 - the grader's failure: no score (never a 0), a non-zero exit
        import traceback

        traceback.print_exc()
        print(f"the autograder failed on this submission ({type(err).__name__}: {err}); no score was written: "
              "rerun the submission once the cause is fixed", flush=True)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
