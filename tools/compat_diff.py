"""What a chapter prints differently on another PyTorch: cell by cell, line by line.

    python tools/compat_diff.py _build/executed _build/compat/torch-2.5.0/executed

Both folders hold executed chapter notebooks (tests/test_notebooks.py writes them: make test into
_build/executed, make test-compat into _build/compat/torch-<version>/executed). For each chapter
present in both, every code cell whose printed text (stdout and text/plain results, as the
quoted-number test reads them) differs is listed with its cell number (1-based, as JupyterLab
counts) and the differing lines, so the prose that quotes them can be checked. Exit status 0 either
way: it reports, the tests judge. Standard library only.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Dict, List


def printed(cell: dict) -> str:
    if cell.get("cell_type") != "code":
        return ""
    chunks = ["".join(o.get("text", "")) if isinstance(o.get("text"), list) else o.get("text", "")
              for o in cell.get("outputs", []) if o.get("output_type") == "stream" and o.get("name") == "stdout"]
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if output.get("output_type") in ("execute_result", "display_data") and "text/plain" in data and not (
                {"image/png", "image/svg+xml", "application/vnd.jupyter.widget-view+json"} & set(data)):
            text = data["text/plain"]
            chunks.append("".join(text) if isinstance(text, list) else text)
    return "".join(chunks)


def differences(before: Path, after: Path, context: int = 0) -> Dict[str, List[str]]:
    """``{chapter file: [lines of the report]}`` for the chapters whose printed text differs."""
    found = {}
    for path in sorted(before.glob("*.ipynb")):
        other = after / path.name
        if not other.is_file():
            continue
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        other_cells = json.loads(other.read_text(encoding="utf-8"))["cells"]
        lines = []
        if len(cells) != len(other_cells):
            lines.append(f"  {len(cells)} cells before, {len(other_cells)} after: the chapters differ")
        for number, (cell, other_cell) in enumerate(zip(cells, other_cells), start=1):
            old, new = printed(cell), printed(other_cell)
            if old == new:
                continue
            lines.append(f"  cell {number}:")
            for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=context):
                if not line.startswith(("---", "+++", "@@")):
                    lines.append(f"    {line}")
        if lines:
            found[path.name] = lines
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before", type=Path, help="folder of executed notebooks (e.g. _build/executed)")
    parser.add_argument("after", type=Path, help="another run's folder")
    parser.add_argument("--context", type=int, default=0, help="unchanged lines shown around a change")
    args = parser.parse_args(argv)
    found = differences(args.before, args.after, args.context)
    if not found:
        print(f"every chapter in both folders printed the same ({args.before} and {args.after})")
    for name, lines in found.items():
        print(f"{name}: printed differently ('-' {args.before}, '+' {args.after})")
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
