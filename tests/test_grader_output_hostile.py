"""Hostile submissions against the grader's outputs (issue 29 items 2, 5, 6 and 10).

A class of chapter 3 (tests/hostile/output.py) is graded once in a real sandbox, in a grader
process of its own: names that spreadsheets run as formulas, a student called ``Points
Possible``, ``alice`` beside ``alice `` (trailing space), names in other scripts; written answers
that forge sections with bare CRs and every other line break, with images, links, HTML and a lone
surrogate; a notebook whose outputs carry HTML, JavaScript, SVG and widgets; a notebook wrong on
Exercise 3.2 only (its self-check's hints must reach the feedback) and one that records the
grader's hidden inputs and prints them from every answer and every ``print``. Then:

* every cell of grades.csv, gradebook.csv, gradebook-canvas.csv and manual-points.csv is
  neutralised (OWASP) and reads back exactly; the Canvas file has one "Points Possible" row and
  its column is not called "(autograded)"; feedback files have readable names;
* the run completes; written/ex-03-variance.md, rendered by markdown-it (CommonMark, and GFM-like
  with linkify), has exactly one section per student, no heading, link, image or HTML from a
  student, each answer whole in its own block; manual points go to the exact student;
* the executed copy keeps text and images only, is unsigned, and exported to HTML by nbconvert
  carries nothing of the student's outputs but text;
* every exercise's section says what its self-check printed or why not; 3.2's hints are there,
  and no hidden input reaches a page, a record or an executed copy.

The Gradescope case grades the toy chapter's bundle: a wrong second exercise gets its self-check's
output in results.json, a lone surrogate printed by the student does not break the file. The fast
tests at the end check the same properties of the output functions on many generated inputs.
As root and as an unprivileged user (``.ci/run`` runs this module a second time as one).
``tools/hostile_output.py`` runs the same class against an earlier commit's grader.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest
from hypothesis import given
from hypothesis import strategies as st

from attention_book.instructor.course import Course
from attention_book.instructor.feedback import ExerciseReport, feedback_markdown, plain_text, written_markdown
from attention_book.instructor.gradebook import (ManualPointsError, canvas_csv, gradebook_csv, manual_template,
                                                 read_manual_points)
from attention_book.instructor.release import build_release, release_notebook
from attention_book.instructor.report import (atomic_write, csv_cell, csv_value, executed_notebook, md_cell,
                                              printable, shown_name)
from attention_book.instructor.submissions import NAME_BYTES, file_name_part, name_of_file_part, pick_chapter
from helpers import needs_isolation
from hostile import output as attacks
from hostile.harness import grade_in_process

ROOT = Path(__file__).resolve().parents[1]
OPTIONS = dict(chapter="03", jobs=2, quiet=False, timeout=90, tests_timeout=60, check_timeout=20)
LIMITS = dict(processes=64, memory_mb=6144, disk_mb=256, total_memory_mb=2048)
ANSWERS = attacks.ANSWERS


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("output-hostile")
    needs_isolation(base)
    course = Course.load(ROOT)
    chapter = pick_chapter(course, "03")
    source = nbformat.read(str(ROOT / chapter.path), as_version=4)
    release = release_notebook(source, chapter, course.context())
    subs = base / "submissions"
    students = attacks.build_class(subs, source, release, chapter)
    out = base / "out"
    result = grade_in_process(ROOT, subs, out, OPTIONS, LIMITS)
    return {"result": result, "out": out, "subs": subs, "base": base, "students": students, "course": course}



def _assert(check):
    passed, detail = check
    assert passed, detail


# ------------------------------------------------------------------------------------------------ item 2: CSV, names


@pytest.mark.slow
def test_the_run_completes(graded):
    _assert(attacks.check_no_crash_written(graded["out"], graded["result"]))


@pytest.mark.slow
def test_every_csv_cell_is_neutralised(graded):
    _assert(attacks.check_csv_formulas(graded["out"]))
    gradebook = attacks.read_csv(graded["out"] / "gradebook.csv")
    assert sorted(["'-nan", "'+inf", "' =1+2", "''=alice", "'@SUM(A1)"]) == sorted(
        row[0] for row in gradebook if row[0].startswith("'"))


@pytest.mark.slow
def test_names_read_back_exactly(graded):
    _assert(attacks.check_names_read_back(graded["out"]))
    manual = attacks.read_csv(graded["out"] / "manual-points.csv")[1:]
    assert {csv_value(row[0]) for row in manual} == set(graded["students"])


@pytest.mark.slow
def test_canvas_has_one_points_possible_row_and_a_chapter_column(graded):
    _assert(attacks.check_one_points_possible_row(graded["out"]))
    _assert(attacks.check_canvas_column(graded["out"]))
    rows = attacks.read_csv(graded["out"] / "gradebook-canvas.csv")
    assert ["Points_Possible", "", "", "Points Possible", "", "0"] in rows  # the exact name as its login


@pytest.mark.slow
def test_feedback_files_have_readable_names(graded):
    _assert(attacks.check_feedback_names(graded["out"]))
    for path in (graded["out"] / "feedback").iterdir():
        assert len(path.name.encode("utf-8")) <= NAME_BYTES
        assert name_of_file_part(path.name, ".md") in graded["students"], path.name


@pytest.mark.slow
def test_manual_points_go_to_the_exact_student_and_odd_names_do_not_stop_the_next_run(graded, tmp_path):
    """'=alice (a name a spreadsheet runs) made the next run refuse the manual file; a row for
    'alice ' gave alice the points."""
    out = tmp_path / "out"
    shutil.copytree(graded["out"], out)
    path = out / "manual-points.csv"
    rows = attacks.read_csv(path)
    for row in rows[1:]:
        if csv_value(row[0]) == "alice ":
            row[5], row[6] = "0", "=see me"
    with open(path, "w", newline="", encoding="utf-8") as handle:
        import csv

        csv.writer(handle, lineterminator="\n").writerows(rows)
    result = grade_in_process(ROOT, graded["subs"], out, OPTIONS, LIMITS)
    assert result["code"] == 0, result["stderr"][-2000:]
    assert "already graded" in result["stderr"]  # records reused: nothing ran again
    page = (out / "written" / f"{attacks.WRITTEN_LABEL}.md").read_text(encoding="utf-8")
    assert "## alice␣: 0 of 0 points" in page and "## alice: not graded yet" in page
    assert "=see me" in (out / "feedback" / "alice .md").read_text(encoding="utf-8")
    assert "see me" not in (out / "feedback" / "alice.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------------ item 5: written answers


@pytest.mark.slow
def test_written_answers_render_as_inert_text_one_block_per_student(graded):
    _assert(attacks.check_written_renders_inert(graded["out"], graded["students"], ANSWERS))
    page = (graded["out"] / "written" / f"{attacks.WRITTEN_LABEL}.md").read_text(encoding="utf-8")
    assert "\ufffd" in page and "\r" not in page and "\u2028" not in page and "\x1b" not in page


# ------------------------------------------------------------------------------------------------ item 6: executed copies


@pytest.mark.slow
def test_executed_copies_hold_no_active_content(graded):
    _assert(attacks.check_executed_inert(graded["out"]))
    nb = nbformat.read(str(attacks.executed_file(graded["out"], "active-outputs")), as_version=4)
    notes = [o["text"] for c in nb.cells for o in c.get("outputs", []) if "removed from this copy" in o.get("text", "")]
    assert notes and "text/html" in notes[0] and "application/javascript" in notes[0]
    texts = [o["data"]["text/plain"] for c in nb.cells for o in c.get("outputs", []) if "data" in o]
    assert "kept text" in texts  # text stays


@pytest.mark.slow
def test_executed_copies_are_untrusted(graded, tmp_path):
    from nbformat.sign import NotebookNotary

    notary = NotebookNotary(data_dir=str(tmp_path), secret=b"instructor-secret")
    for path in (graded["out"] / "executed").iterdir():
        nb = nbformat.read(str(path), as_version=4)
        assert "signature" not in nb.metadata and not notary.check_signature(nb), path.name


# ------------------------------------------------------------------------------------------------ item 10: feedback


@pytest.mark.slow
def test_a_later_exercise_gets_its_self_check_hints(graded):
    _assert(attacks.check_self_check_reaches_page(graded["out"], "wrong-3.2"))
    record = json.loads((graded["out"] / "records" / "wrong-3.2.ipynb.json").read_text())
    assert record["self_check_rerun"] == ["ex-03-scaled-weights"]


@pytest.mark.slow
def test_every_exercise_shows_its_self_check_or_says_why_not(graded):
    for student in ("solution", "wrong-3.2", "active-outputs"):
        _assert(attacks.check_every_exercise_accounted(graded["out"], student))
    solution = attacks.feedback_file(graded["out"], "solution").read_text(encoding="utf-8")
    sections = {head.split(":")[0]: body for head, body in
                re.findall(r"^## (Exercise [^\n]*)\n(.*?)(?=^## |\Z)", solution, re.M | re.S)}
    chapter = pick_chapter(graded["course"], "03")
    checked = [ex.display() for ex in chapter.exercises if ex.kind == "code" and ex.check_cells]
    assert len(checked) >= 2 and set(checked) <= set(sections), (checked, list(sections))
    # the first exercise's self-check ran before any hidden test: kept from the graded run
    assert "Your self-check, as it ran when your notebook was graded" in sections[checked[0]]
    for later in checked[1:]:  # ran after the hidden tests began, full marks: not run again, and said so
        assert "with full marks it was not run again" in sections[later], (later, sections[later])


@pytest.mark.slow
def test_no_hidden_input_reaches_a_page_a_record_or_a_copy(graded):
    _assert(attacks.check_no_hidden_input_leaks(graded["out"]))
    _assert(attacks.check_spy_self_check_shown(graded["out"]))


@pytest.mark.slow
def test_a_spy_that_walks_the_stack_is_refused_and_its_page_says_why(graded):
    """The spy as first written (it told the grader's calls by the stack's frames) is stopped
    earlier since the own-work rule (issue 29 item 3): every answer it wraps looks code up at run
    time, scores 0 and is not called by its self-check, whose words say why on the page."""
    _assert(attacks.check_frame_spy_refused(graded["out"]))
    _assert(attacks.check_every_exercise_accounted(graded["out"], "spy-frames-3.2"))


@pytest.mark.slow
def test_no_hidden_input_crosses_to_the_second_run_through_the_keyrings(graded):
    """The second run is safe only while no state outlives a sandbox: the kernel keyrings did,
    until the sandbox's system-call filter refused ``keyctl`` and ``add_key`` and gave each
    sandbox a fresh session keyring (issue 29 item 1): both runs are sandboxed alike."""
    passed, detail, state = attacks.check_no_keyring_leak(graded["out"])
    assert state == "blocked", f"the notebook reached the keyrings ({state}): {detail}"
    assert passed and detail.endswith("keyrings in the second run: blocked"), detail
    record = json.loads((graded["out"] / "records" / "keyring-3.2.ipynb.json").read_text())
    assert record["self_check_rerun"] == ["ex-03-scaled-weights"]  # the second run did run, sandboxed


@pytest.fixture(scope="module")
def spy_kept(graded, tmp_path_factory):
    """The spy graded again with ``--keep-all-outputs``: the instructor's executed copy then keeps
    what its cells printed after the hidden tests began (proof that the spy did record the tests'
    inputs), and the student's page must still show none of it."""
    base = tmp_path_factory.mktemp("spy-kept")
    subs, out = base / "subs", base / "out"
    subs.mkdir()
    out.mkdir()
    shutil.copy(graded["subs"] / "spy-3.2.ipynb", subs)
    shutil.copytree(graded["out"] / ".cache", out / ".cache")  # the reference values: not run again
    result = grade_in_process(ROOT, subs, out, dict(OPTIONS, jobs=1, keep_all_outputs=True), LIMITS)
    assert result["code"] == 0, result["stderr"][-2000:]
    return out


@pytest.mark.slow
def test_the_spy_sees_hidden_inputs_yet_no_page_shows_them(spy_kept):
    copy = attacks.executed_file(spy_kept, "spy-3.2").read_text(encoding="utf-8")
    assert attacks.LEAKED.search(copy), "the spy recorded no hidden input: the attack no longer works"
    _assert(attacks.check_no_hidden_input_leaks(spy_kept, places=("feedback", "records")))
    _assert(attacks.check_spy_self_check_shown(spy_kept))


# ------------------------------------------------------------------------------------------------ Gradescope


@pytest.fixture(scope="module")
def toy_gradescope(tmp_path_factory):
    from test_gradescope import prepare, toy_course, unpack

    from attention_book.instructor.gradescope import build_bundle

    base = tmp_path_factory.mktemp("output-gradescope")
    needs_isolation(base)
    root = toy_course(base)
    course = Course.load(root)
    gs = unpack(build_bundle(course, "99", base / "out"), base / "autograder")
    prepare(gs)
    release = build_release(course, base / "release")
    return {"gs": gs, "release": release.out / "notebooks" / "99_toy.ipynb"}


@pytest.mark.slow
def test_gradescope_shows_a_later_self_check_as_plain_lines(toy_gradescope):
    from test_classroom import answer
    from test_gradescope import check_format, run_autograder

    nb = nbformat.read(str(toy_gradescope["release"]), as_version=4)
    nb = answer(answer(nb, "ex-99-double", "return 2 * x"), "ex-99-square",
                "print('odd\\rFAKE: 1 of 1 point\\x1b[2J')\n    return x + x")
    results = run_autograder(toy_gradescope["gs"], nb)
    check_format(results)
    second = results["tests"][1]
    assert second["score"] == 0 and "as it ran in a second run of your notebook" in second["output"]
    assert "square(" in second["output"] and "odd\nFAKE" in second["output"]
    assert "\r" not in second["output"] and "\x1b" not in second["output"]
    assert "not run again" not in results["tests"][0]["output"]  # 99.1's self-check ran before the tests


# ------------------------------------------------------------------------------------------------ the output functions


FORMULA = re.compile(r"^\s*[=+\-@\t\r\uff1d\uff0b\uff0d\uff20]")
NAME_TEXT = st.text(alphabet=st.sampled_from(list("=+-@'\t\r \"\\/%.:|*?<>aé山И\u3000\u2028\x1b\ud800") + ["a"]),
                    max_size=30)


@given(NAME_TEXT)
def test_any_csv_cell_is_neutralised_and_reads_back(text):
    cell = csv_cell(text)
    assert not FORMULA.match(cell) or re.fullmatch(r"-?\d+(\.\d+)?", cell), cell
    assert csv_value(cell) == printable(text)
    assert "\r" not in cell and "\n" not in cell


def test_grader_numbers_stay_numbers():
    assert [csv_cell(v) for v in (2, 0.67, "2", "0.67", "-2", "")] == ["2", "0.67", "2", "0.67", "-2", ""]
    assert [csv_cell(v) for v in ("-nan", "+inf", "-1e3", "=1", "'x")] == ["'-nan", "'+inf", "'-1e3", "'=1", "''x"]


def test_canvas_file_has_one_points_possible_row_whatever_the_names():
    columns = [SimpleNamespace(label="ex-99-x", number="99.1", max=2.0)]
    names = ["Points Possible", "xPoints Possiblex", "points  possible", "Points\u3000Possible", "alice"]
    text = canvas_csv([{"student": n, "points": {"ex-99-x": 1.0}} for n in names], columns, "Chapter 99")
    rows = list(__import__("csv").reader(text.splitlines()))
    assert sum(bool(re.search("Points Possible", row[0])) for row in rows) == 1  # Canvas's own test
    assert sum(bool(re.search(r"(?i)points\s+possible", row[0])) for row in rows) == 1
    assert [row[3] for row in rows[2:]] == names  # the exact names stay in SIS Login ID
    assert rows[0][-1] == "Chapter 99"


@given(st.text(max_size=200))
def test_student_file_names_are_readable_reversible_and_short(name):
    for suffix in (".md", ".json", ""):
        file = file_name_part(name, suffix)
        assert len(file.encode("utf-8")) <= NAME_BYTES and file.endswith(suffix)
        assert "/" not in file and "\x00" not in file and not file.startswith((".", "-"))
        assert not file.endswith((".", " "))
        back = name_of_file_part(file, suffix)
        assert back == name or (back is None and "%~" in file)


def test_ordinary_names_stay_readable_and_long_ones_distinct():
    assert file_name_part("erin@uni.example", ".md") == "erin@uni.example.md"
    assert file_name_part("Иванова Александра", ".md") == "Иванова Александра.md"
    assert file_name_part("a/b%c", ".md") == "a%2Fb%25c.md" and file_name_part(".x", ".md") == "%2Ex.md"
    assert file_name_part("-nan", ".md") == "%2Dnan.md" and file_name_part("alice ", ".md") == "alice .md"
    long = "Глава 3 Softmax и масштабирование - Иванова Александра Сергеевна" * 2
    first, second = file_name_part(long + " 1", ".md"), file_name_part(long + " 2", ".md")
    assert first != second and first.startswith("Глава 3 Softmax") and "%~" in first


WRITTEN_TEXT = st.lists(st.sampled_from(
    list("#=-*_`~<>![]()h:/.@&;| \t\n\r\x0b\x0c\x85\u2028\u2029\x1b\ud800ab1")
    + ["https://e.x/", "www.e.xy", "```", "<img src=x>", "](u)", "\r\n", "    ", "\n\n"]), max_size=60).map("".join)


@given(st.lists(WRITTEN_TEXT, min_size=1, max_size=3))
def test_any_written_answer_renders_as_its_own_text(texts):
    exercise = SimpleNamespace(label="ex-99-why", number="99.3", title="Why")
    students = [f"s{i}" for i in range(len(texts))]
    entries = [{"student": s, "answer": t, "points": None, "comment": ""} for s, t in zip(students, texts)]
    page = written_markdown(exercise, "Say why.", entries, lambda label: 2.0, "manual-points.csv")
    for preset in ("commonmark", "gfm-like"):
        headings, sections, intrusions = attacks.written_sections(page, preset)
        assert [h for h in headings if h.startswith("h2")] == [f"h2 {s}: not graded yet" for s in students]
        assert not intrusions, intrusions
        for student, text in zip(students, texts):
            blocks = sections[f"{student}: not graded yet"]
            want = " ".join(plain_text(text).split())
            if want:
                assert blocks[0][0] == "code" and " ".join(blocks[0][1].split()) == want
            else:
                assert blocks == [("text", "(no answer)")]


def test_feedback_page_blocks_cannot_be_closed_from_inside():
    report = ExerciseReport("ex-99-x", "99.1", "X", "code", 2.0, 0.0, lines=[("FAIL", "t", "h")],
                            self_check="out\r## Forged: 2 of 2 points\n````\n![i](https://e.x/i.png)\u2028# H")
    page = feedback_markdown("www.evil.example", "Chapter 99", [report], notes=["```\n# note heading"])
    for preset in ("commonmark", "gfm-like"):
        tokens = attacks.markdown_tokens(page, preset)
        headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
        assert headings == ["Feedback: Chapter 99", "Exercise 99.1: X: 0 of 2 points"]
        kinds = {c.type for t in tokens if t.type == "inline" for c in t.children or []}
        assert not kinds & {"link_open", "image", "html_inline"}, kinds


def test_manual_points_match_the_exact_name(tmp_path):
    exercise = SimpleNamespace(label="ex-99-why", number="99.3", title="Why")
    students = ["alice", "alice ", "'=bob", "=carol"]
    path = tmp_path / "manual.csv"
    template = manual_template(students, [exercise], lambda label: 2.0)
    path.write_text(template.replace("alice ,ex-99-why,99.3,Why,2,,", "alice ,ex-99-why,99.3,Why,2,1.5,"))
    manual = read_manual_points(path, students, [exercise], lambda label: 2.0)
    assert manual.points == {("alice ", "ex-99-why"): 1.5}
    path.write_text("student,exercise,points\nalice  ,99.3,1\n")
    with pytest.raises(ManualPointsError, match=r"unknown student 'alice  '.*'alice'.*'alice '.*exact file name"):
        read_manual_points(path, students, [exercise], lambda label: 2.0)
    rows = list(__import__("csv").reader(template.splitlines()))
    assert [r[0] for r in rows[1:]] == ["alice", "alice ", "''=bob", "'=carol"]


def test_gradebook_cells_are_neutralised():
    columns = [SimpleNamespace(label="ex-99-x", number="99.1", max=2.0)]
    text = gradebook_csv([{"student": "-nan", "points": {"ex-99-x": 2.0}}], columns)
    assert text.splitlines()[1] == "'-nan,2,2,2"


def test_executed_copy_keeps_text_and_images_only():
    cells = [{"cell_type": "code", "source": "x", "metadata": {}, "execution_count": 1, "outputs": [
        {"output_type": "display_data", "metadata": {"isolated": True},
         "data": {"text/html": "<script>1</script>", "text/plain": "t", "image/svg+xml": "<svg onload=1>",
                  "application/javascript": "1", "image/png": "iVBORw0KGgo=", "text/markdown": "<img>"}},
        {"output_type": "display_data", "data": {"image/png": "\"><script>2</script>"}, "metadata": {}},
        {"output_type": "execute_result", "data": {"text/html": "<b>"}, "metadata": {}, "execution_count": 1},
        {"output_type": "stream", "name": "stdout", "text": ["a", "b"]},
        {"output_type": "error", "ename": "E", "evalue": "\ud800", "traceback": ["t"]},
    ]}]
    nb = nbformat.reads(executed_notebook(cells), as_version=4)
    nbformat.validate(nb)
    outputs = nb.cells[0].outputs
    assert outputs[0].data == {"text/plain": "t", "image/png": "iVBORw0KGgo="} and outputs[0].metadata == {}
    assert outputs[1].text == "ab" and outputs[2].evalue == "\ufffd"
    assert "removed from this copy" in outputs[-1].text and "text/html" in outputs[-1].text
    assert "<script>" not in json.dumps([o for o in outputs[:-1]])


def test_a_lone_surrogate_never_stops_a_write(tmp_path):
    atomic_write(tmp_path / "x.md", "a \ud800 b")
    assert (tmp_path / "x.md").read_text(encoding="utf-8") == "a \ufffd b"


def test_markdown_cells_and_names_render_as_text():
    for text in ("www.evil.example", "erin@evil.example", "see https://e.x/y", "evil.com", "report.md", "x.b.io",
                 "- item", "1. item", "![i](u)", "<b>x</b>", "a | b", "&#60;b&#62;"):
        for preset in ("commonmark", "gfm-like"):
            tokens = attacks.markdown_tokens(f"## {md_cell(text)}\n\n| a |\n|---|\n| {md_cell(text)} |\n", preset)
            kinds = {c.type for t in tokens if t.type == "inline" for c in t.children or []}
            assert not kinds & {"link_open", "image", "html_inline"}, (text, preset, kinds)
            assert attacks._rendered(tokens[1]) == text
    assert shown_name("alice ") == "alice␣" and shown_name(" a  b") == "␣a␣␣b" and shown_name("a b") == "a b"
    assert [md_cell(t) for t in ("notes.txt", "3.1", "torch.allclose")] == ["notes.txt", "3.1", "torch.allclose"]


def _check_cell(label, text):
    return {"cell_type": "code", "source": "check()", "metadata": {"attention_book_grader": {
        "role": "check", "exercise": label}}, "outputs": [{"output_type": "stream", "name": "stdout", "text": text}]}


@pytest.mark.parametrize("flags, stop, expect_rerun", [
    ([], None, True),
    (["changed the inputs of a hidden test in place (x); expected values came from the grader's copies"], None, True),
    (["printed more than 2000 outputs in a cell (interrupted)"], None, False),
    ([], "the notebook ran past its time limit (90 s)", False),
])
def test_a_second_run_only_for_lost_points_of_a_run_that_behaved(monkeypatch, flags, stop, expect_rerun):
    """Which self-checks run again, and what the page says otherwise (no kernel: the rerun is faked)."""
    from attention_book.instructor import feedback
    from attention_book.instructor.runner import RunResult

    cells = [_check_cell("ex-1", "PASS one"), _check_cell("ex-2", "LEAK from after the tests"),
             _check_cell("ex-3", "LEAK too")]  # the tests began after cell 0 (--keep-all-outputs kept 1, 2)
    calls = []
    monkeypatch.setattr(feedback, "rerun_self_checks",
                        lambda cells, labels, options, root: (calls.append(list(labels)) or
                                                              ({label: f"again {label}" for label in labels}, "", False)))
    record = {"results": {}, "reasons": {}, "notes": {}, "zero": {}}
    points = {"ex-1": 1.0, "ex-2": 1.0, "ex-3": 1.0}
    tests = {label: [SimpleNamespace(name="t", guard=False, weight=1.0)] for label in points}
    record["results"] = {"ex-1": [{"name": "t", "passed": True}], "ex-2": [{"name": "t", "passed": False}],
                         "ex-3": [{"name": "t", "passed": True}]}
    run = RunResult(stop=stop, flags=flags, first_call_cell=0)
    feedback.complete_self_checks(record, cells, run, tests, points.get, SimpleNamespace(self_check_rerun=True), ROOT)
    assert calls == ([["ex-2"]] if expect_rerun else [])
    assert record["self_check"] == ({"ex-1": "PASS one", "ex-2": "again ex-2"} if expect_rerun else
                                    {"ex-1": "PASS one"})  # never the outputs after the tests began
    assert record["self_check_dropped"] == ["ex-2", "ex-3"]
    reports = feedback.exercise_reports(record, [SimpleNamespace(label=k, number=k, title=k, kind="code")
                                                 for k in points], tests, points.get)
    sections = [feedback.self_check_section(r) for r in reports]
    assert sections[0] == [feedback.SELF_CHECK_GRADED, "PASS one"]
    assert sections[2] == [f"{feedback.SELF_CHECK_KEPT_BACK}, and with full marks it was not run again."]
    if expect_rerun:
        assert sections[1] == [feedback.SELF_CHECK_RERUN, "again ex-2"]
    else:
        assert "did not show it" in sections[1][0] and ("stopped early" if stop else "flagged") in sections[1][0]


def test_the_second_run_is_sandboxed_as_the_graded_run(monkeypatch):
    """The self-checks' second run gets the graded run's options (isolation, system-call filter,
    limits, hidden folders), no hidden test, and a time limit that cuts it is recorded (a longer
    limit grades the notebook again); with the second run off, the record says who needed it."""
    import dataclasses

    from attention_book.instructor import feedback, runner
    from attention_book.instructor.runner import RunOptions, RunResult
    from attention_book.instructor.sandbox import Limits

    seen = []

    def fake_run(cells, points, on_point, options, root):
        seen.append((points, options))
        return RunResult(stop="the notebook ran past its time limit (5 s)", timed_out=True)

    monkeypatch.setattr(runner, "run_notebook", fake_run)
    options = RunOptions(timeout=5, limits=Limits(memory_mb=1234), hidden_paths=[Path("/secret")], slot="job1")
    cells = [_check_cell("ex-1", "PASS"), _check_cell("ex-2", "FAIL")]
    tests = {label: [SimpleNamespace(name="t", guard=False, weight=1.0)] for label in ("ex-1", "ex-2")}
    record = {"results": {"ex-1": [{"name": "t", "passed": True}], "ex-2": [{"name": "t", "passed": False}]}}
    feedback.complete_self_checks(record, cells, RunResult(first_call_cell=0), tests, {"ex-1": 1, "ex-2": 1}.get,
                                  options, ROOT)
    (points, used), = seen
    assert points == {} and not used.unsafe  # no hidden test; the sandbox, never --unsafe's bare kernel
    assert dataclasses.replace(used, slot="job1") == options and used.slot == "job1-checks"
    assert record["self_check_rerun_timed_out"] is True and record["self_check_rerun_off"] == []
    off = {"results": dict(record["results"])}
    feedback.complete_self_checks(off, cells, RunResult(first_call_cell=0), tests, {"ex-1": 1, "ex-2": 1}.get,
                                  dataclasses.replace(options, self_check_rerun=False), ROOT)
    assert len(seen) == 1 and off["self_check_rerun_off"] == ["ex-2"] and not off["self_check_rerun_timed_out"]


def test_grader_paths_are_redacted_as_whole_paths_only():
    from attention_book.instructor.submissions import redact_paths

    paths = {"tmp": "/tmp", "home": "/root", "course": "/srv/course"}
    assert redact_paths("/var/tmp/x and /tmpfs and /srv/courses", paths) == "/var/tmp/x and /tmpfs and /srv/courses"
    assert redact_paths("'/tmp/x', (/root), in /tmp. /srv/course/a.py", paths) == (
        "'<tmp>/x', (<home>), in <tmp>. <course>/a.py")
