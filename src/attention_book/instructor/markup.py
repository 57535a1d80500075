"""Read the exercise markup of a chapter notebook: its exercises, solutions and self-check cells.

The markup (see CONTRIBUTING.md) is the single source of truth for the book, the student release
and the autograder:

* an ``{exercise}`` directive with ``:label: ex-NN-slug`` opens an exercise;
* code cells tagged ``solution`` hold the solution between ``# BEGIN SOLUTION`` and
  ``# END SOLUTION`` lines (only those lines are solution code);
* ``{solution-start}`` / ``{solution-end}`` / ``{solution}`` Markdown cells (tagged ``solution``)
  are the book's dropdowns; the release drops them;
* the first untagged code cell after the solution that mentions ``check`` or calls ``chNN.name(``
  is the self-check cell.

:func:`analyse_notebook` returns a :class:`Chapter` with its :class:`Exercise` list;
:func:`strip_solution` is what the release applies to each answer cell. Turning MyST into plain
Markdown is :mod:`attention_book.instructor.myst_markdown` (``convert_markdown`` and
``ConvertContext`` are re-exported here for older imports).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .myst_markdown import TARGET_RE, ConvertContext, convert_markdown, iter_directives

__all__ = [
    "MarkupError",
    "Exercise",
    "Chapter",
    "LABEL_RE",
    "cell_text",
    "iter_directives",
    "analyse_notebook",
    "strip_solution",
    "convert_markdown",
    "ConvertContext",
]

LABEL_RE = re.compile(r"\bex-\d{2}-[a-z0-9]+(?:-[a-z0-9]+)*\b")
BEGIN_RE = re.compile(r"^(?P<indent>[ \t]*)#\s*BEGIN SOLUTION\b")
END_RE = re.compile(r"^[ \t]*#\s*END SOLUTION\b")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CHECK_RE = re.compile(r"check|\bch\d{2}\.\w+\(", re.IGNORECASE)  # a self-check cell

NOT_IMPLEMENTED = 'raise NotImplementedError("{label}: replace this line with your code")'
SOLUTION_TAG = "solution"
DROP_TAG = "book-only"  # cells the release leaves out (e.g. a static-site-only explanation)


class MarkupError(ValueError):
    """The exercise markup of a notebook is inconsistent (the message says where and how to fix it)."""


def cell_text(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def cell_tags(cell) -> List[str]:
    return list(cell.get("metadata", {}).get("tags", []) or [])


# --------------------------------------------------------------------------------------------------
# Exercises
# --------------------------------------------------------------------------------------------------


@dataclass
class Exercise:
    label: str
    title: str
    number: str  # "1.2": chapter 1, second exercise
    notebook: str  # path relative to the book root
    cell: int  # index of the {exercise} cell in the source notebook
    answer_cells: List[int] = field(default_factory=list)  # source cells with solution code
    check_cells: List[int] = field(default_factory=list)  # self-check cells (kept in the release)
    solution_lines: List[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "code" if self.answer_cells else "written"

    def display(self) -> str:
        return f"Exercise {self.number}"


@dataclass
class Chapter:
    path: str  # relative to the book root, e.g. notebooks/01_words_to_vectors.ipynb
    number: Optional[int]
    title: str
    exercises: List[Exercise]
    roles: Dict[int, str]  # cell index -> "exercise" | "answer" | "check" | "drop"
    cell_exercise: Dict[int, str]  # cell index -> exercise label, for answer/check cells
    labels: Dict[str, str] = field(default_factory=dict)  # section target -> heading text

    @property
    def stem(self) -> str:
        return self.path.rsplit("/", 1)[-1].rsplit(".", 1)[0]

    def exercise(self, label: str) -> Exercise:
        for ex in self.exercises:
            if ex.label == label:
                return ex
        raise KeyError(label)


def _chapter_number(stem: str) -> Optional[int]:
    match = re.match(r"^(\d+)", stem)
    return int(match.group(1)) if match else None


def solution_blocks(source: str, where: str) -> List[Tuple[int, int, str]]:
    """``(begin line, end line, indent)`` of every ``# BEGIN SOLUTION`` ... ``# END SOLUTION``."""
    blocks = []
    begin: Optional[Tuple[int, str]] = None
    for number, line in enumerate(source.split("\n")):
        if BEGIN_RE.match(line):
            if begin is not None:
                raise MarkupError(f"{where}: a second `# BEGIN SOLUTION` before `# END SOLUTION`")
            begin = (number, BEGIN_RE.match(line).group("indent"))
        elif END_RE.match(line):
            if begin is None:
                raise MarkupError(f"{where}: `# END SOLUTION` without `# BEGIN SOLUTION` above it")
            blocks.append((begin[0], number, begin[1]))
            begin = None
    if begin is not None:
        raise MarkupError(f"{where}: `# BEGIN SOLUTION` is never closed: add `# END SOLUTION`")
    return blocks


def strip_solution(source: str, label: str, where: str = "cell") -> str:
    """Replace every solution block by ``raise NotImplementedError("<label>: ...")``.

    The raise keeps the indentation of its ``# BEGIN SOLUTION`` line, so it sits inside the
    function body exactly where the solution was.
    """
    lines = source.split("\n")
    out: List[str] = []
    previous = 0
    for begin, end, indent in solution_blocks(source, where):
        out += lines[previous:begin]
        out.append(indent + NOT_IMPLEMENTED.format(label=label))
        previous = end + 1
    out += lines[previous:]
    return "\n".join(out)


def analyse_notebook(nb, path: str) -> Chapter:
    """Find the exercises of a notebook and the role of every cell (raises MarkupError)."""
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    number = _chapter_number(stem)
    title = ""
    exercises: List[Exercise] = []
    roles: Dict[int, str] = {}
    cell_exercise: Dict[int, str] = {}
    labels: Dict[str, str] = {}
    current: Optional[Exercise] = None  # the exercise whose span we are in
    gate: Optional[str] = None  # inside {solution-start} ... {solution-end}
    awaiting_check: Optional[Exercise] = None
    for index, cell in enumerate(nb["cells"]):
        text = cell_text(cell)
        tags = cell_tags(cell)
        where = f"{path}, cell {index + 1}"
        if cell.get("cell_type") == "markdown":
            pending_target = None
            for line in text.split("\n"):
                target = TARGET_RE.match(line)
                if target:
                    pending_target = target.group("label")
                    continue
                heading = HEADING_RE.match(line)
                if heading:
                    if not title and heading.group(1) == "#":
                        title = heading.group(2)
                    if pending_target:
                        labels[pending_target] = heading.group(2)
                    pending_target = None
                    awaiting_check = None
                    if len(heading.group(1)) <= 2 and gate is None:
                        current = None
            drop = SOLUTION_TAG in tags or gate is not None
            for block in iter_directives(text):
                name = block.name
                if name in ("exercise", "exercise-start"):
                    label = block.options.get("label", "").strip()
                    if not label:
                        raise MarkupError(f"{where}: `{{{name}}}` has no `:label: ex-NN-slug` line")
                    if not LABEL_RE.fullmatch(label):
                        raise MarkupError(
                            f"{where}: exercise label {label!r} should look like ex-NN-slug "
                            "(NN = chapter, slug = lowercase words joined by '-')"
                        )
                    if gate is not None:
                        raise MarkupError(
                            f"{where}: `{{solution-start}} {gate}` is never closed before this "
                            "exercise: add a `{solution-end}` cell after the solution"
                        )
                    if any(ex.label == label for ex in exercises):
                        raise MarkupError(f"{where}: exercise label {label!r} is used twice")
                    if number is None:
                        number = int(label[3:5])
                    current = Exercise(
                        label=label,
                        title=block.arg,
                        number=f"{number}.{len(exercises) + 1}",
                        notebook=path,
                        cell=index,
                    )
                    exercises.append(current)
                    roles[index] = "exercise"
                    awaiting_check = None
                elif name == "solution-start":
                    drop = True
                    gate = block.arg.strip() or (current.label if current else None)
                    if gate is None:
                        raise MarkupError(f"{where}: `{{solution-start}}` names no exercise label")
                elif name == "solution-end":
                    drop = True
                    gate = None
                elif name == "solution":
                    drop = True
            if drop:
                roles[index] = "drop"
            continue
        if cell.get("cell_type") != "code":
            continue
        has_markers = bool(re.search(r"(?m)^[ \t]*#\s*(BEGIN|END) SOLUTION", text))
        if SOLUTION_TAG in tags or gate is not None or has_markers:
            label = gate or (current.label if current else None)
            if label is None:
                raise MarkupError(
                    f"{where}: solution code outside any exercise: put it after an "
                    "`{exercise}` cell or name the exercise in `{solution-start} ex-NN-slug`"
                )
            blocks = solution_blocks(text, where)
            if not blocks and gate is not None and SOLUTION_TAG not in tags:
                raise MarkupError(
                    f"{where}: an untagged code cell inside `{{solution-start}} {gate}`: is the "
                    "`{solution-end}` cell missing above it? (or tag the cell `solution` and mark "
                    "its solution lines)"
                )
            if not blocks:
                raise MarkupError(
                    f"{where}: this code cell is a solution (tagged `solution` or inside "
                    "{solution-start}...{solution-end}) but has no `# BEGIN SOLUTION` / "
                    "`# END SOLUTION` lines: mark the lines the release must remove"
                )
            exercise = next((ex for ex in exercises if ex.label == label), None)
            if exercise is None:
                raise MarkupError(f"{where}: solution for {label!r}, which no `{{exercise}}` defines")
            src_lines = text.split("\n")
            for begin, end, _ in blocks:
                exercise.solution_lines += src_lines[begin + 1 : end]
            exercise.answer_cells.append(index)
            roles[index] = "answer"
            cell_exercise[index] = label
            awaiting_check = exercise
            continue
        if awaiting_check is not None and CHECK_RE.search(text):
            awaiting_check.check_cells.append(index)
            roles[index] = "check"
            cell_exercise[index] = awaiting_check.label
            awaiting_check = None
    if gate is not None:
        raise MarkupError(f"{path}: `{{solution-start}} {gate}` is never closed by `{{solution-end}}`")
    return Chapter(path, number, title, exercises, roles, cell_exercise, labels)
