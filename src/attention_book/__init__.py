"""Companion package of *Self-attention from scratch*.

Each chapter builds its code step by step in a notebook; the finished version lives here so that
later chapters, the explorers, the exercise self-checks and the tests import it instead of
copy-pasting it.

=====================  =========================================================
module                 what it holds
=====================  =========================================================
``utils``              ``get_device``, ``set_seed``
``glue``               ``glue``: a machine-dependent value from the run into the prose
``validation``         argument checks: TypeError / ValueError naming argument, value, fix
``functional``         the attention core: ``masked_softmax``, ``scaled_dot_product_attention``
``data``               the worked examples' inputs (sentences, 6x3 embeddings), toy tokenizer
``plotting``           ``heatmap``: one look for every matrix in the book
``diagram``            the book's two diagrams (the computation, the weight layout)
``masks``              ``causal_mask``, ``padding_mask``, ``combine_masks``
``embedding``          ch. 1: toy vocabulary, token + position embeddings
``scores``             ch. 2-3: attention scores, stable softmax, temperature
``attention``          ch. 4: ``SelfAttention`` (nn.Linear), ``SelfAttentionParams``
``multihead``          ch. 5: ``MultiHeadAttention`` (self, cross, causal, padding), wrapper
``cross``              ch. 6: ``CrossAttention`` (one head) with key padding masks
``causal``             ch. 7: ``CausalAttention`` (one head), the two masking recipes
``training``           the training loop chapters 8 and 9 share (mixed precision), batches,
                       held-out loss with error bars
``hello_world``        ch. 8: ``HelloWorldModel`` and its training recipe
``gpt``                ch. 9: ``GPT`` (pre-norm blocks, fused attention), ``GPTCache``
``gpt2_weights``       ch. 9: GPT-2's weights in the book's GPT (``from_pretrained``)
``gpt_training``       ch. 9: the training recipe (CPU and GPU settings), ``train_gpt``
``gpt_accounting``     ch. 9: parameters, FLOPs per token, MFU, training memory
``sampling``           ch. 9: greedy, temperature, top-k, top-p, ``generate`` (KV cache)
``corpus``             ch. 9: Jane Austen's novels (package data), ``CharTokenizer``
``fused``              ch. 10: ``FusedMultiHeadAttention`` (PyTorch's fused kernel)
``kv_cache``           ch. 10: ``KVCache``, ``CachedMultiHeadAttention``
``cost``               ch. 10: FLOPs and bytes of attention (exact counts)
``measure``            ch. 10: time, peak memory, matmul speed on CPU or GPU
``benchmark``          ch. 10: the implementations side by side, timed
``explorers``          interactive anywidget explorers (d_k, heads, mask, playback)
``checks``             self-checks the exercises call (friendly verdicts)
``instructor``         student release and autograder (``attention-book`` CLI)
=====================  =========================================================

Imports go one way: a chapter's module imports only from earlier chapters and from the shared
helpers (``utils``, ``validation``, ``functional``, ``data``, ``plotting``, ``diagram``, ``masks``,
``training``);
``tests/test_imports.py`` checks it.
"""

__version__ = "0.1.0"

from .utils import get_device, set_seed  # noqa: F401
