"""What the chapter self-check tests share: the chapter's own solution code and a verdict's hints.

``solution_code(chapter, label)`` reads the solution cell of an exercise from the chapter notebook
(the cell after its ``{solution-start}``), so the tests check the very code the book shows.
"""

from __future__ import annotations

import re
from functools import lru_cache

import nbformat

from helpers import ROOT


@lru_cache(maxsize=None)
def _cells(chapter: str):
    path = next((ROOT / "notebooks").glob(f"{chapter}_*.ipynb"))
    return nbformat.read(str(path), as_version=4).cells


def solution_code(chapter: str, label: str) -> str:
    """Source of the solution code cell of exercise ``label`` in chapter ``chapter`` ("03")."""
    cells = _cells(chapter)
    for index, cell in enumerate(cells):
        if cell.cell_type == "markdown" and re.search(r"\{solution-start\}\s+" + re.escape(label) + r"\b",
                                                      cell.source):
            code = next(c for c in cells[index + 1:] if c.cell_type == "code")
            assert "solution" in code.metadata.get("tags", []), f"{label}: solution cell not tagged"
            return "import torch\n" + code.source
    raise AssertionError(f"no {{solution-start}} {label} in chapter {chapter}")


def stub_code(code: str, label: str) -> str:
    """The student version of a solution: the lines between the markers replaced by the stub."""
    return re.sub(
        r"^(?P<indent>[ \t]*)# BEGIN SOLUTION\n.*?^[ \t]*# END SOLUTION\n?",
        lambda m: f'{m.group("indent")}raise NotImplementedError("{label}")\n',
        code, flags=re.S | re.M,
    )


def hints(verdict) -> str:
    """Every failure message of a verdict, joined (what the reader reads)."""
    return " | ".join(hint for _, hint in verdict.failed)
