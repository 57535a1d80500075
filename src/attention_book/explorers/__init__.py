"""Interactive attention explorers: drag a slider, watch the attention weights change.

Each function returns a widget; make it the last expression of a cell to show it. The attention
math runs in the browser (``explorer.js``), so the explorers react instantly in JupyterLab and
Colab, and stay interactive on the static book site, where no Python kernel exists.

All weights follow the book's row-vector convention ``x @ W`` with ``W`` of shape
``(d_in, d_out)``; an ``nn.Linear`` may be passed instead (its ``weight.T`` is used).

====================================================  =======================================
function                                              chapter: what the slider changes
====================================================  =======================================
``dk_explorer(tokens, inputs, W_query, W_key)``        3: d_k (first d_k columns), scaling on/off
``heads_explorer(tokens, inputs, W_query, W_key)``     5: number of heads (divisors of d_out)
``mask_explorer(tokens, inputs, W_query, W_key)``      7: causal mask on/off, the query row
``training_playback(tokens, snapshots, losses)``       8: the training step (and the sentence)
``sampling_explorer(tokens, logits)``                  9: temperature, top-k and top-p cuts
====================================================  =======================================

The widgets sync both ways: ``explorer.d_k = 2`` in Python redraws the view, and after a reader
moves the slider ``explorer.d_k`` holds the new value. ``explorer.attention_weights()`` returns
what is drawn, computed with torch. Bad input raises a ``ValueError`` saying how to fix it.

The first three compute the weights themselves (in the browser, and with
``attention_book.functional`` for ``attention_weights()``); the playback replays weights saved
during training. The book build sets ``ATTENTION_BOOK_STATIC=1``; each explorer then also returns
a small self-contained ``text/html`` version of itself for the static site.

Modules: ``_inputs`` (checking the reader's tensors), ``_widgets`` (the widget classes),
``_static`` (the kernel-free HTML packager), ``_factories`` (the four functions above),
``_demo`` (seeded demo data, and a next-word distribution counted in chapter 9's novels),
``_colab`` (Colab's custom widget manager, switched on before an explorer is shown, and the line
a front end without widgets shows instead), ``explorer.js`` / ``explorer.css`` (the view).
"""

from __future__ import annotations

from ._demo import demo_next_words, demo_training, demo_weights
from ._factories import dk_explorer, heads_explorer, mask_explorer, training_playback
from ._factories import sampling_explorer
from ._inputs import ExplorerInputError, divisors
from ._static import STATIC_ENV
from ._widgets import DkExplorer, HeadsExplorer, MaskExplorer, TrainingPlayback
from ._widgets import SamplingExplorer

__all__ = [
    "dk_explorer",
    "heads_explorer",
    "mask_explorer",
    "training_playback",
    "sampling_explorer",
    "demo_weights",
    "demo_training",
    "demo_next_words",
    "DkExplorer",
    "HeadsExplorer",
    "MaskExplorer",
    "TrainingPlayback",
    "SamplingExplorer",
    "divisors",
    "ExplorerInputError",
    "STATIC_ENV",
]
