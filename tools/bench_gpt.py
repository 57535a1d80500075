"""Chapter 9 over many seeds: how often do the chapter's findings hold?

    python tools/bench_gpt.py                 # seeds 0-4 -> _build/bench/gpt.md
    python tools/bench_gpt.py --seeds 10      # seeds 0-9
    python tools/bench_gpt.py --reference     # also print GPT_SEEDS for attention_book/reference.py

For each seed, on one CPU thread with the chapter's CPU recipe (``CPU_SETTINGS``, the seed
replaced): the GPT's held-out loss on *Persuasion* next to the bigram baseline and chapter 8's
model on the same batches; the best previous-token head and its score; and the pre-norm /
post-norm comparison of the chapter (4 blocks, learning rate 1e-2, no warm-up). Each seed takes
about two minutes on a quiet 2-core machine. The chapter prints the reference copy of this table
(``attention_book.reference.GPT_SEEDS``, pasted from ``--reference``) and quotes only it.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "bench" / "gpt.md"

import torch  # noqa: E402

from attention_book.corpus import CharTokenizer, load_novels, ngram_loss, train_and_held_out_text  # noqa: E402
from attention_book.gpt import CPU_SETTINGS, GPT, PRE_POST_SETTINGS, train_gpt  # noqa: E402
from attention_book.hello_world import HelloWorldModel  # noqa: E402


def previous_token_scores(model, windows) -> torch.Tensor:
    """(layers, heads): mean weight of query t on key t - 1, over the windows and t >= 1."""
    with torch.no_grad():
        _, weights = model(windows, return_weights=True)  # (L, B, H, T, T)
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(1, 3))


def word_start_scores(model, windows, tokenizer) -> torch.Tensor:
    """(layers, heads): mean weight of a character on the first character of its word, over the
    characters that are at least third in their word (so the word start is not the previous one)."""
    with torch.no_grad():
        _, weights = model(windows, return_weights=True)  # (L, B, H, T, T)
    separators = torch.tensor([tokenizer.encode(c)[0] for c in " \n"])
    is_gap = torch.isin(windows, separators)  # (B, T)
    B, T = windows.shape
    positions = torch.arange(T).expand(B, T)
    # start of the current word: one after the last separator at or before t (0 if none)
    last_gap = torch.where(is_gap, positions, torch.full_like(positions, -1)).cummax(dim=1).values
    start = (last_gap + 1).clamp(max=T - 1)  # (B, T); a separator itself is not chosen below
    chosen = (~is_gap) & (positions - start >= 2)
    gathered = weights.gather(-1, start[None, :, None, :, None].expand(weights.shape[0], B, weights.shape[2], T, 1))
    gathered = gathered.squeeze(-1)  # (L, B, H, T)
    mask = chosen[None, :, None, :].expand_as(gathered)
    return (gathered * mask).sum(dim=(1, 3)) / mask.sum(dim=(1, 3))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--reference", action="store_true",
                        help="also print the table as GPT_SEEDS for attention_book/reference.py")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    torch.set_num_threads(1)
    tokenizer = CharTokenizer("".join(load_novels().values()))
    train_text, held_out_text = train_and_held_out_text()
    train_ids, held_out_ids = tokenizer.encode_tensor(train_text), tokenizer.encode_tensor(held_out_text)
    V = tokenizer.n_vocab
    bigram = ngram_loss(train_ids, held_out_ids, V, order=2)
    unigram = ngram_loss(train_ids, held_out_ids, V, order=1)
    windows = held_out_ids[:16 * CPU_SETTINGS.context_length].view(16, -1)
    rows = []
    for seed in range(args.seeds):
        settings = CPU_SETTINGS.replace(seed=seed)
        torch.manual_seed(seed)
        gpt = GPT(settings.model_config(V))
        gpt_result = train_gpt(gpt, train_ids, held_out_ids, settings, progress=False)
        torch.manual_seed(seed)
        chapter8 = HelloWorldModel(n_embd=settings.d_model, context_length=settings.context_length, vocab_size=V)
        chapter8_result = train_gpt(chapter8, train_ids, held_out_ids, settings, progress=False)
        scores = previous_token_scores(gpt, windows)
        best = scores.argmax().item()
        layer, head = divmod(best, scores.shape[1])
        starts = word_start_scores(gpt, windows, tokenizer)
        pre_post = {}
        for pre_norm in (True, False):
            small = PRE_POST_SETTINGS.replace(seed=seed)
            torch.manual_seed(seed)
            model = GPT(small.model_config(V, pre_norm=pre_norm))
            pre_post[pre_norm] = train_gpt(model, train_ids, held_out_ids, small, progress=False).final_held_out_loss
        rows.append(dict(seed=seed, gpt=gpt_result.final_held_out_loss, chapter8=chapter8_result.final_held_out_loss,
                         seconds=gpt_result.seconds, layer=layer, head=head, score=scores.max().item(),
                         word_start=starts.max().item(),
                         pre=pre_post[True], post=pre_post[False]))
        print(rows[-1], flush=True)
    lines = [
        f"# Chapter 9 over {args.seeds} seeds",
        "",
        f"{datetime.date.today()}, torch {torch.__version__}, {platform.machine()}, 1 thread, "
        f"load average {os.getloadavg()[0]:.1f}. Bigram baseline: {bigram:.3f}.",
        "",
        "| seed | GPT held-out | chapter 8's model | GPT training s | best previous-token head | score "
        "| best word-start score | pre-norm | post-norm |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['seed']} | {r['gpt']:.3f} | {r['chapter8']:.3f} | {r['seconds']:.0f} | "
                     f"layer {r['layer']}, head {r['head']} | {r['score']:.2f} | {r['word_start']:.2f} | {r['pre']:.3f} "
                     f"| {r['post']:.3f} |")
    n = len(rows)
    lines += [
        "",
        f"- GPT below the bigram baseline: {sum(r['gpt'] < bigram for r in rows)} of {n}",
        f"- GPT below chapter 8's model: {sum(r['gpt'] < r['chapter8'] for r in rows)} of {n}",
        f"- a head with previous-token score above 0.5: {sum(r['score'] > 0.5 for r in rows)} of {n}",
        f"- that head in layer 0: {sum(r['layer'] == 0 for r in rows)} of {n}",
        f"- pre-norm below post-norm (lr 1e-2, no warm-up): {sum(r['pre'] < r['post'] for r in rows)} of {n}",
    ]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if args.reference:
        import pprint

        reference = {
            "command": "python tools/bench_gpt.py",
            "date": str(datetime.date.today()),
            "machine": (f"a {os.cpu_count()}-core {platform.machine()} CPU, {platform.system()}, Python "
                        f"{platform.python_version()}, torch {torch.__version__}, 1 thread, no GPU"),
            "load": f"load {load_before:.2f} before, {os.getloadavg()[0]:.2f} after; losses do not depend on it",
            "recipe": f"CPU_SETTINGS with seeds 0-{args.seeds - 1}; pre/post-norm: PRE_POST_SETTINGS",
            "unigram": round(unigram, 2), "bigram": round(bigram, 2),
            "rows": [dict(seed=r["seed"], gpt=round(r["gpt"], 2), chapter8=round(r["chapter8"], 2),
                          pre=round(r["pre"], 2), post=round(r["post"], 2), layer=r["layer"], head=r["head"],
                          score=round(r["score"], 2), seconds=round(r["seconds"])) for r in rows],
        }
        print("\nGPT_SEEDS = " + pprint.pformat(reference, width=100, sort_dicts=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
