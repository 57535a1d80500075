"""Chapter 8: how often each recipe predicts all six last words, over many seeds, and how fast.

    python tools/bench_training.py                  # seeds 0-19: the chapter's recipe, each of its two
                                                    # changes alone, the first edition's recipe
    python tools/bench_training.py --seeds 5        # seeds 0-4 (a smoke run)
    python tools/bench_training.py --only chapter   # one recipe
    python tools/bench_training.py --source         # also the source article's recipe (seed 123, 75 s)

Each recipe trains ``HelloWorldModel(n_embd=5)`` on the six "The X is a Y" sentences (full batch,
CPU) once per seed for its full number of steps. Per seed the table lists the first step at which
all six last words are right, the time until then, whether all six are still right after the last
step, the final loss, and two checks on the trained model: greedy generation from "The <noun>"
completes all six sentences, and forcing every last attention row onto " is" leaves at most one
sentence right (the output layer sees nothing but the attention output). The rate is the number
of seeds with 6/6 after the last step. Written to ``_build/bench/training.md``. Numbers are
measured, never asserted; on a shared machine the times vary with the load, the steps do not.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "bench" / "training.md"
SHARED_TIKTOKEN = ROOT.parent / "shared" / "tiktoken-cache"
if "TIKTOKEN_CACHE_DIR" not in os.environ and SHARED_TIKTOKEN.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(SHARED_TIKTOKEN)

import torch  # noqa: E402

from attention_book.hello_world import (  # noqa: E402
    CHAPTER_SETTINGS,
    FIRST_EDITION_SETTINGS,
    SIX_SENTENCES,
    SOURCE_SETTINGS,
    encode_texts,
    generate,
    get_tokenizer,
    next_token_pairs,
    train_recipe,
)

RECIPES = {
    "chapter": ("chapter 8 (zero queries, attention lr x0.1)", CHAPTER_SETTINGS),
    # the ablation of the chapter's recipe: each of its two changes alone
    "slow-attention-only": ("slower query/key learning alone (default init, attention lr x0.1)",
                            dict(CHAPTER_SETTINGS, zero_queries=False)),
    "zero-queries-only": ("zero queries alone (one lr for all parameters)",
                          dict(CHAPTER_SETTINGS, attention_lr_factor=1.0)),
    "first-edition": ("first edition (default init, one lr)", FIRST_EDITION_SETTINGS),
}


def forced_onto_is(model, inputs, targets) -> int:
    """How many last words are right when every last row puts all its weight on " is" (position 2)."""
    with torch.no_grad():
        _, seen = model(inputs, return_intermediates=True)
        context = seen["values"][:, 2, :]  # (B, C): a one-hot row on position 2 picks its value
        predicted = model.out(context).argmax(dim=-1)  # (B,)
    return int((predicted == targets[:, -1]).sum())


def noun_rows(model, inputs) -> int:
    """In how many sentences the last row gives the noun (position 1) more weight than any other token."""
    with torch.no_grad():
        _, seen = model(inputs, return_intermediates=True)
    return int((seen["weights"][:, -1, :].argmax(dim=-1) == 1).sum())


def run_seed(settings: dict, seed: int, inputs, targets, prompts) -> dict:
    model, result = train_recipe(settings, inputs, targets, seed=seed, progress=False)
    steps = len(result.losses) - 1
    first = result.first_step_all_correct()
    tokenizer = get_tokenizer()
    completed = [tokenizer.decode(row) for row in generate(model, prompts, max_new_tokens=3).tolist()]
    return {
        "seed": seed,
        "first": first,
        "time_to_first": None if first is None else result.seconds * first / steps,
        "loss_at_first": None if first is None else result.losses[first],
        "final": round(result.accuracies[-1] * len(SIX_SENTENCES)),
        "loss": result.losses[-1],
        "seconds": result.seconds,
        "generates": completed == SIX_SENTENCES,
        "forced": forced_onto_is(model, inputs, targets),
        "noun_rows": noun_rows(model, inputs),
    }


def table(name: str, settings: dict, rows: list) -> list:
    n = len(rows)
    successes = sum(row["final"] == len(SIX_SENTENCES) for row in rows)
    firsts = [row["first"] for row in rows if row["first"] is not None]
    times = [row["time_to_first"] for row in rows if row["time_to_first"] is not None]
    lines = [f"## {name}", "",
             f"settings: {dict((k, v) for k, v in settings.items() if k != 'seed')}", "",
             f"**6/6 after the last step: {successes} of {n} seeds**; reached 6/6 at some step: "
             f"{len(firsts)} of {n}; steps to the first 6/6: "
             + (f"median {sorted(firsts)[len(firsts) // 2]}, max {max(firsts)}" if firsts else "-")
             + "; time to the first 6/6: "
             + (f"max {max(times):.1f} s" if times else "-")
             + f"; generation completes all six sentences: {sum(r['generates'] for r in rows)} of {n}; "
             f"forcing the last rows onto ' is' leaves at most 1 right: "
             f"{sum(r['forced'] <= 1 for r in rows)} of {n}; the last row's largest weight on the "
             f"noun in all six sentences: {sum(r['noun_rows'] == 6 for r in rows)} of {n}.", ""]
    header = ["seed", "first 6/6 at step", "loss then", "time to first 6/6 (s)", "final", "final loss",
              "wall time (s)", "generates all six", "right with rows forced onto ' is'",
              "last row's largest weight on the noun"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    for row in rows:
        lines.append("| " + " | ".join([
            str(row["seed"]),
            "never" if row["first"] is None else str(row["first"]),
            "-" if row["loss_at_first"] is None else f"{row['loss_at_first']:.3f}",
            "-" if row["time_to_first"] is None else f"{row['time_to_first']:.1f}",
            f"{row['final']}/{len(SIX_SENTENCES)}",
            f"{row['loss']:.3f}",
            f"{row['seconds']:.1f}",
            "yes" if row["generates"] else "no",
            f"{row['forced']}/{len(SIX_SENTENCES)}",
            f"{row['noun_rows']}/{len(SIX_SENTENCES)}",
        ]) + " |")
    return lines + [""]


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0 .. N-1 (default 20)")
    parser.add_argument("--only", choices=sorted(RECIPES), help="measure one recipe only")
    parser.add_argument("--source", action="store_true", help="also the source's recipe (seed 123)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: the model is tiny, threads only fight for the cores)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"markdown file (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, got {args.threads}")
    torch.set_num_threads(args.threads)

    inputs, targets = next_token_pairs(encode_texts(SIX_SENTENCES))
    prompts = encode_texts([" ".join(sentence.split()[:2]) for sentence in SIX_SENTENCES])
    machine = (f"{platform.platform()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, "
               f"Python {platform.python_version()}, torch {torch.__version__}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    lines = ["# Chapter 8: how often training reaches 6/6, over seeds", "",
             f"Measured {datetime.date.today().isoformat()} on: {machine}; load average at the "
             f"start {load:.1f}.", "",
             "HelloWorldModel(n_embd=5), the six sentences, full batch, CPU. 'final' counts the last "
             "words right after the last step. Step n = after n updates.", ""]
    names = [args.only] if args.only else list(RECIPES)
    for key in names:
        name, settings = RECIPES[key]
        rows = []
        for seed in range(args.seeds):
            rows.append(run_seed(settings, seed, inputs, targets, prompts))
            print(f"{key} seed {seed}: {rows[-1]}", flush=True)
        lines += table(name, settings, rows)
    if args.source:
        rows = [run_seed(SOURCE_SETTINGS, SOURCE_SETTINGS["seed"], inputs, targets, prompts)]
        lines += table("source article (seed 123 only)", SOURCE_SETTINGS, rows)
    lines += ["Wall time is the whole loop (forward, loss, backward, update, bookkeeping); the time "
              "to the first 6/6 is the wall time times the fraction of the steps. On a shared "
              "machine it grows with the load average; the step counts do not change."]
    text = "\n".join(lines) + "\n"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
