"""The worked examples' inputs, so every chapter and test starts from the same numbers.

Two running examples come from the source texts:

* ``"Your journey starts with one step"``: six tokens with hand-picked 3-dimensional embeddings
  (chapters 2-4 and 7).
* ``"Life is short, eat dessert first"``: a toy vocabulary of six words embedded with
  ``torch.manual_seed(123)`` and ``nn.Embedding(50_000, 3)`` (chapters 1, 4, 5, 6, 7).

The toy word-level tokenizer of chapter 1 (:func:`words`, :func:`build_vocabulary`,
:func:`encode`) lives here too, so that the worked examples and chapter 1
(:mod:`attention_book.embedding` re-exports it) share one implementation.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import torch

__all__ = ["JOURNEY_TOKENS", "LIFE_SENTENCE", "journey_inputs", "words", "build_vocabulary", "encode",
           "life_vocabulary", "life_inputs"]

JOURNEY_TOKENS: List[str] = ["Your", "journey", "starts", "with", "one", "step"]

LIFE_SENTENCE = "Life is short, eat dessert first"


def journey_inputs() -> Tuple[List[str], torch.Tensor]:
    """The six tokens of "Your journey starts with one step" and their (6, 3) embeddings."""
    inputs = torch.tensor(
        [
            [0.43, 0.15, 0.89],  # Your     x^(1)
            [0.55, 0.87, 0.66],  # journey  x^(2)
            [0.57, 0.85, 0.64],  # starts   x^(3)
            [0.22, 0.58, 0.33],  # with     x^(4)
            [0.77, 0.25, 0.10],  # one      x^(5)
            [0.05, 0.80, 0.55],  # step     x^(6)
        ]
    )
    return list(JOURNEY_TOKENS), inputs


def words(text: str) -> List[str]:
    """The words of ``text``, split at white space, commas dropped."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__} ({text!r}); pass a sentence such as "
                        f"{LIFE_SENTENCE!r}")
    return text.replace(",", " ").split()


def build_vocabulary(text: str) -> Dict[str, int]:
    """Map every distinct word of ``text`` (commas dropped) to an id, in sorted order."""
    distinct = sorted(set(words(text)))
    if not distinct:
        raise ValueError(f"text has no words (got {text!r}): give at least one word to build a vocabulary from")
    return {word: index for index, word in enumerate(distinct)}


def encode(text: str, vocabulary: Dict[str, int]) -> List[int]:
    """Turn ``text`` into word ids; unknown words raise a KeyError that names them."""
    tokens = words(text)
    unknown = [word for word in tokens if word not in vocabulary]
    if unknown:
        raise KeyError(
            f"words not in the vocabulary: {unknown}; rebuild the vocabulary from a text that "
            "contains them (real tokenizers such as GPT-2's BPE never hit this: they fall back "
            "to sub-word pieces)"
        )
    return [vocabulary[word] for word in tokens]


def life_vocabulary(sentence: str = LIFE_SENTENCE) -> Dict[str, int]:
    """Toy vocabulary: the sentence's words (comma dropped), sorted, numbered from 0."""
    return build_vocabulary(sentence)


def life_inputs(vocab_size: int = 50_000, embedding_dim: int = 3, seed: int = 123):
    """Tokens, token ids and embeddings of "Life is short, eat dessert first".

    Reproduces the source's numbers: ``torch.manual_seed(123)`` then
    ``nn.Embedding(50_000, 3)`` gives the (6, 3) tensor starting ``[0.3374, -0.1778, -0.3035]``.
    Returns ``(tokens, token_ids, embeddings)`` with embeddings detached from the graph.
    """
    tokens = words(LIFE_SENTENCE)
    token_ids = torch.tensor(encode(LIFE_SENTENCE, life_vocabulary()))
    torch.manual_seed(seed)
    embedding = torch.nn.Embedding(vocab_size, embedding_dim)
    return tokens, token_ids, embedding(token_ids).detach()
