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
continue: a rerun skips files whose record names the same file, hash, chapter and grader version.
Points are applied when the files are written, never stored in a record: a change of
``points.toml`` recomputes the totals without running any notebook. A record whose run was cut by
a time limit (its graded run, or the second run that shows its self-checks,
:func:`.feedback.complete_self_checks`) is graded again when that limit grows (``--timeout``,
``--tests-timeout``, ``--check-timeout``); one graded while that second run was turned off
(``self_check_rerun=False``) and that needed it is graded again when it is turned on. When the grader itself fails on a notebook (its sandbox does not start, its
worker crashes: not the student's doing) the notebook gets no points at all: it is left out of
``grades.csv`` and the gradebooks, listed in ``summary.md`` and :attr:`GradeReport.grader_errors`
(``attention-book grade`` exits with status 4), and graded again by the next run.

One output folder holds one assignment (``_build/grades/ch03/`` by default, see :func:`default_out`):
a marker file names its chapter, and grading another chapter into it is refused, so grading
chapter 5 never changes chapter 3's files. Besides ``grades.csv`` and ``summary.md`` the folder
gets ``gradebook.csv`` (+ ``gradebook-canvas.csv``, :mod:`.gradebook`), ``feedback/<student>.md``
and ``written/<label>.md`` (:mod:`.feedback`), and the reference values are kept in
``.cache/`` (:mod:`.reference_cache`), so a rerun with nothing changed takes seconds.
``options.student`` regrades one student; the other records are left as they are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from .course import Course
from .feedback import complete_self_checks, exercise_reports, feedback_markdown, written_answers, written_markdown
from .gradebook import MANUAL_FILE, ManualPoints, canvas_csv, gradebook_csv, manual_template, read_manual_points
from .hidden import HiddenTest, load_hidden_tests
from .markup import Chapter, Exercise, cell_text
from .planning import Plan, PlanRefused, plan_submission
from .reference_cache import cache_key, load_reference_cache, save_reference_cache
from .references import ReferenceCache, compute_references, run_tests
from .report import (CSV_COLUMNS, atomic_write, executed_notebook, plain_title, read_grades, write_if_changed,
                     write_outputs)
from .runner import COULD_NOT_RUN, RunOptions, run_notebook
from .sandbox import IsolationError, Limits, check_isolation, memory_isolation_warning
from .scoring import score_exercise
from .submissions import (Submission, display_name, file_name_part, list_submissions, matches_student, pick_chapter,
                          read_notebook, recognise_chapter, redact_paths)

__all__ = ["GradeOptions", "GradeReport", "grade_folder", "score_exercise", "read_grades", "CSV_COLUMNS",
           "hidden_tests_of", "run_tests", "ReferenceCache", "default_out", "MARKER"]

RECORD_VERSION = 6  # 6: the self-checks' second run (what it showed, whether it was off or cut by a limit)
#: the file that names the chapter an output folder holds (grading another chapter there is refused)
MARKER = ".attention-book-grades.json"


#: seconds for a notebook's cells unless the chapter sets its own (see :func:`time_budget`)
DEFAULT_TIMEOUT = 120.0


def time_budget(course: Course, chapter: Chapter) -> float:
    """Seconds a notebook of ``chapter`` may run its cells: the chapter notebook's
    ``metadata.attention_book.grading_seconds`` (chapter 9 trains a model for about a minute on a
    quiet CPU, so it asks for more), else :data:`DEFAULT_TIMEOUT`."""
    import nbformat

    meta = nbformat.read(str(course.root / chapter.path), as_version=4).metadata.get("attention_book", {})
    seconds = meta.get("grading_seconds")
    ok = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 < seconds < 3600
    return float(seconds) if ok else DEFAULT_TIMEOUT


def default_out(chapter: Chapter, base: Path = Path("_build/grades")) -> Path:
    """``_build/grades/ch03``: one folder per assignment (chapter)."""
    name = f"ch{chapter.number:02d}" if chapter.number is not None else chapter.stem
    return Path(base) / name


@dataclass
class GradeOptions:
    chapter: Optional[str] = None  # required: "03", a notebook stem or path
    timeout: Optional[float] = None  # seconds for the notebook's cells (None: the chapter's budget)
    check_timeout: float = 30.0  # seconds for one call of a hidden test
    tests_timeout: float = 120.0  # seconds for all hidden-test calls of one notebook together
    jobs: int = 1
    force: bool = False
    keep_executed: bool = True
    max_output_chars: int = 20_000
    max_messages: int = 2_000
    max_output_mb: int = 512  # output read from one cell before it is interrupted
    quiet: bool = False
    unsafe: bool = False  # run without the sandbox (the instructor's explicit choice)
    limits: Limits = field(default_factory=Limits)
    student: Optional[str] = None  # regrade this student only (file name, with or without .ipynb)
    manual: Optional[Path] = None  # manual points of the written exercises (default: OUT/manual-points.csv)
    reuse_references: bool = True  # keep the reference values in OUT/.cache between runs
    keep_all_outputs: bool = False  # executed copies keep outputs of cells run after the hidden tests began
    self_check_rerun: bool = True  # a second run without hidden tests for self-checks the graded run hid
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
    references_cached: bool = False  # the reference values came from OUT/.cache
    not_graded: List[str] = field(default_factory=list)  # --student: others without an up-to-date record
    gradebook_path: Optional[Path] = None
    canvas_path: Optional[Path] = None
    feedback_dir: Optional[Path] = None
    written_dir: Optional[Path] = None
    manual_path: Optional[Path] = None  # the manual points file read (or the template written)
    #: (file name, why) of notebooks the grader itself failed on: not graded, no points written
    grader_errors: List[Tuple[str, str]] = field(default_factory=list)


# ------------------------------------------------------------------------------------------------
# Hidden tests, reference values
# ------------------------------------------------------------------------------------------------


def hidden_tests_of(course: Course, chapter: Chapter) -> Dict[str, List[HiddenTest]]:
    """The graded chapter's hidden tests only (``chNN.py``; none: an empty dict)."""
    path = course.hidden_file(chapter)
    if path is None or not path.is_file():
        return {}
    return load_hidden_tests(path)


# ------------------------------------------------------------------------------------------------
# One submission
# ------------------------------------------------------------------------------------------------


def _limits(options: RunOptions) -> Dict[str, float]:
    """The time limits a record ran under (a timed-out record is graded again when one grows)."""
    return {"timeout": options.timeout, "tests_timeout": options.tests_timeout, "call_timeout": options.call_timeout}


def _record_head(sub: Submission, chapter: Chapter) -> Dict[str, Any]:
    """The fields that name a record's submission (a rerun reuses a record whose fields still match)."""
    return {"version": RECORD_VERSION, "file": sub.name, "sha256": sub.digest, "chapter": chapter.path}


def grade_submission(sub: Submission, course: Course, chapter: Chapter, release_nb, labels: List[str],
                     tests: Dict[str, List[HiddenTest]], cache: ReferenceCache, options: RunOptions,
                     executed: Optional[Path]) -> dict:
    record: Dict[str, Any] = {**_record_head(sub, chapter), "error": "", "flags": [], "answer_flags": {},
                              "zero": {}, "results": {}, "reasons": {}, "notes": {}, "stop": None,
                              "self_check": {}, "written": {}, "limits": _limits(options), "timed_out": False}
    read_notebook(sub)
    if sub.error:
        record["error"] = sub.error
        return record
    written = [ex.label for ex in chapter.exercises if ex.kind == "written"]
    record["written"] = written_answers(sub.nb, written, release_nb)
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

    # "write your own", decided where the notebook cannot interfere: its answers again in a fresh
    # sandbox with only the student's cells, rule-governed calls replayed here (clean_room); its
    # kernel starts now, beside this run, and waits for this run's results
    from .clean_room import OwnWorkRun

    course_texts = [c.get("source", "") for c in plan.cells
                    if (c.metadata.get("attention_book_grader") or {}).get("role") not in ("answer", "added")]
    own_work = OwnWorkRun(plan, labels, tests, cache, options, course.root, chapter.number, course_texts).start()
    try:
        result = run_notebook(plan.cells, plan.points, on_point, options, course.root)
    except BaseException:
        own_work.cancel()
        raise
    record["stop"] = result.stop
    record["timed_out"] = result.timed_out
    if (result.stop or "").startswith(COULD_NOT_RUN):  # the sandbox or the grader failed, not the notebook
        record["grader_error"] = result.stop
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
    own_work.finish(record)
    # every self-check's output for the feedback; a second run without hidden tests where needed
    complete_self_checks(record, plan.cells, result, tests, course.points_for, options, course.root)
    _redact(record, {"course": course.root, "home": Path.home(), "tmp": tempfile.gettempdir(),
                     "grades": executed.parent if executed is not None else None})
    if executed is not None:  # outputs kept as text and images only (report.executed_notebook)
        atomic_write(executed / sub.executed_file, executed_notebook(plan.cells))
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
    }.get(problem, (f"the autograder failed on this notebook ({problem}: {record.get('detail', '')})",
                    f"the grader's worker {problem}"))
    out = {**_record_head(sub, chapter), "error": why[0], "flags": [why[1]], "answer_flags": {}, "zero": {},
           "results": {}, "reasons": {}, "notes": {}, "stop": None, "seconds": record.get("seconds", 0),
           "limits": _limits(options), "timed_out": problem == "deadline"}
    if problem not in ("deadline", "memory"):  # a crash or death of the grader's worker: not the notebook's doing
        out["grader_error"] = why[0]
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


def reference_values(course: Course, chapter: Chapter, tests, labels: List[str], run_options: RunOptions,
                     out: Path, reuse: bool = True, before_run=None) -> Tuple[ReferenceCache, float, bool]:
    """The chapter's reference values: from ``out/.cache`` when its key still matches (see
    :mod:`.reference_cache`), else computed (``before_run()`` first, e.g. the isolation check)
    and saved. Returns ``(cache, seconds of the reference run, taken from the cache)``."""
    key = cache_key(course, chapter, course.hidden_file(chapter), labels)
    if reuse:
        cache = load_reference_cache(out, key)
        if cache is not None:
            return cache, 0.0, True
    if before_run is not None:
        before_run()
    cache, seconds = compute_references(course, chapter, tests, labels, run_options)
    if reuse:
        save_reference_cache(out, key, cache)
    return cache, seconds, False


def _check_out_folder(out: Path, chapter: Chapter) -> None:
    """Refuse an output folder that holds another chapter's grades (never mix two assignments)."""
    marker = out / MARKER
    held = None
    if marker.is_file() and not marker.is_symlink():
        try:
            held = json.loads(marker.read_text(encoding="utf-8")).get("chapter")
        except (ValueError, AttributeError):
            held = None
    elif (out / "records").is_dir():  # a folder from before the marker: ask its records
        for path in sorted((out / "records").glob("*.json"))[:50]:
            try:
                held = json.loads(path.read_text(encoding="utf-8")).get("chapter") or held
            except (ValueError, OSError, AttributeError):
                continue
            if held:
                break
    if held and held != chapter.path:
        raise ValueError(f"--out {out} holds the grades of {held}; grading {chapter.path} there would "
                         f"replace them: choose another folder (the default is one per chapter, "
                         f"{default_out(chapter)})")


def _pick_student(subs: List[Submission], wanted: str) -> Submission:
    """The submission ``--student wanted`` names: its exact file name (any name the folder holds),
    with or without ``.ipynb``, or the name as grades.csv shows it; an exact file name wins."""
    for sub in subs:
        if wanted == sub.name:
            return sub
    for sub in subs:
        if matches_student(sub, wanted):
            return sub
    close = [display_name(s.name) for s in subs if wanted.strip().lower() in s.name.lower()][:5]
    raise ValueError(f"--student {display_name(wanted)!r}: no such submission in the folder"
                     + (f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else
                        ": give the file name, with or without .ipynb (quote it in the shell), e.g. "
                        "--student alice for alice.ipynb"))


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o755)  # readable by the instructor's group (the umask may say otherwise)
    return path


def reference_run_options(run_options: RunOptions) -> RunOptions:
    """How the course's own notebook runs for the reference values (``grade`` and Gradescope's
    ``setup.sh``): it is trusted, so all its hidden tests together may take longer."""
    return dataclasses.replace(run_options, tests_timeout=max(600.0, run_options.tests_timeout),
                               keep_all_outputs=True, slot="reference")


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
    _check_out_folder(out, chapter)
    run_options = RunOptions(timeout=options.timeout or time_budget(course, chapter),
                             call_timeout=options.check_timeout,
                             tests_timeout=options.tests_timeout,
                             max_output_chars=options.max_output_chars, max_messages=options.max_messages,
                             max_output_mb=options.max_output_mb,
                             unsafe=options.unsafe, limits=options.limits,
                             hidden_paths=[folder, out, course.hidden_dir.resolve(),
                                           course.points_file.resolve().parent],
                             keep_all_outputs=options.keep_all_outputs, worker_memory_mb=options.worker_memory_mb,
                             self_check_rerun=options.self_check_rerun)
    tests = hidden_tests_of(course, chapter)
    exercises = [ex for ex in chapter.exercises if ex.kind == "code" and course.points_for(ex.label) > 0]
    labels = [ex.label for ex in exercises if tests.get(ex.label)]
    written = [ex for ex in chapter.exercises if ex.kind == "written"]
    subs, skipped_files = list_submissions(folder)
    only = _pick_student(subs, options.student) if options.student else None
    manual_path = Path(options.manual) if options.manual else out / MANUAL_FILE
    manual = ManualPoints()
    if options.manual or manual_path.is_file():  # checked before any kernel runs: errors come first
        manual = read_manual_points(manual_path, [s.student for s in subs], written, course.points_for,
                                    course.points_file.name)
    report = GradeReport(out, students=[s.name for s in subs], skipped_files=skipped_files)
    _mkdir(out)
    write_if_changed(out / MARKER, json.dumps({"chapter": chapter.path, "title": chapter.title}, indent=1) + "\n")
    records_dir = _mkdir(out / "records")
    executed = _mkdir(out / "executed") if options.keep_executed else None
    title = plain_title(chapter.title or chapter.stem)
    hidden_path = course.hidden_file(chapter)
    isolation_checked = []
    # a record is reused only while the grader, the chapter, its hidden tests and points are unchanged
    grader_key = cache_key(course, chapter, hidden_path, labels)

    def ensure_isolation() -> None:
        if options.unsafe or isolation_checked:
            return
        with tempfile.TemporaryDirectory(prefix="ab-isolation-") as scratch:
            try:
                check_isolation(course.root, Path(scratch))
            except IsolationError as err:
                raise IsolationError(f"{err}. Grading runs students' code: it refuses to run without isolation "
                                     "unless you pass --unsafe (only for notebooks you trust)") from None
        warning = memory_isolation_warning()
        if warning and not options.quiet:
            print(f"WARNING: {warning}", file=sys.stderr, flush=True)
        isolation_checked.append(True)

    def existing(sub: Submission) -> Optional[dict]:
        path = records_dir / sub.record_file
        if (options.force and (only is None or sub is only)) or not path.is_file() or path.is_symlink():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            return None
        if (not isinstance(record, dict) or record.get("retry") or record.get("grader_error")
                or record.get("grader") != grader_key
                or any(record.get(key) != value for key, value in _record_head(sub, chapter).items())):
            return None
        if record.get("self_check_rerun_off") and run_options.self_check_rerun:
            return None  # graded without the second run some self-checks needed: now it is wanted
        if record.get("timed_out") or record.get("self_check_rerun_timed_out"):  # graded again when a limit grows
            ran = record.get("limits") if isinstance(record.get("limits"), dict) else {}
            if any(not isinstance(ran.get(key), (int, float)) or value > ran[key]
                   for key, value in _limits(run_options).items()):
                return None
        return record

    ensure_isolation()  # refused at once, even when every record is reused (the instructor learns it now)
    records: Dict[str, dict] = {}
    to_grade = []
    for sub in subs:
        record = None if sub is only else existing(sub)
        if record is not None:
            record["student"] = sub.student
            records[sub.name] = record
        elif only is None or sub is only:
            to_grade.append(sub)
        else:
            report.not_graded.append(sub.name)  # --student: the others keep their records, if any

    cache: Optional[ReferenceCache] = None
    cache_bytes = b""
    if to_grade:
        reference_options = reference_run_options(run_options)
        cache, report.reference_seconds, report.references_cached = reference_values(
            course, chapter, tests, labels, reference_options, out, options.reuse_references, ensure_isolation)
        cache_bytes = cache.to_bytes()
    source_nb = nbformat.read(str(course.root / chapter.path), as_version=4)
    release_nb = release_notebook(source_nb, chapter, course.context())
    lock = threading.Lock()
    slots = threading.local()
    counter = iter(range(1, 1 << 30))

    def jobs_slot() -> int:  # a name for each worker thread's sandboxes
        if not hasattr(slots, "number"):
            with lock:
                slots.number = next(counter)
        return slots.number

    def write_all() -> None:
        rows, students, failed = [], [], []
        for sub in subs:
            if sub.name in records and records[sub.name].get("grader_error"):
                failed.append((sub.name, "the autograder failed on this notebook, so it has no points yet "
                                         f"(not the student's doing; the next run grades it again): "
                                         f"{records[sub.name]['grader_error']}"[:600]))
            elif sub.name in records:
                r, s = rows_for(records[sub.name], course, exercises, tests)
                rows += r
                students.append(s)
        report.grader_errors = failed
        report.csv_path, report.summary_path = write_outputs(
            out, f"{title} ({folder.name})", rows, students, list(skipped_files) + failed,
            course.points_file.name, not_graded=report.not_graded)

    def grade_one(sub: Submission) -> None:
        ensure_isolation()
        began = time.monotonic()
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
        except Exception as err:  # a grader bug: no points, reported, graded again by the next run
            record = {**_record_head(sub, chapter), "error": f"the autograder failed: {type(err).__name__}: {err}",
                      "grader_error": f"the autograder failed: {type(err).__name__}: {err}"[:500]}
        if (record.get("stop") or "").startswith(COULD_NOT_RUN):
            record["grader_error"] = record["stop"]
        record["wall_seconds"] = round(time.monotonic() - began, 2)
        record["student"] = sub.student
        record["grader"] = grader_key
        with lock:
            atomic_write(records_dir / sub.record_file, json.dumps(record, indent=1, sort_keys=True) + "\n")
            report.graded.append(sub.name)
            records[sub.name] = record
            write_all()
        if not options.quiet and record.get("grader_error"):
            print(f"  {display_name(sub.name)}: NOT GRADED, the autograder failed: {record['grader_error']}",
                  file=sys.stderr, flush=True)
        elif not options.quiet:
            _, summary = rows_for(record, course, exercises, tests)
            print(f"  {display_name(sub.name)}: {summary['points']:g}/{summary['max']:g} points "
                  f"({record.get('seconds', 0):.1f} s)", file=sys.stderr, flush=True)

    report.skipped = [sub.name for sub in subs if sub.name in records]
    if not options.quiet and report.skipped:
        print(f"  {len(report.skipped)} of {len(subs)} already graded (records reused)", file=sys.stderr, flush=True)
    if options.jobs > 1 and len(to_grade) > 1:
        with ThreadPoolExecutor(max_workers=options.jobs) as pool:
            list(pool.map(grade_one, to_grade))
    else:
        for sub in to_grade:
            grade_one(sub)
    for sub in subs:
        try:
            after = hashlib.sha256(sub.path.read_bytes()).hexdigest()
        except OSError:
            after = None
        if after != sub.digest:
            report.modified.append(sub.name)
    write_all()
    _write_class_files(report, course, chapter, subs, records, exercises, written, tests, manual, manual_path,
                       release_nb, title)
    report.seconds = time.monotonic() - started
    return report


def _exercise_prompts(release_nb) -> Dict[str, str]:
    prompts = {}
    for cell in release_nb.get("cells", []):
        meta = (cell.get("metadata") or {}).get("attention_book") or {}
        if meta.get("role") == "exercise":
            prompts[meta["exercise"]] = cell_text(cell)
    return prompts


class Column(NamedTuple):
    """A gradebook column: an exercise and its points."""

    label: str
    number: str
    max: float


def _write_class_files(report: GradeReport, course: Course, chapter: Chapter, subs: List[Submission],
                       records: Dict[str, dict], exercises: List[Exercise], written: List[Exercise], tests,
                       manual: ManualPoints, manual_path: Path, release_nb, title: str) -> None:
    """gradebook.csv (+ Canvas), feedback/<student>.md, written/<label>.md and the manual template."""
    out = report.out
    graded = [sub for sub in subs if sub.name in records and not records[sub.name].get("grader_error")]
    columns = [Column(ex.label, ex.number, course.points_for(ex.label)) for ex in chapter.exercises
               if course.points_for(ex.label) > 0 and (ex.kind == "written" or ex in exercises)]
    entries = []
    feedback_dir = _mkdir(out / "feedback")
    for sub in graded:
        record = records[sub.name]
        reports = exercise_reports(record, exercises + written, tests, course.points_for, manual)
        entries.append({"student": sub.student, "points": {r.label: r.points for r in reports}})
        notes = [record["error"]] if record.get("error") else []
        notes += [f for f in record.get("flags") or []]
        if record.get("stop") and not record.get("error"):
            notes.append(f"the run stopped early: {record['stop']}")
        write_if_changed(feedback_dir / sub.feedback_file,
                         feedback_markdown(sub.student, title, reports, notes))
    report.feedback_dir = feedback_dir
    report.gradebook_path = out / "gradebook.csv"
    write_if_changed(report.gradebook_path, gradebook_csv(entries, columns))
    report.canvas_path = out / "gradebook-canvas.csv"
    write_if_changed(report.canvas_path, canvas_csv(entries, columns, title))  # the total, written points too
    if written:
        written_dir = _mkdir(out / "written")
        prompts = _exercise_prompts(release_nb)
        for ex in written:
            items = []
            for sub in graded:
                record = records[sub.name]
                items.append({"student": sub.student, "answer": (record.get("written") or {}).get(ex.label, ""),
                              "points": manual.get(sub.student, ex.label),
                              "comment": manual.comments.get((sub.student, ex.label), "")})
            write_if_changed(written_dir / file_name_part(ex.label, ".md"),
                             written_markdown(ex, prompts.get(ex.label, ""), items, course.points_for,
                                              manual_path.name))
        report.written_dir = written_dir
        template = out / MANUAL_FILE
        if not template.exists():  # the instructor's file once written: never replaced
            atomic_write(template, manual_template([s.student for s in graded], written, course.points_for))
    report.manual_path = manual_path if manual.path is not None or (out / MANUAL_FILE).exists() else None
