"""Reference measurements: numbers measured once, with ``make bench``, on a named machine, dated.

A chapter that measures while it runs gets different times on every machine and on every run
(another program competing for the cores, a free Colab GPU shared with others). Its prose must
not quote those. Next to its own live measurements it prints these *reference* values instead:
measured on a machine that is named, on a date that is given, at a load that is recorded, with
the command that repeats the measurement. Counts (steps, FLOPs, bytes) do not depend on the
load; times do, and are given only with the load they were measured at.

* :data:`TRAINING_SEEDS` - chapter 8: how often each recipe reaches 6/6 over 20 seeds, and
  :func:`training_seeds_text`;
* :data:`SCALE_CPU` - chapter 10: the chapter's timings measured on a quiet machine, and
  :func:`scale_text`.
"""

from __future__ import annotations

from typing import List

__all__ = ["TRAINING_SEEDS", "training_seeds_text", "SCALE_CPU", "scale_text"]

#: chapter 8, ``python tools/bench_training.py`` (part of ``make bench``): seeds 0-19, 300 updates
#: each. Per recipe: seeds with 6/6 after the last update, seeds that reached 6/6 at some update,
#: the median and largest number of updates to the first 6/6, seeds whose greedy generation
#: completes all six sentences.
TRAINING_SEEDS = {
    "command": "python tools/bench_training.py",
    "date": "2026-11-25",
    "machine": "a 2-core x86-64 CPU (Linux, Python 3.11, torch 2.13.0+cpu, 1 torch thread)",
    "load": "2.8 at the start; step counts do not depend on the load",
    "seeds": 20,
    "recipes": {
        "both changes (the chapter's recipe)": dict(final=20, reached=20, median=90, largest=147,
                                                    generates=17),
        "slower query/key learning alone": dict(final=18, reached=18, median=103, largest=239,
                                                generates=15),
        "zero queries alone": dict(final=6, reached=6, median=77, largest=161, generates=0),
        "neither (the first edition)": dict(final=7, reached=7, median=76, largest=237,
                                            generates=2),
    },
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
    return "\n".join(lines)


#: chapter 10, ``python tools/bench_scale.py --reference``: the chapter's own timing cells with
#: more repeats, on a quiet machine. Medians in milliseconds with the interquartile range.
SCALE_CPU: dict = {
    "command": "python tools/bench_scale.py --reference",
    "date": None,  # filled in by the measurement (see the tool's output)
    "machine": None,
    "load": None,
    "tables": {},
}


def scale_text() -> str:
    """:data:`SCALE_CPU` as the lines a notebook prints (one block per table)."""
    ref = SCALE_CPU
    if not ref["tables"]:
        return "(no reference measurement recorded yet: run " + ref["command"] + ")"
    lines: List[str] = [f"Measured {ref['date']} with {ref['command']} on {ref['machine']};",
                        f"load {ref['load']}."]
    for title, (header, rows) in ref["tables"].items():
        widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
        lines += ["", title]
        for row in (header, *rows):
            lines.append("  ".join(str(cell).rjust(width) for cell, width in zip(row, widths)))
    return "\n".join(lines)
