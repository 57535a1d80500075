"""The machinery behind every exercise self-check.

A self-check is a function in ``attention_book.checks.chNN`` that takes the reader's answer
(a function, a tensor or a module), runs a few small named tests on it and returns a
:class:`Verdict`. The verdict prints a friendly message - what is right, what is wrong and a hint -
instead of a bare traceback. Self-checks never raise, so a notebook keeps running.

Writing one::

    @register("ex-01-positions", "Add position embeddings")
    def position_embeddings(add_positions):
        def shape():
            out = add_positions(torch.zeros(2, 4, 3), torch.nn.Embedding(8, 3))
            if out.shape != (2, 4, 3):
                raise Hint(f"expected shape (2, 4, 3), got {tuple(out.shape)}; ...")
        def values():
            ...  # compare with the expected numbers; raise Hint naming the mistake
        def untouched():
            ...  # the input tensor is unchanged after the call
        return [
            ("adds the position vectors", values),
            Guard("keeps the (B, T, C) shape", shape),  # a non-attempt keeps the shape too
            Guard("input unchanged", untouched),
        ]

The decorator turns the returned list of tests into a verdict and records it in :data:`HISTORY`,
which the autograder reads after running a submission.

Three rules make a verdict honest:

* **Non-attempts score 0.** An answer that still raises ``NotImplementedError`` is "not
  implemented yet". A :class:`Guard` (a test of a property that a non-attempt also has, such as
  "input unchanged", "keeps the shape", "does not call torch.softmax") only counts once at least
  one ordinary (value) test passes; otherwise it counts as failed, so returning zeros or the input
  unchanged scores 0.
* **Write your own.** :func:`register` refuses an answer that *is* or *uses* the package's own
  finished code (defined in ``attention_book``, or whose code imports or calls it) or the code
  the chapter body defines before the exercise (its worked functions and classes): the verdict
  says "write your own" and scores 0. What an exercise may use is listed in one place read by the
  self-check and the grader, :mod:`attention_book.checks.rules` (``register(..., allowed=[...])``
  adds to it).
* **Rules in the task text are checked on what the answer does.** :func:`check_operations`
  records the tensor operations an answer runs (:mod:`attention_book.checks.opgraph`) and raises
  a :class:`Hint` when they break the exercise's ``ops`` rule in
  :mod:`attention_book.checks.rules` ("without a ready-made softmax": ``_softmax`` and
  ``logsumexp`` however they are reached; "by a matrix product, not a lookup"). The grader
  decides on the same operations, recorded in a fresh sandbox and replayed in its own process.
  :func:`answer_source` reads the source of a function or class (in a notebook, a script or
  :func:`tests.wrong_answers.load_answer`) for hints about the code's shape; never decide a rule
  on the spelling of names (a local variable called ``softmax`` is not a call).

Banners name exercises by their chapter number ("Exercise 3.2"), the same number as on the site,
in the student release and in the grader's CSV (see :mod:`attention_book.checks.numbering`).
"""

from __future__ import annotations

import functools
import html
import os
import sys
import sysconfig
import traceback
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, NamedTuple, Sequence, Tuple, Union

from .answers import WRITE_YOUR_OWN, answer_source, calls, own_work, package_use
from .numbering import exercise_name

__all__ = [
    "Hint",
    "Verdict",
    "Guard",
    "register",
    "run_tests",
    "answer_source",
    "calls",
    "package_use",
    "REGISTRY",
    "HISTORY",
    "history_as_dict",
    "close",
    "NOT_IMPLEMENTED",
    "WRITE_YOUR_OWN",
    "VALUES_FIRST",
    "check_operations",
    "RuleBroken",
]

NOT_IMPLEMENTED = "not implemented yet"
#: the most a verdict whose main value test failed scores (the grader's main-value rule)
MAIN_VALUE_SHARE = 0.5
#: what a guard that passed says while no value check has passed (it still counts as failed)
GUARD_HINT = "not checked until the values are right (no value check passed yet)"
#: what a failed check says when an earlier check already printed the same hint
SAME_HINT = "the same mistake as above"
#: the hint of a test of a derived property (gradients, ...) while the values are wrong: the
#: verdict shows it as waiting, not as FAIL (it still counts as failed)
VALUES_FIRST = (
    "not checked until the values are right: with wrong values this property cannot be judged "
    "(the checks above say what is wrong)"
)


class Hint(Exception):
    """Raised by a test to say what is wrong and how to fix it (shown to the reader)."""


class RuleBroken(Hint):
    """Raised by a test when the answer breaks the exercise's rule ("without a ready-made
    softmax"): the whole verdict scores 0, as the grader scores the exercise 0."""


class Guard(NamedTuple):
    """A test that only counts once the answer's values are right.

    Use it for properties a non-attempt also has: "input unchanged", "keeps the shape",
    "written without torch.softmax". If no ordinary test of the list passes, every guard counts
    as failed (with its own hint if it failed, else :data:`GUARD_HINT`), so a non-attempt scores 0.
    It unpacks like the ``(name, test)`` pairs it sits between.
    """

    name: str
    test: Callable[[], None]


@dataclass
class Verdict:
    exercise: str
    title: str
    passed: List[str] = field(default_factory=list)
    failed: List[Tuple[str, str]] = field(default_factory=list)  # (test name, hint)
    not_implemented: bool = False
    write_your_own: str = ""  # why the answer was refused (it is or uses the package's code)
    #: guards that passed while no value check did: in ``failed`` (they score 0), but shown as
    #: "not checked until the values are right" rather than FAIL
    pending: List[str] = field(default_factory=list)
    order: List[str] = field(default_factory=list)  # test names in the order the check lists them
    main: str = ""  # the main value test: the first ordinary (not Guard) test the check lists
    rule_broken: str = ""  # the exercise's rule the answer breaks (scores 0, as with the grader)

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failed)

    @property
    def ok(self) -> bool:
        return (
            not self.failed and not self.not_implemented and not self.write_your_own
            and not self.rule_broken and self.total > 0
        )

    @property
    def score(self) -> float:
        """Fraction of the tests passed (0.0 - 1.0), at most :data:`MAIN_VALUE_SHARE` when the main
        value test failed: the grader's main-value rule (``instructor/scoring.py``), so a wrong
        answer that gets the side properties right is not "86 % right"."""
        if self.not_implemented or self.write_your_own or self.rule_broken or self.total == 0:
            return 0.0
        fraction = len(self.passed) / self.total
        if self.main and self.main not in self.passed:
            fraction = min(fraction, MAIN_VALUE_SHARE)
        return fraction

    @property
    def name(self) -> str:
        """"Exercise 3.2": the number the site, the release and the grader use."""
        return exercise_name(self.exercise)

    def as_dict(self) -> dict:
        return {
            "exercise": self.exercise,
            "title": self.title,
            "score": self.score,
            "passed": list(self.passed),
            "failed": [list(f) for f in self.failed],
            "not_implemented": self.not_implemented,
            "write_your_own": self.write_your_own,
            "rule_broken": self.rule_broken,
        }

    def results(self) -> List[Tuple[str, str, str]]:
        """``(status, test name, hint)`` per test, in the check's order; status is "PASS",
        "FAIL" or "WAIT" (a guard not checked until the values are right). A hint that an earlier
        failed test already gave is replaced by :data:`SAME_HINT`, so each hint is read once."""
        hints = dict(self.failed)
        names = [n for n in self.order if n in hints or n in self.passed]
        names += [n for n in self.passed + [n for n, _ in self.failed] if n not in names]
        out: List[Tuple[str, str, str]] = []
        seen: List[str] = []
        for name in names:
            if name in self.pending:
                out.append(("WAIT", name, GUARD_HINT))
            elif hints.get(name, "").startswith("not checked until the values are right"):
                out.append(("WAIT", name, hints[name]))
            elif name in hints:
                hint = hints[name]
                # the same words again, perhaps with an addition before or after them
                earlier = next((h for h in seen if hint.startswith(h) or (len(h) > 20 and h in hint)), None)
                if earlier is not None:
                    hint = hint.replace(earlier, SAME_HINT, 1)
                elif len(hint) > 20 and any(hint in h for h in seen):  # said above with more words
                    hint = SAME_HINT
                else:
                    seen.append(hint)
                out.append(("FAIL", name, hint))
            else:
                out.append(("PASS", name, ""))
        return out

    def summary(self) -> str:
        if self.not_implemented:
            return f"{self.name}: {NOT_IMPLEMENTED}"
        if self.write_your_own:
            return f"{self.name}: {WRITE_YOUR_OWN}: {self.write_your_own}"
        if self.ok:
            return f"{self.name}: all {_count(self.total, 'check')} passed"
        hints = []
        for _, hint in self.failed:
            if hint not in hints:
                hints.append(hint)
        return f"{self.name}: {len(self.passed)} of {_count(self.total, 'check')} passed; " + "; ".join(hints)

    def __str__(self) -> str:
        head = f"{self.name}: {self.title}"
        if self.not_implemented:
            return (
                f"{head}\n  ... {NOT_IMPLEMENTED}: replace the line "
                "`raise NotImplementedError(...)` with your code and run the cell again."
            )
        if self.write_your_own:
            return f"{head}\n  ... {WRITE_YOUR_OWN}: {self.write_your_own}"
        lines = [head]
        for status, name, hint in self.results():
            if status == "PASS":
                lines.append(f"  PASS  {name}")
            elif status == "WAIT":
                lines.append(f"  ....  {name}: not checked until the values are right")
                if hint != GUARD_HINT and not hint.startswith(VALUES_FIRST):
                    lines.append(f"        {hint}")
            else:
                lines.append(f"  FAIL  {name}\n        hint: {hint}")
        if self.ok:
            lines.append(f"  Well done: all {_count(self.total, 'check')} passed.")
        elif self.rule_broken:
            lines.append("  The answer breaks the exercise's rule: 0 points until it does not (see the hint).")
        else:
            lines.append(f"  {len(self.passed)} of {_count(self.total, 'check')} passed; read the hints above.")
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        if self.ok:
            color, icon = "#1a7f37", "&#10004;"
        elif self.not_implemented:
            color, icon = "#9a6700", "&#8230;"
        else:
            color, icon = "#cf222e", "&#10008;"
        body = html.escape(str(self)).replace("\n", "<br>")
        return (
            f'<div class="ab-verdict" data-exercise="{html.escape(self.exercise)}" '
            f'data-score="{self.score:.3f}" style="border-left:4px solid {color};'
            f'padding:4px 10px;font-family:monospace;white-space:pre-wrap">'
            f'<span style="color:{color}">{icon}</span> {body}</div>'
        )


Test = Union[Tuple[str, Callable[[], None]], Guard]


def _count(n: int, noun: str) -> str:
    """``"1 check"``, ``"3 checks"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"

#: exercise id -> self-check function
REGISTRY: Dict[str, Callable[..., Verdict]] = {}
#: exercise id -> the latest verdict in this Python process (read by the autograder)
HISTORY: Dict[str, Verdict] = {}


def _library_folders() -> Tuple[str, ...]:
    """Folders whose code is not the reader's: this package, the standard library, site-packages."""
    folders = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}  # attention_book/
    for path in (sys.prefix, sys.base_prefix, sys.exec_prefix, *sysconfig.get_paths().values()):
        if path:
            folders.add(os.path.abspath(path))
    return tuple(sorted(folders))


def _readers_frame(exc: BaseException):
    """The innermost traceback frame in the reader's own code (a notebook cell, a script), or None.

    Frames inside this package (the checks), the standard library or installed packages (torch)
    are skipped: a line of the checks means nothing to the reader and is never shown."""
    library = _library_folders()
    found = None
    for frame in traceback.extract_tb(exc.__traceback__) if exc.__traceback__ else []:
        name = frame.filename or ""
        if name.startswith("<frozen") or (
            os.path.isabs(name) and os.path.abspath(name).startswith(library)
        ):
            continue
        found = frame
    return found


def _describe(exc: BaseException) -> str:
    frame = _readers_frame(exc)
    where = f" (line {frame.lineno} of your code: `{frame.line}`)" if frame and frame.line else ""
    return f"your code raised {type(exc).__name__}: {exc}{where}"


def run_tests(exercise: str, title: str, tests: Sequence[Test]) -> Verdict:
    """Run named tests; a test passes unless it raises. Never raises itself.

    A :class:`Guard` that passed is turned into a failure when no ordinary test passed.
    """
    verdict = Verdict(exercise, title, order=[entry[0] for entry in tests],
                      main=next((entry[0] for entry in tests if not isinstance(entry, Guard)), ""))
    guards: List[str] = []
    values_passed = 0
    for entry in tests:
        name, test = entry
        try:
            test()
        except NotImplementedError:
            verdict.not_implemented = True
            verdict.failed.append((name, NOT_IMPLEMENTED))
            break
        except Hint as hint:
            verdict.failed.append((name, str(hint)))
            if isinstance(hint, RuleBroken):
                verdict.rule_broken = str(hint)
        except AssertionError as err:
            # first line only: pytest's assertion rewriting appends an explanation below it
            verdict.failed.append((name, (str(err) or "a check failed").splitlines()[0]))
        except Exception as err:  # the reader's code crashed: explain, do not re-raise
            verdict.failed.append((name, _describe(err)))
        else:
            verdict.passed.append(name)
            if isinstance(entry, Guard):
                guards.append(name)
            else:
                values_passed += 1
    if guards and not values_passed:
        order = {entry[0]: index for index, entry in enumerate(tests)}
        verdict.passed = [name for name in verdict.passed if name not in guards]
        verdict.failed += [(name, GUARD_HINT) for name in guards]
        verdict.pending = list(guards)
        verdict.failed.sort(key=lambda failure: order.get(failure[0], len(order)))
    HISTORY[exercise] = verdict
    return verdict


def _check_tests(exercise: str, tests) -> List[Test]:
    """The list a check returned, validated (a mistake here is the check author's, not the reader's)."""
    tests = list(tests)
    for entry in tests:
        if not (isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], str)
                and callable(entry[1])):
            raise TypeError(
                f"{exercise}: a self-check must return (name, test) pairs or Guard(name, test), "
                f"got {entry!r}"
            )
    if tests and all(isinstance(entry, Guard) for entry in tests):
        raise ValueError(
            f"{exercise}: every test is a Guard, so no answer could ever pass: make at least "
            "one test an ordinary (name, test) pair that checks the answer's values"
        )
    return tests


def register(exercise: str, title: str, allowed: Iterable[Union[str, object]] = ()):
    """Decorator: the wrapped function returns a list of tests; the caller gets a Verdict.

    Each test is a ``(name, test)`` pair or a :class:`Guard`. Building the list may itself call
    the reader's code; a crash there is reported, not raised. Every argument that is a function,
    a class or an object of a class is first inspected with :func:`package_use`: an answer that
    is or uses the package's own code gets "write your own" and 0 points, unless what it uses is
    in ``allowed`` (dotted names such as ``"attention_book.multihead.MultiHeadAttention"``, or the
    objects themselves).
    """
    allowed = tuple(allowed)

    def decorate(make_tests: Callable[..., List[Test]]) -> Callable[..., Verdict]:
        @functools.wraps(make_tests)
        def check(*args, **kwargs) -> Verdict:
            for answer in list(args) + list(kwargs.values()):
                try:  # the package's code, or the chapter's worked code (checks/rules.py)
                    used = own_work(answer, exercise, allowed)
                except Exception:  # an odd object we cannot inspect: let the tests judge it
                    used = ""
                if used:
                    verdict = Verdict(exercise, title, write_your_own=used)
                    verdict.failed.append(
                        ("written by you, not taken from attention_book or the chapter",
                         f"{WRITE_YOUR_OWN}: {used}")
                    )
                    HISTORY[exercise] = verdict
                    return verdict
            try:
                tests = make_tests(*args, **kwargs)
            except NotImplementedError:
                verdict = Verdict(exercise, title, not_implemented=True)
                HISTORY[exercise] = verdict
                return verdict
            except Hint as hint:
                tests = [("answer", _raiser(Hint(str(hint))))]
            except Exception as err:
                tests = [("answer runs", _raiser(Hint(_describe(err))))]
            return run_tests(exercise, title, _check_tests(exercise, tests))

        check.exercise = exercise  # type: ignore[attr-defined]
        check.title = title  # type: ignore[attr-defined]
        check.allowed = allowed  # type: ignore[attr-defined]
        REGISTRY[exercise] = check
        return check

    return decorate


def _raiser(exc: BaseException) -> Callable[[], None]:
    def test() -> None:
        raise exc

    return test


def check_operations(exercise: str, answer, *args, **kwargs) -> None:
    """Raise a :class:`Hint` when ``answer(*args, **kwargs)`` does what ``exercise``'s ``ops``
    rule forbids, or does not make a call it requires (:mod:`attention_book.checks.rules`): its
    tensor operations and ``torch`` calls are recorded below Python, so an alias, ``getattr`` or
    a library that calls a softmax for it counts the same as ``torch.softmax``. ``answer`` may be
    any callable: a module's exercise passes one that builds the module and runs its forward.
    The grader's decision (:mod:`attention_book.instructor.clean_room`) is the same
    :func:`~attention_book.checks.opgraph.violations` on the operations it records there."""
    from .opgraph import flatten_tensors, record, rule_hint, violations
    from .rules import rule

    own = rule(exercise).ops
    if own is None:
        return
    try:
        _, graph = record(answer, args, kwargs)
        complete = True
    except Exception as err:  # judged on what it reached before it failed (FlexAttention)
        graph, complete = getattr(err, "opgraph", None), False
        if graph is None or not violations(graph, own, None, complete=False):
            raise
    found = violations(graph, own, flatten_tensors(args, kwargs), complete=complete)
    if found:
        raise RuleBroken(rule_hint(own, found))


def close(actual, expected, atol: float = 1e-5) -> bool:
    """``torch.allclose`` that tolerates shape mismatches (returns False instead of raising)."""
    import torch

    actual = torch.as_tensor(actual).detach().cpu().float()
    expected = torch.as_tensor(expected).detach().cpu().float()
    return actual.shape == expected.shape and bool(torch.allclose(actual, expected, atol=atol))


def history_as_dict() -> Dict[str, dict]:
    return {key: verdict.as_dict() for key, verdict in HISTORY.items()}
