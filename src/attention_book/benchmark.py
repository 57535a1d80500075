"""Causal self-attention five ways, timed side by side (chapter 10 and ``tools/bench_scale.py``).

* :func:`attention_implementations` builds the five implementations of :data:`IMPLEMENTATIONS`
  with one set of weights;
* :func:`benchmark_attention` times them interleaved (round robin) on one batch, :func:`sweep`
  over lengths; every time is the median of the repeats, kept with its spread
  (:class:`attention_book.measure.Timing`);
* :func:`benchmark_table` shows one quantity (milliseconds, ratio to the fastest, the spread, or
  useful GFLOP/s) as a :class:`Table` that carries a warning when the timings were too noisy to
  trust; :func:`plot_benchmark` draws the medians against ``T`` with their interquartile ranges;
* :func:`fused_overhead` - what :class:`~attention_book.fused.FusedMultiHeadAttention` costs per
  call beyond calling the same kernels directly (:func:`~attention_book.fused.direct_sdpa`);
* :func:`time_decoding` - one generation step of a stack of cached attention layers, from the
  readable cache to a CUDA graph: where the time of a small step goes (:data:`DECODE_VARIANTS`).

The command-line harness (machine description, files, the full sweep) is
``tools/bench_scale.py``; this module holds what the chapter needs to run the same
measurements in a notebook, on a laptop or in Colab.
"""

from __future__ import annotations

import html
from typing import Callable, Dict, List, Optional, Sequence

import torch
from torch import nn

from . import validation as check
from .cost import attention_flops
from .fused import FusedMultiHeadAttention, direct_sdpa
from .kv_cache import AttentionStack, capture_step
from .measure import Timing, compare, regime_note, time_samples, timing_note
from .multihead import MultiHeadAttention, MultiHeadAttentionWrapper

__all__ = [
    "IMPLEMENTATIONS",
    "attention_implementations",
    "time_implementations",
    "benchmark_attention",
    "sweep",
    "Table",
    "benchmark_table",
    "plot_benchmark",
    "regime_notes",
    "reference_ratio_table",
    "fused_overhead",
    "DECODE_VARIANTS",
    "time_decoding",
]

#: short name -> what it is, slowest first
IMPLEMENTATIONS = {
    "wrapper": "MultiHeadAttentionWrapper: one chapter-7 head after another",
    "MHA": "MultiHeadAttention: all heads at once, from scratch",
    "fused": "FusedMultiHeadAttention: the same with the fused kernel",
    "SDPA": "direct_sdpa: projections + fused kernel, no module",
    "nn.MHA": "torch.nn.MultiheadAttention with the same weights",
}

QUANTITIES = ("ms", "ratio", "spread", "GFLOP/s")


def attention_implementations(d_model: int, num_heads: int,
                              context_length: int, device=None,
                              dtype: torch.dtype = torch.float32,
                              seed: int = 0) -> dict:
    """Causal self-attention five ways: ``name -> function(x)`` for ``x``
    ``(B, T, d_model)``, names as in :data:`IMPLEMENTATIONS`.

    All but the wrapper share one set of weights (the wrapper has no output
    projection), so their outputs agree; dropout is off.
    """
    torch.manual_seed(seed)
    sizes = (d_model, d_model, context_length, 0.0, num_heads)
    wrapper = MultiHeadAttentionWrapper(*sizes).to(device, dtype)
    scratch = MultiHeadAttention(*sizes).to(device, dtype)
    fused = FusedMultiHeadAttention.from_module(scratch)
    reference = nn.MultiheadAttention(d_model, num_heads, batch_first=True,
                                      device=device, dtype=dtype)
    with torch.no_grad():  # in_proj stacks W_query, W_key, W_value
        reference.in_proj_weight.copy_(torch.cat(
            [scratch.W_query.weight, scratch.W_key.weight,
             scratch.W_value.weight]))
        reference.in_proj_bias.zero_()
        reference.out_proj.load_state_dict(scratch.out_proj.state_dict())
    masks: dict = {}

    def torch_mha(x):
        T = x.shape[1]
        if T not in masks:  # it wants the mask; is_causal=True is a hint
            masks[T] = torch.triu(torch.ones(T, T, dtype=torch.bool,
                                             device=x.device), diagonal=1)
        return reference(x, x, x, attn_mask=masks[T], is_causal=True,
                         need_weights=False)[0]

    functions = (wrapper, scratch, fused, lambda x: direct_sdpa(scratch, x),
                 torch_mha)
    return dict(zip(IMPLEMENTATIONS, functions))


def _check_names(names) -> List[str]:
    chosen = list(IMPLEMENTATIONS if names is None else names)
    unknown = [name for name in chosen if name not in IMPLEMENTATIONS]
    if unknown:
        raise ValueError(
            f"unknown implementation(s) {unknown}; choose from "
            f"{list(IMPLEMENTATIONS)}"
        )
    return chosen


def time_implementations(num_tokens: int, batch_size: int = 1,
                         d_model: int = 768, num_heads: int = 12,
                         backward: bool = False, repeats: int = 5,
                         names: Optional[Sequence[str]] = None, device=None,
                         dtype: torch.dtype = torch.float32) -> Dict[str, Timing]:
    """The :class:`~attention_book.measure.Timing` of each implementation on one
    ``(B, T, d_model)`` batch: one warm-up round, then ``repeats`` interleaved
    rounds (:func:`attention_book.measure.compare`).

    ``backward=True`` times forward + backward (gradients of all weights).
    """
    chosen = _check_names(names)
    check.positive_int("repeats", repeats)
    check.boolean("backward", backward)
    functions = attention_implementations(d_model, num_heads, num_tokens,
                                          device=device, dtype=dtype)
    x = torch.randn(batch_size, num_tokens, d_model, device=device).to(dtype)
    calls = {}
    for name in chosen:
        fn = functions[name]
        if backward:
            def call(fn=fn):
                fn(x).float().sum().backward()
        else:
            def call(fn=fn):
                with torch.no_grad():
                    fn(x)
        calls[name] = call
    return compare(calls, repeats=repeats, warmup=1, device=device)


def benchmark_attention(num_tokens: int, batch_size: int = 1,
                        d_model: int = 768, num_heads: int = 12,
                        backward: bool = False, repeats: int = 5,
                        names: Optional[Sequence[str]] = None, device=None,
                        dtype: torch.dtype = torch.float32,
                        statistic: str = "median") -> dict:
    """Seconds of each implementation on one ``(B, T, d_model)`` batch:
    ``name -> seconds``, the median (or ``statistic="min"``, the best) of
    ``repeats`` interleaved rounds (see :func:`time_implementations`).
    """
    if statistic not in ("median", "min"):
        raise ValueError(
            f"statistic must be 'median' or 'min', got {statistic!r}"
        )
    timings = time_implementations(num_tokens, batch_size, d_model, num_heads,
                                   backward, repeats, names, device, dtype)
    return {name: (t.median if statistic == "median" else t.best)
            for name, t in timings.items()}


def sweep(tokens: Sequence[int], batch_size: int = 1, d_model: int = 768,
          num_heads: int = 12,
          passes: Sequence[str] = ("forward", "forward+backward"),
          repeats: int = 5, device=None, dtype: torch.dtype = torch.float32,
          skip: Optional[Callable[[int, str, str], bool]] = None,
          progress: bool = False) -> List[dict]:
    """:func:`time_implementations` for every ``T`` in ``tokens`` and pass.

    ``skip(T, pass_name, name)`` may return True to leave a slow measurement
    out. Returns one dict per (T, pass): ``tokens, batch_size, d_model,
    num_heads, dtype, pass_name``, ``timings`` (``name -> Timing``),
    ``seconds`` (``name -> median seconds``) and ``flops``: the useful
    (causal) FLOPs of :func:`attention_flops`, forward x 3 for forward +
    backward.
    """
    for pass_name in passes:
        if pass_name not in ("forward", "forward+backward"):
            raise ValueError(
                f"passes must be 'forward' or 'forward+backward', got "
                f"{pass_name!r}"
            )
    rows = []
    for T in tokens:
        for pass_name in passes:
            names = [n for n in IMPLEMENTATIONS
                     if not (skip and skip(T, pass_name, n))]
            backward = pass_name != "forward"
            timings = time_implementations(
                T, batch_size, d_model, num_heads, backward=backward,
                repeats=repeats, names=names, device=device, dtype=dtype)
            seconds = {name: t.median for name, t in timings.items()}
            flops = attention_flops(batch_size, T, d_model, num_heads,
                                    causal=True)
            rows.append(dict(tokens=T, batch_size=batch_size,
                             d_model=d_model, num_heads=num_heads,
                             dtype=str(dtype).replace("torch.", ""),
                             pass_name=pass_name, timings=timings,
                             seconds=seconds,
                             flops=flops * (3 if backward else 1)))
            if progress:
                times = ", ".join(f"{n} {t.milliseconds(1)}"
                                  for n, t in timings.items())
                print(f"T={T:>5} {pass_name:<17} {times}", flush=True)
    return rows


class Table:
    """Rows shown as a table: HTML in a notebook, markdown with
    :meth:`to_markdown`; ``notes`` (e.g. a :func:`~attention_book.measure.timing_warning`)
    are shown under it.

    Its plain-text form only says how big it is, so a notebook's printed text
    stays the same from run to run although the measured numbers change.
    """

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[object]],
                 notes: Sequence[str] = ()):
        self.header = [str(cell) for cell in header]
        self.rows = [[str(cell) for cell in row] for row in rows]
        self.notes = [str(note) for note in notes if note]
        for row in self.rows:
            if len(row) != len(self.header):
                raise ValueError(
                    f"a row has {len(row)} cells but the header has "
                    f"{len(self.header)}: {row}; give every row one cell per "
                    "column"
                )

    def to_markdown(self) -> str:
        lines = ["| " + " | ".join(self.header) + " |",
                 "|" + "---|" * len(self.header)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        lines += [f"\n{note}" for note in self.notes]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(cell)}</th>" for cell in self.header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row)
            + "</tr>" for row in self.rows)
        notes = "".join(f'<p class="timing-note"><strong>{html.escape(note)}</strong></p>'
                        for note in self.notes)
        return (f'<table class="table"><thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>{notes}")

    def __repr__(self) -> str:
        return f"<Table: {len(self.rows)} rows x {len(self.header)} columns>"


def benchmark_table(rows: List[dict], quantity: str = "ms",
                    names: Optional[Sequence[str]] = None) -> Table:
    """The rows of :func:`sweep` as a :class:`Table` of one ``quantity``:
    ``"ms"`` (median milliseconds), ``"ratio"`` (time / the row's fastest),
    ``"spread"`` (the IQR as a percentage of the median) or ``"GFLOP/s"``
    (useful, causal FLOPs per second). A noisy timing is marked ⚠ and the
    table carries a warning (:func:`attention_book.measure.timing_warning`)."""
    if quantity not in QUANTITIES:
        raise ValueError(
            f"quantity must be one of {QUANTITIES}, got {quantity!r}"
        )
    chosen = _check_names(names)
    label = "useful GFLOP/s" if quantity == "GFLOP/s" else quantity
    header = [f"B x T ({label})", "pass"] + chosen
    table_rows = []
    all_timings = []
    for row in rows:
        fastest = min(row["seconds"].values())
        cells = []
        for name in chosen:
            seconds = row["seconds"].get(name)
            timing = row.get("timings", {}).get(name)
            if seconds is None:
                cells.append("skipped")
                continue
            if quantity == "ms":
                cell = f"{seconds * 1e3:.1f}"
            elif quantity == "ratio":
                cell = f"{seconds / fastest:.1f}x"
            elif quantity == "spread":
                cell = "-" if timing is None else f"{timing.spread:.0%}"
            else:
                cell = f"{row['flops'] / seconds / 1e9:.0f}"
            if timing is not None:
                all_timings.append(timing)
                cell += " ⚠" if timing.noisy else ""
            cells.append(cell)
        size = f"{row['batch_size']} x {row['tokens']}"
        table_rows.append([size, row["pass_name"]] + cells)
    notes = [timing_note(all_timings, "timings in this table")] if all_timings else []
    return Table(header, table_rows, notes=notes)


def plot_benchmark(rows: List[dict], axes=None, batch_size: Optional[int] = 1):
    """Time against ``T`` on log-log axes, one panel per pass, one line per
    implementation (the rows with ``batch_size``; ``None``: every row, as on a GPU where each
    length gets its own batch size). Returns the axes."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    passes = [p for p in ("forward", "forward+backward")
              if any(r["pass_name"] == p for r in rows)]
    if axes is None:
        _, axes = plt.subplots(1, len(passes), figsize=(5.5 * len(passes), 4),
                               squeeze=False)
        axes = axes[0]
    for ax, pass_name in zip(axes, passes):
        chosen = [r for r in rows if r["pass_name"] == pass_name
                  and (batch_size is None or r["batch_size"] == batch_size)]
        noisy = False
        for name in IMPLEMENTATIONS:
            chosen_rows = [r for r in chosen if name in r["seconds"]]
            if not chosen_rows:
                continue
            lengths = [r["tokens"] for r in chosen_rows]
            medians = [r["seconds"][name] * 1e3 for r in chosen_rows]
            timings = [r.get("timings", {}).get(name) for r in chosen_rows]
            if all(t is not None for t in timings):  # the IQR as an error bar
                below = [m - t.q1 * 1e3 for m, t in zip(medians, timings)]
                above = [t.q3 * 1e3 - m for m, t in zip(medians, timings)]
                ax.errorbar(lengths, medians, yerr=[below, above], marker="o",
                            capsize=3, label=name)
                noisy = noisy or any(t.noisy for t in timings)
            else:
                ax.plot(lengths, medians, marker="o", label=name)
        first = chosen[0]
        batches = sorted({r["batch_size"] for r in chosen})
        batch = (f"batch {batches[0]}" if len(batches) == 1
                 else f"{first['batch_size'] * first['tokens']:,} tokens per call")
        title = (f"{pass_name}, {batch}, d={first['d_model']}, "
                 f"{first['num_heads']} heads, {first['dtype']}")
        if noisy:
            title += "\n⚠ noisy timings: do not read ratios off this plot"
        ax.set(xscale="log", yscale="log", xlabel="sequence length T",
               ylabel="median milliseconds (measured)", title=title)
        lengths = sorted({r["tokens"] for r in chosen})
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return axes


def regime_notes(rows: List[dict], peak_flops: float, device=None,
                 dtype: torch.dtype = torch.float32) -> List[str]:
    """One :func:`~attention_book.measure.regime_note` per implementation at the last row of
    :func:`sweep`: its useful FLOPs against ``peak_flops`` (FLOP/s), and as the fixed cost the
    same implementation on 8 tokens (the same Python and launches, almost no arithmetic)."""
    last = rows[-1]
    tiny = time_implementations(8, 1, last["d_model"], last["num_heads"],
                                backward=last["pass_name"] != "forward", repeats=5,
                                names=list(last["seconds"]), device=device, dtype=dtype)
    where = f"{last['batch_size']} x {last['tokens']}, {last['pass_name']}"
    return [regime_note(f"{name} ({where})", seconds, last["flops"], peak_flops,
                        tiny[name].median)
            for name, seconds in last["seconds"].items()]


def reference_ratio_table(rows: List[dict], reference_table: dict, name: str = "reference",
                          names: Optional[Sequence[str]] = None) -> Table:
    """The rows of :func:`sweep` divided by a reference table of the same sweep (a table of
    :mod:`attention_book.reference` whose rows start with ``T`` or ``"B x T"`` and the pass,
    cells ``"median [q1-q3]"``): ``1.50x`` = this run took 1.5 times the reference's median."""
    chosen = _check_names(names)
    header = reference_table["header"]
    medians = {}
    for cells in reference_table["rows"]:
        for column, cell in zip(header[2:], cells[2:]):
            medians[(str(cells[0]), cells[1], column)] = float(str(cell).split()[0]) / 1e3
    table_rows = []
    for row in rows:
        size = f"{row['batch_size']} x {row['tokens']}"
        cells = []
        for implementation in chosen:
            seconds = row["seconds"].get(implementation)
            ref = (medians.get((size, row["pass_name"], implementation))
                   or medians.get((str(row["tokens"]), row["pass_name"], implementation)))
            cells.append("-" if seconds is None or not ref else f"{seconds / ref:.2f}x")
        table_rows.append([size, row["pass_name"]] + cells)
    return Table([f"B x T (time / {name})", "pass"] + chosen, table_rows)


def _back_to_back(fn: Callable[[], object], calls: int) -> Callable[[], None]:
    def block():
        for _ in range(calls):
            fn()
    return block


def fused_overhead(batch_size: int = 1, num_tokens: int = 8, d_model: int = 16,
                   num_heads: int = 2, backward: bool = False, repeats: int = 41,
                   device=None, dtype: torch.dtype = torch.float32,
                   block_seconds: float = 5e-4, timer: Optional[str] = None) -> dict:
    """Per-call seconds of :class:`~attention_book.fused.FusedMultiHeadAttention` and of
    :func:`~attention_book.fused.direct_sdpa` (the same projections and kernel, no module) on
    one ``(B, T, d_model)`` input with the same weights, and their ratio.

    Each repeat times a block of back-to-back calls (as many as take about ``block_seconds``, so
    the clock's own resolution and a GPU's final wait do not count), the two blocks interleaved.
    The ratio is that of the *fastest* blocks: on a busy machine the scheduler's time slices
    fall on one of two alternating blocks more than on the other (medians of 2-ms blocks swung
    between 0.3 and 2.9 on a loaded 2-core machine, where the fastest stayed within 2% of each
    other), and the fastest repeat is the best estimate of what the code itself costs. The
    default input is tiny, where the Python around the kernels is most of the time: the module's
    target is a ratio of at most 1.1. Returns ``{"fused": Timing, "direct": Timing, "calls": n,
    "ratio": best over best}`` (the Timings are per block of ``calls`` calls).
    """
    check.boolean("backward", backward)
    torch.manual_seed(0)
    fused = FusedMultiHeadAttention(d_model, d_model, num_tokens, 0.0, num_heads).to(device, dtype)
    fused.eval()
    x = torch.randn(batch_size, num_tokens, d_model, device=device).to(dtype)
    if backward:
        x.requires_grad_(True)
        calls = {"fused": lambda: fused(x).sum().backward(),
                 "direct": lambda: direct_sdpa(fused, x).sum().backward()}
    else:
        calls = {"fused": lambda: fused(x), "direct": lambda: direct_sdpa(fused, x)}
    with torch.set_grad_enabled(backward):
        once = time_samples(calls["direct"], repeats=5, warmup=3, device=device, timer=timer)
        per_block = max(1, min(10_000, int(block_seconds / max(once.median, 1e-7))))
        timings = compare({name: _back_to_back(fn, per_block) for name, fn in calls.items()},
                          repeats=repeats, warmup=1, device=device, timer=timer)
    return {"fused": timings["fused"], "direct": timings["direct"], "calls": per_block,
            "ratio": timings["fused"].best / timings["direct"].best}


#: the decoding variants of :func:`time_decoding`, from the chapter's readable code to a CUDA graph
DECODE_VARIANTS = {
    "KVCache, checks in every layer": "torch.cat grows the cache; each layer's forward checks "
                                      "its arguments",
    "StaticKVCache, checks in every layer": "preallocated cache, written in place",
    "StaticKVCache, checks once": "the checks run once per step, then each layer's unchecked "
                                  "step",
    "CUDA graph": "the whole fixed-shape step captured once, replayed with one launch (CUDA only)",
    "torch.compile reduce-overhead": "the fixed-shape step compiled with "
                                     "mode='reduce-overhead' (CUDA graphs inside; CUDA only)",
}


def time_decoding(width: int, num_heads: int, num_layers: int, cached_tokens: int,
                  variants: Optional[Sequence[str]] = None, repeats: int = 7,
                  device=None, dtype: torch.dtype = torch.float32, seed: int = 0,
                  timer: Optional[str] = None) -> dict:
    """Time one generation step (batch 1, one new token after ``cached_tokens`` cached ones)
    of an :class:`~attention_book.kv_cache.AttentionStack` in each of ``variants`` (names of
    :data:`DECODE_VARIANTS`; default: all that run on ``device``, without torch.compile).

    Every variant computes the same output for the same step (checked: ``"agree"``, within
    ``1e-4`` in float32 and ``0.1`` in half precision, whose rounding to 8 or 11 significant bits
    adds up over the layers; a wrong mask or cache misses by far more); each timed
    call undoes the step afterwards (``truncate``), so every repeat continues from
    ``cached_tokens``. Returns ``{"timings": {name: Timing}, "agree": bool,
    "no_cache": Timing}`` with the full forward pass over ``cached_tokens + 1`` tokens timed
    alongside, for comparison.
    """
    cuda = torch.device("cpu" if device is None else device).type == "cuda"
    if variants is None:
        variants = [name for name in DECODE_VARIANTS
                    if "compile" not in name and (cuda or name != "CUDA graph")]
    unknown = [name for name in variants if name not in DECODE_VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; choose from {list(DECODE_VARIANTS)}")
    needs_cuda = [name for name in variants if not cuda and name in
                  ("CUDA graph", "torch.compile reduce-overhead")]
    if needs_cuda:
        raise ValueError(f"{needs_cuda} need a CUDA device, got device={device!r}")
    check.positive_int("cached_tokens", cached_tokens)
    torch.manual_seed(seed)
    stack = AttentionStack(width, num_heads, num_layers, cached_tokens + 1).to(device, dtype)
    stack.eval()
    text = torch.randn(1, cached_tokens + 1, width, device=device).to(dtype)
    prompt, new = text[:, :cached_tokens], text[:, cached_tokens:]
    position = torch.tensor([cached_tokens], device=device)
    calls, outputs = {}, {}
    with torch.no_grad():
        expected = stack(text)[:, -1:]
        for name in variants:
            caches = stack.new_caches(static=not name.startswith("KVCache"))
            stack(prompt, caches)  # prefill: cache the prompt
            if name in ("KVCache, checks in every layer", "StaticKVCache, checks in every layer"):
                def call(caches=caches):
                    out = stack(new, caches)
                    for cache in caches:
                        cache.truncate(cached_tokens)
                    return out
            elif name == "StaticKVCache, checks once":
                def call(caches=caches):
                    out = stack.step(new, caches)
                    for cache in caches:
                        cache.truncate(cached_tokens)
                    return out
            elif name == "CUDA graph":
                replay = capture_step(lambda x, p, caches=caches: stack.step_at(x, caches, p),
                                      [new, position])

                def call(replay=replay):
                    return replay(new, position)
            else:  # torch.compile(mode="reduce-overhead") of the same fixed-shape step
                compiled = torch.compile(lambda x, p, caches=caches: stack.step_at(x, caches, p),
                                         mode="reduce-overhead")

                def call(compiled=compiled):
                    return compiled(new, position)
            outputs[name] = call().clone()
            calls[name] = call
        calls["no cache"] = lambda: stack(text)
        timings = compare(calls, repeats=repeats, warmup=2, device=device, timer=timer)
    tolerance = 1e-4 if dtype == torch.float32 else 1e-1
    agree = all(torch.allclose(out.float(), expected.float(), atol=tolerance, rtol=tolerance)
                for out in outputs.values())
    return {"timings": {name: timings[name] for name in variants}, "agree": agree,
            "no_cache": timings["no cache"]}
