"""Reference measurements: numbers measured once, with ``make bench``, on a named machine, dated.

A chapter that measures while it runs gets different times on every machine and on every run
(another program competing for the cores, a free Colab GPU shared with others). Its prose must
not quote those. Next to its own live measurements it prints these *reference* values instead:
measured on a machine that is named, on a date that is given, at a load that is recorded, with
the command that repeats the measurement. Counts (steps, FLOPs, bytes) do not depend on the
load; times do, and are given only with the load they were measured at.

* :data:`TRAINING_SEEDS` - chapter 8: how often each recipe reaches 6/6 over 20 seeds, and
  :func:`training_seeds_text`;
* :data:`GPT_SEEDS` - chapter 9: the chapter's CPU recipe trained with five seeds (held-out
  losses, the best previous-token head), and :func:`gpt_seeds_text`; :data:`NORM_SEEDS` - the
  pre-/post-norm runs at several learning rates and warm-ups over the same seeds,
  :func:`norm_seeds_text`; :data:`GPT_SPEED_CPU` and :data:`GPT_GPU` - the recipe's speed, MFU
  and cached generation on a CPU and on a GPU, :func:`gpt_speed_text` (the one for the reader's
  device);
* :data:`SCALE_CPU` - chapter 10: the chapter's timings measured on a quiet CPU, and
  :func:`scale_text`; :data:`SCALE_GPU` - the same chapter's measurements on a datacenter GPU, and
  :func:`scale_gpu_text`; :func:`scale_reference`, :func:`reference_cell` and :func:`live_label`
  put a reader's own measurement next to the reference for their device.
"""

from __future__ import annotations

import os
import re
from typing import List, Optional

__all__ = ["TRAINING_SEEDS", "training_seeds_text", "GPT_SEEDS", "gpt_seeds_text", "gpt_seeds_summary",
           "NORM_SEEDS", "norm_seeds_text", "norm_seeds_summary",
           "norm_seeds_below", "AT_UNIGRAM", "LEARNED", "GPT_SPEED_CPU", "GPT_GPU", "gpt_speed_text",
           "gpt_speed_summary", "SCALE_CPU", "scale_text",
           "SCALE_GPU", "scale_gpu_text", "scale_reference", "reference_table", "reference_cell",
           "live_label", "reference_name"]

#: chapter 8, ``python tools/bench_training.py --source`` (part of ``make bench``): seeds 0-19,
#: 300 updates each. Per recipe: seeds with 6/6 after the last update, seeds that reached 6/6 at
#: some update, the median and largest number of updates to the first 6/6, seeds whose greedy
#: generation completes all six sentences, seeds whose last attention row gives the noun the
#: largest weight in all six sentences. ``source``: the source article's recipe (AdamW at 1e-4 for
#: 10,000 updates, default initialisation), its one seed. The same counts as the first
#: measurement of 2026-11-25 (steps do not depend on the load).
TRAINING_SEEDS = {
    "command": "python tools/bench_training.py --source",
    "date": "2026-11-27",
    "machine": "a 2-core x86-64 CPU (Linux, Python 3.11, torch 2.13.0+cpu, 1 torch thread)",
    "load": "3.8 at the start; step counts do not depend on the load",
    "seeds": 20,
    "recipes": {
        "both changes (the chapter's recipe)": dict(final=20, reached=20, median=90, largest=147,
                                                    generates=17, noun_first=4),
        "slower query/key learning alone": dict(final=18, reached=18, median=103, largest=239,
                                                generates=15, noun_first=3),
        "zero queries alone": dict(final=6, reached=6, median=77, largest=161, generates=0,
                                   noun_first=3),
        "neither (the first edition)": dict(final=7, reached=7, median=76, largest=237,
                                            generates=2, noun_first=3),
    },
    "source": dict(seed=123, lr=1e-4, steps=10_000, final=2),
}


def training_seeds_text() -> str:
    """:data:`TRAINING_SEEDS` as the lines a notebook prints."""
    ref = TRAINING_SEEDS
    n = ref["seeds"]
    lines = [f"Measured {ref['date']} with {ref['command']} on {ref['machine']};",
             f"load {ref['load']}.",
             f"{'recipe':<38} {'6/6 at the end':>15} {'updates to first 6/6':>21} "
             f"{'writes all six':>15}"]
    for name, row in ref["recipes"].items():
        steps = f"median {row['median']}, max {row['largest']}"
        lines.append(f"{name:<38} {row['final']:>6} of {n:<5} {steps:>21} "
                     f"{row['generates']:>6} of {n}")
    chapter = next(iter(ref["recipes"].values()))
    source = ref["source"]
    lr = f"{source['lr']:.0e}".replace("e-0", "e-")  # 1e-4
    lines += [f"the noun has the largest weight in all six last rows: {chapter['noun_first']} of {n} "
              "seeds (the chapter's recipe)",
              f"the source's recipe (lr {lr}, {source['steps']:,} updates, seed {source['seed']}): "
              f"{source['final']} of 6 last words right at the end"]
    return "\n".join(lines)


#: chapter 9, ``python tools/bench_gpt.py --study --reference``: the chapter's CPU recipe with five
#: seeds. Held-out losses on all of *Persuasion* (every window: no sampling error) in nats per
#: character; the best previous-token head of each GPT and its score; training seconds (load-dependent).
GPT_SEEDS: dict = {
    "command": "python tools/bench_gpt.py --study --seeds 5 --reference",
    "date": "2026-11-27",
    "machine": "a 2-core x86_64 CPU, Linux, Python 3.11.7, torch 2.13.0+cpu, 1 thread, no GPU",
    "load": "load 5.09 before, 8.69 after (a busy machine: the seconds vary with it, the losses do not)",
    "recipe": "CPU_SETTINGS with seeds 0-4; held-out loss on all of Persuasion",
    "unigram": 3.074,
    "bigram": 2.453,
    "rows": [
        dict(seed=0, gpt=1.771, chapter8=2.468, layer=0, head=1, score=0.89, seconds=111),
        dict(seed=1, gpt=1.79, chapter8=2.48, layer=0, head=2, score=0.82, seconds=429),
        dict(seed=2, gpt=1.77, chapter8=2.404, layer=0, head=2, score=0.89, seconds=362),
        dict(seed=3, gpt=1.759, chapter8=2.471, layer=0, head=2, score=0.9, seconds=246),
        dict(seed=4, gpt=1.77, chapter8=2.401, layer=0, head=0, score=0.91, seconds=132),
    ],
}

#: chapter 9, the same command: the pre-/post-norm runs of ``gpt_training.NORM_RUNS`` (a small deep
#: GPT, 300 steps, each run's learning rate and warm-up) with the same five seeds; held-out losses
#: on all of *Persuasion*.
NORM_SEEDS: dict = {
    "command": "python tools/bench_gpt.py --study --seeds 5 --reference",
    "date": "2026-11-27",
    "machine": "a 2-core x86_64 CPU, Linux, Python 3.11.7, torch 2.13.0+cpu, 1 thread, no GPU",
    "load": "load 5.09 before, 8.69 after (a busy machine: the losses do not depend on it)",
    "recipe": "PRE_POST_SETTINGS (4 blocks, width 32, 300 steps) with each run's learning rate and warm-up",
    "unigram": 3.074,
    "runs": {
        "pre-norm, lr 1e-2, no warm-up": [2.583, 2.672, 2.747, 2.652, 2.669],
        "post-norm, lr 1e-2, no warm-up": [3.075, 3.075, 3.075, 3.076, 3.074],
        "post-norm, lr 1e-2, warm-up 100": [3.077, 3.075, 3.075, 3.077, 3.075],
        "post-norm, lr 1e-3, warm-up 100": [2.986, 2.914, 2.939, 3.056, 2.927],
        "post-norm, lr 3e-3, warm-up 100": [2.793, 2.58, 2.597, 3.02, 2.637],
        "pre-norm, lr 3e-3, no warm-up": [2.507, 2.521, 2.488, 2.496, 2.479],
    },
}

#: chapter 9 on a CPU, ``python tools/bench_gpt.py --speed --reference`` (part of ``make bench``):
#: the CPU recipe's training speed and MFU (against the float32 matrix-product ceiling measured in
#: the same run, one thread), and greedy generation filling the context with and without the cache.
GPT_SPEED_CPU: dict = {
    "command": "python tools/bench_gpt.py --speed --reference",
    "date": "2026-11-27",
    "machine": "a 2-core x86_64 CPU, Linux, Python 3.11.7, torch 2.13.0+cpu, 1 thread, no GPU",
    "load": "load 5.71 before, 6.08 after (other programs shared the two cores: a busy machine)",
    "ceiling_gflops": 37,
    "training": {
        "float32, book's core attention": dict(tokens_per_second=6_785, mfu=0.467),
        "float32, fused attention (the recipe)": dict(tokens_per_second=8_624, mfu=0.594),
    },
    "generation": dict(new_tokens=56, uncached=374.7, cached=1_055.8, speedup=2.82),
}

#: chapter 9 on a GPU: ``python tools/gpu_check.py`` (its ``gpt`` step, ``tools/bench_gpt.py
#: --gpu-check``, and chapter 9 executed top to bottom) on an NVIDIA H100, 2026-11-27, the code of
#: this edition (mixed precision, fused attention, preallocated cache). TFLOP/s: 6N + causal
#: attention (:func:`attention_book.gpt_accounting.flops_per_token`, 67.6 MFLOP per token for the
#: GPU recipe's model); MFU against the bfloat16 matrix-product ceiling measured in the same run.
#: ``first_edition`` is the project's first GPU run (``../shared/gpu-reference``), float32 with
#: the attention weights built.
GPT_GPU: dict = {
    "command": "python tools/gpu_check.py (tools/bench_gpt.py --gpu-check, chapter 9 run top to "
               "bottom)",
    "date": "2026-11-27",
    "machine": "an NVIDIA H100 80GB HBM3 (compute capability 9.0), PyTorch 2.11.0+cu130",
    "load": "the GPU to itself (host load average 3.0)",
    "ceilings": {"bfloat16": 809.8, "float16": 781.5, "float32 (TF32)": 422.7, "float32": 52.0},
    "recipe_run": dict(recipe="GPU_SETTINGS (bfloat16 autocast, fused attention)", steps=2000,
                       seconds=48, held_out=1.174, bigram=2.455, chapter8=2.264),
    "first_edition": dict(recipe="GPU_SETTINGS as first shipped (float32, attention weights "
                                 "built)", steps=2000, seconds=100, held_out=1.18),
    # variant, ms per step, tokens/s (30 timed steps of 64 windows of 256 after the first)
    "training": [
        ("float32, book's core attention (first edition)", 43.8, 374_051),
        ("TF32, book's core attention", 25.09, 653_023),
        ("bfloat16 autocast, book's core attention", 33.12, 494_729),
        ("bfloat16 autocast + fused attention (the recipe)", 19.99, 819_697),
        ("bfloat16 + fused + torch.compile (20 s first step)", 21.9, 748_280),
        ("float16 + GradScaler + fused (the T4 path)", 25.67, 638_328),
    ],
    "flops_per_token": 67_624_704,
    # 300 steps, dropout 0, lr 1e-3 with 50 warm-up steps; held-out loss on 64 windows, one seed
    "mixed_precision_steps": 300,
    "mixed_precision": [
        ("float32, fused", 1.737, 0),
        ("bfloat16 autocast, fused", 1.739, 0),
        ("float16 autocast + GradScaler, fused", 1.747, 0),
    ],
    # greedy, filling the context (248 new characters), batch 1, float32 as chapter 9 runs it
    "generation": dict(new_tokens=248, uncached=521.9, cached=474.5, speedup=0.91),
    # the same at other batch sizes and dtypes: (batch, dtype, uncached, cached tokens/s, speed-up)
    "generation_rows": [
        (1, "float32", 521.9, 474.5, 0.91),
        (1, "bfloat16", 428.6, 338.4, 0.79),
        (16, "float32", 6_510.7, 7_066.1, 1.09),
        (16, "bfloat16", 6_747.9, 5_717.7, 0.85),
    ],
}


def _span(values, digits: int = 2) -> str:
    low, high = (f"{value:.{digits}f}" for value in (min(values), max(values)))
    return low if low == high else f"{low} to {high}"


def _header(ref: dict) -> List[str]:
    return [f"Measured {ref['date']} with {ref['command']}", f"on {ref['machine']};", f"{ref['load']}."]


def gpt_seeds_text() -> str:
    """:data:`GPT_SEEDS` as the lines chapter 9 prints: one row per seed, then the counts."""
    ref = GPT_SEEDS
    rows, n = ref["rows"], len(ref["rows"])
    if not rows:
        return "(no reference measurement recorded yet: run " + ref["command"] + ")"
    lines = _header(ref) + [
        f"The CPU recipe; held-out loss on all of Persuasion (nats per character); unigram {ref['unigram']:.2f}, "
        f"bigram {ref['bigram']:.2f}.",
        f"{'seed':>4} {'GPT':>6} {'chapter 8':>9}  {'best previous-token head':<26} {'GPT s':>5}"]
    for r in rows:
        head = f"layer {r['layer']}, head {r['head']}: {r['score']:.2f}"
        lines.append(f"{r['seed']:>4} {r['gpt']:>6.3f} {r['chapter8']:>9.3f}  {head:<26} {r['seconds']:>5}")
    summary = gpt_seeds_summary()
    lines += [f"GPT below the bigram baseline and chapter 8's model: {summary['beats']} of {n} seeds",
              f"GPT {summary['gpt']}; chapter 8's model {summary['chapter8']}",
              f"a previous-token head (score > 0.5) in layer 0: {summary['layer0']} of {n}"
              + (f", scores {summary['scores']}, heads {summary['heads']}" if summary["layer0"] else "")]
    return "\n".join(lines)


def gpt_seeds_summary() -> dict:
    """What chapter 9's prose says of :data:`GPT_SEEDS`, computed from its rows (glued into the text)."""
    ref = GPT_SEEDS
    rows = ref["rows"]
    layer0 = [r for r in rows if r["layer"] == 0 and r["score"] > 0.5]
    return dict(seeds=len(rows), beats=sum(r["gpt"] < min(ref["bigram"], r["chapter8"]) for r in rows),
                gpt=_span([r["gpt"] for r in rows]), chapter8=_span([r["chapter8"] for r in rows]),
                layer0=len(layer0), scores=_span([r["score"] for r in layer0]) if layer0 else "",
                heads=", ".join(str(h) for h in sorted({r["head"] for r in layer0})))


#: a run "stayed at the unigram level" within this many nats of the unigram baseline, and "learned"
#: when it ended more than ``LEARNED`` below it
AT_UNIGRAM, LEARNED = 0.05, 0.1


def norm_seeds_summary() -> dict:
    """Per run of :data:`NORM_SEEDS`: the span of its losses, their mean, in how many seeds it
    stayed at the unigram level (``stuck``: within :data:`AT_UNIGRAM` of the baseline) and in how
    many it learned (``learned``: more than :data:`LEARNED` below it)."""
    ref = NORM_SEEDS
    summary = {}
    for label, values in ref["runs"].items():
        stuck = sum(abs(v - ref["unigram"]) <= AT_UNIGRAM for v in values)
        learned = sum(v < ref["unigram"] - LEARNED for v in values)
        summary[label] = dict(span=_span(values), mean=sum(values) / len(values), stuck=stuck, learned=learned,
                              seeds=len(values))
    return summary


def norm_seeds_below(label: str, other: str) -> int:
    """In how many seeds of :data:`NORM_SEEDS` the run ``label`` ended below the run ``other``."""
    runs = NORM_SEEDS["runs"]
    return sum(a < b for a, b in zip(runs[label], runs[other]))


def norm_seeds_text() -> str:
    """:data:`NORM_SEEDS` as the lines chapter 9 prints: one row per run, one column per seed."""
    ref = NORM_SEEDS
    if not ref["runs"]:
        return "(no reference measurement recorded yet: run " + ref["command"] + ")"
    seeds = len(next(iter(ref["runs"].values())))
    width = max(len(label) for label in ref["runs"])
    lines = _header(ref) + [f"{ref['recipe']};", f"held-out loss on all of Persuasion, unigram baseline "
                            f"{ref['unigram']:.2f}; learned: ended more than {LEARNED} below it.",
                            f"{'run':<{width}} " + " ".join(f"{'seed ' + str(s):>7}" for s in range(seeds))
                            + "   learned"]
    for label, row in norm_seeds_summary().items():
        values = " ".join(f"{v:>7.2f}" for v in ref["runs"][label])
        lines.append(f"{label:<{width}} {values}   {row['learned']} of {row['seeds']}")
    return "\n".join(lines)


def gpt_speed_text(device="cpu") -> str:
    """The speed reference for the reader's kind of device: :data:`GPT_SPEED_CPU` on a CPU (or
    Apple's MPS), :data:`GPT_GPU` on a CUDA GPU. ``device``: a ``torch.device`` or its name."""
    kind = getattr(device, "type", str(device).split(":")[0])
    if kind == "cuda":
        ref = GPT_GPU
        run = ref["recipe_run"]
        lines = _header(ref) + [
            f"{run['recipe']}:",
            f"  {run['steps']:,} steps in {run['seconds']} s, held-out loss {run['held_out']:.2f} "
            f"(bigram {run['bigram']:.2f}, chapter 8's model {run['chapter8']:.2f}).",
            f"{ref['first_edition']['recipe']}: {ref['first_edition']['seconds']} s, held-out loss "
            f"{ref['first_edition']['held_out']:.2f}.",
            f"Training speed of the same model ({ref['flops_per_token'] / 1e6:.1f} MFLOP per token;",
            f"MFU against the bfloat16 ceiling, {ref['ceilings']['bfloat16']:.0f} TFLOP/s):",
            f"{'variant':<52} {'ms/step':>7} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6}"]
        for name, ms, tokens in ref["training"]:
            tflops = tokens * ref["flops_per_token"] / 1e12
            lines.append(f"{name:<52} {ms:>7.1f} {tokens:>10,} {tflops:>8.1f} "
                         f"{tflops / ref['ceilings']['bfloat16']:>6.1%}")
        lines.append(f"Mixed precision trains as well ({ref['mixed_precision_steps']} steps, held-out loss on "
                     "64 windows, one seed):")
        for name, loss, nonfinite in ref["mixed_precision"]:
            lines.append(f"  {name:<46} {loss:.3f}  ({nonfinite} non-finite losses)")
        g = ref["generation"]
        lines.append(f"Generating {g['new_tokens']} characters (greedy, batch 1, float32): "
                     f"{g['uncached']:,.0f} tokens/s without the cache, {g['cached']:,.0f} with it: "
                     f"{g['speedup']:.2f}x")
        return "\n".join(lines)
    ref = GPT_SPEED_CPU
    if not ref["training"]:
        return "(no reference measurement recorded yet: run " + ref["command"] + ")"
    lines = _header(ref) + [f"{'training variant':<40} {'tokens/s':>9} {'MFU':>6}"]
    for name, row in ref["training"].items():
        lines.append(f"{name:<40} {row['tokens_per_second']:>9,} {row['mfu']:>6.1%}")
    lines.append(f"float32 matrix-product ceiling: {ref['ceiling_gflops']:.0f} GFLOP/s (one thread)")
    g = ref["generation"]
    lines.append(f"Generating {g['new_tokens']} characters (greedy, batch 1): {g['uncached']:,.0f} tokens/s without "
                 f"the cache, {g['cached']:,.0f} with it: {g['speedup']:.1f}x")
    return "\n".join(lines)


def gpt_speed_summary(device="cpu") -> dict:
    """The numbers chapter 9's prose quotes from :func:`gpt_speed_text` for ``device``'s kind:
    ``machine``, ``date``, the recipe's ``tokens_per_second`` and ``mfu``, and the generation
    ``speedup``."""
    kind = getattr(device, "type", str(device).split(":")[0])
    if kind == "cuda":
        ref = GPT_GPU
        name, _, tokens = ref["training"][3]
        mfu = tokens * ref["flops_per_token"] / 1e12 / ref["ceilings"]["bfloat16"]
        return dict(machine=ref["machine"], date=ref["date"], tokens_per_second=tokens, mfu=mfu,
                    speedup=ref["generation"]["speedup"])
    ref = GPT_SPEED_CPU
    recipe = ref["training"]["float32, fused attention (the recipe)"]
    return dict(machine=ref["machine"], date=ref["date"], tokens_per_second=recipe["tokens_per_second"],
                mfu=recipe["mfu"], speedup=ref["generation"]["speedup"])


#: chapter 10, ``python tools/bench_scale.py --reference``: the chapter's own timing cells with
#: more repeats, on a quiet CPU. Medians in milliseconds with the interquartile range. Each table
#: has a key (the chapter looks it up), a title, a header, rows and the ``sizes`` it was measured
#: at: a reader's measurement is compared with a reference table only at the same sizes. A table
#: measured on another day or at another load than the dict's says so in its ``note``.
SCALE_CPU: dict = {
    "command": "python tools/bench_scale.py --reference",
    "date": "2026-11-25",
    "machine": "a 2-core x86_64 CPU, Linux, Python 3.11.7, torch 2.13.0+cpu, 1 thread, no GPU",
    "load": "load 0.99 before, 1.22 after (the run keeps one core busy); 21 interleaved repeats",
    "tables": {
        "curve": {
            "title": "MultiHeadAttention forward, d = 64, 4 heads (median ms [IQR])",
            "sizes": {"lengths": [64, 128, 256, 512], "d_model": 64, "heads": 4, "dtype": "float32"},
            "header": ["T", "ms"],
            "rows": [
                [64, "0.34 [0.32-0.37]"],
                [128, "0.44 [0.43-0.45]"],
                [256, "1.54 [1.50-1.59]"],
                [512, "5.90 [5.75-6.05]"],
            ]},
        "sweep": {
            "title": "Five implementations, d = 128, 2 heads, batch 1 (median ms [IQR])",
            "sizes": {"d_model": 128, "heads": 2, "rows": [[1, 64, True], [1, 128, True], [1, 256, True],
                                                           [1, 512, False]], "dtype": "float32"},
            "header": ["T", "pass", "wrapper", "MHA", "fused", "SDPA", "nn.MHA"],
            "rows": [
                [64, "forward", "0.32 [0.31-0.33]", "0.25 [0.25-0.26]",
                 "0.16 [0.16-0.16]", "0.15 [0.15-0.16]", "0.18 [0.18-0.19]"],
                [64, "forward+backward", "0.74 [0.73-0.76]", "0.65 [0.64-0.65]",
                 "0.48 [0.47-0.48]", "0.44 [0.43-0.45]", "0.54 [0.53-0.55]"],
                [128, "forward", "0.51 [0.50-0.53]", "0.46 [0.45-0.46]",
                 "0.32 [0.32-0.33]", "0.30 [0.30-0.31]", "0.34 [0.34-0.35]"],
                [128, "forward+backward", "1.19 [1.18-1.21]", "1.14 [1.13-1.16]",
                 "0.92 [0.91-0.93]", "0.88 [0.87-0.88]", "1.00 [1.00-1.02]"],
                [256, "forward", "1.15 [1.13-1.15]", "1.11 [1.11-1.12]",
                 "0.77 [0.76-0.78]", "0.75 [0.74-0.75]", "0.83 [0.83-0.84]"],
                [256, "forward+backward", "2.73 [2.71-2.84]", "2.77 [2.74-2.83]",
                 "2.26 [2.25-2.30]", "2.20 [2.20-2.23]", "2.41 [2.40-2.45]"],
                [512, "forward", "3.47 [3.41-3.74]", "3.77 [3.34-4.50] ⚠",
                 "2.25 [2.25-2.28]", "2.20 [2.19-2.21]", "2.46 [2.44-2.52]"],
            ]},
        "causal_flag": {
            "title": "Causal attention, T = 1024, 4 heads of 64 (median ms [IQR])",
            "sizes": {"shape": [1, 4, 1024, 64], "dtype": "float32"},
            "header": ["call", "ms"],
            "rows": [
                ["is_causal=True", "8.58 [8.57-8.61]"],
                ["attn_mask tensor", "12.51 [12.49-12.64]"],
                ["no mask (bidirectional)", "11.39 [11.38-11.42]"],
            ]},
        "kv_cache": {
            "title": ("One generation step, 2 layers of width 256 (median ms [IQR]; the code of commit "
                      "eed01ee, before the cached step's overhead was cut)"),
            "sizes": {"width": 256, "heads": 4, "layers": 2, "dtype": "float32", "code": "eed01ee"},
            "header": ["tokens so far", "no cache", "KV cache", "ratio of medians"],
            "rows": [
                [32, "0.66 [0.65-0.67]", "0.30 [0.30-0.30]", "2x"],
                [128, "2.21 [2.21-2.23]", "0.33 [0.33-0.34]", "7x"],
                [512, "22.91 [21.52-23.35]", "1.41 [1.04-1.71] ⚠", "16x"],
            ]},
        "roofline": {
            "title": "Roofline (best of the repeats)",
            "sizes": {"dtype": "float32"},
            "header": ["matmul GFLOP/s (float32)", "copy GB/s", "ridge FLOP/byte"],
            "rows": [
                ["110", "52.7", "2.1"],
            ]},
        "causal_blocks": {
            "title": ("is_causal=True against no mask, 4 heads of 64, float32: the measured ratio of the "
                      "medians and the share of tiles the CPU flash kernel computes"),
            "sizes": {"heads": 4, "head_dim": 64, "dtype": "float32"},
            "header": ["T", "is_causal=True ms", "no mask ms", "ratio", "tiles computed"],
            "rows": [
                [512, "19.72 ⚠", "19.66", "1.00", "1.000"],
                [1024, "49.46 ⚠", "62.66", "0.79", "0.750"],
                [2048, "160.13", "262.77", "0.61", "0.625"],
            ],
            "label": "busy CPU, 2026-11-27",
            "note": ("(measured 2026-11-27 with the same command, 21 repeats, while other programs kept "
                     "the machine busy, load 12: the times are several times the quiet ones, the ratios "
                     "are what to read)")},
        "fused_overhead": {
            "title": ("FusedMultiHeadAttention against direct_sdpa per call, input 1 x 8 x 16, 2 heads, "
                      "float32 (µs per call: median of the blocks [IQR]; ratio of the fastest blocks)"),
            "sizes": {"shape": [1, 8, 16], "heads": 2, "dtype": "float32"},
            "header": ["pass", "FusedMultiHeadAttention", "direct_sdpa", "ratio"],
            "rows": [
                ["forward", "43.0 [42.4-47.2]", "43.6 [43.1-51.7]", "0.98"],
                ["forward+backward", "264.9 [260.1-422.4] ⚠", "270.0 [256.7-428.9] ⚠", "1.01"],
            ],
            "label": "busy CPU, 2026-11-27",
            "note": ("(measured 2026-11-27 with the same command at load 12, the module as it is now; "
                     "the ratio of the fastest blocks of 41 interleaved ones resists the load)")},
        "block_mask": {
            "title": "create_block_mask, causal, B = H = 1, T = 16,384 (fresh process, cold compile)",
            "sizes": {"tokens": 16384},
            "header": ["mode", "peak memory grew (MiB)", "first call (s)", "second call (s)"],
            "rows": [
                ["eager", "2,405", "1.53", "0.759"],
                ["compiled", "0", "7.85", "0.038"],
            ]},
    },
}

#: chapter 10 on a datacenter GPU: the first GPU run of the course (``../shared/gpu-reference/``,
#: its ``scripts/perf.py`` and ``perf2.py``); ``python tools/gpu_check.py`` measures the
#: chapter's own GPU sizes and prints tables of the same form under the keys the chapter looks up
#: (``causal_flag``, ``kv_cache``, ``decode_overhead``, ...): add them here. The first run's
#: tables have keys of their own (``causal_flag_8192``, ``kv_cache_eed01ee``), which the prose
#: quotes. CUDA-event medians (triton's ``do_bench``).
SCALE_GPU: dict = {
    "command": ("scripts/perf.py and perf2.py of the first GPU run (triton.testing.do_bench "
                "medians; the tables ceilings to kv_cache_eed01ee) and python tools/gpu_check.py "
                "(tools/bench_scale.py --reference, CUDA events; the other tables)"),
    "date": "2026-11-27",
    "machine": ("an NVIDIA H100 80GB HBM3 (compute capability 9.0, 132 SMs, 50 MB of L2 cache), "
                "PyTorch 2.11.0+cu130, cuDNN 9.19, Python 3.12.3"),
    "load": "nothing else ran on the GPU; CUDA-event timings do not count the host's load",
    "tables": {
        "ceilings": {
            "title": "Ceilings: 8192 x 8192 matrix products, a 1 GiB copy (bytes read + written)",
            "sizes": {},
            "header": ["bfloat16 TFLOP/s", "float32 TFLOP/s", "float32 as TF32 TFLOP/s", "copy TB/s",
                       "ridge bfloat16", "ridge float32"],
            "rows": [["782", "51.3", "356", "3.0", "261", "17"]]},
        "kernels": {
            "title": ("Causal attention kernels, bfloat16, 16 heads of 128, 16,384 tokens per call "
                      "(median ms, TFLOP/s of the causal FLOPs, forward + backward counted as 3.5 "
                      "forward passes)"),
            "sizes": {"heads": 16, "head_dim": 128, "tokens": 16384, "dtype": "bfloat16"},
            "header": ["T", "B", "implementation", "forward ms", "TFLOP/s", "fwd+bwd ms", "TFLOP/s",
                       "peak MiB"],
            "rows": [
                [1024, 16, "from scratch", "2.544", "27.0", "6.131", "39.2", "1537"],
                [1024, 16, "FLASH_ATTENTION", "0.279", "246.7", "1.343", "179.1", "65"],
                [1024, 16, "EFFICIENT_ATTENTION", "0.490", "140.1", "2.254", "106.7", "65"],
                [1024, 16, "CUDNN_ATTENTION", "0.159", "432.2", "0.766", "313.9", "65"],
                [1024, 16, "MATH", "7.331", "9.4", "15.805", "15.2", "2948"],
                [4096, 4, "from scratch", "11.698", "23.5", "25.084", "38.4", "6160"],
                [4096, 4, "FLASH_ATTENTION", "0.900", "305.5", "3.642", "264.2", "65"],
                [4096, 4, "EFFICIENT_ATTENTION", "1.710", "160.7", "7.350", "130.9", "65"],
                [4096, 4, "CUDNN_ATTENTION", "0.520", "528.8", "2.110", "456.1", "65"],
                [4096, 4, "MATH", "29.046", "9.5", "59.973", "16.0", "9920"],
                [16384, 1, "from scratch", "41.630", "26.4", "94.560", "40.7", "24832"],
                [16384, 1, "FLASH_ATTENTION", "3.437", "319.9", "12.084", "318.5", "65"],
                [16384, 1, "EFFICIENT_ATTENTION", "6.410", "171.5", "27.726", "138.8", "65"],
                [16384, 1, "CUDNN_ATTENTION", "1.957", "561.8", "7.395", "520.4", "65"],
                [16384, 1, "MATH", "out of memory", "", "", "", ""],
                [16384, 1, "FlexAttention, compiled", "2.672", "411.5", "9.579", "401.7", "66"],
            ]},
        "default_choice": {
            "title": ("Which kernel the default picks (torch._fused_sdp_choice), bfloat16, B = 4, "
                      "H = 16, T = 8,192, head 128 (TFLOP/s)"),
            "sizes": {"shape": [4, 16, 8192, 128], "dtype": "bfloat16"},
            "header": ["mask", "default picks", "default", "CUDNN", "FLASH", "EFFICIENT"],
            "rows": [
                ["none", "CUDNN_ATTENTION", "679.1", "601.4", "351.5", "181.0"],
                ["causal", "CUDNN_ATTENTION", "566.1", "558.2", "326.7", "174.3"],
            ]},
        "causal_flag_8192": {
            "title": "Causal attention, B = 4, H = 16, T = 8,192, head 128, bfloat16 (median ms)",
            "sizes": {"shape": [4, 16, 8192, 128], "dtype": "bfloat16"},
            "header": ["call", "ms"],
            "rows": [
                ["is_causal=True", "2.036"],
                ["attn_mask tensor", "6.704"],
                ["no mask (bidirectional)", "3.736"],
            ]},
        "causal_flag_small": {
            "title": ("The same three calls at the chapter's CPU sizes, T = 1024, 4 heads of 64, "
                      "float32 (median ms [IQR])"),
            "sizes": {"shape": [1, 4, 1024, 64], "dtype": "float32"},
            "header": ["call", "ms"],
            "rows": [
                ["is_causal=True", "0.13 [0.13-0.13]"],
                ["attn_mask tensor", "0.17 [0.17-0.18]"],
                ["no mask (bidirectional)", "0.13 [0.12-0.13]"],
            ]},
        "kv_cache_eed01ee": {
            "title": ("One generation step, 12 CachedMultiHeadAttention layers of width 768 (12 "
                      "heads), batch 1 (median ms; the code of commit eed01ee, before the cached "
                      "step's overhead was cut)"),
            "sizes": {"width": 768, "heads": 12, "layers": 12, "code": "eed01ee"},
            "header": ["tokens so far", "float32 no cache", "float32 KV cache", "bfloat16 no cache",
                       "bfloat16 KV cache"],
            "rows": [
                [128, "5.743", "6.658", "8.890", "6.697"],
                [512, "10.750", "7.754", "6.061", "6.658"],
                [2048, "22.800", "9.450", "19.819", "10.655"],
            ]},
        # python tools/gpu_check.py at the chapter's own GPU sizes (measure.plan_for), commit
        # d56589d of this edition, the same GPU and PyTorch, 2026-11-27: the keys the chapter's
        # timing cells look up
        'causal_flag': {'title': 'Causal attention, B = 4, H = 12, T = 4096, head 64, bfloat16 '
                                 '(median ms [IQR])',
                        'sizes': {'shape': [4, 12, 4096, 64], 'dtype': 'bfloat16'},
                        'header': ['call', 'ms'],
                        'rows': [['is_causal=True', '0.30 [0.29-0.31]'],
                                 ['attn_mask tensor', '0.88 [0.87-0.89]'],
                                 ['no mask (bidirectional)', '0.48 [0.47-0.49]']]},
        'fused_overhead': {'title': 'FusedMultiHeadAttention against direct_sdpa per call, input 1 x '
                                    '8 x 16, 2 heads, float32 unless the row says otherwise (µs per '
                                    'call: median of the blocks [IQR]; ratio of the fastest blocks)',
                           'sizes': {'shape': [1, 8, 16], 'heads': 2, 'dtype': 'float32'},
                           'header': ['pass', 'FusedMultiHeadAttention', 'direct_sdpa', 'ratio'],
                           'rows': [['forward', '119.5 [117.8-126.5]', '113.7 [108.8-120.0]', '1.06'],
                                    ['forward+backward',
                                     '1544.6 [1473.0-1740.3]',
                                     '1523.3 [1499.4-1629.2]',
                                     '1.06'],
                                    ['forward, 16 x 1024 x 768, bfloat16',
                                     '296.3 [279.6-303.4]',
                                     '282.7 [266.9-294.2]',
                                     '1.06']]},
        'roofline': {'title': 'Roofline (best of the repeats)',
                     'sizes': {'dtype': 'bfloat16'},
                     'header': ['matmul GFLOP/s (bfloat16)', 'copy GB/s', 'ridge FLOP/byte'],
                     'rows': [['788339', '2978.6', '264.7']]},
        'decode_overhead': {'title': 'One token after 2047 cached, 12 layers of width 768, batch 1, '
                                     'bfloat16: what removes the overhead (median ms [IQR])',
                            'sizes': {'width': 768,
                                      'num_heads': 12,
                                      'num_layers': 12,
                                      'tokens': 2048,
                                      'dtype': 'bfloat16'},
                            'header': ['variant', 'ms per token', 'µs per layer'],
                            'rows': [['KVCache, checks in every layer', '3.30 [3.25-3.56]', '275'],
                                     ['StaticKVCache, checks in every layer',
                                      '3.29 [3.25-3.46]',
                                      '274'],
                                     ['StaticKVCache, checks once', '3.43 [3.06-3.58]', '286'],
                                     ['CUDA graph', '0.63 [0.59-0.65]', '53']]},
        'kv_cache': {'title': 'One generation step, 12 layers of width 768 (12 heads), batch 1, '
                              'bfloat16 (median ms [IQR])',
                     'sizes': {'width': 768, 'heads': 12, 'layers': 12, 'dtype': 'bfloat16'},
                     'header': ['tokens so far', 'no cache', 'KV cache', 'ratio of medians'],
                     'rows': [[128, '9.77 [9.44-10.27]', '4.12 [3.96-4.27]', '2.4x'],
                              [512, '9.77 [9.50-10.24]', '4.18 [3.87-4.35]', '2.3x'],
                              [2048, '20.49 [20.41-20.67]', '6.33 [5.75-7.48] ⚠', '3.2x']]},
        'flex': {'title': 'FlexAttention compiled, causal, (4, 12, 4096, 64), bfloat16 (median ms '
                          '[IQR])',
                 'sizes': {'shape': [4, 12, 4096, 64], 'dtype': 'bfloat16'},
                 'header': ['kernel', 'compile', 'ms', 'TFLOP/s'],
                 'rows': [['FlexAttention, torch.compile',
                           '1.3 s to compile + first call',
                           '0.51 [0.50-0.52]',
                           '204.0'],
                          ['scaled_dot_product_attention, is_causal=True',
                           '-',
                           '0.33 [0.33-0.34]',
                           '308.9']]},
        'decode_compiled': {'title': 'One token after 2047 cached, 12 layers of width 768, batch 1, '
                                     'bfloat16: the step compiled (median ms [IQR])',
                            'sizes': {'width': 768,
                                      'num_heads': 12,
                                      'num_layers': 12,
                                      'tokens': 2048,
                                      'dtype': 'bfloat16'},
                            'header': ['variant', 'ms per token', 'µs per layer'],
                            'rows': [['torch.compile reduce-overhead', '3.65 [3.61-3.74]', '304']]},
        'curve': {'title': 'MultiHeadAttention forward, d = 768, 12 heads, bfloat16 (median ms '
                           '[IQR])',
                  'sizes': {'lengths': [1024, 2048, 4096, 8192],
                            'd_model': 768,
                            'heads': 12,
                            'dtype': 'bfloat16'},
                  'header': ['T', 'ms'],
                  'rows': [[1024, '1.23 [1.08-1.34]'],
                           [2048, '2.01 [1.96-2.02]'],
                           [4096, '6.73 [6.70-6.79]'],
                           [8192, '26.45 [26.40-26.48]']]},
        'sweep': {'title': 'Five implementations, d = 768, 12 heads, bfloat16 (median ms [IQR])',
                  'sizes': {'d_model': 768,
                            'heads': 12,
                            'rows': [[16, 1024, True], [8, 2048, True], [4, 4096, True]],
                            'dtype': 'bfloat16'},
                  'header': ['B x T', 'pass', 'wrapper', 'MHA', 'fused', 'SDPA', 'nn.MHA'],
                  'rows': [['16 x 1024',
                            'forward',
                            '7.71 [7.69-7.74]',
                            '6.74 [6.69-6.77]',
                            '0.41 [0.40-0.48]',
                            '0.27 [0.25-0.29]',
                            '0.60 [0.60-0.61]'],
                           ['16 x 1024',
                            'forward+backward',
                            '18.45 [17.66-19.65]',
                            '15.41 [15.36-15.48]',
                            '2.40 [2.24-2.51]',
                            '1.55 [1.38-1.77]',
                            '2.10 [2.05-2.25]'],
                           ['8 x 2048',
                            'forward',
                            '13.97 [13.93-14.13]',
                            '12.81 [12.77-12.89]',
                            '0.57 [0.54-0.65]',
                            '0.34 [0.33-0.36]',
                            '0.68 [0.68-0.71]'],
                           ['8 x 2048',
                            'forward+backward',
                            '31.58 [31.55-31.64]',
                            '29.36 [29.32-29.40]',
                            '2.57 [2.56-2.78]',
                            '1.60 [1.57-1.77]',
                            '2.24 [2.16-2.30]'],
                           ['4 x 4096',
                            'forward',
                            '27.01 [26.94-27.05]',
                            '25.91 [25.83-25.96]',
                            '0.81 [0.74-0.92]',
                            '0.46 [0.44-0.47]',
                            '0.84 [0.81-0.87]'],
                           ['4 x 4096',
                            'forward+backward',
                            '60.56 [60.51-60.66]',
                            '58.04 [57.97-58.12]',
                            '3.14 [3.03-3.33]',
                            '2.10 [2.05-2.26]',
                            '2.65 [2.55-2.93]']]},
    },
}


_CELL = re.compile(r"^([\d.]+) \[([\d.]+)-([\d.]+)\]( ⚠)?$")


def _aligned(header: list, rows: list) -> List[str]:
    """``header`` and ``rows`` as lines of right-aligned columns, two spaces apart."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    return ["  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)) for row in (header, *rows)]


def _median_only(title: str, header: list, rows: list) -> List[str]:
    """A wide table of "median [q1-q3]" cells as medians, with one line on the spreads."""
    spreads, noisy = [], []
    table = []
    for row in rows:
        cells = []
        for name, cell in zip(header, row):
            match = _CELL.match(str(cell))
            if not match:
                cells.append(str(cell))
                continue
            median, q1, q3, flag = match.groups()
            spreads.append((float(q3) - float(q1)) / float(median))
            if flag:
                where = " ".join(str(c) for c in row[:2] if not _CELL.match(str(c)))
                noisy.append(f"{name} at {where}")
            cells.append(median + (" ⚠" if flag else ""))
        table.append(cells)
    lines = ["", title.replace("(median ms [IQR])", "(median ms)"), *_aligned(header, table)]
    if spreads:
        steady = [s for s in spreads if s <= 0.25]
        lines.append(f"IQR within {max(steady):.0%} of the median in {len(steady)} of "
                     f"{len(spreads)} cells; noisy (⚠): {', '.join(noisy) if noisy else 'none'}")
    return lines


def _tables_text(ref: dict) -> str:
    if not ref["tables"]:
        return "(no reference measurement recorded yet: run " + ref["command"] + ")"
    lines: List[str] = [f"Measured {ref['date']} with {ref['command']}",
                        f"on {ref['machine']};", f"{ref['load']}."]
    for table in ref["tables"].values():
        header, rows = table["header"], table["rows"]
        if len(header) > 4 and any(_CELL.match(str(cell)) for row in rows for cell in row):
            lines += _median_only(table["title"], header, rows)
        else:
            lines += ["", table["title"], *_aligned(header, rows)]
        if table.get("note"):  # e.g. a table measured on another day than the others
            lines.append(table["note"])
    return "\n".join(lines)


def scale_text() -> str:
    """:data:`SCALE_CPU` as the lines a notebook prints (one block per table; wide tables show
    medians and a line on their spreads)."""
    return _tables_text(SCALE_CPU)


def scale_gpu_text() -> str:
    """:data:`SCALE_GPU` as the lines a notebook prints."""
    return _tables_text(SCALE_GPU)


def scale_reference(device=None) -> dict:
    """The chapter-10 reference for a device: :data:`SCALE_GPU` on a CUDA GPU, else
    :data:`SCALE_CPU`."""
    kind = getattr(device, "type", str(device) if device is not None else "cpu").split(":")[0]
    return SCALE_GPU if kind == "cuda" else SCALE_CPU


def reference_table(key: str, device=None, sizes: Optional[dict] = None) -> Optional[dict]:
    """The reference table ``key`` for ``device`` (see :func:`scale_reference`), or None when
    there is none, or when ``sizes`` is given and the table was measured at other sizes (a
    reader's timing is compared with a reference only like for like)."""
    table = scale_reference(device)["tables"].get(key)
    if table is None or (sizes is not None and table.get("sizes") != sizes):
        return None
    return table


def reference_cell(key: str, row: object, column: int = 1, device=None,
                   sizes: Optional[dict] = None, missing: str = "-") -> str:
    """Cell ``column`` of the row whose first cell is ``row`` in :func:`reference_table`, or
    ``missing`` when the table, the sizes or the row do not match."""
    table = reference_table(key, device, sizes)
    if table is not None:
        for cells in table["rows"]:
            if str(cells[0]) == str(row):
                return str(cells[column])
    return missing


def reference_name(device=None, key: Optional[str] = None) -> str:
    """A short name of the reference for ``device``, for a column header:
    ``"reference: quiet CPU, 2026-11-25"``; the table ``key``'s own ``label`` where it has one (a
    table measured on another day or at another load)."""
    ref = scale_reference(device)
    table = ref["tables"].get(key, {}) if key else {}
    if table.get("label"):
        return f"reference: {table['label']}"
    where = "H100" if ref is SCALE_GPU else "quiet CPU"
    return f"reference: {where}, {ref['date']}"


def live_label() -> str:
    """Who measured a timing the chapter shows next to the reference: ``"this build's machine"``
    on the published site (the book build sets ``ATTENTION_BOOK_STATIC=1``), ``"your machine"``
    in a notebook."""
    built = os.environ.get("ATTENTION_BOOK_STATIC", "") not in ("", "0")
    return "this build's machine, now" if built else "your machine, now"
