"""The gradebook of one assignment: one row per student, ready for a learning platform.

Three files, written into the assignment's output folder by ``attention-book grade``:

* ``gradebook.csv``: ``student``, one column per exercise (its number, ``3.1``), ``total``,
  ``max``. The autograded exercises come from the records; written exercises (graded by hand) come
  from the **manual points file**; a blank cell is "not graded yet". Moodle imports it as it is
  (Grades > Import > CSV file: map ``student`` to the user field the file names hold, the
  exercise or ``total`` columns to grade items, ``max`` to "ignore").
* ``gradebook-canvas.csv``: the same students in the layout Canvas's gradebook import reads
  (``Student, ID, SIS User ID, SIS Login ID, Section`` and one assignment column, plus the
  ``Points Possible`` row); the student's name goes into ``Student`` and ``SIS Login ID``.
* ``manual-points.csv``: written once, when missing, as a template for the instructor (one row
  per student and written exercise, ``points`` empty). It is never overwritten: it is the
  instructor's file. ``--manual FILE`` reads another one.

:func:`read_manual_points` validates the manual file: unknown students or exercises, points that
are not numbers, negative or above the exercise's points, and repeated rows are errors
(``ManualPointsError``, a ``ValueError`` whose message names the file, the line and the fix).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

__all__ = ["ManualPointsError", "ManualPoints", "read_manual_points", "manual_template", "gradebook_csv",
           "canvas_csv", "MANUAL_FILE", "GRADEBOOK_COLUMNS"]

MANUAL_FILE = "manual-points.csv"
MANUAL_COLUMNS = ["student", "exercise", "number", "title", "max", "points", "comment"]
GRADEBOOK_COLUMNS = ["student", "total", "max"]  # + one column per exercise between student and total


class ManualPointsError(ValueError):
    """The manual points file has a problem (the message says where and how to fix it)."""


@dataclass
class ManualPoints:
    """Points an instructor gave by hand: ``{(student, exercise label): points}``."""

    path: Optional[Path] = None
    points: Dict[Tuple[str, str], float] = field(default_factory=dict)
    comments: Dict[Tuple[str, str], str] = field(default_factory=dict)

    def get(self, student: str, label: str) -> Optional[float]:
        return self.points.get((student, label))


def _number(text: str) -> Optional[float]:
    try:
        value = float(text.strip().replace(",", "."))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def read_manual_points(path: Path, students: Sequence[str], exercises: Sequence, points_for,
                       points_file: str = "instructor/points.toml") -> ManualPoints:
    """Read and check ``path`` (CSV with at least the columns ``student``, ``exercise``, ``points``).

    ``exercises``: the assignment's written exercises (objects with ``label``, ``number``,
    ``title``); ``points_for(label)`` their maximum. ``exercise`` may be the label
    (``ex-03-variance``) or the number (``3.5``); an empty ``points`` cell is "not graded yet".
    """
    path = Path(path)
    if not path.is_file():
        raise ManualPointsError(f"--manual {path}: no such file (start from the {MANUAL_FILE} the grader "
                                "writes into the output folder)")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ManualPointsError(f"{path} is not UTF-8 text: save it as CSV (UTF-8)") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise ManualPointsError(f"{path} is empty: it needs the header student,exercise,points")
    header = [cell.strip().lower() for cell in rows[0]]
    missing = [name for name in ("student", "exercise", "points") if name not in header]
    if missing:
        raise ManualPointsError(f"{path}, line 1: the header lacks the column(s) {', '.join(missing)}; "
                                f"it must name at least student,exercise,points (got {','.join(rows[0])})")
    col = {name: header.index(name) for name in ("student", "exercise", "points")}
    comment_col = header.index("comment") if "comment" in header else None
    by_key = {}
    for ex in exercises:
        by_key[ex.label] = ex
        by_key[ex.number] = ex
        by_key[f"Exercise {ex.number}"] = ex
    known_students = set(students)
    result = ManualPoints(path)
    problems: List[str] = []
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue  # a blank line
        cells = row + [""] * (len(header) - len(row))
        exercise, given = (cells[col[name]].strip() for name in ("exercise", "points"))
        student = cells[col["student"]]  # exact: `alice ` (alice .ipynb) is not `alice`
        if (student not in known_students and student[:1] == "'"
                and student[1:2] in ("=", "+", "-", "@", "\t", "\r")):
            student = student[1:]  # the template's escape of a name a spreadsheet would run as a formula
            # (a file really named '=alice.ipynb is matched as it is, above)
        where = f"{path.name}, line {line}"
        if student not in known_students:
            close = ", ".join(sorted(s for s in known_students if s.lower() == student.lower())[:3])
            problems.append(f"{where}: unknown student {student!r}" + (f" (did you mean {close}?)" if close else
                            ": use the name of a graded file without .ipynb"))
            continue
        ex = by_key.get(exercise)
        if ex is None:
            choices = ", ".join(f"{e.label} ({e.number})" for e in exercises) or "none in this chapter"
            problems.append(f"{where}: unknown written exercise {exercise!r}: choose one of {choices}")
            continue
        if not given:
            continue  # not graded yet
        value = _number(given)
        top = points_for(ex.label)
        if value is None:
            problems.append(f"{where}: points {given!r} for {student} is not a number: write e.g. 1.5")
        elif value < 0:
            problems.append(f"{where}: points {given} for {student} are negative: give 0 to {top:g}")
        elif value > top:
            fix = (f"give 0 to {top:g}" if top > 0 else
                   f"it is worth 0 points in {points_file}: set `{ex.label} = 2` (or any maximum) there first")
            problems.append(f"{where}: points {given} for {student}, Exercise {ex.number}, exceed its "
                            f"maximum {top:g}: {fix}")
        elif (student, ex.label) in result.points:
            problems.append(f"{where}: {student} has a second row for Exercise {ex.number}: keep one")
        else:
            result.points[(student, ex.label)] = value
            if comment_col is not None and cells[comment_col].strip():
                result.comments[(student, ex.label)] = cells[comment_col].strip()
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        raise ManualPointsError(f"the manual points file {path} has {_plural(len(problems), 'problem')}:\n  {shown}")
    return result


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _csv_text(rows: Sequence[Sequence[str]]) -> str:
    from .report import csv_cell

    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    for index, row in enumerate(rows):
        writer.writerow(row if index == 0 else [csv_cell(v) for v in row])
    return table.getvalue()


def manual_template(students: Sequence[str], exercises: Sequence, points_for) -> str:
    """The manual points file to fill: one row per student and written exercise."""
    rows = [MANUAL_COLUMNS]
    for student in students:
        for ex in exercises:
            rows.append([student, ex.label, ex.number, ex.title, f"{points_for(ex.label):g}", "", ""])
    return _csv_text(rows)


def _points(value: Optional[float]) -> str:
    return "" if value is None else f"{round(value, 2):g}"


def gradebook_rows(entries: Sequence[dict], columns: Sequence) -> List[List[str]]:
    """``entries``: ``{"student", "points": {label: float or None}}``; ``columns``: exercises
    (``label``, ``number``, ``max``). Returns the rows of gradebook.csv, header first."""
    rows = [["student", *[c.number for c in columns], "total", "max"]]
    top = sum(c.max for c in columns)
    for entry in entries:
        cells = [entry["points"].get(c.label) for c in columns]
        total = sum(v for v in cells if v is not None)
        rows.append([entry["student"], *[_points(v) for v in cells], _points(total), _points(top)])
    return rows


def gradebook_csv(entries: Sequence[dict], columns: Sequence) -> str:
    return _csv_text(gradebook_rows(entries, columns))


def canvas_csv(entries: Sequence[dict], columns: Sequence, assignment: str) -> str:
    """Canvas's gradebook import layout: the student columns, one assignment column (the total)
    and the ``Points Possible`` row (which gives a new assignment its maximum)."""
    top = sum(c.max for c in columns)
    rows = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", assignment],
            ["Points Possible", "", "", "", "", _points(top)]]
    for entry in entries:
        cells = [entry["points"].get(c.label) for c in columns]
        total = sum(v for v in cells if v is not None)
        rows.append([entry["student"], "", "", entry["student"], "", _points(total)])
    return _csv_text(rows)
