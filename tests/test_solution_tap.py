"""A tap (phone, 390 px) or a click (laptop, 1280 px) anywhere on a solution's title opens it.

"Exercise 3.1 (Title)" used to be a link back to the exercise and took most of the title: a tap on it
jumped to the exercise and left the solution closed (issue 31). book/_ext/solution_titles.py makes
those words plain text, so the whole title is the dropdown's switch. Checked in Chromium, in both
colour themes, on a chapter's solutions: each opens where its exercise's name is written, the page
does not move to another address, and a second tap closes it again.
"""

from __future__ import annotations

import pytest

from browser import LAPTOP, PHONE

CHAPTER_PAGE = "notebooks/03_softmax_and_scaling.html"


@pytest.mark.browser
@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("how", ["tap", "click"])
def test_the_whole_solution_title_opens_the_solution(open_page, how, scheme):
    viewport = PHONE if how == "tap" else LAPTOP
    page = open_page(CHAPTER_PAGE, viewport=viewport, color_scheme=scheme, has_touch=how == "tap")
    solutions = page.locator("div.solution.dropdown")
    count = solutions.count()
    assert count >= 3, f"{CHAPTER_PAGE} has {count} solutions"
    address = page.url
    for index in range(count):
        solution = solutions.nth(index)
        title = solution.locator(".admonition-title")
        body = solution.locator(".admonition-title ~ *").first
        assert title.locator("a").count() == 0, f"solution {index + 1}: its title still holds a link"
        assert not body.is_visible(), f"solution {index + 1} is open before anyone touched it"
        words = title.locator(".solution-target")  # "Exercise 3.1 (Title)": where the link was
        words.scroll_into_view_if_needed()
        box = words.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        press = page.touchscreen.tap if how == "tap" else page.mouse.click
        press(x, y)
        body.wait_for(state="visible")
        assert page.url == address, f"solution {index + 1}: the {how} followed a link to {page.url}"
        press(x, y)
        body.wait_for(state="hidden")
    assert not page.console_errors, page.console_errors


@pytest.mark.slow
def test_no_solution_title_on_the_site_is_a_link(site_dir):
    from bs4 import BeautifulSoup

    solutions = 0
    for page in sorted(site_dir.rglob("*.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for title in soup.select("div.solution .admonition-title"):
            solutions += 1
            assert title.select_one("a") is None, f"{page.name}: {title.get_text(' ', strip=True)!r} is a link"
            assert title.get_text(" ", strip=True).startswith("Solution to Exercise "), title
    assert solutions >= 30, f"only {solutions} solutions on the site: the test would check little"
