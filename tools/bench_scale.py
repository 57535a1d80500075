"""Chapter 10 benchmark: causal multi-head attention five ways, at the sizes that suit the device.

    python tools/bench_scale.py                  # the full sweep (about 10 minutes on a 2-core CPU)
    python tools/bench_scale.py --quick          # a few seconds: tiny sizes, to check the script
    python tools/bench_scale.py --dtype float32  # another dtype than the device's own
    python tools/bench_scale.py --reference      # the chapter's own timing cells, many repeats:
                                                 # SCALE_CPU (on a CPU) or SCALE_GPU (on a CUDA
                                                 # GPU) for attention_book/reference.py

Sizes, dtype and clock come from ``attention_book.measure.plan_for(device)``: on a CPU the GPT-2
small sweep (T = 128 ... 4096 and 8 x 1024) in float32 on one thread, timed with the wall clock;
on a CUDA GPU 16,384 tokens per call at GPT-2 small's width in bfloat16 (float16 below compute
capability 8.0), timed with CUDA events. Writes _build/bench/scale.md (tables) and scale.png (time
against T, log-log); ``--reference`` writes scale-reference.md with the dict to paste. Numbers are
measured, never asserted; targets are listed next to them. Timings are the median of interleaved
repeats with the interquartile range (attention_book.measure.compare); a timing whose IQR exceeds
25% of its median is marked ⚠, and every table says which regime it measured (overhead-,
compute- or memory-bound).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "bench"
sys.path.insert(0, str(ROOT / "src"))

from attention_book import cost  # noqa: E402
from attention_book.benchmark import (  # noqa: E402
    DECODE_VARIANTS,
    IMPLEMENTATIONS,
    Table,
    benchmark_table,
    fused_overhead,
    plot_benchmark,
    regime_notes,
    sweep,
    time_decoding,
)
from attention_book.fused import naive_causal_attention  # noqa: E402
from attention_book.measure import (  # noqa: E402
    GPU_TOKENS_PER_CALL,
    compare,
    matmul_gflops,
    memory_bandwidth,
    plan_for,
)

SLOW = ("wrapper", "MHA")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def machine(device: torch.device) -> str:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {os.cpu_count()} cores"
    return (f"{platform.platform()}, {where}, torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads; load average (1/5/15 min) {load}")


def repeats_for(T: int, device: torch.device) -> int:
    """More repeats where a call is cheap: the median of several resists a busy machine."""
    if device.type == "cuda":
        return 10
    return 7 if T <= 512 else 5 if T <= 1024 else 3 if T <= 2048 else 2


def _cell(timing) -> str:
    return f"{timing.median * 1e3:.2f} [{timing.q1 * 1e3:.2f}-{timing.q3 * 1e3:.2f}]" + (
        " ⚠" if timing.noisy else "")


def _microseconds(timing, calls: int = 1) -> str:
    scale = 1e6 / calls
    return (f"{timing.median * scale:.1f} [{timing.q1 * scale:.1f}-{timing.q3 * scale:.1f}]"
            + (" ⚠" if timing.noisy else ""))


def _random(shape, device, dtype, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator).to(device, dtype)


def core_ratios(tokens, num_heads=12, head_dim=64, device=None, repeats=5, dtype=torch.float32,
                batch_of=lambda T: 1):
    """From-scratch causal attention core vs scaled_dot_product_attention on the same q, k, v
    (medians of interleaved repeats)."""
    rows = []
    for T in tokens:
        q, k, v = (_random((batch_of(T), num_heads, T, head_dim), device, dtype, T + i) for i in range(3))
        calls = {"naive": lambda: naive_causal_attention(q, k, v),
                 "fused": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)}
        with torch.no_grad():
            timings = compare(calls, repeats=repeats, device=device)
        rows.append((batch_of(T), T, timings["naive"].median, timings["fused"].median))
        print(f"core B={batch_of(T)} T={T}: naive {timings['naive'].milliseconds(1)}, "
              f"fused {timings['fused'].milliseconds(1)}", flush=True)
    return rows


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
print(f"{grown:,.0f} {first:.2f} {again:.3f}")
"""

# FlexAttention compiled in a fresh process with an empty compile cache: what a reader's first
# run pays. Prints compile+first call (s), then medians (ms) of compiled flex, SDPA and eager flex.
_FLEX_SCRIPT = """
import sys, time, warnings
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention
warnings.simplefilter("ignore")
torch.set_num_threads(1)
B, H, T, D, repeats = (int(a) for a in sys.argv[1:6])
g = torch.Generator().manual_seed(0)
q, k, v = (torch.randn(B, H, T, D, generator=g) for _ in range(3))
def causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx
mask = create_block_mask(causal, None, None, T, T, device="cpu")
compiled = torch.compile(flex_attention)
start = time.perf_counter()
compiled(q, k, v, block_mask=mask)
first = time.perf_counter() - start
def median(fn, n):
    times = []
    for _ in range(n):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    return sorted(times)[n // 2] * 1e3
with torch.no_grad():
    flex = median(lambda: compiled(q, k, v, block_mask=mask), repeats)
    sdpa = median(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), repeats)
    eager = median(lambda: flex_attention(q, k, v, block_mask=mask), 3)
print(f"{first:.1f} {flex:.2f} {sdpa:.2f} {eager:.1f}")
"""


def _fresh_process(script: str, *arguments) -> list:
    with tempfile.TemporaryDirectory() as cache:  # a cold compile: no cached kernels
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
        result = subprocess.run([sys.executable, "-c", script, *map(str, arguments)],
                                capture_output=True, text=True, check=True, env=env)
    return result.stdout.split()


def block_mask_cost(num_tokens: int = 16384) -> list:
    """create_block_mask eager vs compiled, each in a fresh process (peak RSS growth, seconds)."""
    return [[mode, *_fresh_process(_BLOCK_MASK_SCRIPT, mode, num_tokens)]
            for mode in ("eager", "compiled")]


def flex_cost_cpu(shape, repeats: int) -> list:
    first, flex, sdpa, eager = _fresh_process(_FLEX_SCRIPT, *shape, repeats)
    return [["FlexAttention, torch.compile", f"{first} s to compile + first call", flex],
            ["scaled_dot_product_attention, is_causal=True", "-", sdpa],
            ["FlexAttention, eager (unfused reference)", "-", eager]]


def flex_cost_cuda(shape, dtype, device, repeats: int) -> list:
    """FlexAttention compiled on the GPU (in this process) against SDPA's default kernel."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    q, k, v = (_random(shape, device, dtype, i) for i in range(3))
    B, H, T, D = shape

    def causal(b, h, q_idx, kv_idx):
        return q_idx >= kv_idx

    mask = create_block_mask(causal, None, None, T, T, device=device)
    compiled = torch.compile(flex_attention)
    start = time.perf_counter()
    compiled(q, k, v, block_mask=mask)
    torch.cuda.synchronize(device)
    first = time.perf_counter() - start
    with torch.no_grad():
        timings = compare({"flex": lambda: compiled(q, k, v, block_mask=mask),
                           "sdpa": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)},
                          repeats=repeats, device=device)
    flops = cost.attention_flops(B, T, H * D, H, causal=True, projections=False)
    return [["FlexAttention, torch.compile", f"{first:.1f} s to compile + first call",
             _cell(timings["flex"]), f"{flops / timings['flex'].median / 1e12:.1f}"],
            ["scaled_dot_product_attention, is_causal=True", "-", _cell(timings["sdpa"]),
             f"{flops / timings['sdpa'].median / 1e12:.1f}"]]


def reference(repeats: int, out: Path, device: torch.device, quick: bool = False,
              deadline: float = None) -> int:
    """The chapter's timing cells at the plan's sizes with many more repeats.

    Prints the tables and the ``SCALE_CPU`` (or, on a CUDA GPU, ``SCALE_GPU``) dict for
    ``attention_book.reference``, and writes ``scale-reference.md`` (and, table by table,
    ``scale-reference.json``). On a CPU run it on a quiet machine and say the load. ``quick``:
    tiny sizes (to test the script). ``deadline`` (Unix time): the stages not started by then are
    left out (the cheap and the chapter's own first, the compiles last).
    """
    import json

    from attention_book.kv_cache import AttentionStack  # noqa: F401 (the stack time_decoding builds)
    from attention_book.masks import causal_mask
    from attention_book.multihead import MultiHeadAttention

    plan = plan_for(device)
    plan.apply()  # on a CPU: one thread, as the chapter
    dtype, cuda = plan.dtype, device.type == "cuda"
    load_before = os.getloadavg()[0]
    out.mkdir(parents=True, exist_ok=True)
    skipped = []

    class Tables(dict):
        """The tables so far, also written to scale-reference.json after each one (a run cut
        short keeps what it finished)."""

        def __setitem__(self, key, value):
            super().__setitem__(key, value)
            print(f"[{key}] {value['title']}", flush=True)
            (out / "scale-reference.json").write_text(json.dumps(
                {"device": machine(device), "plan": plan.description, "tables": self,
                 "skipped": skipped}, indent=1))

    tables = Tables()
    shrink = (lambda n: max(8, n // 16)) if quick else (lambda n: n)
    B, H, T, D = plan.kernel_shape
    T = shrink(T)
    decode = dict(width=plan.decode_width, num_heads=plan.decode_heads, num_layers=plan.decode_layers)
    if quick:
        decode = dict(width=16, num_heads=2, num_layers=2)
    longest = shrink(plan.decode_lengths[-1]) - 1

    def causal_flag():  # "Tell the kernel the mask is causal"
        q, k, v = (_random((B, H, T, D), device, dtype, 3 + i) for i in range(3))
        allowed = ~causal_mask(T, device=device)
        calls = {
            "is_causal=True": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
            "attn_mask tensor": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=allowed),
            "no mask (bidirectional)": lambda: F.scaled_dot_product_attention(q, k, v),
        }
        with torch.no_grad():
            timings = compare(calls, repeats=repeats, device=device)
        tables["causal_flag"] = {
            "title": f"Causal attention, B = {B}, H = {H}, T = {T}, head {D}, {plan.dtype_name} (median ms [IQR])",
            "sizes": {"shape": [B, H, T, D], "dtype": plan.dtype_name},
            "header": ["call", "ms"], "rows": [[name, _cell(t)] for name, t in timings.items()]}
        if cuda:
            return
        block_rows = []  # the CPU flash kernel's blocks: the causal saving at several lengths
        for length in [shrink(n) for n in (512, 1024, 2048)]:
            q2, k2, v2 = (_random((1, 4, length, 64), device, dtype, 10 + i) for i in range(3))
            with torch.no_grad():
                pair = compare({"causal": lambda: F.scaled_dot_product_attention(q2, k2, v2, is_causal=True),
                                "none": lambda: F.scaled_dot_product_attention(q2, k2, v2)},
                               repeats=repeats, device=device)
            predicted = cost.causal_tile_fraction(length, *cost.cpu_flash_blocks(length))
            block_rows.append([length, _cell(pair["causal"]), _cell(pair["none"]),
                               f"{pair['causal'].median / pair['none'].median:.2f}", f"{predicted:.3f}"])
        tables["causal_blocks"] = {
            "title": ("is_causal=True against no mask, 4 heads of 64, float32: the measured ratio and "
                      "the share of tiles the CPU flash kernel computes (median ms [IQR])"),
            "sizes": {"heads": 4, "head_dim": 64, "dtype": plan.dtype_name},
            "header": ["T", "is_causal=True", "no mask", "ratio", "tiles computed"], "rows": block_rows}

    def overhead():  # the fused module's cost per call
        rows = []
        for backward in (False, True):
            result = fused_overhead(backward=backward, repeats=repeats, device=device)
            calls = result["calls"]
            rows.append(["forward+backward" if backward else "forward", _microseconds(result["fused"], calls),
                         _microseconds(result["direct"], calls), f"{result['ratio']:.2f}"])
        if cuda:  # and at the sweep's size, where the kernels take most of the time
            batch, tokens, _ = plan.sweep[0]
            result = fused_overhead(batch_size=batch, num_tokens=tokens, d_model=plan.sweep_d_model,
                                    num_heads=plan.sweep_heads, repeats=repeats, device=device, dtype=dtype)
            calls = result["calls"]
            rows.append([f"forward, {batch} x {tokens} x {plan.sweep_d_model}, {plan.dtype_name}",
                         _microseconds(result["fused"], calls), _microseconds(result["direct"], calls),
                         f"{result['ratio']:.2f}"])
        tables["fused_overhead"] = {
            "title": ("FusedMultiHeadAttention against direct_sdpa per call, input 1 x 8 x 16, 2 heads, "
                      "float32 unless the row says otherwise (µs per call: median of the blocks [IQR]; "
                      "ratio of the fastest blocks)"),
            "sizes": {"shape": [1, 8, 16], "heads": 2, "dtype": "float32"},
            "header": ["pass", "FusedMultiHeadAttention", "direct_sdpa", "ratio"], "rows": rows}

    def roofline():
        peak = max(matmul_gflops(size=shrink(n), repeats=repeats, device=device, dtype=dtype)
                   for n in plan.matmul_sizes)
        bandwidth = memory_bandwidth(num_bytes=plan.copy_bytes // (64 if quick else 1), repeats=repeats,
                                     device=device)
        tables["roofline"] = {
            "title": "Roofline (best of the repeats)", "sizes": {"dtype": plan.dtype_name},
            "header": [f"matmul GFLOP/s ({plan.dtype_name})", "copy GB/s", "ridge FLOP/byte"],
            "rows": [[f"{peak:.0f}", f"{bandwidth:.1f}", f"{peak / bandwidth:.1f}"]]}

    def kv_cache():  # "KV caching for generation"
        rows = []
        for so_far in (shrink(n) - 1 for n in plan.decode_lengths):
            result = time_decoding(**decode, cached_tokens=so_far, variants=["KVCache, checks in every layer"],
                                   repeats=repeats, device=device, dtype=dtype)
            slow, fast = result["no_cache"], result["timings"]["KVCache, checks in every layer"]
            rows.append([so_far + 1, _cell(slow), _cell(fast), f"{slow.median / fast.median:.1f}x"])
        tables["kv_cache"] = {
            "title": (f"One generation step, {decode['num_layers']} layers of width {decode['width']} "
                      f"({decode['num_heads']} heads), batch 1, {plan.dtype_name} (median ms [IQR])"),
            "sizes": {"width": decode["width"], "heads": decode["num_heads"], "layers": decode["num_layers"],
                      "dtype": plan.dtype_name},
            "header": ["tokens so far", "no cache", "KV cache", "ratio of medians"], "rows": rows}

    def ladder(variants, key, what):
        rows = []
        for name in variants:
            try:
                result = time_decoding(**decode, cached_tokens=longest, variants=[name],
                                       repeats=repeats, device=device, dtype=dtype)
            except Exception as error:  # noqa: BLE001 (e.g. a compile that fails on this machine)
                rows.append([name, f"failed: {type(error).__name__}: {str(error).splitlines()[0][:80]}", "-"])
                continue
            timing = result["timings"][name]
            rows.append([name, _cell(timing), f"{timing.median / decode['num_layers'] * 1e6:.0f}"
                         + ("" if result["agree"] else " (output differs!)")])
        tables[key] = {
            "title": (f"One token after {longest} cached, {decode['num_layers']} layers of width "
                      f"{decode['width']}, batch 1, {plan.dtype_name}: {what} (median ms [IQR])"),
            "sizes": dict(decode, tokens=longest + 1, dtype=plan.dtype_name),
            "header": ["variant", "ms per token", "µs per layer"], "rows": rows}

    def decode_overhead():
        eager = [n for n in DECODE_VARIANTS if "compile" not in n and (cuda or n != "CUDA graph")]
        ladder(eager, "decode_overhead", "what removes the overhead")

    def decode_compiled():
        ladder(["torch.compile reduce-overhead"], "decode_compiled", "the step compiled")

    def flex():  # FlexAttention compiled against SDPA
        flex_shape = (B, H, T, D)
        if cuda:
            tables["flex"] = {
                "title": f"FlexAttention compiled, causal, {flex_shape}, {plan.dtype_name} (median ms [IQR])",
                "sizes": {"shape": list(flex_shape), "dtype": plan.dtype_name},
                "header": ["kernel", "compile", "ms", "TFLOP/s"],
                "rows": flex_cost_cuda(flex_shape, dtype, device, repeats)}
        else:
            tables["flex"] = {
                "title": (f"FlexAttention compiled on this CPU, causal, {flex_shape}, float32, one thread "
                          "(fresh process, cold compile; median ms)"),
                "sizes": {"shape": list(flex_shape), "dtype": "float32"},
                "header": ["kernel", "compile", "ms"], "rows": flex_cost_cpu(flex_shape, max(3, repeats // 3))}

    def curve():  # "Measuring time and memory": MultiHeadAttention forward at growing lengths
        torch.manual_seed(123)
        lengths = [shrink(n) for n in plan.curve_lengths]
        module = MultiHeadAttention(plan.curve_d_model, plan.curve_d_model, max(lengths), 0.0,
                                    num_heads=plan.curve_heads).to(device, dtype)
        inputs = {n: torch.randn(1, n, plan.curve_d_model, device=device).to(dtype) for n in lengths}
        with torch.no_grad():
            timings = compare({n: (lambda n=n: module(inputs[n])) for n in lengths}, repeats=repeats,
                              device=device)
        tables["curve"] = {
            "title": (f"MultiHeadAttention forward, d = {plan.curve_d_model}, {plan.curve_heads} heads, "
                      f"{plan.dtype_name} (median ms [IQR])"),
            "sizes": {"lengths": lengths, "d_model": plan.curve_d_model, "heads": plan.curve_heads,
                      "dtype": plan.dtype_name},
            "header": ["T", "ms"], "rows": [[n, _cell(timings[n])] for n in lengths]}

    def five():  # the chapter's sweep of the five implementations
        width = shrink(plan.sweep_d_model) if quick else plan.sweep_d_model
        rows = []
        for batch, tokens, backward in plan.sweep:
            rows += sweep([shrink(tokens)], batch_size=batch, d_model=width, num_heads=plan.sweep_heads,
                          passes=("forward", "forward+backward") if backward else ("forward",),
                          repeats=repeats, device=device, dtype=dtype)
        tables["sweep"] = {
            "title": (f"Five implementations, d = {width}, {plan.sweep_heads} heads, {plan.dtype_name} "
                      "(median ms [IQR])"),
            "sizes": {"d_model": width, "heads": plan.sweep_heads,
                      "rows": [[b, shrink(t), bw] for b, t, bw in plan.sweep], "dtype": plan.dtype_name},
            "header": ["B x T", "pass"] + list(IMPLEMENTATIONS),
            "rows": [[f"{r['batch_size']} x {r['tokens']}", r["pass_name"]]
                     + [_cell(r["timings"][n]) for n in IMPLEMENTATIONS] for r in rows]}

    def block_mask():  # two cold compiles in fresh processes: over a minute on a 2-core CPU
        tables["block_mask"] = {
            "title": "create_block_mask, causal, B = H = 1, T = 16,384 (fresh process, cold compile)",
            "sizes": {"tokens": 16384},
            "header": ["mode", "peak memory grew (MiB)", "first call (s)", "second call (s)"],
            "rows": block_mask_cost(16384)}

    # the cheap and most asked-for first; on a GPU the two compiles before the long sweeps
    stages = [causal_flag, overhead, roofline, decode_overhead, kv_cache]
    if cuda:
        stages += [flex, decode_compiled, curve, five]
    else:  # the CPU compiles take minutes: last, and not in a quick run
        stages += [curve, five] + ([] if quick else [flex, block_mask])
    for stage in stages:
        if deadline is not None and time.time() > deadline:
            skipped.append(stage.__name__)
            print(f"[{stage.__name__}] skipped: past the deadline", flush=True)
            continue
        try:
            stage()
        except Exception as error:  # noqa: BLE001 (one stage's failure keeps the others)
            skipped.append(f"{stage.__name__}: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
            print(f"[{stage.__name__}] failed: {error}", flush=True)
            if cuda:
                torch.cuda.empty_cache()

    load_after = os.getloadavg()[0]
    cpu = platform.processor() or platform.machine()
    if cuda:
        name = torch.cuda.get_device_name(device)
        major, minor = torch.cuda.get_device_capability(device)
        where = (f"an {name} (compute capability {major}.{minor}), PyTorch {torch.__version__}, "
                 f"cuDNN {torch.backends.cudnn.version()}, Python {platform.python_version()}")
        load = (f"CUDA-event timings; host load average {load_before:.2f} before, {load_after:.2f} after; "
                f"{repeats} interleaved repeats")
    else:
        where = (f"a {os.cpu_count()}-core {cpu} CPU, Linux, Python {platform.python_version()}, "
                 f"torch {torch.__version__}, {torch.get_num_threads()} thread, no GPU")
        load = f"load {load_before:.2f} before, {load_after:.2f} after; {repeats} interleaved repeats"
    literal = {"command": "python tools/bench_scale.py --reference", "date": datetime.date.today().isoformat(),
               "machine": where, "load": load, "tables": dict(tables)}
    variable = "SCALE_GPU" if cuda else "SCALE_CPU"
    lines = [f"# Chapter 10: reference timings (tools/bench_scale.py --reference{' --quick' if quick else ''})", "",
             f"Machine: {machine(device)}", f"Plan: {plan.description}",
             f"Load average (1 min): {load_before:.2f} before, {load_after:.2f} after.",
             f"Left out: {', '.join(skipped)}" if skipped else "", ""]
    for table in tables.values():
        lines += [f"## {table['title']}", "", Table(table["header"], table["rows"]).to_markdown(), ""]
    lines += ["Paste into src/attention_book/reference.py:", "", f"{variable} = " + repr(literal)]
    (out / "scale-reference.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def plot(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = plot_benchmark(rows, batch_size=None)
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
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                        help="dtype of the inputs and weights (default: the device's own, "
                             "attention_book.measure.plan_for)")
    parser.add_argument("--device", default=None, help="cuda or cpu (default: cuda if available)")
    parser.add_argument("--deadline", type=float, default=None,
                        help="--reference: Unix time after which no further stage starts "
                             "(default: $GPU_CHECK_DEADLINE if set)")
    args = parser.parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.reference:
        deadline = args.deadline or (float(os.environ["GPU_CHECK_DEADLINE"])
                                     if os.environ.get("GPU_CHECK_DEADLINE") else None)
        return reference(args.repeats, args.out, device, quick=args.quick, deadline=deadline)
    plan = plan_for(device)
    plan.apply()
    dtype = DTYPES[args.dtype] if args.dtype else plan.dtype
    dtype_name = str(dtype).replace("torch.", "")
    start = time.perf_counter()
    header = machine(device)
    print(header, "\n" + plan.description, flush=True)

    if args.quick:
        rows_plan, d_model, heads = ((1, 64, True), (1, 128, True), (2, 128, True)), 32, 2
        core_tokens, sizes = (64, 128), (128, 256)
    else:
        rows_plan, d_model, heads = plan.full_sweep, plan.full_d_model, plan.full_heads
        core_tokens, sizes = sorted({t for _, t, _ in plan.full_sweep})[-3:], plan.matmul_sizes
    def batch_of(T):  # a GPU gets 16,384 tokens per call, a CPU one sequence
        return max(1, GPU_TOKENS_PER_CALL // T) if device.type == "cuda" else 1

    if args.core_only:
        core_ratios(core_tokens, num_heads=heads, head_dim=d_model // heads, device=device,
                    dtype=dtype, batch_of=batch_of)
        return 0
    # The ceiling in the benchmark's dtype, at sizes large enough not to be launch-bound.
    peak = max(matmul_gflops(size=n, repeats=5, device=device, dtype=dtype) for n in sizes)
    print(f"matmul ({dtype_name}): {peak:.0f} GFLOP/s", flush=True)

    def skip(T, pass_name, name):  # the slow paths' forward + backward at the longest length (CPU)
        return device.type == "cpu" and not args.quick and T >= 4096 and pass_name == "forward+backward" and name in SLOW

    rows = []
    for batch, T, backward in rows_plan:
        try:
            rows += sweep([T], batch, d_model, heads, repeats=repeats_for(T, device), device=device, dtype=dtype,
                          passes=("forward", "forward+backward") if backward else ("forward",),
                          skip=skip, progress=True)
        except torch.cuda.OutOfMemoryError as error:  # a small GPU: say so, keep the rest
            print(f"B={batch} T={T}: out of memory ({str(error).splitlines()[0][:80]})", flush=True)
            torch.cuda.empty_cache()
    core = core_ratios(core_tokens, num_heads=heads, head_dim=d_model // heads, device=device,
                       dtype=dtype, batch_of=batch_of)
    regime_lines = regime_notes(rows, peak * 1e9, device=device, dtype=dtype)
    overhead = {backward: fused_overhead(backward=backward, device=device) for backward in (False, True)}
    seconds = time.perf_counter() - start

    ratios = [(r, r["seconds"]["fused"] / r["seconds"]["SDPA"]) for r in rows]
    lines = [
        "# Chapter 10: attention at scale (tools/bench_scale.py)", "",
        f"Machine: {header}", "", f"Plan: {plan.description}", "",
        f"Measured matrix-multiply speed (the practical limit): **{peak:.0f} GFLOP/s** "
        f"(best of {' and '.join(map(str, sizes))} square, {dtype_name}).", "",
        f"Causal self-attention, {dtype_name}, dropout off; median of interleaved repeats "
        "(⚠: the IQR exceeds 25% of the median). "
        "Implementations: " + "; ".join(f"`{k}` = {v}" for k, v in IMPLEMENTATIONS.items()) + ". "
        "The wrapper has no output projection (slightly less work).", "",
        "### Milliseconds", "", benchmark_table(rows, "ms").to_markdown(), "",
        "### Time / fastest of the row", "", benchmark_table(rows, "ratio").to_markdown(), "",
        "### Useful GFLOP/s (causal FLOPs: projections + the visible half of the T x T "
        "products; forward + backward = 3 x forward)", "",
        benchmark_table(rows, "GFLOP/s").to_markdown(), "",
        "### Regime at the last row (the fixed cost: the same implementation on 8 tokens)", "",
        *[f"- {line}" for line in regime_lines], "",
        "Skipped: forward + backward at T = 4096 for the wrapper and the weight-split class "
        "(several GB of T x T tensors and minutes per call on a 2-core CPU)."
        if device.type == "cpu" and not args.quick else "",
        "", f"## From-scratch attention core vs fused kernel ({heads} heads, head_dim {d_model // heads})", "",
        "| B x T | from scratch (ms) | scaled_dot_product_attention (ms) | speed-up |", "|---|---|---|---|",
    ]
    lines += [f"| {b} x {T} | {n * 1e3:.1f} | {f * 1e3:.1f} | {n / f:.1f}x |" for b, T, n, f in core]
    lines += ["", "## Overhead of the fused module vs calling scaled_dot_product_attention directly "
              "(target: within 1.1x)", "",
              "| input | pass | FusedMultiHeadAttention / direct SDPA |", "|---|---|---|"]
    lines += [f"| 1 x 8 x 16 (per call, blocks of {overhead[b]['calls']} calls) | "
              f"{'forward+backward' if b else 'forward'} | {overhead[b]['ratio']:.2f}x |" for b in (False, True)]
    lines += [f"| {r['batch_size']} x {r['tokens']} x {d_model} (sweep, one call) | {r['pass_name']} | {ratio:.2f}x |"
              for r, ratio in ratios]
    lines += ["", f"Sweep time: {seconds:.0f} s (target < 600 s).", ""]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scale.md").write_text("\n".join(lines))
    plot(rows, args.out / "scale.png")
    print("\n".join(lines))
    print(f"wrote {args.out / 'scale.md'} and {args.out / 'scale.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
