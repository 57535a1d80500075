"""Chapter 1: from words to vectors.

* :func:`build_vocabulary` / :func:`encode`: a toy word-level tokenizer (one implementation, kept in
  :mod:`attention_book.data` with the worked examples and re-exported here).
* :func:`count_pairs`, :func:`merge_pair`, :func:`train_bpe`, :func:`bpe_encode`,
  :func:`bpe_decode`: byte-pair encoding from scratch on UTF-8 bytes, the algorithm behind GPT-2's
  tokenizer (ids 0-255 are the bytes, every merge adds one id).
* :class:`TokenAndPositionEmbedding`: token embeddings plus learned position embeddings, the
  input layer of every GPT-style model: token ids ``(B, T)`` -> vectors ``(B, T, C)``.
* :func:`next_token_windows`: the (input, target) windows a GPT trains on, cut from one long
  stream of token ids; the targets are the inputs shifted by one token.
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from . import validation as check
from .data import build_vocabulary, encode

__all__ = [
    "build_vocabulary",
    "encode",
    "count_pairs",
    "merge_pair",
    "train_bpe",
    "bpe_encode",
    "bpe_decode",
    "TokenAndPositionEmbedding",
    "next_token_windows",
]

#: ids 0-255 are the 256 possible bytes; the first merge gets id 256
NUM_BYTES = 256

Pair = Tuple[int, int]

_INTEGER_DTYPES = (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)


# --------------------------------------------------------------------------------------------
# Byte-pair encoding
# --------------------------------------------------------------------------------------------


def _token_ids(name: str, ids) -> List[int]:
    """``ids`` as a list of Python ints (a list, a tuple or a 1-D integer tensor)."""
    if isinstance(ids, torch.Tensor):
        if ids.dtype not in _INTEGER_DTYPES or ids.ndim != 1:
            raise TypeError(
                f"{name} must be a 1-D integer tensor or a list of ints, got a tensor of shape "
                f"{tuple(ids.shape)} and dtype {ids.dtype}; pass e.g. {name}=[72, 105]"
            )
        return ids.tolist()
    if not isinstance(ids, (list, tuple)) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in ids):
        raise TypeError(
            f"{name} must be a list of ints (token ids), got {type(ids).__name__} {ids!r:.60}; "
            f"pass e.g. {name}=list('Hi'.encode('utf-8'))"
        )
    return list(ids)


def _pair(pair) -> Pair:
    if (not isinstance(pair, tuple) or len(pair) != 2
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in pair)):
        raise TypeError(f"pair must be a tuple of two ints (two adjacent ids), got {pair!r:.60}; "
                        "pass e.g. pair=(104, 105)")
    return pair


def _merges(merges) -> Dict[Pair, int]:
    """Check that ``merges`` is what :func:`train_bpe` returns: pair -> 256, 257, ... in order."""
    if not isinstance(merges, dict):
        raise TypeError(f"merges must be the dict that train_bpe returns ((a, b) -> new id), got "
                        f"{type(merges).__name__}")
    for rank, (pair, new_id) in enumerate(merges.items()):
        _pair(pair)
        if new_id != NUM_BYTES + rank or max(pair) >= new_id:
            raise ValueError(
                f"merges must number new tokens 256, 257, ... in the order they were learned, each "
                f"made of earlier ids; entry {rank} is {pair} -> {new_id}. Use the dict train_bpe returns"
            )
    return merges


def count_pairs(ids: Sequence[int]) -> Counter:
    """How often each pair of neighbouring ids occurs: ``{(a, b): count}``, in first-seen order.

    ``count_pairs([1, 2, 1, 2, 3])`` is ``Counter({(1, 2): 2, (2, 1): 1, (2, 3): 1})``.
    """
    ids = _token_ids("ids", ids)
    return Counter(zip(ids, ids[1:]))  # (ids[i], ids[i + 1]) for every i


def merge_pair(ids: Sequence[int], pair: Pair, new_id: int) -> List[int]:
    """Replace every occurrence of ``pair`` in ``ids`` by ``new_id``, left to right.

    Occurrences do not overlap: ``merge_pair([7, 7, 7], (7, 7), 256)`` is ``[256, 7]``.
    Returns a new list; ``ids`` is not changed.
    """
    ids = _token_ids("ids", ids)
    first, second = _pair(pair)
    if isinstance(new_id, bool) or not isinstance(new_id, int):
        raise TypeError(f"new_id must be an int, got {type(new_id).__name__} {new_id!r}; pass e.g. new_id=256")
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == first and ids[i + 1] == second:
            merged.append(new_id)  # the pair becomes one token
            i += 2  # skip both halves: no overlapping matches
        else:
            merged.append(ids[i])
            i += 1
    return merged


def train_bpe(text: str, num_merges: int) -> Dict[Pair, int]:
    """Learn up to ``num_merges`` byte-pair merges from ``text``.

    Start from the UTF-8 bytes of ``text`` (ids 0-255), then repeat: count the neighbouring pairs,
    merge the most frequent one into a new id (256, 257, ...). Ties go to the pair seen first.
    Stops early when no pair occurs twice (a merge would learn a one-off).

    Returns ``{(a, b): new_id}`` in the order the merges were learned (the order
    :func:`bpe_encode` applies them).
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}; pass the training text")
    num_merges = check.positive_int("num_merges", num_merges)
    ids = list(text.encode("utf-8"))
    merges: Dict[Pair, int] = {}
    for rank in range(num_merges):
        counts = count_pairs(ids)
        if not counts:
            break
        best = max(counts, key=counts.get)  # max keeps the first of equal counts
        if counts[best] < 2:
            break
        new_id = NUM_BYTES + rank
        ids = merge_pair(ids, best, new_id)
        merges[best] = new_id
    return merges


def bpe_encode(text: str, merges: Dict[Pair, int]) -> List[int]:
    """Token ids of ``text``: its UTF-8 bytes with the learned merges applied in training order.

    Applying each merge to the whole sequence, in the order the merges were learned, gives the
    same ids as repeatedly merging the earliest-learned pair present (GPT-2's rule): a merge never
    creates a new neighbour pair of older ids.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}; pass the text to encode")
    ids = list(text.encode("utf-8"))
    for pair, new_id in _merges(merges).items():
        ids = merge_pair(ids, pair, new_id)
    return ids


def bpe_decode(ids: Sequence[int], merges: Dict[Pair, int]) -> str:
    """The text of token ``ids``: each id's bytes, joined, then decoded as UTF-8.

    The bytes of a merged token are the bytes of its two halves, built up in merge order. The
    bytes are joined *before* decoding, because one character can span two tokens (a token may
    end in the middle of a multi-byte character); invalid UTF-8 becomes U+FFFD.
    """
    ids = _token_ids("ids", ids)
    vocabulary = {index: bytes([index]) for index in range(NUM_BYTES)}
    for (first, second), new_id in _merges(merges).items():
        vocabulary[new_id] = vocabulary[first] + vocabulary[second]
    unknown = sorted({i for i in ids if i not in vocabulary})
    if unknown:
        raise ValueError(f"ids {unknown[:5]} are not in the vocabulary (0-{NUM_BYTES + len(merges) - 1}); "
                         "decode with the merges the ids were encoded with")
    return b"".join(vocabulary[i] for i in ids).decode("utf-8", errors="replace")


# --------------------------------------------------------------------------------------------
# Token and position embeddings
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# What a GPT learns from: inputs and next-token targets
# --------------------------------------------------------------------------------------------


def next_token_windows(token_ids, context_length: int, stride: Optional[int] = None):
    """Cut one long stream of token ids into ``(inputs, targets)`` windows for next-token training.

    Window ``n`` starts at token ``n * stride``: ``inputs[n]`` is ``context_length`` tokens and
    ``targets[n]`` the same tokens shifted by one, so ``targets[n, t]`` is the token that follows
    ``inputs[n, t]``. Every window holds ``context_length`` predictions. ``stride`` defaults to
    ``context_length`` (windows side by side, each token predicted once); a smaller stride makes
    overlapping windows. Tokens at the end that do not fill a window are left out.

    Args:
        token_ids: a list of ints or a 1-D integer tensor, e.g. ``tokenizer.encode(text)``.
        context_length: tokens per window (``T``).
        stride: how far each window starts after the previous one.

    Returns:
        ``(inputs, targets)``, two ``(N, T)`` tensors of dtype ``torch.long``.
    """
    ids = torch.tensor(_token_ids("token_ids", token_ids), dtype=torch.long)  # (num_tokens,)
    context_length = check.positive_int("context_length", context_length)
    stride = context_length if stride is None else check.positive_int("stride", stride)
    if len(ids) < context_length + 1:
        raise ValueError(
            f"token_ids has {len(ids)} tokens, too few for one window of context_length={context_length} "
            f"(a window needs context_length + 1 = {context_length + 1} tokens: the inputs and one more "
            f"target); use a longer text or a smaller context_length"
        )
    starts = range(0, len(ids) - context_length, stride)  # the last target must exist
    inputs = torch.stack([ids[start:start + context_length] for start in starts])  # (N, T)
    targets = torch.stack([ids[start + 1:start + context_length + 1] for start in starts])  # (N, T)
    return inputs, targets
