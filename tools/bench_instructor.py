"""Measure the instructor kit: grading a 30-student class of one chapter, today's grader vs another.

    .venv/bin/python tools/bench_instructor.py [--chapter 03] [--students 30] [--jobs 1]
        [--old-root /tmp/old-grader] [--set-only DIR] [--submissions DIR] [--grader new|old|both]

CPU time is not compared: the sandboxed kernels are reaped inside their PID namespace, so the
grader's child-process accounting does not see them. The class is generated deterministically from the chapter notebook (so both graders see the same
files): a third solution notebooks (full marks expected), a quarter untouched release notebooks
(zero), a quarter partly solved ones (some answers stubbed again: their exact partial points are
known) and the rest hostile (the attacks of tests/hostile: monkeypatching the checks, patching
``torch.allclose``, printing without end, another chapter's solved notebook ...).

``--old-root`` is an untouched copy of an earlier commit (``git archive HEAD | tar -x -C DIR``),
outside ``/tmp`` (the sandbox hides ``/tmp``). Its grader runs with ``--old-python``: a virtual
environment whose ``attention_book`` is that copy's ``src/`` (copy ``.venv`` to ``DIR/.venv``, write
``DIR/src`` into its ``__editable__...pth`` and fix the python path in
``share/jupyter/kernels/python3/kernel.json``); without it, from that copy's ``src/``
(PYTHONPATH) with this venv, which only works for graders whose kernels do not import the
package. Results are printed and written to _build/bench/instructor.md (a table: grader, wall
time, per notebook, load average, the grader's peak memory).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict

ROOT = Path(__file__).resolve().parents[1]


def _src_course(root: Path):
    """Course of ``root`` read with *this* checkout's instructor code (only used to build the set)."""
    sys.path.insert(0, str(ROOT / "src"))
    from attention_book.instructor.course import Course

    return Course.load(root)


def make_class(root: Path, chapter_wanted: str, students: int, out: Path) -> Dict[str, str]:
    """Write ``students`` notebooks for one chapter into ``out``; returns name -> kind."""
    import nbformat

    sys.path.insert(0, str(ROOT))
    from attention_book.instructor.release import release_notebook
    from tests.hostile.attacks import ATTACKS, SAFE, solved_subset

    course = _src_course(root)
    chapter = next(c for c in course.chapters if c.stem.startswith(chapter_wanted))
    source = nbformat.read(str(root / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    other = next(c for c in course.chapters if c.path != chapter.path and c.exercises)
    other_nb = nbformat.read(str(root / other.path), as_version=4)
    coding = [ex.label for ex in chapter.exercises if ex.answer_cells and course.points_for(ex.label) > 0]
    out.mkdir(parents=True, exist_ok=True)
    n_solution = students // 3
    n_release = students // 4
    n_partial = students // 4
    n_hostile = students - n_solution - n_release - n_partial
    kinds: Dict[str, str] = {}

    def write(name: str, nb, kind: str) -> None:
        (out / f"{name}.ipynb").write_text(json.dumps(nb, indent=1), encoding="utf-8")
        kinds[name] = kind

    for i in range(n_solution):
        write(f"solution-{i:02d}", source, "solution")
    for i in range(n_release):
        write(f"release-{i:02d}", release, "release")
    from itertools import combinations

    subsets = [list(c) for size in range(1, len(coding)) for c in combinations(coding, size)] or [[]]
    for i in range(n_partial):
        keep = subsets[i % len(subsets)]
        write(f"partial-{i:02d}", solved_subset(source, chapter, keep), "partial:" + ",".join(keep))
    names = [n for n in SAFE if n != "tamper-cells"] + ["tamper-cells"]
    for i in range(n_hostile):
        name = names[i % len(names)]
        nb = ATTACKS[name].build(source=source, release=release, chapter=chapter, other=other_nb)
        write(f"hostile-{i:02d}-{name}", nb, "hostile:" + name)
    return kinds


def run_grader(which: str, root: Path, subs: Path, out: Path, chapter: str, jobs: int, python: str = ""):
    """Wall time and peak memory (``ru_maxrss`` of the grader) of one grading run, and its grades."""
    env = dict(os.environ)
    env.setdefault("TIKTOKEN_CACHE_DIR", str(ROOT.parent / "shared" / "tiktoken-cache"))
    if which == "old" and not python:
        env["PYTHONPATH"] = str(root / "src")
    else:
        env.pop("PYTHONPATH", None)
    command = [python or sys.executable, "-m", "attention_book.cli", "grade", str(subs), "--root", str(root),
               "--out", str(out), "--force", "--no-executed", "--jobs", str(jobs), "--chapter", chapter]
    if which == "new" and os.environ.get("BENCH_UNSAFE"):
        command.append("--unsafe")
    sys.path.insert(0, str(ROOT / "tests"))
    from hostile.harness import WRAP  # runs the grader; reports the grader's own ru_maxrss

    done = subprocess.run([sys.executable, "-c", WRAP, json.dumps(command), "7200"], env=env, cwd=str(root),
                          capture_output=True, text=True, check=False)
    result = json.loads(done.stdout)
    if result["code"] not in (0, 1):
        raise RuntimeError(f"{which} grader failed ({result['code']}):\n{result['stderr'][-3000:]}")
    return result["seconds"], result["maxrss_mb"], (out / "grades.csv").read_text(encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", default="03")
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--old-root", type=Path, default=None)
    parser.add_argument("--old-python", default="", help="the old grader's Python (its own venv)")
    parser.add_argument("--grader", choices=["new", "old", "both"], default="both")
    parser.add_argument("--submissions", type=Path, default=None, help="reuse a class written before")
    parser.add_argument("--set-only", type=Path, default=None, help="only write the class to DIR")
    parser.add_argument("--old-seconds", type=float, nargs=2, default=None, metavar=("WALL", "LOAD"),
                        help="today's wall seconds and the load average then, measured earlier (skip the old grader)")
    args = parser.parse_args()

    if args.set_only:
        kinds = make_class(args.old_root or ROOT, args.chapter, args.students, args.set_only)
        (args.set_only.parent / f"{args.set_only.name}-kinds.json").write_text(json.dumps(kinds, indent=1))
        print(f"{len(kinds)} notebooks in {args.set_only}")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="bench-instructor-"))
    try:
        subs = args.submissions or tmp / "class"
        if args.submissions is None:
            make_class(args.old_root or ROOT, args.chapter, args.students, subs)
        count = len(list(subs.glob("*.ipynb")))
        rows = []
        if args.grader in ("old", "both") and args.old_seconds is None:
            if args.old_root is None:
                parser.error("--old-root is needed to run the old grader")
            load = os.getloadavg()[0]
            wall, peak, _ = run_grader("old", args.old_root, subs, tmp / "old", args.chapter, args.jobs,
                                       args.old_python)
            rows.append((f"earlier grader ({args.old_root})", wall, (load, os.getloadavg()[0]), peak))
        elif args.old_seconds is not None:
            rows.append(("earlier grader (measured before; a class of the same make-up from that commit)",
                         args.old_seconds[0], (args.old_seconds[1], args.old_seconds[1]), float("nan")))
        if args.grader in ("new", "both"):
            load = os.getloadavg()[0]
            wall, peak, _ = run_grader("new", ROOT, subs, tmp / "new", args.chapter, args.jobs)
            rows.append(("this checkout's grader (sandboxed)", wall, (load, os.getloadavg()[0]), peak))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [
        f"# Grading a {count}-notebook class of chapter {args.chapter}",
        "",
        f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, load average at the end "
        f"{os.getloadavg()[0]:.1f} (shared machine: compare runs with care); jobs = {args.jobs}.",
        "",
        "| grader | wall time (s) | s per notebook | load average (1 min) at start / end | grader peak MB | "
        "ratio to the first row |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, seconds, (load_start, load_end), peak in rows:
        lines.append(f"| {name} | {seconds:.1f} | {seconds / count:.2f} | {load_start:.1f} / {load_end:.1f} | "
                     f"{peak:.0f} | {seconds / rows[0][1]:.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out_dir = ROOT / "_build" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "instructor.md").write_text(text)
    print(f"written to {out_dir / 'instructor.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
