"""Headless Chromium against the built static site, with no outside network.

* The site is served from a local ``http.server`` on 127.0.0.1.
* MathJax, which the pages load from a CDN, is served from a local npm copy.
* Every other request to a host that is not 127.0.0.1/localhost is blocked and recorded in
  ``page.external_requests``; console errors and uncaught page errors go to ``page.console_errors``.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from typing import Iterator, Optional
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
MATHJAX_DIR = ROOT / ".cache" / "npm" / "node_modules" / "mathjax"
MATHJAX_PREFIXES = ("https://cdn.jsdelivr.net/npm/mathjax@3/",)
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: The bound of every wait in the browser tests (page loads, selectors, conditions, animations).
#: Each wait ends as soon as its condition holds; the bound only turns a page that never gets there
#: into a failure. It is generous on purpose: `make test` runs three workers on two cores beside
#: notebook kernels, graders and the book build, and a page that a quiet machine loads in a second
#: took more than 120 s there (issue 28). No test waits a fixed time instead of a condition.
WAIT_MS = 600_000

CONTENT_TYPES = {".js": "application/javascript", ".woff": "font/woff", ".woff2": "font/woff2",
                 ".json": "application/json", ".css": "text/css"}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep test output readable
        pass


@contextlib.contextmanager
def serve(directory: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def find_chromium() -> Optional[str]:
    for candidate in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                      "/usr/bin/chromium"):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def launch(playwright, executable: str):
    return playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)


def _is_local(url: str) -> bool:
    host = urlparse(url).hostname or ""
    return url.startswith(("data:", "blob:", "about:")) or host in ("127.0.0.1", "localhost", "::1")


def open_recorded_page(browser, url: str, mathjax_dir: Path, wait_for_math: bool = True,
                       viewport: Optional[dict] = None, color_scheme: str = "light", has_touch: bool = False):
    """A new page (own context) at ``url``: 1280x900 unless ``viewport`` is given, with the system
    colour scheme ``color_scheme`` ("light" or "dark", what ``prefers-color-scheme`` reports) and a
    touch screen when ``has_touch`` (for ``page.tap``)."""
    context = browser.new_context(viewport=viewport or {"width": 1280, "height": 900}, color_scheme=color_scheme,
                                  has_touch=has_touch)
    context.set_default_timeout(WAIT_MS)
    page = context.new_page()
    page.console_errors = []
    page.external_requests = []

    def route(route_obj):
        request_url = route_obj.request.url
        if _is_local(request_url):
            return route_obj.continue_()
        for prefix in MATHJAX_PREFIXES:
            if request_url.startswith(prefix):
                local = mathjax_dir / request_url[len(prefix):].split("?")[0]
                if local.is_file():
                    return route_obj.fulfill(
                        path=str(local),
                        headers={"Content-Type": CONTENT_TYPES.get(local.suffix, "application/octet-stream")},
                    )
        page.external_requests.append(request_url)
        return route_obj.abort()

    context.route("**/*", route)
    page.on("console", lambda msg: page.console_errors.append(f"console.{msg.type}: {msg.text}")
            if msg.type == "error" else None)
    page.on("pageerror", lambda error: page.console_errors.append(f"pageerror: {error}"))
    page.goto(url, wait_until="load")
    if wait_for_math:
        # MathJax 3 typesets after load; wait until it has finished (or is absent on this page).
        page.evaluate(
            "() => (window.MathJax && MathJax.startup && MathJax.startup.promise) "
            "? MathJax.startup.promise : null"
        )
    return page


SETTLED_JS = """() => document.readyState === "complete" && document.fonts.status === "loaded"
    && [...document.images].every((image) => image.complete)"""


def wait_until_settled(page) -> None:
    """Wait until the page, its web fonts and its images have loaded (what axe-core's colour checks
    read). A condition in the page, not Playwright's "networkidle": that lifecycle event is
    Chromium's guess that no request is in flight, and on a loaded two-core machine it once never
    came within WAIT_MS on a page that had finished loading (CI, 2026-11-27)."""
    page.wait_for_function(SETTLED_JS)  # fonts "loaded": document.fonts.ready has resolved


# --------------------------------------------------------------------------- site checks
# Shared by tests/test_site.py and tools/site_report.py (which prints them per page).

AXE_JS = ROOT / ".cache" / "npm" / "node_modules" / "axe-core" / "axe.min.js"
PHONE = {"width": 390, "height": 844}
LAPTOP = {"width": 1280, "height": 900}

OVERFLOW_JS = """() => {
    // px a block would need to scroll sideways: code (cell inputs and code blocks) and outputs
    const worst = (selector, outputs) => Math.max(0, ...[...document.querySelectorAll(selector)]
        .filter((e) => e.offsetParent !== null && Boolean(e.closest(".cell_output")) === outputs)
        .map((e) => e.scrollWidth - e.clientWidth));
    return { code: worst("article pre", false), output: worst("article pre", true) };
}"""

CODE_COLUMN_JS = """() => {
    // how many monospace characters fit on one line of a code cell
    const pre = document.querySelector("article div.cell_input pre");
    if (!pre) return null;
    const probe = document.createElement("span");
    probe.textContent = "x".repeat(100);
    pre.append(probe);
    const charWidth = probe.getBoundingClientRect().width / 100;
    probe.remove();
    const style = getComputedStyle(pre);
    return (pre.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight)) / charWidth;
}"""

IMAGES_JS = """() => [...document.querySelectorAll("main img")].map((img) => {
    const figure = img.closest("figure");
    const caption = figure && figure.querySelector("figcaption");
    return { src: img.getAttribute("src"), alt: img.getAttribute("alt"),
             caption: caption ? caption.innerText.trim() : null, inOutput: Boolean(img.closest(".cell_output")) };
})"""


# Resolves once the page is still: two frames rendered (the last change's styles and layout are
# applied and its transitions have started), every finite animation and transition finished, and
# the scroll position unchanged over two frames (smooth scrolling). Rejects after `bound` ms.
SETTLE_JS = """async (bound) => {
    const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
    const still = (async () => {
        await frame(); await frame();
        const finite = document.getAnimations().filter(
            (a) => Number.isFinite(a.effect?.getComputedTiming().endTime ?? Infinity));
        await Promise.all(finite.map((a) => a.finished.catch(() => null)));
        let position = null, steady = 0;
        while (steady < 2) {
            const now = `${window.scrollX},${window.scrollY}`;
            steady = now === position ? steady + 1 : 0;
            position = now;
            await frame();
        }
    })();
    const late = new Promise((_, fail) => setTimeout(
        () => fail(new Error(`the page did not settle within ${bound} ms`)), bound));
    await Promise.race([still, late]);
}"""


def settle(page) -> None:
    """Wait until ``page`` is still (see ``SETTLE_JS``): instead of sleeping a fixed time after a
    click, a resize or a theme switch, which a busy machine can outlast."""
    page.evaluate(SETTLE_JS, WAIT_MS)


def set_theme(page, theme: str) -> None:
    """pydata-sphinx-theme's light/dark switch: the data-theme attribute of <html>. Returns once
    the colour transitions it starts have finished (a check in between would see a button's
    background half-way from light to dark under its new text colour)."""
    page.evaluate("(theme) => { document.documentElement.dataset.theme = theme; }", theme)
    settle(page)


def code_overflow(page) -> dict:
    return page.evaluate(OVERFLOW_JS)


def code_column_chars(page) -> Optional[float]:
    return page.evaluate(CODE_COLUMN_JS)


def page_width(page, viewport=PHONE) -> int:
    """document width in px once the page is shown at ``viewport`` (wider = sideways scrolling)."""
    page.set_viewport_size(viewport)
    settle(page)
    return page.evaluate("() => document.documentElement.scrollWidth")


def visible_toggle(page, kind: str):
    """The one ``.primary-toggle`` (chapter list) / ``.secondary-toggle`` (page contents) a reader
    can see, or None."""
    toggles = page.locator(f"button.{kind}-toggle")
    shown = [toggles.nth(i) for i in range(toggles.count()) if toggles.nth(i).is_visible()]
    assert len(shown) <= 1, f"{len(shown)} visible {kind} toggles"
    return shown[0] if shown else None


def images(page) -> list:
    return page.evaluate(IMAGES_JS)


def axe_violations(page, impacts=("serious", "critical")) -> list:
    """axe-core's violations of ``impacts`` on the page as it is (served from the local npm copy)."""
    if not page.evaluate("() => Boolean(window.axe)"):
        page.add_script_tag(path=str(AXE_JS))
    results = page.evaluate("""async () => {
        const result = await axe.run(document, { resultTypes: ["violations"] });
        return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.length, targets: v.nodes.slice(0, 3).map((n) => n.target.join(" ")) }));
    }""")
    return [v for v in results if v["impact"] in impacts]


# --------------------------------------------------------------------------- colours and contrast

# For every piece of text in the elements matching ``selector``: its WCAG contrast ratio against
# what is really behind it (background colours composited up the tree, text colour blended by
# its alpha and the opacity of its ancestors). Text over a background image (hatched explorer
# cells) is reported with ratio null. Hidden text (visibility, display, zero size) is skipped.
CONTRAST_JS = """(selector) => {
    const parse = (c) => { const m = c.match(/[\\d.]+/g) || [0, 0, 0, 0];
        return [+m[0], +m[1], +m[2], m.length > 3 ? +m[3] : 1]; };
    const over = (top, bottom) => { const a = top[3];
        return [0, 1, 2].map((i) => top[i] * a + bottom[i] * (1 - a)).concat([1]); };
    const luminance = (c) => { const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255;
        return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
    const background = (element) => {
        const layers = [];
        for (let e = element; e; e = e.parentElement) {
            const style = getComputedStyle(e);
            if (style.backgroundImage !== "none" && !style.backgroundImage.startsWith("url(")) return null;
            const c = parse(style.backgroundColor);
            if (c[3] > 0) layers.push(c);
            if (c[3] >= 1) break;
        }
        let colour = [255, 255, 255, 1];
        for (const layer of layers.reverse()) colour = over(layer, colour);
        return colour;
    };
    const opacity = (element) => { let o = 1;
        for (let e = element; e; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity);
        return o; };
    const out = [];
    for (const root of document.querySelectorAll(selector)) {
        for (const e of [root, ...root.querySelectorAll("*")]) {
            const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
            if (!own || !e.getClientRects().length) continue;
            const style = getComputedStyle(e);
            if (style.visibility === "hidden" || parseFloat(style.fontSize) === 0) continue;
            const bg = background(e);
            const text = (e.innerText || e.textContent).trim().slice(0, 40);
            if (!bg) { out.push({ text, ratio: null }); continue; }
            const fg = parse(style.color);
            const shown = over([fg[0], fg[1], fg[2], fg[3] * opacity(e)], bg);
            const [l1, l2] = [luminance(shown), luminance(bg)].sort((a, b) => b - a);
            out.push({ text, ratio: (l1 + 0.05) / (l2 + 0.05), background: luminance(bg),
                       colour: style.color, where: e.tagName.toLowerCase() + "." + [...e.classList].join(".") });
        }
    }
    return out;
}"""


def text_contrast(page, selector: str) -> list:
    """``[{text, ratio, background (luminance), colour, where}]`` for the text under ``selector``."""
    return page.evaluate(CONTRAST_JS, selector)


def page_background_luminance(page) -> float:
    return page.evaluate("""() => { const c = getComputedStyle(document.body).backgroundColor
        .match(/[\\d.]+/g).map(Number); const [r, g, b] = c.slice(0, 3).map((v) => { v /= 255;
        return v <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b; }""")


# --------------------------------------------------------------------------- figures

# For every figure (<img>) shown in the article: its file type, natural and rendered width, and
# for an SVG the smallest font size a reader sees, in CSS px. matplotlib's SVG draws each glyph
# as a <use> of an outline on a 100-unit em (svg.fonttype "path"), so a glyph's rendered font
# size is 100 x the scale of its screen transform (radicals and big delimiters, drawn from the
# STIXSize* fonts at a size fitted to their content, are not counted); <text> elements (svg.fonttype "none", other
# tools) count with their computed font size times their scale. The file is laid out inline,
# off screen, at the size the <img> has, and measured there.
FIGURE_FONTS_JS = """async (selector) => {
    const out = [];
    for (const img of document.querySelectorAll(selector || "main article img")) {
        const box = img.getBoundingClientRect();
        if (!box.width || !img.complete) continue;
        const src = img.currentSrc || img.src;
        const figure = img.closest("figure");
        const item = { src: img.getAttribute("src"), naturalWidth: img.naturalWidth, width: box.width,
                       svg: /\\.svg([?#]|$)/i.test(src) || src.startsWith("data:image/svg"),
                       minFontPx: null, glyphs: 0, smallest: null,
                       caption: figure && figure.querySelector("figcaption")
                           ? figure.querySelector("figcaption").innerText.trim().slice(0, 80) : "" };
        if (item.svg) {
            const text = await (await fetch(src)).text();
            const holder = document.createElement("div");
            holder.style.cssText = "position:absolute;left:-100000px;top:0;";
            holder.innerHTML = text.slice(text.indexOf("<svg"));
            const svg = holder.querySelector("svg");
            svg.style.width = box.width + "px";
            svg.style.height = box.height + "px";
            document.body.append(holder);
            let min = Infinity, smallest = null;
            const scaleOf = (node) => { const m = node.getScreenCTM();
                return Math.sqrt(m.a * m.a + m.b * m.b); };
            for (const use of svg.querySelectorAll("use")) {
                const ref = use.getAttribute("xlink:href") || use.getAttribute("href") || "";
                const target = ref.startsWith("#") && svg.querySelector(`[id="${ref.slice(1)}"]`);
                // glyph outlines live in <defs> as <path id="DejaVuSans-30">; markers are ids "m0123...".
                // STIXSize* fonts hold mathtext's radicals and big delimiters, drawn at a size
                // chosen to enclose their content (a larger glyph on a smaller em): not text size.
                if (!target || /^#m[0-9a-f]{6,}$/.test(ref) || !/-/.test(ref) || /^#STIXSize/.test(ref)) continue;
                const size = 100 * scaleOf(use);
                item.glyphs += 1;
                if (size < min) { min = size; smallest = ref.slice(1); }
            }
            for (const node of svg.querySelectorAll("text, tspan")) {
                if (!node.textContent.trim() || node.querySelector("tspan")) continue;
                const size = parseFloat(getComputedStyle(node).fontSize) * scaleOf(node);
                item.glyphs += 1;
                if (size < min) { min = size; smallest = node.textContent.trim().slice(0, 20); }
            }
            holder.remove();
            if (item.glyphs) { item.minFontPx = min; item.smallest = smallest; }
        }
        out.push(item);
    }
    return out;
}"""


def figure_fonts(page, selector: str = "main article img") -> list:
    """``[{src, svg, naturalWidth, width, minFontPx, glyphs, smallest, caption}]`` of the figures shown."""
    return page.evaluate(FIGURE_FONTS_JS, selector)
