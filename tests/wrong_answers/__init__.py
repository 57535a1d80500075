"""Plausible wrong answers to every coding exercise, shared by the self-check tests and the grader tests.

One module per chapter (``chNN.py``) defines ``WRONG_ANSWERS``: a dict from exercise label to a list of
:class:`WrongAnswer`. Each answer is *source code* (what a student would type into the answer cell,
signature included), so the same fixture can be ``exec``'d against a self-check and pasted into a
submitted notebook for the autograder.

Rules (tests enforce them):

* at least six wrong answers per coding exercise, each a mistake a learner really makes (wrong axis,
  missing scale, wrong triangle, transposed weights, shifted mask, in-place mutation, hard-coded
  sizes, right only for the chapter's example, calling the package's finished function, a
  non-attempt such as returning zeros or the input unchanged, ...);
* ``hint`` is a substring (case-insensitive) that the self-check's message must contain: it names
  the actual mistake, not a generic "wrong values";
* every wrong answer must get at least one failed check, and a non-attempt must score 0.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import Dict, List


@dataclass(frozen=True)
class WrongAnswer:
    name: str  # short id, e.g. "subtracts-row-mean"
    code: str  # the answer cell's source, defining the same names as the solution
    hint: str  # substring the self-check's failure message must contain (case-insensitive)
    non_attempt: bool = False  # zeros / identity / input unchanged: must score exactly 0


def all_wrong_answers() -> Dict[str, List[WrongAnswer]]:
    """Every chapter module's WRONG_ANSWERS merged into one dict keyed by exercise label."""
    merged: Dict[str, List[WrongAnswer]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name.startswith("ch"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            for label, answers in getattr(module, "WRONG_ANSWERS", {}).items():
                merged.setdefault(label, []).extend(answers)
    return merged


def load_answer(code: str, name: str = "answer") -> dict:
    """Run an answer's source like a notebook cell would and return its namespace.

    The source is registered in :mod:`linecache` under a unique file name, so
    ``inspect.getsource`` works on the functions it defines (as it does on notebook cells),
    which the self-checks that inspect an answer's code rely on.
    """
    import linecache

    filename = f"<wrong-answer {name} {abs(hash(code)):x}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    namespace: dict = {"__name__": "__main__"}
    exec(compile(code, filename, "exec"), namespace)  # noqa: S102 - test fixture code
    return namespace
