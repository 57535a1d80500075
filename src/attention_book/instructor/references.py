"""Reference values and running the hidden tests (the grader's side).

Before any student code runs, :func:`compute_references` runs the chapter's own notebook (the
solution, trusted) in a sandboxed kernel and every hidden test against it, with a recording
session: each value a test asks for is kept in a :class:`ReferenceCache`, keyed by the exact code
and inputs. While students are graded, ``reference`` is a lookup in that cache (never a live
kernel), so the reference values come from before any student code ran.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Dict, List, Tuple

from .course import Course
from .hidden import AnswerError, HiddenTest, NotImplementedYet, Session, answer_error, answer_error_message
from .markup import Chapter
from .planning import plan_reference
from .runner import RunOptions, run_notebook

__all__ = ["ReferenceCache", "run_tests", "compute_references"]


def _key(code: str, inputs: Dict[str, Any]) -> str:
    import torch

    digest = hashlib.sha256(code.encode("utf-8"))

    def feed(value) -> None:
        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous()
            digest.update(f"T{t.dtype}{tuple(t.shape)}".encode())
            digest.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
        elif isinstance(value, dict):
            digest.update(b"{")
            for k in sorted(value, key=str):
                digest.update(repr(k).encode())
                feed(value[k])
            digest.update(b"}")
        elif isinstance(value, (tuple, list)):
            digest.update(b"(" if isinstance(value, tuple) else b"[")
            for v in value:
                feed(v)
            digest.update(b")")
        else:
            digest.update(f"{type(value).__name__}:{value!r};".encode())

    feed(inputs)
    return digest.hexdigest()


class ReferenceCache:
    """Reference values, filled while the tests run on the chapter's own notebook."""

    def __init__(self) -> None:
        self.values: Dict[str, Tuple[bool, Any]] = {}

    class Recording(Session):
        def __init__(self, cache: "ReferenceCache", inner: Session, source: str):
            self.cache, self.inner, self.source = cache, inner, source

        def run(self, code: str, **inputs: Any) -> Any:
            key = _key(code, inputs)
            try:
                value = self.inner.run(code, **inputs)
            except AnswerError as err:
                self.cache.values[key] = (False, (type(err).__name__, err.ename, err.evalue))
                raise
            self.cache.values[key] = (True, value)
            return value

    class Lookup(Session):
        def __init__(self, cache: "ReferenceCache", source: str):
            self.cache, self.source = cache, source

        def run(self, code: str, **inputs: Any) -> Any:
            found = self.cache.values.get(_key(code, inputs))
            if found is None:
                raise LookupError("this hidden test asked the reference for a value it did not ask for on the "
                                  "chapter's notebook (its inputs must not depend on the student's values)")
            ok, value = found
            if ok:
                return value
            kind, ename, evalue = value
            raise answer_error(ename, evalue)


def run_tests(tests: List[HiddenTest], student: Session, reference: Session) -> List[dict]:
    """Run an exercise's tests; one result per test (never raises for the student's code)."""
    from .hidden import Hint

    results = []
    for test in tests:
        entry = {"name": test.name, "passed": False, "hint": "", "not_implemented": False}
        try:
            test.function(student, reference)
            entry["passed"] = True
        except NotImplementedYet:
            entry["not_implemented"] = True
            entry["hint"] = "not implemented yet"
        except (Hint, AssertionError) as err:
            entry["hint"] = str(err)[:400] or "failed"
        except AnswerError as err:
            entry["hint"] = answer_error_message(err)
        except LookupError as err:
            entry["hint"] = f"grader problem: {err}"
            entry["grader_error"] = True
        except Exception as err:  # the student's values made the comparison fail
            entry["hint"] = f"unexpected values ({type(err).__name__}: {str(err)[:200]})"
        results.append(entry)
    return results


def compute_references(course: Course, chapter: Chapter, tests: Dict[str, List[HiddenTest]],
                       labels: List[str], options: RunOptions) -> Tuple[ReferenceCache, float]:
    """Run every hidden test on the chapter's own notebook; all must pass."""
    import nbformat

    started = time.monotonic()
    source_nb = nbformat.read(str(course.root / chapter.path), as_version=4)
    plan = plan_reference(source_nb, chapter, labels)
    cache = ReferenceCache()
    failures: List[str] = []
    seen: set = set()

    def on_point(point_labels, session) -> None:
        for label in point_labels:
            seen.add(label)
            recording = ReferenceCache.Recording(cache, session, plan.sources.get(label, ""))
            for entry in run_tests(tests.get(label, []), recording, recording):
                if not entry["passed"]:
                    failures.append(f"{label} / {entry['name']}: {entry['hint']}")

    result = run_notebook(plan.cells, plan.points, on_point, options, course.root)
    if result.stop:
        failures.append(f"the chapter's notebook did not run: {result.stop}")
    failures += [f"{label}: not reached" for label in labels if label not in seen and tests.get(label)]
    if failures:
        raise RuntimeError(f"hidden tests of {chapter.stem} fail on the chapter's own solution (fix the tests "
                           "or the notebook before grading):\n  " + "\n  ".join(failures[:20]))
    return cache, time.monotonic() - started
