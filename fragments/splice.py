"""Put the exercise cells of a fragment into its chapter: replaces the chapter's "## Exercises" section.

    python fragments/splice.py                     # fragments/09_exercises.ipynb -> notebooks/09_gpt.ipynb
    python fragments/splice.py --check             # only say what would be replaced
    python fragments/splice.py FRAGMENT CHAPTER    # other files

The fragment holds the whole section, from its "## Exercises" heading to the last cell before the
next "## " heading. The chapter's section (its "## Exercises" cell up to its next "## " heading,
e.g. "## Summary") is replaced by it; every replaced cell is printed first, so nothing in the
chapter disappears unseen, and a chapter section that holds code or an {exercise} is refused
unless --force is given. The chapter is then normalised like tools/strip_outputs.py does. After
splicing: set CHAPTER = "09" in tests/test_checks_ch09.py, run
tools/make_student_notebooks.py and `attention-book exercises --write-table`, delete the fragment.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from strip_outputs import dumps, normalise  # noqa: E402

HEADING = re.compile(r"^## (?!#)", re.M)


def _text(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def section(cells: list, where: str) -> tuple:
    """``(start, end)``: the "## Exercises" cell and the index of the next "## " heading cell."""
    starts = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and _text(c).startswith("## Exercises")]
    if len(starts) != 1:
        raise SystemExit(f"{where}: expected one markdown cell starting with '## Exercises', found {len(starts)}")
    start = starts[0]
    end = next((i for i in range(start + 1, len(cells))
                if cells[i]["cell_type"] == "markdown" and HEADING.search(_text(cells[i]))), len(cells))
    return start, end


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("fragment", nargs="?", default=str(ROOT / "fragments" / "09_exercises.ipynb"))
    parser.add_argument("chapter", nargs="?", default=str(ROOT / "notebooks" / "09_gpt.ipynb"))
    parser.add_argument("--check", action="store_true", help="print what would be replaced, change nothing")
    parser.add_argument("--force", action="store_true", help="replace a section that holds code or exercises")
    args = parser.parse_args(argv)
    fragment_path, chapter_path = Path(args.fragment), Path(args.chapter)
    fragment = json.loads(fragment_path.read_text(encoding="utf-8"))
    chapter = json.loads(chapter_path.read_text(encoding="utf-8"))
    f_start, f_end = section(fragment["cells"], str(fragment_path))
    c_start, c_end = section(chapter["cells"], str(chapter_path))
    replaced = chapter["cells"][c_start:c_end]
    print(f"{chapter_path.name}: replacing cells {c_start + 1}-{c_end} ({len(replaced)} cells):")
    for cell in replaced:
        print(f"  --- {cell['cell_type']}\n" + "\n".join("  | " + line for line in _text(cell).splitlines()))
    substantial = [c for c in replaced if c["cell_type"] == "code" or "{exercise}" in _text(c)]
    if substantial and not args.force:
        print(f"refused: the chapter's section holds {len(substantial)} code or exercise cell(s); "
              "pass --force to replace them anyway")
        return 1
    if args.check:
        return 0
    chapter["cells"][c_start:c_end] = fragment["cells"][f_start:f_end]
    chapter_path.write_text(dumps(normalise(chapter, chapter_path.stem)), encoding="utf-8")
    print(f"wrote {chapter_path} with {f_end - f_start} exercise cells from {fragment_path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
