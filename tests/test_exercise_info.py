"""Every exercise says how hard it is, how long it takes and what it practises, everywhere.

The one source is the first line of the exercise's body in the chapter notebook
(:mod:`attention_book.instructor.exercise_info`); the student notebooks copy it, the
instructor's table has a column for each part, and the site styles it
(book/_ext/exercise_numbers.py).
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from helpers import ROOT

from attention_book.instructor.course import Course
from attention_book.instructor.exercise_info import (ExerciseInfo, course_infos, exercise_info, info_line,
                                                     parse_info_line)

COURSE = Course.load(ROOT)
EXERCISES = list(COURSE.exercises())


def test_every_exercise_has_an_info_line():
    infos = course_infos(COURSE)
    problems = [info for info in infos.values() if isinstance(info, str)]
    assert not problems, "\n".join(problems)
    assert set(infos) == {ex.label for ex in EXERCISES}


def test_the_info_line_format():
    info = parse_info_line("Difficulty ★★☆ · 15 min · practises: masking before the softmax")
    assert info == ExerciseInfo(2, 15, "masking before the softmax")
    assert info.level == "core" and info.stars == "★★☆"
    assert info_line(info) == "Difficulty ★★☆ · 15 min · practises: masking before the softmax"
    for wrong in ("Difficulty ☆★★ · 15 min · practises: x y", "Difficulty ☆☆☆ · 15 min · practises: x y",
                  "Difficulty ★★☆ · 0 min · practises: x y", "Difficulty ★★☆ · 15 min", "Difficulty 2 · 15 min",
                  "Difficulty ★★ · 15 min · practises: x y"):
        assert parse_info_line(wrong) is None, wrong
    with pytest.raises(ValueError, match="must start with a line like"):
        exercise_info("```{exercise} Title\n:label: ex-01-x\n\nWrite `f`.\n```", "here")


def test_the_chapters_add_up_to_a_plausible_course():
    infos = course_infos(COURSE)
    for chapter in (c for c in COURSE.chapters if c.exercises):
        minutes = sum(infos[ex.label].minutes for ex in chapter.exercises)
        assert 30 <= minutes <= 300, f"{chapter.path}: {minutes} minutes of exercises"
        levels = {infos[ex.label].difficulty for ex in chapter.exercises}
        assert len(levels) >= 2, f"{chapter.path}: every exercise has the same difficulty"


def test_the_student_notebooks_show_the_line():
    infos = course_infos(COURSE)
    for chapter in COURSE.chapters:
        if not chapter.exercises:
            continue
        nb = json.loads((ROOT / "student" / chapter.path).read_text(encoding="utf-8"))
        shown = {}
        for cell in nb["cells"]:
            meta = cell.get("metadata", {}).get("attention_book", {})
            if meta.get("role") == "exercise":
                shown[meta["exercise"]] = "".join(cell["source"])
        for ex in chapter.exercises:
            assert f"> {info_line(infos[ex.label])}" in shown[ex.label], ex.label


def test_the_instructor_table_has_the_columns():
    from attention_book.cli import points_table

    table = points_table(COURSE)
    header = table.splitlines()[0]
    assert "| difficulty | min | practises |" in header
    infos = course_infos(COURSE)
    for ex in EXERCISES:
        info = infos[ex.label]
        row = next(line for line in table.splitlines() if f"(`{ex.label}`)" in line)
        assert f"| {info.stars} {info.level} | {info.minutes} | " in row, row
    page = (ROOT / "book" / "for_instructors.md").read_text(encoding="utf-8")
    assert table in page, "book/for_instructors.md is stale: run attention-book exercises --write-table"


def load_extension():
    spec = importlib.util.spec_from_file_location("exercise_numbers", ROOT / "book" / "_ext" / "exercise_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_extension_styles_the_line():
    from docutils import nodes
    from docutils.utils import new_document
    from sphinx_exercise.nodes import exercise_enumerable_node

    document = new_document("test")
    exercise = exercise_enumerable_node()
    section = nodes.section(ids=["exercise-content"])
    info = nodes.paragraph("", "", nodes.Text("Difficulty ★★☆ · 15 min · practises: masking with "),
                           nodes.literal("", "torch.triu"))
    section += info
    section += nodes.paragraph("", "Write causal_weights(scores).")
    exercise += section
    document += exercise
    load_extension().style_exercise_info(None, document)
    assert "exercise-info" in info["classes"]
    assert isinstance(info.children[0], nodes.raw)
    assert 'aria-label="difficulty 2 of 3 (core)"' in info.children[0].astext()
    assert info.children[1].astext() == " · 15 min · practises: masking with "
    assert info.children[2].astext() == "torch.triu"
    other = section.children[1]
    assert "exercise-info" not in other["classes"]
