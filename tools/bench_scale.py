"""Chapter 10 benchmark: causal multi-head attention five ways, T = 128 ... 4096.

    python tools/bench_scale.py                  # full sweep (about 10 minutes on a 2-core CPU)
    python tools/bench_scale.py --quick          # a few seconds: small sizes, to check the script
    python tools/bench_scale.py --dtype bfloat16 # half precision (on a GPU: the flash kernels)
    python tools/bench_scale.py --reference      # the chapter's own timing cells, many repeats:
                                                 # the reference table of attention_book.reference

Writes _build/bench/scale.md (tables) and _build/bench/scale.png (time against T, log-log).
Numbers are measured, never asserted; targets are listed next to them. Timings are the median of
interleaved repeats, with the interquartile range (attention_book.measure.compare); a timing whose
IQR exceeds 25% of its median is marked ⚠.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "bench"
sys.path.insert(0, str(ROOT / "src"))

from attention_book.benchmark import (  # noqa: E402
    IMPLEMENTATIONS,
    Table,
    benchmark_table,
    plot_benchmark,
    sweep,
)
from attention_book.fused import naive_causal_attention  # noqa: E402
from attention_book.measure import (  # noqa: E402
    compare,
    matmul_gflops,
    memory_bandwidth,
)

SLOW = ("wrapper", "MHA")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def machine(device: torch.device) -> str:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    where = torch.cuda.get_device_name(0) if device.type == "cuda" else f"CPU, {os.cpu_count()} cores"
    return (f"{platform.platform()}, {where}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads; load average (1/5/15 min) {load}")


def repeats_for(T: int) -> int:
    """More repeats where a call is cheap: the best of several resists a busy machine."""
    return 7 if T <= 512 else 5 if T <= 1024 else 3 if T <= 2048 else 2


def core_ratios(tokens, num_heads=12, head_dim=64, device=None, repeats=5, dtype=torch.float32):
    """From-scratch causal attention core vs scaled_dot_product_attention on the same q, k, v
    (medians of interleaved repeats)."""
    rows = []
    for T in tokens:
        generator = torch.Generator().manual_seed(T)
        q, k, v = (torch.randn(1, num_heads, T, head_dim, generator=generator).to(device, dtype)
                   for _ in range(3))
        calls = {"naive": lambda: naive_causal_attention(q, k, v),
                 "fused": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)}
        with torch.no_grad():
            timings = compare(calls, repeats=repeats, device=device)
        rows.append((T, timings["naive"].median, timings["fused"].median))
        print(f"core T={T}: naive {timings['naive'].milliseconds(1)}, "
              f"fused {timings['fused'].milliseconds(1)}", flush=True)
    return rows


def _cell(timing) -> str:
    return f"{timing.median * 1e3:.2f} [{timing.q1 * 1e3:.2f}-{timing.q3 * 1e3:.2f}]" + (
        " ⚠" if timing.noisy else "")


_BLOCK_MASK_SCRIPT = """
import resource, sys, time, warnings
import torch
from torch.nn.attention.flex_attention import create_block_mask
warnings.simplefilter("ignore")
torch.set_num_threads(1)
mode, T = sys.argv[1], int(sys.argv[2])
def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx
build = torch.compile(create_block_mask) if mode == "compiled" else create_block_mask
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
start = time.perf_counter()
build(causal, 1, 1, T, T, device="cpu")
first = time.perf_counter() - start
start = time.perf_counter()
build(causal, 1, 1, T, T, device="cpu")
again = time.perf_counter() - start
grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
print(f"{grown:.0f} {first:.2f} {again:.3f}")
"""


def block_mask_cost(num_tokens: int = 16384) -> list:
    """create_block_mask eager vs compiled, each in a fresh process (peak RSS growth, seconds)."""
    import subprocess
    import tempfile

    rows = []
    for mode in ("eager", "compiled"):
        with tempfile.TemporaryDirectory() as cache:  # a cold compile: no cached kernels
            env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
            result = subprocess.run([sys.executable, "-c", _BLOCK_MASK_SCRIPT, mode, str(num_tokens)],
                                    capture_output=True, text=True, check=True, env=env)
        grown, first, again = result.stdout.split()
        rows.append([mode, grown, first, again])
    return rows


def reference(repeats: int, out: Path) -> int:
    """The chapter's timing cells with the same sizes and many more repeats (CPU, float32).

    Prints the tables and the ``SCALE_CPU`` literal for ``attention_book.reference``, and writes
    ``scale-reference.md``. Run it on a quiet machine and say the load.
    """
    from attention_book.kv_cache import CachedMultiHeadAttention, KVCache
    from attention_book.masks import causal_mask
    from attention_book.multihead import MultiHeadAttention

    device = torch.device("cpu")
    torch.set_num_threads(1)  # as the chapter does on a CPU: steadier on a shared machine
    load_before = os.getloadavg()[0]
    tables = {}

    # 1. chapter 10, "Measuring time and memory": MultiHeadAttention forward, d = 64, 4 heads
    torch.manual_seed(123)
    lengths = [64, 128, 256, 512]
    module = MultiHeadAttention(64, 64, max(lengths), 0.0, num_heads=4)
    inputs = {T: torch.randn(1, T, 64) for T in lengths}
    with torch.no_grad():
        timings = compare({T: (lambda T=T: module(inputs[T])) for T in lengths}, repeats=repeats)
    tables["MultiHeadAttention forward, d = 64, 4 heads (median ms [IQR])"] = (
        ["T", "ms"], [[T, _cell(timings[T])] for T in lengths])

    # 2. the chapter's small sweep of the five implementations
    small = dict(d_model=128, num_heads=2, device=device)
    rows = (sweep([64, 128, 256], repeats=repeats, **small)
            + sweep([512], passes=["forward"], repeats=repeats, **small))
    tables["Five implementations, d = 128, 2 heads, batch 1 (median ms [IQR])"] = (
        ["T", "pass"] + list(IMPLEMENTATIONS),
        [[r["tokens"], r["pass_name"]] + [_cell(r["timings"][n]) for n in IMPLEMENTATIONS]
         for r in rows])

    # 3. "Tell the kernel the mask is causal": T = 1024, 4 heads of 64
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 4, 1024, 64, generator=generator) for _ in range(3))
    allowed = ~causal_mask(1024)
    calls = {
        "is_causal=True": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "attn_mask tensor": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=allowed),
        "no mask (bidirectional)": lambda: F.scaled_dot_product_attention(q, k, v),
    }
    timings = compare(calls, repeats=repeats)
    tables["Causal attention, T = 1024, 4 heads of 64 (median ms [IQR])"] = (
        ["call", "ms"], [[name, _cell(t)] for name, t in timings.items()])

    # 4. "KV caching for generation": a 2-layer width-256 stack, one step
    torch.manual_seed(0)
    width, context = 256, 512
    stack = [CachedMultiHeadAttention(width, width, context, 0.0, num_heads=4).eval()
             for _ in range(2)]

    def run_stack(x, caches=None):
        for index, layer in enumerate(stack):
            x = x + layer(x, cache=None if caches is None else caches[index])
        return x

    text = torch.randn(1, context, width)
    kv_rows = []
    with torch.no_grad():
        for so_far in (31, 127, 511):
            caches = [KVCache() for _ in stack]
            run_stack(text[:, :so_far], caches)
            new_token = text[:, so_far:so_far + 1]

            def step_with_cache(caches=caches, so_far=so_far, new_token=new_token):
                run_stack(new_token, caches)
                for layer_cache in caches:
                    layer_cache.keys = layer_cache.keys[..., :so_far, :]
                    layer_cache.values = layer_cache.values[..., :so_far, :]

            timings = compare({"no cache": lambda so_far=so_far: run_stack(text[:, :so_far + 1]),
                               "KV cache": step_with_cache}, repeats=repeats)
            slow, fast = timings["no cache"], timings["KV cache"]
            kv_rows.append([so_far + 1, _cell(slow), _cell(fast),
                            f"{slow.median / fast.median:.0f}x"])
    tables["One generation step, 2 layers of width 256 (median ms [IQR])"] = (
        ["tokens so far", "no cache", "KV cache", "ratio of medians"], kv_rows)

    # 5. the roofline of this machine
    peak = max(matmul_gflops(size=n, repeats=repeats) for n in (256, 512, 1024))
    bandwidth = memory_bandwidth(repeats=repeats)
    tables["Roofline (best of the repeats)"] = (
        ["matmul GFLOP/s (float32)", "copy GB/s", "ridge FLOP/byte"],
        [[f"{peak:.0f}", f"{bandwidth:.1f}", f"{peak / bandwidth:.1f}"]])

    # 6. FlexAttention's create_block_mask for a long sequence, eager and compiled
    tables["create_block_mask, causal, B = H = 1, T = 16,384 (fresh process, cold compile)"] = (
        ["mode", "peak memory grew (MiB)", "first call (s)", "second call (s)"],
        block_mask_cost(16384))

    load_after = os.getloadavg()[0]
    import datetime
    cpu = platform.processor() or platform.machine()
    literal = {
        "command": "python tools/bench_scale.py --reference",
        "date": datetime.date.today().isoformat(),
        "machine": (f"a {os.cpu_count()}-core {cpu} CPU (Linux, Python {platform.python_version()}, "
                    f"torch {torch.__version__}, {torch.get_num_threads()} torch threads, no GPU)"),
        "load": f"{load_before:.2f} before, {load_after:.2f} after; {repeats} interleaved repeats",
        "tables": tables,
    }
    lines = ["# Chapter 10: reference timings (tools/bench_scale.py --reference)", "",
             f"Machine: {machine(device)}", f"Load average (1 min): {load_before:.2f} before, "
             f"{load_after:.2f} after.", ""]
    for title, (header, rows) in tables.items():
        lines += [f"## {title}", "", Table(header, rows).to_markdown(), ""]
    lines += ["Paste into src/attention_book/reference.py:", "", "SCALE_CPU = " + repr(literal)]
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale-reference.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def plot(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = plot_benchmark(rows)
    axes[0].figure.tight_layout()
    axes[0].figure.savefig(path, dpi=110)
    plt.close(axes[0].figure)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, to test the script")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--core-only", action="store_true",
                        help="only the from-scratch core vs fused kernel table (about a minute)")
    parser.add_argument("--reference", action="store_true",
                        help="the chapter's timing cells with many repeats (the reference table)")
    parser.add_argument("--repeats", type=int, default=21, help="repeats for --reference")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32",
                        help="dtype of the inputs and weights; on a GPU, bfloat16 or float16 "
                             "lets PyTorch pick its FlashAttention kernel (sm80 or newer)")
    args = parser.parse_args(argv)
    if args.reference:
        return reference(args.repeats, args.out)
    dtype = DTYPES[args.dtype]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    start = time.perf_counter()
    header = machine(device)
    print(header, flush=True)

    if args.quick:
        tokens, llm, core_tokens, d_model, heads = (64, 128), (2, 128), (64, 128), 128, 2
    else:
        tokens, llm, core_tokens, d_model, heads = (128, 256, 512, 1024, 2048, 4096), (8, 1024), (512, 1024, 2048), 768, 12
    if args.core_only:
        core_ratios(core_tokens, num_heads=heads, head_dim=d_model // heads, device=device,
                    dtype=dtype)
        return 0
    # The ceiling in the benchmark's dtype, at sizes large enough not to be latency-bound:
    # the best of a few sizes.
    sizes = (256, 512) if args.quick else (1024, 2048)
    peak = max(matmul_gflops(size=n, repeats=5, device=device, dtype=dtype) for n in sizes)
    print(f"matmul ({args.dtype}): {peak:.0f} GFLOP/s", flush=True)

    def skip(T, pass_name, name):  # the slow paths' forward + backward at the longest length
        return not args.quick and T >= 4096 and pass_name == "forward+backward" and name in SLOW

    rows = []
    for T in tokens:
        rows += sweep([T], 1, d_model, heads, repeats=repeats_for(T), device=device, dtype=dtype,
                      skip=skip, progress=True)
    rows += sweep([llm[1]], llm[0], d_model, heads, repeats=2, device=device, dtype=dtype,
                  progress=True)
    core = core_ratios(core_tokens, num_heads=heads, head_dim=d_model // heads, device=device,
                       dtype=dtype)
    seconds = time.perf_counter() - start

    overhead = [(r, r["seconds"]["fused"] / r["seconds"]["SDPA"]) for r in rows]
    lines = [
        "# Chapter 10: attention at scale (tools/bench_scale.py)", "",
        f"Machine: {header}", "",
        f"Measured matrix-multiply speed (the practical limit): **{peak:.0f} GFLOP/s** "
        f"(best of {' and '.join(map(str, sizes))} square, {args.dtype}).", "",
        f"Causal self-attention, {args.dtype}, dropout off; median of interleaved repeats "
        "(⚠: the IQR exceeds 25% of the median). "
        "Implementations: " + "; ".join(f"`{k}` = {v}" for k, v in IMPLEMENTATIONS.items()) + ". "
        "The wrapper has no output projection (slightly less work).", "",
        "### Milliseconds", "", benchmark_table(rows, "ms").to_markdown(), "",
        "### Time / fastest of the row", "", benchmark_table(rows, "ratio").to_markdown(), "",
        "### Useful GFLOP/s (causal FLOPs: projections + the visible half of the T x T "
        "products; forward + backward = 3 x forward)", "",
        benchmark_table(rows, "GFLOP/s").to_markdown(), "",
        "Skipped: forward + backward at T = 4096 for the wrapper and the weight-split class "
        "(several GB of T x T tensors and minutes per call on a 2-core CPU)." if not args.quick else "",
        "", f"## From-scratch attention core vs fused kernel (batch 1, {heads} heads, head_dim {d_model // heads})", "",
        "| T | from scratch (ms) | scaled_dot_product_attention (ms) | speed-up |", "|---|---|---|---|",
    ]
    lines += [f"| {T} | {n * 1e3:.1f} | {f * 1e3:.1f} | {n / f:.1f}x |" for T, n, f in core]
    lines += ["", "Reference (first measurement before the chapter, same machine kind): 4.2x at T=512, "
              "8.3x at 1024, 10.7x at 2048.", "",
              "## Overhead of the fused module vs calling scaled_dot_product_attention directly "
              "(target: within 1.1x)", "",
              "| B x T | pass | FusedMultiHeadAttention / direct SDPA |", "|---|---|---|"]
    lines += [f"| {r['batch_size']} x {r['tokens']} | {r['pass_name']} | {ratio:.2f}x |" for r, ratio in overhead]
    lines += ["", f"Sweep time: {seconds:.0f} s (target < 600 s).", ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.md").write_text("\n".join(lines))
    plot(rows, args.out / "scale.png")
    print("\n".join(lines))
    print(f"wrote {args.out / 'scale.md'} and {args.out / 'scale.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
