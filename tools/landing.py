"""The landing page's figure and reading times (book/index.md).

    python tools/landing.py             # print each chapter's estimated time
    python tools/landing.py --figure    # also redraw book/images/attention-computation.svg
                                        # and its phone version attention-computation-phone.svg
    python tools/landing.py --write     # and write the times into book/index.md's chapter map

Time estimate per chapter, from the notebook itself (a rule of thumb, not a measurement of
readers): prose at 150 words per minute (technical reading, with the formulas), one minute per
code cell (read it, run it, look at the output), ten minutes per exercise; rounded up to 5 minutes.
tests/test_site.py checks that book/index.md states these times.

The figure comes in two drawings of the same computation: the wide one (the chapters' diagram,
drawn 10.6 inches wide so its smallest labels stay at least 9 px in the 672 px text column at
1280 px) and a portrait one for phones (``-phone.svg``, the chapters' phone layout,
``computation_diagram(layout="phone")``, 3.36 inches wide: 12 px labels on a 390 px screen).
The site shows the phone drawing on screens narrower than 600 px (book/_ext/site_figures.py,
``<picture>``); tests/test_figures.py measures both.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURE = ROOT / "book" / "images" / "attention-computation.svg"
PHONE_FIGURE = FIGURE.with_name(FIGURE.stem + "-phone.svg")
INDEX = ROOT / "book" / "index.md"
WORDS_PER_MINUTE = 150
MINUTES_PER_CODE_CELL = 1
MINUTES_PER_EXERCISE = 10


def estimate(path: Path) -> dict:
    import nbformat

    notebook = nbformat.read(str(path), as_version=4)
    markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
    prose = re.sub(r"```.*?```|\$\$.*?\$\$", " ", markdown, flags=re.S)
    words = len(re.findall(r"[A-Za-z0-9']+", prose))
    code_cells = sum(1 for c in notebook.cells if c.cell_type == "code" and c.source.strip())
    exercises = len(re.findall(r"```\{exercise\}", markdown))
    minutes = words / WORDS_PER_MINUTE + code_cells * MINUTES_PER_CODE_CELL + exercises * MINUTES_PER_EXERCISE
    return {"words": words, "code_cells": code_cells, "exercises": exercises,
            "minutes": 5 * math.ceil(minutes / 5)}


def chapters():
    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import chapter_notebooks

    return chapter_notebooks()


def _save(figure, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="svg", bbox_inches="tight", metadata={"Date": None})
    plt.close(figure)
    return path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "attention-book"  # stable ids: the file only changes with the drawing
    return plt


def draw_figure(path: Path = FIGURE) -> Path:
    plt = _pyplot()
    from attention_book.diagram import computation_diagram

    figure, ax = plt.subplots(figsize=(10.6, 2.8))  # as in the chapters: labels >= 9 px at 1280 px
    computation_diagram(ax=ax)
    return _save(figure, path)


def draw_phone_figure(path: Path = PHONE_FIGURE) -> Path:
    """The computation top to bottom, narrow enough for a phone: the chapters' phone layout."""
    _pyplot()
    from attention_book.diagram import computation_diagram

    return _save(computation_diagram(layout="phone"), path)


def write_times(index: Path = INDEX) -> int:
    """Put each chapter's estimate into the Time column of the chapter map; return rows changed."""
    text = index.read_text(encoding="utf-8")
    changed = 0
    for number, path in enumerate(chapters(), start=1):
        minutes = estimate(path)["minutes"]
        text, count = re.subn(rf"^(\| {number} \|.*\| )\d+( min \|)$", rf"\g<1>{minutes}\g<2>", text, flags=re.M)
        changed += count
    index.write_text(text, encoding="utf-8")
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figure", action="store_true", help="redraw the landing page's figure")
    parser.add_argument("--write", action="store_true", help="write the times into book/index.md")
    args = parser.parse_args(argv)
    if args.figure:
        print(f"wrote {draw_figure()}")
        print(f"wrote {draw_phone_figure()}")
    if args.write:
        print(f"updated {write_times()} rows of {INDEX.relative_to(ROOT)}")
    for path in chapters():
        numbers = estimate(path)
        print(f"{path.stem}: {numbers['words']} words, {numbers['code_cells']} code cells, "
              f"{numbers['exercises']} exercises -> about {numbers['minutes']} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
