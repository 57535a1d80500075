"""Navigation a reader clicks, in headless Chromium on the built site.

The chapter list (primary sidebar) and the page contents (secondary sidebar) each have a toggle
button in the article header. With pydata-sphinx-theme 0.17.1 + sphinx-book-theme 1.3.0 both
did nothing at any width (the scripts bound a hidden copy of each button; the fix and its cause:
book/_ext/site_fixes.py). Here every toggle is clicked as a reader would, at a phone (390 px),
a tablet (800 px) and a laptop (1280 px), with the system in light and in dark mode:

* narrow screens: the toggle opens a panel that is on screen; a link in it is the element under
  the pointer (not covered) and following it navigates; Escape closes the panel;
* wide screens: the chapter list is shown, its toggle hides it and shows it again; the page
  contents are shown beside the article and their links scroll to the section.

One page (chapter 3) per width and theme: the buttons are the same on every page.
"""

from __future__ import annotations

import pytest

from browser import settle, visible_toggle

pytestmark = [pytest.mark.slow, pytest.mark.browser]

PAGE = "notebooks/03_softmax_and_scaling.html"
NEXT_CHAPTER = "04_context_vectors.html"
WIDTHS = {390: 844, 800: 900, 1280: 900}
WIDE = 992  # pydata-sphinx-theme shows the chapter list beside the article from this width on

# Where an element is, whether it is shown, and whether it is what the pointer would hit.
ON_SCREEN_JS = """(element) => {
    const box = element.getBoundingClientRect();
    const style = getComputedStyle(element);
    const x = box.left + Math.min(box.width / 2, 20), y = box.top + box.height / 2;
    const inView = box.width > 0 && box.height > 0 && box.right > 0 && box.bottom > 0
        && box.left < innerWidth && box.top < innerHeight;
    const hit = inView ? document.elementFromPoint(x, y) : null;
    return { inView, visible: style.visibility !== "hidden" && style.display !== "none",
             clickable: Boolean(hit && (hit === element || element.contains(hit))),
             left: box.left, width: box.width };
}"""


@pytest.fixture
def open_at(open_page):
    def _open(width: int, scheme: str, path: str = PAGE):
        return open_page(path, wait_for_math=False, viewport={"width": width, "height": WIDTHS[width]},
                         color_scheme=scheme)

    return _open


def on_screen(locator) -> dict:
    return locator.evaluate(ON_SCREEN_JS)


def dialog_open(page, kind: str) -> bool:
    return page.evaluate(f"() => document.getElementById('pst-{kind}-sidebar-modal').open")


def assert_usable(link, where: str):
    state = on_screen(link)
    assert state["visible"] and state["inView"], f"{where}: the link is not on screen ({state})"
    assert state["clickable"], f"{where}: something covers the link ({state})"


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", list(WIDTHS))
def test_sidebar_toggles_open_usable_panels(open_at, screenshot, width, scheme):
    """The page contents first (their links stay on the page), then the chapter list (its link
    leaves for chapter 4)."""
    page = open_at(width, scheme)
    where = f"{width} px, {scheme}"
    assert page.evaluate("() => document.documentElement.dataset.theme") == scheme, \
        f"{where}: the page does not follow the system colour scheme"
    check_page_contents(page, screenshot, width, scheme, where)
    check_chapter_list(page, screenshot, width, scheme, where)
    assert page.console_errors == [], page.console_errors


def wait_dialog(page, kind: str, is_open: bool):
    page.wait_for_function(f"() => document.getElementById('pst-{kind}-sidebar-modal').open === {str(is_open).lower()}")


def check_chapter_list(page, screenshot, width, scheme, where):
    toggle = visible_toggle(page, "primary")
    assert toggle is not None, f"{where}: no visible chapter-list toggle"
    link = page.locator(f'nav.bd-docs-nav a.reference[href$="{NEXT_CHAPTER}"]').first

    if width >= WIDE:
        sidebar = page.locator("#pst-primary-sidebar")
        assert_usable(link, f"{where}, chapter list beside the article")
        toggle.click()
        page.wait_for_function("(s) => s.getBoundingClientRect().right <= 0 || s.classList.contains('pst-sidebar-hidden')",
                               arg=sidebar.element_handle())
        settle(page)  # the theme's slide-out transition
        assert not on_screen(link)["clickable"], f"{where}: the toggle did not hide the chapter list"
        toggle.click()
        settle(page)
        assert_usable(link, f"{where}, chapter list shown again")
    else:
        assert not dialog_open(page, "primary") and not on_screen(link)["inView"]
        toggle.click()
        wait_dialog(page, "primary", True)
        assert_usable(link, f"{where}, chapter list panel")
        screenshot(page, f"nav-chapter-list-{width}-{scheme}", full_page=False)
        page.keyboard.press("Escape")
        wait_dialog(page, "primary", False)
        gone = "(l) => { const b = l.getBoundingClientRect(); const x = b.left + 5, y = b.top + b.height / 2; " \
               "const hit = document.elementFromPoint(x, y); return !(hit && l.contains(hit)); }"
        page.wait_for_function(gone, arg=link.element_handle())
        assert not on_screen(link)["clickable"], f"{where}: the chapter list stayed on screen after Escape"
        toggle.click()
        wait_dialog(page, "primary", True)
    with page.expect_navigation():
        link.click()
    assert page.url.endswith(NEXT_CHAPTER), f"{where}: following the link went to {page.url}"


def check_page_contents(page, screenshot, width, scheme, where):
    toggle = visible_toggle(page, "secondary")
    links = page.locator("#pst-page-toc-nav a.nav-link, .bd-toc-nav a.nav-link")
    assert links.count() >= 5, f"{where}: the page contents list has {links.count()} links"

    if toggle is None:
        assert width >= 1200, f"{where}: neither the page contents nor their toggle is shown"
    else:
        assert not dialog_open(page, "secondary")
        toggle.click()
        wait_dialog(page, "secondary", True)
        links = page.locator("#pst-secondary-sidebar-modal a.nav-link")
        screenshot(page, f"nav-page-contents-{width}-{scheme}", full_page=False)
        page.keyboard.press("Escape")
        wait_dialog(page, "secondary", False)
        toggle.click()
        wait_dialog(page, "secondary", True)
    link = links.nth(3)
    assert_usable(link, f"{where}, page contents")
    target = link.get_attribute("href")
    assert target.startswith("#"), target
    link.click()
    page.wait_for_function("(hash) => location.hash === hash", arg=target)
    if toggle is not None:
        wait_dialog(page, "secondary", False)  # the panel must not stay open over the section
    settle(page)  # smooth scrolling
    heading = page.locator(f"[id='{target[1:]}'] > :is(h1, h2, h3)").first
    state = on_screen(heading)
    assert state["inView"] and state["clickable"], f"{where}: the section {target} is not shown ({state})"
    # back to the top for the chapter list
    page.evaluate("() => window.scrollTo(0, 0)")
