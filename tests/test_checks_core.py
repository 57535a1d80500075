"""The self-check machinery: verdicts, partial credit, never raising, the history for the grader."""

from __future__ import annotations

from attention_book.checks.core import HISTORY, Hint, register


@register("ex-00-demo", "Demo")
def demo(answer):
    def positive():
        if answer() <= 0:
            raise Hint("return a positive number")

    def even():
        assert answer() % 2 == 0, "return an even number"

    return [("positive", positive), ("even", even)]


def test_all_pass():
    verdict = demo(lambda: 4)
    assert verdict.ok and verdict.score == 1.0
    assert "Well done" in str(verdict)
    assert HISTORY["ex-00-demo"] is verdict


def test_partial_credit_and_hints():
    verdict = demo(lambda: 3)
    assert not verdict.ok and verdict.score == 0.5
    assert verdict.failed == [("even", "return an even number")]
    assert "hint: return an even number" in str(verdict)
    assert 'data-score="0.500"' in verdict._repr_html_()


def test_not_implemented_scores_zero():
    def stub():
        raise NotImplementedError("ex-00-demo: write your solution here")

    verdict = demo(stub)
    assert verdict.not_implemented and verdict.score == 0.0
    assert "not implemented yet" in str(verdict)


def test_crash_is_reported_not_raised():
    verdict = demo(lambda: 1 / 0)
    assert verdict.score == 0.0
    assert all("ZeroDivisionError" in hint for _, hint in verdict.failed)


def test_crash_while_building_tests_is_reported():
    @register("ex-00-build", "Build")
    def build(answer):
        value = answer()  # the reader's code runs here, before any test exists
        return [("value", lambda: None)] if value else []

    verdict = build(lambda: [][1])
    assert verdict.score == 0.0 and "IndexError" in verdict.failed[0][1]
    assert build(lambda: (_ for _ in ()).throw(NotImplementedError())).not_implemented
