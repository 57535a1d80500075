"""Figures a reader can read: sharp at any zoom, no text below 9 px (8 px on a phone), numbered per chapter.

In headless Chromium on the built site, at 1280x900 (both sidebars shown, a 672 px text column):

* every figure drawn by a code cell is an SVG (book/_ext/site_figures.py); any other raster image
  has at least twice as many pixels as it is shown with (sharp on a high-density screen);
* no glyph of an SVG figure is smaller than a 9 px font as shown (``browser.FIGURE_FONTS_JS``
  measures every glyph's rendered size; subscripts and superscripts count);

and at 390x844, a phone (a 342 px text column):

* no glyph of any figure is smaller than 8 px: the figures drawn by code cells show their phone
  drawing there (book/_ext/phone_figures.py: panels stacked, text at its own size), and the
  page does not scroll sideways;
* the landing page's diagram keeps its smallest label at 9 px or more (it switches to a
  portrait drawing there).

The per-chapter numbers themselves ("Fig. 3.1") are checked page by page in
test_chapter_pages.py; here a two-page Sphinx project checks that ``{numref}`` links agree with
them (the chapters have no such link yet).
"""

from __future__ import annotations

import textwrap

import pytest

from helpers import ROOT, toc_files

PAGES = toc_files()
MIN_FONT_PX = 9.0
PHONE_MIN_FONT_PX = 8.0  # issue 31: no figure text under 8 CSS px on a 390 px phone


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("name", PAGES)
def test_figures_are_sharp_and_their_text_at_least_9px_at_1280(name, open_page):
    from browser import figure_fonts

    page = open_page(f"{name}.html", wait_for_math=False)  # 1280x900
    page.wait_for_load_state("load")
    problems = []
    for figure in figure_fonts(page, "main article img"):
        where = f"{figure['caption'][:50] or figure['src']}"
        in_output = page.locator(f'.cell_output img[src="{figure["src"]}"]').count() > 0
        if not figure["svg"]:
            if in_output:
                problems.append(f"{where}: a code cell's figure is a raster, not SVG")
            elif figure["naturalWidth"] < 2 * figure["width"] - 1:
                problems.append(f"{where}: {figure['naturalWidth']} px shown at {figure['width']:.0f} px (< 2x)")
        elif figure["glyphs"] and figure["minFontPx"] < MIN_FONT_PX:
            problems.append(f"{where}: smallest glyph {figure['minFontPx']:.1f} px ({figure['smallest']}), "
                            f"{figure['width'] / max(1, figure['naturalWidth']):.2f}x of its size")
    assert not problems, (f"figures below {MIN_FONT_PX} px text or not sharp at 1280 px:\n  " + "\n  ".join(problems)
                          + "\n(narrow the figure's figsize or stack its panels; CONTRIBUTING 'Code, figures')")
    assert page.console_errors == [], page.console_errors


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("name", PAGES)
def test_figures_text_at_least_8px_on_a_390px_phone(name, open_page):
    from browser import PHONE, figure_fonts

    page = open_page(f"{name}.html", wait_for_math=False, viewport=PHONE)
    page.wait_for_load_state("load")
    figures = figure_fonts(page, "main article img")
    shown = page.evaluate("() => [...document.querySelectorAll('main article img')]"
                          ".filter((img) => img.getBoundingClientRect().width > 0).length")
    assert len(figures) == shown, f"{shown - len(figures)} figures were not loaded to be measured"
    problems = []
    for figure in figures:
        where = f"{figure['caption'][:50] or figure['src']}"
        if figure["svg"] and figure["glyphs"] and figure["minFontPx"] < PHONE_MIN_FONT_PX:
            problems.append(f"{where}: smallest glyph {figure['minFontPx']:.1f} px ({figure['smallest']}), "
                            f"{figure['naturalWidth']} px wide shown at {figure['width']:.0f} px")
    assert not problems, (f"figures below {PHONE_MIN_FONT_PX} px text on a 390 px phone:\n  " + "\n  ".join(problems)
                          + "\n(book/_ext/phone_figures.py draws each figure again for phones; a figure it cannot "
                          "re-lay out needs a phone layout: attention_book.plotting.set_phone_drawing)")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"the page scrolls sideways on a phone: {width} px wide"
    assert page.console_errors == [], page.console_errors


@pytest.mark.slow
@pytest.mark.browser
def test_landing_diagram_is_readable_on_a_phone(open_page, screenshot):
    from browser import PHONE, figure_fonts

    page = open_page("book/index.html", wait_for_math=False, viewport=PHONE)
    page.wait_for_load_state("load")
    [diagram] = figure_fonts(page, "article figure img")
    assert diagram["svg"] and diagram["src"].endswith("attention-computation.svg")
    shown = page.evaluate("() => document.querySelector('article figure img').currentSrc")
    assert shown.endswith("attention-computation-phone.svg"), f"the phone shows {shown}"
    assert diagram["minFontPx"] >= MIN_FONT_PX, f"smallest label {diagram['minFontPx']:.1f} px on a phone"
    page.locator("article figure").first.scroll_into_view_if_needed()
    screenshot(page, "landing-diagram-390", full_page=False)
    assert page.console_errors == [], page.console_errors


@pytest.mark.slow
def test_numref_links_show_the_per_chapter_figure_number(tmp_path):
    """Two chapter pages with figures and {numref} links between them: captions and links agree."""
    import subprocess
    import sys

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    source = tmp_path / "src"
    (source / "notebooks").mkdir(parents=True)
    figure, _ = plt.subplots(figsize=(1, 1))
    figure.savefig(source / "notebooks" / "dot.png")
    plt.close(figure)
    (source / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
        extensions = ["myst_parser", "exercise_numbers"]
        numfig = True
        """))
    (source / "index.md").write_text("# Book\n\n```{toctree}\nnotebooks/01_first\nnotebooks/02_second\n```\n")
    (source / "notebooks" / "01_first.md").write_text(textwrap.dedent("""
        # Chapter 1

        ```{figure} dot.png
        :name: fig-01-a

        First figure of chapter 1.
        ```

        ```{figure} dot.png
        :name: fig-01-b

        Second figure of chapter 1.
        ```

        See {numref}`fig-01-b` and {numref}`fig-02-a`.
        """))
    (source / "notebooks" / "02_second.md").write_text(textwrap.dedent("""
        # Chapter 2

        ```{figure} dot.png
        :name: fig-02-a

        First figure of chapter 2.
        ```

        Back to {numref}`fig-01-a`.
        """))
    result = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", str(source), str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    first = (tmp_path / "out" / "notebooks" / "01_first.html").read_text()
    second = (tmp_path / "out" / "notebooks" / "02_second.html").read_text()
    assert '<span class="caption-number">Fig. 1.1 </span>' in first
    assert '<span class="caption-number">Fig. 1.2 </span>' in first
    assert '<span class="caption-number">Fig. 2.1 </span>' in second
    assert '<span class="std std-numref">Fig. 1.2</span>' in first
    assert '<span class="std std-numref">Fig. 2.1</span>' in first
    assert '<span class="std std-numref">Fig. 1.1</span>' in second


@pytest.mark.slow
def test_the_book_build_gives_each_wide_figure_a_phone_drawing(tmp_path):
    """A one-chapter book built with site_figures: the kernel draws the figure twice, the page
    shows the phone drawing on phones (a <picture>), and the files in _images are plain SVGs."""
    import json
    import os
    import re
    import subprocess
    import sys

    sys.path.insert(0, str(ROOT / "book" / "_ext"))
    import phone_figures

    source = tmp_path / "src"
    (source / "notebooks").mkdir(parents=True)
    (source / "conf.py").write_text(textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "book" / "_ext")!r})
        extensions = ["myst_nb", "site_figures"]
        nb_execution_mode = "cache"
        """))
    (source / "index.md").write_text("# Book\n\n```{toctree}\nnotebooks/figures\n```\n")
    drawing = textwrap.dedent("""
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
        for index, ax in enumerate(axes):
            ax.plot(range(5), [index * v for v in range(5)])
            ax.set_title(f"panel {index}")
        plt.show()""").strip()
    small = 'fig, ax = plt.subplots(figsize=(3, 2))\nax.plot([0, 1])\nplt.show()'
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# Figures"}]
    for code, name in ((drawing, "fig-wide"), (small, "fig-small")):
        cells.append({"cell_type": "code", "metadata": {"mystnb": {
            "figure": {"caption": f"The {name}.", "name": name}, "image": {"alt": f"Alt of {name}."}}},
            "execution_count": None, "outputs": [], "source": code})
    notebook = {"cells": cells, "nbformat": 4, "nbformat_minor": 5, "metadata": {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}}
    (source / "notebooks" / "figures.ipynb").write_text(json.dumps(notebook))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(source), str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr
    html = (tmp_path / "out" / "notebooks" / "figures.html").read_text()
    pictures = re.findall(r'<picture><source media="\(max-width: [\d.]+px\)" srcset="\.\./_images/([\w-]+)-phone\.svg">'
                          r'<img alt="Alt of fig-wide\." src="\.\./_images/\1\.svg" /></picture>', html)
    assert len(pictures) == 1, html[html.find("<figure"):][:800]
    assert html.count("<picture>") == 1, "the small figure fits a phone as it is"
    images = tmp_path / "out" / "_images"
    wide = (images / f"{pictures[0]}.svg").read_text()
    phone = (images / f"{pictures[0]}-phone.svg").read_text()
    assert phone_figures.MARKER not in wide and phone_figures.MARKER not in phone
    assert phone_figures.svg_width_px(wide) > phone_figures.PHONE_WIDTH_PX >= phone_figures.svg_width_px(phone)
