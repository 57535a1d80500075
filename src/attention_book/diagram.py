"""The book's two diagrams, drawn by code so every chapter shows the same picture.

* :func:`computation_diagram`: the whole self-attention computation with the shape of every
  tensor, ``x -> W_q, W_k, W_v -> Q, K, V -> Q K^T -> / sqrt(d_k) -> softmax -> @ V -> Z``,
  with the steps a chapter is about highlighted (chapters 2-5 show it at the top).
* :func:`weight_layout_diagram`: the book's ``W`` of shape ``(d_in, d_out)`` next to
  ``nn.Linear.weight`` of shape ``(d_out, d_in)``: the same numbers, transposed.

Highlighted steps get an orange face, a thick outline and a bold label, so they stand out
without colour too (greyscale print, colour-blind readers).
"""

from __future__ import annotations

from typing import Dict, Iterable, Optional, Tuple, Union

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

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


def computation_diagram(highlight: Union[None, str, Iterable[str]] = None, ax=None,
                        title: Optional[str] = None):
    """Draw ``x -> W_q, W_k, W_v -> Q, K, V -> Q K^T -> / sqrt(d_k) -> softmax -> @ V -> Z``.

    Every box carries the shape of its tensor. ``highlight`` names the step(s) to emphasise,
    any of :data:`STEPS`: ``"input"``, ``"projections"``, ``"qkv"``, ``"scores"``,
    ``"scale"``, ``"softmax"``, ``"context"`` (a string or a list of them, or None for none).
    Draws on ``ax`` if given, else on a new figure; returns the figure. The picture depends on
    nothing but its arguments, so it is identical on every run.
    """
    steps = _steps(highlight)
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a str or None, got {type(title).__name__}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(11.5, 3.0))
    else:
        fig = ax.figure
    ax.set_xlim(-0.1, 12.5)
    ax.set_ylim(-0.2, 3.25)
    ax.set_aspect("equal")
    ax.axis("off")

    for start, end in _ARROWS:
        x0, y0 = _BOXES[start][:2]
        x1, y1 = _BOXES[end][:2]
        ax.add_patch(FancyArrowPatch(
            (x0 + _WIDTH / 2, y0), (x1 - _WIDTH / 2, y1), arrowstyle="-|>", mutation_scale=12,
            color="#555555", lw=1.2, shrinkA=2, shrinkB=2, zorder=1))

    for x, y, label, shape, step in _BOXES.values():
        on = step in steps
        ax.add_patch(FancyBboxPatch(
            (x - _WIDTH / 2, y - _HEIGHT / 2), _WIDTH, _HEIGHT, boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=HIGHLIGHT_FACE if on else PLAIN_FACE, edgecolor=EDGE,
            lw=2.6 if on else 0.9, zorder=2))
        ax.text(x, y + 0.03, label, ha="center", va="center", fontsize=12 if label.startswith("$") else 10,
                fontweight="bold" if on else "normal", zorder=3)
        ax.text(x, y - _HEIGHT / 2 - 0.06, shape, ha="center", va="top", fontsize=8,
                color="#222222", zorder=3)
    if title is None and steps:
        title = "Self-attention, step by step (highlighted: " + ", ".join(steps) + ")"
    if title:
        ax.set_title(title, fontsize=11)
    return fig


def weight_layout_diagram(d_in: int = 3, d_out: int = 2, ax=None):
    """Draw the book's ``W`` ``(d_in, d_out)`` next to ``nn.Linear.weight`` ``(d_out, d_in)``.

    Entry ``W[i, j]`` (input ``i`` to output ``j``) is labelled ``w_ij`` in both grids, so the
    reader sees the same numbers, transposed: ``x @ W`` equals ``x @ linear.weight.T``.
    Returns the figure.
    """
    for name, value in (("d_in", d_in), ("d_out", d_out)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
        if not 1 <= value <= 6:
            raise ValueError(f"{name}={value} does not fit the picture: choose 1 to 6")
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.5, 3.2))
    else:
        fig = ax.figure
    ax.axis("off")
    ax.set_aspect("equal")
    gap = 3.0
    grids = [  # (left edge, rows, columns, (row, col) -> (i, j) of W, title, row name, col name, use)
        (0.0, d_in, d_out, lambda r, c: (r, c), f"book: W\nshape (d_in, d_out) = ({d_in}, {d_out})",
         "in", "out", "x @ W"),
        (d_out + gap, d_out, d_in, lambda r, c: (c, r),
         f"nn.Linear.weight\nshape (d_out, d_in) = ({d_out}, {d_in})", "out", "in", "x @ weight.T"),
    ]
    for left, rows, cols, index, caption, row_name, col_name, formula in grids:
        for r in range(rows):
            for c in range(cols):
                i, j = index(r, c)
                face = "#DCE6F2" if i == j else PLAIN_FACE  # shade the diagonal: it stays in place
                ax.add_patch(plt.Rectangle((left + c, -r - 1), 1, 1, facecolor=face, edgecolor=EDGE, lw=1))
                ax.text(left + c + 0.5, -r - 0.5, f"$w_{{{i + 1}{j + 1}}}$", ha="center", va="center",
                        fontsize=11)
            ax.text(left - 0.12, -r - 0.5, f"{row_name} {r + 1}", ha="right", va="center", fontsize=8)
        for c in range(cols):
            ax.text(left + c + 0.5, 0.08, f"{col_name} {c + 1}", ha="center", va="bottom", fontsize=8)
        ax.text(left + cols / 2, 0.55, caption, ha="center", va="bottom", fontsize=9)
        ax.text(left + cols / 2, -rows - 0.3, formula, ha="center", va="top", fontsize=10, family="monospace")
    middle = -min(d_in, d_out) / 2
    ax.annotate("", xy=(d_out + gap - 0.75, middle), xytext=(d_out + 0.25, middle),
                arrowprops=dict(arrowstyle="<->", color="#555555", lw=1.4))
    ax.text(d_out + (gap - 0.5) / 2, middle + 0.15, "transpose", ha="center", va="bottom", fontsize=9)
    height = max(d_in, d_out)
    ax.set_xlim(-1.0, d_out + gap + d_in + 0.3)
    ax.set_ylim(-height - 1.0, 1.6)
    return fig
