"""Causal self-attention five ways, timed side by side (chapter 10 and ``tools/bench_scale.py``).

* :func:`attention_implementations` builds the five implementations of :data:`IMPLEMENTATIONS`
  with one set of weights;
* :func:`benchmark_attention` times them round-robin on one batch, :func:`sweep` over lengths;
* :func:`benchmark_table` shows one quantity (milliseconds, ratio to the fastest, or useful
  GFLOP/s) as a :class:`Table`, :func:`plot_benchmark` draws the times against ``T``.

The command-line harness (machine description, files, the full sweep) is
``tools/bench_scale.py``; this module holds what the chapter needs to run the same
measurements in a notebook, on a laptop or in Colab.
"""

from __future__ import annotations

import html
import statistics
from typing import Callable, List, Optional, Sequence

import torch
from torch import nn

from . import validation as check
from .cost import attention_flops
from .fused import FusedMultiHeadAttention, direct_sdpa
from .measure import time_call
from .multihead import MultiHeadAttention, MultiHeadAttentionWrapper

__all__ = [
    "IMPLEMENTATIONS",
    "attention_implementations",
    "benchmark_attention",
    "sweep",
    "Table",
    "benchmark_table",
    "plot_benchmark",
]

#: short name -> what it is, slowest first
IMPLEMENTATIONS = {
    "wrapper": "MultiHeadAttentionWrapper: one chapter-7 head after another",
    "MHA": "MultiHeadAttention: all heads at once, from scratch",
    "fused": "FusedMultiHeadAttention: the same with the fused kernel",
    "SDPA": "direct_sdpa: projections + fused kernel, no module",
    "nn.MHA": "torch.nn.MultiheadAttention with the same weights",
}

QUANTITIES = ("ms", "ratio", "GFLOP/s")


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


def benchmark_attention(num_tokens: int, batch_size: int = 1,
                        d_model: int = 768, num_heads: int = 12,
                        backward: bool = False, repeats: int = 3,
                        names: Optional[Sequence[str]] = None, device=None,
                        dtype: torch.dtype = torch.float32,
                        statistic: str = "min") -> dict:
    """Seconds of each implementation on one ``(B, T, d_model)`` batch:
    ``name -> seconds``, the best (or median) of ``repeats`` rounds.

    ``backward=True`` times forward + backward (gradients of all weights).
    Round robin: one call of each implementation per round, so a burst of
    load from another program slows all of them alike.
    """
    chosen = _check_names(names)
    if statistic not in ("median", "min"):
        raise ValueError(
            f"statistic must be 'median' or 'min', got {statistic!r}"
        )
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
        call()  # warm-up: allocations, kernel selection
    times: dict = {name: [] for name in chosen}
    for _ in range(repeats):
        for name, call in calls.items():
            times[name].append(time_call(call, repeats=1, warmup=0,
                                         device=device))
    reduce = statistics.median if statistic == "median" else min
    return {name: reduce(values) for name, values in times.items()}


def sweep(tokens: Sequence[int], batch_size: int = 1, d_model: int = 768,
          num_heads: int = 12,
          passes: Sequence[str] = ("forward", "forward+backward"),
          repeats: int = 3, device=None, dtype: torch.dtype = torch.float32,
          skip: Optional[Callable[[int, str, str], bool]] = None,
          progress: bool = False) -> List[dict]:
    """:func:`benchmark_attention` for every ``T`` in ``tokens`` and pass.

    ``skip(T, pass_name, name)`` may return True to leave a slow measurement
    out. Returns one dict per (T, pass): ``tokens, batch_size, d_model,
    num_heads, dtype, pass_name, seconds`` (``name -> seconds``) and
    ``flops``: the useful (causal) FLOPs of :func:`attention_flops`,
    forward x 3 for forward + backward.
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
            seconds = benchmark_attention(
                T, batch_size, d_model, num_heads, backward=backward,
                repeats=repeats, names=names, device=device, dtype=dtype)
            flops = attention_flops(batch_size, T, d_model, num_heads,
                                    causal=True)
            rows.append(dict(tokens=T, batch_size=batch_size,
                             d_model=d_model, num_heads=num_heads,
                             dtype=str(dtype).replace("torch.", ""),
                             pass_name=pass_name, seconds=seconds,
                             flops=flops * (3 if backward else 1)))
            if progress:
                times = ", ".join(f"{n} {s * 1e3:.1f} ms"
                                  for n, s in seconds.items())
                print(f"T={T:>5} {pass_name:<17} {times}", flush=True)
    return rows


class Table:
    """Rows shown as a table: HTML in a notebook, markdown with
    :meth:`to_markdown`.

    Its plain-text form only says how big it is, so a notebook's printed text
    stays the same from run to run although the measured numbers change.
    """

    def __init__(self, header: Sequence[str], rows: Sequence[Sequence[object]]):
        self.header = [str(cell) for cell in header]
        self.rows = [[str(cell) for cell in row] for row in rows]
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
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(cell)}</th>" for cell in self.header)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row)
            + "</tr>" for row in self.rows)
        return (f'<table class="table"><thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>")

    def __repr__(self) -> str:
        return f"<Table: {len(self.rows)} rows x {len(self.header)} columns>"


def benchmark_table(rows: List[dict], quantity: str = "ms",
                    names: Optional[Sequence[str]] = None) -> Table:
    """The rows of :func:`sweep` as a :class:`Table` of one ``quantity``:
    ``"ms"`` (milliseconds), ``"ratio"`` (time / the row's fastest) or
    ``"GFLOP/s"`` (useful, causal FLOPs per second)."""
    if quantity not in QUANTITIES:
        raise ValueError(
            f"quantity must be one of {QUANTITIES}, got {quantity!r}"
        )
    chosen = _check_names(names)
    label = "useful GFLOP/s" if quantity == "GFLOP/s" else quantity
    header = [f"B x T ({label})", "pass"] + chosen
    table_rows = []
    for row in rows:
        fastest = min(row["seconds"].values())
        cells = []
        for name in chosen:
            seconds = row["seconds"].get(name)
            if seconds is None:
                cells.append("skipped")
            elif quantity == "ms":
                cells.append(f"{seconds * 1e3:.1f}")
            elif quantity == "ratio":
                cells.append(f"{seconds / fastest:.1f}x")
            else:
                cells.append(f"{row['flops'] / seconds / 1e9:.0f}")
        size = f"{row['batch_size']} x {row['tokens']}"
        table_rows.append([size, row["pass_name"]] + cells)
    return Table(header, table_rows)


def plot_benchmark(rows: List[dict], axes=None, batch_size: int = 1):
    """Time against ``T`` on log-log axes, one panel per pass, one line per
    implementation (the rows with ``batch_size``). Returns the axes."""
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
                  and r["batch_size"] == batch_size]
        for name in IMPLEMENTATIONS:
            points = [(r["tokens"], r["seconds"][name] * 1e3)
                      for r in chosen if name in r["seconds"]]
            if points:
                ax.plot(*zip(*points), marker="o", label=name)
        first = chosen[0]
        ax.set(xscale="log", yscale="log", xlabel="sequence length T",
               ylabel="milliseconds (measured)",
               title=f"{pass_name}, batch {batch_size}, d={first['d_model']}, "
                     f"{first['num_heads']} heads, {first['dtype']}")
        lengths = sorted({r["tokens"] for r in chosen})
        ax.set_xticks(lengths, [str(t) for t in lengths])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return axes
