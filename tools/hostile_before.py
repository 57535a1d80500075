"""Run the attacks of issue 19 against another grader (an earlier commit), as a before/after record.

    .venv/bin/python tools/hostile_before.py --root /opt/old --python /opt/old/.venv/bin/python
    .venv/bin/python tools/hostile_before.py            # this checkout (the "after" column)

``--root`` is an untouched copy of the earlier commit (``git archive <commit> | tar -x -C DIR``)
with a virtual environment whose ``attention_book`` is that copy's ``src/`` (copy ``.venv`` and
point its ``__editable__`` file at ``DIR/src``; outside ``/tmp``, which the old sandbox hides).
Each group of attacks is graded in a fresh grader process next to an honest solution (and, for
the process hog, two honest notebooks graded beside it with ``--jobs 2``), with a time limit per
group; what is checked for each attack is printed as a table (also written to
``_build/bench/hostile_before.md``): the grader's exit status and wall time, its peak memory
(``ru_maxrss`` of the grader process), the files of a watched folder, what the notebooks printed
and their points. An old grader that hangs is stopped at the group's time limit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from hostile.attacks import solved_subset  # noqa: E402
from hostile.harness import grade_in_process, snapshot  # noqa: E402
from hostile.round2 import NAMES, ROUND2  # noqa: E402

GROUPS = [  # (group, attacks, time limit of the whole grading run in seconds)
    ("files", ["plant-links", "fill-disk"], 400),
    ("fifo", ["plant-fifo"], 240),
    ("shared", ["reply-shared"], 240),
    ("expand", ["reply-expand"], 300),
    ("deflate", ["reply-deflate"], 300),
    ("flood", ["iopub-flood"], 300),
    ("strangers", ["strangers"], 300),
    ("plan", ["huge-plan"], 360),
    ("hog", ["process-hog"], 400),
    ("memory", ["memory-hog"], 300),
    ("points", ["cheat-softmax", "cheat-finished", "cheat-zero-inputs"], 400),
    ("leaks", ["leak-inputs", "leak-code", "leak-paths"], 400),
    ("names", ["names"], 300),
]
OPTIONS = dict(chapter="03", jobs=1, quiet=False, timeout=90, tests_timeout=60, check_timeout=20)
LIMITS = dict(processes=64, memory_mb=6144, disk_mb=256, total_memory_mb=2048)


def _printed(out: Path, student: str, marker: str):
    path = out / "executed" / f"{student}.ipynb"
    if not path.is_file():
        return []
    nb = json.loads(path.read_text())
    lines = []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            text = ("".join(text) if isinstance(text, list) else str(text)) + str(output.get("evalue", ""))
            lines += [line for line in text.splitlines() if marker in line]
    return lines


def _rows(out: Path):
    import csv

    path = out / "grades.csv"
    if not path.is_file():
        return None
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))[1:]


def _points(rows, student):
    return sum(float(r[3]) for r in rows if r[0] == student) if rows else None


def run_group(name, attacks, limit, root: Path, python: str, work: Path) -> list:
    import nbformat

    from attention_book.instructor.course import Course
    from attention_book.instructor.release import release_notebook
    from attention_book.instructor.submissions import pick_chapter

    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    other = nbformat.read(str(ROOT / "notebooks" / "01_words_to_vectors.ipynb"), as_version=4)
    coding = [ex.label for ex in chapter.exercises if ex.answer_cells and course.points_for(ex.label) > 0]
    base = work / name
    shutil.rmtree(base, ignore_errors=True)
    subs, watched = base / "subs", base / "watched"
    subs.mkdir(parents=True)
    watched.mkdir()
    (watched / "secret-0600").write_text("SECRET-H2-watched")
    (watched / "secret-0600").chmod(0o600)
    (watched / "hidden_tests_ch99.py").write_text("# a copy of hidden tests\n")
    context = {"watched": str(watched), "hold_seconds": 60}
    options = dict(OPTIONS)
    for attack in attacks:
        if attack == "names":
            for raw in NAMES:
                with open(os.path.join(os.fsencode(subs), raw), "w") as handle:
                    handle.write(json.dumps(solved_subset(source, chapter, coding[:1])))
            continue
        nb = ROUND2[attack].build(source=source, release=release, chapter=chapter, other=other, context=context)
        prefix = "00-" if attack == "process-hog" else ""
        (subs / f"{prefix}{attack}.ipynb").write_text(json.dumps(nb))
    if attacks == ["process-hog"]:
        options["jobs"] = 2
        (subs / "01-beside-solution.ipynb").write_text(json.dumps(source))
        (subs / "02-beside-solution.ipynb").write_text(json.dumps(source))
    (subs / "zz-solution.ipynb").write_text(json.dumps(source))
    before = snapshot(watched)
    temp_before = {p.name for p in Path(tempfile.gettempdir()).iterdir()}
    env = dict(os.environ)
    started = time.monotonic()
    result = grade_in_process(root, subs, base / "out", options, LIMITS, python=python, env=env, timeout=limit)
    seconds = time.monotonic() - started
    out = base / "out"
    rows = _rows(out)
    changed = snapshot(watched) != before
    left = sorted(p.name for p in Path(tempfile.gettempdir()).iterdir()
                  if p.name not in temp_before and p.name.startswith(("ab-grade", "ab-kernel")))
    found = []
    for attack in attacks:
        checks = {}
        if attack in ("plant-links", "plant-fifo"):
            checks["watched files changed"] = changed
        if attack == "fill-disk":
            wrote = _printed(out, attack, "DISK-WROTE-MB")
            checks["MB written"] = wrote[0].split()[-1] if wrote else "?"
            checks["temp folders left"] = len(left)
        if attack == "memory-hog":
            held = _printed(out, attack, "MEMORY-HELD-GIB")
            checks["GiB held at once"] = held[0].split()[-1] if held else "none (killed)"
        if attack == "process-hog":
            hog = _printed(out, "00-process-hog", "HOG processes:")
            checks["processes taken"] = hog[0].split(":")[1].strip() if hog else "?"
            checks["points beside it"] = [_points(rows, s) for s in ("01-beside-solution", "02-beside-solution")]
        if attack.startswith("cheat-"):
            checks["points"] = _points(rows, attack)
        if attack.startswith("leak-"):
            import re

            values = re.compile(r"LEAK-(INPUT|CODE)[^\n]*\d\.\d")  # an input's value, after the marker
            if attack == "leak-paths":
                leaked = [line for line in _printed(out, attack, "PATHS")
                          if "ab-grade-" in line or str(subs) in line or str(base / "out") in line]
            else:
                leaked = [line for line in _printed(out, attack, "LEAK-") if values.search(line)]
                leaked += [r[5] for r in rows or [] if r[0] == attack and (values.search(r[5]) or "LEAK-CODE" in r[5])]
            checks["leaked"] = len(leaked)
        if attack == "names":
            checks["run completed"] = result["code"] == 0 and rows is not None
        found.append({"group": name, "attack": attack, "exit": result["code"], "seconds": round(seconds, 1),
                      "grader_mb": round(result["maxrss_mb"]), "honest_points": _points(rows, "zz-solution"),
                      "checks": checks,
                      "error": "" if result["code"] == 0 else result["stderr"].strip().splitlines()[-1:]})
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the course copy whose grader runs")
    parser.add_argument("--python", default=sys.executable, help="that grader's Python (its venv)")
    parser.add_argument("--groups", default="", help="comma-separated group names (default: all)")
    parser.add_argument("--label", default="", help="a name for the table (e.g. the commit)")
    args = parser.parse_args()
    wanted = set(args.groups.split(",")) if args.groups else None
    work = Path(tempfile.mkdtemp(prefix="hostile-before-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    results = []
    for name, attacks, limit in GROUPS:
        if wanted and name not in wanted:
            continue
        load = os.getloadavg()[0]
        for row in run_group(name, attacks, limit, args.root, args.python, work):
            row["load"] = round(load, 1)
            results.append(row)
            print(json.dumps(row), flush=True)
    lines = [f"# Issue 19 attacks against {args.label or args.root}", "",
             "| group | attack | grader exit | seconds | grader MB | honest solution's points | load | checks "
             "| error |",
             "|---|---|---|---:|---:|---:|---:|---|---|"]
    for row in results:
        lines.append(f"| {row['group']} | {row['attack']} | {row['exit']} | {row['seconds']} | {row['grader_mb']} | "
                     f"{row['honest_points']} | {row['load']} | {json.dumps(row['checks'])} | "
                     f"{json.dumps(row['error'])[:200]} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = ROOT / "_build" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    name = "hostile_before.md" if args.root != ROOT else "hostile_after.md"
    (out / name).write_text(text)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
