"""Dark mode as a reader gets it: the system says dark, every page is dark and every output reads.

Each page is opened in headless Chromium with ``prefers-color-scheme: dark`` (nothing clicked, no
stored choice): the theme's default mode is "auto" (book/_ext/site_fixes.py), so the page must
turn dark by itself. Then, on every page:

* the page background is dark;
* every output of a code cell (printed text, self-check verdicts, HTML tables, explorers) sits on
  a dark background, not a light slab, and all its text has a WCAG contrast of at least 4.5:1
  against what is really behind it;
* the text of every table in the prose has a contrast of at least 4.5:1;
* every figure (drawn on white, with black text) is shown on a light card.
"""

from __future__ import annotations

import pytest

from helpers import toc_files

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PAGES = toc_files()
MIN_CONTRAST = 4.5
DARK = 0.06  # relative luminance: pydata-sphinx-theme's dark background #121212 is 0.006
SLAB = 0.25  # an output background lighter than this is a light slab on the dark page

OUTPUT_BACKGROUNDS_JS = """() => [...document.querySelectorAll(".bd-article div.cell_output > .output")]
    .filter((o) => o.getClientRects().length && !o.querySelector("img"))
    .map((o) => { const c = getComputedStyle(o).backgroundColor.match(/[\\d.]+/g).map(Number);
        const alpha = c.length > 3 ? c[3] : 1;
        const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255;
            return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
        return { kind: o.className, alpha, luminance: 0.2126 * r + 0.7152 * g + 0.0722 * b,
                 text: o.innerText.trim().slice(0, 50) }; })"""

FIGURE_CARDS_JS = """() => [...document.querySelectorAll(".bd-article img")]
    .filter((i) => i.getBoundingClientRect().width > 0)
    .map((i) => { const s = getComputedStyle(i); const c = s.backgroundColor.match(/[\\d.]+/g).map(Number);
        return { src: i.getAttribute("src"), background: c, radius: parseFloat(s.borderTopLeftRadius) }; })"""


@pytest.fixture
def open_dark(open_page):
    return lambda path: open_page(path, color_scheme="dark")


def low_contrast(found: list) -> list:
    return [f"{t['text']!r} ({t['where']}, {t['colour']}): {t['ratio']:.2f}" for t in found
            if t["ratio"] is not None and t["ratio"] < MIN_CONTRAST]


@pytest.mark.parametrize("name", PAGES)
def test_system_dark_mode_gives_a_dark_page_with_readable_outputs(name, open_dark, screenshot):
    from browser import page_background_luminance, text_contrast

    page = open_dark(f"{name}.html")
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark", \
        "the page ignores the system's dark mode"
    assert page_background_luminance(page) < DARK, "the page background is not dark"

    slabs = [o for o in page.evaluate(OUTPUT_BACKGROUNDS_JS) if o["alpha"] > 0 and o["luminance"] > SLAB]
    assert not slabs, f"outputs shown as light slabs on the dark page: {slabs[:5]}"

    outputs = text_contrast(page, ".bd-article div.cell_output")
    unmeasured = [t for t in outputs if t["ratio"] is None]
    assert len(unmeasured) <= 0.2 * max(1, len(outputs)), f"text over background images: {unmeasured[:5]}"
    assert not low_contrast(outputs), f"output text below {MIN_CONTRAST}:1 in dark mode: {low_contrast(outputs)[:8]}"

    tables = text_contrast(page, ".bd-article table:not(.abx-table)")
    assert not low_contrast(tables), f"table text below {MIN_CONTRAST}:1 in dark mode: {low_contrast(tables)[:8]}"

    for figure in page.evaluate(FIGURE_CARDS_JS):
        red, green, blue = figure["background"][:3]
        light = min(red, green, blue) >= 200 and (len(figure["background"]) < 4 or figure["background"][3] > 0.9)
        assert light and figure["radius"] > 0, f"figure {figure['src']} has no light card in dark mode: {figure}"
    if name in ("notebooks/03_softmax_and_scaling", "book/explorers"):
        page.locator(".bd-article div.cell_output").nth(3).scroll_into_view_if_needed()
        screenshot(page, f"dark-{name.split('/')[-1]}", full_page=False)
    assert page.console_errors == [], page.console_errors
