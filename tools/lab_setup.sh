#!/usr/bin/env bash
# The readers' JupyterLab environment for `make lab` / `make lab-authors`: its own venv holding only
# what a reader installs (requirements.txt: torch, the course package, JupyterLab with
# jupyterlab-myst), none of the development tools of requirements-dev.txt.
# Idempotent: a second run only reinstalls when requirements.txt or pyproject.toml changed.
#   VENV=.cache/lab-venv tools/lab_setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.cache/lab-venv}
PYTHON=${PYTHON:-python3}
# The CPU build of torch first (no multi-GB CUDA wheel on a laptop without a GPU); TORCH_SPEC overrides.
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

if [ ! -x "$VENV/bin/python" ]; then
  echo "[lab] creating the readers' environment $VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
stamp="$VENV/.attention-book-lab-installed"
if [ ! -f "$stamp" ] || [ -n "$(find requirements.txt pyproject.toml -newer "$stamp" 2>/dev/null)" ]; then
  if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    echo "[lab] installing $TORCH_SPEC"
    "$VENV/bin/python" -m pip install -q "$TORCH_SPEC"
  fi
  echo "[lab] installing requirements.txt (what readers install)"
  "$VENV/bin/python" -m pip install -q -r requirements.txt
  touch "$stamp"
fi
