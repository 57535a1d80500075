"""attention_book.reference: the dated reference measurements the chapters print and quote."""

from __future__ import annotations

import re

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
    rows = ref["rows"]
    for row in rows:
        line = next(line for line in text.splitlines() if line.split()[:1] == [str(row["seed"])])
        assert f"{row['gpt']:.2f}" in line and f"layer {row['layer']}, head {row['head']}: {row['score']:.2f}" in line
    # what chapter 9 says of these runs, computed again from the rows
    beats = sum(r["gpt"] < min(ref["bigram"], r["chapter8"]) for r in rows)
    assert f"{beats} of {len(rows)} seeds" in text and beats == len(rows)
    assert all(abs(r["post"] - ref["unigram"]) <= 0.05 and r["pre"] < r["post"] for r in rows)
    low, high = min(r["score"] for r in rows), max(r["score"] for r in rows)
    assert f"scores {low:.2f} to {high:.2f}" in text


def test_gpt_seeds_reference_is_what_the_bench_prints():
    """The bench's --reference output and the package's copy have the same fields."""
    import ast

    source = (__import__("pathlib").Path(__file__).resolve().parents[1] / "tools" / "bench_gpt.py").read_text()
    tree = ast.parse(source)
    keys = next(node for node in ast.walk(tree) if isinstance(node, ast.Dict)
                and any(isinstance(k, ast.Constant) and k.value == "rows" for k in node.keys))
    assert {k.value for k in keys.keys} == set(reference.GPT_SEEDS)
    row_call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)  # the rounded row
                    and getattr(node.func, "id", "") == "dict"
                    and any(k.arg == "gpt" and isinstance(k.value, ast.Call) for k in node.keywords))
    assert {k.arg for k in row_call.keywords} == set(reference.GPT_SEEDS["rows"][0])
