"""Companion package of *Self-attention from scratch*.

Each chapter builds its code step by step in a notebook; the finished version lives here so that
later chapters, the explorers, the exercise self-checks and the tests import it instead of
copy-pasting it.

=====================  =========================================================
module                 what it holds
=====================  =========================================================
``utils``              ``get_device``, ``set_seed``
``data``               the worked examples' inputs (sentences, 6x3 embeddings)
``plotting``           ``heatmap``: one look for every matrix in the book
``masks``              ``causal_mask``, ``check_context_length``
``embedding``          ch. 1: toy vocabulary, token + position embeddings
``scores``             ch. 2-3: attention scores, stable softmax, temperature
``attention``          ch. 4: ``SelfAttention`` (nn.Linear), ``SelfAttentionParams``
``multihead``          ch. 5: ``MultiHeadAttention``, ``MultiHeadAttentionWrapper``
``cross``              ch. 6: ``CrossAttention`` with key padding masks
``causal``             ch. 7: ``CausalAttention``, masking helpers
``hello_world``        ch. 8: ``HelloWorldModel`` and its training loop
``scale``              ch. 9: fused path, KV cache, timing and memory helpers
``explorers``          interactive anywidget explorers (d_k, heads, mask, playback)
``checks``             self-checks the exercises call (friendly verdicts)
``instructor``         student release and autograder (``attention-book`` CLI)
=====================  =========================================================
"""

__version__ = "0.1.0"

from .utils import get_device, set_seed  # noqa: F401
