""""Write your own" decided by behaviour, module exercises judged on values, fair hidden tests.

Issue 29 items 3-4, issue 30 item 7. The cases (tests/own_work_cases.py): the six bypasses of the
red team (``getattr(torch, "softmax")``, ``F.__dict__["softmax"]``, ``Categorical(logits).probs``,
the chapter's helpers through a dict in an added cell or through ``__main__``, stub answers with
the kernel-side handler replaced from a ``run_cell`` string) and more, honest work that looked
like them (a local variable called ``softmax``, ``embedding`` or ``take``, a check against
``torch.softmax`` after the answer, helpers in added cells, a helper of one's own called
``repeat_kv``), decoder blocks with and without attention, and wrong answers the main-value rule
caps. Each case is decided

* by its self-check, in this process (it must agree with the grader);
* by the grader's procedure in this process: the hidden tests on the notebook's namespace, the
  rules read from the source (planning), the own-work run on a namespace holding only the
  student's cells with rule-governed calls traced and replayed (clean_room.CleanSession), the
  scorer;
* (slow) by the real grader, in sandboxes, on notebooks built from the cases
  (tests/hostile/own_work.py), as root and as an unprivileged user (.ci/run).
"""

from __future__ import annotations

import ast
import importlib

import pytest
import torch

from attention_book.checks.opgraph import Graph, GraphError, OpRule, record, replay, violations
from attention_book.checks.rules import rule
from attention_book.instructor.clean_room import (CleanSession, chapter_names_missing, decide, hidden_files,
                                                  still_stub, visible_modules)
from attention_book.instructor.grade import hidden_tests_of, run_tests
from attention_book.instructor.hidden import HiddenTest, LocalSession
from attention_book.instructor.planning import rule_violations
from attention_book.instructor.scoring import score_exercise
from own_work_cases import ALL, CHECKS, Case, clean_namespace, course_texts, definitions, run_cells
from test_grader_hidden import COURSE

CHAPTERS = {f"{c.number:02d}": c for c in COURSE.chapters if c.number is not None}
_NAMESPACES: dict = {}
_TESTS: dict = {}


def _chapter(case: Case):
    return CHAPTERS[case.label[3:5]]


def _definitions(chapter) -> dict:
    if chapter.path not in _NAMESPACES:
        _NAMESPACES[chapter.path] = definitions(chapter.path)
    return _NAMESPACES[chapter.path]


def _tests(chapter):
    if chapter.path not in _TESTS:
        _TESTS[chapter.path] = hidden_tests_of(COURSE, chapter)
    return _TESTS[chapter.path]


def _wanted(chapter, label):
    """Names the exercise's answer cells define (what the release's stub defines)."""
    names = []
    for index in chapter.exercise(label).answer_cells:
        tree = ast.parse("".join(line for line in chapter_source(chapter)[index].splitlines(True)
                                 if not line.lstrip().startswith("%")))
        names += [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    return names


def chapter_source(chapter):
    import nbformat

    from attention_book.instructor.markup import cell_text

    nb = nbformat.read(str(COURSE.root / chapter.path), as_version=4)
    return [cell_text(cell) for cell in nb.cells]


def grade_here(case: Case, max_points: float = 2.0):
    """The grader's decision on ``case`` without sandboxes: ``(points, message, record)``."""
    chapter = _chapter(case)
    tests = _tests(chapter)[case.label]
    student_cells = list(case.added) + [case.text]
    normal = run_cells(student_cells, dict(_definitions(chapter)))
    reference = LocalSession(_definitions(chapter))
    record = {"results": {case.label: run_tests(tests, LocalSession(normal, case.text), reference)},
              "zero": {}, "answer_flags": {}, "flags": []}
    texts = course_texts(chapter.path)
    broken = rule_violations(case.label, case.text, student_cells, texts, _wanted(chapter, case.label))
    if broken:
        record["zero"][case.label] = broken[0][0]
    elif score_exercise(record["results"][case.label], tests, 1.0)[0] > 0:
        errors: list = []
        clean = clean_namespace(texts, [case.label], student_cells, errors)
        session = CleanSession(LocalSession(clean, case.text), rule(case.label))
        decide(record, case.label, tests, run_tests(tests, session, reference), session.findings,
               chapter_names_missing(errors, case.label))
    points, message = score_exercise(record["results"][case.label], tests, max_points,
                                     zero_reason=record["zero"].get(case.label, ""))
    return points, message, record


SELF_CHECKED = [case for case in ALL if case.label in CHECKS and not case.grader_only]


@pytest.mark.parametrize("case", SELF_CHECKED, ids=lambda c: f"{c.label}:{c.name}")
def test_self_check_decides_as_the_grader(case):
    module, check, name = CHECKS[case.label]
    chapter = _chapter(case)
    namespace = run_cells(list(case.added) + [case.text], dict(_definitions(chapter)))
    verdict = getattr(importlib.import_module(f"attention_book.checks.{module}"), check)(namespace[name])
    text = str(verdict)
    if case.expect == "full":
        assert verdict.ok, text
    elif case.expect == "zero":
        assert not verdict.ok and verdict.score == 0, text
    else:
        assert not verdict.ok and 0 <= verdict.score <= 0.5, text
    if case.hint and case.expect != "full":
        assert case.hint.lower() in text.lower(), text
    points, _, _ = grade_here(case)  # the grader agrees
    assert (points == 2.0) == verdict.ok, (points, text)


@pytest.mark.parametrize("case", [c for c in ALL if not c.grader_only], ids=lambda c: f"{c.label}:{c.name}")
def test_grader_decides_on_behaviour(case):
    points, message, record = grade_here(case)
    if case.expect == "full":
        assert points == 2.0, (message, record)
        assert not record["answer_flags"].get(case.label), record["answer_flags"]
    elif case.expect == "zero":
        assert points == 0 or record["answer_flags"].get(case.label), (points, message, record)
        assert points == 0, (points, message)
    else:
        assert points <= 1.0, (points, message)
    if case.hint and case.expect == "zero":
        assert case.hint.lower() in (message + " ".join(record["answer_flags"].get(case.label, []))).lower(), message


# ------------------------------------------------------------------------------------------------ the scorer


def _test(name, guard=False, weight=1.0):
    return HiddenTest("ex-99-x", name, weight, lambda s, r: None, guard)


def test_main_value_rule_caps_a_wrong_answer_at_half():
    tests = [_test("guard first", guard=True), _test("main values"), _test("edge case", weight=5.0),
             _test("another guard", guard=True)]
    results = [{"name": "guard first", "passed": True}, {"name": "main values", "passed": False, "hint": "wrong"},
               {"name": "edge case", "passed": True}, {"name": "another guard", "passed": True}]
    points, message = score_exercise(results, tests, 3.0)
    assert points == 1.5 and "main value test" in message and "main values" in message
    results[1]["passed"] = True
    results[2]["passed"] = False
    points, _ = score_exercise(results, tests, 3.0)
    assert points == pytest.approx(3.0 * 3 / 8, abs=0.01)  # not the main test: plain partial credit
    results[1]["passed"] = results[2]["passed"] = True
    assert score_exercise(results, tests, 3.0)[0] == 3.0


def test_main_value_rule_leaves_small_scores_alone():
    tests = [_test("main"), _test("a", weight=1.0), _test("b", weight=3.0)]
    results = [{"name": "main", "passed": False}, {"name": "a", "passed": True}, {"name": "b", "passed": False}]
    assert score_exercise(results, tests, 2.0)[0] == 0.4  # below half: unchanged, no note
    assert "capped" not in score_exercise(results, tests, 2.0)[1]


def test_every_hidden_test_file_starts_each_exercise_with_a_value_test():
    """The main-value rule needs a main value test: each exercise's first non-guard test of a file
    this engineer owns compares values (its name says "main values" or it is listed here)."""
    central = {"ex-01-one-hot", "ex-01-which-token", "ex-01-bpe-decode", "ex-02-point-at",
               "ex-03-temperature", "ex-03-attend", "ex-04-copy-weights", "ex-04-permutation", "ex-05-torch-twin",
               "ex-05-head-contributions", "ex-06-padding", "ex-08-training-step", "ex-08-override",
               "ex-09-top-p", "ex-10-rope", "ex-10-gqa"}
    # the memory engineer's exercises (issue 30): each starts with a weighted test of its central
    # case (test_grader_hidden.py checks that wrong answers fail each exercise's main test)
    central |= {"ex-02-find-the-bug-batch", "ex-03-find-the-bug-axis", "ex-05-find-the-bug-heads",
                "ex-06-find-the-bug-half", "ex-07-from-memory", "ex-07-find-the-bug-buffer", "ex-09-block",
                "ex-09-find-the-bug-scale", "ex-09-induction-head", "ex-09-parameters", "ex-10-flops",
                "ex-10-chunk-mask", "ex-10-sdpa", "ex-10-cached-generation"}
    for chapter in CHAPTERS.values():
        for label, tests in _tests(chapter).items():
            main = next(t for t in tests if not t.guard)
            assert main.name.startswith("main values") or label in central, (label, main.name)


# ------------------------------------------------------------------------------------------------ replay


def test_replay_refuses_what_it_must_not_run():
    x = torch.randn(3, 4)
    _, graph = record(lambda t: t.exp().sum(dim=-1), (x,))
    for op in ("aten::from_file.default", "aten::_sparse_coo_tensor_unsafe.default", "aten::set_.source_Storage",
               "prims::add.default", "aten::no_such_op.default", "aten::exp; import os.default"):
        forged = Graph.from_data(dict(graph.as_data(), nodes=[{"op": op, "args": [{"@": "i", "k": 0}], "kwargs": {}}]))
        with pytest.raises(GraphError):
            replay(forged, (x,))
    huge = Graph.from_data(dict(graph.as_data(), nodes=[{"op": "aten::ones.default", "args": [[100000, 100000]],
                                                          "kwargs": {}}], output={"@": "n", "k": 0, "p": []}))
    with pytest.raises(GraphError, match="elements"):
        replay(huge, (x,))
    on_gpu = Graph.from_data(dict(graph.as_data(), nodes=[{"op": "aten::ones.default", "args": [[2]],
                                                            "kwargs": {"device": {"@": "device", "v": "cuda"}}}]))
    with pytest.raises(GraphError, match="device"):
        replay(on_gpu, (x,))
    later = Graph.from_data(dict(graph.as_data(), nodes=[{"op": "aten::exp.default", "args": [{"@": "n", "k": 5}],
                                                          "kwargs": {}}]))
    with pytest.raises(GraphError):
        replay(later, (x,))
    with pytest.raises(GraphError):
        Graph.from_data({"version": 1, "nodes": "x", "constants": [], "inputs": 0})


def test_replay_gives_the_answers_values_and_its_gradients():
    x = torch.randn(2, 3, 5, dtype=torch.float64)

    def softmax(scores, dim=-1):
        shifted = scores - scores.amax(dim=dim, keepdim=True)
        shifted.exp_()
        return shifted / shifted.sum(dim=dim, keepdim=True)

    value, graph = record(softmax, (x,), {"dim": 1})
    mine = x.clone().requires_grad_(True)
    replayed = replay(graph, (mine,), {"dim": 1})
    assert torch.equal(replayed, value) and torch.allclose(replayed, torch.softmax(x, dim=1))
    (replayed * torch.arange(30.0).view(2, 3, 5)).sum().backward()
    want = x.clone().requires_grad_(True)
    (torch.softmax(want, dim=1) * torch.arange(30.0).view(2, 3, 5)).sum().backward()
    assert torch.allclose(mine.grad, want.grad)
    assert violations(graph, OpRule(ops=("softmax",))) == []


def test_values_computed_outside_the_operations_are_found():
    """A forged reply that returns the right numbers as a constant does not carry over to fresh
    inputs: the session flags it (and the answer's operations decide the rule)."""
    def numpy_softmax(scores, dim=-1):
        array = scores.numpy()
        exponentials = __import__("numpy").exp(array - array.max(axis=dim, keepdims=True))
        return torch.tensor(exponentials / exponentials.sum(axis=dim, keepdims=True))

    session = CleanSession(LocalSession({"my_softmax": numpy_softmax}), rule("ex-03-stable-softmax"))
    value = session.call("my_softmax", torch.randn(3, 4))
    assert torch.allclose(value.sum(dim=-1), torch.ones(3))
    assert session.findings.not_general == ["my_softmax"] and session.findings.violations == []


def test_fused_kernels_are_seen_however_they_are_reached():
    """ex-07-from-memory's and ex-10-sdpa's rules read the torch calls the recorder saw, not names
    in the source: every way of reaching SDPA or nn.MultiheadAttention is the same call (on the
    CPU, SDPA with dropout and nn.MultiheadAttention with need_weights=True run as plain matrix
    products and a softmax, so the call is what shows them); a function of one's own with
    PyTorch's name is not one."""
    import torch.nn.functional as F

    from attention_book.checks.opgraph import MISSING, rule_hint

    fused, sdpa = rule("ex-07-from-memory").ops, rule("ex-10-sdpa").ops
    q, k, v = (torch.randn(2, 2, 4, 8) for _ in range(3))
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 4, 8)

    def scaled_dot_product_attention(q, k, v):  # my own, by hand
        return torch.softmax(q @ k.mT / q.shape[-1] ** 0.5, dim=-1) @ v

    reached = {
        "F": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "getattr": lambda: getattr(F, "scaled_" + "dot_product_attention")(q, k, v),
        "torch._C._nn": lambda: torch._C._nn.scaled_dot_product_attention(q, k, v),
        "dropout (math path)": lambda: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5),
        "nn.MultiheadAttention": lambda: mha(x, x, x)[0],
        "need_weights=False": lambda: mha(x, x, x, need_weights=False)[0],
    }
    for how, call in reached.items():
        _, graph = record(call)
        found = violations(graph, fused)
        assert found and all(not name.startswith(MISSING) for name in found), how
        assert rule_hint(fused, found).startswith("a fused kernel used"), how
        assert violations(graph, sdpa) == [] or how.startswith(("nn.Multi", "need")), how
    _, graph = record(scaled_dot_product_attention, (q, k, v))
    assert violations(graph, fused) == []
    assert violations(graph, sdpa) == [MISSING + "scaled_dot_product_attention"]
    assert "instead of by hand" in rule_hint(sdpa, violations(graph, sdpa))


def test_flex_attention_is_seen_though_it_cannot_be_recorded():
    """FlexAttention (a higher-order operator) cannot run under the recorder: the call fails, and
    what it reached before names it; the self-check says "a fused kernel", not a crash."""
    pytest.importorskip("torch.nn.attention.flex_attention")
    import warnings

    from torch.nn.attention.flex_attention import flex_attention

    from attention_book.checks.core import RuleBroken, check_operations

    q = torch.randn(1, 2, 4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuleBroken, match="a fused kernel used.*flex_attention"):
            check_operations("ex-07-from-memory", lambda t: flex_attention(t, t, t), q)


def test_dropout_is_replayed_without_a_false_flag():
    """A call whose output depends on a dropout mask is replayed (the grader's own draw), neither
    compared with the kernel's values nor checked on fresh inputs; an initialisation drawn and
    then overwritten does not count as random."""
    import torch.nn.functional as F

    from attention_book.checks.opgraph import is_random

    def attend(q, k, v, training):
        return F.scaled_dot_product_attention(q, k, v, dropout_p=0.5 if training else 0.0)

    session = CleanSession(LocalSession({"fused_attention": attend}), rule("ex-10-sdpa"))
    q, k, v = (torch.randn(2, 2, 5, 4) for _ in range(3))
    for training in (True, False):
        out = session.call("fused_attention", q, k, v, training)
        assert out.shape == (2, 2, 5, 4)
    assert session.findings.misreported == [] and session.findings.not_general == []
    assert session.findings.violations == []
    _, graph = record(lambda t: torch.nn.init.uniform_(torch.empty(3)).copy_(t) * 2, (torch.ones(3),))
    assert not is_random(graph)


# ------------------------------------------------------------------------------------------------ the run's setup


def test_stub_answers_are_not_attempts():
    from nbformat.v4 import new_code_cell

    from attention_book.instructor.planning import Plan

    stub = "def my_softmax(scores, dim=-1):\n    # a comment\n    raise NotImplementedError('ex-03: write it')\n"
    solved = "def my_softmax(scores, dim=-1):\n    return scores.exp() / scores.exp().sum(dim, keepdim=True)\n"
    block = ("class DecoderBlock(nn.Module):\n    def __init__(self, a, b, c, d):\n        super().__init__()\n"
             "        raise NotImplementedError('x')\n\n    def forward(self, x, e, m=None):\n"
             "        raise NotImplementedError('x')\n")

    def plan(*cells):
        made = []
        for role, text in cells:
            cell = new_code_cell(text)
            cell.metadata["attention_book_grader"] = {"role": role, "exercise": "ex"}
            made.append(cell)
        return Plan(made, {}, {"ex": "\n".join(t for r, t in cells if r == "answer")})

    assert still_stub(plan(("answer", stub)), "ex")
    assert still_stub(plan(("answer", block)), "ex")
    assert not still_stub(plan(("answer", solved)), "ex")
    assert not still_stub(plan(("answer", stub), ("added", solved)), "ex")  # redefined later: an answer
    assert still_stub(plan(("added", solved), ("answer", stub)), "ex")


def test_own_work_run_hides_the_packages_finished_code():
    hidden = {path.name for path in hidden_files(3, ["ex-03-stable-softmax", "ex-03-scaled-weights"])}
    assert {"scores.py", "functional.py", "multihead.py", "ch03.py", "gqa.py"} <= hidden
    assert not {"kernel_side.py", "wire.py", "sandbox_init.py", "opgraph.py", "modules.py"} & hidden
    assert "attention_book.multihead" in visible_modules(7, ["ex-07-decoder-block"])  # allowed in ex-07
    assert "attention_book.hello_world" in visible_modules(8, ["ex-08-training-step"])  # its probe needs it
    assert "attention_book.gqa" not in visible_modules(10, ["ex-10-gqa"])


# ------------------------------------------------------------------------------------------------ real grading


SANDBOX_OPTIONS = dict(jobs=2, quiet=True, timeout=300, tests_timeout=300, check_timeout=60)
SANDBOX_LIMITS = dict(processes=64, memory_mb=6144, disk_mb=256, total_memory_mb=2048)


def grade_cases_in_sandboxes(number: str, base, python=None, root=None, timeout=None):
    """Grade chapter ``number``'s cases, its solution and its release with a real grader (in a
    process of its own, see tests/hostile/harness.py); ``{student: {label: (points, max, message,
    flags)}}`` and the harness's result."""
    import csv
    import json

    import nbformat

    from attention_book.instructor.release import release_notebook
    from attention_book.instructor.submissions import pick_chapter
    from hostile.harness import grade_in_process
    from hostile.own_work import build
    from own_work_cases import CASES

    chapter = pick_chapter(COURSE, number)
    source = nbformat.read(str(COURSE.root / chapter.path), as_version=4)
    release = release_notebook(source, chapter, COURSE.context())
    subs = base / "subs"
    subs.mkdir(parents=True)
    for case in CASES[number]:
        (subs / f"{case.name}.ipynb").write_text(json.dumps(build(case, source, release, chapter)))
    (subs / "solution.ipynb").write_text(json.dumps(source))
    (subs / "release.ipynb").write_text(json.dumps(release))
    options = dict(SANDBOX_OPTIONS, chapter=number)
    if timeout:  # a busy machine: more time for the cells and the calls
        options.update(timeout=timeout, tests_timeout=timeout, check_timeout=max(60, timeout / 5))
    import os

    # another grader's Python imports that grader's package, not this checkout's (no PYTHONPATH)
    kwargs = {"python": python, "env": {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}} if python else {}
    result = grade_in_process(root or COURSE.root, subs, base / "out", options, SANDBOX_LIMITS, **kwargs)
    rows: dict = {}
    path = base / "out" / "grades.csv"
    if path.is_file():
        with open(path, newline="", encoding="utf-8") as handle:
            for row in list(csv.reader(handle))[1:]:
                rows.setdefault(row[0], {})[row[1]] = (float(row[3]), float(row[4]), row[5], row[6])
    return rows, result


@pytest.fixture(scope="module", params=["03", "01", "07", "10"])
def graded_in_sandboxes(request, tmp_path_factory):
    from helpers import needs_isolation

    base = tmp_path_factory.mktemp(f"own-work-{request.param}")
    needs_isolation(base)
    rows, result = grade_cases_in_sandboxes(request.param, base)
    assert result["code"] == 0, result["stderr"][-3000:]
    return request.param, rows


@pytest.mark.slow
def test_cases_graded_in_sandboxes(graded_in_sandboxes):
    from own_work_cases import CASES

    number, rows = graded_in_sandboxes
    for label, (points, top, message, flags) in rows["solution"].items():
        assert points == top and not flags.strip(), (label, message, flags)  # the own-work run changes nothing
    assert all(points == 0 for points, _, _, _ in rows["release"].values())
    problems = []
    for case in CASES[number]:
        points, top, message, flags = rows[case.name][case.label]
        ok = {"full": points == top, "zero": points == 0, "at most half": points <= top / 2}[case.expect]
        if case.expect == "full":
            ok = ok and not flags.strip()  # honest work is not flagged either
        if not ok:
            problems.append(f"{case.name}: {points}/{top} ({message}) flags: {flags}")
    assert not problems, "\n".join(problems)


def test_hidden_tests_never_read_the_answers_text():
    """Behaviour, never source substrings (issue 30 item 7): no hidden test reads
    ``student.source``."""
    from pathlib import Path

    found = []
    for path in sorted((Path(COURSE.root) / "instructor" / "hidden_tests").glob("ch*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            if any(isinstance(n, ast.Attribute) and n.attr == "source" for n in ast.walk(function)):
                found.append(f"{path.name}:{function.name}")
    assert found == [], found
