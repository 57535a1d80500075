"""Hidden tests: instructor-only tests that decide the points, run in the grader's process.

They live in ``instructor/hidden_tests/chNN.py`` (outside the book and the student release; the
grader loads only the graded chapter's file, and never inside a student's kernel). A hidden test
is a function of two answer sessions, ``student`` and ``reference`` (see :class:`Session`), that
returns when the answer is right and raises :class:`Hint` saying what is wrong::

    @hidden_test("ex-03-stable-softmax", "a (B, T, T) batch along dim=1")
    def _(student, reference):
        scores = randn(2, 3, 4, seed=2)
        same(student.call("my_softmax", scores, dim=1), reference.call("my_softmax", scores, dim=1),
             "my_softmax(scores, dim=1)", hint="use the dim argument for the max and the sum")

The format and its rules: ``instructor/README.md`` ("Hidden tests: the format").
"""

from __future__ import annotations

import math
import runpy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from ..checks.core import Hint
from .wire import Opaque  # a value the kernel cannot send back as data: its type only

__all__ = ["Hint", "HiddenTest", "hidden_test", "load_hidden_tests", "randn", "same", "Session",
           "AnswerError", "NotImplementedYet", "Opaque", "HIDDEN_TESTS", "answer", "RemoteNamespace",
           "LocalSession", "answer_error"]


class AnswerError(Exception):
    """The student's code raised while the grader called it (``ename``: the exception's type)."""

    def __init__(self, ename: str, evalue: str, where: str = "", from_grader: bool = False):
        super().__init__(f"{ename}: {evalue}")
        self.ename, self.evalue, self.where = ename, evalue, where
        self.from_grader = from_grader  # the grader's own words (time limit, refused reply), not the kernel's


class NotImplementedYet(AnswerError):
    """The answer still raises ``NotImplementedError`` (the release's stub)."""


_BUILTIN_ERRORS = {cls.__name__: cls for cls in (ValueError, TypeError, IndexError, KeyError, RuntimeError,
                                                 ZeroDivisionError, AttributeError, NameError)}
_ERROR_TYPES: Dict[str, type] = {}


def answer_error(ename: str, evalue: str) -> AnswerError:
    """The error to raise in the grader for an error the answer raised in its kernel: also an
    instance of the builtin exception of that name (``except ValueError`` works in tests)."""
    if ename == "NotImplementedError":
        return NotImplementedYet(ename, evalue)
    builtin = _BUILTIN_ERRORS.get(ename)
    if builtin is None:
        return AnswerError(ename, evalue)
    if ename not in _ERROR_TYPES:
        _ERROR_TYPES[ename] = type(f"Answer{ename}", (AnswerError, builtin), {"__str__": AnswerError.__str__})
    return _ERROR_TYPES[ename](ename, evalue)


class Session:
    """What a hidden test can ask a notebook (the student's or the reference's).

    Every question is one request of a fixed vocabulary (:mod:`.kernel_side`) with data inputs:
    no code travels to a kernel. Subclasses implement :meth:`request`; ``source`` is the
    exercise's answer-cell text (read by the grader from the file, never from the kernel).
    """

    source: str = ""

    def note_mutation(self, name: str) -> None:
        """``name`` changed a tensor the test passed in (the grader kept its own copy); a session
        that reports flags to the instructor lists it."""

    def request(self, op: str, /, **payload: Any) -> dict:  # pragma: no cover - interface
        """The kernel's reply to one request (a dict with ``value``); AnswerError when the answer raised."""
        raise NotImplementedError

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The value of ``name(*args, **kwargs)`` in the notebook."""
        return self.call_after(name, *args, **kwargs)[0]

    def call_after(self, name: str, *args: Any, **kwargs: Any):
        """``(value, after)``: ``after`` holds the tensor arguments as the call left them
        (``{"args": [...], "kwargs": {...}}``; what the answer changed in place shows there)."""
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"call() needs a name defined by the notebook, got {name!r}")
        reply = self.request("call", name=name, args=list(args), kwargs=dict(kwargs))
        return reply.get("value"), reply.get("after") if isinstance(reply.get("after"), dict) else {}

    def has(self, name: str) -> bool:
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"has() needs an identifier, got {name!r}")
        return self.request("has", name=name).get("value") is True

    def probe(self, procedure: str, /, **inputs: Any) -> Any:
        """The value of one of the public procedures of :mod:`.probes` run on the notebook."""
        from .probes import PROBES

        if procedure not in PROBES:
            raise ValueError(f"no probe named {procedure!r}: add it to attention_book.instructor.probes")
        return self.request("probe", name=procedure, inputs=dict(inputs)).get("value")

    def run(self, code: str, **inputs: Any) -> Any:
        raise TypeError("hidden tests send inputs only, never code, to a kernel: use call(), has() or a "
                        "procedure of attention_book.instructor.probes with probe(name, **inputs)")


@dataclass
class HiddenTest:
    exercise: str
    name: str
    weight: float
    function: Callable[[Session, Session], None]
    guard: bool = False  # counts only when a value test of the exercise passed ("input unchanged")


class LocalSession(Session):
    """A session on a namespace in this process (tests of the hidden tests; trusted code only).

    Requests and replies take the same way through the data format as with a kernel."""

    def __init__(self, ns: Dict[str, Any], source: str = ""):
        self.ns, self.source = ns, source

    def request(self, op: str, /, **payload: Any) -> dict:
        from . import wire
        from .kernel_side import encode_reply, handle

        try:
            request = wire.decode(wire.encode(dict(payload, op=op), strict=True))
        except (TypeError, wire.WireError) as err:
            raise TypeError(f"hidden-test inputs must be tensors and plain data: {err}") from None
        reply = wire.decode(encode_reply(handle(self.ns, request)))
        if not reply["ok"]:
            raise answer_error(str(reply["ename"]), str(reply["evalue"]))
        return reply


#: exercise label -> hidden tests registered by the file being loaded
HIDDEN_TESTS: Dict[str, List[HiddenTest]] = {}


def hidden_test(exercise: str, name: str, weight: float = 1.0, guard: bool = False):
    """Register ``function(student, reference)`` as a hidden test of ``exercise`` worth ``weight``.

    ``guard=True``: a property a non-attempt also has ("the input stays unchanged"): it counts only
    when at least one other test of the exercise passed."""
    if not isinstance(exercise, str) or not exercise.startswith("ex-"):
        raise ValueError(f"hidden_test needs an exercise label like 'ex-01-positions', got {exercise!r}")
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise TypeError(f"hidden test {name!r}: weight must be a number, got {type(weight).__name__}")
    if not (math.isfinite(weight) and weight > 0):
        raise ValueError(f"hidden test {name!r}: weight must be a finite number > 0, got {weight!r}: "
                         "use 1 for an ordinary test")

    def decorate(function):
        import inspect

        runner = function
        if len(inspect.signature(function).parameters) == 1:  # a test of the namespace: f(ns)
            def runner(student, reference, _function=function):
                from .remote import RemoteNamespace

                return _function(RemoteNamespace(student))
        HIDDEN_TESTS.setdefault(exercise, []).append(HiddenTest(exercise, name, float(weight), runner, guard))
        return function

    return decorate


def load_hidden_tests(path: Path) -> Dict[str, List[HiddenTest]]:
    """Load one hidden-test file (in this process) and return label -> tests, in file order."""
    HIDDEN_TESTS.clear()
    try:
        runpy.run_path(str(path), run_name=f"hidden_tests.{Path(path).stem}")
        tests = {label: list(found) for label, found in HIDDEN_TESTS.items()}
    except Exception as err:
        raise RuntimeError(f"hidden tests {path} failed to load: {type(err).__name__}: {err}") from err
    finally:
        HIDDEN_TESTS.clear()
    for label, found in tests.items():
        names = [t.name for t in found]
        if len(set(names)) != len(names):
            raise RuntimeError(f"hidden tests {path}: two tests of {label} share a name: {names}")
    return tests


# ------------------------------------------------------------------------------------------------
# Helpers for writing tests
# ------------------------------------------------------------------------------------------------


def randn(*shape, seed: int, scale: float = 1.0, dtype=None):
    """A seeded standard-normal tensor (deterministic inputs: the reference is looked up by value)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=generator, dtype=dtype or torch.float32)


def _tensor(value, what: str):
    import torch

    if isinstance(value, Opaque):
        raise Hint(f"{what} must return a torch.Tensor, got a {value.type_name}")
    if not isinstance(value, torch.Tensor):
        raise Hint(f"{what} must return a torch.Tensor, got {type(value).__name__}")
    return value


def same(got, want, what: str, hint: str = "", atol: float = 1e-5, rtol: float = 1e-4,
         check_dtype: bool = True) -> None:
    """Raise a Hint unless ``got`` matches the reference ``want`` (type, shape, dtype, values)."""
    import torch

    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            raise Hint(f"{what} must return {len(want)} values (a tuple), got {type(got).__name__}")
        for index, (g, w) in enumerate(zip(got, want)):
            same(g, w, f"{what}[{index}]", hint, atol, rtol, check_dtype)
        return
    if not isinstance(want, torch.Tensor):
        if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
            if math.isclose(got, want, rel_tol=rtol, abs_tol=atol):
                return
        elif got == want and type(got) is type(want):
            return
        shown = repr(got) if len(repr(got)) <= 40 else f"a {type(got).__name__}"  # no room to carry data out
        raise Hint(f"{what}: expected {want!r}, got {shown}" + (f": {hint}" if hint else ""))
    got = _tensor(got, what)
    if tuple(got.shape) != tuple(want.shape):
        raise Hint(f"{what}: expected shape {tuple(want.shape)}, got {tuple(got.shape)}"
                   + (f": {hint}" if hint else ""))
    if check_dtype and got.dtype != want.dtype:
        raise Hint(f"{what}: expected dtype {want.dtype}, got {got.dtype}: keep the input's dtype")
    if got.dtype == torch.bool or want.dtype == torch.bool:
        ok = torch.equal(got, want)
    else:
        ok = torch.allclose(got.to(want.dtype), want, atol=atol, rtol=rtol, equal_nan=False)
    if not ok:
        if not torch.isfinite(got.to(torch.float64)).all() and torch.isfinite(want.to(torch.float64)).all():
            raise Hint(f"{what} contains nan or inf where the right answer is finite"
                       + (f": {hint}" if hint else ""))
        raise Hint(f"{what} gives wrong values" + (f": {hint}" if hint else ""))


def shown_error(ename: str, evalue: str) -> str:
    """An error the answer raised, as the grader repeats it to the student: the exception's name
    and the first line of its message, unless that line shows values (a float, a long number: it
    could carry the hidden test's inputs out); sizes and counts (short integers) are kept."""
    import re

    name = ename if re.fullmatch(r"[A-Za-z_][A-Za-z_.]{0,59}", ename or "") else "an exception"
    lines = (evalue or "").strip().splitlines()
    first = lines[0].strip() if lines else ""
    if re.search(r"\d\.\d|\d{4,}|\d[eE][-+]?\d|inf|nan", first) or len(re.findall(r"\d", first)) > 24:
        first = "(its message shows numbers, perhaps the test's inputs: not repeated here)"
    return f"{name}: {first[:200]}" if first else name


def answer_error_message(err: AnswerError) -> str:
    where = f" ({err.where})" if err.where else ""
    if getattr(err, "from_grader", False):
        return err.evalue[:300] + where
    return f"your code raised {shown_error(err.ename, err.evalue)}"[:300] + where


def describe(value: Optional[Any]) -> str:  # used in messages
    return type(value).__name__


from .remote import RemoteFunction, RemoteNamespace, answer  # noqa: E402, F401  (tests of ``ns``: see remote)
