"""Each student notebook (what the site's Colab button opens) copied alone into an empty folder
runs with only what Colab ships, and every self-check in it says "not implemented yet".

The "Colab" environment is a new virtualenv with torch, numpy, matplotlib, ipywidgets and the
kernel (ipykernel): nothing of this repository. The notebook's own first cell must install the
rest. It installs the companion package with ``pip install git+<REPO_URL>``; git's ``insteadOf``
redirects that URL to a snapshot of this checkout, so the test needs no network for our code
(PyPI is still used for tiktoken and the package's other dependencies, as in Colab).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, NotebookRuns, execute_notebook, repository_url
from test_student_notebooks import CHAPTERS, check_student_run, student_path

COLAB_PACKAGES = ["numpy", "matplotlib", "ipywidgets", "ipykernel"]
TORCH_SPEC = os.environ.get("TORCH_SPEC", "torch==2.13.0")


def run(command, **kwargs):
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{' '.join(map(str, command))} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """A Colab-like kernel and a git snapshot of this checkout; yields env updates for the kernel."""
    base = tmp_path_factory.mktemp("colab")
    venv = base / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "-q", TORCH_SPEC])
    run([str(python), "-m", "pip", "install", "-q", *COLAB_PACKAGES])

    # A kernelspec named "colab" that runs this venv's Python.
    kernels = base / "jupyter" / "kernels" / "colab"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab-like", "language": "python"}))

    # Snapshot of the working tree (tracked and new files) as a git repository.
    snapshot = base / "repo"
    files = run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT).stdout.split("\n")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            target = snapshot / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.invalid"]
    run(git + ["init", "-q", "-b", "main"], cwd=snapshot)
    run(git + ["add", "-A"], cwd=snapshot)
    run(git + ["commit", "-q", "-m", "snapshot"], cwd=snapshot)

    gitconfig = base / "gitconfig"
    gitconfig.write_text(f'[url "file://{snapshot}"]\n\tinsteadOf = {repository_url()}\n')
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(base / "jupyter"))  # where this process finds the "colab" kernel
        yield {
            "JUPYTER_PATH": str(base / "jupyter"),
            "GIT_CONFIG_GLOBAL": str(gitconfig),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PYTHONNOUSERSITE": "1",
        }, python


@pytest.fixture(scope="module")
def student_runs(colab, tmp_path_factory):
    """Every student notebook alone in its own folder, run in the Colab-like kernel two at a time;
    chapter 1 runs alone first (its setup cell installs the package; the others find it). The
    solved chapters run in tests/test_notebooks.py (twice) and in the book build."""
    env_updates, _ = colab

    def job(chapter):
        folder = tmp_path_factory.mktemp(chapter.stem)
        alone = folder / Path(chapter.path).name
        shutil.copy2(student_path(chapter), alone)
        assert sorted(p.name for p in folder.iterdir()) == [alone.name]
        notebook, _ = execute_notebook(alone, cwd=folder, kernel_name="colab", env_updates=env_updates,
                                       allow_errors=True)
        return notebook

    runs = NotebookRuns({chapter.stem: (lambda chapter=chapter: job(chapter)) for chapter in CHAPTERS},
                        first=CHAPTERS[0].stem)
    yield runs
    runs.close()


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_student_notebook_runs_in_a_fresh_colab_like_runtime(chapter, colab, student_runs):
    """No cell raises (a stub raises only when its self-check calls it, and the check reports
    instead of raising), every self-check says "not implemented yet", the setup cell names the
    device, and the package came from the notebook's own install, not from this repository."""
    _, python = colab
    notebook = student_runs.result(chapter.stem)
    check_student_run(chapter, notebook)
    setup_cell = next(c for c in notebook.cells if c.cell_type == "code")
    first_output = "".join(o.get("text", "") for o in setup_cell.outputs if o.output_type == "stream")
    assert "Using device:" in first_output, "the setup cell must say which device it picked"
    shown = run([str(python), "-m", "pip", "show", "attention-book"]).stdout
    assert "Location:" in shown and str(ROOT / "src") not in shown
