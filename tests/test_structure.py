"""Every chapter follows the course conventions (CONTRIBUTING.md); notebooks are stored clean."""

from __future__ import annotations

import re
import subprocess
import sys

import nbformat
import pytest

from helpers import ROOT, chapter_notebooks, repository_url, toc_files

CHAPTERS = chapter_notebooks()
IDS = [p.stem for p in CHAPTERS]


def cells(path):
    return nbformat.read(str(path), as_version=4).cells


def test_toc_lists_existing_files_in_chapter_order():
    names = toc_files()
    for name in names:
        assert (ROOT / f"{name}.ipynb").is_file() or (ROOT / f"{name}.md").is_file(), f"_toc.yml names missing {name}"
    chapter_names = [n for n in names if n.startswith("notebooks/")]
    assert chapter_names == sorted(chapter_names), "chapters must appear in _toc.yml in numbered order"
    numbers = [int(n.split("/")[1][:2]) for n in chapter_names]
    assert numbers == list(range(1, len(numbers) + 1)), f"chapter numbers must be 1..N without gaps: {numbers}"


def test_every_notebook_in_notebooks_folder_is_in_the_toc():
    listed = {f"{n}.ipynb" for n in toc_files()}
    for path in (ROOT / "notebooks").glob("*.ipynb"):
        assert f"notebooks/{path.name}" in listed, f"{path.name} is not in _toc.yml"


def test_notebooks_are_stored_without_outputs_and_normalised():
    paths = [str(p) for p in (ROOT / "notebooks").glob("*.ipynb")] + [str(p) for p in (ROOT / "book").glob("*.ipynb")]
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "strip_outputs.py"), "--check", *paths],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_setup_cell_installs_from_the_configured_repository(path):
    title, first = cells(path)[:2]
    number = int(path.stem[:2])
    assert title.cell_type == "markdown" and title.source.startswith(f"# Chapter {number}: "), (
        "the first cell must be the chapter's title and opening paragraph (the setup cell follows it)"
    )
    assert first.cell_type == "code", "the second cell must be the setup cell"
    assert "hide-input" in first.metadata.get("tags", []), "the setup cell's code is collapsed on the site"
    match = re.search(r'REPO_URL\s*=\s*"([^"]+)"', first.source)
    assert match, "the setup cell must set REPO_URL"
    assert match.group(1) == repository_url(), (
        f"setup cell installs from {match.group(1)} but _config.yml names {repository_url()}"
    )
    assert 'f"git+{REPO_URL}"' in first.source
    assert "get_device(verbose=True)" in first.source, "the setup cell must pick and print the device"


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_chapter_has_goals_exercises_and_summary(path):
    markdown = "\n".join(c.source for c in cells(path) if c.cell_type == "markdown")
    number = int(path.stem[:2])
    assert re.search(rf"^# Chapter {number}: ", markdown, re.M), f"title '# Chapter {number}: ...' missing"
    assert "By the end of this chapter you can" in markdown, "learning goals missing"
    assert re.search(r"^## Exercises", markdown, re.M)
    assert re.search(r"^## Summary", markdown, re.M)


@pytest.mark.parametrize("path", CHAPTERS, ids=IDS)
def test_exercises_follow_the_markup(path):
    chapter = f"{int(path.stem[:2]):02d}"
    all_cells = cells(path)
    labels = re.findall(r"```\{exercise\}[^\n]*\n:label: (ex-[\w-]+)", "\n".join(c.source for c in all_cells))
    assert len(labels) >= 3, f"at least three exercises, found {labels}"
    assert all(label.startswith(f"ex-{chapter}-") for label in labels), labels
    assert len(set(labels)) == len(labels), f"duplicate exercise labels {labels}"
    coding = []
    for index, cell in enumerate(all_cells):
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and "# BEGIN SOLUTION" in cell.source:
            assert "solution" in tags, f"cell {index}: solution code must carry the 'solution' tag"
            assert cell.source.count("# BEGIN SOLUTION") == cell.source.count("# END SOLUTION")
            coding.append(index)
        if cell.cell_type == "markdown" and re.search(r"\{solution(-start|-end)?\}", cell.source):
            assert "solution" in tags, f"cell {index}: solution markdown must carry the 'solution' tag"
            if "{solution}" in cell.source or "{solution-start}" in cell.source:
                assert ":class: dropdown" in cell.source, f"cell {index}: solutions are hidden in a dropdown"
    assert len(coding) >= 2, "at least two coding exercises"
    for index in coding:
        later = [c for c in all_cells[index + 1:] if c.cell_type == "code"]
        assert later and re.search(rf"ch{chapter}\.\w+\(", later[0].source), (
            f"cell {index}: a coding exercise is followed by its self-check call (ch{chapter}.<check>(...))"
        )


def test_every_chapter_has_the_same_setup_cell():
    """One setup cell, word for word, in every chapter (CONTRIBUTING shows it)."""
    import re

    import nbformat

    from helpers import ROOT, chapter_notebooks

    sources = {path.name: next(c for c in nbformat.read(str(path), as_version=4).cells
                               if c.cell_type == "code").source.strip()
               for path in chapter_notebooks()}
    assert len(sources) >= 9
    first = next(iter(sources.values()))
    different = [name for name, source in sources.items() if source != first]
    assert not different, f"setup cell differs from chapter 1's in: {different}"
    block = re.search(r"```python\n(   # Setup:.*?)```", (ROOT / "CONTRIBUTING.md").read_text(), re.S)
    assert block, "CONTRIBUTING.md must show the setup cell"
    shown = "\n".join(line[3:] for line in block.group(1).splitlines()).strip()
    assert shown == first, "CONTRIBUTING.md shows another setup cell than the chapters use"


@pytest.mark.parametrize("path", chapter_notebooks(), ids=lambda p: p.stem)
def test_solution_code_is_collapsed_in_jupyterlab(path):
    """`make lab` opens the author's notebooks: their solution code starts collapsed (the site keeps it
    in a dropdown through the solution-start/end markup; the student notebooks have no solution)."""
    import nbformat

    cells = nbformat.read(str(path), as_version=4).cells
    solutions = [c for c in cells if c.cell_type == "code" and "solution" in c.metadata.get("tags", [])]
    assert solutions, f"{path.name} has no solution code cell"
    open_ones = [c.id for c in solutions if not c.metadata.get("jupyter", {}).get("source_hidden")]
    assert not open_ones, f"solution cells not collapsed (jupyter.source_hidden): {open_ones}"


@pytest.mark.slow
def test_setup_cell_says_what_to_do_when_the_install_fails(tmp_path):
    """Offline (or a wrong URL), the setup cell stops with one sentence naming the commands, not with
    pip's ``CalledProcessError`` traceback, and the next cell does not run."""
    from helpers import execute_notebook

    setup = next(c for c in cells(CHAPTERS[0]) if c.cell_type == "code").source
    missing = tmp_path / "no-such-repository"
    offline = (setup.replace('find_spec("attention_book")', 'find_spec("attention_book_not_installed")')
               .replace(repository_url(), missing.as_uri()))
    assert offline != setup
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(offline),
                                               nbformat.v4.new_code_cell("print('the next cell ran')")])
    path = tmp_path / "setup.ipynb"
    nbformat.write(notebook, str(path))
    executed, _ = execute_notebook(path, allow_errors=True)
    errors = [o for o in executed.cells[0].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "SystemExit", errors
    message = errors[0].evalue
    assert f"git clone {missing.as_uri()}" in message and "pip install -e ./no-such-repository" in message
    assert "restart the kernel" in message
    assert message.endswith(".") and message.count(". ") == 0, f"one sentence, got: {message}"
    shown = "".join("".join(o.get("traceback", [])) + o.get("text", "") for o in executed.cells[0].outputs)
    assert "CalledProcessError" not in shown and "Traceback (most recent call last)" not in shown
