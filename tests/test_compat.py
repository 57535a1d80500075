"""make test-compat: the readers' PyTorch range at both ends, run by CI (issue 28, item 5).

The run itself takes about 25 minutes per PyTorch version on two cores (tools/compat.sh); these
tests check its wiring: the floor it reads from requirements.txt, where CI runs it (GitHub's
workflow, one job per end; not .ci/run, which says why), what it leaves out, and the report of what
a chapter prints differently (tools/compat_diff.py).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import yaml

from helpers import ROOT

sys.path.insert(0, str(ROOT / "tools"))

from compat_diff import differences  # noqa: E402


def test_the_floor_is_requirements_txt_s_and_ci_runs_both_ends():
    floor = re.search(r"^torch>=([0-9.]+)", (ROOT / "requirements.txt").read_text(), re.M).group(1)
    done = subprocess.run(["bash", "-c", "sed -n 's/^torch>=\\([0-9][0-9.]*\\).*/\\1/p' requirements.txt"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.strip() == floor  # the line tools/compat.sh reads
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^COMPAT_TORCH \?= floor newest$", makefile, re.M)
    assert re.search(r"^test-compat: setup\n\t@tools/compat.sh \$\(COMPAT_TORCH\)$", makefile, re.M)
    assert subprocess.run(["bash", "-n", str(ROOT / "tools" / "compat.sh")]).returncode == 0
    # GitHub's workflow: one job per end, after the test job, whose executed chapters it compares with
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "tests.yml").read_text())
    compat = workflow["jobs"]["compat"]
    assert compat["strategy"]["matrix"]["torch"] == ["floor", "newest"]
    assert compat["needs"] == "test" and compat["timeout-minutes"] <= 90
    runs = [step.get("run", "") for step in compat["steps"]]
    assert "make test-compat COMPAT_TORCH=${{ matrix.torch }}" in runs
    fetched = [step for step in compat["steps"] if step.get("uses", "").startswith("actions/download-artifact@")]
    kept = [step for step in workflow["jobs"]["test"]["steps"] if step.get("uses", "").startswith("actions/upload-artifact@")]
    assert fetched and fetched[0]["with"]["path"] == "_build/executed"
    assert any(step["with"]["name"] == fetched[0]["with"]["name"] and step["with"]["path"] == "_build/executed"
               for step in kept)
    assert not any("test-compat" in step.get("run", "") for step in workflow["jobs"]["test"]["steps"])


def test_ci_run_leaves_compat_to_github_and_says_why():
    # .ci/run reaches PyPI only: both ends would be PyPI's multi-GB CUDA builds, past its 90 minutes
    ci = (ROOT / ".ci" / "run").read_text()
    commands = [line.strip() for line in ci.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "make test" in commands and not any("test-compat" in line or "compat.sh" in line for line in commands)
    comment = " ".join(line.lstrip("# ") for line in ci.splitlines() if line.startswith("#"))
    assert "make test-compat" in comment and "CUDA" in comment and "tests.yml" in comment


def test_compat_leaves_out_only_what_it_names():
    script = (ROOT / "tools" / "compat.sh").read_text()
    left_out = re.findall(r"--(?:deselect|ignore) ([^\s)]+)|-k ", script)
    assert left_out == ["tests/test_lock.py::test_this_environment_runs_the_locked_versions",
                        "tests/test_gradescope.py", "tests/test_workflows.py"]
    assert 'pip install -q "transformers<5"' in script  # below torch 2.6 the GPT-2 tests still run
    assert "tests/test_notebooks.py tests/test_quoted_numbers.py" in script
    assert '-m "not slow and not browser"' in script


def _executed(folder, outputs_per_cell):
    folder.mkdir(parents=True, exist_ok=True)
    cells = [{"cell_type": "markdown", "source": "# Chapter", "metadata": {}}]
    for outputs in outputs_per_cell:
        cells.append({"cell_type": "code", "source": "", "metadata": {}, "outputs": outputs, "execution_count": 1})
    (folder / "07_causal_attention.ipynb").write_text(json.dumps({"cells": cells}), encoding="utf-8")


def test_the_report_names_chapter_cell_and_lines(tmp_path):
    stream = lambda text: {"output_type": "stream", "name": "stdout", "text": text}  # noqa: E731
    result = lambda text: {"output_type": "execute_result", "data": {"text/plain": text}}  # noqa: E731
    figure = {"output_type": "display_data", "data": {"image/png": "...", "text/plain": "<Figure>"}}
    _executed(tmp_path / "a", [[stream("row sums 2.0000, 2.0000\n")], [result("tensor([1.])"), figure]])
    _executed(tmp_path / "b", [[stream("row sums 2.0000, 1.8936\n")], [result("tensor([1.])"), figure]])
    found = differences(tmp_path / "a", tmp_path / "b")
    assert list(found) == ["07_causal_attention.ipynb"]
    assert found["07_causal_attention.ipynb"] == [
        "  cell 2:", "    -row sums 2.0000, 2.0000", "    +row sums 2.0000, 1.8936"]
    _executed(tmp_path / "c", [[stream("row sums 2.0000, 2.0000\n")], [result("tensor([1.])"), figure]])
    assert differences(tmp_path / "a", tmp_path / "c") == {}
