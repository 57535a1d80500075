"""Run the attacks of issues 19 and 29 against another grader (an earlier commit), as a before/after record.

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

The groups of issue 29 (``ROUND3_GROUPS``; ``--groups round3`` runs them all): the keyring canary
(the grader runs in a session keyring holding one, another is in the user keyring), the refused
system calls, file names (a 117-byte and a 255-byte name, ``carol .ipynb`` beside ``carol.ipynb``,
``'=carol.ipynb`` and a second run over the same folder), honest odd notebooks (byte-order mark,
``%%time``, ``%%capture``), regrading (a change of points; a notebook that timed out, under a
longer limit), libraries as large as PyTorch's CUDA build (simulated: 4 GB of address space
reserved at the grader's and its workers' start) and a grader that fails on a notebook (its kernel
cannot start under the limits it was given: not the student's doing).
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
from hostile.round2 import NAMES, ROUND2, _with_added_cell  # noqa: E402
from hostile.round3 import CANARY, CUDA_FOOTPRINT, LONG_NAME, NAMES3, ROUND3, with_bom  # noqa: E402

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
ROUND3_GROUPS = ["keyring", "syscalls", "names-long", "names-quote", "odd", "regrade-points", "regrade-timeout", "cuda",
                 "grader-failure"]
OPTIONS = dict(chapter="03", jobs=1, quiet=False, timeout=90, tests_timeout=60, check_timeout=20)
LIMITS = dict(processes=64, memory_mb=6144, disk_mb=256, total_memory_mb=2048)


def grader_env(root: Path) -> dict:
    """The graded copy's environment: its own package first (a PYTHONPATH naming this checkout's
    src/ would make an earlier commit's grader run today's code)."""
    return dict(os.environ, PYTHONPATH=str(Path(root) / "src"))


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
    env = grader_env(root)
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


def _chapter3():
    import nbformat

    from attention_book.instructor.course import Course
    from attention_book.instructor.release import release_notebook
    from attention_book.instructor.submissions import pick_chapter

    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    coding = [ex.label for ex in chapter.exercises if ex.answer_cells and course.points_for(ex.label) > 0]
    return course, chapter, source, release, coding


def _write(folder: Path, name: str, nb) -> None:
    data = nb if isinstance(nb, bytes) else json.dumps(nb).encode("utf-8")
    with open(os.path.join(os.fsencode(folder), os.fsencode(name)), "wb") as handle:
        handle.write(data)


def _executed_lines(out: Path, name: str, marker: str):
    path = out / "executed" / f"{name}.ipynb"  # a plain name: the same under every naming scheme
    if not path.is_file():
        return []
    nb = json.loads(path.read_text())
    return [line for cell in nb["cells"] for output in cell.get("outputs", [])
            for text in ["".join(output["text"]) if isinstance(output.get("text"), list) else str(output.get("text", ""))]
            for line in text.splitlines() if marker in line]


def _total(rows, student):
    return _points(rows, student)


def run_round3(name: str, root: Path, python: str, work: Path) -> list:
    """One group of issue 29 (see the module's docstring): rows for the table."""
    course, chapter, source, release, coding = _chapter3()
    base = work / name
    shutil.rmtree(base, ignore_errors=True)
    subs, out = base / "subs", base / "out"
    subs.mkdir(parents=True)
    options, env, canary, checks, attack = dict(OPTIONS), grader_env(root), "", {}, name
    runs = []

    def grade(**extra):
        started = time.monotonic()
        result = grade_in_process(root, subs, out, dict(options, **extra.pop("options", {})),
                                  extra.pop("limits", LIMITS), python=python, env=env, timeout=900, canary=canary,
                                  **extra)
        result["wall"] = round(time.monotonic() - started, 1)
        runs.append(result)
        return result

    _write(subs, "zz-solution.ipynb", source)
    if name in ("keyring", "syscalls"):
        canary_name = f"attention-book-canary-{os.getpid()}-{time.time_ns()}"
        _write(subs, f"{name}.ipynb", ROUND3[name].build(source=source, release=release, chapter=chapter, other=None,
                                                        context={"canary_name": canary_name}))
        canary = CANARY if name == "keyring" else ""
        result = grade(canary_name=canary_name) if canary else grade()
        rows = _rows(out)
        checks["attack's points"] = _total(rows, name)
        if name == "keyring":
            lines = _executed_lines(out, "keyring", "KEYRING")
            checks["canary read"] = any("KEYRING-LEAK" in line or CANARY in line for line in lines)
            checks["keyring calls not refused"] = sum(1 for line in lines if "EPERM" not in line
                                                      and "/proc/keys" not in line)
            keys = result.get("keys") or {}
            checks["keys the notebook planted in the grader's keyrings"] = sum(
                1 for k in keys.values() for d in k.get("described_after", []) if "planted-by-student" in d)
        else:
            lines = _executed_lines(out, "syscalls", "SYSCALL")
            checks["calls not refused (EPERM)"] = sorted(line.split()[1] for line in lines if line.split()[2] != "EPERM")
    elif name == "names-long":
        for file_name in (LONG_NAME, NAMES3[-1]):
            _write(subs, file_name, source)
        result = grade()
        rows = _rows(out)
        checks["run"] = "completed" if result["code"] == 0 and rows else "failed"
        checks["117-byte name's points"] = _total(rows, LONG_NAME[:-6])
        checks["255-byte name's points"] = _total(rows, NAMES3[-1][:-6])
    elif name == "names-quote":
        for file_name in ("carol .ipynb", "carol.ipynb", "'=carol.ipynb"):
            _write(subs, file_name, release if file_name == "carol .ipynb" else source)
        result = grade()
        rows = _rows(out)
        checks["first run"] = "completed" if result["code"] == 0 and rows else "failed"
        checks["'carol ' (release) / 'carol' (solution)"] = [_total(rows, "carol "), _total(rows, "carol")]
        second = grade()
        checks["second run"] = "completed" if second["code"] == 0 else "refused"
        result = second
    elif name == "odd":
        _write(subs, "bom.ipynb", with_bom(source))
        for magic in ("magic-time", "magic-capture"):
            _write(subs, f"{magic}.ipynb", ROUND3[magic].build(source=source, release=release, chapter=chapter,
                                                               other=None))
        result = grade()
        rows = _rows(out)
        checks["points (bom, %%time, %%capture)"] = [_total(rows, s) for s in ("bom", "magic-time", "magic-capture")]
    elif name == "regrade-points":
        for index in range(4):
            _write(subs, f"student-{index}.ipynb", solved_subset(source, chapter, coding[:index + 1]))
        grade()
        points = base / "points.toml"
        text = course.points_file.read_text(encoding="utf-8")
        points.write_text(text.replace(f"{coding[0]} = {course.points_for(coding[0]):g}", f"{coding[0]} = 5"))
        result = grade(points_file=points)
        checks["notebooks run again after a points change"] = result.get("report", {}).get("graded")
        checks["seconds of that run"] = result["wall"]
        checks["solution's points after"] = _total(_rows(out), "zz-solution")
    elif name == "regrade-timeout":
        _write(subs, "sleeper.ipynb", _with_added_cell(source, "import time\ntime.sleep(45)\n"))
        grade(options={"timeout": 25})
        checks["sleeper at --timeout 25"] = _total(_rows(out), "sleeper")
        result = grade(options={"timeout": 120})
        checks["sleeper at --timeout 120"] = _total(_rows(out), "sleeper")
    elif name == "cuda":
        _write(subs, "release.ipynb", release)
        simulation = base / "simulation"
        simulation.mkdir()
        (simulation / "sitecustomize.py").write_text(CUDA_FOOTPRINT)
        env.update(AB_SIMULATE_MAPPED_MB="4096", PYTHONPATH=os.pathsep.join(
            [str(simulation)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]))
        result = grade()
        checks["release's points"] = _total(_rows(out), "release")
    elif name == "grader-failure":  # alice's kernel cannot start (a limit it cannot start under): not her doing
        grade()  # the solution graded, the reference values cached
        _write(subs, "alice.ipynb", source)
        result = grade(limits=dict(LIMITS, disk_inodes=1))  # its folders cannot be made: the kernel never starts
        rows = _rows(out)
        checks["rows in grades.csv with 0 points"] = [s for s in ("alice", "zz-solution") if _total(rows, s) == 0
                                                      and any(r[0] == s for r in rows or [])]
        gradebook = out / "gradebook.csv"
        checks["in gradebook.csv"] = [s for s in ("alice", "zz-solution") if gradebook.is_file()
                                      and f"\n{s}," in gradebook.read_text()]
    else:
        raise ValueError(name)
    return [{"group": name, "attack": attack, "exit": [r["code"] for r in runs], "seconds": round(
        sum(r["wall"] for r in runs), 1), "grader_mb": round(max(r["maxrss_mb"] for r in runs)),
        "honest_points": _total(_rows(out), "zz-solution"), "checks": checks,
        "error": "" if result["code"] == 0 else result["stderr"].strip().splitlines()[-1:]}]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the course copy whose grader runs")
    parser.add_argument("--python", default=sys.executable, help="that grader's Python (its venv)")
    parser.add_argument("--groups", default="", help="comma-separated group names (default: all)")
    parser.add_argument("--label", default="", help="a name for the table (e.g. the commit)")
    args = parser.parse_args()
    wanted = set(args.groups.split(",")) if args.groups else None
    if wanted and "round3" in wanted:
        wanted |= set(ROUND3_GROUPS)
    work = Path(tempfile.mkdtemp(prefix="hostile-before-", dir="/var/tmp" if Path("/var/tmp").is_dir() else None))
    results = []
    for name, attacks, limit in GROUPS + [(group, None, None) for group in ROUND3_GROUPS]:
        if wanted and name not in wanted:
            continue
        load = os.getloadavg()[0]
        rows = (run_group(name, attacks, limit, args.root, args.python, work) if attacks is not None
                else run_round3(name, args.root, args.python, work))
        for row in rows:
            row["load"] = round(load, 1)
            results.append(row)
            print(json.dumps(row, ensure_ascii=False), flush=True)
    lines = [f"# Issue 19 and 29 attacks against {args.label or args.root}", "",
             "| group | attack | grader exit | seconds | grader MB | honest solution's points | load | checks "
             "| error |",
             "|---|---|---|---:|---:|---:|---:|---|---|"]
    for row in results:
        lines.append(f"| {row['group']} | {row['attack']} | {row['exit']} | {row['seconds']} | {row['grader_mb']} | "
                     f"{row['honest_points']} | {row['load']} | {json.dumps(row['checks'], ensure_ascii=False)} | "
                     f"{json.dumps(row['error'])[:200]} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = ROOT / "_build" / "bench"
    out.mkdir(parents=True, exist_ok=True)
    name = "hostile_before.md" if args.root != ROOT else "hostile_after.md"
    if args.groups:
        name = name.replace(".md", f"-{args.groups.replace(',', '-')}.md")
    (out / name).write_text(text)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
