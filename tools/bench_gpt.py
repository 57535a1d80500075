"""Chapter 9's measurements: the recipe's speed on this device, and the chapter's findings over seeds.

    python tools/bench_gpt.py                      # speed: tokens/s and MFU of the chapter's recipes,
                                                   # cached generation -> _build/bench/gpt.md
    python tools/bench_gpt.py --study              # seeds 0-4: held-out losses, heads, pre-/post-norm
    python tools/bench_gpt.py --study --seeds 3 --reference   # and print the reference tables
    python tools/bench_gpt.py --speed --reference  # print the speed table for attention_book/reference.py
    python tools/bench_gpt.py --gpu-check OUTDIR   # the GPU run: JSON + Markdown in OUTDIR (~1-2 min on an H100)
    DRY=1 python tools/bench_gpt.py --gpu-check OUTDIR   # the same with tiny sizes on a CPU (a dry run)

**Speed** (the default, part of ``make bench``): the chapter's recipe for this device
(``settings_for``) trained for a few steps in each variant, tokens per second after the first
step and the model FLOPs utilisation (MFU: ``flops_per_token`` x tokens/s over the matrix-product
ceiling measured here in the same dtype); on a CPU float32 with the book's core and with the fused
kernel, on CUDA float32, TF32, bfloat16 (or float16) autocast, + fused attention, + torch.compile,
and float16 with its gradient scaler. Then generation with and without the KV cache (greedy, the
context filled; the same tokens both ways, checked), tokens per second and the speed-up.

**Study** (``--study``): for each seed the chapter's CPU recipe (``CPU_SETTINGS``, the seed
replaced) on one CPU thread: the GPT's and chapter 8's held-out loss on the *whole* of
*Persuasion* (every window: no sampling error), the best previous-token head, and the
pre-/post-norm runs of ``NORM_RUNS``. About 3 minutes per seed on a quiet 2-core machine. The
chapter prints the reference copy (``attention_book.reference``, pasted from ``--reference``).

**GPU check** (``--gpu-check OUTDIR``): the chapter-9 measurements of one GPU session: the
matmul ceilings, the speed variants above with 30 timed steps each, a mixed-precision convergence
check (the GPU recipe without dropout for 300 steps in float32, bfloat16 and float16 with a
gradient scaler: held-out loss with an error bar, non-finite losses, the final loss scale), and
cached against uncached generation at batch 1 and 16. Writes ``gpt_gpu_check.json`` and
``gpt_gpu_check.md``; stops adding parts when ``BUDGET_S`` (default 140) seconds are spent.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "_build" / "bench"

import torch  # noqa: E402

from attention_book.corpus import CharTokenizer, load_novels, ngram_loss, train_and_held_out_text  # noqa: E402
from attention_book.gpt import GPT  # noqa: E402
from attention_book.gpt_accounting import flops_per_token, matmul_ceiling  # noqa: E402
from attention_book.gpt_training import (  # noqa: E402
    CPU_SETTINGS, GPU_SETTINGS, NORM_RUNS, PRE_POST_SETTINGS, settings_for, train_gpt)
from attention_book.hello_world import HelloWorldModel  # noqa: E402
from attention_book.sampling import generate  # noqa: E402
from attention_book.training import choose_precision, held_out_losses, mean_with_error  # noqa: E402

DTYPE_OF = {"float32": torch.float32, "tf32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def corpus():
    tokenizer = CharTokenizer("".join(load_novels().values()))
    train_text, held_out_text = train_and_held_out_text()
    return tokenizer, tokenizer.encode_tensor(train_text), tokenizer.encode_tensor(held_out_text)


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        major, minor = torch.cuda.get_device_capability(device)
        return (f"{name} (compute capability {major}.{minor}), torch {torch.__version__}, "
                f"Python {platform.python_version()}")
    return (f"a {os.cpu_count()}-core {platform.machine()} CPU, {platform.system()}, Python "
            f"{platform.python_version()}, torch {torch.__version__}, {torch.get_num_threads()} thread(s), no GPU")


def load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


# ----------------------------------------------------------------------------------------------- speed
def speed_variants(device: torch.device):
    """``(name, settings changes)`` of the training variants measured on this device."""
    if device.type != "cuda":
        return [("float32, book's core attention", dict(precision="float32", fused_attention=False)),
                ("float32, fused attention (the recipe)", dict(precision="float32", fused_attention=True))]
    auto = choose_precision(device).name  # bfloat16 from compute capability 8.0, float16 below
    return [
        ("float32, book's core attention (first edition)", dict(precision="float32", fused_attention=False)),
        ("TF32, core attention", dict(precision="tf32", fused_attention=False)),
        (f"{auto} autocast, core attention", dict(precision=auto, fused_attention=False)),
        (f"{auto} autocast + fused attention (the recipe)", dict(precision=auto, fused_attention=True)),
        (f"{auto} + fused + torch.compile", dict(precision=auto, fused_attention=True, compile=True)),
        ("float16 + GradScaler + fused (the T4 path)", dict(precision="float16", fused_attention=True)),
    ]


def measure_training(settings, vocab_size, train_ids, held_out_ids, device, timed_steps, ceilings):
    """One variant: ``timed_steps`` steps after the first through ``train_gpt``; tokens/s and MFU."""
    settings = settings.replace(steps=timed_steps + 1, warmup=1, eval_every=10 ** 6, eval_windows=1)
    torch.manual_seed(settings.seed)
    model = GPT(settings.model_config(vocab_size)).to(device)
    result = train_gpt(model, train_ids, held_out_ids, settings, progress=False)
    precision = choose_precision(device, settings.precision)
    key = (precision.name, precision.tf32)
    if key not in ceilings:
        ceilings[key] = matmul_ceiling(device, DTYPE_OF[precision.name], tf32=precision.tf32)
    flops = flops_per_token(model.config)["total"]
    achieved = result.tokens_per_second * flops
    row = dict(precision=precision.name, fused=settings.fused_attention, compile=settings.compile,
               tokens_per_second=round(result.tokens_per_second),
               ms_per_step=round(1e3 * settings.tokens_per_step() / result.tokens_per_second, 2),
               recipe_seconds=round(settings_for(device).steps * settings.tokens_per_step() / result.tokens_per_second,
                                    1),
               tflops=round(achieved / 1e12, 3), ceiling_tflops=round(ceilings[key] / 1e12, 3),
               mfu=round(achieved / ceilings[key], 4), first_step_seconds=round(result.first_step_seconds, 2),
               last_loss=round(result.train_losses[-1], 3))
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def measure_generation(settings, vocab_size, device, batch_size=1, repeats=3, autocast_dtype=None):
    """Greedy generation filling the context, with and without the cache: tokens/s and the speed-up."""
    torch.manual_seed(settings.seed)
    model = GPT(settings.replace(dropout=0.0).model_config(vocab_size)).to(device).eval()
    prompt = torch.randint(0, vocab_size, (batch_size, 8), generator=torch.Generator().manual_seed(0)).to(device)
    new = settings.context_length - prompt.shape[1]
    times, outputs = {False: [], True: []}, {}
    for _ in range(repeats):
        for use_cache in (False, True):
            if device.type == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            precision = (torch.autocast(device.type, dtype=autocast_dtype) if autocast_dtype is not None
                         else contextlib.nullcontext())
            with precision:
                outputs[use_cache] = generate(model, prompt, new, temperature=0, use_cache=use_cache)
            if device.type == "cuda":
                torch.cuda.synchronize()
            times[use_cache].append(time.perf_counter() - start)
    plain, cached = min(times[False]), min(times[True])
    return dict(batch_size=batch_size, new_tokens=new, dtype=str(autocast_dtype or torch.float32).split(".")[-1],
                uncached_tokens_per_second=round(batch_size * new / plain, 1),
                cached_tokens_per_second=round(batch_size * new / cached, 1),
                speedup=round(plain / cached, 2), same_tokens=bool(torch.equal(outputs[False], outputs[True])))


def speed(device: torch.device, timed_steps: int, settings=None, deadline=float("inf"), log=print) -> dict:
    """Training variants and generation on ``device``: the rows ``make bench`` and the GPU check print."""
    tokenizer, train_ids, held_out_ids = corpus()
    settings = settings or settings_for(device)
    ceilings: dict = {}
    rows = {}
    for name, changes in speed_variants(device):
        if time.time() > deadline:
            rows[name] = "skipped (time budget)"
            continue
        try:
            rows[name] = measure_training(settings.replace(**changes), tokenizer.n_vocab, train_ids, held_out_ids,
                                          device, timed_steps, ceilings)
        except Exception as error:  # noqa: BLE001 - e.g. torch.compile without a compiler: report, go on
            rows[name] = f"failed: {type(error).__name__}: {str(error).strip().splitlines()[0][:160]}"
        log(name, rows[name])
    generation = []
    batches = (1, 16) if device.type == "cuda" else (1,)
    autocast = choose_precision(device).autocast_dtype
    for batch_size in batches:
        for dtype in ([None, autocast] if autocast is not None else [None]):
            if time.time() > deadline:
                break
            generation.append(measure_generation(settings, tokenizer.n_vocab, device, batch_size,
                                                 autocast_dtype=dtype))
            log("generation", generation[-1])
    return dict(settings=repr(settings), timed_steps=timed_steps, training=rows, generation=generation,
                ceilings_tflops={f"{name}{' (TF32)' if tf32 else ''}": round(value / 1e12, 3)
                                 for (name, tf32), value in ceilings.items()})


def speed_markdown(result: dict, title: str) -> str:
    lines = [f"# {title}", "", f"{result['date']}, {result['machine']}, load {result['load']}.", "",
             f"Recipe: `{result['settings']}`; {result['timed_steps']} timed steps after the first per variant.",
             "MFU: (6N + attention) FLOPs per token x tokens/s over the matrix-product ceiling measured here "
             "in the same dtype.", "",
             "| variant | tokens/s | ms/step | recipe's steps (s) | TFLOP/s | ceiling TFLOP/s | MFU | first step (s) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, row in result["training"].items():
        if isinstance(row, str):
            lines.append(f"| {name} | {row} | | | | | | |")
            continue
        lines.append(f"| {name} | {row['tokens_per_second']:,} | {row['ms_per_step']} | {row['recipe_seconds']} | "
                     f"{row['tflops']} | {row['ceiling_tflops']} | {row['mfu']:.1%} | {row['first_step_seconds']} |")
    lines += ["", "| generation | dtype | new tokens | uncached tokens/s | cached tokens/s | speed-up | same tokens |",
              "|---|---|---|---|---|---|---|"]
    for row in result["generation"]:
        lines.append(f"| batch {row['batch_size']} | {row['dtype']} | {row['new_tokens']} | "
                     f"{row['uncached_tokens_per_second']:,} | {row['cached_tokens_per_second']:,} | "
                     f"{row['speedup']}x | {'yes' if row['same_tokens'] else 'NO'} |")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- study
def previous_token_scores(model, windows) -> torch.Tensor:
    """(layers, heads): mean weight of query t on key t - 1, over the windows and t >= 1."""
    with torch.no_grad():
        _, weights = model(windows, return_weights=True)  # (L, B, H, T, T)
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(1, 3))


def study(seeds: int, log=print) -> dict:
    """The chapter's CPU recipe and the norm runs over ``seeds`` seeds (one CPU thread)."""
    torch.set_num_threads(1)
    tokenizer, train_ids, held_out_ids = corpus()
    V = tokenizer.n_vocab
    T = CPU_SETTINGS.context_length
    windows = held_out_ids[:16 * T].view(16, -1)
    rows, norm = [], {label: [] for label, *_ in NORM_RUNS}
    for seed in range(seeds):
        settings = CPU_SETTINGS.replace(seed=seed)
        torch.manual_seed(seed)
        gpt = GPT(settings.model_config(V))
        gpt_result = train_gpt(gpt, train_ids, held_out_ids, settings, progress=False)
        torch.manual_seed(seed)
        chapter8 = HelloWorldModel(n_embd=settings.d_model, context_length=T, vocab_size=V)
        train_gpt(chapter8, train_ids, held_out_ids, settings, progress=False)
        scores = previous_token_scores(gpt, windows)
        layer, head = divmod(scores.argmax().item(), scores.shape[1])
        row = dict(seed=seed, gpt=held_out_losses(gpt, held_out_ids, T).double().mean().item(),
                   chapter8=held_out_losses(chapter8, held_out_ids, T).double().mean().item(),
                   gpt_128=gpt_result.final_held_out_loss, layer=layer, head=head, score=scores.max().item(),
                   seconds=gpt_result.seconds, tokens_per_second=gpt_result.tokens_per_second)
        for label, pre_norm, lr, warmup in NORM_RUNS:
            small = PRE_POST_SETTINGS.replace(seed=seed, lr=lr, warmup=warmup)
            torch.manual_seed(seed)
            model = GPT(small.model_config(V, pre_norm=pre_norm))
            train_gpt(model, train_ids, held_out_ids, small, progress=False)
            norm[label].append(held_out_losses(model, held_out_ids, small.context_length).double().mean().item())
        rows.append(row)
        log(row, {label: round(values[-1], 3) for label, values in norm.items()})
    return dict(rows=rows, norm=norm, unigram=ngram_loss(train_ids, held_out_ids, V, order=1),
                bigram=ngram_loss(train_ids, held_out_ids, V, order=2))


def study_markdown(result: dict, seeds: int) -> str:
    rows, bigram = result["rows"], result["bigram"]
    lines = [f"# Chapter 9 over {seeds} seeds", "", f"{result['date']}, {result['machine']}, load {result['load']}.",
             f"Held-out losses on all of Persuasion (nats per character). Unigram {result['unigram']:.3f}, "
             f"bigram {bigram:.3f}.", "",
             "| seed | GPT | GPT (128 windows) | chapter 8's model | best previous-token head | score | GPT s "
             "| GPT tokens/s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['seed']} | {r['gpt']:.3f} | {r['gpt_128']:.3f} | {r['chapter8']:.3f} | "
                     f"layer {r['layer']}, head {r['head']} | {r['score']:.2f} | {r['seconds']:.0f} | "
                     f"{r['tokens_per_second']:,.0f} |")
    lines += ["", "| pre-/post-norm run (PRE_POST_SETTINGS) | " + " | ".join(f"seed {r['seed']}" for r in rows) + " |",
              "|---|" + "---|" * len(rows)]
    for label, values in result["norm"].items():
        lines.append(f"| {label} | " + " | ".join(f"{v:.3f}" for v in values) + " |")
    return "\n".join(lines) + "\n"


def study_reference(result: dict, seeds: int) -> str:
    """``GPT_SEEDS`` and ``NORM_SEEDS`` as Python, for attention_book/reference.py."""
    import pprint

    command = f"python tools/bench_gpt.py --study --seeds {seeds} --reference"
    load_text = f"load {result['load_before']:.2f} before, {result['load']:.2f} after; losses do not depend on it"
    gpt_seeds = {
        "command": command, "date": result["date"], "machine": result["machine"], "load": load_text,
        "recipe": f"CPU_SETTINGS with seeds 0-{seeds - 1}; held-out loss on all of Persuasion",
        "unigram": round(result["unigram"], 3), "bigram": round(result["bigram"], 3),
        "rows": [dict(seed=r["seed"], gpt=round(r["gpt"], 3), chapter8=round(r["chapter8"], 3), layer=r["layer"],
                      head=r["head"], score=round(r["score"], 2), seconds=round(r["seconds"]))
                 for r in result["rows"]],
    }
    norm_seeds = {
        "command": command, "date": result["date"], "machine": result["machine"], "load": load_text,
        "recipe": "PRE_POST_SETTINGS (4 blocks, width 32, 300 steps) with each run's learning rate and warm-up",
        "unigram": round(result["unigram"], 3),
        "runs": {label: [round(v, 3) for v in values] for label, values in result["norm"].items()},
    }
    return ("GPT_SEEDS: dict = " + pprint.pformat(gpt_seeds, width=110, sort_dicts=False) + "\n\n"
            + "NORM_SEEDS: dict = " + pprint.pformat(norm_seeds, width=110, sort_dicts=False) + "\n")


# ----------------------------------------------------------------------------------------------- GPU check
def convergence(device, settings, steps, deadline, log=print) -> dict:
    """The recipe's model without dropout, ``steps`` steps in float32, bfloat16 (if supported) and
    float16 with a gradient scaler: held-out loss on 64 windows with its error bar."""
    tokenizer, train_ids, held_out_ids = corpus()
    base = settings.replace(dropout=0.0, steps=steps, warmup=max(1, steps // 6), eval_every=10 ** 6,
                            eval_windows=64)
    runs = [("float32, fused", "float32")]
    if device.type != "cuda" or torch.cuda.get_device_capability(device) >= (8, 0):
        runs.append(("bfloat16 autocast, fused", "bfloat16"))
    runs.append(("float16 autocast + GradScaler, fused", "float16"))
    results, reference_losses = {}, None
    for name, precision in runs:
        if time.time() > deadline:
            results[name] = "skipped (time budget)"
            continue
        torch.manual_seed(base.seed)
        model = GPT(base.replace(precision=precision).model_config(tokenizer.n_vocab)).to(device)
        scaler = torch.amp.GradScaler(device.type) if precision == "float16" else None
        run = train_gpt(model, train_ids, held_out_ids, base.replace(precision=precision), progress=False,
                        grad_scaler=scaler)
        per_window = held_out_losses(model, held_out_ids, base.context_length, max_windows=64)
        mean, error = mean_with_error(per_window)
        losses = torch.tensor(run.train_losses)
        row = dict(held_out=round(mean, 4), error=round(error, 4), train_last_50=round(losses[-50:].mean().item(), 4),
                   nonfinite=int((~torch.isfinite(losses)).sum()), seconds=round(run.seconds, 1),
                   final_scale=scaler.get_scale() if scaler is not None else None)
        if reference_losses is None:
            reference_losses = per_window
        else:
            difference, difference_error = mean_with_error(per_window - reference_losses)
            row.update(minus_float32=round(difference, 4), minus_float32_error=round(difference_error, 4))
        results[name] = row
        log("convergence", name, row)
    return dict(steps=steps, settings=repr(base), runs=results)


def gpu_check(out: Path, tiny: bool) -> int:
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() and not tiny else "cpu")
    if device.type == "cpu" and not tiny:
        print("no CUDA device here: pass --tiny (or set DRY=1) to dry-run the GPU check on this CPU", file=sys.stderr)
        return 2
    start = time.time()
    deadline = start + float(os.environ.get("BUDGET_S", "140"))
    settings = GPU_SETTINGS
    if tiny:  # the same code paths, sizes a CPU runs in seconds
        settings = settings.replace(n_layer=2, n_head=2, d_model=32, context_length=32, batch_size=4)
    log_file = open(out / "gpt_gpu_check_log.txt", "a", buffering=1)

    def log(*parts):
        text = " ".join(map(str, parts))
        print(text, flush=True)
        log_file.write(text + "\n")

    result = dict(date=str(datetime.date.today()), machine=machine(device), load=round(load(), 2), tiny=tiny)
    for name, part in (("ceilings", lambda: {
            f"{dtype}{' (TF32)' if tf32 else ''}": round(matmul_ceiling(device, DTYPE_OF[dtype], tf32=tf32,
                                                                        size=256 if tiny else None) / 1e12, 3)
            for dtype, tf32 in (("float32", False), ("float32", True), ("bfloat16", False), ("float16", False))
            if device.type == "cuda" or not tf32}),
            ("speed", lambda: speed(device, 3 if tiny else 30, settings, deadline, log)),
            ("convergence", lambda: convergence(device, settings, 12 if tiny else 300, deadline, log))):
        try:
            result[name] = part()
        except Exception:  # noqa: BLE001 - keep what the other parts measured
            result[name + "_error"] = traceback.format_exc()[-2000:]
            log(result[name + "_error"])
        result["seconds"] = round(time.time() - start, 1)
        (out / "gpt_gpu_check.json").write_text(json.dumps(result, indent=1, default=str))
    (out / "gpt_gpu_check.md").write_text(gpu_markdown(result))
    log(f"done in {result['seconds']} s: {out / 'gpt_gpu_check.md'}")
    return 0


def gpu_markdown(result: dict) -> str:
    lines = []
    if "speed" in result:
        speed_result = dict(result["speed"], date=result["date"], machine=result["machine"], load=result["load"])
        lines.append(speed_markdown(speed_result, "Chapter 9 on this GPU: training and generation speed"))
    if "ceilings" in result:
        lines += ["## Matrix-product ceilings (TFLOP/s)", "",
                  " | ".join(f"{k}: {v}" for k, v in result["ceilings"].items()), ""]
    if "convergence" in result:
        c = result["convergence"]
        lines += ["## Mixed precision trains as well (held-out loss on 64 windows, 2 standard errors)", "",
                  f"`{c['settings']}`", "",
                  "| run | held-out | minus float32 (paired) | train loss, last 50 | non-finite | scale | s |",
                  "|---|---|---|---|---|---|---|"]
        for name, row in c["runs"].items():
            if isinstance(row, str):
                lines.append(f"| {name} | {row} | | | | | |")
                continue
            paired = (f"{row['minus_float32']:+.4f} ± {row['minus_float32_error']:.4f}"
                      if "minus_float32" in row else "")
            lines.append(f"| {name} | {row['held_out']:.4f} ± {row['error']:.4f} | {paired} | "
                         f"{row['train_last_50']:.4f} | {row['nonfinite']} | {row['final_scale'] or ''} | "
                         f"{row['seconds']} |")
    for key in result:
        if key.endswith("_error"):
            lines += ["", f"**{key}**:", "```", result[key], "```"]
    lines.append(f"\nTotal {result.get('seconds')} s.")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- main
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speed", action="store_true", help="the speed tables (the default)")
    parser.add_argument("--study", action="store_true", help="the chapter's findings over seeds (CPU, minutes)")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--reference", action="store_true", help="also print the tables for reference.py")
    parser.add_argument("--gpu-check", metavar="OUTDIR", type=Path, help="the GPU session's chapter-9 measurements")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes on a CPU (also DRY=1): a dry run")
    args = parser.parse_args(argv)
    tiny = args.tiny or os.environ.get("DRY") == "1"
    if args.gpu_check is not None:
        return gpu_check(args.gpu_check, tiny)
    OUT.mkdir(parents=True, exist_ok=True)
    if args.study:
        load_before = load()
        result = study(args.seeds)
        result.update(date=str(datetime.date.today()), machine=machine(torch.device("cpu")), load=round(load(), 2),
                      load_before=load_before)
        text = study_markdown(result, args.seeds)
        (OUT / "gpt_seeds.md").write_text(text)
        print(text)
        if args.reference:
            print(study_reference(result, args.seeds))
    if args.speed or not args.study:
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if device.type == "cpu":
            torch.set_num_threads(1)  # as the chapter does on a CPU
        load_before = load()
        result = speed(device, 30 if device.type == "cuda" else 15, settings_for(device).replace(
            eval_windows=1) if not tiny else settings_for(device).replace(n_layer=1, d_model=32, steps=4))
        result.update(date=str(datetime.date.today()), machine=machine(device), load=f"{load_before:.2f}-{load():.2f}")
        text = speed_markdown(result, "Chapter 9: training and generation speed")
        (OUT / "gpt.md").write_text(text)
        print(text)
        if args.reference:
            print("GPT_SPEED_CPU: dict = " + json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
