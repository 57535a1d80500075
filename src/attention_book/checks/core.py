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
        return [("keeps the (B, T, C) shape", shape), ...]

The decorator turns the returned list of tests into a verdict and records it in :data:`HISTORY`,
which the autograder reads after running a submission.
"""

from __future__ import annotations

import functools
import html
import traceback
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Tuple

__all__ = ["Hint", "Verdict", "register", "REGISTRY", "HISTORY", "history_as_dict", "close"]


class Hint(Exception):
    """Raised by a test to say what is wrong and how to fix it (shown to the reader)."""


@dataclass
class Verdict:
    exercise: str
    title: str
    passed: List[str] = field(default_factory=list)
    failed: List[Tuple[str, str]] = field(default_factory=list)  # (test name, hint)
    not_implemented: bool = False

    @property
    def total(self) -> int:
        return len(self.passed) + len(self.failed)

    @property
    def ok(self) -> bool:
        return not self.failed and not self.not_implemented and self.total > 0

    @property
    def score(self) -> float:
        """Fraction of the tests passed (0.0 - 1.0): the autograder's partial credit."""
        if self.not_implemented or self.total == 0:
            return 0.0
        return len(self.passed) / self.total

    def as_dict(self) -> dict:
        return {
            "exercise": self.exercise,
            "title": self.title,
            "score": self.score,
            "passed": list(self.passed),
            "failed": [list(f) for f in self.failed],
            "not_implemented": self.not_implemented,
        }

    def summary(self) -> str:
        if self.not_implemented:
            return f"{self.exercise}: not implemented yet"
        if self.ok:
            return f"{self.exercise}: all {self.total} checks passed"
        return f"{self.exercise}: {len(self.passed)}/{self.total} checks passed; " + "; ".join(
            hint for _, hint in self.failed
        )

    def __str__(self) -> str:
        head = f"[{self.exercise}] {self.title}"
        if self.not_implemented:
            return (
                f"{head}\n  ... not implemented yet: replace the line "
                "`raise NotImplementedError(...)` with your code and run the cell again."
            )
        lines = [head]
        lines += [f"  PASS  {name}" for name in self.passed]
        lines += [f"  FAIL  {name}\n        hint: {hint}" for name, hint in self.failed]
        if self.ok:
            lines.append(f"  Well done: all {self.total} checks passed.")
        else:
            lines.append(f"  {len(self.passed)} of {self.total} checks passed; read the hints above.")
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


Test = Tuple[str, Callable[[], None]]

#: exercise id -> self-check function
REGISTRY: Dict[str, Callable[..., Verdict]] = {}
#: exercise id -> the latest verdict in this Python process (read by the autograder)
HISTORY: Dict[str, Verdict] = {}


def _describe(exc: BaseException) -> str:
    frame = traceback.extract_tb(exc.__traceback__)[-1] if exc.__traceback__ else None
    where = f" (line {frame.lineno}: `{frame.line}`)" if frame and frame.line else ""
    return f"your code raised {type(exc).__name__}: {exc}{where}"


def run_tests(exercise: str, title: str, tests: List[Test]) -> Verdict:
    """Run named tests; a test passes unless it raises. Never raises itself."""
    verdict = Verdict(exercise, title)
    for name, test in tests:
        try:
            test()
        except NotImplementedError:
            verdict.not_implemented = True
            verdict.failed.append((name, "not implemented yet"))
            break
        except Hint as hint:
            verdict.failed.append((name, str(hint)))
        except AssertionError as err:
            # first line only: pytest's assertion rewriting appends an explanation below it
            verdict.failed.append((name, (str(err) or "a check failed").splitlines()[0]))
        except Exception as err:  # the reader's code crashed: explain, do not re-raise
            verdict.failed.append((name, _describe(err)))
        else:
            verdict.passed.append(name)
    HISTORY[exercise] = verdict
    return verdict


def register(exercise: str, title: str):
    """Decorator: the wrapped function returns a list of ``(name, test)``; the caller gets a Verdict.

    Building the list may itself call the reader's code; a crash there is reported, not raised.
    """

    def decorate(make_tests: Callable[..., List[Test]]) -> Callable[..., Verdict]:
        @functools.wraps(make_tests)
        def check(*args, **kwargs) -> Verdict:
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
            return run_tests(exercise, title, tests)

        check.exercise = exercise  # type: ignore[attr-defined]
        check.title = title  # type: ignore[attr-defined]
        REGISTRY[exercise] = check
        return check

    return decorate


def _raiser(exc: BaseException) -> Callable[[], None]:
    def test() -> None:
        raise exc

    return test


def close(actual, expected, atol: float = 1e-5) -> bool:
    """``torch.allclose`` that tolerates shape mismatches (returns False instead of raising)."""
    import torch

    actual = torch.as_tensor(actual).detach().cpu().float()
    expected = torch.as_tensor(expected).detach().cpu().float()
    return actual.shape == expected.shape and bool(torch.allclose(actual, expected, atol=atol))


def history_as_dict() -> Dict[str, dict]:
    return {key: verdict.as_dict() for key, verdict in HISTORY.items()}
