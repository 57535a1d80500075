"""The built site shows the build's own numbers where the prose pastes them, and labels its timings.

* Every ``{glue:text}`` role of a chapter was pasted: the page has no raw ``{glue`` text and one
  pasted value (``span.pasted-text``) per role.
* A cell output that shows a timing (milliseconds, seconds, iterations or FLOPs per second) was
  measured by the machine that built the site: it carries
  :data:`attention_book.glue.BUILD_LABEL` ("this build's machine", printed by
  ``machine_label()`` in the book build) or is a dated reference table ("Measured 2026-...").
  A reader must never take a busy CI runner's timing for the course's reference numbers.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from attention_book.glue import BUILD_LABEL
from helpers import chapter_notebooks, numbers_rule_params

CHAPTERS = chapter_notebooks()
GLUE_ROLE = re.compile(r"\{glue:text\}`[^`]+`")
TIMING = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:ms|µs|us|ns)\b|(?<![\w.])\d[\d,]*(?:\.\d+)? s\b"
                    r"|\bseconds?\b|\bit/s\b|\bs/it\b|\b[GT]FLOP/s\b|\b[GMT]B/s\b")
REFERENCE = re.compile(r"Measured \d{4}-\d{2}-\d{2}")


def unlabelled_timings(html: str) -> list:
    """The texts of the cell outputs in ``html`` that show a timing without saying whose."""
    from bs4 import BeautifulSoup

    found = []
    for output in BeautifulSoup(html, "html.parser").select("div.cell_output"):
        # a Markdown output is typeset: Sphinx's smart quotes turn "build's" into "build’s"
        text = output.get_text(" ", strip=True).replace("\u2019", "'")
        if TIMING.search(text) and BUILD_LABEL not in text and not REFERENCE.search(text):
            found.append(text[:160])
    return found


@pytest.mark.slow
@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_glue_role_was_pasted(path, site_dir):
    html = (site_dir / "notebooks" / f"{path.stem}.html").read_text(encoding="utf-8")
    notebook = nbformat.read(str(path), as_version=4)
    roles = sum(len(GLUE_ROLE.findall(cell.source)) for cell in notebook.cells if cell.cell_type == "markdown")
    assert "{glue" not in html, f"{path.stem}: a glue role was not pasted"
    assert html.count('class="pasted-text"') >= roles, f"{path.stem}: {roles} glue roles, fewer values pasted"


@pytest.mark.slow
@pytest.mark.parametrize("path", numbers_rule_params(CHAPTERS))
def test_timings_on_the_site_name_the_build_machine(path, site_dir):
    html = (site_dir / "notebooks" / f"{path.stem}.html").read_text(encoding="utf-8")
    found = unlabelled_timings(html)
    assert not found, (f"{path.stem}: timings the build machine measured, shown without "
                       f"{BUILD_LABEL!r} (attention_book.glue.machine_label()) or a dated reference "
                       "table:\n  " + "\n  ".join(found))


def test_the_timing_check_can_fail():
    def output(text):
        return f'<div class="cell_output docutils container"><pre>{text}</pre></div>'

    assert unlabelled_timings(output("fused  2.20 ms [2.19-2.21]")) == ["fused  2.20 ms [2.19-2.21]"]
    assert unlabelled_timings(output("trained in 48 s")) == ["trained in 48 s"]
    assert unlabelled_timings(output("matmul 110 GFLOP/s")) == ["matmul 110 GFLOP/s"]
    assert unlabelled_timings(output(f"measured on {BUILD_LABEL}: fused 2.20 ms")) == []
    typeset = BUILD_LABEL.replace("'", "\u2019")  # a Markdown output, smart-quoted by Sphinx
    assert unlabelled_timings(output(f"Training took 216 s on {typeset} (cpu)")) == []
    assert unlabelled_timings(output("Measured 2026-11-25 with tools/bench_scale.py\nfused 2.20 ms")) == []
    # counts, sizes and prose outside outputs are no timings
    assert unlabelled_timings(output("3 heads, 12 tokens, 4 MiB, GPT-2s")) == []
    assert unlabelled_timings("<p>it took 48 s</p>") == []
