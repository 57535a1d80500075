"""Runs inside a submission's kernel: evaluates one exercise and appends the result to a file.

The autograder sends ``kernel_side.evaluate(...)`` as a silent execute request right after the
exercise's self-check cell has run (or at the end). It

1. runs the course's own self-check cell(s) for the exercise in the notebook's namespace (the
   student's copy of that cell may have been edited or deleted) and reads the verdict from
   :data:`attention_book.checks.core.HISTORY`;
2. runs the instructor's hidden tests for the exercise (loaded now, after the student's code);
3. appends one JSON line to ``results_path`` (flushed and fsynced, so a later crash of the
   kernel keeps it).

Never raises: every failure becomes part of the result.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import runpy
import time
import traceback
import types
from typing import Any, Dict, List

_LOADED: Dict[str, bool] = {}


class _Sink(io.TextIOBase):
    """Swallows what the student's code prints while it is being graded."""

    def write(self, text: str) -> int:  # noqa: D401
        return len(text)


def _describe(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__) if err.__traceback__ else []
    frame = frames[-1] if frames else None
    where = f" (line {frame.lineno}: `{frame.line}`)" if frame is not None and frame.line else ""
    return f"{type(err).__name__}: {err}{where}"[:500]


def _load_hidden(files: List[str]) -> List[str]:
    from . import hidden

    errors = []
    for path in files:
        if _LOADED.get(path):
            continue
        _LOADED[path] = True
        try:
            runpy.run_path(path, run_name="hidden_tests")
        except BaseException as err:  # an instructor bug: reported, not raised
            errors.append(f"hidden tests {os.path.basename(path)} failed to load: {_describe(err)}")
    _LOADED["__errors__"] = bool(errors) or _LOADED.get("__errors__", False)
    return errors


def evaluate(ns: Dict[str, Any], label: str, check_sources: List[str], hidden_files: List[str],
             results_path: str, where: str) -> None:
    started = time.monotonic()
    result: Dict[str, Any] = {"exercise": label, "where": where, "public": None, "public_error": None,
                              "hidden": [], "hidden_errors": [], "interrupted": False}
    try:
        cwd = os.getcwd()
    except OSError:  # the student's code deleted its own folder
        cwd = None
    try:
        with contextlib.redirect_stdout(_Sink()), contextlib.redirect_stderr(_Sink()):
            _run_public(ns, label, check_sources, result)
            _run_hidden(ns, label, hidden_files, result)
    except KeyboardInterrupt:
        result["interrupted"] = True
    except BaseException as err:  # SystemExit from the student's code, ...
        result["public_error"] = result["public_error"] or f"grading stopped: {_describe(err)}"
    finally:
        if cwd is not None:
            with contextlib.suppress(OSError):
                os.chdir(cwd)
    result["seconds"] = round(time.monotonic() - started, 3)
    line = json.dumps(result) + "\n"
    with open(results_path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


def _run_public(ns, label, check_sources, result) -> None:
    if not check_sources:
        return
    from attention_book.checks import core

    core.HISTORY.pop(label, None)
    for name in sorted(set(re.findall(r"\b(ch\d{2})\.", "\n".join(check_sources)))):
        # the check cell may rely on `from attention_book.checks import chNN` in a cell the
        # student deleted: provide the module (never trust a non-module under that name)
        if not isinstance(ns.get(name), types.ModuleType):
            try:
                ns[name] = importlib.import_module(f"attention_book.checks.{name}")
            except ImportError:
                pass
    for number, source in enumerate(check_sources):
        try:
            exec(compile(source, f"<self-check {label} #{number}>", "exec"), ns)
        except KeyboardInterrupt:
            result["interrupted"] = True
            raise
        except BaseException as err:
            result["public_error"] = f"the self-check cell raised {_describe(err)}"
    verdict = core.HISTORY.get(label)
    if verdict is not None:
        result["public"] = verdict.as_dict()
    elif result["public_error"] is None:
        result["public_error"] = f"the self-check cell recorded no verdict for {label}"


def _run_hidden(ns, label, hidden_files, result) -> None:
    from . import hidden

    result["hidden_errors"] = _load_hidden(hidden_files)
    for test in hidden.HIDDEN_TESTS.get(label, []):
        entry = {"name": test.name, "weight": test.weight, "passed": False, "hint": "",
                 "not_implemented": False}
        try:
            test.function(ns)
            entry["passed"] = True
        except KeyboardInterrupt:
            entry["hint"] = "ran past the time limit"
            result["hidden"].append(entry)
            raise
        except NotImplementedError:
            entry["not_implemented"] = True
            entry["hint"] = "not implemented yet"
        except (hidden.Hint, AssertionError) as err:
            entry["hint"] = str(err) or "a hidden test failed"
        except BaseException as err:
            entry["hint"] = f"your code raised {_describe(err)}"
        result["hidden"].append(entry)
