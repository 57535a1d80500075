"""What the chapter self-check tests share: the chapter's own solution code and a verdict's hints.

``solution_code(chapter, label)`` reads the solution cell of an exercise from the chapter notebook
(the cell after its ``{solution-start}``), so the tests check the very code the book shows.
"""

from __future__ import annotations

import re
from functools import lru_cache

import nbformat

from helpers import ROOT


def notebook_path(chapter: str):
    """``chapter``: "03" -> notebooks/03_*.ipynb."""
    return next((ROOT / "notebooks").glob(f"{chapter}_*.ipynb"))


@lru_cache(maxsize=None)
def _cells(chapter: str):
    """``chapter``: "03" (notebooks/03_*.ipynb)."""
    return nbformat.read(str(notebook_path(chapter)), as_version=4).cells


def solution_cell(chapter: str, label: str):
    """The solution code cell of exercise ``label`` in chapter ``chapter`` ("03"): the code cell after
    its ``{solution-start}``."""
    cells = _cells(chapter)
    for index, cell in enumerate(cells):
        if cell.cell_type == "markdown" and re.search(r"\{solution-start\}\s+" + re.escape(label) + r"\b",
                                                      cell.source):
            return next(c for c in cells[index + 1:] if c.cell_type == "code")
    raise AssertionError(f"no {{solution-start}} {label} in chapter {chapter}")


def solution_code(chapter: str, label: str) -> str:
    """Source of the solution code cell of exercise ``label`` in chapter ``chapter`` ("03")."""
    code = solution_cell(chapter, label)
    assert "solution" in code.metadata.get("tags", []), f"{label}: solution cell not tagged"
    return "import torch\n" + code.source


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


def assert_random_state_untouched(run, chapter: str, checks: dict, wrong_answers: dict = None):
    """Running the self-checks on the chapter's solutions (and, if given, on the first wrong answer
    of each exercise) leaves torch's global random state as it was: the reader's seeds still hold."""
    import torch

    torch.manual_seed(42)
    expected = torch.rand(3)
    torch.manual_seed(42)
    for label in checks:
        run(label, solution_code(chapter, label))
    for label, answers in (wrong_answers or {}).items():
        run(label, answers[0].code, answers[0].name)
    assert torch.equal(torch.rand(3), expected), "a self-check changed the global random state"


def answer_runner(checks: dict):
    """``run(label, code, name)``: run an answer's source like a cell, then its self-check on it."""
    from wrong_answers import load_answer

    def run(label, code, name="answer"):
        check, names = checks[label]
        namespace = load_answer(code, name)
        return check(*[namespace[n] for n in names])

    return run


def fixture_tests(chapter: str, checks: dict, wrong_answers: dict) -> dict:
    """The tests every chapter's self-checks get, for ``globals().update(...)`` in its test module.

    ``checks`` maps a label to ``(self-check, names of the answer's objects it takes)``. Returns four
    tests: the chapter's own solution passes,
    its student stub is "not implemented yet", every coding exercise has six wrong answers, and every
    wrong answer fails with its hint (a non-attempt scoring exactly 0).
    """
    import pytest

    from attention_book.checks import HISTORY

    cases = [(label, answer) for label, answers in wrong_answers.items() for answer in answers]
    run = answer_runner(checks)

    @pytest.mark.parametrize("label", list(checks))
    def test_the_chapters_solution_passes(label):
        verdict = run(label, solution_code(chapter, label), f"solution {label}")
        assert verdict.ok, str(verdict)
        assert verdict.score == 1.0
        assert HISTORY[label] is verdict

    @pytest.mark.parametrize("label", list(checks))
    def test_the_student_stub_is_not_implemented(label):
        verdict = run(label, stub_code(solution_code(chapter, label), label), f"stub {label}")
        assert verdict.not_implemented, str(verdict)
        assert verdict.score == 0.0
        assert "not implemented yet" in str(verdict)

    def test_every_coding_exercise_has_six_wrong_answers():
        assert set(wrong_answers) == set(checks)
        for label, answers in wrong_answers.items():
            assert len(answers) >= 6, label
            assert len({a.name for a in answers}) == len(answers), f"{label}: duplicate names"

    @pytest.mark.parametrize("label,answer", cases, ids=[f"{label}:{a.name}" for label, a in cases])
    def test_wrong_answer_fails_with_its_hint(label, answer):
        verdict = run(label, answer.code, answer.name)
        assert not verdict.ok, f"{answer.name} passed every check"
        assert answer.hint.lower() in hints(verdict).lower(), str(verdict)
        if answer.non_attempt:
            assert verdict.score == 0.0, str(verdict)
        else:
            assert verdict.score < 1.0

    return {name: value for name, value in locals().items() if name.startswith("test_")}


# ---------------------------------------------------------------- the grader's view of one answer


@lru_cache(maxsize=None)
def chapter_definitions(chapter: str) -> dict:
    """The chapter notebook's imports, functions and classes run top to bottom (the answer cells
    hold the solution): the namespace the grader's hidden tests see, without training or plots."""
    import ast
    import contextlib
    import io

    ns: dict = {"__name__": "__main__"}
    for cell in _cells(chapter):
        if cell.cell_type != "code":
            continue
        tree = ast.parse("".join(line for line in cell.source.splitlines(True)
                                 if not line.lstrip().startswith(("%", "!"))))
        tree.body = [node for node in tree.body
                     if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
        with contextlib.redirect_stdout(io.StringIO()):
            exec(compile(tree, str(notebook_path(chapter)), "exec"), ns)  # noqa: S102 - the course's code
    return ns


def hidden_verdict(chapter: str, label: str, code: str, name: str = "answer"):
    """``(results, zero_reasons)``: the grader's hidden tests of ``label`` run on the answer ``code``
    (its names replace the chapter's solution), and why the grader's source rules give it 0
    (imports the course package, breaks the exercise's rule) - empty when none applies."""
    from attention_book.instructor.grade import run_tests
    from attention_book.instructor.hidden import LocalSession, load_hidden_tests
    from attention_book.instructor.planning import rule_violations, scan_code
    from wrong_answers import load_answer

    tests = load_hidden_tests(ROOT / "instructor" / "hidden_tests" / f"ch{chapter}.py")[label]
    reference = LocalSession(dict(chapter_definitions(chapter)))
    ns = dict(chapter_definitions(chapter))
    ns.update({k: v for k, v in load_answer(code, name).items() if k != "__builtins__"})
    results = run_tests(tests, LocalSession(ns, code), reference)
    zero = [flag for flag in scan_code(code, set()) if "course package" in flag]
    zero += [message for message, _ in rule_violations(label, code, [code], [])]
    zero += own_work_rule_zero(label, tests, code, ns, reference)
    return results, zero


def own_work_rule_zero(label: str, tests, code: str, ns: dict, reference) -> list:
    """The reasons the own-work run gives 0 for the exercise's rule on operations (the grader's
    clean_room.decide, here on the same namespace): what the answer's traced calls and probes do."""
    from attention_book.checks.rules import rule
    from attention_book.instructor.clean_room import CleanSession, decide
    from attention_book.instructor.grade import run_tests
    from attention_book.instructor.hidden import LocalSession

    if rule(label).ops is None:
        return []
    session = CleanSession(LocalSession(dict(ns), code), rule(label))
    record: dict = {"results": {}, "zero": {}, "answer_flags": {}, "flags": []}
    decide(record, label, tests, run_tests(tests, session, reference), session.findings)
    return [record["zero"][label]] if label in record["zero"] else []


def hidden_score(results, label: str, zero=()) -> float:
    """The fraction of the points the grader gives (0 when a source rule applies)."""
    from attention_book.instructor.hidden import load_hidden_tests
    from attention_book.instructor.scoring import score_exercise

    tests = load_hidden_tests(ROOT / "instructor" / "hidden_tests" / f"ch{label[3:5]}.py")[label]
    points, _ = score_exercise(results, tests, 1.0, zero_reason=zero[0] if zero else "")
    return points


def answer_tests(chapter: str, checks: dict, wrong_answers: dict, correct_answers: dict) -> dict:
    """Tests of unusual right answers and of the grader's agreement, for ``globals().update(...)``.

    ``correct_answers``: label -> {name: code}. Each right answer passes the self-check and earns
    every hidden point; a wrong answer named ``the-given-bug...`` (a find-the-bug exercise's code
    as given) fails the exercise's main hidden test, its first registered non-guard test."""
    import pytest

    from attention_book.instructor.hidden import load_hidden_tests

    run = answer_runner(checks)
    right = [(label, name, code) for label, answers in correct_answers.items() for name, code in answers.items()]
    given = [(label, answer) for label, answers in wrong_answers.items() for answer in answers
             if answer.name.startswith("the-given-bug")]

    @pytest.mark.parametrize("label,name,code", right, ids=[f"{label}:{name}" for label, name, _ in right])
    def test_unusual_right_answers_pass_the_self_check(label, name, code):
        verdict = run(label, code, name)
        assert verdict.ok, str(verdict)

    @pytest.mark.parametrize("label,name,code", right, ids=[f"{label}:{name}" for label, name, _ in right])
    def test_unusual_right_answers_earn_every_hidden_point(label, name, code):
        results, zero = hidden_verdict(chapter, label, code, name)
        assert not zero, zero
        assert all(r["passed"] for r in results), [r for r in results if not r["passed"]]

    @pytest.mark.parametrize("label,answer", given, ids=[label for label, _ in given])
    def test_the_given_bug_fails_the_main_hidden_test(label, answer):
        tests = load_hidden_tests(ROOT / "instructor" / "hidden_tests" / f"ch{chapter}.py")[label]
        main = next(test.name for test in tests if not test.guard)
        results, _ = hidden_verdict(chapter, label, answer.code, answer.name)
        assert not next(r for r in results if r["name"] == main)["passed"], f"{label}: {main} passes the bug"

    return {name: value for name, value in locals().items() if name.startswith("test_")}
