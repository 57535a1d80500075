"""What each student gets back, and the written answers gathered for the instructor.

* :func:`exercise_reports`: per exercise of one graded notebook its number, title, points and the
  diagnosis, one line per hidden test in the self-check's own format (``PASS`` / ``FAIL name:
  hint`` / ``WAIT name: not checked until the values are right``); a hint already given for an
  earlier test is not repeated. The same lines feed ``feedback/<student>.md`` and Gradescope's
  per-exercise ``output``.
* :func:`feedback_markdown`: ``feedback/<student>.md``. Everything a student's code could have
  influenced (error messages, the self-check's printed output) sits in fenced text blocks that
  nothing inside can close, so it cannot add headings, links or images to the file; paths of the
  grader's machine are removed.
* **Every self-check's output reaches the page** (:func:`complete_self_checks`). Cells that run
  after the grader's first hidden-test call lose their outputs in the graded run (the student's
  code has seen the tests' inputs by then and could print them, from the answer or from a
  replaced ``sys.stdout``, during a later self-check). For every exercise that lost points and
  whose self-check ran after that moment, the grader runs the notebook once more in a fresh
  sandbox, up to that self-check, **without any hidden test**: that run never receives a hidden
  input, so what its self-checks print can be shown. An exercise with full marks is not run again
  (the page says so).
* :func:`written_answers` reads the answers to the written exercises from a submitted notebook (the
  release's "Your answer" cell and the Markdown cells the student added after it);
  :func:`written_markdown` writes ``written/<label>.md``: the exercise, then one section per
  student with the points the manual points file gives and the answer in a fenced text block.
  Any Unicode is accepted (a lone surrogate becomes U+FFFD), every kind of line break (CR, CRLF,
  U+2028, U+2029, NEL, VT, FF) becomes one newline and other control characters show as
  ``\\xNN``, so the answer renders as the text it is: it can add no heading, image, link or
  section, whatever Markdown renderer the instructor uses.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from .markup import cell_text
from .report import md_cell, md_name, plural, scrub

__all__ = ["ExerciseReport", "exercise_reports", "test_lines", "feedback_markdown", "written_answers",
           "written_markdown", "clean", "plain_text", "fenced", "self_check_outputs", "dropped_self_checks",
           "rerun_self_checks", "complete_self_checks", "self_check_section", "ANSWER_PLACEHOLDER",
           "VALUES_FIRST"]

#: the text of the release's empty answer cell of a written exercise
ANSWER_PLACEHOLDER = "**Your answer:** (double-click to write here)"
#: what a test says that cannot be judged before the answer's values are right
VALUES_FIRST = "not checked until the values are right"
SAME = "the same mistake as above"
MAX_TEXT = 4000

_PATH = re.compile(r"(?<![\w.])(?:/[\w.@+~-]+){2,}/?")
#: every line break Python, Unicode or a Markdown renderer knows: CR LF, CR, LF, VT, FF, the
#: file/group/record separators, NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROL = re.compile("[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f]")
WRAP = 100  # a written answer's lines are wrapped at spaces to this width (readable in a text editor)


def plain_text(text: str) -> str:
    """Any text as plain lines: lone surrogates -> U+FFFD, every line break -> ``\\n``, other
    control characters (ESC, NUL, BS, ...) -> ``\\xNN``; tabs and letters of every script stay."""
    text = _LINE_BREAK.sub("\n", scrub(str(text)))
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def clean(text: str, limit: int = 600) -> str:
    """One line of text: whitespace collapsed, paths of the grader's machine removed, capped."""
    text = _PATH.sub("(a path)", " ".join(plain_text(text).split()))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fenced(text: str, info: str = "text") -> str:
    """``text`` as a fenced code block that nothing inside can close (its fence is longer than
    any run of backticks in the text): a Markdown renderer shows the text as it is."""
    text = plain_text(text).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _wrapped(text: str) -> str:
    """Long lines wrapped at spaces (indentation kept, words never split)."""
    out = []
    for line in text.split("\n"):
        if len(line) <= WRAP:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        out += textwrap.wrap(line, WRAP, initial_indent="", subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False, expand_tabs=False, replace_whitespace=False) or [line]
    return "\n".join(out)


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
    self_check: str = ""  # what the exercise's self-check printed (see self_check_heading)
    self_check_heading: str = ""  # which run the self-check's output comes from
    self_check_note: str = ""  # why the self-check's output is not shown ("" when it is, or never ran)
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
        report.self_check = plain_text((record.get("self_check") or {}).get(ex.label, ""))
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
        _describe_self_check(report, record)
        reports.append(report)
    return reports


SELF_CHECK_GRADED = "Your self-check, as it ran when your notebook was graded:"
SELF_CHECK_RERUN = "Your self-check, as it ran in a second run of your notebook, without the grader's tests:"
#: why the graded run keeps no output of a later self-check (the module's docstring)
SELF_CHECK_KEPT_BACK = "Your self-check's output is not shown: it ran after the grader's tests had started"


def _describe_self_check(report: ExerciseReport, record: dict) -> None:
    """Where the self-check's output comes from, or why there is none."""
    rerun = set(record.get("self_check_rerun") or [])
    dropped = set(record.get("self_check_dropped") or [])
    if report.self_check.strip():
        report.self_check_heading = SELF_CHECK_RERUN if report.label in rerun else SELF_CHECK_GRADED
    elif report.label in dropped and not record.get("error"):
        if report.points is not None and report.points >= report.max:
            report.self_check_note = f"{SELF_CHECK_KEPT_BACK}, and with full marks it was not run again."
        else:
            stop = clean(record.get("self_check_rerun_stop") or "", 300)
            report.self_check_note = (f"{SELF_CHECK_KEPT_BACK}, and a second run without the tests "
                                      + (f"did not show it: {stop}." if stop else "printed nothing for it."))


def self_check_section(report: ExerciseReport) -> List[str]:
    """The self-check's part of an exercise's feedback as plain lines (Gradescope's output)."""
    if report.self_check.strip():
        return [report.self_check_heading or SELF_CHECK_GRADED, report.self_check.strip("\n")]
    return [report.self_check_note] if report.self_check_note else []


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
             f"**{md_name(student)}**: {_points_phrase(got, top)}"
             + (f" so far ({len(pending)} written exercise{'s' if len(pending) != 1 else ''} "
                "not graded yet)." if pending else "."), ""]
    if notes:
        lines += ["What the grader noticed about the whole notebook:", "", fenced("\n".join(clean(n) for n in notes)), ""]
    for report in reports:
        if report.kind == "written" and report.max == 0 and report.points is None:
            continue  # a written exercise worth no points and not graded: nothing to say
        kind = " (written, graded by hand)" if report.kind == "written" else ""
        lines += [f"## Exercise {report.number}: {md_cell(report.title)}{kind}: "
                  f"{_points_phrase(report.points, report.max)}", ""]
        if report.kind == "written":
            if report.comment:
                lines += ["Comment:", "", fenced(report.comment), ""]
            continue
        text = []
        for status, name, hint in report.lines:
            shown = "...." if status == "WAIT" else status
            text.append(f"{shown}  {clean(name, 200)}" + (f": {hint}" if hint else ""))
        lines += ["The grader's tests (they decide the points):", "", fenced("\n".join(text)), ""]
        if report.self_check.strip():
            lines += [report.self_check_heading or SELF_CHECK_GRADED, "", fenced(report.self_check[:MAX_TEXT]), ""]
        elif report.self_check_note:
            lines += [md_cell(report.self_check_note, 600), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


# ------------------------------------------------------------------------------------------------
# The self-checks' outputs
# ------------------------------------------------------------------------------------------------


def _check_label(cell) -> str:
    info = (cell.get("metadata") or {}).get("attention_book_grader") or {}
    return info.get("exercise", "") if info.get("role") == "check" else ""


def _kept_back(output) -> bool:
    from .runner import HIDDEN_OUTPUTS_NOTE

    return output.get("output_type") == "stream" and output.get("text") == HIDDEN_OUTPUTS_NOTE


def self_check_outputs(cells: List[dict], limit: int = 4000, before: Optional[int] = None) -> Dict[str, str]:
    """What each exercise's self-check cell printed (text only, capped): the student's feedback
    shows the diagnosis in the self-check's own words. Nothing here decides a point. With
    ``before``, only cells up to that index count (later ones ran after the hidden tests began,
    even where ``--keep-all-outputs`` kept their outputs for the instructor)."""
    found: Dict[str, str] = {}
    for index, cell in enumerate(cells):
        label = _check_label(cell)
        if not label or (before is not None and index > before):
            continue
        texts = []
        for output in cell.get("outputs", []):
            if _kept_back(output):  # ran after the hidden tests began: not kept
                continue
            if output.get("output_type") == "stream":
                texts.append(cell_text({"source": output.get("text", "")}))
            elif output.get("output_type") in ("execute_result", "display_data"):
                texts.append(cell_text({"source": (output.get("data") or {}).get("text/plain", "")}))
            elif output.get("output_type") == "error":
                texts.append(f"{output.get('ename', 'Error')}: {output.get('evalue', '')}")
        text = "\n".join(t.rstrip("\n") for t in texts if t.strip())
        found[label] = plain_text(found.get(label, "") + "\n" + text).strip("\n")[:limit]
    return found


def dropped_self_checks(cells: List[dict], first_call_cell: Optional[int]) -> List[str]:
    """Exercises whose self-check cell ran (it has outputs) after the hidden tests began."""
    if first_call_cell is None:
        return []
    return list(dict.fromkeys(_check_label(cell) for index, cell in enumerate(cells)
                              if index > first_call_cell and _check_label(cell) and cell.get("outputs")))


def rerun_self_checks(cells: List[dict], labels: Sequence[str], options,
                      course_root) -> Tuple[Dict[str, str], str, bool]:
    """Run ``cells`` again in a fresh sandbox, up to the last self-check cell of ``labels``, with
    **no hidden test** (no call ever reaches that kernel, so nothing it prints can hold a test's
    input). The sandbox is the graded run's (``options`` as they are: the same isolation,
    system-call filter, fresh keyring and limits; only its cgroup's name differs). Returns what
    those self-checks printed, why the run stopped early ("" if it did not) and whether a time
    limit stopped it (a longer limit may show more: the record is graded again)."""
    import copy
    import dataclasses

    from .runner import run_notebook

    wanted = set(labels)
    ends = [i for i, cell in enumerate(cells) if _check_label(cell) in wanted]
    if not ends:
        return {}, "", False
    fresh = []
    for cell in cells[: ends[-1] + 1]:
        again = {key: copy.deepcopy(value) for key, value in cell.items() if key != "outputs"}
        again["outputs"] = []
        fresh.append(again)
    result = run_notebook(fresh, {}, lambda point_labels, session: None,
                          dataclasses.replace(options, slot=f"{options.slot}-checks"), course_root)
    found = self_check_outputs(fresh)
    return {label: found.get(label, "") for label in labels}, result.stop or "", result.timed_out


def complete_self_checks(record: dict, cells: List[dict], run, tests, points_for, options, course_root) -> None:
    """Fill ``record`` so that every exercise's self-check output reaches the feedback, or the
    feedback says why not (module docstring): ``self_check``, ``self_check_dropped`` (self-checks
    that ran after the hidden tests began, ``run.first_call_cell``), ``self_check_rerun`` (outputs
    from the run without tests), ``self_check_rerun_stop``, ``self_check_rerun_off`` (the
    exercises that needed the second run while ``options.self_check_rerun`` was off) and
    ``self_check_rerun_timed_out`` (a time limit cut it): the last two tell a later run with other
    options to grade the notebook again (:func:`.grade.grade_folder`). ``run`` is the graded run's
    :class:`~.runner.RunResult`: a run that stopped early or misbehaved (flooded its outputs, sent
    refused replies, hit the memory limit, left processes) is not made a second time."""
    from .runner import COULD_NOT_RUN
    from .scoring import score_exercise

    record["self_check_rerun_off"] = []  # self-checks a second run would show, had it not been turned off
    record["self_check_rerun_timed_out"] = False  # the second run was cut by a time limit
    first_call_cell = run.first_call_cell
    record.setdefault("self_check", {}).update(self_check_outputs(cells, before=first_call_cell))
    dropped = dropped_self_checks(cells, first_call_cell)
    record["self_check_dropped"] = dropped
    lost = []
    for label in dropped:
        top = points_for(label)
        points, _ = score_exercise((record.get("results") or {}).get(label), tests.get(label, []), top,
                                   (record.get("reasons") or {}).get(label, ""),
                                   (record.get("notes") or {}).get(label, ""), (record.get("zero") or {}).get(label, ""))
        if points < top:
            lost.append(label)
    if not lost:
        return
    # a flood, refused replies, the memory limit, processes left behind: no second helping (an
    # answer that changed its inputs in place is an honest mistake, and its hints help most)
    misbehaved = [flag for flag in run.flags if "in place" not in flag] or run.escaped
    if run.stop or misbehaved:
        record["self_check_rerun_stop"] = "it was not made, since the graded run " + (
            "stopped early" if run.stop else "was flagged (see above)")
        return
    if not getattr(options, "self_check_rerun", True):
        record["self_check_rerun_stop"] = "the instructor turned that second run off"
        record["self_check_rerun_off"] = lost  # graded again by a run that turns it on
        return
    texts, stop, timed_out = rerun_self_checks(cells, lost, options, course_root)
    record["self_check_rerun_timed_out"] = timed_out
    if stop.startswith(COULD_NOT_RUN):  # the grader's failure, not the notebook's: the next run tries again
        record["retry"] = True
    record["self_check"].update({label: text for label, text in texts.items() if text.strip()})
    record["self_check_rerun"] = [label for label in lost if texts.get(label, "").strip()]
    if stop:
        record["self_check_rerun_stop"] = stop


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


def _quote(text: str) -> List[str]:
    """The course's own Markdown (an exercise's prompt) as a quote."""
    return [("> " + line).rstrip() for line in plain_text(text).split("\n")]


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
        lines += ["The exercise, as the students read it:", ""] + _quote(prompt.strip()) + [""]
    answered = sum(1 for e in entries if str(e["answer"]).strip())
    lines += [f"{answered} of {plural(len(entries), 'student')} answered.", ""]
    for entry in entries:
        lines += [f"## {md_name(entry['student'])}: {_points_phrase(entry['points'], top)}", ""]
        answer = plain_text(entry["answer"]).strip("\n")
        lines += ([fenced(_wrapped(answer))] if answer.strip() else ["(no answer)"]) + [""]
        if entry.get("comment"):
            lines += [f"Comment: {md_cell(entry['comment'], 1000)}", ""]
    return "\n".join(lines).rstrip("\n") + "\n"
