"""attention_book.reference: the dated reference measurements the chapters print and quote."""

from __future__ import annotations

import re

import pytest

from attention_book import reference


def test_training_seeds_text_shows_every_recipe_with_its_numbers():
    text = reference.training_seeds_text()
    ref = reference.TRAINING_SEEDS
    assert ref["date"] in text and ref["machine"] in text and "load" in text
    for name, row in ref["recipes"].items():
        line = next(line for line in text.splitlines() if line.startswith(name))
        assert f"{row['final']} of {ref['seeds']}" in line
        assert f"median {row['median']}, max {row['largest']}" in line
    # the chapter's claim: slower query/key learning does the work, zero queries alone does not
    recipes = ref["recipes"]
    assert recipes["slower query/key learning alone"]["final"] > recipes["zero queries alone"]["final"]
    assert recipes["both changes (the chapter's recipe)"]["final"] == ref["seeds"]
    # the counts chapter 8's prose quotes from the reference run
    chapter = recipes["both changes (the chapter's recipe)"]
    assert f"largest weight in all six last rows: {chapter['noun_first']} of {ref['seeds']} seeds" in text
    source = ref["source"]
    assert (f"the source's recipe (lr 1e-4, {source['steps']:,} updates, seed {source['seed']}): "
            f"{source['final']} of 6 last words right") in text


def test_scale_text_prints_each_table_with_its_date_machine_and_load():
    for text, ref in ((reference.scale_text(), reference.SCALE_CPU),
                      (reference.scale_gpu_text(), reference.SCALE_GPU)):
        assert ref["date"] in text and ref["machine"] in text and ref["load"] in text
        assert re.search(r"\d{4}-\d{2}-\d{2}", ref["date"])
        for table in ref["tables"].values():
            header = table["header"]
            assert table["title"].replace(" [IQR]", "") in text or table["title"] in text
            assert isinstance(table["sizes"], dict)
            for row in table["rows"]:  # wide tables print the medians only, with a line on the spreads
                assert len(row) == len(header)
                assert all(str(cell).split(" [")[0] in text for cell in row)
    assert "noisy (⚠): MHA at 512 forward" in reference.scale_text()  # the wide table's noisy cell


def test_gpu_reference_says_what_chapter_10_quotes():
    tables = reference.SCALE_GPU["tables"]
    assert "H100" in reference.SCALE_GPU["machine"] and "2.11" in reference.SCALE_GPU["machine"]
    kernels = {(row[0], row[2]): row for row in tables["kernels"]["rows"]}
    bf16_ceiling = float(tables["ceilings"]["rows"][0][0])
    cudnn = float(kernels[(16384, "CUDNN_ATTENTION")][4])
    assert round(cudnn / bf16_ceiling, 2) == 0.72  # "72% of the bf16 matmul ceiling"
    scratch = float(kernels[(16384, "from scratch")][4])
    assert round(cudnn / scratch) == 21
    assert all(row[1] == "CUDNN_ATTENTION" for row in tables["default_choice"]["rows"])
    flag = {row[0]: float(row[1]) for row in tables["causal_flag_8192"]["rows"]}
    assert round(1 - flag["is_causal=True"] / flag["no mask (bidirectional)"], 2) == 0.46
    assert round(flag["attn_mask tensor"] / flag["is_causal=True"], 1) == 3.3


def test_reference_lookup_compares_like_with_like(monkeypatch):
    cpu_sizes = reference.SCALE_CPU["tables"]["causal_flag"]["sizes"]
    assert reference.reference_cell("causal_flag", "is_causal=True", sizes=cpu_sizes) == "8.58 [8.57-8.61]"
    assert reference.reference_cell("causal_flag", "is_causal=True", device="cuda", sizes=cpu_sizes) == "-"
    assert reference.reference_cell("causal_flag_8192", "is_causal=True", device="cuda") == "2.036"
    assert reference.reference_table("nothing") is None
    assert reference.scale_reference("cuda:0") is reference.SCALE_GPU
    assert reference.reference_name("cpu") == "reference: quiet CPU, " + reference.SCALE_CPU["date"]
    assert reference.reference_name("cpu", "fused_overhead") == "reference: busy CPU, 2026-11-27"
    assert reference.reference_name("cuda", "causal_flag").startswith("reference: H100, ")
    monkeypatch.setenv("ATTENTION_BOOK_STATIC", "1")
    assert reference.live_label().startswith("this build's machine")
    monkeypatch.delenv("ATTENTION_BOOK_STATIC")
    assert reference.live_label().startswith("your machine")


def test_gpt_seeds_text_shows_every_seed_and_the_counts_the_chapter_quotes():
    text = reference.gpt_seeds_text()
    ref = reference.GPT_SEEDS
    assert ref["date"] in text and ref["machine"] in text and ref["load"] in text
    assert re.search(r"\d{4}-\d{2}-\d{2}", ref["date"])
    rows = ref["rows"]
    assert len(rows) >= 3
    for row in rows:
        line = next(line for line in text.splitlines() if line.split()[:1] == [str(row["seed"])])
        assert f"{row['gpt']:.3f}" in line and f"layer {row['layer']}, head {row['head']}: {row['score']:.2f}" in line
    # what chapter 9 says of these runs, computed again from the rows
    summary = reference.gpt_seeds_summary()
    beats = sum(r["gpt"] < min(ref["bigram"], r["chapter8"]) for r in rows)
    assert summary["beats"] == beats and f"{beats} of {len(rows)} seeds" in text
    assert summary["seeds"] == len(rows)
    low, high = min(r["gpt"] for r in rows), max(r["gpt"] for r in rows)
    assert summary["gpt"] in (f"{low:.2f}", f"{low:.2f} to {high:.2f}")
    # chapter 9: "the GPT beat both ... for N of the N seeds"; "a head of layer 0 took the job in N of
    # its N seeds ... which of the four heads takes it changes with the seed"
    assert beats == len(rows) and summary["layer0"] == len(rows)
    assert len(summary["heads"].split(", ")) > 1


def test_norm_seeds_text_shows_every_run_and_counts_the_runs_at_the_unigram_level():
    from attention_book.gpt_training import NORM_RUNS

    ref = reference.NORM_SEEDS
    text = reference.norm_seeds_text()
    assert ref["date"] in text and ref["machine"] in text and ref["load"] in text
    assert list(ref["runs"]) == [label for label, *_ in NORM_RUNS]  # the runs the package defines, in order
    summary = reference.norm_seeds_summary()
    for label, values in ref["runs"].items():
        line = next(line for line in text.splitlines() if line.startswith(label))
        assert all(f"{v:.2f}" in line for v in values)
        stuck = sum(abs(v - ref["unigram"]) <= 0.05 for v in values)
        learned = sum(v < ref["unigram"] - reference.LEARNED for v in values)
        assert summary[label]["stuck"] == stuck and line.endswith(f"{learned} of {len(values)}")
        assert summary[label]["seeds"] == len(values) == len(reference.GPT_SEEDS["rows"])


def test_what_chapter_9_says_of_the_norm_runs_holds_in_the_table():
    """Chapter 9's prose states these of the reference runs (its counts are glued from the table)."""
    from attention_book.gpt_training import NORM_RUNS

    labels = [label for label, *_ in NORM_RUNS]
    summary = reference.norm_seeds_summary()
    seeds = summary[labels[0]]["seeds"]
    pre, post, post_warmup, post_slow, post_middle, pre_slow = (summary[label] for label in labels)
    # "post-norm stayed at the unigram level in N of the N seeds, while pre-norm learned in N"
    assert post["stuck"] == seeds and pre["learned"] == seeds
    assert post_warmup["stuck"] == seeds  # "a warm-up alone did not rescue post-norm at that rate"
    # "a smaller learning rate with the warm-up helped, though not in every seed"
    assert seeds / 2 < post_middle["learned"] < seeds and post_slow["learned"] > 0
    # "pre-norm learned at 3e-3 too, and did better there": too high a rate for both orders
    assert pre_slow["learned"] == seeds and pre_slow["mean"] < pre["mean"]
    assert reference.norm_seeds_below(labels[5], labels[0]) > seeds / 2
    # "keeps learning where post-norm, even with a warm-up, sometimes does not"
    assert post_middle["learned"] < pre_slow["learned"]
    runs = reference.NORM_SEEDS["runs"]
    assert reference.norm_seeds_below(labels[5], labels[4]) == sum(
        a < b for a, b in zip(runs[labels[5]], runs[labels[4]]))
    for row in summary.values():  # the thresholds: stuck and learned never overlap
        assert row["stuck"] + row["learned"] <= row["seeds"]


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:0", "mps"])
def test_gpt_speed_reference_matches_the_kind_of_device(device):
    import torch

    text = reference.gpt_speed_text(device)
    summary = reference.gpt_speed_summary(torch.device(device) if device != "mps" else device)
    ref = reference.GPT_GPU if device.startswith("cuda") else reference.GPT_SPEED_CPU
    assert ref["machine"] in text and ref["date"] in text and summary["machine"] == ref["machine"]
    assert 0 < summary["mfu"] < 1 and summary["tokens_per_second"] > 0
    if device.startswith("cuda"):
        assert "H100" in text and "bfloat16 autocast + fused attention (the recipe)" in text
        assert f"{summary['speedup']:.2f}x" in text
    else:
        assert "GPU" not in text.replace("no GPU", "") and f"{summary['speedup']:.1f}x" in text


def test_gpt_seeds_reference_is_what_the_bench_prints():
    """The bench's --reference output and the package's copies have the same fields."""
    import ast

    source = (__import__("pathlib").Path(__file__).resolve().parents[1] / "tools" / "bench_gpt.py").read_text()
    tree = ast.parse(source)
    dicts = [node for node in ast.walk(tree) if isinstance(node, ast.Dict)
             and any(isinstance(k, ast.Constant) and k.value == "command" for k in node.keys)]
    keys = [{k.value for k in node.keys} for node in dicts]
    assert set(reference.GPT_SEEDS) in keys and set(reference.NORM_SEEDS) in keys
    row_call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)  # the rounded row
                    and getattr(node.func, "id", "") == "dict"
                    and any(k.arg == "gpt" and isinstance(k.value, ast.Call)
                            and getattr(k.value.func, "id", "") == "round" for k in node.keywords))
    assert {k.arg for k in row_call.keywords} == set(reference.GPT_SEEDS["rows"][0])
