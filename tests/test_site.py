"""The built site: the book builds with -W, and every page works in headless Chromium.

Each page is opened with no outside network (MathJax served from a local copy); the test fails on
JavaScript errors, requests to outside hosts, missing content or unrendered math, and saves one
screenshot per page under _build/screenshots/.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from helpers import ROOT, repository_url, toc_files

PAGES = toc_files()


@pytest.mark.slow
def test_book_builds_without_warnings(book_build):
    returncode, log, _ = book_build
    warnings = [line for line in log.splitlines() if "WARNING:" in line or "ERROR:" in line]
    assert returncode == 0 and not warnings, "book build failed or warned:\n" + "\n".join(warnings[:40])


def expected_content(name: str):
    """Title and counts the page must show, read from the source file."""
    notebook_path = ROOT / f"{name}.ipynb"
    if notebook_path.is_file():
        notebook = nbformat.read(str(notebook_path), as_version=4)
        markdown = "\n".join(c.source for c in notebook.cells if c.cell_type == "markdown")
        code = [c.source for c in notebook.cells if c.cell_type == "code"]
        figures = sum(1 for source in code if "plt.show()" in source)
    else:
        markdown = (ROOT / f"{name}.md").read_text()
        figures = 0
    title = re.search(r"^# (.+)$", markdown, re.M).group(1)
    title = re.sub(r"[`*$]", "", title).strip()
    exercises = len(re.findall(r"```\{exercise\}", markdown))
    has_math = bool(re.search(r"\$[^$\n]+\$", markdown))
    return title, exercises, figures, has_math


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("name", PAGES)
def test_page_renders(name, open_page, screenshot):
    title, exercises, figures, has_math = expected_content(name)
    page = open_page(f"{name}.html")
    screenshot(page, name.replace("/", "__"))

    heading = page.locator("main h1").first.inner_text()
    assert title.split(":")[0] in heading, f"page heading {heading!r} does not show {title!r}"
    assert page.locator("article").inner_text().strip(), "empty article"
    if has_math:
        assert page.locator("mjx-container").count() > 0, "math was not rendered by MathJax"
        prose = page.evaluate("""() => {
            const article = document.querySelector("article").cloneNode(true);
            article.querySelectorAll("pre, code, .cell_output, mjx-container").forEach(e => e.remove());
            return article.innerText;
        }""")
        assert not re.search(r"\$[^$\s][^$]*\$", prose), "raw $...$ math left in the page's text"
    assert page.locator("div.exercise").count() == exercises
    assert page.locator("main img").count() >= figures, "fewer figures on the page than plt.show() calls"
    assert page.console_errors == [], page.console_errors
    assert page.external_requests == [], page.external_requests


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("name", [n for n in PAGES if n.startswith("notebooks/")])
def test_chapter_launch_buttons_and_hidden_solutions(name, open_page):
    page = open_page(f"{name}.html")
    colab = f"https://colab.research.google.com/github/{repository_url().split('github.com/')[1]}/blob/main/{name}.ipynb"
    hrefs = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    assert colab in hrefs, f"no Open-in-Colab link {colab}"
    assert any(h.startswith("https://mybinder.org/v2/gh/") and name in h for h in hrefs), "no Binder link"

    solutions = page.locator("div.solution.dropdown")
    assert solutions.count() >= 3
    first = solutions.first
    body = first.locator(".admonition-title ~ *").first
    assert not body.is_visible(), "solutions must be hidden until clicked"
    first.locator("button.toggle-button").click()
    body.wait_for(state="visible", timeout=3000)
    assert page.console_errors == [], page.console_errors
