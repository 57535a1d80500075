"""`make bench`: measure speed and write markdown tables under _build/bench/.

    python tools/bench.py                 # everything
    python tools/bench.py build notebooks # only some parts

Parts:
  build      cold book build (execute + HTML, new output folder) and the cached rebuild
  notebooks  each chapter's execution time in a fresh kernel
  explorers  tools/bench_explorers.py  (latency in Chromium, bytes per page)
  training   tools/bench_training.py   (chapter 8: steps and time to 100% accuracy)
  gpt        tools/bench_gpt.py        (chapter 9: tokens/s and MFU of the recipes, cached generation)
  gpt-study  tools/bench_gpt.py --study (chapter 9 over seeds 0-4: held-out losses, heads, pre-/post-norm;
             ~15 min on a quiet CPU)
  instructor tools/bench_instructor.py --grader new (grading throughput, grader peak memory; its
             --old-root compares with an older checkout of the grader)
  classroom  tools/bench_classroom.py  (30 chapter-3 notebooks: first run, rerun, one student)
  overhead   chapter 10's per-call costs (seconds): FusedMultiHeadAttention / direct SDPA on a tiny
             input (target <= 1.1), and one decoding step of a cached attention stack per layer,
             from the readable cache to the checks-once step (and a CUDA graph on a GPU)
  scale      tools/bench_scale.py      (chapter 10 sweep), when present
  reference  tools/bench_scale.py --reference (chapter 10's timing cells, many repeats: the
             reference table printed by the chapter; run it on a quiet machine)

Numbers are measured, never asserted: targets are listed next to them.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "bench"
sys.path.insert(0, str(ROOT / "tests"))


def machine() -> str:
    import torch

    return (f"{platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"torch {torch.__version__}")


def write(name: str, title: str, header: list, rows: list, notes: str = "") -> str:
    lines = [f"# {title}", "", f"Machine: {machine()}", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    if notes:
        lines += ["", notes]
    text = "\n".join(lines) + "\n"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.md").write_text(text)
    print(text)
    return text


def bench_build() -> None:
    jupyter_book = str(Path(sys.executable).parent / "jupyter-book")
    env = dict(os.environ, ATTENTION_BOOK_STATIC="1")
    rows = []
    with tempfile.TemporaryDirectory() as output:
        for label, target in (("cold build (execute + HTML)", "< 180 s"), ("cached rebuild", "< 30 s")):
            start = time.perf_counter()
            result = subprocess.run([jupyter_book, "build", str(ROOT), "--path-output", output],
                                    cwd=ROOT, env=env, capture_output=True, text=True)
            seconds = time.perf_counter() - start
            status = "ok" if result.returncode == 0 else f"failed (exit {result.returncode})"
            rows.append([label, f"{seconds:.1f}", target, status])
    write("build", "Book build", ["what", "seconds", "target", "status"], rows)


# Seconds a chapter may take top to bottom on a CPU: 30, except the chapter that trains a GPT on
# real text (its issue allows about 2 minutes of training on a CPU).
NOTEBOOK_TARGETS = {"09_gpt": 120}


def bench_notebooks() -> None:
    from helpers import book_notebooks, execute_notebook

    rows = []
    for path in book_notebooks():
        _, seconds = execute_notebook(path)
        target = NOTEBOOK_TARGETS.get(path.stem, 30)
        rows.append([path.relative_to(ROOT), f"{seconds:.1f}", f"< {target} s",
                     "ok" if seconds < target else "OVER"])
    write("notebooks", "Notebook execution (fresh kernel, top to bottom)", ["notebook", "seconds", "target", ""], rows)


def run_script(name: str, *arguments: str) -> None:
    script = ROOT / "tools" / f"bench_{name}.py"
    if not script.is_file():
        print(f"(no {script.name}: skipped)")
        return
    subprocess.run([sys.executable, str(script), *arguments], cwd=ROOT, check=True)


def bench_overhead() -> None:
    sys.path.insert(0, str(ROOT / "src"))
    import torch

    from attention_book.benchmark import fused_overhead, time_decoding
    from attention_book.measure import plan_for

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    plan = plan_for(device)
    plan.apply()
    rows = []
    for backward in (False, True):
        result = fused_overhead(backward=backward)  # float32, CPU: the Python-bound case
        per_call = {name: result[name].best / result["calls"] * 1e6 for name in ("fused", "direct")}
        rows.append([f"FusedMultiHeadAttention / direct SDPA, 1 x 8 x 16, "
                     f"{'forward+backward' if backward else 'forward'}, CPU",
                     f"{result['ratio']:.2f}x ({per_call['fused']:.1f} / {per_call['direct']:.1f} µs)",
                     "<= 1.1x"])
    layers, tokens = plan.decode_layers, plan.decode_lengths[-1]
    ladder = time_decoding(plan.decode_width, plan.decode_heads, layers, tokens - 1,
                           device=device, dtype=plan.dtype, repeats=plan.repeats)
    for name, timing in ladder["timings"].items():
        rows.append([f"decoding step per layer ({layers} x width {plan.decode_width}, token {tokens}, "
                     f"{plan.dtype_name}, {device.type}): {name}",
                     f"{timing.median / layers * 1e6:.0f} µs (IQR {timing.q1 / layers * 1e6:.0f}-"
                     f"{timing.q3 / layers * 1e6:.0f})", "lower is better"])
    write("overhead", "Chapter 10: per-call overhead (best of interleaved blocks; decoding: medians)",
          ["what", "measured", "target"], rows,
          notes="Every decoding variant computes the full pass's output: " + str(ladder["agree"]))


PARTS = {
    "build": bench_build,
    "notebooks": bench_notebooks,
    "explorers": lambda: run_script("explorers"),
    "training": lambda: run_script("training"),
    "gpt": lambda: run_script("gpt"),
    "gpt-study": lambda: run_script("gpt", "--study"),
    "instructor": lambda: run_script("instructor", "--grader", "new"),
    "classroom": lambda: run_script("classroom"),
    "overhead": bench_overhead,
    "scale": lambda: run_script("scale"),
    "reference": lambda: run_script("scale", "--reference"),
}


def main(argv: list) -> int:
    chosen = argv or list(PARTS)
    unknown = [part for part in chosen if part not in PARTS]
    if unknown:
        print(f"unknown part(s) {unknown}; choose from {list(PARTS)}", file=sys.stderr)
        return 2
    for part in chosen:
        print(f"== {part} ==", flush=True)
        PARTS[part]()
    print(f"Tables written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
