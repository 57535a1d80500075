"""Reference values and running the hidden tests (the grader's side).

Before any student code runs, :func:`compute_references` runs the chapter's own notebook (the
solution, trusted) in a sandboxed kernel and every hidden test against it, with a recording
session: each reply a test gets is kept in a :class:`ReferenceCache`, keyed by the exact request
(operation, name, inputs). While students are graded, ``reference`` is a lookup in that cache
(never a live kernel), so the reference values come from before any student code ran, and no
student's kernel can change them.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Dict, List, Tuple

from . import wire
from .course import Course
from .hidden import AnswerError, HiddenTest, NotImplementedYet, Session, answer_error, answer_error_message
from .markup import Chapter
from .planning import plan_reference
from .runner import ReplyRefused, RunOptions, run_notebook

__all__ = ["ReferenceCache", "run_tests", "compute_references"]


def _canonical(value):
    """``value`` with dict items in sorted key order (the cache key must not depend on order)."""
    if isinstance(value, dict):
        return {k: _canonical(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (tuple, list)):
        return type(value)(_canonical(v) for v in value)
    return value


def _key(op: str, payload: Dict[str, Any]) -> str:
    data = wire.encode(_canonical(dict(payload, op=op)), strict=True)
    return hashlib.sha256(data).hexdigest()


class ReferenceCache:
    """Reference replies, filled while the tests run on the chapter's own notebook; keyed by the
    exact request (operation, name, inputs)."""

    def __init__(self) -> None:
        self.values: Dict[str, dict] = {}

    def to_bytes(self) -> bytes:
        return wire.encode(self.values, wire.Bounds(max_bytes=1 << 30, max_items=10_000_000), strict=False)

    @classmethod
    def from_bytes(cls, data: bytes) -> "ReferenceCache":
        cache = cls()
        cache.values = wire.decode(data, wire.Bounds(max_bytes=1 << 30, max_items=10_000_000))
        return cache

    class Recording(Session):
        def __init__(self, cache: "ReferenceCache", inner: Session, source: str):
            self.cache, self.inner, self.source = cache, inner, source

        def request(self, op: str, /, **payload: Any) -> dict:
            key = _key(op, payload)
            try:
                reply = self.inner.request(op, **payload)
            except AnswerError as err:
                self.cache.values[key] = {"ok": False, "ename": err.ename, "evalue": err.evalue}
                raise
            self.cache.values[key] = reply
            return reply

    class Lookup(Session):
        def __init__(self, cache: "ReferenceCache", source: str):
            self.cache, self.source = cache, source

        def request(self, op: str, /, **payload: Any) -> dict:
            found = self.cache.values.get(_key(op, payload))
            if found is None:
                raise LookupError("this hidden test asked the reference for a value it did not ask for on the "
                                  "chapter's notebook (its inputs must not depend on the student's values)")
            if not found.get("ok"):
                raise answer_error(str(found.get("ename")), str(found.get("evalue")))
            return found


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
            if isinstance(err, ReplyRefused):
                entry["refused"] = True
        except LookupError as err:
            entry["hint"] = f"grader problem: {err}"
            entry["grader_error"] = True
        except MemoryError:  # the grader's process, not the answer: its caller decides (never "wrong values")
            raise
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
