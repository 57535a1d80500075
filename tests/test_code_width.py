"""Code that fits the site's code column: every code line of every notebook is at most 79 chars.

At 1280x900 a code cell shows 83 monospace characters (13 px, book/_ext/static/site.css; the
browser test in test_site.py measures it on every page), so 79-character lines never scroll
sideways. `python tools/notebook_width.py` reports the long lines, `--fix` wraps them with ruff.
"""

from __future__ import annotations

import ast
import sys

import nbformat
import pytest

from helpers import ROOT, book_notebooks

sys.path.insert(0, str(ROOT / "tools"))
from notebook_width import LIMIT, fix_notebook, long_lines  # noqa: E402

NOTEBOOKS = book_notebooks()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_code_lines_fit_the_code_column(path):
    notebook = nbformat.read(str(path), as_version=4)
    found = long_lines(notebook)
    report = "\n".join(f"  cell {i}, line {n}: {length} chars: {line.strip()[:70]}" for i, n, length, line in found)
    assert not found, (f"{len(found)} code line(s) of {path.name} are longer than {LIMIT} characters "
                       f"(run python tools/notebook_width.py --fix {path.relative_to(ROOT)}):\n{report}")


def test_the_fixer_wraps_long_lines_without_changing_the_code(tmp_path):
    long_call = ("result = some_function(first_argument_name, second_argument_name, "
                 "third_argument_name, fourth=4)  # (B, T, C)")
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("A markdown line that is longer than seventy-nine characters is fine here."),
        nbformat.v4.new_code_cell("x = 1\n" + long_call),
        nbformat.v4.new_code_cell("short = 2"),
    ])
    path = tmp_path / "long.ipynb"
    nbformat.write(notebook, str(path))
    assert [(i, n) for i, n, *_ in long_lines(notebook)] == [(1, 2)]

    assert fix_notebook(path) == 1
    fixed = nbformat.read(str(path), as_version=4)
    assert long_lines(fixed) == []
    assert ast.dump(ast.parse(fixed.cells[1].source)) == ast.dump(ast.parse(notebook.cells[1].source))
    assert "# (B, T, C)" in fixed.cells[1].source, "the shape comment must survive"
    assert fixed.cells[2].source == "short = 2" and fixed.cells[0].source == notebook.cells[0].source
