"""The static HTML packager: an explorer that works on the published site with no kernel.

For the static book (``ATTENTION_BOOK_STATIC=1``, set by ``make book``) every explorer also returns
a self-contained ``text/html`` fallback: a ``<div>`` plus an inline ``<script type="module">`` that
runs the same ES module (``explorer.js``) against a tiny stand-in for the widget model, so the
published page stays interactive without a kernel, a widget manager or any outside script.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import itertools
import json
import os
import pathlib
import re
from typing import Any, Dict, Tuple

__all__ = ["CSS", "ESM", "STATIC_ENV", "static_build", "static_html"]

STATIC_ENV = "ATTENTION_BOOK_STATIC"
_HERE = pathlib.Path(__file__).parent
ESM = (_HERE / "explorer.js").read_text(encoding="utf-8")
CSS = (_HERE / "explorer.css").read_text(encoding="utf-8")
_EXPORT_LINE = "export default { render };"
_static_counter = itertools.count(1)
# Module code keys already sent to the page by this kernel: in the book build one kernel runs one
# notebook, i.e. one page, so the explorers after the first on a page reuse its module code.
_sent_in_kernel: set = set()


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def static_build() -> bool:
    """True in the book build (the kernel inherits ``ATTENTION_BOOK_STATIC=1`` from it)."""
    return os.environ.get(STATIC_ENV) == "1"


def static_html(kind: str, state: Dict[str, Any], once_per_page: bool = False) -> str:
    """Self-contained HTML (div + inline module script) that renders one explorer without a kernel.

    The module code, the CSS and the explorer's ``state`` travel gzip-compressed and
    base64-encoded; the browser inflates them with ``DecompressionStream``, runs the module against
    a stand-in widget model, and reuses the module for further explorers on the page. With
    ``once_per_page`` inside a kernel (the book build), only the first explorer a kernel shows
    carries the module code (about 10 KB); the later ones on the same page reuse it.
    """
    state_json = json.dumps(state, allow_nan=False, separators=(",", ":"))
    digest = hashlib.sha1(state_json.encode()).hexdigest()[:8]
    element_id = f"abx-{kind}-{next(_static_counter)}-{digest}"
    code_key, code = _static_payload()
    if once_per_page and _in_kernel():
        if code_key in _sent_in_kernel:
            code = ""
        _sent_in_kernel.add(code_key)
    return (
        f'<div class="abx-static" id="{element_id}" data-explorer-root="{kind}">'
        "<p>Interactive explorer: it needs JavaScript and a browser from 2023 or later.</p></div>\n"
        '<script type="module">\n'
        f'const id = "{element_id}", key = "{code_key}";\n'
        f'const code = "{code}";\n'
        f'const data = "{_gzip_b64(state_json)}";\n'
        f"{_LOADER}\n"
        "</script>"
    )


# Runs inside the page: inflate the payloads, load the module once per page, render.
_LOADER = """\
const inflate = async (b64) => new Response(new Blob([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
const modules = (window.__abxModules = window.__abxModules || {});
if (!modules[key] && !code) throw new Error("explorer module " + key + " missing: an earlier explorer on this page carries it");
modules[key] = modules[key] || inflate(code).then((text) => {
const { css, js } = JSON.parse(text);
const style = document.createElement("style");
style.textContent = css;
document.head.append(style);
return new Function(js)();
});
const explorer = await modules[key];
const el = document.getElementById(id);
el.replaceChildren();
explorer.render({ model: explorer.standInModel(JSON.parse(await inflate(data))), el });"""

# A stand-in for the widget model (get/set/on/off/save_changes): on the static page the explorer's
# state lives only in the browser. set() fires "change:<name>" at once, as Backbone models do.
_STAND_IN_MODEL = """\
function standInModel(state) {
const handlers = {};
return {
get: (name) => state[name],
set: (name, value) => { if (state[name] === value) return; state[name] = value; (handlers["change:" + name] || []).slice().forEach((f) => f()); },
on: (event, f) => { (handlers[event] = handlers[event] || []).push(f); },
off: (event, f) => { if (!event) { for (const key in handlers) delete handlers[key]; return; } handlers[event] = f ? (handlers[event] || []).filter((g) => g !== f) : []; },
save_changes: () => {},
send: () => {},
};
}"""


def _minify_js(source: str) -> str:
    """Drop comment-only lines, indentation and blank lines (the file is written to allow this)."""
    lines = []
    for line in source.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("//"):
            lines.append(stripped)
    return "\n".join(lines)


def _minify_css(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    return "\n".join(line.strip() for line in source.splitlines() if line.strip())


def _gzip_b64(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


@functools.lru_cache(maxsize=None)
def _static_payload() -> Tuple[str, str]:
    """``(key, base64 gzip of {css, js})``; js is the ES module as a function body returning its export."""
    code = _minify_js(ESM)
    if code.count(_EXPORT_LINE) != 1 or not code.rstrip().endswith(_EXPORT_LINE):
        raise RuntimeError(f"explorer.js must end with the line {_EXPORT_LINE!r}")
    body = code.replace(_EXPORT_LINE, _STAND_IN_MODEL + "\nreturn { render, standInModel };")
    payload = json.dumps({"css": _minify_css(CSS), "js": body}, separators=(",", ":"))
    return hashlib.sha1(payload.encode()).hexdigest()[:12], _gzip_b64(payload)
