"""Every coding exercise of the book has its fixture of plausible wrong answers (tests/wrong_answers)."""

from __future__ import annotations

from attention_book.instructor.course import Course
from helpers import ROOT
from wrong_answers import all_wrong_answers


def test_every_coding_exercise_has_at_least_six_wrong_answers_with_hints():
    course = Course.load(ROOT)
    coding = {ex.label for chapter in course.chapters for ex in chapter.exercises if ex.kind == "code"}
    fixture = all_wrong_answers()
    assert len(coding) >= 27
    missing = sorted(label for label in coding if len(fixture.get(label, [])) < 6)
    assert not missing, f"coding exercises with fewer than six wrong answers: {missing}"
    assert not set(fixture) - coding, f"fixtures for unknown exercises: {sorted(set(fixture) - coding)}"
    for label, answers in fixture.items():
        assert all(answer.hint.strip() for answer in answers), f"{label}: a wrong answer without a hint"
        assert any(answer.non_attempt for answer in answers), f"{label}: no non-attempt in the fixture"
