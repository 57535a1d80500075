"""One look for every figure in the book: labelled heatmaps of embeddings and attention weights.

Also :func:`set_phone_drawing`, with which a drawing function tells the book's site how to draw
its Axes on a phone (book/_ext/phone_figures.py re-lays out every figure of the book build for a
390 px screen; in a reader's Jupyter or Colab the hint does nothing).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import matplotlib.pyplot as plt
import torch

#: Axes attribute read by the book build's phone drawings (book/_ext/phone_figures.py)
PHONE_DRAWING = "_attention_book_phone_drawing"


def set_phone_drawing(ax, draw: Callable, size: Tuple[float, float]) -> None:
    """Tell the book's site how ``ax`` looks on a phone: ``draw(ax)`` draws it again, in a
    phone's layout, on the cleared Axes; ``size`` is the (width, height) in inches it needs there
    (width at most 3.36, the phone's text column). ``draw`` must be picklable (a module-level
    function or a ``functools.partial`` of one): the book build draws a pickled copy.
    """
    setattr(ax, PHONE_DRAWING, (draw, (float(size[0]), float(size[1]))))


def heatmap(
    values,
    row_labels: Optional[Sequence[str]] = None,
    col_labels: Optional[Sequence[str]] = None,
    title: str = "",
    xlabel: str = "",
    ylabel: str = "",
    ax=None,
    cmap: str = "viridis",
    annotate: bool = True,
    fmt: str = "{:.2f}",
    vmin=None,
    vmax=None,
    colorbar: bool = True,
    annotation_fontsize: float = 10,
):
    """Draw a 2-D tensor as a labelled heatmap with the numbers written in each cell.

    ``values`` may be a tensor (any device, with or without grad) or a nested list.
    The numbers in the cells are ``annotation_fontsize`` points, as large as the tick labels
    (10 pt): on the book's site a figure is shrunk to fit the text column, and 10-pt text stays
    at least 9 px tall when the figure is at most about 10 inches wide (tests/test_figures.py).
    Returns the matplotlib ``Axes`` so callers can add to it.
    """
    data = torch.as_tensor(values).detach().cpu().float()
    if data.ndim != 2:
        raise ValueError(f"heatmap needs a 2-D tensor (rows, columns), got shape {tuple(data.shape)}")
    rows, cols = data.shape
    if ax is None:
        _, ax = plt.subplots(figsize=(max(3.0, 0.7 * cols + 1.5), max(2.5, 0.55 * rows + 1.0)))
    image = ax.imshow(data.numpy(), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    ax.set_xticks(range(cols))
    ax.set_yticks(range(rows))
    if col_labels is not None:
        ax.set_xticklabels(list(col_labels), rotation=45, ha="right")
    if row_labels is not None:
        ax.set_yticklabels(list(row_labels))
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if annotate and rows * cols <= 400:
        for i in range(rows):
            for j in range(cols):
                value = float(data[i, j])
                # dark text on light cells, light text on dark cells (perceived luminance)
                red, green, blue, _ = image.cmap(image.norm(value))
                color = "white" if 0.299 * red + 0.587 * green + 0.114 * blue < 0.5 else "black"
                ax.text(j, i, fmt.format(value), ha="center", va="center", color=color,
                        fontsize=annotation_fontsize)
    if colorbar:
        ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    return ax
