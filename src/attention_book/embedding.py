"""Chapter 1: from words to vectors.

* :func:`build_vocabulary` / :func:`encode`: a toy word-level tokenizer (one implementation, kept in
  :mod:`attention_book.data` with the worked examples and re-exported here).
* :class:`TokenAndPositionEmbedding`: token embeddings plus learned position embeddings, the
  input layer of every GPT-style model: token ids ``(B, T)`` -> vectors ``(B, T, C)``.
"""

from __future__ import annotations

import torch
from torch import nn

from . import validation as check
from .data import build_vocabulary, encode

__all__ = ["build_vocabulary", "encode", "TokenAndPositionEmbedding"]

_INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


class TokenAndPositionEmbedding(nn.Module):
    """Token embedding plus learned position embedding.

    ``forward(token_ids)`` takes ``(T,)`` or ``(B, T)`` integer ids and returns ``(B, T, C)``
    (or ``(T, C)`` for unbatched input), where ``C = embedding_dim``.
    """

    def __init__(self, vocab_size: int, context_length: int, embedding_dim: int):
        super().__init__()
        self.vocab_size = check.positive_int("vocab_size", vocab_size)
        self.context_length = check.positive_int("context_length", context_length)
        self.embedding_dim = check.positive_int("embedding_dim", embedding_dim)
        self.token_embedding = nn.Embedding(vocab_size, embedding_dim)  # one row per token id
        self.position_embedding = nn.Embedding(context_length, embedding_dim)  # one row per position

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        check.tensor("token_ids", token_ids, "(T,) or (B, T)")
        if token_ids.dtype not in _INTEGER_DTYPES:
            raise TypeError(
                f"token_ids must be an integer tensor, got dtype {token_ids.dtype}; "
                "use torch.tensor(ids) with Python ints (or token_ids.long())"
            )
        check.ndim("token_ids", token_ids, (1, 2), "(T,) or (B, T)")
        check.same_device("token_ids", token_ids, "the embedding weights", self.token_embedding.weight)
        num_tokens = token_ids.shape[-1]
        check.sequence_length("token_ids", num_tokens, self.context_length)
        if token_ids.numel() and (token_ids.min() < 0 or token_ids.max() >= self.vocab_size):
            raise ValueError(
                f"token_ids must lie in [0, {self.vocab_size - 1}] (vocab_size={self.vocab_size}), "
                f"got ids from {int(token_ids.min())} to {int(token_ids.max())}; encode the text with "
                f"the vocabulary this layer was built for, or build it with a larger vocab_size"
            )
        positions = torch.arange(num_tokens, device=token_ids.device)  # (T,)
        # (B, T, C) + (T, C): the same position vectors are added to every sequence in the batch
        return self.token_embedding(token_ids) + self.position_embedding(positions)

    def extra_repr(self) -> str:
        return f"vocab_size={self.vocab_size}, context_length={self.context_length}, embedding_dim={self.embedding_dim}"
