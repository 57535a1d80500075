"""Chapter 1: from words to vectors.

* :func:`build_vocabulary` / :func:`encode`: a toy word-level tokenizer.
* :class:`TokenAndPositionEmbedding`: token embeddings plus learned position embeddings, the
  input layer of every GPT-style model: token ids ``(B, T)`` -> vectors ``(B, T, C)``.
"""

from __future__ import annotations

from typing import Dict, List

import torch
from torch import nn

from .masks import check_context_length


def build_vocabulary(text: str) -> Dict[str, int]:
    """Map every distinct word of ``text`` (commas dropped) to an id, in sorted order."""
    words = text.replace(",", " ").split()
    if not words:
        raise ValueError("the text has no words: give at least one word to build a vocabulary from")
    return {word: index for index, word in enumerate(sorted(set(words)))}


def encode(text: str, vocabulary: Dict[str, int]) -> List[int]:
    """Turn ``text`` into word ids; unknown words raise an error that names them."""
    words = text.replace(",", " ").split()
    unknown = [word for word in words if word not in vocabulary]
    if unknown:
        raise KeyError(
            f"words not in the vocabulary: {unknown}; rebuild the vocabulary from a text that "
            "contains them (real tokenizers such as GPT-2's BPE never hit this: they fall back "
            "to sub-word pieces)"
        )
    return [vocabulary[word] for word in words]


class TokenAndPositionEmbedding(nn.Module):
    """Token embedding plus learned position embedding.

    ``forward(token_ids)`` takes ``(T,)`` or ``(B, T)`` integer ids and returns ``(B, T, C)``
    (or ``(T, C)`` for unbatched input), where ``C = embedding_dim``.
    """

    def __init__(self, vocab_size: int, context_length: int, embedding_dim: int):
        super().__init__()
        for name, value in (("vocab_size", vocab_size), ("context_length", context_length),
                            ("embedding_dim", embedding_dim)):
            if int(value) < 1:
                raise ValueError(f"{name} must be a positive integer, got {value}")
        self.context_length = context_length
        self.token_embedding = nn.Embedding(vocab_size, embedding_dim)  # one row per token id
        self.position_embedding = nn.Embedding(context_length, embedding_dim)  # one row per position

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        if token_ids.dtype not in (torch.int64, torch.int32):
            raise TypeError(
                f"token ids must be an integer tensor, got dtype {token_ids.dtype}; "
                "use torch.tensor(ids) with Python ints (or .long())"
            )
        if token_ids.ndim not in (1, 2):
            raise ValueError(f"expected token ids of shape (T,) or (B, T), got {tuple(token_ids.shape)}")
        num_tokens = token_ids.shape[-1]
        check_context_length(num_tokens, self.context_length)
        vocab_size = self.token_embedding.num_embeddings
        if token_ids.numel() and (token_ids.min() < 0 or token_ids.max() >= vocab_size):
            raise ValueError(
                f"token ids must lie in [0, {vocab_size - 1}] (the vocabulary size is {vocab_size}), "
                f"got ids from {int(token_ids.min())} to {int(token_ids.max())}"
            )
        positions = torch.arange(num_tokens, device=token_ids.device)  # (T,)
        # (B, T, C) + (T, C): the same position vectors are added to every sequence in the batch
        return self.token_embedding(token_ids) + self.position_embedding(positions)
