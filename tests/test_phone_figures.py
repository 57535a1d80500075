"""The book build's phone drawings (book/_ext/phone_figures.py), without a kernel or a browser.

Each figure of the book build is drawn a second time for a 390 px phone: panels stacked, text at
its own point size in a drawing no wider than the phone's text column, numbers fitted to their
cells, titles wrapped, diagrams in their portrait layout. The browser measures the result on the
built site (tests/test_figures.py); here each rule is checked on small figures.
"""

from __future__ import annotations

import io
import sys
import xml.etree.ElementTree as ET

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from helpers import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import phone_figures  # noqa: E402

from attention_book import plotting  # noqa: E402
from attention_book.diagram import HIGHLIGHT_FACE, computation_diagram, weight_layout_diagram  # noqa: E402

TOKENS = ["Your", "journey", "starts", "with", "one", "step"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def svg_of(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    return buffer.getvalue().decode()


def texts_of(fig):
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def panel_boxes(fig):
    """Positions (figure fraction) of the Axes that are not colorbars, top to bottom."""
    boxes = [ax.get_position() for ax in fig.axes if not hasattr(ax, "_colorbar_info")]
    return sorted(boxes, key=lambda box: -box.y0)


def phone(fig):
    copy, _ = phone_figures.phone_figure(fig)
    copy.canvas.draw()
    return copy


def two_line_plots():
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for index, ax in enumerate(axes):
        ax.plot(range(5), [index * v for v in range(5)], label=f"line {index}")
        ax.set_title(f"panel {index}")
    return fig


def three_heatmaps(**options):
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
    for index, ax in enumerate(axes):
        plotting.heatmap(torch.rand(6, 6, generator=torch.Generator().manual_seed(index)), TOKENS, TOKENS,
                         ax=ax, title=f"panel {index}", **options)
    fig.tight_layout()
    return fig


@pytest.mark.slow  # 108 numbers to fit: seconds on a busy machine
def test_panels_side_by_side_are_stacked_in_reading_order_at_phone_width():
    fig = three_heatmaps()
    wide_size = tuple(fig.get_size_inches())
    wide_boxes = [tuple(ax.get_position().bounds) for ax in fig.axes]
    figures_before = len(plt.get_fignums())
    copy = phone(fig)
    assert copy.get_size_inches()[0] == pytest.approx(phone_figures.phone_width_in())
    boxes = panel_boxes(copy)
    assert len(boxes) == 3
    assert all(upper.y0 > lower.y1 for upper, lower in zip(boxes, boxes[1:])), "panels overlap"
    titles = [ax.get_title() for ax in sorted(copy.axes, key=lambda ax: -ax.get_position().y0) if ax.get_title()]
    assert titles == ["panel 0", "panel 1", "panel 2"]
    assert phone_figures.svg_width_px(svg_of(copy)) <= phone_figures.PHONE_WIDTH_PX
    assert min(t.get_fontsize() for t in texts_of(copy)) >= phone_figures.MIN_TEXT_PT
    # the reader's figure is untouched and pyplot does not manage (so never shows) the copy
    assert tuple(fig.get_size_inches()) == wide_size
    assert [tuple(ax.get_position().bounds) for ax in fig.axes] == wide_boxes
    assert len(plt.get_fignums()) == figures_before


@pytest.mark.slow
def test_numbers_in_heatmap_cells_fit_their_cells():
    fig, ax = plt.subplots(figsize=(11, 5))
    values = torch.rand(10, 10, generator=torch.Generator().manual_seed(0))
    plotting.heatmap(values, [f"t{i}" for i in range(10)], [f"t{i}" for i in range(10)], ax=ax, title="ten by ten")
    copy = phone(fig)
    [heat] = [a for a in copy.axes if a.get_images()]
    renderer = copy.canvas.get_renderer()
    cell = heat.get_window_extent(renderer).width / 10
    numbers = heat.texts
    assert len(numbers) == 100
    for text in numbers:
        assert text.get_fontsize() >= phone_figures.MIN_TEXT_PT
        assert text.get_window_extent(renderer).width <= cell, text.get_text()
    # the map's values are still written (a leading zero may go: 0.25 -> .25)
    assert {float(t.get_text()) for t in numbers} == {float(f"{v:.2f}") for v in values.flatten().tolist()}


def test_titles_wrap_at_spaces_never_inside_math():
    fig, ax = plt.subplots(figsize=(3, 2))
    title = ax.set_title(r"$d_k = 64$, no scale: softmax$(QK^\top)$ of the keys and queries")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert phone_figures.wrap_to_width(title, 120, renderer)
    lines = title.get_text().split("\n")
    assert len(lines) >= 2
    assert all(line.count("$") % 2 == 0 for line in lines), lines
    assert " ".join(lines) == r"$d_k = 64$, no scale: softmax$(QK^\top)$ of the keys and queries"


def test_shared_axes_get_their_tick_labels_back_when_stacked():
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4), sharey=True)
    for ax in axes:
        ax.bar(range(6), torch.rand(6).tolist())
        ax.set_xticks(range(6), TOKENS)
    copy = phone(fig)
    for ax in copy.axes:
        assert any(label.get_visible() and label.get_text() for label in ax.get_yticklabels())
        # the category labels fit their spacing: slanted where they were too wide
        labels = ax.get_xticklabels()
        assert all(label.get_fontsize() >= phone_figures.MIN_TEXT_PT for label in labels)


def test_an_unused_cell_of_a_grid_is_dropped():
    fig, axes = plt.subplots(2, 2, figsize=(9, 7.5))
    for ax in axes.flat[:3]:
        ax.plot([0, 1], [0, 1])
    axes.flat[3].axis("off")
    assert len(panel_boxes(phone(fig))) == 3


def test_a_colorbar_of_several_panels_spans_them_when_stacked():
    fig, axes = plt.subplots(1, 2, figsize=(11, 5))
    for ax in axes:
        image = ax.imshow(torch.rand(10, 10).numpy(), vmin=0, vmax=1)
    fig.colorbar(image, ax=axes, fraction=0.02, pad=0.02)
    copy = phone(fig)
    [colorbar] = [ax for ax in copy.axes if hasattr(ax, "_colorbar_info")]
    panels = panel_boxes(copy)
    bar = colorbar.get_position()
    assert bar.y0 <= panels[-1].y0 + 1e-6 and bar.y1 >= panels[0].y1 - 1e-6
    assert bar.x0 >= max(box.x1 for box in panels)


def test_each_panel_keeps_its_own_colorbar_beside_it_when_stacked():
    # fig.colorbar(ax=ax) without a layout engine nests the panel and its colorbar in one grid
    # cell: both move to the panel's new row
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4))
    for index, ax in enumerate(axes):
        image = ax.imshow(torch.rand(4, 4).numpy())
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
        ax.set_title(f"panel {index}")
    copy = phone(fig)
    colorbars = [ax for ax in copy.axes if hasattr(ax, "_colorbar_info")]
    panels = [ax for ax in copy.axes if not hasattr(ax, "_colorbar_info")]
    assert len(colorbars) == len(panels) == 3
    for panel in panels:
        box = panel.get_position()
        beside = [bar.get_position() for bar in colorbars
                  if bar.get_position().y0 < box.y1 and bar.get_position().y1 > box.y0]
        assert len(beside) == 1, f"{panel.get_title()}: {len(beside)} colorbars beside it"
        assert beside[0].x0 >= box.x1

def test_the_computation_diagram_is_redrawn_top_to_bottom():
    fig, ax = plt.subplots(figsize=(10.6, 2.8))
    computation_diagram(highlight=["scale", "softmax"], ax=ax)
    copy = phone(fig)
    [diagram] = copy.axes
    box = diagram.get_window_extent(copy.canvas.get_renderer())
    assert box.height > 2 * box.width, "the phone diagram is portrait"
    labels = [t.get_text() for t in diagram.texts]
    assert "(d_in, d_k)" in labels and "$\\div\\sqrt{d_k}$" in labels
    faces = [matplotlib.colors.to_hex(p.get_facecolor()) for p in diagram.patches if isinstance(p, FancyBboxPatch)]
    assert len(faces) == 12 and faces.count(HIGHLIGHT_FACE.lower()) == 2
    assert "highlighted: scale, softmax" in diagram.get_title().replace("\n", " ")
    assert min(t.get_fontsize() for t in texts_of(copy)) >= 9
    assert phone_figures.svg_width_px(svg_of(copy)) <= phone_figures.PHONE_WIDTH_PX


def test_the_weight_layout_is_redrawn_one_grid_above_the_other():
    fig = weight_layout_diagram(3, 2)
    copy = phone(fig)
    labels = [t.get_text() for t in copy.axes[0].texts]
    assert labels.count("$w_{32}$") == 2 and "x @ weight.T" in labels
    box = copy.axes[0].get_window_extent(copy.canvas.get_renderer())
    assert box.height > box.width
    assert phone_figures.svg_width_px(svg_of(copy)) <= phone_figures.PHONE_WIDTH_PX


def test_diagrams_draw_the_phone_layout_directly_too():
    fig = computation_diagram(highlight="context", layout="phone")
    assert tuple(fig.get_size_inches()) == pytest.approx((3.36, 8.6))
    with pytest.raises(ValueError, match="layout='tall'.*choose from"):
        computation_diagram(layout="tall")
    with pytest.raises(ValueError, match="layout='tall'.*choose from"):
        weight_layout_diagram(layout="tall")


def test_a_figure_that_fits_a_phone_gets_no_second_drawing():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 0])
    wide = svg_of(fig)
    assert phone_figures.svg_width_px(wide) <= phone_figures.PHONE_WIDTH_PX
    assert phone_figures.phone_svg(fig, svg_of, wide) is None


def test_the_phone_drawing_rides_in_the_wide_svg_and_comes_out_whole():
    fig = two_line_plots()
    wide = svg_of(fig)
    phone_text = phone_figures.phone_svg(fig, svg_of, wide)
    both = phone_figures.embed(wide, phone_text)
    ET.fromstring(both.encode())  # still one well-formed SVG document
    assert phone_figures.split(both) == (wide.rstrip() + "\n", phone_text, None)
    assert phone_figures.split(wide) == (wide, None, None)


def test_install_gives_svg_figures_a_phone_drawing_and_leaves_other_formats(monkeypatch):
    from IPython.core import pylabtools

    monkeypatch.setattr(pylabtools, "print_figure", pylabtools.print_figure)  # restored afterwards
    phone_figures.install()
    phone_figures.install()  # twice: wrapped once
    fig = two_line_plots()
    svg = pylabtools.print_figure(fig, "svg")
    wide, phone_text, failure = phone_figures.split(svg)
    assert phone_text is not None and failure is None
    assert phone_figures.svg_width_px(wide) > phone_figures.PHONE_WIDTH_PX >= phone_figures.svg_width_px(phone_text)
    assert phone_figures.MARKER.encode() not in pylabtools.print_figure(fig, "png")

    def broken(figure):
        raise RuntimeError("no room -- at all")

    monkeypatch.setattr(phone_figures, "phone_figure", broken)
    wide, phone_text, failure = phone_figures.split(pylabtools.print_figure(fig, "svg"))
    assert phone_text is None and failure == "RuntimeError: no room - - at all"
    ET.fromstring(wide.encode())


def test_drawing_functions_and_the_site_agree_on_the_hint():
    assert plotting.PHONE_DRAWING == phone_figures.PHONE_DRAWING
