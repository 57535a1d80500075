#!/usr/bin/env bash
# The readers' JupyterLab environment for `make lab` / `make lab-authors`: its own venv holding only
# what a reader installs (requirements.txt: torch, the course package, JupyterLab with
# jupyterlab-myst), none of the development tools of requirements-dev.txt. PyTorch is the one
# .venv uses (the version locked in requirements-lock.txt, installed once into .cache/torch/ and
# shared: tools/setup_common.sh), so the two environments do not hold two copies of it.
# Idempotent: a second run only reinstalls when requirements.txt or pyproject.toml changed.
#   VENV=.cache/lab-venv tools/lab_setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_TAG=lab
source tools/setup_common.sh

VENV=${VENV:-.cache/lab-venv}
# The same PyTorch as .venv (one shared copy); TORCH_SPEC overrides.
TORCH_SPEC=${TORCH_SPEC:-$(grep -i '^torch==' requirements-lock.txt)}

if [ ! -x "$VENV/bin/python" ]; then
  choose_python
  say "creating the readers' environment $VENV with $PYTHON ($("$PYTHON" --version 2>&1))"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
else
  check_venv_python "$VENV"
fi
stamp="$VENV/.attention-book-lab-installed"
if [ ! -f "$stamp" ] || [ -n "$(find requirements.txt pyproject.toml -newer "$stamp" 2>/dev/null)" ]; then
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if [ -d "$site/torch" ] && [ ! -f "$VENV/.attention-book-torch" ]; then  # made before PyTorch was shared
    say "note: $VENV has its own copy of PyTorch ($(megabytes "$site/torch") MB); delete $VENV and run make lab again to share .venv's instead"
  fi
  use_shared_torch "$VENV" "$TORCH_SPEC" requirements-lock.txt
  say "installing requirements.txt (what readers install)"
  "$VENV/bin/python" -m pip install -q -r requirements.txt
  touch "$stamp"
  report_size "$VENV"
fi
