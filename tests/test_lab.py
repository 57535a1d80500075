"""`make lab` and the learner's work: nothing a learner wrote is overwritten (issue 31).

* `make lab` opens the learner's own copies in ``my-notebooks/`` (tools/working_copy.py copies each
  chapter once and never replaces it); the generated ``student/notebooks/`` stay as generated.
* tools/make_student_notebooks.py moves a student notebook someone edited into ``my-notebooks/``
  instead of overwriting or deleting it, and JupyterLab's ``.ipynb_checkpoints`` folders are not
  "orphaned" notebooks.
* The end-to-end test saves answers where a learner would, runs every command the suite suggests
  in a copy of the repository, and finds the answers intact.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from helpers import ROOT, SERVER_START_TIMEOUT

sys.path.insert(0, str(ROOT / "tools"))

from make_student_notebooks import edited_files, stale_files  # noqa: E402
from working_copy import LEARNER_DIR, MANIFEST, make_working_copy  # noqa: E402

from attention_book.instructor.release import edited_after_generation  # noqa: E402

CHAPTER = "03_softmax_and_scaling.ipynb"
ANSWER = "    return scores.exp() / scores.exp().sum(dim=-1, keepdim=True)  # my answer 1234"


def makefile_variable(name: str) -> str:
    return re.search(rf"^{name} \?= (\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)


def recipe(target: str) -> str:
    """The recipe lines of ``target`` in the Makefile."""
    text = (ROOT / "Makefile").read_text()
    block = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.M)
    assert block, f"the Makefile has no target {target}"
    return block.group(1)


# ------------------------------------------------------------------------------------------------ make lab


def _make_dry_run(target: str, *, as_nobody: bool = False, **variables) -> str:
    command = ["make", "-s", "-n", "-C", str(ROOT), target, *[f"{k}={v}" for k, v in variables.items()]]
    if as_nobody:
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.parametrize("target, folder", [("lab", LEARNER_DIR), ("lab-authors", "notebooks")])
def test_make_lab_opens_the_right_folder_as_root_and_not(target, folder):
    line = _make_dry_run(target, LAB_ARGS="--port 8899")
    assert f"--ServerApp.root_dir={ROOT / folder}" in line and line.endswith("--port 8899")
    assert ("--allow-root" in line) == (os.geteuid() == 0), line
    assert ".cache/lab-venv/bin/jupyter lab" in line  # the readers' environment, not .venv
    if os.geteuid() == 0 and shutil.which("setpriv"):
        assert "--allow-root" not in _make_dry_run(target, as_nobody=True)


def test_make_lab_copies_the_student_notebooks_before_opening_them():
    lines = [line.strip().lstrip("@") for line in recipe("lab").splitlines()]
    assert makefile_variable("LAB_DIR") == LEARNER_DIR
    assert lines[0] == "VENV=$(LAB_VENV) tools/lab_setup.sh"
    assert lines[1] == "$(LAB_VENV)/bin/python tools/working_copy.py $(LAB_DIR)"
    assert "$(LAB_DIR)" in lines[2] and "student" not in recipe("lab")


def test_the_lab_environment_and_the_learners_folder_are_invisible_to_git_and_the_book():
    import yaml

    excluded = yaml.safe_load((ROOT / "_config.yml").read_text())["exclude_patterns"]
    ignored = (ROOT / ".gitignore").read_text().split()
    for folder in (makefile_variable("LAB_VENV"), makefile_variable("LAB_DIR")):
        top = folder.split("/")[0]
        assert top in excluded and f"{top}/" in ignored, folder


def test_the_lab_environment_installs_only_the_readers_requirements():
    script = (ROOT / "tools" / "lab_setup.sh").read_text()
    assert "-r requirements.txt" in script and "requirements-dev" not in script.split("\n", 6)[-1]
    assert subprocess.run(["bash", "-n", str(ROOT / "tools" / "lab_setup.sh")]).returncode == 0
    readers = (ROOT / "requirements.txt").read_text()
    assert "jupyterlab" in readers and "pytest" not in readers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@pytest.mark.parametrize("target, marker", [("lab", "NotImplementedError"), ("lab-authors", "BEGIN SOLUTION")])
def test_make_lab_serves_the_right_notebooks(target, marker, tmp_path):
    """Start the command `make lab` runs (with this venv's JupyterLab) and ask it for its files."""
    port, token = _free_port(), "classroom-test"
    mine = tmp_path / "mine"
    make_working_copy(mine)
    line = _make_dry_run(target, LAB_VENV=Path(sys.executable).parent.parent, LAB_DIR=mine,
                         LAB_ARGS=f"--no-browser --port={port} --IdentityProvider.token={token}")
    env = dict(os.environ, HOME=str(tmp_path), JUPYTER_RUNTIME_DIR=str(tmp_path / "runtime"))
    server = subprocess.Popen(shlex.split(line), cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        listing, deadline = None, time.monotonic() + SERVER_START_TIMEOUT
        while time.monotonic() < deadline:  # until it answers, it exits, or a generous bound passes
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token={token}", timeout=5) as r:
                    listing = json.load(r)
                break
            except OSError:
                if server.poll() is not None:
                    break
                time.sleep(0.5)
        assert listing is not None, f"the server of `make {target}` did not answer"
        names = sorted(item["name"] for item in listing["content"])
        assert CHAPTER in names and "README.md" not in names
        url = f"http://127.0.0.1:{port}/api/contents/{CHAPTER}?token={token}"
        with urllib.request.urlopen(url, timeout=SERVER_START_TIMEOUT) as r:
            notebook = json.dumps(json.load(r)["content"])
        assert marker in notebook
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)


# ------------------------------------------------------------------------------------------------ the working copy


def test_the_working_copy_is_made_once_and_never_overwritten(tmp_path):
    mine = tmp_path / LEARNER_DIR
    lines = make_working_copy(mine)
    student = sorted(p.name for p in (ROOT / "student" / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in mine.glob("*.ipynb")) == student and "copied 10" in lines[0]
    (mine / CHAPTER).write_text("my own work", encoding="utf-8")
    (mine / "01_words_to_vectors.ipynb").unlink()  # a learner who wants chapter 1 afresh
    again = make_working_copy(mine)
    assert (mine / CHAPTER).read_text(encoding="utf-8") == "my own work"
    assert (mine / "01_words_to_vectors.ipynb").read_bytes() == (
        ROOT / "student" / "notebooks" / "01_words_to_vectors.ipynb").read_bytes()
    assert "copied 1 " in again[0] and len(again) == 1


def test_a_newer_student_edition_is_announced_and_the_copy_kept(tmp_path):
    mine = tmp_path / LEARNER_DIR
    make_working_copy(mine)
    manifest = json.loads((mine / MANIFEST).read_text())
    manifest[CHAPTER] = "0" * 64  # as if the copy came from an older edition
    (mine / MANIFEST).write_text(json.dumps(manifest))
    before = (mine / CHAPTER).read_bytes()
    lines = make_working_copy(mine)
    assert (mine / CHAPTER).read_bytes() == before
    assert any(CHAPTER in line and "newer student edition" in line and "kept" in line for line in lines)


# ------------------------------------------------------------------------------------------------ the generator


def _save_answer(path: Path) -> str:
    """Write an answer and an output into the first answer cell, as Jupyter saves a notebook."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if c["cell_type"] == "code"
                and (c["metadata"].get("attention_book") or {}).get("role") == "answer")
    text = "".join(cell["source"])
    cell["source"] = re.sub(r"^\s*raise NotImplementedError\(.*\)$", ANSWER, text, count=1, flags=re.M)
    assert ANSWER in cell["source"]
    cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}]
    cell["execution_count"] = 7
    saved = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    path.write_text(saved, encoding="utf-8")
    return saved


def test_a_generated_student_notebook_is_pristine_and_an_edited_one_is_recognised(tmp_path):
    original = (ROOT / "student" / "notebooks" / CHAPTER).read_text(encoding="utf-8")
    assert edited_after_generation(original) is None
    copy = tmp_path / CHAPTER
    copy.write_text(original, encoding="utf-8")
    _save_answer(copy)
    assert edited_after_generation(copy.read_text(encoding="utf-8")) == "it changed after it was generated"
    nb = json.loads(original)  # a file written before the digest existed: judged by its content
    del nb["metadata"]["attention_book"]["generated_sha256"]
    assert edited_after_generation(json.dumps(nb)) is None
    copy.write_text(json.dumps(nb), encoding="utf-8")
    _save_answer(copy)
    assert edited_after_generation(copy.read_text(encoding="utf-8")) == "it holds outputs"
    assert edited_after_generation("{not json") is not None


def test_checkpoint_folders_are_not_orphans(tmp_path, monkeypatch):
    checkpoints = ROOT / "student" / "notebooks" / ".ipynb_checkpoints"
    if checkpoints.exists():  # JupyterLab made it here: it is ignored as it is
        assert not [rel for rel in stale_files(ROOT)[1] if ".ipynb_checkpoints" in rel]
        return
    try:
        checkpoints.mkdir()
        (checkpoints / CHAPTER.replace(".ipynb", "-checkpoint.ipynb")).write_text("{}", encoding="utf-8")
        to_write, to_delete = stale_files(ROOT)
        assert not [rel for rel in to_delete if ".ipynb_checkpoints" in rel]
        assert not [rel for rel in to_write if ".ipynb_checkpoints" in rel]
    finally:
        shutil.rmtree(checkpoints, ignore_errors=True)


def test_edited_files_lists_only_changed_notebooks():
    paths = [f"student/notebooks/{CHAPTER}", "student/README.md", "src/attention_book/checks/numbering.py"]
    assert edited_files(ROOT, paths) == {}


# ------------------------------------------------------------------------------------------------ end to end


def _copy_repository(target: Path) -> Path:
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        source = ROOT / rel
        if source.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / rel)
    return target


@pytest.mark.slow
def test_every_suggested_command_keeps_the_learners_answers(tmp_path):
    """Answers saved where a learner saves them survive every command the course suggests:
    make lab's copy step, make_student_notebooks (--check, then the fix the tests print), make
    release, make strip, set_repository_url, notebook_width --fix, exercises --write-table."""
    repo = _copy_repository(tmp_path / "repo")
    env = dict(os.environ, PYTHONPATH=str(repo / "src"), PYTHONDONTWRITEBYTECODE="1")
    py = sys.executable

    def run(*command, ok=(0,)):
        done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode in ok, f"{command}: {done.stdout}\n{done.stderr}"
        return done.stdout

    # make lab's copy step; the learner answers chapter 3 there and opens both folders in JupyterLab
    run(py, "tools/working_copy.py", LEARNER_DIR)
    mine = repo / LEARNER_DIR / CHAPTER
    mine_saved = _save_answer(mine)
    # ... and, following an older README, also answered in the generated file itself
    generated = repo / "student" / "notebooks" / CHAPTER
    student_saved = _save_answer(generated)
    for folder in (repo / LEARNER_DIR, generated.parent):
        (folder / ".ipynb_checkpoints").mkdir()
        (folder / ".ipynb_checkpoints" / CHAPTER.replace(".ipynb", "-checkpoint.ipynb")).write_text(
            mine_saved, encoding="utf-8")

    checked = run(py, "tools/make_student_notebooks.py", "--check", ok=(1,))
    assert f"edited: student/notebooks/{CHAPTER}" in checked and "checkpoint" not in checked
    fixed = run(py, "tools/make_student_notebooks.py")
    assert f"kept student/notebooks/{CHAPTER}" in fixed
    kept = repo / LEARNER_DIR / CHAPTER.replace(".ipynb", ".from-student.ipynb")
    assert kept.read_text(encoding="utf-8") == student_saved, "the answer in student/ was lost"
    assert "up to date" in run(py, "tools/make_student_notebooks.py", "--check")
    assert "nothing to do" in run(py, "tools/make_student_notebooks.py")

    run(py, "tools/working_copy.py", LEARNER_DIR)  # make lab again
    run(py, "-c", "from attention_book.cli import main; raise SystemExit(main())", "release",
        "--out", "_build/release")
    run(py, "tools/strip_outputs.py", *sorted(str(p.relative_to(repo)) for p in (repo / "notebooks").glob("*.ipynb")))
    run(py, "tools/notebook_width.py", "--fix")
    run(py, "-c", "from attention_book.cli import main; raise SystemExit(main())", "exercises", "--write-table")
    run(py, "tools/set_repository_url.py", "https://github.com/someone/my-course")

    assert mine.read_text(encoding="utf-8") == mine_saved, "the answer in my-notebooks/ was lost"
    assert kept.read_text(encoding="utf-8") == student_saved
    for folder in (repo / LEARNER_DIR, generated.parent):
        checkpoint = folder / ".ipynb_checkpoints" / CHAPTER.replace(".ipynb", "-checkpoint.ipynb")
        assert checkpoint.read_text(encoding="utf-8") == mine_saved
    assert "https://github.com/someone/my-course" in generated.read_text(encoding="utf-8")
    assert edited_after_generation(generated.read_text(encoding="utf-8")) is None
    # the commands these steps run are the Makefile's
    assert "tools/working_copy.py" in recipe("lab") and "release --out" in recipe("release")
    assert "tools/strip_outputs.py notebooks/*.ipynb" in recipe("strip")
