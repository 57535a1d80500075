"""Every notebook of the book runs top to bottom in a fresh kernel and prints the same twice."""

from __future__ import annotations

import difflib
import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import BUILD, ROOT, book_notebooks, execute_notebook, keep_executed, printed_text

NOTEBOOKS = book_notebooks()


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_is_deterministic(path):
    # Two fresh kernels at once: the chapters compute on one thread each (chapters 8-10 set it on a
    # CPU), so on a 2-core machine the pair takes about the time of one run.
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(execute_notebook, path) for _ in range(2)]
        (first, first_seconds), (second, second_seconds) = [run.result() for run in runs]
    # Keep the executed copy: tests/test_quoted_numbers.py checks the prose against this run.
    keep_executed(path, first)
    first_text, second_text = printed_text(first), printed_text(second)
    assert first_text.strip(), f"{path.name} printed nothing: the comparison would be meaningless"
    diff = "\n".join(difflib.unified_diff(first_text.splitlines(), second_text.splitlines(),
                                          "first run", "second run", lineterm=""))
    assert first_text == second_text, f"{path.name} printed different numbers on a second run:\n{diff}"
    # Execution times go to a file for `make bench`; they are measured, never asserted.
    times = BUILD / "bench" / "notebook-times.json"
    times.parent.mkdir(parents=True, exist_ok=True)
    record = json.loads(times.read_text()) if times.is_file() else {}
    record[str(path.relative_to(ROOT))] = round(min(first_seconds, second_seconds), 2)
    times.write_text(json.dumps(record, indent=1, sort_keys=True))
