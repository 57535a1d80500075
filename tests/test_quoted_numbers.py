"""Every number a chapter's prose quotes from a computation is printed by a code cell above it.

Each chapter notebook lists those numbers in its metadata (contract 4)::

    "attention_book": {"quoted_numbers": ["0.1385", "6.64", ...]}

For every entry this test checks that a markdown cell quotes it and that a code cell *above the
first markdown cell quoting it* printed it (stdout or a result's text/plain). An entry matches
only as a whole number: "0.89" is not found in "0.890" or "10.89".

Executing a chapter is the slow part, so each notebook runs at most once per test session, and
the executed copy is kept in ``_build/executed/<name>.ipynb`` together with the hash of the source
notebook: a later session (or ``tests/test_notebooks.py``, if it writes the same file) reuses it as
long as the notebook has not changed.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import List

import nbformat
import pytest

from helpers import BUILD, chapter_notebooks, execute_notebook

EXECUTED = BUILD / "executed"


def quoted_numbers(notebook) -> List[str]:
    return list(notebook.metadata.get("attention_book", {}).get("quoted_numbers", []))


def _read(path: Path):
    return nbformat.read(str(path), as_version=4)


QUOTING = [path for path in chapter_notebooks() if quoted_numbers(_read(path))]


def occurs(entry: str, text: str) -> bool:
    """``entry`` appears in ``text`` as a whole number (no digit or decimal point glued to it)."""
    return re.search(r"(?<![\d.])" + re.escape(entry) + r"(?![\d])", text) is not None


def printed(cell) -> str:
    """What a code cell printed: stdout and the text/plain of its results."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            parts.append(output.get("text", ""))
        elif output.get("output_type") in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def problems(notebook) -> List[str]:
    """Why each listed number is not properly quoted (an empty list when all are)."""
    found = []
    entries = quoted_numbers(notebook)
    for entry in sorted(set(e for e in entries if entries.count(e) > 1)):
        found.append(f"{entry!r} is listed twice")
    for entry in entries:
        if not isinstance(entry, str) or not entry.strip():
            found.append(f"{entry!r}: entries must be non-empty strings, as the prose writes them")
            continue
        first = next((index for index, cell in enumerate(notebook.cells)
                      if cell.cell_type == "markdown" and occurs(entry, cell.source)), None)
        if first is None:
            found.append(f"{entry!r} is listed but no markdown cell quotes it")
            continue
        above = [cell for cell in notebook.cells[:first] if cell.cell_type == "code"]
        if not any(occurs(entry, printed(cell)) for cell in above):
            later = [index for index, cell in enumerate(notebook.cells)
                     if cell.cell_type == "code" and occurs(entry, printed(cell))]
            where = f" (printed only later, by cell {later[0]})" if later else ""
            found.append(f"{entry!r} is quoted by markdown cell {first} but no code cell above it "
                         f"prints it{where}")
    return found


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@lru_cache(maxsize=None)
def executed(path: Path):
    """The notebook run top to bottom, from the cache in _build/executed if still current."""
    cached = EXECUTED / path.name
    digest = _digest(path)
    if cached.is_file():
        notebook = _read(cached)
        if notebook.metadata.get("attention_book_source_sha256") == digest:
            return notebook
    notebook, _ = execute_notebook(path)
    notebook.metadata["attention_book_source_sha256"] = digest
    EXECUTED.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(cached))
    return notebook


@pytest.mark.slow
@pytest.mark.parametrize("path", QUOTING, ids=[p.stem for p in QUOTING])
def test_every_quoted_number_is_printed_above_its_first_quote(path):
    found = problems(executed(path))
    assert not found, f"{path.name}:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("path", QUOTING, ids=[p.stem for p in QUOTING])
def test_every_listed_number_is_quoted_in_the_prose(path):
    """The fast half (no execution): each entry is a string some markdown cell contains."""
    notebook = _read(path)
    entries = quoted_numbers(notebook)
    assert all(isinstance(e, str) and e.strip() for e in entries), entries
    assert len(set(entries)) == len(entries), "an entry is listed twice"
    markdown = [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]
    missing = [e for e in entries if not any(occurs(e, text) for text in markdown)]
    assert not missing, f"{path.name}: listed but quoted nowhere: {missing}"


def test_chapters_1_to_4_keep_the_list():
    names = {path.name[:2] for path in QUOTING}
    assert {"01", "02", "03", "04"} <= names, f"chapters with a quoted_numbers list: {sorted(names)}"


# --- the checker itself, on small made-up notebooks ------------------------------------------------


def _notebook(*cells, numbers):
    notebook = nbformat.v4.new_notebook()
    for kind, text, output in cells:
        if kind == "code":
            cell = nbformat.v4.new_code_cell("pass")
            if output is not None:
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
        else:
            cell = nbformat.v4.new_markdown_cell(text)
        notebook.cells.append(cell)
    notebook.metadata["attention_book"] = {"quoted_numbers": numbers}
    return notebook


def test_a_number_printed_above_its_quote_passes():
    notebook = _notebook(("code", "", "weight 0.8862\nrounded 0.89\n"),
                         ("markdown", "'one' gets 0.89 of the weight.", None), numbers=["0.89"])
    assert problems(notebook) == []


def test_a_number_printed_only_below_its_quote_fails():
    notebook = _notebook(("markdown", "the gradient is 7.5 times smaller", None),
                         ("code", "", "7.5\n"), numbers=["7.5"])
    assert problems(notebook) == ["'7.5' is quoted by markdown cell 0 but no code cell above it prints it "
                                  "(printed only later, by cell 1)"]


def test_a_number_never_printed_or_never_quoted_fails():
    notebook = _notebook(("code", "", "0.8862\n"), ("markdown", "about 0.89", None), numbers=["0.89", "3.14"])
    assert problems(notebook) == [
        "'0.89' is quoted by markdown cell 1 but no code cell above it prints it",
        "'3.14' is listed but no markdown cell quotes it",
    ]


def test_numbers_match_whole_only():
    assert occurs("0.89", "weights [0.89, 0.11]")
    assert occurs("50,257", "vocabulary size: 50,257")
    assert not occurs("0.89", "0.890")
    assert not occurs("0.89", "10.89")
    assert not occurs("7", "17.1")
    assert occurs("[15496, 2159]", "[15496, 2159]\n")


def test_metadata_survives_json_round_trip():
    """The list lives in notebook metadata that tools/strip_outputs.py must keep."""
    for path in QUOTING:
        raw = json.loads(path.read_text(encoding="utf-8"))
        assert raw["metadata"]["attention_book"]["quoted_numbers"] == quoted_numbers(_read(path))
