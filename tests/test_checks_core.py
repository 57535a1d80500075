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


# --------------------------------------------------------------------------------------------------
# Contract 6: guards, non-attempts, reading the answer's code, "write your own"
# --------------------------------------------------------------------------------------------------

import re  # noqa: E402
import textwrap  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from attention_book.checks.core import Guard, Verdict, answer_source, calls, package_use  # noqa: E402
from attention_book.checks.numbering import NUMBERS, exercise_name, exercise_number  # noqa: E402
from tests.wrong_answers import load_answer  # noqa: E402


@register("ex-00-guarded", "Guarded")
def guarded(double):
    x = torch.arange(4.0)

    def values():
        if not torch.equal(double(x.clone()), 2 * x):
            raise Hint("return 2 * x")

    def untouched():
        kept = x.clone()
        double(kept)
        if not torch.equal(kept, x):
            raise Hint("do not change the input in place")

    def shape():
        assert double(x.clone()).shape == x.shape, "keep the shape"

    return [("doubles", values), Guard("input unchanged", untouched), Guard("keeps the shape", shape)]


def test_guards_count_when_a_value_test_passes():
    verdict = guarded(lambda x: 2 * x)
    assert verdict.ok and verdict.score == 1.0 and verdict.passed == ["doubles", "input unchanged", "keeps the shape"]


@pytest.mark.parametrize(
    "non_attempt", [torch.zeros_like, lambda x: x, lambda x: x.clone(), lambda x: None], ids=["zeros", "identity", "copy", "none"]
)
def test_a_non_attempt_scores_zero(non_attempt):
    verdict = guarded(non_attempt)
    assert verdict.score == 0.0 and not verdict.ok and verdict.passed == []
    names = [name for name, _ in verdict.failed]
    assert names == ["doubles", "input unchanged", "keeps the shape"]


def test_a_guard_that_passes_without_values_says_why():
    verdict = guarded(torch.zeros_like)
    hints = dict(verdict.failed)
    assert "no value check passed" in hints["input unchanged"]


def test_a_failing_guard_keeps_its_own_hint():
    def in_place(x):
        x.mul_(2)
        return x

    verdict = guarded(in_place)
    assert verdict.passed == ["doubles", "keeps the shape"]
    assert verdict.failed == [("input unchanged", "do not change the input in place")]
    assert verdict.score == pytest.approx(2 / 3)


def test_guard_unpacks_like_a_pair():
    name, test = Guard("g", print)
    assert (name, test) == ("g", print)


def test_a_check_of_guards_only_is_refused():
    @register("ex-00-only-guards", "Only guards")
    def only_guards(answer):
        return [Guard("g", lambda: None)]

    with pytest.raises(ValueError, match="every test is a Guard"):
        only_guards(lambda: None)


def test_a_malformed_test_list_is_refused():
    @register("ex-00-malformed", "Malformed")
    def malformed(answer):
        return [("name", "not callable")]

    with pytest.raises(TypeError, match=r"\(name, test\) pairs or Guard"):
        malformed(lambda: None)


def test_not_implemented_in_a_later_answer_scores_zero():
    @register("ex-00-two", "Two answers")
    def two(first, second):
        return [("first", first), ("second", second)]

    def stub():
        raise NotImplementedError("ex-00-two: replace this line with your code")

    verdict = two(lambda: None, stub)
    assert verdict.not_implemented and verdict.score == 0.0
    assert verdict.summary().endswith("not implemented yet")


# --- answer_source ---------------------------------------------------------------------------------

FUNCTION = '''
import torch

def my_softmax(scores, dim=-1):
    shifted = scores - scores.amax(dim=dim, keepdim=True)
    return shifted.exp() / shifted.exp().sum(dim=dim, keepdim=True)
'''

MODULE_CLASS = '''
import torch
from torch import nn

class Doubler(nn.Module):
    """A module the reader wrote."""

    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, x):
        return self.scale * x
'''


def test_answer_source_of_a_function():
    fn = load_answer(FUNCTION, "src-fn")["my_softmax"]
    source = answer_source(fn)
    assert source.startswith("def my_softmax(scores, dim=-1):") and "amax" in source


def test_answer_source_of_a_class_and_of_its_object():
    namespace = load_answer(MODULE_CLASS, "src-class")
    source = answer_source(namespace["Doubler"])
    assert source.startswith("class Doubler(nn.Module):") and "def forward" in source
    assert "import torch" not in source  # only the class, not the whole cell
    assert answer_source(namespace["Doubler"]()) == source


def test_answer_source_of_a_lambda_and_a_partial():
    import functools

    namespace = load_answer("double = lambda x: 2 * x\n", "src-lambda")
    assert "2 * x" in answer_source(namespace["double"])
    fn = load_answer(FUNCTION, "src-partial")["my_softmax"]
    assert answer_source(functools.partial(fn, dim=0)) == answer_source(fn)


def test_answer_source_without_source_is_a_hint():
    with pytest.raises(Hint, match="could not read the source"):
        answer_source(torch.softmax)
    namespace: dict = {}
    exec("def made_up(x):\n    return x\n", namespace)  # no linecache entry: no source
    with pytest.raises(Hint, match="define it with `def`"):
        answer_source(namespace["made_up"])


IPYTHON_SCRIPT = """
from IPython.core.interactiveshell import InteractiveShell
from attention_book.checks.core import answer_source, calls, package_use

shell = InteractiveShell.instance()
shell.run_cell(CELL).raise_error()
shell.run_cell("from attention_book.scores import stable_softmax").raise_error()
shell.run_cell("def lazy(scores, dim=-1):\\n    return stable_softmax(scores, dim)").raise_error()
ns = shell.user_ns
assert answer_source(ns["Doubler"]).startswith("class Doubler(nn.Module):"), answer_source(ns["Doubler"])
assert answer_source(ns["obj"]).startswith("class Doubler(nn.Module):")
assert answer_source(ns["my_softmax"]).startswith("def my_softmax(")
assert calls(ns["my_softmax"], ["torch.softmax", "exp"]) == ["exp"]
assert package_use(ns["my_softmax"]) == "" and package_use(ns["Doubler"]) == ""
assert "attention_book.scores.stable_softmax" in package_use(ns["lazy"])
print("ok")
"""


def test_answer_source_in_an_ipython_cell():
    """Notebook cells: a class in ``__main__`` has no file, yet its source is found.

    Runs in a separate Python: an IPython shell changes process-wide state (display hook, builtins).
    """
    import subprocess
    import sys

    cell = MODULE_CLASS + "\nobj = Doubler()\n" + FUNCTION
    script = f"CELL = {cell!r}\n" + IPYTHON_SCRIPT
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stdout + result.stderr


# --- calls -----------------------------------------------------------------------------------------

SOFTMAX_NAMES = ["torch.softmax", "F.softmax", "softmax", "log_softmax"]


@pytest.mark.parametrize(
    "code, expected",
    [
        (FUNCTION, []),
        ("import torch\ndef f(s, dim=-1):\n    return torch.softmax(s, dim)\n", ["torch.softmax", "softmax"]),
        ("import torch.nn.functional as F\ndef f(s, dim=-1):\n    return F.softmax(s, dim)\n",
         ["F.softmax", "softmax"]),
        ("import torch\ndef f(s, dim=-1):\n    return torch.nn.functional.softmax(s, dim)\n",
         ["F.softmax", "softmax"]),
        ("def f(s, dim=-1):\n    return s.softmax(dim)\n", ["softmax"]),
        ("import torch\ndef f(s, dim=-1):\n    return torch.log_softmax(s, dim).exp()\n", ["log_softmax"]),
        ("import torch\ndef f(s, dim=-1):\n    return torch.special.softmax(s, dim)\n", ["softmax"]),
        ("from torch import softmax as sm\ndef f(s, dim=-1):\n    return sm(s, dim)\n",
         ["torch.softmax", "softmax"]),
        ("import torch\npick = torch.softmax\ndef f(s, dim=-1):\n    return pick(s, dim)\n",
         ["torch.softmax", "softmax"]),
        ("import torch\ndef f(s, dim=-1, fn=torch.softmax):\n    return fn(s, dim)\n",
         ["torch.softmax", "softmax"]),
        ("def f(s, dim=-1):\n    from torch import softmax\n    return softmax(s, dim)\n",
         ["torch.softmax", "softmax"]),
        ("def f(s, dim=-1):\n    import torch.nn.functional as G\n    return G.softmax(s, dim)\n",
         ["F.softmax", "softmax"]),
        # a local variable called softmax is not a call of torch.softmax
        ("def f(s, dim=-1):\n    e = s.exp()\n    softmax = e / e.sum(dim, keepdim=True)\n    return softmax\n", []),
    ],
    ids=["own", "torch", "F", "long-path", "method", "log-softmax", "special", "alias", "global-alias",
         "default-arg", "import-inside", "import-as-inside", "local-name"],
)
def test_calls_finds_softmax_however_it_is_spelled(code, expected):
    fn = load_answer(code, f"calls-{abs(hash(code))}")["f" if "def f" in code else "my_softmax"]
    assert calls(fn, SOFTMAX_NAMES) == expected


def test_calls_on_a_library_function_itself():
    assert calls(torch.softmax, SOFTMAX_NAMES) == ["torch.softmax", "softmax"]
    assert calls(torch.nn.functional.softmax, SOFTMAX_NAMES) == ["F.softmax", "softmax"]


def test_calls_inside_a_class():
    namespace = load_answer(MODULE_CLASS.replace("self.scale * x", "torch.softmax(x, -1)"), "calls-class")
    assert calls(namespace["Doubler"], ["torch.softmax"]) == ["torch.softmax"]
    assert calls(namespace["Doubler"](), ["torch.softmax"]) == ["torch.softmax"]


# --- write your own --------------------------------------------------------------------------------

PACKAGE_ANSWERS = {
    "is-the-function": "from attention_book.scores import stable_softmax as my_softmax\n",
    "calls-it": (
        "from attention_book.scores import stable_softmax\n"
        "def my_softmax(scores, dim=-1):\n    return stable_softmax(scores, dim)\n"
    ),
    "imports-inside": (
        "def my_softmax(scores, dim=-1):\n"
        "    from attention_book.scores import stable_softmax\n    return stable_softmax(scores, dim)\n"
    ),
    "module-alias": (
        "import attention_book as ab\n"
        "def my_softmax(scores, dim=-1):\n    return ab.scores.stable_softmax(scores, dim)\n"
    ),
    "through-a-helper": (
        "from attention_book import scores as package_scores\n"
        "def helper(s, d):\n    return package_scores.stable_softmax(s, d)\n"
        "def my_softmax(scores, dim=-1):\n    return helper(scores, dim)\n"
    ),
    "default-argument": (
        "from attention_book.scores import stable_softmax\n"
        "def my_softmax(scores, dim=-1, impl=stable_softmax):\n    return impl(scores, dim)\n"
    ),
    "lambda": "from attention_book.scores import stable_softmax\nmy_softmax = lambda s, dim=-1: stable_softmax(s, dim)\n",
    "partial": (
        "import functools\nfrom attention_book.scores import stable_softmax\n"
        "my_softmax = functools.partial(stable_softmax)\n"
    ),
}


@register("ex-00-softmax", "Softmax")
def softmax_check(my_softmax):
    scores = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))

    def values():
        assert torch.allclose(my_softmax(scores, dim=-1), torch.softmax(scores, -1), atol=1e-6), "wrong weights"

    return [("matches torch.softmax", values)]


@pytest.mark.parametrize("name", sorted(PACKAGE_ANSWERS))
def test_package_answers_get_write_your_own(name):
    answer = load_answer(PACKAGE_ANSWERS[name], f"package-{name}")["my_softmax"]
    verdict = softmax_check(answer)
    assert verdict.score == 0.0 and not verdict.ok and verdict.write_your_own
    assert "write your own" in str(verdict) and "attention_book" in str(verdict)
    assert "write your own" in verdict.summary() and verdict.failed
    assert verdict.as_dict()["write_your_own"]


def test_own_answer_is_not_refused():
    own = load_answer(FUNCTION, "own-softmax")["my_softmax"]
    verdict = softmax_check(own)
    assert verdict.ok and not verdict.write_your_own and verdict.as_dict()["write_your_own"] == ""


CLASS_ANSWERS = {
    "own-nn-module": (MODULE_CLASS, ""),
    "subclass-of-package": (
        "from attention_book.multihead import MultiHeadAttention\n"
        "class Mine(MultiHeadAttention):\n    pass\n", "subclasses"),
    "method-calls-package": (
        MODULE_CLASS.replace("self.scale * x", "masks.causal_mask(x.shape[-1])").replace(
            "from torch import nn", "from torch import nn\nfrom attention_book import masks"),
        "attention_book.masks"),
}


@pytest.mark.parametrize("name", sorted(CLASS_ANSWERS))
def test_class_answers(name):
    code, expected = CLASS_ANSWERS[name]
    namespace = load_answer(code, f"class-{name}")
    cls = namespace.get("Doubler") or namespace["Mine"]
    found = package_use(cls)
    if expected:
        assert expected in found and found == package_use(cls.__new__(cls))
    else:
        assert found == "" and package_use(cls()) == ""


def test_objects_of_package_classes_are_refused_but_data_is_not():
    from attention_book.multihead import MultiHeadAttention

    module = MultiHeadAttention(4, 4, context_length=3, dropout=0.0, num_heads=2)
    assert "is `attention_book.multihead.MultiHeadAttention`" in package_use(module)
    for data in (torch.zeros(2), 3, "text", None, [1, 2], torch.softmax, torch.nn.Linear(2, 2)):
        assert package_use(data) == ""


def test_allowed_package_objects():
    from attention_book.multihead import MultiHeadAttention

    code = (
        "from attention_book.multihead import MultiHeadAttention\n"
        "def build(d):\n    return MultiHeadAttention(d, d, 4, 0.0, 2)\n"
    )
    build = load_answer(code, "allowed")["build"]
    assert "MultiHeadAttention" in package_use(build)
    assert package_use(build, allowed=[MultiHeadAttention]) == ""
    assert package_use(build, allowed=["attention_book.multihead.MultiHeadAttention"]) == ""

    @register("ex-00-allowed", "Allowed", allowed=["attention_book.multihead.MultiHeadAttention"])
    def allowed_check(builder):
        return [("builds", lambda: builder(4))]

    assert allowed_check(build).ok


# --- own work: the chapter body's finished code (issues 19 and 21) ----------------------------------

CHAPTER_BODY = (
    "import torch\n"
    "def stable(scores, dim=-1):\n"
    "    shifted = scores - scores.amax(dim, keepdim=True)\n"
    "    return shifted.exp() / shifted.exp().sum(dim, keepdim=True)\n"
)
OWN_WORK_ANSWERS = {  # name -> (answer cell, refused?)
    "calls-it": ("def my_softmax(scores, dim=-1):\n    return stable(scores, dim)\n", "uses `stable`"),
    "is-it": ("my_softmax = stable\n", "is `stable`"),
    "partial": ("import functools\nmy_softmax = functools.partial(stable, dim=-1)\n", "is `stable`"),
    "lambda": ("my_softmax = lambda s, dim=-1: stable(s, dim)\n", "uses `stable`"),
    "through-a-helper": ("def helper(s, d):\n    return stable(s, d)\n"
                         "def my_softmax(scores, dim=-1):\n    return helper(scores, dim)\n", "uses `stable`"),
    "default-argument": ("def my_softmax(scores, dim=-1, impl=stable):\n    return impl(scores, dim)\n",
                         "uses `stable`"),
    "own-code": ("def my_softmax(scores, dim=-1):\n    e = (scores - scores.amax(dim, keepdim=True)).exp()\n"
                 "    return e / e.sum(dim, keepdim=True)\n", ""),
    "own-function-of-the-same-name": ("def stable(s, dim=-1):\n    e = s.exp()\n    return e / e.sum(dim, keepdim=True)\n"
                                      "def my_softmax(scores, dim=-1):\n    return stable(scores, dim)\n", ""),
}


def _cell(code: str, namespace: dict, name: str) -> None:
    """Run ``code`` like a notebook cell into ``namespace`` (its source readable, as in IPython)."""
    import linecache

    filename = f"<cell {name}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - test code


@register("ex-00-own", "Own work")
def own_work_check(my_softmax):
    scores = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    return [("matches torch.softmax", lambda: torch.testing.assert_close(my_softmax(scores, dim=-1),
                                                                          torch.softmax(scores, -1)))]


@pytest.mark.parametrize("name", sorted(OWN_WORK_ANSWERS))
def test_answers_using_the_chapter_code_get_write_your_own(name, monkeypatch):
    import ast

    import attention_book.checks.rules as rules
    from attention_book.checks.answers import definition_digest

    digest = definition_digest(ast.parse(CHAPTER_BODY).body[1])
    monkeypatch.setattr(rules, "_CODE", {"ex-00-own": {"stable": "def:" + digest}})
    namespace: dict = {"__name__": "__main__"}
    _cell(CHAPTER_BODY, namespace, "chapter")  # the chapter's own cell, run above the exercise
    code, refused = OWN_WORK_ANSWERS[name]
    _cell(code, namespace, f"answer-{name}")
    verdict = own_work_check(namespace["my_softmax"])
    if refused:
        assert verdict.score == 0 and refused in verdict.write_your_own, verdict.write_your_own
        assert "which the chapter defines above" in str(verdict)
    else:
        assert verdict.ok and not verdict.write_your_own, str(verdict)


def test_the_exercise_rules_come_from_one_table():
    """The self-checks of ch01 and ch03 read their "without ..." rules from checks/rules.py."""
    from attention_book.checks import ch01, ch03, rules

    assert ch03.SOFTMAX_NAMES is rules.SOFTMAX_NAMES and ch01.LOOKUP_NAMES is rules.LOOKUP_NAMES
    answer = load_answer("import torch\ndef my_softmax(scores, dim=-1):\n    return torch.softmax(scores, dim)\n",
                         "rule-softmax")["my_softmax"]
    verdict = ch03.stable_softmax(answer)
    assert any("ready-made softmax" in hint for _, hint in verdict.failed), verdict.failed


# --- numbering -------------------------------------------------------------------------------------


def test_banners_use_the_chapter_number():
    label = next(iter(NUMBERS))
    number = NUMBERS[label]
    verdict = Verdict(label, "Title", passed=["a"])
    assert str(verdict).startswith(f"Exercise {number}: Title")
    assert verdict.summary().startswith(f"Exercise {number}: ")
    assert exercise_name(label) == f"Exercise {number}" and exercise_number(label) == number
    assert exercise_name("ex-00-demo") == "Exercise ex-00-demo"  # not in the book: the label
    with pytest.raises(TypeError, match="label must be a str"):
        exercise_number(3)


def test_every_registered_check_has_a_number():
    import importlib
    import pkgutil

    import attention_book.checks as checks

    for info in pkgutil.iter_modules(checks.__path__):  # every chapter's checks, whatever exists
        if info.name.startswith("ch"):
            importlib.import_module(f"attention_book.checks.{info.name}")
    from attention_book.checks import REGISTRY

    book = [label for label in REGISTRY if not label.startswith("ex-00-")]
    assert book and all(label in NUMBERS for label in book), sorted(set(book) - set(NUMBERS))
    for label in book:
        assert NUMBERS[label].split(".")[0] == str(int(label[3:5]))


def test_helpers_are_followed_in_a_namespace_without_a_name():
    """The grader runs cells in a plain dict: functions there have no __module__ to go by."""
    namespace: dict = {}
    code = PACKAGE_ANSWERS["through-a-helper"]
    import linecache

    linecache.cache["<no-name>"] = (len(code), None, code.splitlines(True), "<no-name>")
    exec(compile(code, "<no-name>", "exec"), namespace)
    assert "attention_book" in package_use(namespace["my_softmax"])


def test_an_answer_that_cannot_be_inspected_is_judged_by_its_tests():
    class Odd:
        def __getattribute__(self, name):
            raise RuntimeError("no attributes here")

        def __call__(self, scores, dim=-1):
            return torch.softmax(scores, dim)

    verdict = softmax_check(Odd())
    assert not verdict.write_your_own and verdict.total == 1


# --- what a verdict shows (issue 21) ---------------------------------------------------------------


def test_a_guard_waiting_for_values_is_not_reported_as_fail():
    """A correct shape with wrong values reads "not checked until the values are right", not FAIL;
    it still counts as failed (a non-attempt scores 0)."""
    verdict = guarded(lambda x: x + 1)  # right shape, input unchanged, wrong values
    text = str(verdict)
    assert "FAIL  doubles" in text
    assert "....  input unchanged: not checked until the values are right" in text
    assert "FAIL  input unchanged" not in text and "FAIL  keeps the shape" not in text
    assert verdict.pending == ["input unchanged", "keeps the shape"] and verdict.score == 0.0
    assert [status for status, _, _ in verdict.results()] == ["FAIL", "WAIT", "WAIT"]


def test_each_hint_is_printed_once():
    @register("ex-00-same-hint", "Same hint")
    def same_hint(answer):
        def small():
            if answer(2) != 4:
                raise Hint("multiply by two")

        def large():
            if answer(1000) != 2000:
                raise Hint("multiply by two")

        return [("small", small), ("large", large)]

    verdict = same_hint(lambda x: x + 3)
    text = str(verdict)
    assert text.count("multiply by two") == 1 and "the same mistake as above" in text
    assert verdict.summary().count("multiply by two") == 1
    assert dict(verdict.failed)["large"] == "multiply by two"  # the data keeps every hint


def test_results_follow_the_order_of_the_checks():
    verdict = guarded(lambda x: 2 * x)
    assert [name for _, name, _ in verdict.results()] == ["doubles", "input unchanged", "keeps the shape"]


def test_plural_forms():
    @register("ex-00-one", "One check")
    def one(answer):
        return [("only", answer)]

    assert "all 1 check passed" in str(one(lambda: None))
    assert "all 3 checks passed" in str(guarded(lambda x: 2 * x))


@pytest.mark.parametrize("answer, where", [
    (torch.zeros, None),  # a library function: it raises inside the check's own call
    (lambda scores, dim=-1: scores.exp().sum(dim=dim) / scores.mm(scores), "scores.mm(scores)"),
    (lambda scores, dim=-1: torch.einsum("ij,jk->ik", scores), "torch.einsum"),
], ids=["library-function", "own-line", "inside-torch"])
def test_no_line_of_the_checks_reaches_the_reader(answer, where):
    """An answer that raises inside the check: the message names the error and, when the
    reader's own code is in the traceback, the reader's line; never a line of the checks."""
    from attention_book.checks import ch03

    text = str(ch03.stable_softmax(answer))
    assert "your code raised" in text, text
    for line in re.findall(r"line \d+[^`]*`([^`]*)`", text):
        assert where is not None and where in line, text
    assert "out = fn(" not in text and "checks/" not in text and "site-packages" not in text
    if where is not None:
        assert "of your code" in text, text


def test_a_test_that_waits_for_the_values_is_shown_as_waiting():
    """A test of a derived property (gradients) that raises VALUES_FIRST reads as waiting, not as a
    failure of its own, and still scores 0."""
    from attention_book.checks.core import VALUES_FIRST

    @register("ex-00-values-first", "Values first")
    def values_first(answer):
        def values():
            if answer(2) != 4:
                raise Hint("double the number")

        def gradient():
            if answer(2) != 4:
                raise Hint(VALUES_FIRST)

        return [("values", values), ("gradient", gradient)]

    verdict = values_first(lambda x: x)
    assert [s for s, _, _ in verdict.results()] == ["FAIL", "WAIT"] and verdict.score == 0.0
    assert "....  gradient: not checked until the values are right" in str(verdict)
    assert "FAIL  gradient" not in str(verdict)


# ------------------------------------------------------------------------------------------------
# Issue 29/30: rules on operations, the main-value rule, code reached at run time
# ------------------------------------------------------------------------------------------------


def test_main_value_rule_caps_a_verdict_at_half():
    @register("ex-98-main", "main value rule")
    def check(answer):
        def fails():
            raise Hint("the values are wrong")

        return [Guard("shape", lambda: None), ("values", fails), ("edge 1", lambda: None),
                ("edge 2", lambda: None), ("edge 3", lambda: None)]

    verdict = check(lambda: None)
    assert verdict.main == "values" and verdict.score == 0.5 and not verdict.ok

    @register("ex-98-main-ok", "main value passes")
    def other(answer):
        def fails():
            raise Hint("an edge case")

        return [("values", lambda: None), ("edge", fails), ("edge 2", lambda: None)]

    assert other(lambda: None).score == pytest.approx(2 / 3)


def test_a_broken_rule_scores_zero_as_with_the_grader():
    from attention_book.checks.core import check_operations

    @register("ex-03-stable-softmax", "A numerically stable softmax")
    def check(answer):
        scores = torch.randn(2, 3, generator=torch.Generator().manual_seed(0))

        def values():
            assert torch.allclose(answer(scores), torch.softmax(scores, dim=-1))

        return [("values", values), Guard("rule", lambda: check_operations("ex-03-stable-softmax", answer, scores))]

    looked_up = check(lambda s, dim=-1: getattr(torch, "softmax")(s, dim=dim))
    assert looked_up.rule_broken and looked_up.score == 0 and "ready-made softmax" in str(looked_up)
    own = check(lambda s, dim=-1: (s - s.amax(dim, keepdim=True)).exp() / (s - s.amax(dim, keepdim=True)).exp().sum(
        dim, keepdim=True))
    assert own.ok and own.score == 1.0


def test_code_looked_up_at_run_time_is_not_own_work():
    from attention_book.checks.answers import dynamic_use, own_work

    namespace = load_answer(
        "import torch\n"
        "import torch.nn.functional as F\n"
        "def by_dict(s, dim=-1):\n    return F.__dict__['softmax'](s, dim=dim)\n"
        "def by_main(s, dim=-1):\n    import __main__\n    return __main__.f(s)\n"
        "def by_shell(s, dim=-1):\n    return get_ipython().user_ns['f'](s)\n"
        "def honest(s, dim=-1):\n    softmax = (s - s.amax(dim, keepdim=True)).exp()\n"
        "    return softmax / softmax.sum(dim, keepdim=True)\n", "dynamic")
    for name, what in (("by_dict", "__dict__"), ("by_main", "__main__"), ("by_shell", "user_ns")):
        assert what in dynamic_use(namespace[name]), name
        assert "run time" in own_work(namespace[name], "ex-98-x")
    assert dynamic_use(namespace["honest"]) == "" and own_work(namespace["honest"], "ex-98-x") == ""


def test_package_code_kept_in_a_container_is_still_package_code():
    from attention_book.scores import stable_softmax

    namespace = load_answer("def answer(s):\n    return helpers['softmax'](s)\n", "container")
    namespace["helpers"] = {"softmax": stable_softmax}
    assert "stable_softmax" in package_use(namespace["answer"])
