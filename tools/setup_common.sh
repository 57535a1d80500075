# Sourced by tools/setup.sh and tools/lab_setup.sh (bash, from the repository root; SETUP_TAG names
# the caller in messages). Two things every environment of this checkout shares:
#
# * The Python floor: the locked build and test packages (requirements-lock.txt) need Python 3.11
#   (measured: 29 of them declare >=3.11; the rest accept 3.10 or older), and 3.11.0 is enough since
#   soupsieve is pinned to 2.10 (its 3.x and 4.x need 3.11.5; Debian 12's python3.11 is 3.11.2).
#   pyproject.toml's requires-python says the same (tests/test_setup_scripts.py keeps them equal).
# * One PyTorch: installed once per Python version and torch version into .cache/torch/<name>/
#   (`pip install --target`), and hard-linked into each virtual environment, so .venv (book,
#   tests), .cache/lab-venv (make lab) and the grader's .cache/venv-nonroot do not store two
#   copies of a 0.9-5 GB package.
#   Without a CUDA GPU (no `nvidia-smi -L`) on Linux the CPU build comes from PyTorch's CPU index
#   (PyPI's Linux wheel is the CUDA build, several GB with its nvidia-* packages); when that index
#   cannot be reached, pip's own configuration decides and a line says so.
#
# Settings (environment): PYTHON (the interpreter for new environments), TORCH_SPEC (another torch,
# e.g. torch==2.5.0), TORCH_CPU_INDEX (a mirror of https://download.pytorch.org/whl/cpu),
# TORCH_DIR (.cache/torch).

PYTHON_FLOOR=3.11
TORCH_CPU_INDEX=${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}
TORCH_DIR=${TORCH_DIR:-.cache/torch}

say() { echo "[${SETUP_TAG:-setup}] $*"; }

# Sets PYTHON to an interpreter at or above the floor, or exits with one sentence saying what to do:
# PYTHON if it is set, else the first of python3, python3.13, python3.12, python3.11 that qualifies.
choose_python() {
  local candidates candidate found="" version
  if [ -n "${PYTHON:-}" ]; then candidates=("$PYTHON"); else candidates=(python3 python3.13 python3.12 python3.11); fi
  for candidate in "${candidates[@]}"; do
    command -v "$candidate" >/dev/null 2>&1 || continue
    version=$("$candidate" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || continue
    found="${found:+$found, }$candidate is $version"
    if "$candidate" -c "import sys; sys.exit(sys.version_info[:2] < tuple(map(int, '$PYTHON_FLOOR'.split('.'))))"; then
      if ! "$candidate" -c "import venv, ensurepip" 2>/dev/null; then
        echo "[${SETUP_TAG:-setup}] $candidate ($version) cannot create virtual environments: install its venv module (Debian/Ubuntu: sudo apt-get install python$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv) and run this again." >&2
        exit 1
      fi
      PYTHON=$candidate
      return 0
    fi
  done
  echo "[${SETUP_TAG:-setup}] This course needs Python $PYTHON_FLOOR or newer (${found:-no python3 found}): install it (Debian 12: sudo apt-get install python3.11-venv; Ubuntu 22.04: python3.11-venv from the deadsnakes PPA, or conda/pyenv) and run again with PYTHON=python3.11 if it is not your python3." >&2
  exit 1
}

# An existing environment made with an older Python (before this check existed) is refused too.
check_venv_python() {
  local venv=$1 version
  version=$("$venv/bin/python" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')
  if ! "$venv/bin/python" -c "import sys; sys.exit(sys.version_info[:2] < tuple(map(int, '$PYTHON_FLOOR'.split('.'))))"; then
    echo "[${SETUP_TAG:-setup}] $venv was made with Python $version, and this course needs $PYTHON_FLOOR or newer: delete $venv and run this again (with PYTHON=python3.11 if your python3 is older)." >&2
    exit 1
  fi
}

has_cuda_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '
}

index_reachable() {  # $1: a simple index URL (https:// or file://); PyTorch's has a torch/ page
  "${PYTHON:-python3}" - "$1" <<'EOF' >/dev/null 2>&1
import os, sys, urllib.parse, urllib.request
url = sys.argv[1].rstrip("/") + "/torch/"
if url.startswith("file:"):  # a local mirror (pip reads a folder as a simple index)
    sys.exit(not os.path.isdir(urllib.request.url2pathname(urllib.parse.urlparse(url).path)))
urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=10)
EOF
}

# Prints "<variant> <pip arguments...>" for installing $1 (a torch requirement) on this machine:
#   cpu      PyTorch's CPU index, as an extra index (torch==X.Y.Z becomes torch==X.Y.Z+cpu)
#   default  pip's own configuration (a CUDA GPU, macOS, a spec that is not one exact version)
#   fallback pip's own configuration because the CPU index could not be reached
torch_plan() {
  local spec=$1
  if has_cuda_gpu; then
    echo "default $spec"
  elif [ "$(uname -s)" != Linux ] || ! [[ $spec =~ ^torch==[0-9]+(\.[0-9]+)*$ ]]; then
    echo "default $spec"
  elif index_reachable "$TORCH_CPU_INDEX"; then
    echo "cpu $spec+cpu --extra-index-url $TORCH_CPU_INDEX"
  else
    echo "fallback $spec"
  fi
}

torch_why() {
  case $1 in
    cpu) echo "no CUDA GPU here (nvidia-smi found none): the CPU build from $TORCH_CPU_INDEX" ;;
    fallback) echo "no CUDA GPU here, but PyTorch's CPU index ($TORCH_CPU_INDEX) could not be reached: pip's own index decides (on Linux PyPI's wheel is the CUDA build, about 3 GB with its nvidia-* packages; set TORCH_CPU_INDEX to a mirror of the CPU index to avoid it)" ;;
    *) if has_cuda_gpu; then echo "a CUDA GPU is here (nvidia-smi): pip's default build"; else echo "pip's default build for this system"; fi ;;
  esac
}

megabytes() { du -sm "$1" 2>/dev/null | cut -f1; }

# use_shared_torch VENV SPEC [CONSTRAINTS]: give VENV the shared PyTorch for SPEC, installing it
# into $TORCH_DIR the first time (torch's dependencies at the versions CONSTRAINTS pins, e.g. the
# lock). Nothing happens when VENV already imports a torch that SPEC accepts.
#
# The files are hard-linked into VENV's site-packages, not copied and not added by a .pth file:
# stored once on disk, yet to everything that looks at the environment (pip, the grader's sandbox,
# which binds site-packages read-only, the self-checks, which tell library frames by their folder)
# PyTorch is an ordinary installed package. Across file systems, where hard links are impossible,
# the files are copied and a line says so.
use_shared_torch() {
  local venv=$1 spec=$2 constraints=${3:-} py current plan variant args tag name dir site
  py="$venv/bin/python"
  site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  if current=$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null); then
    # an exact pin must match (local labels such as +cpu aside); any other spec takes any torch
    if ! [[ $spec =~ ^torch==(.+)$ ]] || [ "$current" = "${BASH_REMATCH[1]}" ] || [[ $current == "${BASH_REMATCH[1]}+"* ]]; then
      return 0
    fi
    say "$venv has PyTorch $current; $spec replaces it"
    "$py" -m pip uninstall -q -y torch
  fi
  plan=$(torch_plan "$spec")
  variant=${plan%% *}
  read -r -a args <<< "${plan#* }"
  tag=$("$py" -c 'import sys; print("py%d.%d" % sys.version_info[:2])')
  name="$tag-$(echo "$spec" | tr -c 'A-Za-z0-9.=_-' '_' | sed 's/_*$//')-$variant"
  dir="$TORCH_DIR/$name"
  if [ ! -f "$dir/.installed" ]; then
    say "installing PyTorch ($spec) into $dir: $(torch_why "$variant")"
    rm -rf "$dir.partial"
    mkdir -p "$TORCH_DIR"
    if [ -n "$constraints" ]; then  # the versions of torch's own dependencies; SPEC decides torch
      grep -v -i '^torch==' "$constraints" > "$dir.partial.constraints"
      constraints="$dir.partial.constraints"
    fi
    "$py" -m pip install -q --target "$dir.partial" ${constraints:+-c "$constraints"} "${args[@]}"
    rm -f "$dir.partial.constraints"
    rm -rf "$dir"
    mv "$dir.partial" "$dir"
    echo "$spec ($variant)" > "$dir/.installed"
  fi
  "$py" - "$dir" "$site" <<'EOF'
import os, shutil, sys
store, site = sys.argv[1], sys.argv[2]
copied = 0
for top in sorted(os.listdir(store)):
    # bin/, share/: scripts for the installing interpreter, data for a prefix; a package the environment
    # already has (from an earlier install) stays as it is
    if top in ("bin", "share", "include", "etc", ".installed") or os.path.lexists(os.path.join(site, top)):
        continue
    if not os.path.isdir(os.path.join(store, top)):  # a module of one file (typing_extensions.py)
        try:
            os.link(os.path.join(store, top), os.path.join(site, top))
        except OSError:
            shutil.copy2(os.path.join(store, top), os.path.join(site, top))
        continue
    for folder, dirs, files in os.walk(os.path.join(store, top)):
        target = os.path.join(site, os.path.relpath(folder, store))
        os.makedirs(target, exist_ok=True)
        for name in files:
            source, link = os.path.join(folder, name), os.path.join(target, name)
            try:
                os.link(source, link)
            except OSError:  # another file system
                shutil.copy2(source, link)
                copied += os.path.getsize(link)
if copied:
    print(f"[note] {store} and {site} are on different file systems: PyTorch was copied "
          f"({copied >> 20} MB more on disk)")
EOF
  echo "$(cd "$dir" && pwd)" > "$venv/.attention-book-torch"
  if ! current=$("$py" -W ignore -c 'import torch; print(torch.__version__, "(CUDA %s build)" % torch.version.cuda if torch.version.cuda else "(CPU build)")'); then
    echo "[${SETUP_TAG:-setup}] PyTorch from $dir does not import in $venv (the error is above): delete $dir and run this again" >&2
    exit 1
  fi
  say "PyTorch $current for $venv, from $dir ($(megabytes "$dir") MB, stored once: hard links)"
}

# The size of an environment: what it holds of its own, and the shared PyTorch it links to.
report_size() {
  local venv=$1 store total shared
  store=$(cat "$venv/.attention-book-torch" 2>/dev/null || true)
  if [ -n "$store" ] && [ -d "$store" ]; then
    total=$(du -smc "$store" "$venv" 2>/dev/null | tail -1 | cut -f1)  # du counts a linked file once
    shared=$(megabytes "$store")
    say "$venv: $((total - shared)) MB of its own, plus PyTorch's $shared MB shared with the other environments ($store)"
  else
    say "$venv: $(megabytes "$venv") MB (its own PyTorch included)"
  fi
}
