"""Chapter 8: how many steps and how much time each recipe needs to predict all six last words.

    python tools/bench_training.py            # chapter's recipe and the source's, side by side
    python tools/bench_training.py --quick    # the source's recipe cut to 1,000 steps (a smoke run)

Both recipes train ``HelloWorldModel(n_embd=5)`` on the six "The X is a Y" sentences with AdamW,
seed 123, on the CPU, for their full number of steps (the chapter's: lr 3e-2, 300 steps; the
source article's: lr 1e-4, 10,000 steps). For each the table lists the first step at which all
six last words are right, the step from which they stay right, the final accuracy, the wall time
of the whole run and the time until the first 6/6. Printed as a markdown table and written to
``_build/bench/training.md``. Numbers are measured, never asserted.
"""

from __future__ import annotations

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

from attention_book import set_seed  # noqa: E402
from attention_book.hello_world import (  # noqa: E402
    CHAPTER_SETTINGS,
    SIX_SENTENCES,
    SOURCE_SETTINGS,
    HelloWorldModel,
    encode_texts,
    next_token_pairs,
    train,
)


def stays_correct_from(accuracies):
    """The step from which every later accuracy is 1.0, or None."""
    if not accuracies or accuracies[-1] != 1.0:
        return None
    step = len(accuracies) - 1
    while step > 0 and accuracies[step - 1] == 1.0:
        step -= 1
    return step


def run(name: str, settings: dict) -> list:
    settings = dict(settings)
    inputs, targets = next_token_pairs(encode_texts(SIX_SENTENCES))
    set_seed(settings.pop("seed"))
    model = HelloWorldModel(n_embd=settings.pop("n_embd"))
    result = train(model, inputs, targets, progress=False, description=name, **settings)
    first = result.first_step_all_correct()
    steps = len(result.losses) - 1
    per_step = result.seconds / steps
    correct = round(result.accuracies[-1] * len(SIX_SENTENCES))
    return [
        name,
        f"AdamW lr {settings['lr']:g}",
        f"{steps:,}",
        "never" if first is None else f"{first:,}",
        "never" if stays_correct_from(result.accuracies) is None else f"{stays_correct_from(result.accuracies):,}",
        f"{correct}/{len(SIX_SENTENCES)}",
        f"{result.losses[-1]:.3f}",
        f"{result.seconds:.1f}",
        "-" if first is None else f"{first * per_step:.1f}",
    ]


def main(argv) -> int:
    source = dict(SOURCE_SETTINGS)
    if "--quick" in argv:
        source["steps"] = 1_000
    rows = [run("chapter 8", CHAPTER_SETTINGS), run("source article", source)]
    header = ["recipe", "optimiser", "steps run", "first 6/6 at step", "6/6 from step", "final",
              "final loss", "wall time (s)", "time to first 6/6 (s)"]
    machine = (f"{platform.platform()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, "
               f"Python {platform.python_version()}, torch {torch.__version__}")
    lines = ["# Chapter 8: training to 100% last-word accuracy", "", f"Machine: {machine}", "",
             "HelloWorldModel(n_embd=5), six sentences, seed 123, full batch, CPU.", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += ["", "Step n = after n updates; the accuracy counts the last word of each sentence.",
              "Wall time is the whole loop (forward, loss, backward, update, bookkeeping); on a "
              "shared machine it varies with the load, the step counts do not."]
    text = "\n".join(lines) + "\n"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(text)
    print(f"written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
