"""Phone drawings of the chapters' figures: the book build's kernels draw every figure twice.

Loaded into the book build's kernels only (book/_ext/site_figures.py points them at an IPython
profile that runs :func:`install`); readers' Jupyter, Colab and the notebook tests never see it.

A figure drawn for the 672 px text column of a laptop is shrunk to the 342 px column of a 390 px
phone, and its 10-pt labels with it (to 5 px). So each SVG figure wider than that column gets a
second drawing, from a copy of the figure re-laid out :data:`PHONE_WIDTH_PX` wide, with the
same point sizes, shown unshrunk on a phone:

* panels side by side (``plt.subplots(1, 3)``, 2 x 2, any grid) are stacked in reading order,
  each with its colorbar; a plot keeps its aspect ratio (within limits), a map the shape of its
  cells; shared axes get back their tick labels; unused cells of a grid are dropped;
* an Axes drawn by a function that knows a better phone picture (``attention_book.diagram``,
  chapter 5's shapes figure) is redrawn with it (:data:`PHONE_DRAWING`, set on the Axes by
  ``attention_book.plotting.set_phone_drawing``);
* titles, axis labels and legend entries wider than their room are wrapped at spaces (never
  inside ``$math$``); a legend that would cover much of a narrow plot goes under it;
* the numbers in heatmap cells and crowded category tick labels are made smaller until they fit
  (long x labels are slanted first; numbers lose a leading zero below 7 pt), never below
  :data:`MIN_TEXT_PT` (8 px).

What cannot be re-laid out (Axes placed by hand with ``fig.add_axes``) is only narrowed.

The phone SVG rides inside the wide one, base64 in a comment after its root element (so it
reaches the execution cache and myst-nb's output files with the cell's output); the Sphinx side
(site_figures.py) splits it into ``NAME-phone.svg`` next to ``NAME.svg`` in ``_images`` and
shows it with a ``<picture>`` on screens narrower than 600 px.
"""

from __future__ import annotations

import base64
import math
import pickle
import re

MARKER = "attention-book-phone-drawing"
FAILED = "attention-book-phone-drawing-failed"
PHONE_WIDTH_PX = 342  # the text column of a 390 px phone (pydata-sphinx-theme); 96 px an inch
PAD_IN = 0.1  # bbox_inches="tight" leaves this much around the drawing (savefig.pad_inches)
MIN_TEXT_PT = 6.1  # 8 CSS px at the drawing's own size (1 pt = 4/3 px), and a little for rounding
MIN_PANEL_HEIGHT_IN = 1.8  # a plot (not a map) keeps at least this height, if it had it
PHONE_DRAWING = "_attention_book_phone_drawing"  # Axes attribute: (draw(ax), (width, height) in)


def phone_width_in() -> float:
    """The figure width whose tight SVG (drawing + padding) is as wide as the phone's column."""
    return PHONE_WIDTH_PX / 96 - 2 * PAD_IN


def svg_width_px(svg: str) -> float:
    match = re.search(r'<svg[^>]*\bwidth="([\d.]+)pt"', svg)
    return float(match.group(1)) * 4 / 3 if match else math.inf


# ----------------------------------------------------------------------------- the copy


def copy_figure(fig):
    """An independent copy of ``fig`` that pyplot does not manage (so it is never shown itself)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    manager = fig.canvas.manager
    fig.canvas.manager = None  # else the copy would be registered with pyplot and shown too
    try:
        copy = pickle.loads(pickle.dumps(fig))
    finally:
        fig.canvas.manager = manager
    FigureCanvasAgg(copy)  # a renderer to measure text with; savefig picks the SVG backend
    return copy


def _topmost(ss):
    return ss.get_topmost_subplotspec() if ss is not None else None


def _is_blank(ax) -> bool:
    """An Axes turned off with nothing on it (a grid's unused cell)."""
    return (not ax.axison and not ax.has_data() and not ax.texts and not ax.artists
            and not ax.get_title() and ax.get_legend() is None)


def _panels(fig):
    """``[(topmost subplotspec, [axes])]`` in reading order, or None when the figure has Axes
    that no grid places (fig.add_axes), or several grids: those are only narrowed, not stacked."""
    groups = {}
    for ax in fig.axes:
        ss = ax.get_subplotspec()
        if ss is None:
            info = getattr(ax, "_colorbar_info", None)
            if info and info.get("parents"):
                continue  # placed next to its parent by the layout engine
            return None
        groups.setdefault(_topmost(ss), []).append(ax)
    grids = {id(ss.get_gridspec()) for ss in groups}
    if len(grids) != 1:
        return None
    return sorted(groups.items(), key=lambda item: (item[0].rowspan.start, item[0].colspan.start))


def _reattach(ax, old_top, new_top):
    """Move ``ax`` from the top-level cell ``old_top`` to ``new_top``, inner grids included
    (a colorbar made with ``fig.colorbar(ax=...)`` shares a grid nested in the Axes' cell)."""
    from matplotlib.gridspec import GridSpecFromSubplotSpec, SubplotSpec

    ss = ax.get_subplotspec()
    if ss == old_top:
        ax.set_subplotspec(new_top)
        return
    grid = ss.get_gridspec()
    while isinstance(grid, GridSpecFromSubplotSpec):
        parent = grid._subplot_spec
        if parent in (old_top, new_top):  # (new_top: moved already with another Axes of it)
            grid._subplot_spec = new_top
            ax.set_subplotspec(SubplotSpec(grid, ss.num1, ss.num2))  # positions recomputed
            return
        grid = parent.get_gridspec()


def _show_shared_tick_labels(ax):
    """Stacked panels each show their own tick labels (``sharey=True`` had hidden them)."""
    if len(ax.get_shared_y_axes().get_siblings(ax)) > 1:
        ax.yaxis.set_tick_params(labelleft=True)
    if len(ax.get_shared_x_axes().get_siblings(ax)) > 1:
        ax.xaxis.set_tick_params(labelbottom=True)


def _data_size_in(ax):
    box = ax.get_position()
    width, height = ax.figure.get_size_inches()
    return box.width * width, box.height * height


_NUMBER = re.compile(r"^[-\u2212]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?%?$|^(nan|-?inf)$", re.IGNORECASE)


def _cell_numbers(ax):
    """The numbers written in the cells of an image (``heatmap``): centred numeric texts."""
    if not ax.get_images():
        return []
    return [text for text in ax.texts if text.get_ha() == "center"
            and text.get_va() in ("center", "center_baseline") and _NUMBER.match(text.get_text().strip())]


def _panel_size(axes, width_in, renderer):
    """``(plot height, panel height)`` in inches of a stacked panel ``width_in`` wide.

    Its decorations (tick labels, titles, colorbar) keep their size in inches, as measured in
    the wide figure; the plot area takes the rest of the width. A map's cells keep their shape,
    between 0.3 inch (room for a number; any height without numbers) and 0.45 inch tall; a plot
    keeps its aspect ratio as far as it stays between :data:`MIN_PANEL_HEIGHT_IN` and its height
    in the wide figure."""
    dpi = axes[0].figure.dpi
    main = max(axes, key=lambda ax: _data_size_in(ax)[0] * _data_size_in(ax)[1])
    data_w, data_h = _data_size_in(main)
    boxes = [ax.get_tightbbox(renderer) for ax in axes]
    outer_w = (max(b.x1 for b in boxes) - min(b.x0 for b in boxes)) / dpi
    outer_h = (max(b.y1 for b in boxes) - min(b.y0 for b in boxes)) / dpi
    target_w = max(0.8, width_in - max(0.0, outer_w - data_w))
    images = main.get_images()
    if images:
        rows, cols = images[0].get_array().shape[:2]
        wide_cell_ratio = (data_h / rows) / (data_w / cols)
        low = 0.3 if _cell_numbers(main) else 0.0
        cell_h = min(max(wide_cell_ratio * target_w / cols, low), 0.45)
        height = rows * cell_h
    else:
        height = data_h * min(1.0, target_w / max(data_w, 1e-6))
        height = max(height, min(data_h, MIN_PANEL_HEIGHT_IN))
    return height, height + max(0.3, outer_h - data_h)


# ----------------------------------------------------------------------------- text that fits


def _renderer(fig):
    return fig.canvas.get_renderer()


def _split_words(text: str):
    """Words of ``text``, never splitting inside ``$...$`` (mathtext)."""
    words, current, in_math = [], "", False
    for char in text:
        if char == "$":
            in_math = not in_math
        if char == " " and not in_math:
            words.append(current)
            current = ""
        else:
            current += char
    words.append(current)
    return [w for w in words if w]


def wrap_to_width(artist, max_px: float, renderer) -> bool:
    """Wrap a Text's lines at spaces until it is at most ``max_px`` wide; True if it changed.
    A text wrapped before is wrapped again from its own lines (never a wrap of a wrap)."""
    shown = artist.get_text()
    original = getattr(artist, "_phone_unwrapped", shown)
    artist.set_text(original)  # a wrap of an earlier, narrower layout may no longer be needed
    if not original or artist.get_window_extent(renderer).width <= max_px:
        return original != shown
    lines = []
    for paragraph in original.split("\n"):
        line = ""
        for word in _split_words(paragraph):
            candidate = f"{line} {word}" if line else word
            artist.set_text(candidate)
            if line and artist.get_window_extent(renderer).width > max_px:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    artist.set_text("\n".join(lines))
    artist._phone_unwrapped = original
    return artist.get_text() != shown


def _fit_font(artist, fits, renderer, floor: float = MIN_TEXT_PT) -> None:
    """Shrink ``artist``'s font in half-points while ``fits(extent)`` is False, to ``floor``."""
    size = artist.get_fontsize()
    while size > floor and not fits(artist.get_window_extent(renderer)):
        size = max(floor, size - 0.5)
        artist.set_fontsize(size)


_LEADING_ZERO = re.compile(r"^([-\u2212]?)0(?=\.\d)")


def _fit_cell_numbers(ax, renderer) -> None:
    """Numbers written in the cells of an image (``heatmap``): each fits its cell. Where 7 pt is
    still too big, the numbers of the map lose their leading zero (0.25 -> .25) and shrink on."""
    images = ax.get_images()
    if not images:
        return
    rows, cols = images[0].get_array().shape[:2]
    box = ax.get_window_extent(renderer)
    cell_w, cell_h = box.width / max(cols, 1), box.height / max(rows, 1)
    cells = _cell_numbers(ax)

    def fits(extent):
        return extent.width <= 0.92 * cell_w and extent.height <= 0.95 * cell_h

    for text in cells:
        _fit_font(text, fits, renderer, floor=7.0)
    if any(not fits(text.get_window_extent(renderer)) for text in cells):
        for text in cells:
            text.set_text(_LEADING_ZERO.sub(r"\1", text.get_text()))
            _fit_font(text, fits, renderer)


def _fit_tick_labels(ax, renderer) -> None:
    """Category tick labels (fixed ticks: bar charts, heatmaps) that do not overlap: x labels
    much wider than their spacing are slanted, then any still too big get a smaller font."""
    from matplotlib.ticker import FixedLocator

    box = ax.get_window_extent(renderer)
    for axis, length in ((ax.yaxis, box.height), (ax.xaxis, box.width)):
        if not isinstance(axis.get_major_locator(), FixedLocator):
            continue
        labels = [label for label in axis.get_ticklabels() if label.get_visible() and label.get_text()]
        if len(labels) < 2:
            continue
        spacing = length / len(axis.get_majorticklocs())
        widest = max(label.get_window_extent(renderer).width for label in labels)
        if (axis is ax.xaxis and widest > 1.25 * 0.95 * spacing
                and all(label.get_rotation() % 180 == 0 for label in labels)):
            for label in labels:  # long labels side by side: slanted (a little too wide: smaller)
                label.set(rotation=45, ha="right", rotation_mode="anchor")
        for label in labels:
            rotation = label.get_rotation() % 180
            if axis is ax.yaxis or rotation:
                # stacked (y) or slanted (x) labels: the line height must fit the spacing
                def fits(extent, label=label, rotation=rotation, spacing=spacing):
                    height = label.get_fontsize() * renderer.points_to_pixels(1) * 1.15
                    return height / (math.sin(math.radians(rotation)) if rotation else 1) <= spacing
            else:
                def fits(extent, spacing=spacing):
                    return extent.width <= 0.95 * spacing
            _fit_font(label, fits, renderer)
        smallest = min(label.get_fontsize() for label in labels)
        for label in labels:  # one size for the labels of an axis
            label.set_fontsize(smallest)


def _legends_below(ax, renderer) -> None:
    """A legend inside a narrow plot that would cover much of it goes under the plot instead:
    under its x tick labels and label, from the left edge of its y label, its entries wrapped to
    the figure's width (wider, the layout engine would narrow the plot to make room)."""
    legend = ax.get_legend()
    if legend is None or not legend.get_visible():
        return
    fig = ax.figure
    box = ax.get_window_extent(renderer)
    if not getattr(legend, "_phone_below", False):
        if legend.get_bbox_to_anchor() != ax.bbox:
            return  # placed by its author outside the default spot: leave it
        own = legend.get_window_extent(renderer)
        if own.width <= 0.9 * box.width and own.width * own.height <= 0.3 * box.width * box.height:
            return
        legend._phone_below = True
        width, height = fig.get_size_inches()  # taller by the legend: the plot keeps its height
        fig.set_size_inches(width, height + own.height / fig.dpi + 0.15)
    side = ax.yaxis.get_tightbbox(renderer)
    left = side.x0 if side is not None else box.x0
    room = (fig.get_size_inches()[0] - 0.25) * fig.dpi - left  # the plot's right edge, unsqueezed
    own = legend.get_window_extent(renderer)
    texts = legend.get_texts()
    if texts and own.width > room:
        widest = max(text.get_window_extent(renderer).width for text in texts)
        for text in texts:
            wrap_to_width(text, max(40.0, widest - (own.width - room)), renderer)
    below = ax.xaxis.get_tightbbox(renderer)
    bottom = min(box.y0, below.y0) if below is not None else box.y0
    legend.set_loc("upper left")
    legend.set_bbox_to_anchor(((left - box.x0) / max(box.width, 1.0), (bottom - box.y0) / max(box.height, 1.0) - 0.02),
                              transform=ax.transAxes)


def _room(text, fig_px: float, renderer) -> float:
    """How wide a Text may be: from its alignment point to the figure's edges or to the nearest
    Axes beside it (a colorbar to the right of a title)."""
    x = text.get_transform().transform(text.get_position())[0]
    extent = text.get_window_extent(renderer)
    left, right = 0.0, fig_px
    for ax in text.figure.axes:
        if ax is text.axes or not ax.get_visible():
            continue
        box = ax.get_window_extent(renderer)
        if box.y1 <= extent.y0 or box.y0 >= extent.y1:
            continue  # above or below the text
        if box.x0 >= x:
            right = min(right, box.x0)
        elif box.x1 <= x:
            left = max(left, box.x1)
    align = text.get_ha()
    if align == "left":
        return right - x
    if align == "right":
        return x - left
    return 2 * min(x - left, right - x)


def _text_state(fig):
    from matplotlib.text import Text

    legends = [(ax.get_legend()._loc, getattr(ax.get_legend(), "_phone_below", False))
               for ax in fig.axes if ax.get_legend() is not None]
    return [(t.get_text(), t.get_fontsize(), t.get_rotation()) for t in fig.findobj(Text)] + legends


def fit_text(fig, rounds: int = 4) -> None:
    """Wrap titles and labels to the figure's width, shrink crowded numbers and tick labels.

    Each change moves the layout (a layout engine places the Axes around their text), so this
    lays out, fits, and lays out again until nothing changes."""
    renderer = _renderer(fig)
    fig_px = fig.get_size_inches()[0] * fig.dpi
    fig.draw_without_rendering()  # the first layout engine pass sizes the decorations...
    for _ in range(rounds):
        fig.draw_without_rendering()  # ...the next ones place the Axes around them
        before = _text_state(fig)
        texts = [fig._suptitle, fig._supxlabel, *fig.texts]
        for ax in fig.axes:
            texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label]
            _fit_cell_numbers(ax, renderer)
            _fit_tick_labels(ax, renderer)
            _legends_below(ax, renderer)
        for text in texts:
            if text is not None and text.get_visible() and text.get_text():
                wrap_to_width(text, 0.97 * _room(text, fig_px, renderer), renderer)
        if _text_state(fig) == before:
            return


# ----------------------------------------------------------------------------- the phone figure


def _layout_engine(fig):
    """Constrained layout (each panel's own margins), except with colorbars placed in a grid
    (``fig.colorbar(ax=...)`` without a layout engine), which only tight layout can place."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine, TightLayoutEngine

    engine = fig.get_layout_engine()
    if isinstance(engine, (ConstrainedLayoutEngine, TightLayoutEngine)):
        return engine
    gridded_colorbars = any(getattr(ax, "_colorbar_info", None) and ax.get_subplotspec() is not None
                            for ax in fig.axes)
    fig._layout_engine = None  # the wide figure's choice (tight_layout() once, or none) no longer holds
    return TightLayoutEngine() if gridded_colorbars else ConstrainedLayoutEngine()


def phone_figure(fig):
    """``(copy of fig re-laid out phone_width_in() wide, whether an Axes was drawn anew)``."""
    copy = copy_figure(fig)
    width = phone_width_in()
    panels = _panels(copy)
    redrawn = False
    if panels is not None:
        for _, axes in panels:
            for ax in axes:
                if _is_blank(ax):
                    ax.remove()
        panels = [(ss, [ax for ax in axes if ax.figure is copy]) for ss, axes in panels]
        panels = [(ss, axes) for ss, axes in panels if axes]
        copy.draw_without_rendering()  # the wide layout, to measure the decorations of each panel
        renderer = _renderer(copy)
        plots, heights = [], []
        for _, axes in panels:
            special = [getattr(ax, PHONE_DRAWING) for ax in axes if getattr(ax, PHONE_DRAWING, None)]
            plot, height = (special[0][1][1],) * 2 if special else _panel_size(axes, width, renderer)
            plots.append(plot)
            heights.append(height)
        grid = copy.add_gridspec(len(panels), 1, height_ratios=plots)
        for index, (old_top, axes) in enumerate(panels):
            for ax in axes:
                _reattach(ax, old_top, grid[index, 0])
                _show_shared_tick_labels(ax)
                drawing = getattr(ax, PHONE_DRAWING, None)
                if drawing:
                    ax.clear()
                    drawing[0](ax)
                    redrawn = True
        height = sum(heights)
    else:
        old_w, old_h = copy.get_size_inches()
        height = max(old_h * min(1.0, width / old_w), min(old_h, MIN_PANEL_HEIGHT_IN + 1.0))
    if copy._suptitle is not None:  # placed by the layout engine, above the panels
        copy._suptitle.set_y(0.98)
        copy._suptitle._autopos = True
    copy.set_size_inches(width, height + (0.4 if copy._suptitle is not None else 0.0))
    copy.set_layout_engine(_layout_engine(copy))
    for ax in copy.axes:  # a colorbar beside several Axes: a share of a much narrower figure now
        info = getattr(ax, "_colorbar_info", None)
        if info and ax.get_subplotspec() is None:
            info["fraction"] = max(info.get("fraction", 0.15), 0.05)
            if len(info.get("parents", ())) > 1 and info.get("location") in ("left", "right"):
                info["aspect"] = None  # as tall as the panels it serves, now one above the other
    fit_text(copy)
    return copy, redrawn


def phone_svg(fig, print_svg, wide_svg: str):
    """The phone drawing of ``fig`` as SVG text, or None when the wide one already fits a phone
    and no Axes asks for a phone drawing of its own."""
    wants_drawing = any(getattr(ax, PHONE_DRAWING, None) for ax in fig.axes)
    if svg_width_px(wide_svg) <= PHONE_WIDTH_PX and not wants_drawing:
        return None
    import warnings

    with warnings.catch_warnings():  # a layout engine's complaint would print under the figure
        warnings.simplefilter("ignore")
        copy, _ = phone_figure(fig)
        return print_svg(copy)


def embed(wide_svg: str, phone: str) -> str:
    """The wide SVG with the phone SVG in a comment after its root element (valid XML)."""
    encoded = base64.b64encode(phone.encode("utf-8")).decode("ascii")
    return f"{wide_svg.rstrip()}\n<!-- {MARKER}\n{encoded}\n-->\n"


def split(svg: str):
    """``(wide SVG, phone SVG or None, failure message or None)`` of an SVG written by
    :func:`install`'s figures."""
    failure = re.search(rf"<!-- {FAILED}: (.*?) -->\n?", svg, flags=re.DOTALL)
    if failure:
        svg = svg[:failure.start()] + svg[failure.end():]
    match = re.search(rf"\n?<!-- {MARKER}\n([A-Za-z0-9+/=\s]*?)\n-->\n?", svg)
    if not match:
        return svg, None, failure.group(1) if failure else None
    phone = base64.b64decode("".join(match.group(1).split())).decode("utf-8")
    return svg[:match.start()] + "\n", phone, None


def install(shell=None) -> None:
    """Make the kernel's SVG figures carry a phone drawing (IPython's ``print_figure``)."""
    import IPython.core.pylabtools as pylabtools

    original = pylabtools.print_figure
    if getattr(original, "_phone_drawings", False):
        return

    def print_figure(fig, fmt="png", bbox_inches="tight", base64=False, **kwargs):
        data = original(fig, fmt, bbox_inches, base64, **kwargs)
        if fmt != "svg" or not data:
            return data
        try:
            phone = phone_svg(fig, lambda copy: original(copy, "svg", bbox_inches, base64, **kwargs), data)
        except Exception as error:  # the wide figure still shows; the build reports it
            message = f"{type(error).__name__}: {error}".replace("--", "- -")
            return f"{data.rstrip()}\n<!-- {FAILED}: {message} -->\n"
        return embed(data, phone) if phone else data

    print_figure._phone_drawings = True
    pylabtools.print_figure = print_figure
    # if the inline backend already registered its formatters, register them again (with ours)
    import sys

    if shell is not None and "matplotlib_inline.backend_inline" in sys.modules:
        from matplotlib_inline.config import InlineBackend

        config = InlineBackend.instance()
        pylabtools.select_figure_formats(shell, config.figure_formats, **config.print_figure_kwargs)
