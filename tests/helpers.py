"""Helpers the tests share (no pytest fixtures here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
# make test-compat runs the chapters on other PyTorch versions: each run writes its executed
# notebooks and times into its own folder (tools/compat.sh sets it), never over make test's.
BUILD = Path(os.environ.get("ATTENTION_BOOK_TEST_BUILD") or ROOT / "_build").resolve()


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def toc_files() -> List[str]:
    """Every ``file:`` entry of _toc.yml (root first), without suffix, in book order."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return files


def book_notebooks() -> List[Path]:
    """The notebooks of the book, in order (files in _toc.yml that are .ipynb)."""
    return [ROOT / f"{name}.ipynb" for name in toc_files() if (ROOT / f"{name}.ipynb").is_file()]


def chapter_notebooks() -> List[Path]:
    return [path for path in book_notebooks() if path.parent.name == "notebooks"]


def repository_url() -> str:
    import yaml

    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def execute_notebook(path: Path, cwd: Path = None, timeout: int = 300, kernel_name: str = "python3",
                     env_updates: dict = None, allow_errors: bool = False):
    """Run a notebook top to bottom in a fresh kernel; return (executed notebook, seconds)."""
    import time

    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(str(path), as_version=4)
    client = NotebookClient(notebook, timeout=timeout, kernel_name=kernel_name, allow_errors=allow_errors,
                            resources={"metadata": {"path": str(cwd or path.parent)}})
    # env_updates reach the kernel's environment only (os.environ stays as it is, so runs in
    # parallel threads cannot see each other's changes); a kernel spec found through
    # JUPYTER_PATH needs that variable in this process too (set it for the whole module).
    if env_updates and "JUPYTER_PATH" in env_updates and os.environ.get("JUPYTER_PATH") != env_updates["JUPYTER_PATH"]:
        raise ValueError("set JUPYTER_PATH in this process before executing with its kernel spec")
    start = time.perf_counter()
    if env_updates:
        client.execute(env=dict(os.environ, **env_updates))
    else:
        client.execute()
    return notebook, time.perf_counter() - start


def printed_text(notebook) -> str:
    """What a notebook printed: stdout streams and text/plain results, cell by cell.

    Figures, widget views and stderr (progress bars) are left out: they are not "printed numbers".
    """
    chunks = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        # A cell's stdout may arrive in differently split chunks from run to run: join it first.
        stdout = "".join(o.text for o in cell.get("outputs", [])
                         if o.output_type == "stream" and o.name == "stdout")
        if stdout:
            chunks.append(f"[{index}] {stdout}")
        for output in cell.get("outputs", []):
            if output.output_type in ("execute_result", "display_data"):
                data = output.get("data", {})
                if "text/plain" in data and not ({"image/png", "application/vnd.jupyter.widget-view+json"} & set(data)):
                    chunks.append(f"[{index}] {data['text/plain']}")
    return "\n".join(chunks)


class NotebookRuns:
    """Notebooks executed two at a time in the background, each result waited for by its own test.

    The chapters compute on one thread (chapters 8-10 set it on a CPU), so a 2-core machine runs
    two fresh kernels side by side in about the time of one: a module-scoped fixture submits every
    notebook at once and each parametrized test takes its own result (``result(key)``), or the
    exception its run raised. ``first``: a key that must finish before the others start (e.g. the
    run that installs a package the others then find installed)."""

    def __init__(self, jobs, first=None, workers: int = 2):
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(max_workers=workers)
        self.futures = {}
        if first is not None:
            self.futures[first] = self.pool.submit(jobs[first])
            self.futures[first].exception()  # wait for it (its error is raised by its own test)
        for key, job in jobs.items():
            if key not in self.futures:
                self.futures[key] = self.pool.submit(job)

    def result(self, key):
        return self.futures[key].result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def needs_isolation(scratch: Path) -> None:
    """Skip the test when the grader's sandbox cannot run here (fail instead in CI)."""
    import pytest

    from attention_book.instructor.sandbox import IsolationError, check_isolation

    try:
        check_isolation(ROOT, scratch)
    except IsolationError as err:
        if os.environ.get("CI"):
            pytest.fail(f"the sandbox must work in CI: {err}")
        pytest.skip(f"no isolation on this machine: {err}")
