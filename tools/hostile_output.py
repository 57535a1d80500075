"""Run the attacks of issue 29 on the grader's outputs (items 2, 5, 6, 10) against a grader, as a table.

    .venv/bin/python tools/hostile_output.py --root /var/tmp/old --python /var/tmp/old-venv/bin/python --label eed01ee
    .venv/bin/python tools/hostile_output.py --label today        # this checkout (the "after" column)

``--root`` is an untouched copy of the earlier commit (``git archive <commit> | tar -x -C DIR``)
with a virtual environment whose ``attention_book`` is that copy's ``src/`` (copy ``.venv`` and
give the copy its own ``__editable__`` file naming ``DIR/src``; outside ``/tmp``, which the old
sandbox hides). Each group of tests/hostile/output.py is graded by that grader in a process of its
own, next to the chapter's solution, and judged by today's checks (the same the test module
asserts); the table goes to the terminal and to ``_build/bench/hostile_output_<label>.md``.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from hostile import output as attacks  # noqa: E402
from hostile.harness import grade_in_process  # noqa: E402

OPTIONS = dict(chapter="03", jobs=2, quiet=False, timeout=90, tests_timeout=60, check_timeout=20)
LIMITS = dict(processes=64, memory_mb=6144, disk_mb=256, total_memory_mb=2048)


def _safely(check, *args):
    try:
        return check(*args)
    except Exception as err:  # noqa: BLE001 - an old grader's output the check cannot read: it failed
        return False, f"{type(err).__name__}: {str(err)[:120]}"


def _manual_rerun(root: Path, python: str, subs: Path, out: Path) -> dict:
    """The next run with the manual points file as the grader wrote it, 'alice ' given a comment."""
    from attention_book.instructor.report import csv_value

    copy = out.parent / "out-rerun"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(out, copy)
    path = copy / "manual-points.csv"
    if not path.is_file():
        return {"next run accepts the manual file": (False, "no manual-points.csv")}
    rows = attacks.read_csv(path)
    for row in rows[1:]:
        if csv_value(row[0]) == "alice " or row[0] == "alice ":
            row[5], row[6] = "0", "=see me"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)
    result = grade_in_process(root, subs, copy, OPTIONS, LIMITS, python=python, timeout=600)
    tail = (result.get("stderr") or "").strip().splitlines()[-1:]
    accepted = (result["code"] == 0, "exit 0" if result["code"] == 0 else f"exit {result['code']}: {tail}")
    mine = attacks.feedback_file(copy, "alice ")
    theirs = attacks.feedback_file(copy, "alice")
    exact = mine.is_file() and "see me" in mine.read_text(encoding="utf-8") and (
        not theirs.is_file() or "see me" not in theirs.read_text(encoding="utf-8"))
    where = [p.name for p in (copy / "feedback").glob("alice*") if "see me" in p.read_text(encoding="utf-8")]
    return {"next run accepts the manual file": accepted,
            "manual points reach the exact student": (exact, f"comment on {where}" if result["code"] == 0
                                                      else "run refused")}


def run_group(group: str, root: Path, python: str, work: Path) -> dict:
    import nbformat

    from attention_book.instructor.course import Course
    from attention_book.instructor.release import release_notebook
    from attention_book.instructor.submissions import pick_chapter

    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    base = work / group
    shutil.rmtree(base, ignore_errors=True)
    subs, out = base / "subs", base / "out"
    students = attacks.build_class(subs, source, release, chapter, groups=(group,))
    started = time.monotonic()
    result = grade_in_process(root, subs, out, OPTIONS, LIMITS, python=python, timeout=1200)
    checks = {}
    if group == "names":
        checks["CSV cells neutralised"] = _safely(attacks.check_csv_formulas, out)
        checks["names read back exactly"] = _safely(attacks.check_names_read_back, out,
                                                     [s for s in students if s in attacks.NAMES])
        checks["one Points Possible row"] = _safely(attacks.check_one_points_possible_row, out)
        checks["Canvas column not (autograded)"] = _safely(attacks.check_canvas_column, out)
        checks["readable feedback file names"] = _safely(attacks.check_feedback_names, out)
        rerun = _manual_rerun(root, python, subs, out)
        checks["next run accepts the manual file"] = rerun["next run accepts the manual file"]
    elif group == "exact-name":
        checks.update(_manual_rerun(root, python, subs, out))
    elif group in ("written", "surrogate"):
        answers = {s: t for s, t in attacks.ANSWERS.items() if s in students}
        checks["run completes, written/ and manual-points.csv"] = _safely(attacks.check_no_crash_written, out, result)
        checks["written page renders inert, one block each"] = _safely(
            attacks.check_written_renders_inert, out, students, answers)
    elif group == "active":
        checks["executed copy inert and unsigned"] = _safely(attacks.check_executed_inert, out)
    elif group == "self-check":
        checks["3.2's self-check hints on the page"] = _safely(attacks.check_self_check_reaches_page, out)
        checks["every exercise: self-check or why not"] = _safely(attacks.check_every_exercise_accounted, out,
                                                                  "wrong-3.2")
        checks["no hidden input in pages/records/copies"] = _safely(attacks.check_no_hidden_input_leaks, out)
        checks["the spy's 3.2 self-check shown (nothing to leak)"] = _safely(attacks.check_spy_self_check_shown, out)
        checks["a spy walking the stack: refused, page says why"] = _safely(attacks.check_frame_spy_refused, out)
    elif group == "keyring":
        checks["no hidden input through the keyrings"] = _safely(lambda o: attacks.check_no_keyring_leak(o)[:2], out)
    return {"group": group, "exit": result["code"], "seconds": round(time.monotonic() - started, 1),
            "checks": {name: [bool(ok), detail] for name, (ok, detail) in checks.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the course copy whose grader runs")
    parser.add_argument("--python", default=sys.executable, help="that grader's Python (its venv)")
    parser.add_argument("--groups", default="", help="comma-separated groups (default: all)")
    parser.add_argument("--label", default="", help="a name for the table (e.g. the commit)")
    args = parser.parse_args()
    wanted = set(args.groups.split(",")) if args.groups else None
    work = Path(tempfile.mkdtemp(prefix="hostile-output-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    rows = []
    for group in attacks.GROUPS:
        if wanted and group not in wanted:
            continue
        row = run_group(group, args.root, args.python, work)
        print(json.dumps(row, ensure_ascii=False), flush=True)
        rows.append(row)
    label = args.label or str(args.root)
    lines = [f"# Issue 29 output attacks against {label}", "", "| group | grader exit | seconds | check | held | detail |",
             "|---|---|---:|---|---|---|"]
    for row in rows:
        for name, (ok, detail) in row["checks"].items():
            shown = str(detail).replace("|", "\\|").replace("\n", " ")[:160]
            lines.append(f"| {row['group']} | {row['exit']} | {row['seconds']} | {name} | {'yes' if ok else 'NO'} | "
                         f"{shown} |")
    text = "\n".join(lines) + "\n"
    print(text)
    bench = ROOT / "_build" / "bench"
    bench.mkdir(parents=True, exist_ok=True)
    (bench / f"hostile_output_{(args.label or 'run').replace('/', '_')}.md").write_text(text, encoding="utf-8")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
