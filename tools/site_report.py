"""Per-page report of the built site in headless Chromium: fit, width on a phone, accessibility.

    python tools/site_report.py                 # _build/html (make book)
    python tools/site_report.py --site DIR      # or ATTENTION_BOOK_SITE=DIR

For every page of _toc.yml: how many monospace characters fit a code line at 1280x900, the
largest sideways overflow of a code block and of an output block at 1280 px, the page width at
390 px, axe-core's serious/critical violations in the light and the dark theme, the figures
(how many, how many SVG) and the smallest glyph of any figure at 1280 px, the lowest text
contrast of an output with the system in dark mode, and the page weight (HTML + images). The
same checks, as pass/fail, are tests/test_site.py, test_figures.py, test_dark_mode.py.
Writes _build/bench/site.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))


def report(site: Path):
    from browser import (LAPTOP, MATHJAX_DIR, PHONE, axe_violations, code_column_chars, code_overflow, figure_fonts,
                         find_chromium, launch, open_recorded_page, page_width, serve, set_theme, text_contrast)
    from helpers import toc_files
    from playwright.sync_api import sync_playwright

    rows = []
    with serve(site) as url, sync_playwright() as playwright:
        browser = launch(playwright, find_chromium() or "/usr/bin/chromium")
        for name in toc_files():
            if not (site / f"{name}.html").is_file():
                rows.append([name, "missing"] + [""] * 10)
                continue
            page = open_recorded_page(browser, f"{url}/{name}.html", MATHJAX_DIR)
            page.set_viewport_size(LAPTOP)
            chars = code_column_chars(page)
            overflow = code_overflow(page)
            figures = figure_fonts(page)
            smallest = min((f["minFontPx"] for f in figures if f["minFontPx"]), default=None)
            light = axe_violations(page)
            set_theme(page, "dark")
            dark = axe_violations(page)
            set_theme(page, "light")
            width = page_width(page, PHONE)
            page.context.close()
            dark_page = open_recorded_page(browser, f"{url}/{name}.html", MATHJAX_DIR, color_scheme="dark")
            ratios = [t["ratio"] for t in text_contrast(dark_page, ".bd-article div.cell_output") if t["ratio"]]
            dark_page.context.close()
            shown = [(site / name).parent.joinpath(f["src"]).resolve() for f in figures]
            weight = (site / f"{name}.html").stat().st_size + sum(p.stat().st_size for p in shown if p.is_file())

            def axe(violations):
                return (f"{sum(v['nodes'] for v in violations)} ({', '.join(sorted({v['id'] for v in violations}))})"
                        if violations else "0")

            rows.append([name, "-" if chars is None else f"{chars:.1f}", str(overflow["code"]), str(overflow["output"]),
                         str(width), axe(light), axe(dark), f"{len(figures)} ({sum(f['svg'] for f in figures)})",
                         "-" if smallest is None else f"{smallest:.1f}", f"{min(ratios):.1f}" if ratios else "-",
                         f"{weight / 1024:.0f}"])
            print(" | ".join(rows[-1]), flush=True)
        browser.close()
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=os.environ.get("ATTENTION_BOOK_SITE") or ROOT / "_build" / "html")
    args = parser.parse_args(argv)
    rows = report(Path(args.site))
    from bench import write

    write("site", "The site per page (headless Chromium)",
          ["page", "chars per code line at 1280 px", "largest code overflow at 1280 px (px)",
           "largest output overflow at 1280 px (px)", "page width at 390 px", "axe serious+critical, light (nodes)",
           "axe serious+critical, dark (nodes)", "figures (SVG)", "smallest figure glyph at 1280 px (px)",
           "lowest output contrast, system dark", "HTML + figures (KiB)"], rows,
          f"Site: {args.site}. Overflow = scrollWidth - clientWidth of the widest block (0: no sideways "
          "scrolling). Page width at 390 px above 390 = the page scrolls sideways on a phone.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
