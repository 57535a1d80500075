"""Measure the explorers on the built static site: redraw latency in headless Chromium, bytes per page.

    python tools/bench_explorers.py                   # uses _build/html (make book), else builds the demo page
    python tools/bench_explorers.py --site DIR        # or ATTENTION_BOOK_SITE=DIR
    python tools/bench_explorers.py --repeats 300

Latency: on the demo page (book/explorers.html) each control gets ``--repeats`` changes; one
change = set the input's value, dispatch its ``input`` / ``change`` event, and force style and
layout of the explorer (what the reader waits for before the browser paints). Timed in the page
with ``performance.now()``. Bytes: for every page that contains explorers, the size of the HTML
the explorers add (the ``<div>`` and its inline module script), read from the built files.
Targets: p95 < 16 ms (one frame at 60 Hz), < 50 KB per page. Writes _build/bench/explorers.md.

Wall-clock times grow with whatever else runs on the machine; the CPU columns do not: a Chromium
trace of the same changes gives the main thread's CPU time per change in the explorer's
JavaScript, style recalculation and layout, and how many layout objects each change dirtied.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tools"))

DEMO_PAGE = "book/explorers.html"
# (explorer, control, kind of control) measured on the demo page
CONTROLS = [
    ("dk", "d_k", "slider"),
    ("dk", "scaled", "checkbox"),
    ("heads", "num_heads", "slider"),
    ("heads", "causal", "checkbox"),
    ("mask", "query_index", "slider"),
    ("mask", "causal", "checkbox"),
    ("playback", "snapshot_index", "slider"),
    ("sampling", "temperature", "slider"),
    ("sampling", "top_k", "slider"),
    ("sampling", "top_p", "slider"),
]
# what each explorer has drawn once it is ready to be measured
READY = {"sampling": "tr.abx-dist-row[data-prob]"}
EXPLORER_HTML = re.compile(r'<div class="abx-static".*?</script>', re.S)
WIDGET_STATE = re.compile(r'<script type="application/vnd.jupyter.widget-state\+json">.*?</script>', re.S)

MEASURE_JS = """
async ({ kind, name, type, repeats }) => {
  const root = document.querySelector(`[data-explorer="${kind}"]`);
  const input = root.querySelector(`[data-control="${name}"]`);
  const handler = [], total = [];
  for (let i = 0; i < repeats; i++) {
    let event = "change";
    if (type === "slider") {
      const next = Number(input.value) + 1;
      input.value = String(next > Number(input.max) ? Number(input.min) : next);
      event = "input";
    } else {
      input.checked = !input.checked;
    }
    const start = performance.now();
    input.dispatchEvent(new Event(event, { bubbles: true }));
    const handled = performance.now();
    void root.offsetHeight;  // force style + layout of the redrawn explorer
    handler.push(handled - start);
    total.push(performance.now() - start);
    await new Promise((resolve) => requestAnimationFrame(() => resolve()));  // paint, as between real inputs
  }
  return { handler, total };
}
"""


def build_demo_site(output: Path) -> Path:
    """Build only the index and the demo page (private TOC), as the book build does."""
    toc = output / "toc.yml"
    toc.write_text("format: jb-book\nroot: book/index\nchapters:\n  - file: book/explorers\n")
    env = dict(os.environ, ATTENTION_BOOK_STATIC="1", MPLBACKEND="Agg")
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "--toc", str(toc),
               "--path-output", str(output)]
    subprocess.run(command, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return output / "_build" / "html"


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


TRACED = {"EventDispatch": "js", "UpdateLayoutTree": "style", "Layout": "layout"}


def traced_cpu(browser, page, arguments) -> dict:
    """Main-thread CPU ms per change (JS, style, layout) and the median layout objects dirtied."""
    browser.start_tracing(page=page, categories=["devtools.timeline", "disabled-by-default-devtools.timeline"])
    page.evaluate(MEASURE_JS, arguments)
    events = json.loads(browser.stop_tracing())["traceEvents"]
    cpu = dict.fromkeys(TRACED.values(), 0.0)
    dirty = []
    for event in events:
        if event.get("ph") == "X" and event.get("name") in TRACED:
            cpu[TRACED[event["name"]]] += event.get("tdur", event.get("dur", 0)) / 1000
        if event.get("name") == "Layout":
            begin = event.get("args", {}).get("beginData", {})
            if "dirtyObjects" in begin:
                dirty.append(begin["dirtyObjects"])
    per_change = {key: value / arguments["repeats"] for key, value in cpu.items()}
    per_change["dirty"] = statistics.median(dirty) if dirty else 0
    return per_change


def measure_latency(site: Path, repeats: int):
    from browser import MATHJAX_DIR, find_chromium, launch, open_recorded_page, serve
    from playwright.sync_api import sync_playwright

    rows = []
    with serve(site) as url, sync_playwright() as playwright:
        browser = launch(playwright, find_chromium() or "/usr/bin/chromium")
        page = open_recorded_page(browser, f"{url}/{DEMO_PAGE}", MATHJAX_DIR,
                                  wait_for_math=(MATHJAX_DIR / "es5").is_dir())
        for kind in {kind for kind, _, _ in CONTROLS}:
            ready = READY.get(kind, "td.abx-cell[data-weight]")
            page.wait_for_selector(f'[data-explorer="{kind}"] {ready}', state="attached", timeout=15_000)
        for kind, name, control_type in CONTROLS:
            page.evaluate(MEASURE_JS, {"kind": kind, "name": name, "type": control_type, "repeats": 20})  # warm-up
            times = page.evaluate(MEASURE_JS, {"kind": kind, "name": name, "type": control_type,
                                               "repeats": repeats})
            handler, total = times["handler"], times["total"]
            p95 = percentile(total, 0.95)
            cpu = traced_cpu(browser, page, {"kind": kind, "name": name, "type": control_type,
                                             "repeats": min(repeats, 60)})
            rows.append([kind, f"{name} ({control_type})",
                         f"{cpu['js']:.2f} / {cpu['style']:.2f} / {cpu['layout']:.2f}",
                         f"{cpu['js'] + cpu['style'] + cpu['layout']:.2f}", f"{cpu['dirty']:.0f}",
                         f"{statistics.median(handler):.2f} / {percentile(handler, 0.95):.2f}",
                         f"{statistics.median(total):.2f}", f"{p95:.2f}", f"{max(total):.2f}",
                         "ok" if p95 < 16 else "OVER"])
        problems = page.console_errors + page.external_requests
        browser.close()
    return rows, problems


def measure_bytes(site: Path):
    rows = []
    for path in sorted(site.rglob("*.html")):
        html = path.read_text(encoding="utf-8")
        blocks = EXPLORER_HTML.findall(html)
        if not blocks:
            continue
        kinds = [re.search(r'data-explorer-root="([^"]+)"', block).group(1) for block in blocks]
        sizes = [len(block.encode("utf-8")) for block in blocks]
        state = sum(len(m.encode("utf-8")) for m in WIDGET_STATE.findall(html))
        total = sum(sizes) + state
        rows.append([path.relative_to(site).as_posix(),
                     ", ".join(f"{kind} {size / 1024:.1f}" for kind, size in zip(kinds, sizes)),
                     f"{state / 1024:.1f}", f"{total / 1024:.1f}", f"{len(html.encode('utf-8')) / 1024:.1f}",
                     "ok" if total < 50 * 1024 else "OVER"])
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", type=Path, default=os.environ.get("ATTENTION_BOOK_SITE"))
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args(argv)
    from bench import write

    with tempfile.TemporaryDirectory() as scratch:
        site = args.site or ROOT / "_build" / "html"
        if not (Path(site) / DEMO_PAGE).is_file():
            print(f"{site}/{DEMO_PAGE} not found: building the demo page", flush=True)
            site = build_demo_site(Path(scratch))
        site = Path(site)
        latency, problems = measure_latency(site, args.repeats)
        sizes = measure_bytes(site)

    notes = (
        f"Latency: {args.repeats} changes per control on {DEMO_PAGE} in headless Chromium; input-to-redraw = "
        "dispatch the input/change event (the explorer's JavaScript recomputes and updates the DOM: "
        "'JS handler') and force style + layout of the page; painting excluded, one frame between changes. "
        "Target p95 < 16 ms. CPU columns: main-thread CPU time per change from a Chromium trace (up to 60 "
        "changes), independent of other load on the machine.\n\n"
        "| page | explorers (KB each) | widget state (KB) | explorers total (KB) | page (KB) | < 50 KB |\n"
        "|---|---|---|---|---|---|\n"
        + "\n".join("| " + " | ".join(row) + " |" for row in sizes)
        + "\n\nBytes: the HTML the explorers add to each built page (div + inline module script, which carries "
        "the gzip+base64 module, CSS and data); widget state is what myst-nb would embed for live widgets "
        "(0 when the book build runs with ATTENTION_BOOK_STATIC=1)."
        + (f"\n\nPROBLEMS on the page: {problems}" if problems else "")
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    notes = (f"Load average during the run: {load:.1f} on {os.cpu_count()} cores (other work on the machine "
             "inflates p95 and max).\n\n" + notes)
    write("explorers", "Explorers on the static site",
          ["explorer", "control", "CPU per change: JS / style / layout ms", "CPU total ms",
           "layout objects dirtied", "JS handler median / p95 ms", "input-to-redraw median ms", "p95 ms", "max ms",
           "p95 < 16 ms"], latency, notes)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
