"""What each exercise asks of the learner: its difficulty, the minutes it takes, what it practises.

One source of truth, the first line of the exercise's body in the chapter notebook::

    ```{exercise} Causal weights from scores
    :label: ex-07-causal-softmax

    Difficulty ★★☆ · 15 min · practises: masking before the softmax, torch.triu

    Write `causal_weights(scores)` ...
    ```

The site shows it styled at the top of the exercise box (book/_ext/exercise_numbers.py reads it
with :func:`parse_info_line`), the student notebooks show it as it is written (the release copies
the exercise's text), and the instructor's table of exercises (``attention-book exercises
--write-table``, on book/for_instructors.md) has a column for each part. Difficulty is one to
three stars: ★☆☆ a warm-up (one idea, a few lines), ★★☆ the core of the chapter, ★★★ a
stretch (several ideas at once, or a whole module). Minutes are a first attempt's time for a
reader who has worked through the chapter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

__all__ = ["ExerciseInfo", "INFO_RE", "LEVELS", "parse_info_line", "exercise_info", "info_line",
           "FORMAT"]

#: the line's form; the stars are three of ★ (filled) and ☆ (empty), filled first
INFO_RE = re.compile(
    r"^Difficulty (?P<stars>[★☆]{3}) · (?P<minutes>[1-9][0-9]{0,2}) min · practises: (?P<practises>\S.*\S)$"
)
FORMAT = "Difficulty ★★☆ · 15 min · practises: what the exercise trains, in a few words"
LEVELS = {1: "warm-up", 2: "core", 3: "stretch"}


@dataclass(frozen=True)
class ExerciseInfo:
    difficulty: int  # 1 (warm-up) .. 3 (stretch)
    minutes: int
    practises: str

    @property
    def stars(self) -> str:
        return "★" * self.difficulty + "☆" * (3 - self.difficulty)

    @property
    def level(self) -> str:
        return LEVELS[self.difficulty]


def parse_info_line(line: str) -> Optional[ExerciseInfo]:
    """The info of one line written as :data:`FORMAT`, or None when the line is not one."""
    match = INFO_RE.match(line.strip())
    if match is None:
        return None
    stars = match.group("stars")
    difficulty = stars.count("★")
    if stars != "★" * difficulty + "☆" * (3 - difficulty) or difficulty == 0:
        return None
    return ExerciseInfo(difficulty, int(match.group("minutes")), match.group("practises"))


def _body_lines(cell_text: str):
    """The lines of an ``{exercise}`` cell's body: after the directive line and its options."""
    lines = cell_text.splitlines()
    index = 1  # the ```{exercise} line
    while index < len(lines) and lines[index].lstrip().startswith(":"):
        index += 1
    return [line for line in lines[index:] if line.strip()]


def exercise_info(cell_text: str, where: str = "") -> ExerciseInfo:
    """The info line of an ``{exercise}`` cell; ValueError (saying how to write it) if missing."""
    body = _body_lines(cell_text)
    first = body[0] if body else ""
    info = parse_info_line(first)
    if info is None:
        place = f"{where}: " if where else ""
        raise ValueError(
            f"{place}the exercise's body must start with a line like `{FORMAT}` (one to three "
            f"filled stars ★ then empty ☆, whole minutes), found {first[:80]!r}"
        )
    return info


def info_line(info: ExerciseInfo) -> str:
    """``info`` written as the notebook line (:data:`FORMAT`)."""
    return f"Difficulty {info.stars} · {info.minutes} min · practises: {info.practises}"


def course_infos(course) -> dict:
    """``{label: ExerciseInfo or the ValueError's message}`` for every exercise of ``course``
    (an :class:`attention_book.instructor.course.Course`), read from its chapter notebooks."""
    import nbformat

    found = {}
    for chapter in course.chapters:
        if not chapter.exercises:
            continue
        cells = nbformat.read(str(course.root / chapter.path), as_version=4).cells
        for ex in chapter.exercises:
            try:
                found[ex.label] = exercise_info(cells[ex.cell].source, f"{chapter.path}, {ex.label}")
            except ValueError as err:
                found[ex.label] = str(err)
    return found
