"""Points from the grader's own test results: only tests and weights the grader loaded count.

A test result is ``{"name", "passed", "hint", "not_implemented"}``; the weight of each test comes
from the hidden-test file the grader loaded (never from a result), so a result naming an unknown
test, a repeated one or a strange weight changes nothing. Points are
``max x (weights passed / weights)``, clamped to ``[0, max]`` and rounded to 2 decimals.

**The main-value rule** (issue 30): an exercise's *first registered test that is not a guard* is
its main value test (the one that compares the answer's values on the exercise's central case);
an answer that fails it earns at most half the exercise's points, however many side properties
(shapes, dtypes, edge cases, guards) it gets right: grouped-query attention with the heads tiled
in the wrong order or RoPE that ignores ``positions`` is a wrong answer, not 86 % of a right one.
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

from .hidden import HiddenTest
from .report import plural

__all__ = ["score_exercise", "main_test", "MAIN_VALUE_SHARE"]

#: the most an answer that fails its exercise's main value test can earn (a share of the points)
MAIN_VALUE_SHARE = 0.5


def main_test(tests: List[HiddenTest]) -> Optional[HiddenTest]:
    """The exercise's main value test: its first registered test that is not a guard."""
    return next((t for t in tests if not t.guard), None)


def score_exercise(results: Optional[List[dict]], tests: List[HiddenTest], max_points: float,
                   reason: str = "", note: str = "", zero_reason: str = "") -> Tuple[float, str]:
    """Points and message of one exercise (``tests``: the grader's hidden tests of it)."""
    def finish(points: float, message: str) -> Tuple[float, str]:
        if note:
            message = f"{message} ({note})"
        points = min(max(points, 0.0), max_points) if math.isfinite(points) else 0.0
        return round(points, 2), message[:600]

    if not tests:
        return finish(0.0, "no hidden tests for this exercise: grade it by hand")
    if zero_reason:
        return finish(0.0, zero_reason)
    if results is None:
        return finish(0.0, reason or "not evaluated")
    by_name: Dict[str, dict] = {}
    for entry in results:
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            by_name.setdefault(entry["name"], entry)
    total = sum(t.weight for t in tests)
    passed = 0.0
    hints: List[str] = []
    missing = 0
    not_implemented = 0
    values_right = any(by_name.get(t.name, {}).get("passed") is True for t in tests if not t.guard)
    for test in tests:
        entry = by_name.get(test.name)
        if entry is None:
            missing += 1
            continue
        if entry.get("passed") is True and test.guard and not values_right:
            hints.append(f"{test.name}: counts once the values are right")
        elif entry.get("passed") is True:
            passed += test.weight
        elif entry.get("not_implemented") is True:
            not_implemented += 1
        else:
            hints.append(f"{test.name}: {entry.get('hint') or 'failed'}")
    if not_implemented and passed == 0 and not_implemented + missing == len(tests):
        return finish(0.0, "not implemented: replace `raise NotImplementedError(...)` with your code")
    if missing == len(tests):
        return finish(0.0, reason or "not evaluated")
    if missing:
        hints.append(f"{plural(missing, 'test')} not run: {reason or 'the notebook stopped'}")
    count = f"{passed:g}/{total:g} test weight passed"
    if passed == total:
        return finish(max_points, "the test passed" if len(tests) == 1 else f"all {len(tests)} tests passed")
    points = max_points * passed / total
    main = main_test(tests)
    if main is not None and by_name.get(main.name, {}).get("passed") is not True and points > 0:
        cap = max_points * MAIN_VALUE_SHARE
        if points > cap:
            count += f" (capped at {MAIN_VALUE_SHARE:g} of the points: the main value test \"{main.name}\" failed)"
            points = cap
    return finish(points, count + ("; " + "; ".join(hints) if hints else ""))
