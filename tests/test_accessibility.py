"""Accessibility of the built site, in headless Chromium, on every page of the book.

* axe-core (npm ``axe-core``, served from the local copy that tools/setup.sh --browser installs)
  finds no serious or critical violation, in the light and in the dark theme (pydata-sphinx-theme
  switches with the ``data-theme`` attribute of <html>).
* Every image has alt text that says what it shows (not empty, not a file name) and every figure a
  caption: both come from the code cell's metadata (``mystnb.image.alt``, ``mystnb.figure.caption``).

The explorers' keyboard, focus, labels and colours are tested in test_explorers_browser.py.
"""

from __future__ import annotations

import re

import pytest

from conftest import require
from helpers import toc_files

PAGES = toc_files()
FILE_LIKE = re.compile(r"(^|/)[\w.-]+\.(png|jpe?g|svg|gif|webp)$|^_images/|^[0-9a-f]{32,}", re.I)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="session")
def axe_available():
    from browser import AXE_JS

    require(AXE_JS.is_file(), f"axe-core missing at {AXE_JS} (run tools/setup.sh --browser)")


def describe(violations) -> str:
    return "\n".join(f"  {v['impact']} {v['id']} ({v['nodes']} elements): {v['help']}; e.g. {v['targets']}"
                     for v in violations)


@pytest.mark.parametrize("name", PAGES)
def test_no_serious_or_critical_axe_violations_in_either_theme(name, open_page, axe_available):
    from browser import axe_violations, set_theme, wait_until_settled

    page = open_page(f"{name}.html")
    wait_until_settled(page)
    for theme in ("light", "dark"):
        set_theme(page, theme)
        violations = axe_violations(page)
        assert violations == [], f"axe-core, {theme} theme, {name}:\n" + describe(violations)
    assert page.console_errors == [], page.console_errors


@pytest.mark.parametrize("name", PAGES)
def test_every_image_has_alt_text_and_every_figure_a_caption(name, open_page):
    from browser import images

    page = open_page(f"{name}.html", wait_for_math=False)
    found = images(page)
    missing_alt = [i["src"] for i in found if not (i["alt"] or "").strip()]
    path_alt = [(i["src"], i["alt"]) for i in found if i["alt"] and FILE_LIKE.search(i["alt"].strip())]
    no_caption = [i["src"] for i in found if i["inOutput"] and not i["caption"]]
    assert not missing_alt, f"images without alt text: {missing_alt}"
    assert not path_alt, f"alt text that is a file path, not a description: {path_alt}"
    assert not no_caption, (f"figures without a caption: {no_caption} (set the code cell's metadata "
                            '"mystnb": {"figure": {"caption": ...}})')


def test_file_like_alt_text_is_recognised():
    """The rule above catches what myst-nb writes when a notebook gives no alt text."""
    for alt in ("_images/3f2a9c0b1d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4.png", "figure.png",
                "images/attention-computation.svg"):
        assert FILE_LIKE.search(alt), alt
    for alt in ("Heatmap of the 6 by 6 attention weights", "Loss falls from 1.8 to 0.02 over 300 steps"):
        assert not FILE_LIKE.search(alt), alt
