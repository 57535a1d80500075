"""Hidden tests: instructor-only tests the autograder adds to an exercise's public self-check.

They live in ``instructor/hidden_tests/*.py`` (outside the book and the student release). A hidden
test is a function of the student's namespace (the notebook's globals, a mapping) that returns
normally when the answer is right and raises :class:`Hint` (or ``AssertionError``) saying what
is wrong. Example, ``instructor/hidden_tests/ch01.py``::

    import torch
    from attention_book.instructor.hidden import Hint, answer, hidden_test

    @hidden_test("ex-01-positions", "works for a sequence of length 1", weight=1)
    def _(ns):
        add_positions = answer(ns, "add_positions")
        out = add_positions(torch.zeros(3, 1, 4), torch.nn.Embedding(5, 4))
        if out.shape != (3, 1, 4):
            raise Hint(f"expected shape (3, 1, 4) for T=1, got {tuple(out.shape)}")

The autograder runs them in the submission's kernel right after the exercise's self-check cell
(so names the chapter reuses later still hold the student's answer). Partial credit for an
exercise: (public tests passed + hidden weights passed) / (public tests + hidden weights).
Keep them fast (well under a second each) and deterministic (seed what you draw).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping

from ..checks.core import Hint

__all__ = ["Hint", "HiddenTest", "hidden_test", "answer", "HIDDEN_TESTS"]


@dataclass
class HiddenTest:
    exercise: str
    name: str
    weight: float
    function: Callable[[Mapping[str, Any]], None]


#: exercise label -> hidden tests registered by the files loaded so far
HIDDEN_TESTS: Dict[str, List[HiddenTest]] = {}


def hidden_test(exercise: str, name: str, weight: float = 1.0):
    """Register ``function(ns)`` as a hidden test of ``exercise`` worth ``weight`` test units."""
    if not isinstance(exercise, str) or not exercise.startswith("ex-"):
        raise ValueError(f"hidden_test needs an exercise label like 'ex-01-positions', got {exercise!r}")
    if not weight > 0:
        raise ValueError(f"hidden test {name!r}: weight must be > 0, got {weight!r}")

    def decorate(function: Callable[[Mapping[str, Any]], None]):
        HIDDEN_TESTS.setdefault(exercise, []).append(HiddenTest(exercise, name, float(weight), function))
        return function

    return decorate


def answer(ns: Mapping[str, Any], name: str) -> Any:
    """The object the student defined as ``name``, or a Hint saying it is missing."""
    if name not in ns:
        raise Hint(f"`{name}` is not defined: run the cell that defines it (and keep its name)")
    return ns[name]
