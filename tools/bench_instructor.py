"""Measure the instructor kit: student-release build time and grading throughput.

    .venv/bin/python tools/bench_instructor.py [--copies 2] [--jobs 1 2] [--repeat 3]

The release is built ``--repeat`` times (median reported). Grading runs a folder holding, for
every chapter of _toc.yml with gradable exercises, ``--copies`` solution notebooks (the chapter
itself: full marks) and ``--copies`` untouched release notebooks (zero), once per ``--jobs``
value, each into a fresh output folder (no record reuse). Results are printed and written to
_build/bench/instructor.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import nbformat  # noqa: E402

from attention_book.instructor.course import Course  # noqa: E402
from attention_book.instructor.grade import GradeOptions, grade_folder, read_grades  # noqa: E402
from attention_book.instructor.markup import analyse_notebook  # noqa: E402
from attention_book.instructor.release import build_release  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=2)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("--chapters", choices=["all", "toc"], default="all",
                        help="grade every notebooks/*.ipynb (default) or only those in _toc.yml")
    args = parser.parse_args()
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(ROOT.parent / "shared" / "tiktoken-cache"))

    with tempfile.TemporaryDirectory(prefix="bench-instructor-") as tmp:
        tmp = Path(tmp)
        release_times = []
        for attempt in range(args.repeat):
            started = time.perf_counter()
            course = Course.load(ROOT)
            report = build_release(course, tmp / "release")
            release_times.append(time.perf_counter() - started)
        release_chapters, release_exercises = list(report.notebooks), report.exercises
        release_time = statistics.median(release_times)
        skipped: list = []
        extra_release = None
        if args.chapters == "all":  # also chapters still being written (not yet in _toc.yml)
            listed = {c.path for c in course.chapters}
            for path in sorted(ROOT.glob("notebooks/*.ipynb")):
                rel = path.relative_to(ROOT).as_posix()
                if rel in listed:
                    continue
                try:
                    nb = nbformat.read(str(path), as_version=4)
                    course.chapters.append(analyse_notebook(nb, rel))
                    build_release(course, tmp / "release")  # the extra chapter must release too
                except Exception as err:  # a draft with broken markup: leave it out, say so
                    course.chapters = [c for c in course.chapters if c.path != rel]
                    skipped.append(f"{rel} ({type(err).__name__}: {err})")
            all_times = []
            for attempt in range(args.repeat):
                started = time.perf_counter()
                report = build_release(course, tmp / "release")
                all_times.append(time.perf_counter() - started)
            extra_release = (len(report.notebooks), report.exercises, statistics.median(all_times))
        chapters = [c for c in course.chapters if any(course.points_for(e.label) > 0 for e in c.exercises)]
        subs = tmp / "submissions"
        subs.mkdir()
        for chapter in chapters:
            for copy in range(args.copies):
                shutil.copy(ROOT / chapter.path, subs / f"{chapter.stem}-solution-{copy}.ipynb")
                shutil.copy(report.out / chapter.path, subs / f"{chapter.stem}-release-{copy}.ipynb")
        count = len(list(subs.iterdir()))
        runs = []
        unexpected: list = []
        for jobs in args.jobs:
            out = tmp / f"grades-{jobs}"
            options = GradeOptions(timeout=args.timeout, jobs=jobs, quiet=True, keep_executed=False)
            started = time.perf_counter()
            graded = grade_folder(course, subs, out, options)
            seconds = time.perf_counter() - started
            rows = read_grades(graded.csv_path)
            full = sum(1 for (s, _), (p, m, _) in rows.items() if "solution" in s and p == m)
            zero = sum(1 for (s, _), (p, m, _) in rows.items() if "release" in s and p == 0)
            runs.append((jobs, seconds, count * 60 / seconds, full, zero, len(rows)))
            unexpected = [f"{s} {e}: {p:g}/{m:g} {msg}" for (s, e), (p, m, msg) in rows.items()
                          if ("solution" in s and p != m) or ("release" in s and p != 0)]

    lines = [
        "# Instructor kit: release build and grading throughput",
        "",
        f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"load average at the end {os.getloadavg()[0]:.1f} (shared machine: compare runs with care).",
        f"Release: the {len(release_chapters)} notebooks of _toc.yml. Graded chapters: "
        f"{', '.join(c.stem for c in chapters)}; gradable exercises: "
        f"{sum(1 for c in chapters for e in c.exercises if course.points_for(e.label) > 0)}.",
        *([f"Left out (markup errors): {'; '.join(skipped)}"] if skipped else []),
        "",
        f"- Student release ({len(release_chapters)} notebooks, {release_exercises} exercises, README, zip): "
        f"median {release_time:.2f} s over {args.repeat} builds (including reading the sources).",
        *([f"- Release of all {extra_release[0]} chapter notebooks ({extra_release[1]} exercises), sources "
           f"already parsed: median {extra_release[2]:.2f} s."] if extra_release else []),
        "",
        f"Grading {count} notebooks ({args.copies} solution + {args.copies} untouched release copies per chapter):",
        "",
        "| jobs | wall time (s) | notebooks per minute | solution rows at full marks | release rows at zero | rows |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for jobs, seconds, rate, full, zero, total in runs:
        lines.append(f"| {jobs} | {seconds:.1f} | {rate:.1f} | {full} | {zero} | {total} |")
    if unexpected:
        lines += ["", "Rows that are not full marks (solutions) or zero (release):", ""]
        lines += [f"- {row}" for row in unexpected]
    text = "\n".join(lines) + "\n"
    print(text)
    out_dir = ROOT / "_build" / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "instructor.md").write_text(text)
    print(f"written to {out_dir / 'instructor.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
