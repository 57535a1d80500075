"""The explorers on the static site, driven in headless Chromium (no Python kernel behind the page).

The demo page book/explorers shows all four explorers with the journey inputs, demo_weights(123)
and demo_training(0). These tests move the sliders like a reader (keyboard and mouse), read the
weights the JavaScript drew from each cell's data-weight attribute, and compare them with torch.
"""

from __future__ import annotations

import math
import random
import re

import pytest
import torch

from attention_book.data import journey_inputs
from attention_book.explorers import (
    demo_training,
    demo_weights,
    dk_explorer,
    divisors,
    heads_explorer,
    training_playback,
)

PAGE = "book/explorers.html"
SEED = 123  # the seed book/explorers.ipynb passes to demo_weights
TRAINING_SEED = 0  # ... and to demo_training
ATOL = 1e-6
# the heatmaps a reader sees: the heads explorer keeps its other layouts built but hidden
VISIBLE_MAPS = ".abx-map[data-head]:not(.abx-config:not(.abx-shown) .abx-map)"

pytestmark = pytest.mark.browser


# --------------------------------------------------------------------------- reference and helpers


def torch_weights(columns: slice, causal: bool = False, scaled: bool = True) -> torch.Tensor:
    """softmax((x Wq[:, cols]) (x Wk[:, cols])^T / sqrt(d) + causal mask), in plain torch."""
    _, x = journey_inputs()
    W_query, W_key, _ = demo_weights(seed=SEED)
    queries, keys = x.double() @ W_query.double()[:, columns], x.double() @ W_key.double()[:, columns]
    d = queries.shape[1]
    scores = queries @ keys.T / (math.sqrt(d) if scaled else 1.0)
    if causal:
        future = torch.triu(torch.ones(len(x), len(x), dtype=torch.bool), diagonal=1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1)


def drawn_weights(page, kind: str) -> torch.Tensor:
    """(heads, T, T) weights read from the data-weight attributes of the explorer's heatmaps."""
    nested = page.evaluate(
        """(kind) => {
            const root = document.querySelector(`[data-explorer="${kind}"]`);
            return [...root.querySelectorAll(`${visible}`)].map((map) =>
                [...map.querySelectorAll("tbody tr")].map((tr) =>
                    [...tr.querySelectorAll("td.abx-cell")].map((td) => Number(td.dataset.weight))));
        }""".replace("${visible}", VISIBLE_MAPS),
        kind,
    )
    return torch.tensor(nested, dtype=torch.float64)


def control(page, kind: str, name: str):
    return page.locator(f'[data-explorer="{kind}"] [data-control="{name}"]').first


def key_to(page, kind: str, name: str, position: int) -> None:
    """Move a slider with the keyboard: Home (its minimum), then ArrowRight ``position`` times."""
    slider = control(page, kind, name)
    slider.focus()
    slider.press("Home")
    for _ in range(position):
        slider.press("ArrowRight")
    assert int(slider.input_value()) == int(slider.get_attribute("min")) + position


def heatmap_signature(page, kind: str):
    """What the reader sees change: the drawn weights and the highlighted query row."""
    selected = page.locator(f'[data-explorer="{kind}"] tr.abx-selected')
    return drawn_weights(page, kind).tolist(), selected.first.get_attribute("data-row") if selected.count() else None


def drag(page, kind: str, name: str, fraction: float) -> None:
    """Drag a slider's thumb with the mouse from its left end to ``fraction`` of its width."""
    slider = control(page, kind, name)
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + 2, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * fraction, y, steps=8)
    page.mouse.up()


@pytest.fixture
def explorers_page(open_page, site_dir):
    assert (site_dir / PAGE).is_file(), f"{PAGE} is not in the built site: list book/explorers in _toc.yml"
    page = open_page(PAGE)
    for kind in ("dk", "heads", "mask", "playback"):
        page.wait_for_selector(f'[data-explorer="{kind}"] td.abx-cell[data-weight]')
    return page


def assert_clean(page):
    assert page.console_errors == [], page.console_errors
    assert page.external_requests == [], page.external_requests


# --------------------------------------------------------------------------- the math equals torch


def test_dk_explorer_math_equals_torch(explorers_page):
    page = explorers_page
    rng = random.Random(1)
    settings = [(8, True), (1, False)] + [(rng.randint(1, 8), rng.random() < 0.5) for _ in range(4)]
    for d_k, scaled in settings:
        key_to(page, "dk", "d_k", d_k - 1)  # the slider runs from 1
        control(page, "dk", "scaled").set_checked(scaled)
        drawn = drawn_weights(page, "dk")
        expected = torch_weights(slice(0, d_k), scaled=scaled)
        assert drawn.shape == (1, 6, 6)
        assert torch.allclose(drawn[0], expected, atol=ATOL, rtol=0), f"d_k={d_k}, scaled={scaled}"
        maxima = page.locator('[data-explorer="dk"] td[data-stat="max"]').evaluate_all(
            "(cells) => cells.map((c) => Number(c.dataset.value))")
        assert torch.allclose(torch.tensor(maxima, dtype=torch.float64), expected.max(-1).values, atol=ATOL)
    assert_clean(page)


def test_heads_explorer_math_equals_torch(explorers_page):
    page = explorers_page
    options = divisors(8)
    for causal in (False, True):
        control(page, "heads", "causal").set_checked(causal)
        for position, num_heads in enumerate(options):
            key_to(page, "heads", "num_heads", position)
            drawn = drawn_weights(page, "heads")
            head_dim = 8 // num_heads
            assert drawn.shape == (num_heads, 6, 6)
            for head in range(num_heads):
                expected = torch_weights(slice(head * head_dim, (head + 1) * head_dim), causal=causal)
                assert torch.allclose(drawn[head], expected, atol=ATOL, rtol=0), (num_heads, head, causal)
    assert_clean(page)


def test_mask_explorer_math_equals_torch(explorers_page):
    page = explorers_page
    rng = random.Random(2)
    settings = [(True, 2), (False, 2), (True, 0), (True, 5)] + [(rng.random() < 0.5, rng.randint(0, 5))
                                                                for _ in range(3)]
    for causal, query in settings:
        control(page, "mask", "causal").set_checked(causal)
        key_to(page, "mask", "query_index", query)
        drawn = drawn_weights(page, "mask")[0]
        expected = torch_weights(slice(0, 8), causal=causal)
        assert torch.allclose(drawn, expected, atol=ATOL, rtol=0), f"causal={causal}, query={query}"
        if causal:
            assert torch.all(drawn.triu(1) == 0), "masked weights must be exactly 0"
            assert page.locator('[data-explorer="mask"] td.abx-masked').count() == 15
        else:
            assert page.locator('[data-explorer="mask"] td.abx-masked').count() == 0
        selected = page.locator('[data-explorer="mask"] tr.abx-selected')
        assert selected.count() == 1 and selected.get_attribute("data-row") == str(query)
        sums = page.locator('[data-explorer="mask"] td[data-stat="row_sum"]').evaluate_all(
            "(cells) => cells.map((c) => Number(c.dataset.value))")
        assert all(abs(total - 1) < 1e-12 for total in sums)
    assert_clean(page)


def test_training_playback_shows_the_saved_snapshots(explorers_page):
    page = explorers_page
    _, snapshots, _ = demo_training(seed=TRAINING_SEED)
    for index in (0, 1, 7, 13, len(snapshots) - 1):
        key_to(page, "playback", "snapshot_index", index)
        step, weights = snapshots[index]
        assert torch.allclose(drawn_weights(page, "playback"), weights.double(), atol=ATOL, rtol=0), step
        assert f"step {step} " in page.locator('[data-explorer="playback"] .abx-status').inner_text()
    assert_clean(page)


# --------------------------------------------------------------------------- reader interaction


MAIN_SLIDERS = {"dk": ("d_k", 0.99), "heads": ("num_heads", 0.99), "mask": ("query_index", 0.95),
                "playback": ("snapshot_index", 0.6)}


@pytest.mark.parametrize("kind", list(MAIN_SLIDERS))
def test_dragging_and_keyboard_change_the_heatmap(explorers_page, screenshot, kind):
    page = explorers_page
    name, fraction = MAIN_SLIDERS[kind]
    slider = control(page, kind, name)
    page.locator(f'[data-explorer="{kind}"]').scroll_into_view_if_needed()
    screenshot(page, f"explorer-{kind}-before", full_page=False)
    value_before, drawn_before = slider.input_value(), heatmap_signature(page, kind)

    drag(page, kind, name, fraction)
    value_dragged, drawn_dragged = slider.input_value(), heatmap_signature(page, kind)
    assert value_dragged != value_before, "dragging the slider did not move it"
    assert drawn_dragged != drawn_before, "dragging the slider did not change the heatmap"

    page.evaluate("() => { window.__leakedKeys = []; document.addEventListener('keydown', "
                  "(e) => window.__leakedKeys.push(e.key)); }")
    slider.focus()
    slider.press("ArrowLeft")
    assert int(slider.input_value()) == int(value_dragged) - 1, "the arrow key did not move the slider"
    assert heatmap_signature(page, kind) != drawn_dragged, "the arrow key did not change the heatmap"
    assert page.evaluate("() => window.__leakedKeys") == [], \
        "keydown reached the document: JupyterLab would take the arrow keys away from the slider"
    screenshot(page, f"explorer-{kind}-after", full_page=False)
    assert_clean(page)


def test_toggles_and_play_button_work(explorers_page):
    page = explorers_page
    before = drawn_weights(page, "dk")
    control(page, "dk", "scaled").focus()
    page.keyboard.press("Space")  # keyboard toggles the checkbox
    assert not control(page, "dk", "scaled").is_checked()
    assert not torch.equal(before, drawn_weights(page, "dk"))
    key_to(page, "playback", "snapshot_index", 0)
    control(page, "playback", "play").click()
    page.wait_for_function(
        """() => Number(document.querySelector('[data-explorer="playback"] [data-control="snapshot_index"]').value) >= 2""")
    control(page, "playback", "play").click()  # pause
    assert_clean(page)


def test_controls_are_labelled_and_ids_are_unique(explorers_page):
    page = explorers_page
    report = page.evaluate(
        """() => {
            const ids = [...document.querySelectorAll("[id]")].map((e) => e.id);
            const ours = [...document.querySelectorAll(".abx-static, .abx-static [id]")].map((e) => e.id);
            const inputs = [...document.querySelectorAll(".abx input, .abx select")];
            return {
                duplicates: ours.filter((id) => ids.indexOf(id) !== ids.lastIndexOf(id)),
                unlabelled: inputs.filter((i) => !document.querySelector(`label[for="${i.id}"]`)).map((i) => i.outerHTML),
                noValueText: inputs.filter((i) => i.type === "range" && !i.getAttribute("aria-valuetext")).length,
                inputs: inputs.length,
            };
        }"""
    )
    assert report["inputs"] == 10  # d_k, scaled | heads, causal | causal, query | step | T, k, p (play: a button)
    assert report["duplicates"] == [] and report["unlabelled"] == [] and report["noValueText"] == 0
    assert_clean(page)


# --------------------------------------------------------------------------- the fallback on its own


def test_same_explorer_twice_on_one_page_works_independently(browser, mathjax_dir, tmp_path):
    """Two copies of one explorer (plus another) in a plain page: both render, each keeps its own state."""
    from browser import open_recorded_page, serve

    tokens, x = journey_inputs()
    W_query, W_key, _ = demo_weights(seed=SEED)
    explorer = dk_explorer(tokens, x, W_query, W_key, d_k=8)
    body = "\n".join([explorer.static_html(), explorer.static_html(),
                      heads_explorer(tokens, x, W_query, W_key).static_html()])
    (tmp_path / "twice.html").write_text(f"<!doctype html><html><head><meta charset='utf-8'></head>"
                                         f"<body>{body}</body></html>")
    with serve(tmp_path) as url:
        page = open_recorded_page(browser, f"{url}/twice.html", mathjax_dir, wait_for_math=False)
        try:
            page.wait_for_function(f"() => document.querySelectorAll('{VISIBLE_MAPS}').length === 4")
            roots = page.locator('[data-explorer="dk"]')
            assert roots.count() == 2
            first_slider = roots.nth(0).locator('[data-control="d_k"]')
            first_slider.focus()
            first_slider.press("Home")  # d_k = 1 in the first copy only

            def weights(i):
                return torch.tensor(roots.nth(i).locator("td.abx-cell").evaluate_all(
                    "(cells) => cells.map((c) => Number(c.dataset.weight))"), dtype=torch.float64).view(6, 6)

            assert torch.allclose(weights(0), torch_weights(slice(0, 1)), atol=ATOL, rtol=0)
            assert torch.allclose(weights(1), torch_weights(slice(0, 8)), atol=ATOL, rtol=0)
            ids = page.evaluate("() => [...document.querySelectorAll('[id]')].map((e) => e.id)")
            assert len(ids) == len(set(ids))
            assert_clean(page)
        finally:
            page.context.close()


def static_page(browser, mathjax_dir, folder, name, explorers, width=1280):
    """Serve the static HTML of ``explorers`` as a plain page; return (page, server context)."""
    from browser import open_recorded_page, serve

    body = "\n".join(explorer.static_html() for explorer in explorers)
    (folder / f"{name}.html").write_text(f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
                                         f"<title>{name}</title></head><body><main>{body}</main></body></html>")
    server = serve(folder)
    url = server.__enter__()
    page = open_recorded_page(browser, f"{url}/{name}.html", mathjax_dir, wait_for_math=False)
    page.set_viewport_size({"width": width, "height": 900})
    return page, server


def test_playback_hatches_causal_zeros(explorers_page):
    page = explorers_page
    key_to(page, "playback", "snapshot_index", 3)
    masked = page.locator('[data-explorer="playback"] td.abx-masked')
    assert masked.count() == 2 * 15, "two causal heads over 6 tokens: 15 hatched cells each"
    assert set(masked.evaluate_all("(cells) => cells.map((c) => c.dataset.weight)")) == {"0"}
    assert "hatched" in page.locator('[data-explorer="playback"] .abx-status').inner_text()
    assert_clean(page)


def test_playback_of_several_sentences_has_a_keyboard_sentence_selector(browser, mathjax_dir, tmp_path):
    generator = torch.Generator().manual_seed(5)
    sentences = [["The", "dog", "is", "a"], ["The", "cat", "sat", "on"], ["A", "bird", "can", "fly"]]
    hidden = torch.ones(4, 4, dtype=torch.bool).triu(1)
    snapshots = [(step, torch.randn(3, 4, 4, generator=generator).masked_fill(hidden, float("-inf")).softmax(-1))
                 for step in (0, 10, 20)]
    playback = training_playback(sentences, snapshots, losses=[2.0, 1.0, 0.5])
    page, server = static_page(browser, mathjax_dir, tmp_path, "sentences", [playback])
    try:
        page.wait_for_selector('[data-explorer="playback"] td.abx-cell[data-weight]')
        selector = control(page, "playback", "sentence_index")
        assert page.locator(f'label[for="{selector.get_attribute("id")}"]').inner_text() == "sentence"
        selector.focus()
        for sentence in (0, 1, 2):
            if sentence:
                page.keyboard.press("ArrowDown")  # a focused <select> changes with the arrow keys
            assert selector.input_value() == str(sentence)
            for index in (0, 2):
                key_to(page, "playback", "snapshot_index", index)
                drawn = drawn_weights(page, "playback")
                assert torch.allclose(drawn[0], snapshots[index][1][sentence].double(), atol=ATOL, rtol=0)
            rows = page.locator('[data-explorer="playback"] th.abx-row').all_inner_texts()
            assert rows == sentences[sentence]
            assert page.locator('[data-explorer="playback"] td.abx-masked').count() == 6
            selector.focus()
        assert_clean(page)
    finally:
        page.context.close()
        server.__exit__(None, None, None)


# How far the legend sits below the lowest heatmap (or bar chart) shown: an empty band when large.
GAP_BELOW_MAPS_JS = """(root) => {
    const maps = [...root.querySelectorAll(".abx-map, .abx-bars")].filter((m) => m.getClientRects().length);
    const lowest = Math.max(...maps.map((m) => m.getBoundingClientRect().bottom));
    return root.querySelector(".abx-legend").getBoundingClientRect().top - lowest;
}"""
MAX_GAP_PX = 24  # the legend's own margin and the maps' gap


def test_heads_explorer_is_compact_with_12_heads_and_leaves_no_gap(browser, mathjax_dir, tmp_path):
    tokens, x = journey_inputs()
    generator = torch.Generator().manual_seed(3)
    W_query, W_key = torch.randn(3, 12, generator=generator), torch.randn(3, 12, generator=generator)
    explorer = heads_explorer(tokens, x, W_query, W_key, num_heads=12)
    page, server = static_page(browser, mathjax_dir, tmp_path, "heads12", [explorer])
    try:
        page.wait_for_function(f"() => document.querySelectorAll('{VISIBLE_MAPS}').length === 12")
        root = page.locator('[data-explorer="heads"]')
        height = root.bounding_box()["height"]
        assert height < 700, f"12 heads take {height:.0f} px (the goal: well under the old ~1,100 px)"
        assert page.locator(".abx-config.abx-shown table.abx-compact").count() == 12
        for position, num_heads in enumerate(divisors(12)):
            key_to(page, "heads", "num_heads", position)
            drawn = drawn_weights(page, "heads")
            head_dim = 12 // num_heads
            for head in range(num_heads):
                cols = slice(head * head_dim, (head + 1) * head_dim)
                q, k = x.double() @ W_query.double()[:, cols], x.double() @ W_key.double()[:, cols]
                expected = torch.softmax(q @ k.T / math.sqrt(head_dim), dim=-1)
                assert torch.allclose(drawn[head], expected, atol=ATOL, rtol=0), (num_heads, head)
            gap = root.evaluate(GAP_BELOW_MAPS_JS)
            assert gap < MAX_GAP_PX, f"{num_heads} heads: an empty band of {gap:.0f} px below the maps"
        assert_clean(page)
    finally:
        page.context.close()
        server.__exit__(None, None, None)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("width", [390, 800, 1280])
def test_explorers_work_and_fit_the_screen_at_every_width(open_page, screenshot, width, scheme):
    """A reader on a phone, a tablet or a laptop, with the system light or dark, moves each
    explorer's main slider: the heatmap changes, every column (the max / entropy / row-sum side
    columns included) stays on screen without scrolling the explorer sideways, and no explorer
    leaves an empty band below its maps."""
    page = open_page(PAGE, wait_for_math=False, viewport={"width": width, "height": 900}, color_scheme=scheme)
    for kind in MAIN_SLIDERS:
        page.wait_for_selector(f'[data-explorer="{kind}"] td.abx-cell[data-weight]')
    assert page.evaluate("() => document.documentElement.dataset.theme") == scheme
    for kind, (name, _) in MAIN_SLIDERS.items():
        slider = control(page, kind, name)
        slider.scroll_into_view_if_needed()
        before = heatmap_signature(page, kind)
        slider.focus()
        page.keyboard.press("End" if int(slider.input_value()) == int(slider.get_attribute("min")) else "Home")
        assert heatmap_signature(page, kind) != before, f"{width} px, {scheme}: moving {name} changed nothing"
    report = page.evaluate("""() => [...document.querySelectorAll('.abx[data-explorer]')].map((root) => {
        const right = root.getBoundingClientRect().right;
        const cells = [...root.querySelectorAll('td, th, .abx-bar-value')].filter((c) => c.getClientRects().length);
        return { kind: root.dataset.explorer, scrolls: root.scrollWidth - root.clientWidth,
                 offScreen: cells.filter((c) => c.getBoundingClientRect().right > right + 0.5)
                     .map((c) => c.textContent.trim()).slice(0, 5) };
    })""")
    for item in report:
        assert item["scrolls"] <= 1 and not item["offScreen"], f"{width} px, {scheme}: {item}"
    for kind in ("dk", "heads", "mask"):
        gap = page.locator(f'[data-explorer="{kind}"]').evaluate(GAP_BELOW_MAPS_JS)
        assert gap < MAX_GAP_PX, f"{width} px, {scheme}, {kind} explorer: an empty band of {gap:.0f} px"
    if width == 390:
        page.locator('[data-explorer="mask"]').scroll_into_view_if_needed()
        screenshot(page, f"explorer-mask-390-{scheme}", full_page=False)
    assert_clean(page)


def test_explorer_labels_typeset_subscripts(explorers_page):
    """d_k, d_out in titles, labels and status lines read as d<sub>k</sub>, as in the prose."""
    page = explorers_page
    dk = page.locator('[data-explorer="dk"]')
    label = dk.locator('label[for]').first
    assert label.evaluate("(l) => l.innerHTML") == "d<sub>k</sub>"
    assert dk.locator(".abx-title sub").first.inner_text() == "k"
    assert dk.locator(".abx-status sub").first.inner_text() == "k"
    heads_status = page.locator('[data-explorer="heads"] .abx-status')
    assert heads_status.locator("sub").first.inner_text() == "out"
    raw = page.evaluate("() => [...document.querySelectorAll('.abx')].map((e) => e.innerText).join(' ')")
    assert not re.search(r"(?<![A-Za-z0-9_])[A-Za-z]_[A-Za-z0-9]+", raw.replace("head_dim", "")), \
        "an explorer still shows a raw x_y subscript"
    assert_clean(page)


def test_keyboard_reaches_every_control_with_a_visible_focus(explorers_page):
    page = explorers_page
    expected = page.evaluate("""() => [...document.querySelectorAll(".abx [data-control]")].map((e) => e.id || e.dataset.control)""")
    page.locator('[data-explorer="dk"]').scroll_into_view_if_needed()
    page.evaluate("""() => { const first = document.querySelector('.abx [data-control]');
        const before = document.createElement('button'); before.id = 'focus-start'; before.textContent = 'start';
        first.closest('.abx-static').before(before); before.focus(); }""")
    reached, outlines = [], []
    for _ in range(len(expected) * 3):
        page.keyboard.press("Tab")
        info = page.evaluate("""() => { const e = document.activeElement; if (!e.closest('.abx')) return null;
            const cs = getComputedStyle(e); return { id: e.id || e.dataset.control, outline: cs.outlineStyle,
            width: parseFloat(cs.outlineWidth), visible: e.matches(':focus-visible') }; }""")
        if info:
            reached.append(info["id"])
            outlines.append(info)
        if len(reached) == len(expected):
            break
    assert reached == expected, "Tab does not reach every explorer control in order"
    assert all(o["visible"] and o["outline"] != "none" and o["width"] >= 2 for o in outlines), outlines
    assert_clean(page)


def luminance(css_colour: str) -> float:
    parts = [float(v) for v in css_colour[css_colour.index("(") + 1:-1].split(",")[:3]]
    return sum(weight * value / 255 for weight, value in zip((0.2126, 0.7152, 0.0722), parts))


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_explorers_follow_the_theme(explorers_page, screenshot, theme):
    page = explorers_page
    page.evaluate("(theme) => { document.documentElement.dataset.theme = theme; }", theme)
    page.locator('[data-explorer="heads"]').scroll_into_view_if_needed()
    screenshot(page, f"explorers-{theme}", full_page=False)
    colours = page.evaluate("""() => [...document.querySelectorAll('.abx')].map((root) => {
        let e = root, bg = 'rgba(0, 0, 0, 0)';
        while (e && bg.startsWith('rgba(0, 0, 0, 0')) { bg = getComputedStyle(e).backgroundColor; e = e.parentElement; }
        if (bg.startsWith('rgba(0, 0, 0, 0')) bg = getComputedStyle(document.body).backgroundColor;
        return { text: getComputedStyle(root.querySelector('.abx-status')).color, background: bg };
    })""")
    assert len(colours) == 5
    for colour in colours:
        text, background = luminance(colour["text"]), luminance(colour["background"])
        if theme == "dark":
            assert background < 0.3 and text > 0.6, f"explorer on a light box in dark mode: {colour}"
        else:
            assert background > 0.7 and text < 0.4, colour
    assert_clean(page)


# --------------------------------------------------------------------------- the sampling explorer (chapter 9)
# Positions of its sliders: temperature T = (position + 2) / 20 (0.10 .. 2.00), k = position
# (1 .. n), p = (position + 1) / 20 (0.05 .. 1.00).


def sampling_reference(logits, temperature, top_k, top_p):
    """What chapter 9 samples from for these slider values (float64): the package's
    next_token_probabilities, and plain torch with a stable sort where logits tie."""
    from attention_book.sampling import next_token_probabilities

    logits = torch.as_tensor(logits, dtype=torch.float64)
    scaled = logits / temperature
    keep = torch.zeros_like(logits, dtype=torch.bool)
    order = logits.sort(descending=True, stable=True).indices
    keep[order[:top_k]] = True
    if top_p < 1:
        ranked = torch.softmax(scaled.masked_fill(~keep, float("-inf")), -1)[order]
        keep[order[(ranked.cumsum(-1) - ranked) >= top_p]] = False
    plain = torch.softmax(scaled.masked_fill(~keep, float("-inf")), -1)
    if len(set(logits.tolist())) == len(logits):  # no ties: the package gives the same
        package = next_token_probabilities(logits, temperature=temperature,
                                           top_k=None if top_k >= len(logits) else top_k,
                                           top_p=None if top_p >= 1 else top_p)
        assert torch.allclose(package, plain, atol=1e-12, rtol=0)
    return plain


def drawn_distribution(page, root='[data-explorer="sampling"]'):
    """(final, after temperature, kept) per token index, read from the rows' data attributes."""
    rows = page.locator(f"{root} tr.abx-dist-row").evaluate_all(
        "(rows) => rows.map((r) => [Number(r.dataset.index), Number(r.dataset.final), Number(r.dataset.prob),"
        " r.dataset.kept === 'true'])")
    rows.sort()
    final = torch.tensor([r[1] for r in rows], dtype=torch.float64)
    before = torch.tensor([r[2] for r in rows], dtype=torch.float64)
    kept = torch.tensor([r[3] for r in rows])
    return final, before, kept


def set_sampling(page, temperature, top_k, top_p, root='[data-explorer="sampling"]'):
    """Move the three sliders with the keyboard to the given values."""
    for name, position in (("temperature", round(temperature * 20) - 2), ("top_k", top_k - 1),
                           ("top_p", round(top_p * 20) - 1)):
        slider = page.locator(f'{root} [data-control="{name}"]').first
        slider.focus()
        slider.press("Home")
        for _ in range(position):
            slider.press("ArrowRight")
        assert int(slider.input_value()) == int(slider.get_attribute("min")) + position, name


def check_sampling_settings(page, logits, settings, root='[data-explorer="sampling"]'):
    n = len(logits)
    for temperature, top_k, top_p in settings:
        set_sampling(page, temperature, top_k, top_p, root)
        final, before, kept = drawn_distribution(page, root)
        expected = sampling_reference(logits, temperature, top_k, top_p)
        where = f"T={temperature}, k={top_k}, p={top_p}"
        assert torch.equal(kept, expected > 0), where
        assert torch.allclose(final, expected, atol=1e-12, rtol=0), where
        scaled = torch.as_tensor(logits, dtype=torch.float64) / temperature
        assert torch.allclose(before, torch.softmax(scaled, -1), atol=1e-12, rtol=0), where
        status = page.locator(f"{root} .abx-status")
        kept_mass = float(status.get_attribute("data-kept-mass"))
        assert abs(kept_mass - float(torch.softmax(scaled, -1)[expected > 0].sum())) < 1e-12, where
        assert f"kept {int(kept.sum())} of {n} tokens" in status.inner_text(), where
        assert page.locator(f"{root} tr.abx-cut").count() == n - int(kept.sum()), where


SAMPLING_SETTINGS = [(1.0, 12, 0.9), (0.5, 12, 1.0), (1.5, 5, 1.0), (0.7, 8, 0.6), (2.0, 3, 0.95),
                     (0.1, 12, 0.5), (1.25, 1, 1.0), (0.35, 10, 0.05)]


@pytest.fixture
def sampling_page(explorers_page):
    explorers_page.wait_for_selector('[data-explorer="sampling"] tr.abx-dist-row[data-final]')
    return explorers_page


def test_sampling_explorer_math_equals_the_package(sampling_page):
    """The page's explorer (the words after "Mr." in Jane Austen) against attention_book.sampling."""
    from attention_book.explorers import demo_next_words

    words, logits, _ = demo_next_words("Mr.", top=12)  # what book/explorers.ipynb shows
    page = sampling_page
    rows = page.locator('[data-explorer="sampling"] th.abx-dist-token').all_inner_texts()
    assert rows == words, "one row per word, the most likely first"
    final, _, kept = drawn_distribution(page)  # the notebook's settings: T = 1, no top-k, p = 0.9
    assert torch.allclose(final, sampling_reference(logits, 1.0, 12, 0.9), atol=1e-12, rtol=0)
    rng = random.Random(3)
    settings = SAMPLING_SETTINGS + [(rng.randint(2, 40) / 20, rng.randint(1, 12), rng.randint(1, 20) / 20)
                                    for _ in range(4)]
    check_sampling_settings(page, logits, settings)
    assert_clean(page)


@pytest.mark.parametrize("name", ["temperature", "top_k", "top_p"])
def test_sampling_sliders_work_by_keyboard_and_mouse(sampling_page, screenshot, name):
    page = sampling_page
    set_sampling(page, 1.0, 12, 1.0)  # no cut: one step left on any slider changes the bars
    root = page.locator('[data-explorer="sampling"]')
    root.scroll_into_view_if_needed()
    slider = root.locator(f'[data-control="{name}"]')
    before = drawn_distribution(page)[0]
    page.evaluate("() => { window.__leakedKeys = []; document.addEventListener('keydown', "
                  "(e) => window.__leakedKeys.push(e.key)); }")
    slider.focus()
    slider.press("ArrowLeft")
    after = drawn_distribution(page)[0]
    assert not torch.equal(before, after), f"the arrow key on {name} did not change the bars"
    assert page.evaluate("() => window.__leakedKeys") == [], "keydown reached the document"
    assert slider.get_attribute("aria-valuetext") == root.locator(f'output[for="{slider.get_attribute("id")}"]').inner_text()
    drag(page, "sampling", name, 0.05)
    assert not torch.equal(after, drawn_distribution(page)[0]), f"dragging {name} did not change the bars"
    screenshot(page, f"explorer-sampling-{name}", full_page=False)
    assert_clean(page)


def test_sampling_explorer_on_its_own_page_ties_whitespace_and_labels(browser, mathjax_dir, tmp_path, screenshot):
    """The kernel-free HTML alone: tied logits keep their order, token spaces are shown, every
    control is labelled, and cut rows are marked by more than colour."""
    from attention_book.explorers import sampling_explorer

    tokens = [" the", " a", "\n", " her", ",", " Emma", "", " Mr"]
    logits = [2.0, 2.0, 0.5, 1.0, 1.0, -1.0, -3.0, 1.0]  # ties: (" the", " a") and (" her", ",", " Mr")
    explorer = sampling_explorer(tokens, logits, temperature=0.9, top_k=4, top_p=1.0)
    page, server = static_page(browser, mathjax_dir, tmp_path, "sampling", [explorer], width=390)
    try:
        page.wait_for_selector('[data-explorer="sampling"] tr.abx-dist-row[data-final]')
        labels = page.locator('[data-explorer="sampling"] th.abx-dist-token').all_inner_texts()
        assert labels == ["\u2423the", "\u2423a", "\u2423her", ",", "\u2423Mr", "\u23ce", "\u2423Emma", "(empty)"]
        kept = drawn_distribution(page)[2]
        assert kept.tolist() == [True, True, False, True, True, False, False, False], "top-4: ties by position"
        check_sampling_settings(page, logits, [(0.9, 4, 1.0), (1.0, 8, 0.5), (2.0, 2, 1.0), (0.5, 6, 0.85)])
        report = page.evaluate("""() => [...document.querySelectorAll('.abx input')].map((i) => ({
            label: (document.querySelector(`label[for="${i.id}"]`) || {}).textContent,
            text: i.getAttribute('aria-valuetext') }))""")
        assert [r["label"] for r in report] == ["temperature", "top-k", "top-p"] and all(r["text"] for r in report)
        cut = page.locator('[data-explorer="sampling"] tr.abx-cut').first
        style = cut.evaluate("""(row) => ({ hatch: getComputedStyle(row.querySelector('.abx-dist-before')).backgroundImage,
            line: getComputedStyle(row.querySelector('th')).textDecorationLine, text: row.lastChild.textContent })""")
        assert "repeating-linear-gradient" in style["hatch"] and style["line"] == "line-through"
        assert style["text"].endswith(" cut")
        width = page.evaluate("() => document.querySelector('.abx').scrollWidth")
        assert width <= 390, f"the sampling explorer is {width} px wide on a 390 px phone"
        screenshot(page, "explorer-sampling-390px", full_page=True)
        assert_clean(page)
    finally:
        page.context.close()
        server.__exit__(None, None, None)
