"""README, how_to_run (a page of the site), CONTRIBUTING, for_instructors and the Makefile tell one story.

They name the same commands and the same folders (issue 31, item 6): every `make X` a document
names is a target of the Makefile and in `make help`; where a document says what `make lab` opens
it says the learner's folder (the Makefile's LAB_DIR), never the generated student/ or the
chapters; `jupyter lab` for readers opens LAB_DIR too; every Colab address opens the student
edition (as the site's buttons do); `make serve`'s address and its HOST switch match the Makefile;
the Python floor matches pyproject.toml.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from helpers import ROOT

DOCS = ["README.md", "book/how_to_run.md", "CONTRIBUTING.md", "book/for_instructors.md"]
READERS_DOCS = ["README.md", "book/how_to_run.md"]
MAKEFILE = (ROOT / "Makefile").read_text()


def variable(name: str) -> str:
    return re.search(rf"^{name} \??= *(\S+)", MAKEFILE, re.M).group(1)


def targets() -> set:
    return set(re.findall(r"^([a-z][a-z-]*):", MAKEFILE, re.M))


def text(doc: str) -> str:
    return (ROOT / doc).read_text(encoding="utf-8")


def sentences(doc: str):
    """The document's sentences (code blocks count as sentences of their own)."""
    flat = re.sub(r"\s+", " ", text(doc))
    return re.split(r"(?<=[.!?:])\s+(?=[A-Z`(*])", flat)


@pytest.mark.parametrize("doc", DOCS)
def test_every_make_command_a_document_names_exists(doc):
    # commands: in inline code (`make lab`) or at the start of a line of a code block
    named = set(re.findall(r"(?:^|`)make ([a-z][a-z-]+)\b", text(doc), re.M))
    assert named, f"{doc} names no make command"
    missing = sorted(named - targets())
    assert not missing, f"{doc} names make targets the Makefile lacks: {missing}"


def test_make_help_lists_every_entry_point_and_the_readme_names_them():
    help_text = subprocess.run(["make", "-s", "-C", str(ROOT), "help"], capture_output=True, text=True,
                               timeout=60).stdout
    listed = set(re.findall(r"^make ([a-z][a-z-]+)", help_text, re.M))
    phony = set(re.search(r"^\.PHONY: (.*)$", MAKEFILE, re.M).group(1).split()) - {"help", "setup", "clean"}
    assert phony <= listed, f"make help does not list {sorted(phony - listed)}"
    readme = text("README.md")
    assert all(f"make {target}" in readme for target in phony), sorted(t for t in phony if f"make {t}" not in readme)


@pytest.mark.parametrize("doc", DOCS)
def test_what_make_lab_opens_is_the_learners_folder(doc):
    lab_dir = variable("LAB_DIR")
    said = [s for s in sentences(doc) if re.search(r"`make lab`(?!-)", s) and re.search(r"\bopen", s)]
    for sentence in said:
        folders = re.findall(r"`((?:student/)?notebooks/|[a-z-]+/)`", sentence)
        assert f"{lab_dir}/" in sentence or not folders, f"{doc}: {sentence!r}"
        assert "student/notebooks/` in JupyterLab" not in sentence and "on `notebooks/`" not in sentence, sentence
    if doc in READERS_DOCS:
        assert said and f"{lab_dir}/" in text(doc) and variable("LAB_VENV") in text(doc)


@pytest.mark.parametrize("doc", READERS_DOCS)
def test_readers_open_jupyterlab_on_their_copies(doc):
    opened = re.findall(r"jupyter lab (\S+)", text(doc))
    assert opened and all(folder.strip("`.,;") == variable("LAB_DIR") + "/" for folder in opened), opened
    assert "tools/working_copy.py" in text(doc)


@pytest.mark.parametrize("doc", READERS_DOCS)
def test_colab_addresses_open_the_student_edition(doc):
    from attention_book.instructor.release import STUDENT_DIR

    for url in re.findall(r"https://colab\.research\.google\.com/github/\S+?\.ipynb", text(doc)):
        assert f"/{STUDENT_DIR}/notebooks/" in url, f"{doc}: {url} opens the chapter with its solutions"


def test_make_serve_binds_this_machine_unless_asked():
    assert variable("HOST") == "127.0.0.1"
    serve = re.search(r"^serve:.*\n((?:\t.*\n)+)", MAKEFILE, re.M).group(1)
    assert "--bind $(HOST)" in serve and "$(PORT)" in serve
    port = variable("PORT")
    for doc in READERS_DOCS:
        assert f"http://localhost:{port}" in text(doc) and "HOST=0.0.0.0" in text(doc), doc


def test_the_python_floor_and_the_folders_match():
    floor = re.search(r'^requires-python = ">=([0-9.]+)"', text("pyproject.toml"), re.M).group(1)
    for doc in READERS_DOCS:
        assert f"Python {floor} or newer" in text(doc), doc
    readme = text("README.md")
    for folder in (variable("LAB_DIR"), variable("LAB_VENV"), "student/notebooks/", ".cache/torch/", "_build/html"):
        assert folder in readme, f"the README does not name {folder}"
    assert variable("VENV") == ".venv" and "`.venv`" in readme


def test_test_fast_is_documented_as_it_is():
    for doc in ("README.md", "CONTRIBUTING.md"):
        line = re.search(r"`make test-fast` \(([^)]*)\)", text(doc)).group(1)
        assert "under a minute" in line, f"{doc}: make test-fast ({line})"
    assert "under a minute" in subprocess.run(["make", "-s", "-C", str(ROOT), "help"], capture_output=True,
                                              text=True, timeout=60).stdout
