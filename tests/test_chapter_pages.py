"""What a reader meets on each page of the built site, in headless Chromium (one page load per page).

* Every chapter opens with its title: the first element of the article is the ``h1``; the setup
  cell follows the opening text with its code collapsed (a native ``<details>``: keyboard and
  screen-reader operable) and its output, the device line, shown.
* No page shows the ``# BEGIN SOLUTION`` / ``# END SOLUTION`` markers in its code, collapsed
  solutions included (book/_ext/site_code.py removes them from the displayed code; the notebooks
  keep them).
* Figures are numbered per chapter, "Fig. 3.1", "Fig. 3.2", ... in page order, and every
  ``{numref}`` link to a figure shows the number of the figure it points to
  (book/_ext/exercise_numbers.py).
* Inline code wraps only at the break points book/_ext/site_code.py inserts (after ``. _ ( , /``),
  and between the words of a CamelCase name; never mid-word, on a 390 px phone and at 1280 px.
"""

from __future__ import annotations

import re

import pytest

from browser import settle
from helpers import toc_files

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PAGES = toc_files()
CHAPTER = re.compile(r"notebooks/(\d+)_")

# The first element with a box in the article, skipping wrappers that contain the h1.
FIRST_ELEMENT_JS = """() => {
    const article = document.querySelector("article.bd-article");
    const h1 = article.querySelector("h1");
    const walker = document.createTreeWalker(article, NodeFilter.SHOW_ELEMENT);
    for (let e = walker.nextNode(); e; e = walker.nextNode()) {
        if (h1 && e.contains(h1) && e !== h1) continue;
        const box = e.getBoundingClientRect();
        if (box.width > 0 && box.height > 0 && getComputedStyle(e).visibility !== "hidden")
            return { tag: e.tagName.toLowerCase(), text: e.innerText.trim().slice(0, 80), isTitle: e === h1 };
    }
    return null;
}"""

# Inline code text between two break points that the browser split over two lines.
MID_WORD_BREAKS_JS = """() => {
    const broken = [];
    for (const pre of document.querySelectorAll(".bd-article code.literal span.pre")) {
        for (const node of pre.childNodes) {
            if (node.nodeType !== 3 || !node.textContent.trim()) continue;
            const range = document.createRange();
            range.selectNodeContents(node);
            const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0)
                .map((r) => Math.round(r.top)));
            if (lines.size > 1) broken.push(pre.textContent);
        }
    }
    return broken;
}"""

# Caption numbers in page order, and each numref link to a figure with its target's number.
FIGURE_NUMBERS_JS = """() => ({
    captions: [...document.querySelectorAll(".bd-article figure figcaption .caption-number")]
        .map((c) => c.innerText.trim()),
    links: [...document.querySelectorAll(".bd-article a.reference span.std-numref")]
        .filter((span) => span.innerText.trim().startsWith("Fig."))
        .map((span) => { const target = document.getElementById(
            decodeURIComponent(span.closest("a").getAttribute("href").split("#")[1] || ""));
            const number = target && target.querySelector("figcaption .caption-number");
            return { link: span.innerText.trim(), target: number ? number.innerText.trim() : null }; }),
})"""


def chapter_of(name: str):
    match = CHAPTER.match(name)
    return int(match.group(1)) if match else None


@pytest.mark.parametrize("name", PAGES)
def test_page_shows_what_a_reader_expects(name, open_page):
    page = open_page(f"{name}.html", wait_for_math=False)
    chapter = chapter_of(name)

    # every code block and cell, the collapsed solutions included (the instructors' page may name
    # the markers in its prose: that is documentation, not solution code)
    code = page.evaluate("() => [...document.querySelectorAll('.bd-article pre')].map((p) => p.textContent).join('\\n')")
    assert not re.search(r"#\s*(BEGIN|END) SOLUTION", code), "solution markers in the page's code"

    numbers = page.evaluate(FIGURE_NUMBERS_JS)
    if chapter is not None:
        expected = [f"Fig. {chapter}.{i}" for i in range(1, len(numbers["captions"]) + 1)]
        assert numbers["captions"] == expected, f"figure numbers {numbers['captions']}, expected {expected}"
    for link in numbers["links"]:
        assert link["target"] is not None and link["link"].startswith(link["target"].rstrip(".")), \
            f"a link reads {link['link']!r} but its figure is {link['target']!r}"

    for width in (390, 1280):
        page.set_viewport_size({"width": width, "height": 900})
        settle(page)
        broken = page.evaluate(MID_WORD_BREAKS_JS)
        assert not broken, f"inline code broken mid-word at {width} px: {broken[:6]}"
    assert page.console_errors == [], page.console_errors


@pytest.mark.parametrize("name", [n for n in PAGES if chapter_of(n) is not None])
def test_chapter_starts_with_its_title_then_the_collapsed_setup_cell(name, open_page):
    page = open_page(f"{name}.html", wait_for_math=False)
    first = page.evaluate(FIRST_ELEMENT_JS)
    assert first and first["isTitle"], f"the article starts with <{first and first['tag']}> {first}, not its title"
    assert first["text"].startswith(f"Chapter {chapter_of(name)}"), first

    setup = page.locator("article .cell").first
    assert "tag_hide-input" in setup.get_attribute("class"), "the first code cell is not the hidden-input setup cell"
    toggle = setup.locator("details > summary").first
    code = setup.locator(".cell_input").first
    output = setup.locator(".cell_output").first
    assert output.is_visible() and re.search(r"device", output.inner_text(), re.I), \
        "the setup cell's device line is not shown"
    assert not code.is_visible(), "the setup cell's code is not collapsed"
    title_box = page.locator("article h1").first.bounding_box()
    assert setup.bounding_box()["y"] > title_box["y"], "the setup cell comes before the title"
    toggle.focus()
    page.keyboard.press("Enter")  # a native <details>: the keyboard opens it
    code.wait_for(state="visible")
    assert "REPO_URL" in code.inner_text()
    toggle.click()
    code.wait_for(state="hidden")
    assert page.console_errors == [], page.console_errors
