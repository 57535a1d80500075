"""``attention-book grade FOLDER --chapter NN``: score every submitted notebook of one chapter.

Points are decided here, in the grader's process, never in a student's kernel:

1. before any student code runs, the grader loads **only the graded chapter's** hidden tests
   (``instructor/hidden_tests/chNN.py``) and runs the chapter's own notebook (the solution, trusted)
   in a sandboxed kernel; every hidden test runs against it and must pass (else grading stops: an
   instructor bug), and the reference values the tests ask for are kept;
2. each submission is rebuilt on the student release (:mod:`.planning`: changed course cells are
   restored and flagged) and runs in its own sandbox (:mod:`.sandbox`, :mod:`.runner`); after an
   exercise's self-check cell the grader's tests ask the kernel for the answers' values on inputs
   they choose and compare them with the references (:mod:`.hidden`);
3. :mod:`.scoring` turns the test results into points with the grader's own weights; records,
   ``grades.csv`` and ``summary.md`` are written by the grader only (:mod:`.report`).

A record ``records/<file name>.json`` per submission (written atomically) lets an interrupted run
continue: a rerun skips files whose record names the same file, hash and grader version.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import quote

from .course import Course
from .hidden import HiddenTest, load_hidden_tests
from .markup import Chapter, Exercise
from .planning import Plan, PlanRefused, plan_submission
from .references import ReferenceCache, compute_references, run_tests
from .report import CSV_COLUMNS, atomic_write, read_grades, write_outputs
from .runner import RunOptions, run_notebook
from .sandbox import IsolationError, Limits, check_isolation
from .scoring import score_exercise
from .submissions import (Submission, display_name, list_submissions, pick_chapter, read_notebook, recognise_chapter,
                          record_name, redact_paths)

__all__ = ["GradeOptions", "GradeReport", "grade_folder", "score_exercise", "read_grades", "CSV_COLUMNS",
           "hidden_tests_of", "run_tests", "ReferenceCache"]

RECORD_VERSION = 3


@dataclass
class GradeOptions:
    chapter: Optional[str] = None  # required: "03", a notebook stem or path
    timeout: float = 120.0  # seconds for the notebook's cells
    check_timeout: float = 30.0  # seconds for one call of a hidden test
    tests_timeout: float = 120.0  # seconds for all hidden-test calls of one notebook together
    jobs: int = 1
    force: bool = False
    keep_executed: bool = True
    max_output_chars: int = 20_000
    max_messages: int = 2_000
    quiet: bool = False
    unsafe: bool = False  # run without the sandbox (the instructor's explicit choice)
    limits: Limits = field(default_factory=Limits)
    keep_all_outputs: bool = False  # executed copies keep outputs of cells run after the hidden tests began
    worker_memory_mb: int = 3072  # address space of the process reading one submission's replies
    isolate_workers: bool = True  # read each submission in a worker process (killed at its deadline)


@dataclass
class GradeReport:
    out: Path
    students: List[str] = field(default_factory=list)
    graded: List[str] = field(default_factory=list)
    skipped: List[str] = field(default_factory=list)  # record reused
    skipped_files: List[Tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    reference_seconds: float = 0.0
    csv_path: Optional[Path] = None
    summary_path: Optional[Path] = None
    modified: List[str] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# Hidden tests, reference values
# ------------------------------------------------------------------------------------------------


def hidden_tests_of(course: Course, chapter: Chapter) -> Dict[str, List[HiddenTest]]:
    """The graded chapter's hidden tests only (``chNN.py``; none: an empty dict)."""
    path = course.hidden_dir / f"ch{chapter.number:02d}.py" if chapter.number is not None else None
    if path is None or not path.is_file():
        return {}
    return load_hidden_tests(path)


# ------------------------------------------------------------------------------------------------
# One submission
# ------------------------------------------------------------------------------------------------


def grade_submission(sub: Submission, course: Course, chapter: Chapter, release_nb, labels: List[str],
                     tests: Dict[str, List[HiddenTest]], cache: ReferenceCache, options: RunOptions,
                     executed: Optional[Path]) -> dict:
    record: Dict[str, Any] = {"version": RECORD_VERSION, "file": sub.name, "sha256": sub.digest,
                              "chapter": chapter.path, "error": "", "flags": [], "answer_flags": {},
                              "zero": {}, "results": {}, "reasons": {}, "notes": {}, "stop": None}
    read_notebook(sub)
    if sub.error:
        record["error"] = sub.error
        return record
    found = recognise_chapter(sub.nb, course)
    if found is not None and found.path != chapter.path:
        record["error"] = (f"this is the notebook of {found.stem}, not of the assignment's chapter "
                           f"{chapter.stem}: 0 points")
        record["flags"].append(f"handed in {found.stem} for {chapter.stem}")
        return record
    try:
        plan: Plan = plan_submission(sub.nb, release_nb, chapter, labels)
    except PlanRefused as err:
        record["error"] = f"the notebook is too large to grade ({err}): 0 points"
        record["flags"].append(f"too large to grade: {err}")
        return record
    record["flags"] = list(plan.flags)
    record["answer_flags"] = plan.answer_flags
    record["notes"] = plan.notes
    for label in plan.package_import:
        record["zero"][label] = "imports the course package (attention_book): write your own"
    for label, reason in plan.zero.items():
        record["zero"].setdefault(label, reason)

    def on_point(point_labels, session) -> None:
        for label in point_labels:
            session.source = plan.sources.get(label, "")
            reference = ReferenceCache.Lookup(cache, "")
            record["results"][label] = run_tests(tests.get(label, []), session, reference)

    result = run_notebook(plan.cells, plan.points, on_point, options, course.root)
    record["stop"] = result.stop
    record["cell_errors"] = result.cell_errors
    record["seconds"] = result.seconds
    record["calls"] = result.calls
    record["sandbox_peak_mb"] = result.memory_peak_mb
    for flag in result.flags:  # flooded outputs, replies refused, memory limit reached
        if flag not in record["flags"]:
            record["flags"].append(flag)
    if result.escaped:
        record["flags"].append(f"{len(result.escaped)} process(es) outlived the sandbox and were killed")
    for label in labels:
        if label not in record["results"]:
            record["reasons"][label] = f"not evaluated: {result.stop}" if result.stop else "not evaluated"
    _redact(record, {"course": course.root, "home": Path.home(), "tmp": tempfile.gettempdir(),
                     "grades": executed.parent if executed is not None else None})
    if executed is not None:
        import nbformat

        nb = nbformat.v4.new_notebook()
        nb.cells = plan.cells
        atomic_write(executed / quote(os.fsencode(sub.name), safe="-_."), nbformat.writes(nbformat.from_dict(nb)))
    return record


def _redact(value, paths):
    """Every string of a record with the grader's folders replaced by placeholders (in place)."""
    if isinstance(value, dict):
        for key, item in value.items():
            value[key] = redact_paths(item, paths) if isinstance(item, str) else (_redact(item, paths) or item)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            value[index] = redact_paths(item, paths) if isinstance(item, str) else (_redact(item, paths) or item)
    return None


def _worker_record(record: dict, sub: Submission, chapter: Chapter, options: RunOptions) -> dict:
    """A worker's record; a worker that died, ran out of memory or passed its deadline: 0, flagged."""
    problem = record.get("worker_error")
    if not problem:
        return record
    from .worker import hard_deadline

    why = {
        "deadline": (f"the notebook was stopped at the grader's hard time limit ({hard_deadline(options):g} s): "
                     "0 points", "ran past the grader's hard time limit (stopped from outside)"),
        "memory": ("the grader's memory limit for reading this notebook was reached: 0 points",
                   "its replies took the grader past its memory limit"),
    }.get(problem, (f"the autograder failed on this notebook ({problem}: {record.get('detail', '')}): 0 points",
                    f"the grader's worker {problem}"))
    out = {"version": RECORD_VERSION, "file": sub.name, "sha256": sub.digest, "chapter": chapter.path,
           "error": why[0], "flags": [why[1]], "answer_flags": {}, "zero": {}, "results": {}, "reasons": {},
           "notes": {}, "stop": None, "seconds": record.get("seconds", 0)}
    if problem == "crash":
        out["retry"] = True
    return out


def rows_for(record: dict, course: Course, exercises: List[Exercise], tests) -> Tuple[List[List[str]], dict]:
    rows = []
    flags = list(record.get("flags") or [])
    got = top = 0.0
    for ex in exercises:
        max_points = course.points_for(ex.label)
        answer_flags = (record.get("answer_flags") or {}).get(ex.label, [])
        if record.get("error"):
            points, message = 0.0, record["error"]
        else:
            points, message = score_exercise(
                (record.get("results") or {}).get(ex.label), tests.get(ex.label, []), max_points,
                (record.get("reasons") or {}).get(ex.label, ""), (record.get("notes") or {}).get(ex.label, ""),
                (record.get("zero") or {}).get(ex.label, ""))
        got, top = got + points, top + max_points
        row_flags = "; ".join(flags + [f"{ex.display()} answer {f}" for f in answer_flags])
        rows.append([record["student"], ex.label, ex.display(), f"{points:g}", f"{max_points:g}", message, row_flags])
    all_flags = flags + [f"{ex.display()} answer {f}" for ex in exercises
                         for f in (record.get("answer_flags") or {}).get(ex.label, [])]
    note = record.get("error") or record.get("stop") or ""
    return rows, {"student": record["student"], "points": round(got, 2), "max": top, "note": note,
                  "flags": all_flags}


# ------------------------------------------------------------------------------------------------
# The folder
# ------------------------------------------------------------------------------------------------


def grade_folder(course: Course, folder: Path, out: Path, options: Optional[GradeOptions] = None) -> GradeReport:
    """Grade every notebook in ``folder`` as ``options.chapter`` into ``out``."""
    import nbformat

    from .release import release_notebook

    options = options or GradeOptions()
    started = time.monotonic()
    folder, out = Path(folder).resolve(), Path(out).resolve()
    if out == folder or folder in out.parents or out in folder.parents:
        raise ValueError(f"--out {out} and the submissions folder {folder} must not contain each other")
    if not options.chapter:
        raise ValueError("--chapter is required: the chapter this assignment is about (e.g. --chapter 03); "
                         "a notebook of another chapter then scores 0 instead of being graded as its own")
    chapter = pick_chapter(course, options.chapter)
    run_options = RunOptions(timeout=options.timeout, call_timeout=options.check_timeout,
                             tests_timeout=options.tests_timeout,
                             max_output_chars=options.max_output_chars, max_messages=options.max_messages,
                             unsafe=options.unsafe, limits=options.limits,
                             hidden_paths=[folder, out, course.hidden_dir.resolve(),
                                           course.points_file.resolve().parent],
                             keep_all_outputs=options.keep_all_outputs, worker_memory_mb=options.worker_memory_mb)
    out.mkdir(parents=True, exist_ok=True)
    if not options.unsafe:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="ab-isolation-") as scratch:
            try:
                check_isolation(course.root, Path(scratch))
            except IsolationError as err:
                raise IsolationError(f"{err}. Grading runs students' code: it refuses to run without isolation "
                                     "unless you pass --unsafe (only for notebooks you trust)") from None
    tests = hidden_tests_of(course, chapter)
    exercises = [ex for ex in chapter.exercises if course.points_for(ex.label) > 0]
    labels = [ex.label for ex in exercises if tests.get(ex.label)]
    subs, skipped_files = list_submissions(folder)
    report = GradeReport(out, students=[s.name for s in subs], skipped_files=skipped_files)
    # the course's own notebook is trusted: all its tests together may take longer
    reference_options = dataclasses.replace(run_options, tests_timeout=max(600.0, options.tests_timeout),
                                            keep_all_outputs=True, slot="reference")
    cache, report.reference_seconds = compute_references(course, chapter, tests, labels, reference_options)
    cache_bytes = cache.to_bytes()
    hidden_path = course.hidden_dir / f"ch{chapter.number:02d}.py" if chapter.number is not None else None
    source_nb = nbformat.read(str(course.root / chapter.path), as_version=4)
    release_nb = release_notebook(source_nb, chapter, course.context())
    records_dir = out / "records"
    records_dir.mkdir(parents=True, exist_ok=True)
    executed = out / "executed" if options.keep_executed else None
    lock = threading.Lock()
    records: Dict[str, dict] = {}
    slots = threading.local()
    counter = iter(range(1, 1 << 30))

    def jobs_slot() -> int:  # a name for each worker thread's sandboxes
        if not hasattr(slots, "number"):
            with lock:
                slots.number = next(counter)
        return slots.number

    def existing(sub: Submission) -> Optional[dict]:
        path = records_dir / record_name(sub.name)
        if options.force or not path.is_file() or path.is_symlink():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            return None
        if (not isinstance(record, dict) or record.get("file") != sub.name or record.get("sha256") != sub.digest
                or record.get("version") != RECORD_VERSION or record.get("chapter") != chapter.path
                or record.get("retry")):
            return None
        return record

    def write_all() -> None:
        rows, students = [], []
        for sub in subs:
            if sub.name in records:
                r, s = rows_for(records[sub.name], course, exercises, tests)
                rows += r
                students.append(s)
        report.csv_path, report.summary_path = write_outputs(
            out, f"{folder.name} ({chapter.stem})", rows, students, skipped_files, course.points_file.name)

    def grade_one(sub: Submission) -> None:
        record = existing(sub)
        reused = record is not None
        began = time.monotonic()
        if record is None:
            try:
                if options.isolate_workers:
                    from .worker import grade_isolated

                    record = grade_isolated(sub, course, chapter, release_nb, labels,
                                            hidden_path if hidden_path and hidden_path.is_file() else None,
                                            cache_bytes, dataclasses.replace(run_options, slot=f"job{jobs_slot()}"),
                                            executed)
                    record = _worker_record(record, sub, chapter, run_options)
                else:
                    record = grade_submission(sub, course, chapter, release_nb, labels, tests, cache, run_options,
                                              executed)
            except Exception as err:  # a grader bug or an odd notebook: 0 with the reason, graded again later
                record = {"version": RECORD_VERSION, "file": sub.name, "sha256": sub.digest,
                          "chapter": chapter.path, "error": f"the autograder failed: {type(err).__name__}: {err}",
                          "retry": True}
            if (record.get("stop") or "").startswith("the autograder could not run"):
                record["retry"] = True
            record["wall_seconds"] = round(time.monotonic() - began, 2)
        record["student"] = sub.student
        with lock:
            if not reused:
                atomic_write(records_dir / record_name(sub.name), json.dumps(record, indent=1, sort_keys=True) + "\n")
                report.graded.append(sub.name)
            else:
                report.skipped.append(sub.name)
            records[sub.name] = record
            write_all()
        if not options.quiet:
            _, summary = rows_for(record, course, exercises, tests)
            print(f"  {display_name(sub.name)}: {summary['points']:g}/{summary['max']:g} points "
                  f"({record.get('seconds', 0):.1f} s)" + (" [reused]" if reused else ""), file=sys.stderr, flush=True)

    if options.jobs > 1:
        with ThreadPoolExecutor(max_workers=options.jobs) as pool:
            list(pool.map(grade_one, subs))
    else:
        for sub in subs:
            grade_one(sub)
    for sub in subs:
        try:
            after = hashlib.sha256(sub.path.read_bytes()).hexdigest()
        except OSError:
            after = None
        if after != sub.digest:
            report.modified.append(sub.name)
    write_all()
    report.seconds = time.monotonic() - started
    return report
