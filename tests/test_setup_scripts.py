"""tools/setup.sh and tools/lab_setup.sh decide well on any machine (issue 31, item 1), tested offline.

The machines are mocked: a fake ``nvidia-smi`` (a GPU or none), PyTorch's CPU index as a local
``file://`` simple index holding a tiny fake ``torch`` wheel (or an address that cannot be
reached), pip's configuration replaced by an empty index, and fake interpreters for the Python
floor. The functions under test live in tools/setup_common.sh, which both scripts source.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from helpers import ROOT

COMMON = ROOT / "tools" / "setup_common.sh"
BASH = shutil.which("bash")


def floor() -> str:
    return re.search(r"^PYTHON_FLOOR=(\S+)$", COMMON.read_text(), re.M).group(1)


def bash(script: str, env: dict, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([BASH, "-c", f"set -euo pipefail; source {COMMON}; {script}"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def fake_program(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def machine(tmp_path):
    """An environment with no pip configuration of its own and a folder for fake programs."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    empty_index = tmp_path / "empty-index"
    empty_index.mkdir()
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PIP_", "TORCH_", "PYTHON"))}
    env.update(PATH=f"{fake_bin}:{os.environ['PATH']}", HOME=str(tmp_path), PIP_CONFIG_FILE=os.devnull,
               PIP_INDEX_URL=empty_index.as_uri(), PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1",
               TORCH_DIR=str(tmp_path / "torch"), TORCH_CPU_INDEX=(tmp_path / "no-such-index").as_uri())
    return fake_bin, env


def with_gpu(fake_bin: Path) -> None:
    fake_program(fake_bin, "nvidia-smi", 'echo "GPU 0: Tesla T4 (UUID: GPU-00000000-fake)"')


def without_gpu(fake_bin: Path) -> None:  # the driver's tool is there, but it lists no GPU
    fake_program(fake_bin, "nvidia-smi", 'echo "No devices were found"; exit 6')


def fake_torch_wheel(folder: Path, version: str, cuda) -> Path:
    """A tiny wheel named torch that reports ``version`` and ``torch.version.cuda``."""
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"torch-{version}.dist-info"
    files = {
        "torch/__init__.py": f"__version__ = {version!r}\nfrom . import version\n",
        "torch/version.py": f"cuda = {cuda!r}\n",
        "fake_torch_helper.py": "HELPS = True\n",  # a module of one file, as typing_extensions.py is
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    files[f"{dist}/RECORD"] = "\n".join(record + [f"{dist}/RECORD,,"]) + "\n"
    path = folder / f"torch-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def simple_index(folder: Path, wheel: Path) -> Path:
    """A PEP 503 simple index (as file://) with one project, torch, holding ``wheel``."""
    page = folder / "torch" / "index.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(f'<html><body><a href="{wheel.as_uri()}">{wheel.name}</a></body></html>\n')
    return folder


def new_venv(path: Path) -> Path:
    """A virtual environment that borrows pip from its base interpreter (fast: no ensurepip)."""
    venv.EnvBuilder(system_site_packages=True, with_pip=False).create(path)
    python = path / "bin" / "python"
    if subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode != 0:
        venv.EnvBuilder(system_site_packages=True, with_pip=True, clear=True).create(path)
    return path


def imported_torch(venv_dir: Path, env: dict) -> str:
    done = subprocess.run([venv_dir / "bin" / "python", "-c",
                           "import fake_torch_helper, torch; print(torch.__version__, torch.version.cuda, torch.__file__)"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


# ------------------------------------------------------------------------------------------------ the Python floor


def test_the_floor_is_the_same_everywhere():
    """pyproject's requires-python, the setup check, the lock check and the docs name one floor."""
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^requires-python = ">=([0-9.]+)"', text, re.M).group(1) == floor()
    for doc in ("README.md", "book/how_to_run.md"):
        assert f"Python {floor()} or newer" in (ROOT / doc).read_text(), doc
    assert "python3.11-venv" in (ROOT / "README.md").read_text()  # Debian's and Ubuntu's package
    for script in ("setup.sh", "lab_setup.sh"):
        body = (ROOT / "tools" / script).read_text()
        assert "source tools/setup_common.sh" in body and "choose_python" in body and "check_venv_python" in body
    assert "PYTHON_FLOOR" in (ROOT / "tools" / "lock.sh").read_text()


def test_an_older_python_is_refused_in_one_sentence(machine):
    fake_bin, env = machine
    old = fake_program(fake_bin, "python3.10", 'case "$*" in *"%d.%d.%d"*) echo 3.10.12;; *) exit 1;; esac')
    done = bash("choose_python", dict(env, PYTHON=str(old)))
    assert done.returncode == 1
    message = done.stderr.strip()
    assert message.count("\n") == 0 and f"needs Python {floor()} or newer" in message and "3.10.12" in message
    assert "PYTHON=python3.11" in message and "apt-get install python3.11-venv" in message


def test_the_first_python_at_the_floor_is_picked_when_python3_is_older(machine, tmp_path):
    fake_bin, env = machine
    fake_program(fake_bin, "python3", 'case "$*" in *"%d.%d.%d"*) echo 3.10.12;; *) exit 1;; esac')
    (fake_bin / "python3.12").symlink_to(sys.executable)  # this interpreter (>= the floor)
    done = bash('choose_python; echo "picked $PYTHON"', dict(env, PATH=str(fake_bin)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "picked python3.12"


def test_a_python_without_its_venv_module_gets_the_package_name(machine):
    fake_bin, env = machine
    body = ('case "$*" in *"%d.%d.%d"*) echo 3.11.2;; *"%d.%d"*) echo 3.11;; *"import venv, ensurepip"*) exit 1;; '
            '*) exit 0;; esac')
    python = fake_program(fake_bin, "python3.11", body)
    done = bash("choose_python", dict(env, PYTHON=str(python)))
    assert done.returncode == 1 and "apt-get install python3.11-venv" in done.stderr


def test_this_interpreter_passes_and_an_old_environment_is_refused(machine, tmp_path):
    fake_bin, env = machine
    assert bash("choose_python", dict(env, PYTHON=sys.executable)).returncode == 0
    old_venv = tmp_path / "old-venv"
    fake_program(old_venv / "bin", "python", 'case "$*" in *"%d.%d.%d"*) echo 3.9.18;; *) exit 1;; esac')
    done = bash(f"check_venv_python {old_venv}", env)
    assert done.returncode == 1 and "delete" in done.stderr and "3.9.18" in done.stderr


# ------------------------------------------------------------------------------------------------ where PyTorch comes from


@pytest.mark.parametrize("spec", ["torch==2.13.0", "torch==2.5.0"])
def test_no_gpu_and_a_reachable_cpu_index_gives_the_cpu_build(machine, tmp_path, spec):
    fake_bin, env = machine
    without_gpu(fake_bin)
    index = simple_index(tmp_path / "cpu-index", fake_torch_wheel(tmp_path / "wheels", "9.9.9+cpu", None))
    done = bash(f"torch_plan {spec}", dict(env, TORCH_CPU_INDEX=index.as_uri()))
    assert done.stdout.split() == ["cpu", f"{spec}+cpu", "--extra-index-url", index.as_uri()]


def test_no_gpu_and_an_unreachable_cpu_index_falls_back_and_says_so(machine):
    fake_bin, env = machine
    done = bash("torch_plan torch==2.13.0; torch_why fallback", env)
    plan, why = done.stdout.splitlines()
    assert plan == "fallback torch==2.13.0"
    assert "could not be reached" in why and "CUDA build" in why and "TORCH_CPU_INDEX" in why


def test_a_gpu_gets_pips_default_build(machine, tmp_path):
    fake_bin, env = machine
    with_gpu(fake_bin)
    index = simple_index(tmp_path / "cpu-index", fake_torch_wheel(tmp_path / "wheels", "9.9.9+cpu", None))
    done = bash("torch_plan torch==2.13.0; torch_why default", dict(env, TORCH_CPU_INDEX=index.as_uri()))
    assert done.stdout.splitlines() == ["default torch==2.13.0", "a CUDA GPU is here (nvidia-smi): pip's default build"]


def test_a_spec_that_is_not_one_version_is_installed_as_given(machine, tmp_path):
    fake_bin, env = machine
    index = simple_index(tmp_path / "cpu-index", fake_torch_wheel(tmp_path / "wheels", "9.9.9+cpu", None))
    for spec in ("torch>=2.5", "torch", "/wheels/torch-2.13.0-cp311-none-linux_x86_64.whl"):
        assert bash(f"torch_plan '{spec}'", dict(env, TORCH_CPU_INDEX=index.as_uri())).stdout.split() == ["default", spec]


# ------------------------------------------------------------------------------------------------ one shared PyTorch


@pytest.mark.slow
def test_two_environments_share_one_cpu_build_from_the_cpu_index(machine, tmp_path):
    fake_bin, env = machine
    without_gpu(fake_bin)
    index = simple_index(tmp_path / "cpu-index", fake_torch_wheel(tmp_path / "wheels", "9.9.9+cpu", None))
    env = dict(env, TORCH_CPU_INDEX=index.as_uri())
    book, lab = new_venv(tmp_path / "venv"), new_venv(tmp_path / "lab-venv")

    first = bash(f"use_shared_torch {book} torch==9.9.9; report_size {book}", env)
    assert first.returncode == 0, first.stderr
    shared = tmp_path / "torch" / f"py{sys.version_info[0]}.{sys.version_info[1]}-torch==9.9.9-cpu"
    assert f"installing PyTorch (torch==9.9.9) into {shared}" in first.stdout
    assert f"the CPU build from {index.as_uri()}" in first.stdout
    assert re.search(rf"PyTorch 9\.9\.9\+cpu \(CPU build\) for {book}, from {shared} \(\d+ MB, stored once",
                     first.stdout), first.stdout
    assert re.search(rf"{book}: \d+ MB of its own, plus PyTorch's \d+ MB shared", first.stdout), first.stdout

    second = bash(f"use_shared_torch {lab} torch==9.9.9", env)
    assert second.returncode == 0, second.stderr
    assert "installing" not in second.stdout, "the second environment installed PyTorch again"
    stored = shared / "torch" / "__init__.py"
    for environment in (book, lab):
        version, cuda, location = imported_torch(environment, env).split()
        assert (version, cuda) == ("9.9.9+cpu", "None")
        # an ordinary installed package of the environment (site-packages: the grader's sandbox
        # binds it, the self-checks read it as library code), stored once: the same file
        assert Path(location).parent.parent.name == "site-packages" and str(environment) in location
        assert os.path.samefile(location, stored)
    assert os.stat(stored).st_nlink == 3
    # pip in the environment sees the shared torch as installed: a requirement on it is satisfied
    done = subprocess.run([lab / "bin" / "python", "-m", "pip", "install", "--no-index", "torch>=9"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "already satisfied" in done.stdout, done.stdout + done.stderr
    # an environment that already has a matching torch is left alone
    assert bash(f"use_shared_torch {lab} torch==9.9.9", env).stdout == ""
    # removing it from one environment leaves the others and the store as they were
    subprocess.run([lab / "bin" / "python", "-m", "pip", "uninstall", "-q", "-y", "torch"], env=env, check=True,
                   capture_output=True, timeout=120)
    assert imported_torch(book, env).startswith("9.9.9+cpu") and stored.is_file()


@pytest.mark.slow
def test_an_unreachable_cpu_index_installs_what_pip_offers_and_says_which_build(machine, tmp_path):
    fake_bin, env = machine
    without_gpu(fake_bin)
    pypi_like = tmp_path / "pypi-wheels"
    fake_torch_wheel(pypi_like, "9.9.9", "12.8")  # PyPI's Linux wheel is the CUDA build
    book = new_venv(tmp_path / "venv")
    done = bash(f"use_shared_torch {book} torch==9.9.9", dict(env, PIP_FIND_LINKS=str(pypi_like)))
    assert done.returncode == 0, done.stderr
    assert "could not be reached" in done.stdout and "PyTorch 9.9.9 (CUDA 12.8 build)" in done.stdout


@pytest.mark.slow
def test_a_gpu_machine_installs_the_default_build_once(machine, tmp_path):
    fake_bin, env = machine
    with_gpu(fake_bin)
    pypi_like = tmp_path / "pypi-wheels"
    fake_torch_wheel(pypi_like, "9.9.9", "12.8")
    env = dict(env, PIP_FIND_LINKS=str(pypi_like))
    book = new_venv(tmp_path / "venv")
    done = bash(f"use_shared_torch {book} torch==9.9.9", env)
    assert "a CUDA GPU is here" in done.stdout and "(CUDA 12.8 build)" in done.stdout, done.stdout + done.stderr
    assert (tmp_path / "torch" / f"py{sys.version_info[0]}.{sys.version_info[1]}-torch==9.9.9-default").is_dir()


def test_setup_and_lab_setup_share_the_torch_version_of_the_lock():
    """Both scripts ask for the locked torch (one shared copy), through use_shared_torch."""
    lock = re.search(r"^torch==(\S+)$", (ROOT / "requirements-lock.txt").read_text(), re.M).group(1)
    setup = (ROOT / "tools" / "setup.sh").read_text()
    lab = (ROOT / "tools" / "lab_setup.sh").read_text()
    assert f'TORCH_SPEC_DEFAULT="torch=={lock}"' in setup
    assert "grep -i '^torch==' requirements-lock.txt" in lab
    assert 'use_shared_torch "$VENV"' in setup and 'use_shared_torch "$VENV"' in lab
    assert "report_size" in setup and "report_size" in lab
    for script in ("setup.sh", "lab_setup.sh", "setup_common.sh"):
        assert subprocess.run(["bash", "-n", str(ROOT / "tools" / script)]).returncode == 0
