"""Grade the "write your own" cases (tests/own_work_cases.py) with a grader, as a before/after table.

    .venv/bin/python tools/own_work_before.py --root /opt/old --python /opt/old/.venv/bin/python
    .venv/bin/python tools/own_work_before.py            # this checkout (the "after" column)

``--root`` is an untouched copy of an earlier commit (``git archive <commit> | tar -x -C DIR``)
with a virtual environment whose ``attention_book`` is that copy's ``src/`` (see
tools/hostile_before.py). Each chapter's cases, its solution and its release are graded in real
sandboxes by that grader (in a process of its own); the table (printed, and written to
``_build/bench/own_work_<name>.md``) gives each case's points on its exercise, whether that is
what issue 29/30 require, and the grader's message and flags.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]

from own_work_cases import CASES  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the course copy whose grader runs")
    parser.add_argument("--python", default=sys.executable, help="its Python")
    parser.add_argument("--chapters", default="03,01,07,10")
    parser.add_argument("--name", default="after", help="the table's file name part")
    parser.add_argument("--timeout", type=float, default=None, help="seconds for the cells (and the calls) of a "
                        "notebook; more on a busy machine (default: the suite's 300)")
    args = parser.parse_args(argv)
    from test_grader_own_work import grade_cases_in_sandboxes

    lines = ["| chapter | case | exercise | required | points | as required | grader's message / flags |",
             "|---|---|---|---|---|---|---|"]
    for number in args.chapters.split(","):
        with tempfile.TemporaryDirectory(prefix=f"own-work-{number}-", dir=ROOT / ".cache") as work:
            rows, result = grade_cases_in_sandboxes(number, Path(work), python=args.python, root=args.root,
                                                    timeout=args.timeout)
        if result.get("code") != 0:
            lines.append(f"| {number} | (the grader failed: exit {result.get('code')}) | | | | | "
                         f"{result.get('stderr', '')[-200:].replace('|', '/').replace(chr(10), ' ')} |")
            continue
        solution = rows.get("solution", {})
        full = all(p == t for p, t, _, _ in solution.values())
        lines.append(f"| {number} | solution | all | full marks | {sum(p for p, _, _, _ in solution.values()):g} | "
                     f"{'yes' if full else 'NO'} | |")
        for case in CASES[number]:
            points, top, message, flags = rows.get(case.name, {}).get(case.label, (None, None, "not graded", ""))
            if points is None:
                ok = False
            else:
                ok = {"full": points == top and not flags.strip(), "zero": points == 0 or bool(flags.strip()),
                      "at most half": points <= top / 2}[case.expect]
            required = {"full": "full marks, no flag", "zero": "0 or flagged",
                        "at most half": "at most half"}[case.expect]
            text = (message + (f" / flags: {flags}" if flags.strip() else "")).replace("|", "/").replace("\n", " ")
            shown = "-" if points is None else f"{points:g}/{top:g}"
            lines.append(f"| {number} | {case.name}: {case.why} | {case.label} | {required} | {shown} | "
                         f"{'yes' if ok else 'NO'} | {text[:220]} |")
    table = "\n".join(lines) + "\n"
    print(table)
    out = ROOT / "_build" / "bench" / f"own_work_{args.name}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(table, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
