"""``attention-book grade FOLDER``: run every submitted notebook and score its exercises.

One notebook per student (student name = file stem). For each submission:

1. the file is hashed and read (never written); a file that is not a notebook scores 0 with the
   reason;
2. its chapter is recognised from the exercise labels it contains (or ``--chapter``);
3. a copy runs in its own temporary folder and kernel (nbclient, errors allowed, a time limit for
   the whole notebook, output capped);
4. right after each exercise's self-check cell (or its answer cell, or at the end), the course's
   own self-check cell for that exercise and the instructor's hidden tests run in the same kernel
   (:mod:`attention_book.instructor.kernel_side`);
5. per exercise: points = max points x (tests passed / tests run), with the hints as the message.

Every graded student gets a record ``records/<student>.json`` (written atomically); ``grades.csv``
and ``summary.md`` are rebuilt from the records after each student. A rerun skips students whose
record matches the same file (sha256) unless ``force``: an interrupted run loses nothing.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .course import Course, collect_hidden_tests, hidden_test_files, natural_key
from .markup import LABEL_RE, NOT_IMPLEMENTED, Chapter, Exercise, cell_text, strip_solution

__all__ = ["GradeOptions", "GradeReport", "grade_folder", "score_exercise", "read_grades", "CSV_COLUMNS"]

CSV_COLUMNS = ["student", "exercise", "points", "max", "message"]
RECORD_VERSION = 1
TIMEOUT_ENAME = "AutograderTimeLimit"


@dataclass
class GradeOptions:
    timeout: float = 120.0  # seconds for the whole notebook (student cells)
    check_timeout: float = 60.0  # seconds for one exercise's self-check + hidden tests
    jobs: int = 1  # submissions graded in parallel
    force: bool = False  # regrade students that already have a record
    chapter: Optional[str] = None  # "01" or a notebook stem: skip recognition
    keep_executed: bool = True  # write executed copies to OUT/executed/ (outputs capped)
    max_output_chars: int = 20_000  # per cell, in the executed copy
    quiet: bool = False


@dataclass
class GradeReport:
    out: Path
    students: List[str] = field(default_factory=list)
    graded: List[str] = field(default_factory=list)  # graded in this run
    skipped: List[str] = field(default_factory=list)  # record reused
    seconds: float = 0.0
    csv_path: Optional[Path] = None
    summary_path: Optional[Path] = None
    modified: List[str] = field(default_factory=list)  # submissions whose hash changed (a bug)


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --------------------------------------------------------------------------------------------------
# Submissions
# --------------------------------------------------------------------------------------------------


@dataclass
class Submission:
    student: str
    path: Path
    digest: str
    nb: Optional[object] = None  # nbformat.NotebookNode
    error: str = ""  # why it is not a readable notebook
    chapter: Optional[Chapter] = None


def list_submissions(folder: Path) -> List[Submission]:
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder: pass the folder holding the submissions")
    files = sorted(
        (p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".") and not p.name.endswith("~")),
        key=lambda p: natural_key(p.name),
    )
    seen: Dict[str, int] = {}
    submissions = []
    for path in files:
        student = path.stem or path.name
        if student in seen:  # alice.ipynb and alice.txt: keep both, distinguishable
            student = path.name
        seen[student] = 1
        submissions.append(Submission(student, path, sha256(path)))
    return submissions


def read_notebook(sub: Submission) -> None:
    import nbformat

    try:
        raw = sub.path.read_bytes()
        text = raw.decode("utf-8")
        nb = nbformat.reads(text, as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("no list of cells")
        for cell in nb.cells:
            if not isinstance(cell, dict) or "cell_type" not in cell:
                raise ValueError("a cell without cell_type")
            cell.setdefault("metadata", {})
            if cell.cell_type == "code":
                cell.setdefault("outputs", [])
                cell["source"] = cell_text(cell)
        sub.nb = nb
    except UnicodeDecodeError:
        sub.error = "not a notebook: the file is not UTF-8 text"
    except Exception as err:  # JSON errors, nbformat errors, ...
        sub.error = f"not a notebook: {type(err).__name__}: {str(err)[:200]}"


def recognise_chapter(nb, course: Course) -> Optional[Chapter]:
    meta_source = (nb.get("metadata", {}).get("attention_book") or {}).get("source")
    for chapter in course.chapters:
        if meta_source == chapter.path:
            return chapter
    text = "\n".join(cell_text(c) for c in nb.get("cells", []))
    found = set(LABEL_RE.findall(text))
    best, best_hits = None, 0
    for chapter in course.chapters:
        hits = len(found & {ex.label for ex in chapter.exercises})
        if hits > best_hits:
            best, best_hits = chapter, hits
    return best


def pick_chapter(course: Course, wanted: str) -> Chapter:
    for chapter in course.chapters:
        if wanted in (chapter.path, chapter.stem) or chapter.stem.startswith(wanted) or (
            chapter.number is not None and wanted.isdigit() and int(wanted) == chapter.number
        ):
            return chapter
    names = ", ".join(c.stem for c in course.chapters)
    raise ValueError(f"--chapter {wanted!r} matches no chapter; choose one of: {names}")


# --------------------------------------------------------------------------------------------------
# Where to evaluate each exercise in a submission
# --------------------------------------------------------------------------------------------------


def _norm(line: str) -> str:
    return "".join(line.split())


@dataclass
class Plan:
    points: Dict[int, List[str]]  # cell index -> labels evaluated after that cell
    at_end: List[str]
    notes: Dict[str, str]  # label -> remark for the message (e.g. answer cell not found)
    checks: Dict[str, List[str]]  # label -> official self-check sources


def plan_evaluation(nb, chapter: Chapter, source_nb, labels: List[str]) -> Plan:
    """Decide after which cell of the submission each exercise is evaluated."""
    cells = nb["cells"]
    codes = [(i, cell_text(c)) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    meta = {}
    for i, c in enumerate(cells):
        info = c.get("metadata", {}).get("attention_book") or {}
        if isinstance(info, dict) and info.get("exercise"):
            meta[(info.get("exercise"), info.get("role"))] = i
    # lines that identify an exercise's answer cell: its release lines found nowhere else
    source_cells = source_nb["cells"]
    other_lines = Counter()
    for index, c in enumerate(source_cells):
        if c.get("cell_type") == "code" and index not in chapter.cell_exercise:
            other_lines.update({_norm(l) for l in cell_text(c).split("\n") if _norm(l)})
    plan = Plan(defaultdict(list), [], {}, {})
    for label in labels:
        ex = chapter.exercise(label)
        plan.checks[label] = [cell_text(source_cells[i]) for i in ex.check_cells]
        answer = meta.get((label, "answer"))
        check = meta.get((label, "check"))
        if answer is None and ex.answer_cells:
            marker = NOT_IMPLEMENTED.format(label=label).split("(", 1)[1][:20]
            for i, text in codes:
                if marker in text:
                    answer = i
                    break
        if answer is None and ex.answer_cells:
            release = strip_solution(cell_text(source_cells[ex.answer_cells[-1]]), label)
            wanted = {_norm(l) for l in release.split("\n") if _norm(l) and "NotImplementedError" not in l}
            wanted -= set(other_lines)
            best, best_score = None, 0.0
            for i, text in codes:
                have = {_norm(l) for l in text.split("\n")}
                score = len(wanted & have) / len(wanted) if wanted else 0.0
                if score > best_score:
                    best, best_score = i, score
            if best_score >= 0.5:
                answer = best
        if check is None and plan.checks[label]:
            key_lines = [_norm(l) for l in plan.checks[label][-1].split("\n") if _norm(l) and not l.strip().startswith("#")]
            if key_lines:
                key = key_lines[-1]
                for i, text in codes:
                    if key in _norm(text) and (answer is None or i > answer):
                        check = i
                        break
        if check is not None and (answer is None or check > answer):
            plan.points[check].append(label)
        elif answer is not None:
            plan.points[answer].append(label)
        else:
            plan.at_end.append(label)
            if ex.answer_cells:
                plan.notes[label] = "answer cell not found (deleted or renamed?): checked at the end"
    return plan


# --------------------------------------------------------------------------------------------------
# Running one submission
# --------------------------------------------------------------------------------------------------


def _client_class():
    from nbclient import NotebookClient
    from nbformat.v4 import new_output

    class CappedClient(NotebookClient):
        """Keeps at most ``max_output_chars`` of output per cell (a submission may print megabytes)."""

        max_output_chars = 20_000

        def output(self, outs, msg, display_id, cell_index):
            used = self._ab_used.get(cell_index, 0) if hasattr(self, "_ab_used") else 0
            if not hasattr(self, "_ab_used"):
                self._ab_used = {}
            content = msg.get("content", {})
            size = len(str(content.get("text", ""))) + sum(len(str(v)) for v in (content.get("data") or {}).values())
            self._ab_used[cell_index] = used + size
            if used + size > self.max_output_chars:
                if used <= self.max_output_chars:
                    outs.append(new_output("stream", name="stderr",
                                           text="\n[autograder: output truncated]\n"))
                return None
            return super().output(outs, msg, display_id, cell_index)

    return CappedClient


def _kernel_env(options: GradeOptions) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("ATTENTION_BOOK_STATIC", None)
    env["MPLBACKEND"] = "Agg"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if options.jobs > 1:
        for key in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[key] = "1"
    return env


def run_submission(sub: Submission, chapter: Chapter, labels: List[str], course: Course,
                   hidden_files: List[str], options: GradeOptions, executed_dir: Optional[Path]) -> dict:
    """Execute one notebook and evaluate its exercises; returns the raw results (never raises)."""
    import nbformat
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    started = time.monotonic()
    source_nb = nbformat.read(str(course.root / chapter.path), as_version=4)
    nb = sub.nb
    plan = plan_evaluation(nb, chapter, source_nb, labels)
    results: Dict[str, dict] = {}
    reasons: Dict[str, str] = {}
    stop: Optional[str] = None
    temp = Path(tempfile.mkdtemp(prefix="attention-book-grade-"))
    work, out_dir = temp / "work", temp / "results"
    work.mkdir()
    out_dir.mkdir()
    results_path = out_dir / "results.jsonl"
    shutil.copyfile(sub.path, work / sub.path.name)  # the student's files stay untouched
    client = _client_class()(
        nb,
        timeout=int(math.ceil(options.timeout)),
        allow_errors=True,
        interrupt_on_timeout=True,
        error_on_timeout={"ename": TIMEOUT_ENAME, "evalue": "time limit reached", "traceback": []},
        kernel_name="python3",
        record_timing=False,
        iopub_timeout=4,
        shutdown_kernel="immediate",
        resources={"metadata": {"path": str(work)}},
    )
    client.max_output_chars = options.max_output_chars
    evaluated: List[str] = []
    responsive = True
    running = 0  # the cell being executed (1-based, for messages)

    def evaluate(label: str, where: str) -> None:
        nonlocal responsive
        if not responsive:
            reasons[label] = "not evaluated: the kernel stopped responding"
            return
        code = (
            "__import__('attention_book.instructor.kernel_side', fromlist=['evaluate']).evaluate("
            f"get_ipython().user_ns, {label!r}, {plan.checks[label]!r}, {hidden_files!r}, "
            f"{str(results_path)!r}, {where!r})"
        )
        msg_id = client.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        client.timeout = int(math.ceil(options.check_timeout))
        reply = client.wait_for_reply(msg_id)
        evaluated.append(label)
        if reply is None:  # interrupted after check_timeout: is the kernel usable again?
            reasons[label] = f"the self-check ran past its time limit ({options.check_timeout:g} s)"
            probe = client.kc.execute("pass", silent=True, store_history=False, allow_stdin=False)
            client.timeout = 15
            responsive = client.wait_for_reply(probe) is not None

    try:
        with client.setup_kernel(env=_kernel_env(options), cwd=str(work), stderr=subprocess.DEVNULL):
            deadline = time.monotonic() + options.timeout
            for index, cell in enumerate(nb.cells):
                if cell.get("cell_type") == "code" and cell_text(cell).strip():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        stop = f"the notebook ran past its time limit ({options.timeout:g} s) before cell {index + 1}"
                        break
                    client.timeout = max(1, int(math.ceil(remaining)))
                    running = index + 1
                    try:
                        client.execute_cell(cell, index)
                    except CellTimeoutError:
                        stop = f"the notebook ran past its time limit ({options.timeout:g} s) in cell {index + 1}"
                    timed_out = any(o.get("ename") == TIMEOUT_ENAME for o in cell.get("outputs", []))
                    if timed_out or time.monotonic() > deadline:
                        stop = f"the notebook ran past its time limit ({options.timeout:g} s) in cell {index + 1}"
                for label in plan.points.get(index, []):
                    evaluate(label, f"after cell {index + 1}")
                if not responsive:
                    stop = stop or f"the kernel stopped responding after cell {index + 1}"
                if stop:
                    break
            if not stop:
                for label in plan.at_end:
                    evaluate(label, "at the end")
    except DeadKernelError:
        stop = stop or f"the kernel died in cell {running} (the code crashed, exited or ran out of memory)"
    except Exception as err:  # kernel failed to start, ...
        stop = stop or f"the autograder could not run the notebook: {type(err).__name__}: {err}"
    finally:
        if results_path.exists():
            for line in results_path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                results[entry["exercise"]] = entry
        if executed_dir is not None:
            try:
                executed_dir.mkdir(parents=True, exist_ok=True)
                nbformat.write(nb, str(executed_dir / f"{sub.student}.ipynb"))
            except Exception:
                pass
        shutil.rmtree(temp, ignore_errors=True)
    for label in labels:
        if label in results:
            continue
        if label not in reasons:
            reasons[label] = f"not evaluated: {stop}" if stop else "not evaluated"
    errors = [
        {"cell": i, "ename": o.get("ename"), "evalue": str(o.get("evalue"))[:200]}
        for i, c in enumerate(nb.cells) if c.get("cell_type") == "code"
        for o in c.get("outputs", []) if o.get("output_type") == "error"
    ]
    return {
        "results": results,
        "reasons": reasons,
        "notes": plan.notes,
        "stop": stop,
        "cell_errors": errors[:50],
        "seconds": round(time.monotonic() - started, 2),
    }


# --------------------------------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------------------------------


def score_exercise(result: Optional[dict], max_points: float, reason: str = "", note: str = "",
                   has_check: bool = True) -> Tuple[float, str]:
    """Points and message of one exercise from its raw result (see kernel_side.evaluate)."""
    def finish(points: float, message: str) -> Tuple[float, str]:
        if note:
            message = f"{message} ({note})"
        return round(points, 2), message[:600]

    if result is None:
        return finish(0.0, reason or "not evaluated")
    public = result.get("public")
    hidden = result.get("hidden") or []
    hints: List[str] = []
    total = passed = 0.0
    if public is not None:
        total += len(public["passed"]) + len(public["failed"])
        if not public.get("not_implemented"):
            passed += len(public["passed"])
        hints += [f"{name}: {hint}" for name, hint in public["failed"] if hint != "not implemented yet"]
    elif has_check:
        total += 1
        if result.get("public_error"):
            hints.append(result["public_error"])
    for test in hidden:
        total += test["weight"]
        if test["passed"]:
            passed += test["weight"]
        elif not test.get("not_implemented"):
            hints.append(f"hidden test '{test['name']}': {test['hint']}")
    hints += result.get("hidden_errors") or []
    not_implemented = (public is not None and public.get("not_implemented")) or (
        public is None and hidden and all(t.get("not_implemented") for t in hidden)
    )
    if result.get("interrupted"):
        hints.append("the self-check ran past its time limit")
    if not_implemented and passed == 0:
        return finish(0.0, "not implemented: replace `raise NotImplementedError(...)` with your code")
    if total == 0:
        return finish(0.0, "; ".join(hints) or reason or "no test ran")
    fraction = passed / total
    count = f"{passed:g}/{total:g} checks passed"
    if fraction == 1 and not hints:
        return finish(max_points, f"all {total:g} checks passed")
    return finish(max_points * fraction, count + ("; " + "; ".join(hints) if hints else ""))


def read_grades(csv_path: Path) -> Dict[Tuple[str, str], Tuple[float, float, str]]:
    """``grades.csv`` as ``{(student, exercise): (points, max, message)}``."""
    with open(csv_path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows or rows[0] != CSV_COLUMNS:
        raise ValueError(f"{csv_path} does not start with the header {','.join(CSV_COLUMNS)}")
    return {(r[0], r[1]): (float(r[2]), float(r[3]), r[4]) for r in rows[1:]}


def gradable_exercises(course: Course, chapter: Chapter) -> List[Exercise]:
    """Exercises that carry points (written exercises get 0 points and are graded by hand)."""
    return [ex for ex in chapter.exercises if course.points_for(ex.label) > 0]


def rows_for_record(record: dict, course: Course, hidden_index: Dict[str, list]) -> List[List[str]]:
    student = record["student"]
    chapter = next((c for c in course.chapters if c.path == record.get("chapter")), None)
    if chapter is None:
        return [[student, "-", "0", "0", record.get("error") or "chapter not recognised"]]
    rows = []
    run = record.get("run") or {}
    for ex in gradable_exercises(course, chapter):
        max_points = course.points_for(ex.label)
        if record.get("error"):
            points, message = 0.0, record["error"]
        elif not ex.check_cells and ex.label not in hidden_index:
            points, message = 0.0, "no automatic check for this exercise: grade it by hand"
        else:
            points, message = score_exercise(
                (run.get("results") or {}).get(ex.label), max_points,
                (run.get("reasons") or {}).get(ex.label, ""), (run.get("notes") or {}).get(ex.label, ""),
                has_check=bool(ex.check_cells),
            )
        rows.append([student, ex.label, f"{points:g}", f"{max_points:g}", message])
    return rows


def write_outputs(out: Path, records: List[dict], course: Course, hidden_index, folder: Path) -> Tuple[Path, Path]:
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    per_student: List[Tuple[str, float, float, str]] = []
    per_exercise: Dict[str, List[Tuple[float, float, str]]] = defaultdict(list)
    for record in records:
        rows = rows_for_record(record, course, hidden_index)
        writer.writerows(rows)
        got = sum(float(r[2]) for r in rows)
        top = sum(float(r[3]) for r in rows)
        note = record.get("error") or (record.get("run") or {}).get("stop") or ""
        per_student.append((record["student"], got, top, note))
        for row in rows:
            if row[1] != "-":
                per_exercise[row[1]].append((float(row[2]), float(row[3]), row[4]))
    csv_path, summary_path = out / "grades.csv", out / "summary.md"
    _atomic_write(csv_path, table.getvalue())
    lines = [f"# Grades for `{folder.name}`", "", f"{len(records)} submissions. Points per exercise: "
             f"`{course.points_file.name}`; details per exercise in `grades.csv`.", "",
             "| student | points | max | % | note |", "|---|---:|---:|---:|---|"]
    for student, got, top, note in per_student:
        percent = f"{100 * got / top:.0f}" if top else "-"
        note = " ".join(note.replace("|", "/").split())[:120]
        lines.append(f"| {student} | {got:g} | {top:g} | {percent} | {note} |")
    lines += ["", "| exercise | mean points | max | full marks | not implemented |", "|---|---:|---:|---:|---:|"]
    for label, entries in per_exercise.items():
        mean = sum(e[0] for e in entries) / len(entries)
        full = sum(1 for e in entries if e[0] >= e[1] > 0)
        missing = sum(1 for e in entries if e[2].startswith("not implemented"))
        lines.append(f"| {label} | {mean:.2f} | {entries[0][1]:g} | {full}/{len(entries)} | {missing} |")
    _atomic_write(summary_path, "\n".join(lines) + "\n")
    return csv_path, summary_path


# --------------------------------------------------------------------------------------------------
# The folder
# --------------------------------------------------------------------------------------------------


def grade_folder(course: Course, folder: Path, out: Path, options: Optional[GradeOptions] = None) -> GradeReport:
    """Grade every submission in ``folder`` into ``out`` (grades.csv, summary.md, records/)."""
    import nbformat  # noqa: F401  (fail early if the grade extra is missing)
    import nbclient  # noqa: F401

    options = options or GradeOptions()
    started = time.monotonic()
    folder, out = Path(folder).resolve(), Path(out).resolve()
    if out == folder or folder in out.parents:
        raise ValueError(f"--out {out} is inside the submissions folder: write grades elsewhere")
    hidden_index = collect_hidden_tests(course.hidden_dir)
    hidden_files = [str(p.resolve()) for p in hidden_test_files(course.hidden_dir)]
    submissions = list_submissions(folder)
    report = GradeReport(out, students=[s.student for s in submissions])
    forced = pick_chapter(course, options.chapter) if options.chapter else None
    for sub in submissions:
        read_notebook(sub)
        if sub.nb is not None:
            sub.chapter = forced or recognise_chapter(sub.nb, course)
    votes = Counter(s.chapter.path for s in submissions if s.chapter is not None)
    default = forced or (next((c for c in course.chapters if c.path == votes.most_common(1)[0][0]), None) if votes else None)
    records_dir = out / "records"
    records_dir.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()
    records: Dict[str, dict] = {}

    def record_path(sub: Submission) -> Path:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in sub.student)
        return records_dir / f"{safe}.json"

    def existing(sub: Submission) -> Optional[dict]:
        path = record_path(sub)
        if options.force or not path.exists():
            return None
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            return None
        if record.get("sha256") != sub.digest or record.get("version") != RECORD_VERSION or record.get("retry"):
            return None
        return record

    def grade_one(sub: Submission) -> None:
        record = existing(sub)
        if record is not None:
            with lock:
                records[sub.student] = record
                report.skipped.append(sub.student)
            return
        chapter = sub.chapter or default
        record = {"version": RECORD_VERSION, "student": sub.student, "file": sub.path.name,
                  "sha256": sub.digest, "chapter": chapter.path if chapter else None,
                  "error": sub.error, "run": None}
        if not sub.error and chapter is None:
            record["error"] = "no exercise of the course found in this notebook"
        if not record["error"]:
            if sub.chapter is None:
                record["note"] = f"no exercise label found; graded as {chapter.stem}"
            labels = [ex.label for ex in gradable_exercises(course, chapter)
                      if ex.check_cells or ex.label in hidden_index]
            executed = out / "executed" if options.keep_executed else None
            try:
                record["run"] = run_submission(sub, chapter, labels, course, hidden_files, options, executed)
            except Exception as err:  # a bug or an odd notebook: score 0 with the reason, go on
                record["error"] = f"the autograder failed on this notebook: {type(err).__name__}: {err}"
            stop = (record.get("run") or {}).get("stop") or ""
            if record["error"] or stop.startswith("the autograder could not run"):
                record["retry"] = True  # not the student's fault: grade again on the next run
        after = sha256(sub.path)
        with lock:
            if after != sub.digest:
                report.modified.append(sub.student)
            _atomic_write(record_path(sub), json.dumps(record, indent=1, sort_keys=True) + "\n")
            records[sub.student] = record
            report.graded.append(sub.student)
            ordered = [records[s.student] for s in submissions if s.student in records]
            write_outputs(out, ordered, course, hidden_index, folder)
        if not options.quiet:
            rows = rows_for_record(record, course, hidden_index)
            got, top = sum(float(r[2]) for r in rows), sum(float(r[3]) for r in rows)
            seconds = (record.get("run") or {}).get("seconds", 0)
            print(f"  {sub.student}: {got:g}/{top:g} points ({seconds:.1f} s)", file=sys.stderr, flush=True)

    if options.jobs > 1:
        with ThreadPoolExecutor(max_workers=options.jobs) as pool:
            list(pool.map(grade_one, submissions))
    else:
        for sub in submissions:
            grade_one(sub)
    ordered = [records[s.student] for s in submissions if s.student in records]
    report.csv_path, report.summary_path = write_outputs(out, ordered, course, hidden_index, folder)
    report.seconds = time.monotonic() - started
    return report
