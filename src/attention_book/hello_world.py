"""Chapter 8: a Hello-World attention model that trains in seconds, and the tools to train it.

Everything from chapters 1-7 in one tiny language model:

* token embeddings over the GPT-2 vocabulary (tiktoken) plus learned position embeddings,
* one causal self-attention layer whose scores are scaled by ``1 / sqrt(d_k)`` with ``d_k``
  read from the keys themselves,
* an output layer that turns each context vector into one score (logit) per vocabulary token.

Typical use::

    from attention_book.hello_world import (
        HelloWorldModel, encode_texts, next_token_pairs, train, last_token_accuracy)

    token_ids = encode_texts(SIX_SENTENCES)            # (6, 5)
    inputs, targets = next_token_pairs(token_ids)      # (6, 4), (6, 4)
    model = HelloWorldModel(n_embd=5)
    result = train(model, inputs, targets, steps=100, lr=3e-2)
    last_token_accuracy(model(inputs), targets)        # 1.0

``model(inputs, return_intermediates=True)`` also returns the tensors a reader wants to look at
(queries, keys, values, scores, weights, ...), so the forward pass stays a plain forward pass.
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from .masks import causal_mask, check_context_length

__all__ = [
    "GPT2_VOCAB_SIZE",
    "HELLO_WORLD",
    "SIX_SENTENCES",
    "CHAPTER_SETTINGS",
    "SOURCE_SETTINGS",
    "HelloWorldModel",
    "TrainResult",
    "get_tokenizer",
    "encode_texts",
    "next_token_pairs",
    "next_token_loss",
    "last_token_accuracy",
    "train",
]

#: number of tokens in tiktoken's ``gpt2`` encoding
GPT2_VOCAB_SIZE = 50_257

HELLO_WORLD = "Hello World!"

#: stage 2 of chapter 8: the last word is predictable only from the second word (the noun)
SIX_SENTENCES: List[str] = [
    "The dog is an animal",
    "The human is a person",
    "The rock is a mineral",
    "The tree is a plant",
    "The car is a vehicle",
    "The sun is a star",
]


#: the chapter's stage-2 recipe: reaches 6/6 on SIX_SENTENCES (first at update 188 on CPU)
CHAPTER_SETTINGS = dict(seed=123, n_embd=5, optimizer="adamw", lr=3e-2, steps=300)
#: the source article's stage-2 recipe, for comparison (2/6 after 10,000 updates on CPU)
SOURCE_SETTINGS = dict(seed=123, n_embd=5, optimizer="adamw", lr=1e-4, steps=10_000)


@functools.lru_cache(maxsize=None)
def get_tokenizer():
    """tiktoken's GPT-2 byte-pair encoding (cached: loading it takes a moment)."""
    import tiktoken

    return tiktoken.get_encoding("gpt2")


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------


def encode_texts(texts: Sequence[str], context_length: Optional[int] = None, tokenizer=None) -> torch.Tensor:
    """Encode equally long texts into a ``(B, T)`` tensor of GPT-2 token ids.

    Raises a ``ValueError`` that says how to fix the input when a text is empty, when the texts
    encode to different numbers of tokens (a batch must be rectangular), or when a text has more
    than ``context_length`` tokens.
    """
    if isinstance(texts, str):
        texts = [texts]
    texts = list(texts)
    if not texts:
        raise ValueError("encode_texts got an empty list: pass at least one text, e.g. ['Hello World!']")
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"encode_texts needs strings, got {type(text).__name__}: {text!r}")
    tokenizer = tokenizer or get_tokenizer()
    encoded = [tokenizer.encode(text) for text in texts]
    for text, ids in zip(texts, encoded):
        if not ids:
            raise ValueError(
                f"text {text!r} encodes to no tokens: every text needs at least one token, "
                "e.g. 'Hello'"
            )
        if context_length is not None and len(ids) > context_length:
            raise ValueError(
                f"text {text!r} has {len(ids)} tokens but the context length is {context_length}: "
                f"shorten it to at most {context_length} tokens or use a model with "
                f"context_length >= {len(ids)}"
            )
    lengths = [len(ids) for ids in encoded]
    if len(set(lengths)) > 1:
        listing = ", ".join(f"{text!r}: {n}" for text, n in zip(texts, lengths))
        raise ValueError(
            f"the texts encode to different numbers of tokens ({listing}); a batch must be "
            "rectangular: use texts of the same token length or encode them in separate batches"
        )
    return torch.tensor(encoded, dtype=torch.long)


def next_token_pairs(token_ids: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Split ``(B, T)`` token ids into inputs ``ids[:, :-1]`` and targets ``ids[:, 1:]``.

    Target ``t`` is the token that follows input position ``t``: the model learns to predict
    the next token at every position at once.
    """
    if not isinstance(token_ids, torch.Tensor):
        raise TypeError(f"token_ids must be a tensor (use encode_texts), got {type(token_ids).__name__}")
    if token_ids.ndim != 2:
        raise ValueError(
            f"token_ids must have shape (B, T), got {tuple(token_ids.shape)}; "
            "add a batch dimension with token_ids.unsqueeze(0)"
        )
    if token_ids.shape[1] < 2:
        raise ValueError(
            f"each text needs at least 2 tokens to make an (input, next token) pair, got "
            f"{token_ids.shape[1]}"
        )
    return token_ids[:, :-1], token_ids[:, 1:]


# ----------------------------------------------------------------------------------------------
# model
# ----------------------------------------------------------------------------------------------


class HelloWorldModel(nn.Module):
    """Token + position embeddings, one causal self-attention layer, an output layer.

    Args:
        n_embd: size of every vector in the model (embeddings, queries, keys, values).
        context_length: the longest input it accepts (number of position embeddings).
        vocab_size: number of tokens (50,257 for GPT-2's tokenizer).

    ``forward(idx)`` returns logits ``(B, T, vocab_size)``;
    ``forward(idx, return_intermediates=True)`` returns ``(logits, intermediates)`` where
    ``intermediates`` is a dict of detached tensors: ``token_embeddings``,
    ``position_embeddings``, ``inputs``, ``queries``, ``keys``, ``values`` (all ``(B, T, C)``
    except position embeddings ``(T, C)``), ``scores``, ``masked_scores``, ``weights``
    (``(B, T, T)``) and ``context`` (``(B, T, C)``).
    """

    def __init__(self, n_embd: int = 5, context_length: int = 5, vocab_size: int = GPT2_VOCAB_SIZE):
        super().__init__()
        for name, value in (("n_embd", n_embd), ("context_length", context_length), ("vocab_size", vocab_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self.n_embd = n_embd
        self.context_length = context_length
        self.vocab_size = vocab_size
        self.token_embedding = nn.Embedding(vocab_size, n_embd)
        self.position_embedding = nn.Embedding(context_length, n_embd)
        self.W_query = nn.Linear(n_embd, n_embd, bias=False)
        self.W_key = nn.Linear(n_embd, n_embd, bias=False)
        self.W_value = nn.Linear(n_embd, n_embd, bias=False)
        self.out = nn.Linear(n_embd, vocab_size, bias=False)
        # True above the diagonal: the future a query must not see. A buffer follows .to(device).
        self.register_buffer("mask", causal_mask(context_length), persistent=False)

    def forward(self, idx: torch.Tensor, return_intermediates: bool = False):
        if not isinstance(idx, torch.Tensor) or idx.dtype != torch.long:
            raise TypeError(
                "idx must be a torch.long tensor of token ids, e.g. encode_texts(['Hello'])"
            )
        if idx.ndim != 2:
            raise ValueError(
                f"idx must have shape (B, T), got {tuple(idx.shape)}; for one text use idx.unsqueeze(0)"
            )
        B, T = idx.shape
        if T == 0:
            raise ValueError("idx has no tokens (T=0): give the model at least one token")
        check_context_length(T, self.context_length)
        positions = torch.arange(T, device=idx.device)  # (T,)

        token_embeddings = self.token_embedding(idx)  # (B, T, C)
        position_embeddings = self.position_embedding(positions)  # (T, C)
        x = token_embeddings + position_embeddings  # (B, T, C) + (T, C) -> (B, T, C)

        queries = self.W_query(x)  # (B, T, C)
        keys = self.W_key(x)  # (B, T, C)
        values = self.W_value(x)  # (B, T, C)

        scores = queries @ keys.transpose(-2, -1)  # (B, T, C) @ (B, C, T) -> (B, T, T)
        masked_scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))  # hide the future
        d_k = keys.shape[-1]  # the scale comes from the model's own size, never a constant
        weights = torch.softmax(masked_scores / math.sqrt(d_k), dim=-1)  # (B, T, T), rows sum to 1
        context = weights @ values  # (B, T, T) @ (B, T, C) -> (B, T, C)

        logits = self.out(context)  # (B, T, vocab_size): a score for every possible next token
        if not return_intermediates:
            return logits
        intermediates = {
            "token_embeddings": token_embeddings,
            "position_embeddings": position_embeddings,
            "inputs": x,
            "queries": queries,
            "keys": keys,
            "values": values,
            "scores": scores,
            "masked_scores": masked_scores,
            "weights": weights,
            "context": context,
        }
        return logits, {name: tensor.detach() for name, tensor in intermediates.items()}


# ----------------------------------------------------------------------------------------------
# loss, accuracy, training
# ----------------------------------------------------------------------------------------------


def _check_logits_targets(logits: torch.Tensor, targets: torch.Tensor) -> None:
    if logits.ndim != 3:
        raise ValueError(f"logits must have shape (B, T, vocab_size), got {tuple(logits.shape)}")
    if targets.shape != logits.shape[:2]:
        raise ValueError(
            f"targets have shape {tuple(targets.shape)} but logits {tuple(logits.shape)}: targets "
            "must be (B, T), one next token per input position (see next_token_pairs)"
        )


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the next-token predictions at every position.

    ``F.cross_entropy`` wants ``(N, vocab_size)`` scores and ``(N,)`` classes, so the batch and
    time dimensions are flattened into one: ``(B, T, V) -> (B*T, V)``.
    """
    _check_logits_targets(logits, targets)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def last_token_accuracy(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Fraction of sequences whose *last* next-token prediction (argmax over the vocabulary) is right."""
    _check_logits_targets(logits, targets)
    predicted = logits[:, -1, :].argmax(dim=-1)  # (B,)
    return float((predicted == targets[:, -1]).float().mean())


@dataclass
class TrainResult:
    """What :func:`train` returns.

    losses: ``losses[i]`` is the loss after ``i`` updates (so ``losses[0]`` is the untrained
        model's and ``losses[-1]`` the trained model's); ``steps + 1`` values.
    accuracies: last-token accuracy after ``i`` updates, like ``losses``.
    snapshots: ``(step, weights)`` pairs, ``weights`` of shape ``(B, T, T)`` on the CPU, taken
        before the first update (step 0), every ``snapshot_every`` updates and after the last.
    seconds: wall time of the loop.
    """

    losses: List[float] = field(default_factory=list)
    accuracies: List[float] = field(default_factory=list)
    snapshots: List[Tuple[int, torch.Tensor]] = field(default_factory=list)
    seconds: float = 0.0

    def first_step_all_correct(self) -> Optional[int]:
        """The first number of updates after which every last token is predicted right (or None)."""
        for step, accuracy in enumerate(self.accuracies):
            if accuracy == 1.0:
                return step
        return None


def _progress_default() -> bool:
    # The book build runs the notebooks without anyone watching: no progress bar there.
    return os.environ.get("ATTENTION_BOOK_STATIC") != "1"


def train(
    model: HelloWorldModel,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    steps: int,
    lr: float,
    optimizer: str = "adamw",
    snapshot_every: int = 0,
    progress: Optional[bool] = None,
    description: str = "training",
    stop_when_all_correct: bool = False,
) -> TrainResult:
    """Train ``model`` on one full batch for ``steps`` updates and record what happened.

    Every step: forward pass, next-token loss over all positions, ``zero_grad``, ``backward``,
    ``step``. The batch is moved to the model's device. ``optimizer`` is ``"adamw"`` or
    ``"sgd"``. ``progress`` shows a tqdm bar (default: on, except in the book build).
    """
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"steps must be a positive integer, got {steps!r}")
    if not lr > 0:
        raise ValueError(f"lr must be positive, got {lr!r}")
    if inputs.shape != targets.shape or inputs.ndim != 2:
        raise ValueError(
            f"inputs {tuple(inputs.shape)} and targets {tuple(targets.shape)} must both be (B, T); "
            "make them with next_token_pairs(token_ids)"
        )
    if optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
    elif optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=lr)
    else:
        raise ValueError(f"optimizer must be 'adamw' or 'sgd', got {optimizer!r}")
    if progress is None:
        progress = _progress_default()

    from tqdm.auto import tqdm

    device = next(model.parameters()).device
    inputs, targets = inputs.to(device), targets.to(device)
    result = TrainResult()
    model.train()
    start = time.perf_counter()
    for step in tqdm(range(steps), desc=description, disable=not progress):
        logits, seen = model(inputs, return_intermediates=True)
        loss = next_token_loss(logits, targets)
        result.losses.append(loss.item())
        result.accuracies.append(last_token_accuracy(logits.detach(), targets))
        if snapshot_every and step % snapshot_every == 0:
            result.snapshots.append((step, seen["weights"].cpu()))
        if stop_when_all_correct and result.accuracies[-1] == 1.0:
            break
        opt.zero_grad(set_to_none=True)  # forget the previous step's gradients
        loss.backward()  # d loss / d parameter for every parameter
        opt.step()  # move every parameter a little against its gradient
    else:
        # after the last update: measure once more, so the lists end with the trained model
        step = steps
        with torch.no_grad():
            logits, seen = model(inputs, return_intermediates=True)
        result.losses.append(next_token_loss(logits, targets).item())
        result.accuracies.append(last_token_accuracy(logits, targets))
    result.seconds = time.perf_counter() - start
    if snapshot_every and result.snapshots[-1][0] != step:
        result.snapshots.append((step, seen["weights"].cpu()))
    model.eval()
    return result
