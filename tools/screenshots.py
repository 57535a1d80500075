"""Named screenshots of the built site, for before/after comparisons in issue notes.

    python tools/screenshots.py --prefix after [--site _build/html] [--out _build/screenshots]

Each view is what a reader sees at one place (a width, a colour scheme, a click). Run it on two
builds (e.g. main before a change and the branch after it) with prefixes ``before`` and ``after``
and compare the PNGs of the same name. Needs ``make book`` and the browser-test setup (Chromium,
Playwright and the local MathJax copy that ``make test`` installs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import browser  # noqa: E402  (tests/browser.py: local server, MathJax from the npm copy)
from browser import LAPTOP, PHONE  # noqa: E402

CH03 = "notebooks/03_softmax_and_scaling.html"
CH04 = "notebooks/04_context_vectors.html"
CH05 = "notebooks/05_multi_head_attention.html"
CH10 = "notebooks/*_attention_at_scale.html"  # chapter 9 before the GPT chapter came in
EXPLORERS = "book/explorers.html"


def element(page, selector: str, index: int = 0):
    found = page.locator(f"{selector} >> visible=true").nth(index)
    found.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    return found


def chapter_list_opened(page):
    browser.visible_toggle(page, "primary").click()
    page.wait_for_timeout(600)
    return page


def first_solution_opened(page):
    solution = element(page, "div.solution.dropdown")
    solution.locator("summary, .admonition-title").first.click()
    page.wait_for_timeout(400)
    return solution


# name -> (page, viewport, colour scheme, what to capture: None = the viewport)
VIEWS = {
    "nav-phone-390-chapter-list-toggle-clicked": (CH03, PHONE, "light", chapter_list_opened),
    "ch05-top-1280": (CH05, LAPTOP, "light", None),
    "ch05-figure-2-1280": (CH05, LAPTOP, "light", lambda p: element(p, "main img", 1)),
    "ch05-figure-5-1280": (CH05, LAPTOP, "light", lambda p: element(p, "main img", 4)),
    "ch05-first-solution-opened-1280": (CH05, LAPTOP, "light", first_solution_opened),
    # figures on a phone (their phone drawings, book/_ext/phone_figures.py)
    "ch03-figure-1-390": (CH03, PHONE, "light", lambda p: element(p, "main img", 0)),
    "ch04-figure-3-390": (CH04, PHONE, "light", lambda p: element(p, "main img", 2)),
    "ch05-figure-2-390": (CH05, PHONE, "light", lambda p: element(p, "main img", 1)),
    "ch05-figure-5-390": (CH05, PHONE, "light", lambda p: element(p, "main img", 4)),
    "ch10-figure-1-390": (CH10, PHONE, "light", lambda p: element(p, "main img", 0)),
    "dark-ch03-self-check-1280": (
        CH03, LAPTOP, "dark", lambda p: element(p, ".cell_output:has-text('PASS')")),
    "dark-ch10-table-1280": (CH10, LAPTOP, "dark", lambda p: element(p, "main table")),
    "explorer-heads-1280": (
        EXPLORERS, LAPTOP, "light", lambda p: element(p, "[data-explorer-root=heads]")),
    "explorer-dk-390": (EXPLORERS, PHONE, "light", lambda p: element(p, "[data-explorer-root=dk]")),
    "explorer-mask-390": (
        EXPLORERS, PHONE, "light", lambda p: element(p, "[data-explorer-root=mask]")),
    "explorer-sampling-1280": (
        EXPLORERS, LAPTOP, "dark", lambda p: element(p, "[data-explorer-root=sampling]")),
    "landing-diagram-390": (
        "book/index.html", PHONE, "light", lambda p: element(p, "main picture img, main img[alt^='Diagram']")),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", required=True, help="e.g. before or after")
    parser.add_argument("--site", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "screenshots")
    parser.add_argument("--only", default="", help="comma-separated view names (default: every view)")
    args = parser.parse_args()
    only = [name for name in args.only.split(",") if name]
    unknown = sorted(set(only) - set(VIEWS))
    if unknown:
        parser.error(f"--only {','.join(unknown)}: no such view; the views are {', '.join(VIEWS)}")
    if not (args.site / "index.html").is_file():
        parser.error(f"--site {args.site}: no index.html there; build the book first (make book)")
    chromium = browser.find_chromium()
    if chromium is None:
        parser.error("no Chromium found; install it (tools/setup.sh) or set CHROMIUM")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with browser.serve(args.site) as url, sync_playwright() as playwright:
        chrome = browser.launch(playwright, chromium)
        missing = []
        for name, (path, viewport, scheme, capture) in VIEWS.items():
            if only and name not in only:
                continue
            found = sorted(args.site.glob(path))
            if not found:  # an older build may lack a page (e.g. the sampling explorer's chapter)
                missing.append(f"{name}: no page {path}")
                continue
            path = found[-1].relative_to(args.site).as_posix()
            page = browser.open_recorded_page(chrome, f"{url}/{path}", browser.MATHJAX_DIR,
                                              viewport=viewport, color_scheme=scheme)
            page.set_default_timeout(10_000)
            try:
                page.wait_for_timeout(800)  # explorers render after load
                target = capture(page) if capture else None
                shot = args.out / f"{args.prefix}-{name}.png"
                shown = page if target is None or target is page else target
                shown.screenshot(path=str(shot))
                print(shot)
            except Exception as error:  # what an older build does not have is listed, not fatal
                missing.append(f"{name}: {type(error).__name__}: {str(error).splitlines()[0][:120]}")
            finally:
                page.context.close()
        chrome.close()
    for line in missing:
        print(f"not taken: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
