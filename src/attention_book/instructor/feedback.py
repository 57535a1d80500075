"""What each student gets back, and the written answers gathered for the instructor.

* :func:`exercise_reports`: per exercise of one graded notebook its number, title, points and the
  diagnosis, one line per hidden test in the self-check's own format (``PASS`` / ``FAIL name:
  hint`` / ``WAIT name: not checked until the values are right``); a hint already given for an
  earlier test is not repeated. The same lines feed ``feedback/<student>.md`` and Gradescope's
  per-exercise ``output``.
* :func:`feedback_markdown`: ``feedback/<student>.md``. Everything a student's code could have
  influenced (error messages, the self-check's printed output) sits in fenced text blocks, so it
  cannot add headings or links to the file; paths of the grader's machine are removed.
* :func:`written_answers` reads the answers to the written exercises from a submitted notebook (the
  release's "Your answer" cell and the Markdown cells the student added after it);
  :func:`written_markdown` writes ``written/<label>.md``: the exercise, then one section per
  student with the points the manual points file gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .markup import cell_text
from .report import md_cell, plural

__all__ = ["ExerciseReport", "exercise_reports", "test_lines", "feedback_markdown", "written_answers",
           "written_markdown", "clean", "ANSWER_PLACEHOLDER", "VALUES_FIRST"]

#: the text of the release's empty answer cell of a written exercise
ANSWER_PLACEHOLDER = "**Your answer:** (double-click to write here)"
#: what a test says that cannot be judged before the answer's values are right
VALUES_FIRST = "not checked until the values are right"
SAME = "the same mistake as above"
MAX_TEXT = 4000

_PATH = re.compile(r"(?<![\w.])(?:/[\w.@+~-]+){2,}/?")
_FENCE = re.compile(r"`{3,}|~{3,}")


def clean(text: str, limit: int = 600) -> str:
    """One line of text: whitespace collapsed, paths of the grader's machine removed, capped."""
    text = _PATH.sub("(a path)", " ".join(str(text).split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _block(text: str) -> str:
    """``text`` as a fenced text block that nothing inside can close."""
    return "```text\n" + _FENCE.sub(lambda m: "'" * len(m.group(0)), text.rstrip("\n")) + "\n```"


@dataclass
class ExerciseReport:
    label: str
    number: str
    title: str
    kind: str  # "code" (autograded) or "written" (graded by hand)
    max: float
    points: Optional[float]  # None: a written exercise not graded yet
    message: str = ""  # the grader's one-line message (grades.csv)
    lines: List[Tuple[str, str, str]] = field(default_factory=list)  # (status, test name, text)
    self_check: str = ""  # what the exercise's self-check printed when the notebook was graded
    comment: str = ""  # the instructor's comment (manual points file)


def test_lines(results: Optional[List[dict]], tests, reason: str = "") -> List[Tuple[str, str, str]]:
    """``(status, test name, text)`` per hidden test of an exercise, in the grader's order.

    status: ``PASS``, ``FAIL``, ``WAIT`` (a guard, or a test of a derived property, that cannot
    count before the values are right), ``TODO`` (not implemented) or ``SKIP`` (not run)."""
    by_name: Dict[str, dict] = {}
    for entry in results or []:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            by_name.setdefault(entry["name"], entry)
    values_right = any(by_name.get(t.name, {}).get("passed") is True for t in tests if not t.guard)
    lines: List[Tuple[str, str, str]] = []
    seen: List[str] = []
    for test in tests:
        entry = by_name.get(test.name)
        if entry is None:
            lines.append(("SKIP", test.name, clean(reason or "not run: the notebook stopped before this test")))
        elif entry.get("passed") is True and test.guard and not values_right:
            lines.append(("WAIT", test.name, VALUES_FIRST))
        elif entry.get("passed") is True:
            lines.append(("PASS", test.name, ""))
        elif entry.get("not_implemented") is True:
            lines.append(("TODO", test.name, "not implemented yet"))
        else:
            hint = clean(entry.get("hint") or "failed")
            if hint.startswith(VALUES_FIRST):
                lines.append(("WAIT", test.name, hint))
            else:
                earlier = next((h for h in seen if hint.startswith(h)), None)
                if earlier is None:
                    seen.append(hint)
                lines.append(("FAIL", test.name, hint if earlier is None else SAME + hint[len(earlier):]))
    return lines


def exercise_reports(record: dict, exercises: Sequence, tests: Dict[str, list], points_for,
                     manual=None) -> List[ExerciseReport]:
    """One :class:`ExerciseReport` per exercise in ``exercises`` (coding and written)."""
    from .scoring import score_exercise

    reports = []
    student = record.get("student", "")
    for ex in exercises:
        top = points_for(ex.label)
        if ex.kind == "written":
            given = manual.get(student, ex.label) if manual is not None else None
            comment = (manual.comments.get((student, ex.label), "") if manual is not None else "")
            reports.append(ExerciseReport(ex.label, ex.number, ex.title, "written", top, given,
                                          "graded by hand" if given is not None else "not graded yet",
                                          comment=comment))
            continue
        label_tests = tests.get(ex.label, [])
        report = ExerciseReport(ex.label, ex.number, ex.title, "code", top, 0.0)
        report.self_check = (record.get("self_check") or {}).get(ex.label, "")
        if record.get("error"):  # the whole notebook was not graded: the reason is said once, on top
            report.message = record["error"]
            report.lines = [("FAIL", "the notebook", "not graded (the reason is above)")]
        else:
            zero = (record.get("zero") or {}).get(ex.label, "")
            reason = (record.get("reasons") or {}).get(ex.label, "")
            results = (record.get("results") or {}).get(ex.label)
            report.points, report.message = score_exercise(
                results, label_tests, top, reason, (record.get("notes") or {}).get(ex.label, ""), zero)
            if zero:
                report.lines = [("FAIL", "your own code", clean(zero))]
            elif not label_tests:
                report.lines = [("SKIP", "hidden tests", "none for this exercise: graded by hand")]
            elif results is None:
                report.lines = [("SKIP", "hidden tests", clean(reason or "not evaluated"))]
            elif report.message.startswith("not implemented"):
                report.lines = [("TODO", "your answer", "not implemented yet: replace the line "
                                 "`raise NotImplementedError(...)` with your code")]
            else:
                report.lines = test_lines(results, label_tests, reason)
        reports.append(report)
    return reports


def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{round(value, 2):g}"


def _points_phrase(points: Optional[float], top: float) -> str:
    if points is None:
        return "not graded yet"
    unit = "point" if top == 1 else "points"
    return f"{_fmt(points)} of {top:g} {unit}"


def feedback_markdown(student: str, chapter_title: str, reports: Sequence[ExerciseReport],
                      notes: Sequence[str] = ()) -> str:
    """``feedback/<student>.md``: points and diagnosis per exercise, in the self-check's words."""
    got = sum(r.points for r in reports if r.points is not None)
    top = sum(r.max for r in reports)
    pending = [r for r in reports if r.points is None and r.max > 0]
    lines = [f"# Feedback: {md_cell(chapter_title)}", "",
             f"**{md_cell(student)}**: {_points_phrase(got, top)}"
             + (f" so far ({len(pending)} written exercise{'s' if len(pending) != 1 else ''} "
                "not graded yet)." if pending else "."), ""]
    if notes:
        lines += ["What the grader noticed about the whole notebook:", "", _block("\n".join(clean(n) for n in notes)), ""]
    for report in reports:
        if report.kind == "written" and report.max == 0 and report.points is None:
            continue  # a written exercise worth no points and not graded: nothing to say
        kind = " (written, graded by hand)" if report.kind == "written" else ""
        lines += [f"## Exercise {report.number}: {md_cell(report.title)}{kind}: "
                  f"{_points_phrase(report.points, report.max)}", ""]
        if report.kind == "written":
            if report.comment:
                lines += ["Comment:", "", _block(report.comment), ""]
            continue
        text = []
        for status, name, hint in report.lines:
            shown = "...." if status == "WAIT" else status
            text.append(f"{shown}  {clean(name, 200)}" + (f": {hint}" if hint else ""))
        lines += ["The grader's tests (they decide the points):", "", _block("\n".join(text)), ""]
        if report.self_check.strip():
            lines += ["Your self-check, as it ran when your notebook was graded:", "",
                      _block(report.self_check[:MAX_TEXT]), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------------------------
# Written exercises
# ------------------------------------------------------------------------------------------------


def _exercise_label_of(cell) -> str:
    meta = (cell.get("metadata") or {}).get("attention_book") or {}
    return meta.get("exercise", "") if isinstance(meta, dict) else ""


def _role_of(cell) -> str:
    meta = (cell.get("metadata") or {}).get("attention_book") or {}
    return meta.get("role", "") if isinstance(meta, dict) else ""


def written_answers(nb, labels: Sequence[str], release_nb=None, limit: int = 20_000) -> Dict[str, str]:
    """``{label: answer text}`` for the written exercises ``labels`` of a submitted notebook.

    The answer is the release's answer cell (found by its metadata, else as the first Markdown
    cell after the exercise's heading) plus the Markdown cells the student added right after it;
    the untouched placeholder gives ``""``."""
    cells = list(nb.get("cells") or [])
    release_texts = set()
    if release_nb is not None:
        release_texts = {cell_text(c).strip() for c in release_nb.get("cells", []) if c.get("cell_type") == "markdown"}
    answers: Dict[str, str] = {}
    for label in labels:
        start = next((i for i, c in enumerate(cells) if c.get("cell_type") == "markdown"
                      and _exercise_label_of(c) == label and _role_of(c) == "answer"), None)
        if start is None:  # metadata lost (some editors drop it): the cell after the heading
            heading = next((i for i, c in enumerate(cells) if c.get("cell_type") == "markdown"
                            and f"({label})" in cell_text(c).split("\n", 1)[0]), None)
            if heading is not None and heading + 1 < len(cells) and cells[heading + 1].get("cell_type") == "markdown":
                start = heading + 1
        if start is None:
            answers[label] = ""
            continue
        parts = [cell_text(cells[start])]
        for cell in cells[start + 1:]:
            text = cell_text(cell).strip()
            if cell.get("cell_type") != "markdown" or _exercise_label_of(cell) or text in release_texts:
                break
            parts.append(cell_text(cell))
        text = "\n\n".join(p.strip() for p in parts if p.strip())
        text = text.replace(ANSWER_PLACEHOLDER, "").strip()
        answers[label] = text[:limit]
    return answers


def _quote(text: str, escape: bool = True) -> List[str]:
    """Markdown as a quote; a student's text (``escape``) cannot add headings, sections or raw HTML."""
    safe = text.replace("<", "&lt;") if escape else text
    return [("> " + line).rstrip() for line in safe.split("\n")]


def written_markdown(exercise, prompt: str, entries: Sequence[dict], points_for, manual_name: str) -> str:
    """``written/<label>.md``: ``entries`` are ``{"student", "answer", "points", "comment"}``."""
    top = points_for(exercise.label)
    worth = (f"worth {top:g} point{'s' if top != 1 else ''}" if top > 0 else
             f"worth 0 points: to count it, give it points in instructor/points.toml (`{exercise.label} = 2`)")
    lines = [f"# Exercise {exercise.number}: {md_cell(exercise.title)} ({exercise.label})", "",
             f"Written exercise, {worth}. Give each student's points in the `points` column of "
             f"`{manual_name}` (one row per student and exercise), then grade again (seconds: nothing "
             "runs again): the points appear below, in `gradebook.csv` and in each student's feedback.", ""]
    if prompt.strip():
        lines += ["The exercise, as the students read it:", ""] + _quote(prompt.strip(), escape=False) + [""]
    answered = sum(1 for e in entries if e["answer"])
    lines += [f"{answered} of {plural(len(entries), 'student')} answered.", ""]
    for entry in entries:
        lines += [f"## {md_cell(entry['student'])}: {_points_phrase(entry['points'], top)}", ""]
        lines += (_quote(entry["answer"]) if entry["answer"] else ["(no answer)"]) + [""]
        if entry.get("comment"):
            lines += [f"Comment: {md_cell(entry['comment'], 1000)}", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
