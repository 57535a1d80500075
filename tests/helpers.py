"""Helpers the tests share (no pytest fixtures here)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "_build"


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
    saved = {}
    for key, value in (env_updates or {}).items():
        saved[key] = os.environ.get(key)
        os.environ[key] = value
    try:
        start = time.perf_counter()
        client.execute()
        return notebook, time.perf_counter() - start
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


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
