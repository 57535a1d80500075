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
