"""Companion package of *Self-attention from scratch*.

Each chapter builds its code step by step in a notebook; the finished version lives here so that
later chapters, the explorers, the exercise self-checks and the tests import it instead of
copy-pasting it.

=====================  =========================================================
module                 what it holds
=====================  =========================================================
``utils``              ``get_device``, ``set_seed``
``data``               the worked examples' inputs (sentences, 6x3 embeddings)
``embedding``          chapter 1: toy vocabulary, token + position embeddings
``checks``             self-checks the exercises call (friendly verdicts)
=====================  =========================================================
"""

__version__ = "0.1.0"

from .utils import get_device, set_seed  # noqa: F401
