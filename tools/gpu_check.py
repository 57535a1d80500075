"""The course on a CUDA GPU, in one run: every chapter executed, chapter 10's measurements, a summary.

What it does, each step with a cap and a reserve for the steps after it, inside one budget
(``BUDGET_S``, default 390 s, so the whole run, pip install included, ends under 7 minutes):

1. ``env``: the GPU, driver, PyTorch, CUDA, cuDNN, and which of the notebook tools import.
2. ``notebooks``: chapters 1-8 (with their solutions) executed top to bottom with nbclient on the
   GPU, four at a time, then chapter 10 alone (it times things). The executed notebooks come
   back in ``notebooks.tar.gz``; errors, seconds and the device line of each are in
   ``results.json``.
3. ``reference``: ``tools/bench_scale.py --reference`` with the device's own plan
   (``attention_book.measure.plan_for``: 16,384 tokens per kernel call, GPT-2 small's width,
   bfloat16 from compute capability 8.0, CUDA events): the causal flag against a mask tensor,
   ``FusedMultiHeadAttention`` against a direct SDPA call per call, the roofline, one decoding
   step of 12 cached layers from the readable ``KVCache`` to a CUDA graph, the KV-cache table,
   FlexAttention compiled against SDPA, the step under ``torch.compile(mode="reduce-overhead")``,
   then the chapter's curve and sweep (in that order: no stage starts within a minute of the
   step's cap). It prints the ``SCALE_GPU`` dict to paste into ``src/attention_book/reference.py``
   (``reference.txt``).
4. ``notebook09``: chapter 9 alone (it trains a GPT).
5. ``gpt``: chapter 9's measurements, ``python tools/bench_gpt.py --gpu-check OUTDIR``, if that
   option exists (the hook for the chapter-9 engineer, below).
6. ``sweep``: ``tools/bench_scale.py`` (the five implementations at the plan's full sweep), only
   if more than 75 s are left.
7. The summary: ``summary.md``, also printed last.

A step that runs out of time is cut (its subprocess killed, a notebook stopped by nbclient's
timeout) and says so in the summary; ``STEPS=notebook09,gpt`` (say) reruns only some steps.

How the lead runs it. Once, on a machine with PyPI (here)::

    python tools/gpu_check.py --download-wheels .whl   # nbclient, ipykernel, anywidget,
                                                       # ipywidgets + dependencies, CPython 3.12
    cp -r /work/shared/tiktoken-cache .tiktoken-cache  # chapter 9's GPT-2 tokenizer files

Then on the GPU (the device tool ``run``, kind nvidia-h100-x1; ``.whl`` and ``.tiktoken-cache``
are untracked and not ignored, so they travel with the working tree; otherwise name them in
``carry``), with a ``timeout_s`` of about 480::

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl \\
      && python3 tools/gpu_check.py

``$OUT`` receives at most six files, none deeper than ``$OUT/file``: ``summary.md``,
``results.json``, ``log.txt``, ``notebooks.tar.gz``, ``bench.tar.gz`` (``reference/``,
``sweep/``, ``gpt/``: scale-reference.md with the dict to paste, scale-reference.json, scale.md,
scale.png, and whatever bench_gpt writes) and ``reference.txt`` (the printed SCALE_GPU dict).

Environment: ``OUT`` (default ``gpu-out``), ``BUDGET_S`` (390), ``SITE`` (the folder the wheels
were installed into, default ``/tmp/site``; put on ``sys.path`` and on the kernels'
``PYTHONPATH``, with ``$PWD/src`` for the course package), ``TIKTOKEN_CACHE_DIR`` (default: the
first of ``.tiktoken-cache``, ``shared/tiktoken-cache`` in the checkout that exists),
``NB_ONLY`` (e.g. ``01,10``: only these chapters), ``STEPS`` (default
``env,notebooks,reference,notebook09,gpt,sweep``).
``DRY=1`` runs the whole script on a CPU with tiny sizes in a minute or two (chapters 01, 02 and
10 only, ``--quick`` benchmarks): the check of this script before a GPU is spent on it.

The hook for chapter 9 (``tools/bench_gpt.py``). If ``python tools/bench_gpt.py --help`` lists
``--gpu-check``, step 5 runs ``python tools/bench_gpt.py --gpu-check OUTDIR`` with the same
environment plus ``GPU_CHECK_DEADLINE`` (Unix time by which it must have exited: it is killed
then) and ``DRY`` (``1``: tiny sizes on a CPU). It writes its files into ``OUTDIR`` (they come
back in ``bench.tar.gz``); if it writes ``OUTDIR/summary.md`` (a few lines of markdown, e.g. a
table of tokens/s and MFU per recipe and the cached generation speed-up), that text goes into
the summary.
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DRY = os.environ.get("DRY", "") == "1"
OUT = Path(os.environ.get("OUT", "gpu-out")).resolve()
WORK = OUT / "work"  # tarred at the end, then removed
START = time.time()
DEADLINE = START + float(os.environ.get("BUDGET_S", "390"))
SITE = Path(os.environ.get("SITE", "/tmp/site"))
SCRATCH = Path(os.environ.get("TMPDIR", "/tmp")) / f"gpu_check_{os.getpid()}"  # Jupyter's files
STEPS = os.environ.get("STEPS", "env,notebooks,reference,notebook09,gpt,sweep").split(",")

#: top-level packages the notebooks need beyond PyTorch, matplotlib, numpy and tiktoken
WHEELS = ("nbclient", "nbformat", "jupyter_client", "ipykernel", "ipython", "anywidget",
          "ipywidgets")

ANSI = re.compile(r"\x1b\[[0-9;]*m")  # the colours of a traceback
results: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(START)),
                 "dry": DRY, "steps": {}}
_log = None


def log(*parts) -> None:
    line = " ".join(str(part) for part in parts)
    print(f"[{time.time() - START:5.0f} s] {line}", flush=True)
    if _log is not None:
        _log.write(line + "\n")


def left() -> float:
    return DEADLINE - time.time()


def download_wheels(folder: Path, python_version: str = "3.12") -> int:
    """pip download the notebook tools and their dependencies as CPython manylinux wheels, in the
    versions of requirements-lock.txt."""
    command = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--python-version",
               python_version, "--implementation", "cp", "--platform", "manylinux2014_x86_64",
               "--platform", "manylinux_2_17_x86_64", "--platform", "manylinux_2_28_x86_64",
               "--platform", "any", "-c", str(ROOT / "requirements-lock.txt"), "-d", str(folder),
               *WHEELS]
    print(" ".join(command), flush=True)
    return subprocess.run(command).returncode


def environment() -> dict:
    """os.environ for the kernels and the benchmark processes."""
    env = dict(os.environ)
    paths = [str(SITE)] if SITE.is_dir() else []
    paths.append(str(ROOT / "src"))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # GPT-2's BPE files (offline). A cache folder the machine itself names in TIKTOKEN_CACHE_DIR
    # may lack them (the GPU machine of 2026-11-27 named an empty /opt/tiktoken_cache, and
    # chapters 1, 8 and 9 stopped trying the internet): the checkout's copy wins when it has them.
    gpt2_vocab = "6d1cbeee0f20b3d9449abfede4726ed8212e3aee"  # sha1 of vocab.bpe's URL
    inherited = env.get("TIKTOKEN_CACHE_DIR")
    if not inherited or not (Path(inherited) / gpt2_vocab).is_file():
        for candidate in (ROOT / ".tiktoken-cache", ROOT / "shared" / "tiktoken-cache"):
            if (candidate / gpt2_vocab).is_file():
                env["TIKTOKEN_CACHE_DIR"] = str(candidate)
                break
    for name, folder in (("JUPYTER_RUNTIME_DIR", "runtime"), ("IPYTHONDIR", "ipython"),
                         ("MPLCONFIGDIR", "matplotlib")):
        env.setdefault(name, str(SCRATCH / folder))
        Path(env[name]).mkdir(parents=True, exist_ok=True)
    env["MPLBACKEND"] = "Agg"
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # quiet debugpy in the kernels
    return env


def step(name: str, function, budget: float, reserve: float = 0.0):
    """Run ``function(seconds)`` as step ``name`` with at most ``budget`` seconds, leaving
    ``reserve`` seconds of the whole budget for later steps; record what happened."""
    if name not in STEPS:
        results["steps"][name] = {"status": "not asked for (STEPS)"}
        return
    seconds = min(budget, left() - reserve)
    if seconds < 20:
        results["steps"][name] = {"status": f"skipped: {left():.0f} s left of the budget"}
        log(name, "skipped: out of time")
        return
    log(f"== {name} (at most {seconds:.0f} s)")
    started = time.time()
    try:
        outcome = function(seconds) or {}
        status = outcome.pop("status", "ok")
    except Exception:  # noqa: BLE001 (one step's failure must not end the check)
        outcome, status = {"traceback": traceback.format_exc()[-3000:]}, "failed"
        log(outcome["traceback"])
    results["steps"][name] = {"status": status, "seconds": round(time.time() - started, 1), **outcome}
    log(f"== {name}: {status} in {time.time() - started:.0f} s")
    (OUT / "results.json").write_text(json.dumps(results, indent=1, default=str))


def run_env(seconds: float) -> dict:
    import torch

    info = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version(), "cpus": os.cpu_count(),
            "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["device"] = torch.cuda.get_device_name(0)
        info["capability"] = torch.cuda.get_device_capability(0)
        info["memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    smi = shutil.which("nvidia-smi")
    if smi:
        info["nvidia_smi"] = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30).stdout.strip()
    sys.path[:0] = [p for p in environment()["PYTHONPATH"].split(os.pathsep) if p not in sys.path]
    for module in ("nbclient", "nbformat", "ipykernel", "anywidget", "ipywidgets", "tiktoken",
                   "matplotlib", "triton", "transformers"):
        try:
            info[module] = getattr(__import__(module), "__version__", "?")
        except Exception as error:  # noqa: BLE001
            info[module] = f"missing ({type(error).__name__})"
    info["tiktoken_cache"] = environment().get(
        "TIKTOKEN_CACHE_DIR", "NOT FOUND: chapters that tokenize with GPT-2's BPE will try the internet")
    log(json.dumps(info, default=str))
    if not DRY and not info["cuda_available"]:
        raise SystemExit("no CUDA GPU: run with DRY=1 to test this script on a CPU")
    return {"info": info}


def execute(path: Path, timeout: float, env: dict) -> dict:
    """One notebook top to bottom in a fresh kernel; the executed copy goes to WORK/notebooks."""
    import nbformat
    from nbclient import NotebookClient

    notebook = nbformat.read(str(path), as_version=4)
    client = NotebookClient(notebook, timeout=int(max(timeout, 30)), kernel_name="python3",
                            allow_errors=False,
                            resources={"metadata": {"path": str(path.parent)}})
    started, error = time.perf_counter(), None
    try:
        client.execute(env=env)
    except Exception as problem:  # noqa: BLE001 (a cell error or a timeout: recorded)
        text = ANSI.sub("", str(problem))
        lines = [line for line in text.splitlines() if line.strip()]
        last = next((line for line in reversed(lines) if "Error" in line or "Exception" in line),
                    lines[-1] if lines else "")
        error = f"{type(problem).__name__}: {last.strip()[:300]}\n{text[-2500:]}"
    seconds = time.perf_counter() - started
    (WORK / "notebooks").mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, str(WORK / "notebooks" / path.name))
    printed = "".join(output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                      for output in cell.get("outputs", []) if output.get("output_type") == "stream")
    return {"seconds": round(seconds, 1), "error": error, "device_line": printed.split("\n", 1)[0],
            "printed_tail": printed[-1200:]}


def _chapters(names) -> list:
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    only = os.environ.get("NB_ONLY") or ("01,02,10" if DRY else "")
    return [path for path in notebooks if path.name[:2] in names
            and (not only or path.name[:2] in only.split(","))]


def run_notebooks(seconds: float, chapters=("01", "02", "03", "04", "05", "06", "07", "08", "10")) -> dict:
    """Chapters 1-8 four at a time, then 10 alone (and, in its own step, 9 alone)."""
    env = environment()
    os.environ.update({key: env[key] for key in ("PYTHONPATH", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR",
                                                 "MPLCONFIGDIR")})
    sys.path[:0] = [p for p in env["PYTHONPATH"].split(os.pathsep) if p not in sys.path]
    notebooks = _chapters(chapters)
    small = [path for path in notebooks if path.name[:2] <= "08"]
    alone = [path for path in notebooks if path.name[:2] > "08"]
    stop = time.time() + seconds
    done: dict = {}
    with futures.ThreadPoolExecutor(4) as pool:  # chapters 1-8, four at a time
        running = {pool.submit(execute, path, min(240, stop - time.time()), env): path for path in small}
        for future in futures.as_completed(running):
            path = running[future]
            done[path.name] = future.result()
            log(path.name, json.dumps({k: v for k, v in done[path.name].items() if k != "printed_tail"}))
    for path in alone:  # 9 and 10 alone: they time and train things
        budget = min(300, stop - time.time())
        if budget < 30:
            done[path.name] = {"error": f"skipped: {budget:.0f} s left of the step"}
            continue
        done[path.name] = execute(path, budget, env)
        log(path.name, json.dumps({k: v for k, v in done[path.name].items() if k != "printed_tail"}))
    results.setdefault("notebooks", {}).update(done)
    failed = [name for name, outcome in done.items() if outcome.get("error")]
    return {"status": f"{len(done) - len(failed)} of {len(done)} ran without an error",
            "chapters": {name: {k: v for k, v in outcome.items() if k != "printed_tail"}
                         for name, outcome in done.items()}}


def run_notebook09(seconds: float) -> dict:
    return run_notebooks(seconds, chapters=("09",))


def run_tool(arguments: list, seconds: float, folder: Path, extra_env: dict = None) -> dict:
    """A tool of tools/ as a subprocess, its output saved next to its files."""
    folder.mkdir(parents=True, exist_ok=True)
    env = dict(environment(), **(extra_env or {}))
    try:
        done = subprocess.run([sys.executable, *arguments], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=seconds)
        output, status = done.stdout + "\n--- stderr\n" + done.stderr, f"exit {done.returncode}"
        if done.returncode == 0:
            status = "ok"
    except subprocess.TimeoutExpired as expired:
        output = ((expired.stdout or b"").decode(errors="replace") if isinstance(expired.stdout, bytes)
                  else (expired.stdout or ""))
        status = f"timed out after {seconds:.0f} s (what it finished is kept)"
    (folder / "output.txt").write_text(output[-200_000:])
    return {"status": status, "output_tail": output[-1500:]}


def run_reference(seconds: float) -> dict:
    folder = WORK / "reference"
    arguments = ["tools/bench_scale.py", "--reference", "--repeats", "3" if DRY else "10",
                 "--out", str(folder)] + (["--quick"] if DRY else [])
    # no new stage after this (the one running may take a compile's time to finish)
    outcome = run_tool(arguments, seconds, folder, {"GPU_CHECK_DEADLINE": f"{time.time() + seconds - 60:.0f}"})
    literal = folder / "scale-reference.md"
    if literal.is_file():
        (OUT / "reference.txt").write_text(literal.read_text())
    return outcome


def run_gpt(seconds: float) -> dict:
    script = ROOT / "tools" / "bench_gpt.py"
    if not script.is_file():
        return {"status": "no tools/bench_gpt.py"}
    help_text = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT, env=environment(),
                               capture_output=True, text=True, timeout=60).stdout
    if "--gpu-check" not in help_text:
        return {"status": "tools/bench_gpt.py has no --gpu-check option yet: skipped"}
    folder = WORK / "gpt"
    outcome = run_tool([str(script), "--gpu-check", str(folder)], seconds, folder,
                       {"GPU_CHECK_DEADLINE": f"{time.time() + seconds - 5:.0f}", "DRY": "1" if DRY else "0"})
    for name in ("summary.md", "gpt_gpu_check.md"):  # bench_gpt.py writes the latter
        if (folder / name).is_file():
            outcome["summary"] = (folder / name).read_text()[:4000]
            break
    return outcome


def run_sweep(seconds: float) -> dict:
    folder = WORK / "sweep"
    return run_tool(["tools/bench_scale.py", "--out", str(folder)] + (["--quick"] if DRY else []),
                    seconds, folder)


def _cells(table: dict, first: str, columns) -> list:
    header = table["header"]
    for row in table["rows"]:
        if str(row[0]).startswith(first):
            return [str(row[header.index(c)]) if c in header else "?" for c in columns]
    return ["?"] * len(columns)


def summary() -> str:
    lines = ["# GPU check of the course", "",
             f"Started {results['started']}, {time.time() - START:.0f} s in all"
             + (" (DRY=1: a CPU, tiny sizes)" if DRY else ""), ""]
    env = results["steps"].get("env", {}).get("info", {})
    lines += [f"Device: {env.get('device', 'cpu')} (capability {env.get('capability')}), torch "
              f"{env.get('torch')}, CUDA {env.get('cuda')}, cuDNN {env.get('cudnn')}", "",
              "| step | status | seconds |", "|---|---|---|"]
    lines += [f"| {name} | {outcome.get('status')} | {outcome.get('seconds', '')} |"
              for name, outcome in results["steps"].items()]
    notebooks = results.get("notebooks", {})
    if notebooks:
        lines += ["", "| notebook | seconds | result |", "|---|---|---|"]
        lines += [f"| {name} | {outcome.get('seconds', '')} | "
                  f"{(outcome.get('error') or 'ok').splitlines()[0][:200].replace('|', '/')} |"
                  for name, outcome in sorted(notebooks.items())]
    measured = WORK / "reference" / "scale-reference.json"
    if measured.is_file():
        tables = json.loads(measured.read_text())["tables"]
        lines += ["", "Chapter 10 at the plan's sizes (median ms [IQR]):", ""]
        if "causal_flag" in tables:
            flag = tables["causal_flag"]
            lines.append("- " + flag["title"] + ": " + "; ".join(f"{r[0]} {r[1]}" for r in flag["rows"]))
        if "kv_cache" in tables:
            lines.append("- " + tables["kv_cache"]["title"] + ": " + "; ".join(
                f"{r[0]} tokens: no cache {r[1]}, KV cache {r[2]}" for r in tables["kv_cache"]["rows"]))
        if "decode_overhead" in tables:
            lines.append("- " + tables["decode_overhead"]["title"] + ": " + "; ".join(
                f"{r[0]} {r[1]} ({r[2]} µs per layer)" for r in tables["decode_overhead"]["rows"]))
        if "decode_compiled" in tables:
            lines.append("- " + "; ".join(f"{r[0]} {r[1]} ({r[2]} µs per layer)"
                                          for r in tables["decode_compiled"]["rows"]))
        if "fused_overhead" in tables:
            lines.append("- FusedMultiHeadAttention / direct SDPA per call: " + "; ".join(
                f"{r[0]} {r[3]}" for r in tables["fused_overhead"]["rows"]))
        if "flex" in tables:
            lines.append("- " + tables["flex"]["title"] + ": " + "; ".join(
                " ".join(str(c) for c in r) for r in tables["flex"]["rows"]))
        if "roofline" in tables:
            lines.append("- roofline: " + ", ".join(
                f"{h} {c}" for h, c in zip(tables["roofline"]["header"], tables["roofline"]["rows"][0])))
    gpt = results["steps"].get("gpt", {})
    if gpt.get("summary"):
        lines += ["", "Chapter 9 (tools/bench_gpt.py --gpu-check):", "", gpt["summary"]]
    return "\n".join(lines) + "\n"


def pack() -> None:
    """Everything under WORK into two archives, so at most six files come back."""
    for name, parts in (("notebooks.tar.gz", ["notebooks"]), ("bench.tar.gz", ["reference", "sweep", "gpt"])):
        present = [part for part in parts if (WORK / part).exists()]
        if present:
            with tarfile.open(OUT / name, "w:gz") as archive:
                for part in present:
                    archive.add(WORK / part, arcname=part)
    shutil.rmtree(WORK, ignore_errors=True)


def main(argv=None) -> int:
    global _log
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--download-wheels", type=Path, metavar="FOLDER",
                        help="download the notebook tools' wheels (for the GPU machine's CPython "
                             "3.12) and exit")
    parser.add_argument("--python-version", default="3.12", help="with --download-wheels")
    args = parser.parse_args(argv)
    if args.download_wheels:
        return download_wheels(args.download_wheels, args.python_version)
    OUT.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    _log = open(OUT / "log.txt", "a", buffering=1)
    log(f"gpu_check: budget {DEADLINE - START:.0f} s, OUT={OUT}, steps {STEPS}, DRY={DRY}")
    try:
        step("env", run_env, 60)
        # each step gets at most its cap and leaves a reserve for the steps after it
        step("notebooks", run_notebooks, 300, reserve=220)  # chapters 1-8 four at a time, 10
        step("reference", run_reference, 100, reserve=120)  # chapter 10's measurements
        step("notebook09", run_notebook09, 300, reserve=30)  # chapter 9 alone
        step("gpt", run_gpt, 150, reserve=10)  # chapter 9's measurements
        if left() > 75:
            step("sweep", run_sweep, left() - 15)
        else:
            results["steps"]["sweep"] = {"status": f"skipped: {left():.0f} s left"}
    except SystemExit as stop:
        results["fatal"] = str(stop)
        log(results["fatal"])
    finally:
        text = summary()
        (OUT / "summary.md").write_text(text)
        (OUT / "results.json").write_text(json.dumps(results, indent=1, default=str))
        pack()
        shutil.rmtree(SCRATCH, ignore_errors=True)
        print("\n" + text, flush=True)
    return 1 if results.get("fatal") else 0


if __name__ == "__main__":
    sys.exit(main())
