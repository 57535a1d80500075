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
    # the counts chapter 8's prose quotes from the reference run
    chapter = recipes["both changes (the chapter's recipe)"]
    assert f"largest weight in all six last rows: {chapter['noun_first']} of {ref['seeds']} seeds" in text
    source = ref["source"]
    assert (f"the source's recipe (lr 1e-4, {source['steps']:,} updates, seed {source['seed']}): "
            f"{source['final']} of 6 last words right") in text


def test_scale_text_prints_each_table_with_its_date_machine_and_load():
    text = reference.scale_text()
    ref = reference.SCALE_CPU
    if not ref["tables"]:
        assert "no reference measurement" in text
        return
    assert ref["date"] in text and ref["machine"] in text and ref["load"] in text
    for title, (header, rows) in ref["tables"].items():
        assert (title if len(header) <= 4 else title.replace(" [IQR]", "")) in text
        for row in rows:  # wide tables print the medians only, with a line on the spreads
            assert all(str(cell).split(" [")[0] in text for cell in row)
    assert re.search(r"\d{4}-\d{2}-\d{2}", ref["date"])
    assert "noisy (⚠): MHA at 512 forward" in text  # the one noisy cell of the wide table is named


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
