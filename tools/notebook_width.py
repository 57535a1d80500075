"""Report, and optionally wrap, notebook code lines longer than the site's code column.

    python tools/notebook_width.py                      # report every line > 79 chars (exit 1 if any)
    python tools/notebook_width.py --fix notebooks/05_*.ipynb   # wrap them with ruff format

At 1280x900 a code cell of the site shows 83 characters per line (13 px monospace, see
book/_ext/static/site.css); the chapters keep code lines to 79 (PEP 8), so nothing scrolls
sideways. ``--fix`` runs ``ruff format --line-length 79`` on each code cell that has a long line
(only those cells; the notebook's outputs and metadata are kept) and reports what it could not
wrap (long strings and comments: shorten those by hand). tests/test_code_width.py enforces the
limit on every notebook of the book.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 79
# IPython syntax that ruff cannot format: leave such cells to the author.
MAGIC_PREFIXES = ("%", "!", "?")


def long_lines(notebook, limit: int = LIMIT) -> List[Tuple[int, int, int, str]]:
    """``(cell index, line number, length, line)`` of every code line longer than ``limit``."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        for number, line in enumerate(cell.source.splitlines(), start=1):
            if len(line) > limit:
                found.append((index, number, len(line), line))
    return found


def ruff_binary() -> str:
    candidate = Path(sys.executable).parent / "ruff"
    return str(candidate) if candidate.is_file() else "ruff"


def format_cell(source: str, limit: int = LIMIT) -> str:
    """``source`` formatted by ruff at ``limit`` characters per line (unchanged if ruff cannot)."""
    if any(line.lstrip().startswith(MAGIC_PREFIXES) for line in source.splitlines()):
        return source
    result = subprocess.run([ruff_binary(), "format", "--line-length", str(limit), "--stdin-filename", "cell.py", "-"],
                            input=source, capture_output=True, text=True)
    if result.returncode != 0:
        return source
    return result.stdout.rstrip("\n")


def fix_notebook(path: Path, limit: int = LIMIT) -> int:
    """Format the cells of ``path`` that have long lines; return how many cells changed."""
    import nbformat

    notebook = nbformat.read(str(path), as_version=4)
    changed = 0
    for index in sorted({index for index, *_ in long_lines(notebook, limit)}):
        cell = notebook.cells[index]
        formatted = format_cell(cell.source, limit)
        if formatted != cell.source:
            cell.source = formatted
            changed += 1
    if changed:
        nbformat.write(notebook, str(path))
    return changed


def book_notebooks() -> List[Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import book_notebooks as listed

    return listed()


def main(argv=None) -> int:
    import nbformat

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook of the book")
    parser.add_argument("--fix", action="store_true", help="wrap long lines with ruff format (cells with long lines only)")
    parser.add_argument("--limit", type=int, default=LIMIT)
    args = parser.parse_args(argv)
    paths = args.notebooks or book_notebooks()
    total = 0
    for path in paths:
        if args.fix:
            changed = fix_notebook(path, args.limit)
            if changed:
                print(f"{path}: reformatted {changed} cell(s)")
        for index, number, length, line in long_lines(nbformat.read(str(path), as_version=4), args.limit):
            total += 1
            print(f"{path}: cell {index}, line {number}: {length} > {args.limit} chars: {line.strip()[:60]}...")
    print(f"{total} code line(s) longer than {args.limit} characters")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
