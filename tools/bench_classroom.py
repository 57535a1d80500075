"""Time the three runs an instructor makes on one assignment: grade a class, grade it again with
nothing changed, regrade one student.

    .venv/bin/python tools/bench_classroom.py [--chapter 03] [--students 30] [--submissions DIR]

The class is the one tools/bench_instructor.py writes (solutions, untouched releases, partly
solved and hostile notebooks). Each run is the command line an instructor types
(``attention-book grade ... --no-executed``), timed from outside, with the load average after it
(the machine may be shared: read the seconds next to the load). The table goes to stdout and to
_build/bench/classroom.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(command, env) -> tuple:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, os.getloadavg()[0], done.stdout + done.stderr


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chapter", default="03")
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--submissions", type=Path, default=None, help="a class written before")
    args = parser.parse_args()
    env = dict(os.environ)
    env.setdefault("TIKTOKEN_CACHE_DIR", str(ROOT.parent / "shared" / "tiktoken-cache"))
    tmp = Path(tempfile.mkdtemp(prefix="bench-classroom-"))
    try:
        subs = args.submissions
        if subs is None:
            sys.path.insert(0, str(ROOT / "tools"))
            from bench_instructor import make_class

            subs = tmp / "class"
            make_class(ROOT, args.chapter, args.students, subs)
        names = sorted(p.stem for p in subs.glob("*.ipynb"))
        one = next((n for n in names if n.startswith("partial")), names[0])
        grade = [sys.executable, "-m", "attention_book.cli", "grade", str(subs), "--chapter", args.chapter,
                 "--out", str(tmp / "out"), "--no-executed"]
        load_before = os.getloadavg()[0]
        rows = [("first run (reference run + every notebook)", *timed(grade, env)),
                ("rerun, nothing changed", *timed(grade, env)),
                (f"one student regraded (--student {one})", *timed(grade + ["--student", one], env))]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = [f"# Grading a {len(names)}-notebook class of chapter {args.chapter}: first run, rerun, one student",
             "", f"Machine: {os.cpu_count()} CPUs, Python {platform.python_version()}; load average (1 min) "
             f"before the first run {load_before:.1f}; jobs = 1; `--no-executed`.", "",
             "| run | wall time (s) | load average after |", "|---|---:|---:|"]
    lines += [f"| {name} | {seconds:.1f} | {load:.1f} |" for name, seconds, load, _ in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    out = ROOT / "_build" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    (out / "classroom.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
