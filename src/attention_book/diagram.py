"""The book's two diagrams, drawn by code so every chapter shows the same picture.

* :func:`computation_diagram`: the whole self-attention computation with the shape of every
  tensor, ``x -> W_q, W_k, W_v -> Q, K, V -> Q K^T -> / sqrt(d_k) -> softmax -> @ V -> Z``,
  with the steps a chapter is about highlighted (chapters 2-5 show it at the top).
* :func:`weight_layout_diagram`: the book's ``W`` of shape ``(d_in, d_out)`` next to
  ``nn.Linear.weight`` of shape ``(d_out, d_in)``: the same numbers, transposed.

Highlighted steps get an orange face, a thick outline and a bold label, so they stand out
without colour too (greyscale print, colour-blind readers).

Both come in two layouts: ``layout="wide"`` (left to right, for a laptop's text column) and
``layout="phone"`` (top to bottom, 3.36 inches wide: every label at least 12 px on a 390 px
phone). A wide drawing tells the book's site about its phone layout
(:func:`attention_book.plotting.set_phone_drawing`), so the site shows the phone one on phones.
"""

from __future__ import annotations

import functools
import textwrap
from typing import Dict, Iterable, Optional, Tuple, Union

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from .plotting import set_phone_drawing

__all__ = ["STEPS", "computation_diagram", "weight_layout_diagram"]

#: step name -> what it covers; ``computation_diagram(highlight=...)`` takes these names
STEPS: Dict[str, str] = {
    "input": "the input embeddings x, shape (T, d_in)",
    "projections": "the trainable matrices W_q, W_k, W_v",
    "qkv": "the queries, keys and values Q, K, V",
    "scores": "the scores Q K^T, shape (T, T)",
    "scale": "the division by sqrt(d_k)",
    "softmax": "the softmax over each row: the attention weights",
    "context": "the weighted sum of the values, Z = weights @ V",
}

HIGHLIGHT_FACE = "#E69F00"  # Okabe-Ito orange: distinct for all common colour-vision types
PLAIN_FACE = "#F2F2F2"
EDGE = "#333333"

# name -> (centre x, centre y, label, shape label, step)
_BOXES: Dict[str, Tuple[float, float, str, str, str]] = {
    "x": (0.6, 1.5, "$x$", "(T, d_in)", "input"),
    "W_q": (2.2, 2.6, "$W_q$", "(d_in, d_k)", "projections"),
    "W_k": (2.2, 1.5, "$W_k$", "(d_in, d_k)", "projections"),
    "W_v": (2.2, 0.4, "$W_v$", "(d_in, d_v)", "projections"),
    "Q": (3.8, 2.6, "$Q$", "(T, d_k)", "qkv"),
    "K": (3.8, 1.5, "$K$", "(T, d_k)", "qkv"),
    "V": (3.8, 0.4, "$V$", "(T, d_v)", "qkv"),
    "scores": (5.5, 2.05, "$Q K^\\top$", "(T, T)", "scores"),
    "scale": (7.1, 2.05, "$\\div\\sqrt{d_k}$", "(T, T)", "scale"),
    "softmax": (8.7, 2.05, "softmax", "rows sum to 1\n(T, T)", "softmax"),
    "matmul": (10.3, 1.2, "$@\\ V$", "(T, T) @ (T, d_v)", "context"),
    "Z": (11.8, 1.2, "$Z$", "(T, d_v)", "context"),
}
_ARROWS = [
    ("x", "W_q"), ("x", "W_k"), ("x", "W_v"),
    ("W_q", "Q"), ("W_k", "K"), ("W_v", "V"),
    ("Q", "scores"), ("K", "scores"), ("scores", "scale"), ("scale", "softmax"),
    ("softmax", "matmul"), ("V", "matmul"), ("matmul", "Z"),
]
_WIDTH, _HEIGHT = 1.05, 0.62

# The phone layout: the same boxes top to bottom (as the landing page's phone drawing).
# name -> (centre x, centre y, shape label)
_PHONE_BOXES: Dict[str, Tuple[float, float, str]] = {
    "x": (2.2, 9.0, "(T, d_in)"),
    "W_q": (0.8, 7.6, "(d_in, d_k)"), "W_k": (2.2, 7.6, "(d_in, d_k)"), "W_v": (3.6, 7.6, "(d_in, d_v)"),
    "Q": (0.8, 6.2, "(T, d_k)"), "K": (2.2, 6.2, "(T, d_k)"), "V": (3.6, 6.2, "(T, d_v)"),
    "scores": (1.5, 4.8, "(T, T)"),
    "scale": (1.5, 3.6, "(T, T)"),
    "softmax": (1.5, 2.4, "rows sum to 1"),  # no "(T, T)": a longer label meets the arrow from V
    "matmul": (1.5, 1.2, "(T, T) @ (T, d_v)"),
    "Z": (1.5, 0.0, "(T, d_v)"),
}
_PHONE_WIDTH, _PHONE_HEIGHT = 1.15, 0.62
#: (width, height) in inches of the phone layouts, title included
PHONE_SIZE = (3.36, 8.6)
WEIGHT_LAYOUT_PHONE_SIZE = (3.36, 6.4)
_LAYOUTS = ("wide", "phone")


def _steps(highlight) -> Tuple[str, ...]:
    if highlight is None:
        return ()
    names: Iterable = (highlight,) if isinstance(highlight, str) else highlight
    if not isinstance(names, (tuple, list, set, frozenset)):
        raise TypeError(
            f"highlight must be None, a step name or a list of step names, got "
            f"{type(highlight).__name__} {highlight!r}; e.g. highlight='softmax'"
        )
    steps = []
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"highlight must hold step names (str), got {name!r}; e.g. highlight='softmax'")
        if name not in STEPS:
            raise ValueError(
                f"highlight={name!r} is not a step of the diagram; choose from {tuple(STEPS)}"
            )
        steps.append(name)
    return tuple(steps)


def _check_layout(layout) -> str:
    if layout not in _LAYOUTS:
        raise ValueError(f"layout={layout!r} is not a layout of the diagram; choose from {_LAYOUTS}")
    return layout


def _box(ax, x, y, width, label, on, fontsize):
    ax.add_patch(FancyBboxPatch(
        (x - width / 2, y - _HEIGHT / 2), width, _HEIGHT, boxstyle="round,pad=0.02,rounding_size=0.08",
        facecolor=HIGHLIGHT_FACE if on else PLAIN_FACE, edgecolor=EDGE,
        lw=2.6 if on else 0.9, zorder=2))
    ax.text(x, y + 0.03, label, ha="center", va="center", fontsize=fontsize + (2 if label.startswith("$") else 0),
            fontweight="bold" if on else "normal", zorder=3)


def _arrow(ax, tail, head):
    ax.add_patch(FancyArrowPatch(tail, head, arrowstyle="-|>", mutation_scale=12, color="#555555",
                                 lw=1.2, shrinkA=2, shrinkB=2, zorder=1))


def _draw_wide(ax, steps):
    ax.set_xlim(-0.1, 12.5)
    ax.set_ylim(-0.2, 3.25)
    for start, end in _ARROWS:
        x0, y0 = _BOXES[start][:2]
        x1, y1 = _BOXES[end][:2]
        _arrow(ax, (x0 + _WIDTH / 2, y0), (x1 - _WIDTH / 2, y1))
    for x, y, label, shape, step in _BOXES.values():
        _box(ax, x, y, _WIDTH, label, step in steps, fontsize=10)
        ax.text(x, y - _HEIGHT / 2 - 0.06, shape, ha="center", va="top", fontsize=8,
                color="#222222", zorder=3)


def _draw_phone(ax, steps):
    ax.set_xlim(0.0, 4.4)
    ax.set_ylim(-0.75, 9.45)
    for start, end in _ARROWS:
        (x0, y0), (x1, y1) = _PHONE_BOXES[start][:2], _PHONE_BOXES[end][:2]
        tail = (x0, y0 - _PHONE_HEIGHT / 2 - 0.35)  # below the box's shape label
        # into the right side of "@ V" from V, else into the top edge of the next box
        head = (x1 + _PHONE_WIDTH / 2, y1) if start == "V" else (x1, y1 + _PHONE_HEIGHT / 2)
        _arrow(ax, tail, head)
    for name, (x, y, shape) in _PHONE_BOXES.items():
        _, _, label, _, step = _BOXES[name]
        _box(ax, x, y, _PHONE_WIDTH, label, step in steps, fontsize=11)
        ax.text(x, y - _PHONE_HEIGHT / 2 - 0.06, shape, ha="center", va="top", fontsize=9,
                color="#222222", zorder=3)


def _draw_computation(ax, steps, title, layout):
    ax.set_aspect("equal")
    ax.axis("off")
    (_draw_phone if layout == "phone" else _draw_wide)(ax, steps)
    if title is None and steps:
        title = "Self-attention, step by step (highlighted: " + ", ".join(steps) + ")"
    if title:
        ax.set_title(textwrap.fill(title, 38) if layout == "phone" else title, fontsize=11)


def _phone_computation(ax, steps, title):
    _draw_computation(ax, steps, title, "phone")


def computation_diagram(highlight: Union[None, str, Iterable[str]] = None, ax=None,
                        title: Optional[str] = None, layout: str = "wide"):
    """Draw ``x -> W_q, W_k, W_v -> Q, K, V -> Q K^T -> / sqrt(d_k) -> softmax -> @ V -> Z``.

    Every box carries the shape of its tensor. ``highlight`` names the step(s) to emphasise,
    any of :data:`STEPS`: ``"input"``, ``"projections"``, ``"qkv"``, ``"scores"``,
    ``"scale"``, ``"softmax"``, ``"context"`` (a string or a list of them, or None for none).
    ``layout``: ``"wide"`` (left to right, 11.5 x 3 inches) or ``"phone"`` (top to bottom,
    :data:`PHONE_SIZE`). Draws on ``ax`` if given, else on a new figure; returns the figure. The
    picture depends on nothing but its arguments, so it is identical on every run.
    """
    steps = _steps(highlight)
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, got {type(title).__name__}")
    _check_layout(layout)
    if ax is None:
        fig, ax = plt.subplots(figsize=PHONE_SIZE if layout == "phone" else (11.5, 3.0))
    else:
        fig = ax.figure
    _draw_computation(ax, steps, title, layout)
    if layout == "wide":
        set_phone_drawing(ax, functools.partial(_phone_computation, steps=steps, title=title), PHONE_SIZE)
    return fig


def _weight_grid(ax, left, top, rows, cols, index, caption, row_name, col_name, formula, small, text=1.0):
    """One grid of ``w_ij`` labels with its caption above and the product that uses it below
    (``text``: data units per 0.84 inch, so the text keeps its room however big the grids)."""
    for r in range(rows):
        for c in range(cols):
            i, j = index(r, c)
            face = "#DCE6F2" if i == j else PLAIN_FACE  # shade the diagonal: it stays in place
            ax.add_patch(plt.Rectangle((left + c, top - r - 1), 1, 1, facecolor=face, edgecolor=EDGE, lw=1))
            ax.text(left + c + 0.5, top - r - 0.5, f"$w_{{{i + 1}{j + 1}}}$", ha="center", va="center",
                    fontsize=small + 3)
        ax.text(left - 0.12 * text, top - r - 0.5, f"{row_name} {r + 1}", ha="right", va="center", fontsize=small)
    for c in range(cols):
        ax.text(left + c + 0.5, top + 0.08 * text, f"{col_name} {c + 1}", ha="center", va="bottom", fontsize=small)
    ax.text(left + cols / 2, top + 0.55 * text, caption, ha="center", va="bottom", fontsize=small + 1)
    ax.text(left + cols / 2, top - rows - 0.3 * text, formula, ha="center", va="top", fontsize=small + 2,
            family="monospace")


def _weight_grids(d_in, d_out):
    # (rows, columns, (row, col) -> (i, j) of W, caption, row name, column name, product)
    return [
        (d_in, d_out, lambda r, c: (r, c), f"book: W\nshape (d_in, d_out) = ({d_in}, {d_out})",
         "in", "out", "x @ W"),
        (d_out, d_in, lambda r, c: (c, r),
         f"nn.Linear.weight\nshape (d_out, d_in) = ({d_out}, {d_in})", "out", "in", "x @ weight.T"),
    ]


def _draw_weights_wide(ax, d_in, d_out):
    gap = 3.0
    (rows1, cols1, *first), (rows2, cols2, *second) = _weight_grids(d_in, d_out)
    _weight_grid(ax, 0.0, 0.0, rows1, cols1, *first, small=8)
    _weight_grid(ax, d_out + gap, 0.0, rows2, cols2, *second, small=8)
    middle = -min(d_in, d_out) / 2
    ax.annotate("", xy=(d_out + gap - 0.75, middle), xytext=(d_out + 0.25, middle),
                arrowprops=dict(arrowstyle="<->", color="#555555", lw=1.4))
    ax.text(d_out + (gap - 0.5) / 2, middle + 0.15, "transpose", ha="center", va="bottom", fontsize=9)
    ax.set_xlim(-1.0, d_out + gap + d_in + 0.3)
    ax.set_ylim(-max(d_in, d_out) - 1.0, 1.6)


def _weights_phone_limits(d_in, d_out):
    """(x limits, y limits, top of the second grid, text scale) of the phone layout: one grid
    above the other. 3.36 inches hold the x limits; ``text`` data units are 0.84 inch."""
    half = max(d_in, d_out) / 2
    xlim = (-max(half + 1.1, 2.0), max(half + 0.3, 2.0))
    text = (xlim[1] - xlim[0]) / 4.0
    second_top = -d_in - 2.9 * text  # under the first grid: its product, the arrow, the second caption
    return xlim, (second_top - d_out - 0.8 * text, 1.6 * text), second_top, text


def _draw_weights_phone(ax, d_in, d_out):
    (rows1, cols1, *first), (rows2, cols2, *second) = _weight_grids(d_in, d_out)
    xlim, ylim, second_top, text = _weights_phone_limits(d_in, d_out)
    _weight_grid(ax, -cols1 / 2, 0.0, rows1, cols1, *first, small=9, text=text)
    _weight_grid(ax, -cols2 / 2, second_top, rows2, cols2, *second, small=9, text=text)
    ax.annotate("", xy=(0, -d_in - 1.75 * text), xytext=(0, -d_in - 0.75 * text),
                arrowprops=dict(arrowstyle="<->", color="#555555", lw=1.4))
    ax.text(0.2 * text, -d_in - 1.25 * text, "transpose", ha="left", va="center", fontsize=10)
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)


def _weights_phone_size(d_in, d_out):
    (x0, x1), (y0, y1), _, _ = _weights_phone_limits(d_in, d_out)
    return (3.36, round(3.36 * (y1 - y0) / (x1 - x0), 2))


def _draw_weights(ax, d_in, d_out, layout):
    ax.axis("off")
    ax.set_aspect("equal")
    (_draw_weights_phone if layout == "phone" else _draw_weights_wide)(ax, d_in, d_out)


def _phone_weights(ax, d_in, d_out):
    _draw_weights(ax, d_in, d_out, "phone")


def weight_layout_diagram(d_in: int = 3, d_out: int = 2, ax=None, layout: str = "wide"):
    """Draw the book's ``W`` ``(d_in, d_out)`` next to ``nn.Linear.weight`` ``(d_out, d_in)``.

    Entry ``W[i, j]`` (input ``i`` to output ``j``) is labelled ``w_ij`` in both grids, so the
    reader sees the same numbers, transposed: ``x @ W`` equals ``x @ linear.weight.T``.
    ``layout``: ``"wide"`` (the grids side by side) or ``"phone"`` (one above the other).
    Returns the figure.
    """
    for name, value in (("d_in", d_in), ("d_out", d_out)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
        if not 1 <= value <= 6:
            raise ValueError(f"{name}={value} does not fit the picture: choose 1 to 6")
    _check_layout(layout)
    if ax is None:
        fig, ax = plt.subplots(figsize=_weights_phone_size(d_in, d_out) if layout == "phone" else (7.5, 3.2))
    else:
        fig = ax.figure
    _draw_weights(ax, d_in, d_out, layout)
    if layout == "wide":
        set_phone_drawing(ax, functools.partial(_phone_weights, d_in=d_in, d_out=d_out),
                          _weights_phone_size(d_in, d_out))
    return fig
