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
  losses, the pre-/post-norm comparison, the best previous-token head), and
  :func:`gpt_seeds_text`;
* :data:`SCALE_CPU` - chapter 10: the chapter's timings measured on a quiet machine, and
  :func:`scale_text`.
"""

from __future__ import annotations

import re
from typing import List

__all__ = ["TRAINING_SEEDS", "training_seeds_text", "GPT_SEEDS", "gpt_seeds_text", "SCALE_CPU", "scale_text"]

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


#: chapter 9, ``python tools/bench_gpt.py --reference`` (part of ``make bench``): the chapter's CPU
#: recipe with seeds 0-4. Held-out losses on *Persuasion* in nats per character; the best
#: previous-token head of each GPT and its score; training seconds of the GPT (load-dependent).
GPT_SEEDS: dict = {
    "command": "python tools/bench_gpt.py --reference",
    "date": "2026-11-27",
    "machine": "a 2-core x86_64 CPU, Linux, Python 3.11.7, torch 2.13.0+cpu, 1 thread, no GPU",
    "load": "load 0.15 before, 1.03 after (the run keeps one core busy); losses do not depend on it",
    "recipe": "CPU_SETTINGS with seeds 0-4; pre/post-norm: PRE_POST_SETTINGS",
    "unigram": 3.07,
    "bigram": 2.45,
    "rows": [
        dict(seed=0, gpt=1.81, chapter8=2.48, pre=2.61, post=3.09, layer=0, head=1, score=0.90,
             seconds=48),
        dict(seed=1, gpt=1.81, chapter8=2.50, pre=2.76, post=3.09, layer=0, head=2, score=0.79,
             seconds=40),
        dict(seed=2, gpt=1.81, chapter8=2.42, pre=2.97, post=3.09, layer=0, head=2, score=0.90,
             seconds=43),
        dict(seed=3, gpt=1.80, chapter8=2.48, pre=2.67, post=3.09, layer=0, head=2, score=0.88,
             seconds=43),
        dict(seed=4, gpt=1.80, chapter8=2.42, pre=2.67, post=3.09, layer=0, head=0, score=0.91,
             seconds=40),
    ],
}


def _span(values) -> str:
    low, high = min(values), max(values)
    return f"{low:.2f}" if low == high else f"{low:.2f} to {high:.2f}"


def gpt_seeds_text() -> str:
    """:data:`GPT_SEEDS` as the lines chapter 9 prints: one row per seed, then the counts."""
    ref = GPT_SEEDS
    rows, n = ref["rows"], len(ref["rows"])
    lines = [f"Measured {ref['date']} with {ref['command']}", f"on {ref['machine']};", f"{ref['load']}.",
             f"Held-out loss (nats per character); unigram {ref['unigram']:.2f}, bigram {ref['bigram']:.2f}.",
             f"{'seed':>4} {'GPT':>5} {'chapter 8':>9} {'pre-norm':>8} {'post-norm':>9}  "
             f"{'best previous-token head':<26} {'GPT s':>5}"]
    for r in rows:
        head = f"layer {r['layer']}, head {r['head']}: {r['score']:.2f}"
        lines.append(f"{r['seed']:>4} {r['gpt']:>5.2f} {r['chapter8']:>9.2f} {r['pre']:>8.2f} {r['post']:>9.2f}  "
                     f"{head:<26} {r['seconds']:>5}")
    beats = sum(r["gpt"] < min(ref["bigram"], r["chapter8"]) for r in rows)
    at_unigram = sum(abs(r["post"] - ref["unigram"]) <= 0.05 for r in rows)
    layer0 = [r["score"] for r in rows if r["layer"] == 0 and r["score"] > 0.5]
    lines += [f"GPT below the bigram baseline and chapter 8's model: {beats} of {n} seeds",
              f"GPT {_span([r['gpt'] for r in rows])}; chapter 8's model {_span([r['chapter8'] for r in rows])}",
              f"pre-norm {_span([r['pre'] for r in rows])}; post-norm {_span([r['post'] for r in rows])}, "
              f"within 0.05 of the unigram baseline in {at_unigram} of {n}",
              f"a previous-token head (score > 0.5) in layer 0: {len(layer0)} of {n}"
              + (f", scores {_span(layer0)}, heads {sorted({r['head'] for r in rows if r['layer'] == 0})}"
                 if layer0 else "")]
    return "\n".join(lines)


#: chapter 10, ``python tools/bench_scale.py --reference``: the chapter's own timing cells with
#: more repeats, on a quiet machine. Medians in milliseconds with the interquartile range.
SCALE_CPU: dict = {
    "command": "python tools/bench_scale.py --reference",
    "date": "2026-11-25",
    "machine": "a 2-core x86_64 CPU, Linux, Python 3.11.7, torch 2.13.0+cpu, 1 thread, no GPU",
    "load": "load 0.99 before, 1.22 after (the run keeps one core busy); 21 interleaved repeats",
    "tables": {
        "MultiHeadAttention forward, d = 64, 4 heads (median ms [IQR])": (
            ["T", "ms"],
            [
                [64, "0.34 [0.32-0.37]"],
                [128, "0.44 [0.43-0.45]"],
                [256, "1.54 [1.50-1.59]"],
                [512, "5.90 [5.75-6.05]"],
            ]),
        "Five implementations, d = 128, 2 heads, batch 1 (median ms [IQR])": (
            ["T", "pass", "wrapper", "MHA", "fused", "SDPA", "nn.MHA"],
            [
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
            ]),
        "Causal attention, T = 1024, 4 heads of 64 (median ms [IQR])": (
            ["call", "ms"],
            [
                ["is_causal=True", "8.58 [8.57-8.61]"],
                ["attn_mask tensor", "12.51 [12.49-12.64]"],
                ["no mask (bidirectional)", "11.39 [11.38-11.42]"],
            ]),
        "One generation step, 2 layers of width 256 (median ms [IQR])": (
            ["tokens so far", "no cache", "KV cache", "ratio of medians"],
            [
                [32, "0.66 [0.65-0.67]", "0.30 [0.30-0.30]", "2x"],
                [128, "2.21 [2.21-2.23]", "0.33 [0.33-0.34]", "7x"],
                [512, "22.91 [21.52-23.35]", "1.41 [1.04-1.71] ⚠", "16x"],
            ]),
        "Roofline (best of the repeats)": (
            ["matmul GFLOP/s (float32)", "copy GB/s", "ridge FLOP/byte"],
            [
                ["110", "52.7", "2.1"],
            ]),
        "create_block_mask, causal, B = H = 1, T = 16,384 (fresh process, cold compile)": (
            ["mode", "peak memory grew (MiB)", "first call (s)", "second call (s)"],
            [
                ["eager", "2,405", "1.53", "0.759"],
                ["compiled", "0", "7.85", "0.038"],
            ]),
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
                noisy.append(f"{name} at {row[0]} {row[1]}")
            cells.append(median + (" ⚠" if flag else ""))
        table.append(cells)
    lines = ["", title.replace("(median ms [IQR])", "(median ms)"), *_aligned(header, table)]
    steady = [s for s in spreads if s <= 0.25]
    lines.append(f"IQR within {max(steady):.0%} of the median in {len(steady)} of {len(spreads)} "
                 f"cells; noisy (⚠): {', '.join(noisy) if noisy else 'none'}")
    return lines


def scale_text() -> str:
    """:data:`SCALE_CPU` as the lines a notebook prints (one block per table; wide tables show
    medians and a line on their spreads)."""
    ref = SCALE_CPU
    if not ref["tables"]:
        return "(no reference measurement recorded yet: run " + ref["command"] + ")"
    lines: List[str] = [f"Measured {ref['date']} with {ref['command']}",
                        f"on {ref['machine']};", f"{ref['load']}."]
    for title, (header, rows) in ref["tables"].items():
        if len(header) > 4:
            lines += _median_only(title, header, rows)
            continue
        lines += ["", title, *_aligned(header, rows)]
    return "\n".join(lines)
