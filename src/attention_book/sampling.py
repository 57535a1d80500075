"""Chapter 9: turning a model's next-token scores into text.

A language model gives, at the last position, one score (logit) per vocabulary token. How we
pick the next token from them is a choice, and each function below is one such choice; all
work on ``logits`` of shape ``(..., V)`` (one row per sequence) and never change their input:

* :func:`greedy`: always the highest score (deterministic, tends to repeat itself);
* :func:`apply_temperature`: divide the scores by ``T`` before the softmax: ``T < 1`` sharpens
  the distribution, ``T > 1`` flattens it, ``T -> 0`` approaches greedy;
* :func:`top_k_filter`: keep the ``k`` highest scores, set the rest to ``-inf`` (probability 0);
* :func:`top_p_filter`: nucleus sampling (Holtzman et al. 2020): keep the smallest set of the
  most likely tokens whose probabilities add up to at least ``p``;
* :func:`next_token_probabilities`: the distribution after temperature, top-k and top-p, the
  one :func:`sample_next` draws from;
* :func:`generate`: append a sampled (or greedy) token, run the model again, repeat; with
  ``use_cache=True`` the model keeps the keys and values of the tokens it has seen
  (:class:`~attention_book.gpt.GPTCache`) and runs only the new token at each step: the same
  tokens, much less work.
"""

from __future__ import annotations

import math
import numbers
from typing import Optional, Tuple

import torch
import torch.nn as nn

from . import validation as check
from .functional import masked_softmax  # the book's one softmax (without a mask: torch.softmax)
from .gpt import GPT

__all__ = [
    "greedy",
    "apply_temperature",
    "top_k_filter",
    "top_p_filter",
    "next_token_probabilities",
    "sample_next",
    "generate",
]


def _logits(logits) -> torch.Tensor:
    check.floating_tensor("logits", logits, "(..., V)")
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have shape (..., V) with V >= 1 scores, got {tuple(logits.shape)}")
    return logits


def _temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(f"temperature must be a number >= 0, got {temperature!r} ({type(temperature).__name__}); "
                        "pass e.g. temperature=0.8")
    temperature = float(temperature)
    if not (temperature >= 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a finite number >= 0, got {temperature}; pass e.g. "
                         "temperature=0.8 (0 means greedy)")
    return temperature


def _top_p(p) -> float:
    if isinstance(p, bool) or not isinstance(p, numbers.Real):
        raise TypeError(f"p must be a number in (0, 1], got {p!r} ({type(p).__name__}); pass e.g. p=0.9")
    p = float(p)
    if not 0.0 < p <= 1.0:  # also rejects nan
        raise ValueError(f"p must be in (0, 1] (a probability mass), got {p}; pass e.g. p=0.9 (1 keeps every token)")
    return p


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The index of the highest score in every row: ``(..., V) -> (...)`` token ids."""
    return _logits(logits).argmax(dim=-1)


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``logits / temperature`` (``temperature > 0``): below 1 sharper, above 1 flatter.

    The softmax of ``z / T`` puts ``exp((z_i - z_j) / T)`` times as much probability on token
    ``i`` as on token ``j``; as ``T -> 0`` all of it goes to the highest score (greedy).
    """
    _logits(logits)
    temperature = _temperature(temperature)
    if temperature == 0:
        raise ValueError("temperature=0 would divide by zero: it means greedy decoding, so call greedy(logits) "
                         "(sample_next and generate do that for temperature=0)")
    return logits / temperature


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the ``k`` highest scores of every row and set the others to ``-inf``.

    Exactly ``k`` tokens survive per row, also when scores tie (the tie is broken by
    ``torch.topk``); ``k >= V`` keeps every token.
    """
    _logits(logits)
    return _top_k(logits, check.positive_int("k", k))


def _top_k(logits: torch.Tensor, k: int) -> torch.Tensor:
    if k >= logits.shape[-1]:
        return logits.clone()
    kept = torch.topk(logits, k, dim=-1).indices  # (..., k)
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, kept, True)
    return logits.masked_fill(~keep, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filtering: keep the smallest set of most likely tokens whose probability reaches ``p``.

    Per row: sort the probabilities (softmax of ``logits``) from high to low and keep tokens
    until their sum is at least ``p``; the rest get ``-inf``. The most likely token is always
    kept (a single token may already hold more than ``p``); ``p=1`` keeps every token.
    """
    _logits(logits)
    return _nucleus(logits, _top_p(p))


def _nucleus(logits: torch.Tensor, p: float) -> torch.Tensor:
    if p == 1.0:
        return logits.clone()  # rounding must not drop the tail of the distribution
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True, stable=True)  # (..., V)
    sorted_probs = masked_softmax(sorted_logits.float())
    mass_before = torch.cumsum(sorted_probs, dim=-1) - sorted_probs  # probability of the better tokens
    drop_sorted = mass_before >= p  # the better tokens already reach p: this one is not needed
    drop = torch.zeros_like(drop_sorted).scatter_(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def next_token_probabilities(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                             top_p: Optional[float] = None) -> torch.Tensor:
    """The distribution :func:`sample_next` draws from: softmax after temperature, then top-k, then top-p.

    ``temperature=0`` gives all the probability to the greedy token. Returns ``(..., V)``
    probabilities (float32 or wider) that sum to 1 in every row.
    """
    _logits(logits)
    return _distribution(logits, *_sampling_options(temperature, top_k, top_p))


def _sampling_options(temperature, top_k, top_p) -> Tuple[float, Optional[int], Optional[float]]:
    """The checked sampling options (checked once, before a loop over tokens)."""
    temperature = _temperature(temperature)
    top_k = check.optional(check.positive_int, "top_k", top_k)
    top_p = None if top_p is None else _top_p(top_p)
    return temperature, top_k, top_p


def _distribution(logits: torch.Tensor, temperature: float, top_k: Optional[int],
                  top_p: Optional[float]) -> torch.Tensor:
    """:func:`next_token_probabilities` without the checks."""
    if temperature == 0:
        one_hot = torch.zeros_like(logits, dtype=torch.float32 if logits.element_size() < 4 else logits.dtype)
        return one_hot.scatter_(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    scaled = logits / temperature
    if top_k is not None:
        scaled = _top_k(scaled, top_k)
    if top_p is not None:
        scaled = _nucleus(scaled, top_p)
    return masked_softmax(scaled.float() if scaled.element_size() < 4 else scaled)


def sample_next(logits: torch.Tensor, temperature: float = 1.0, top_k: Optional[int] = None,
                top_p: Optional[float] = None, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Draw one token per row of ``logits`` ``(B, V)`` -> ``(B,)`` token ids.

    The draw happens on the CPU with ``generator`` (or the global generator), so a seed writes
    the same text on every device. ``temperature=0`` is greedy (no randomness).
    """
    _logits(logits)
    check.ndim("logits", logits, 2, "(B, V): the scores at the last position of every sequence")
    _generator(generator)
    return _draw(logits, *_sampling_options(temperature, top_k, top_p), generator)


def _generator(generator) -> None:
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")


def _draw(logits: torch.Tensor, temperature: float, top_k: Optional[int], top_p: Optional[float],
          generator: Optional[torch.Generator]) -> torch.Tensor:
    """:func:`sample_next` without the checks: ``(B, V)`` -> ``(B,)``."""
    if temperature == 0:
        return logits.argmax(dim=-1)  # greedy: no distribution to draw from, nothing leaves the device
    probabilities = _distribution(logits, temperature, top_k, top_p)  # (B, V)
    drawn = torch.multinomial(probabilities.detach().cpu(), num_samples=1, generator=generator)  # (B, 1)
    return drawn.squeeze(-1).to(logits.device)


@torch.no_grad()
def generate(model: nn.Module, idx: torch.Tensor, max_new_tokens: int, temperature: float = 1.0,
             top_k: Optional[int] = None, top_p: Optional[float] = None,
             generator: Optional[torch.Generator] = None, use_cache: bool = False) -> torch.Tensor:
    """Append ``max_new_tokens`` tokens to ``idx`` ``(B, T)``, one at a time; returns ``(B, T + n)``.

    Each step runs ``model`` on the last ``context_length`` tokens (its whole view), takes the
    scores at the last position and picks the next token as :func:`sample_next` does
    (``temperature=0``: greedy). ``model`` maps ``(B, T)`` ids to ``(B, T, V)`` logits and has a
    ``config.context_length`` (the chapter's :class:`~attention_book.gpt.GPT`) or a
    ``context_length`` attribute (chapter 8's model).

    ``use_cache=True`` (a :class:`~attention_book.gpt.GPT` only): the model keeps every block's
    keys and values in a :class:`~attention_book.gpt.GPTCache`, so after the prompt each step runs
    only the one new token through the model. The tokens are the same as without the cache (the
    same arithmetic, in another order: equal up to float rounding). Once the text is longer than
    the context, the window slides and every position embedding changes, so each step then runs
    the whole window again, as without the cache.

    The arguments are checked once, before the loop; the loop writes into a preallocated output.
    """
    check.tensor("idx", idx, "(B, T)")
    check.ndim("idx", idx, 2, "(B, T)")
    if idx.dtype != torch.long:
        raise TypeError(f"idx must hold torch.long token ids, got dtype {idx.dtype}; use idx.long()")
    max_new_tokens = check.positive_int("max_new_tokens", max_new_tokens)
    options = _sampling_options(temperature, top_k, top_p)
    _generator(generator)
    use_cache = check.boolean("use_cache", use_cache)
    context_length = getattr(getattr(model, "config", None), "context_length", None) or getattr(
        model, "context_length", None)
    if context_length is None:
        raise TypeError("model must have config.context_length or context_length (the longest input it takes)")
    is_gpt = isinstance(model, GPT)
    if use_cache and not is_gpt:
        raise TypeError(f"use_cache=True needs the chapter's GPT (it keeps a GPTCache), got {type(model).__name__}; "
                        "pass use_cache=False")
    if is_gpt:
        model.check_inputs(idx[:, -context_length:])  # once: the loop feeds back the model's own tokens
    run = (lambda ids, cache=None: model(ids, cache=cache, validate=False)) if is_gpt else (
        lambda ids, cache=None: model(ids))
    batch, length = idx.shape
    out = torch.empty(batch, length + max_new_tokens, dtype=torch.long, device=idx.device)
    out[:, :length] = idx
    cache = model.new_cache() if use_cache else None
    was_training = model.training
    model.eval()
    for _ in range(max_new_tokens):
        if cache is not None and 0 < len(cache) < cache.capacity:
            logits = run(out[:, length - 1:length], cache)  # (B, 1, V): only the newest token
        else:
            if cache is not None:
                cache.reset()  # the window slides: positions shift, every key and value changes
            logits = run(out[:, max(0, length - context_length):length], cache)  # (B, <= context, V)
        out[:, length] = _draw(logits[:, -1, :], *options, generator)  # (B,)
        length += 1
    model.train(was_training)
    return out


#: Okabe-Ito blue for kept tokens; cut ones are light grey *and* hatched (not told by colour alone)
KEPT_COLOUR, CUT_COLOUR = "#0072B2", "#BBBBBB"


def plot_cut(probabilities: torch.Tensor, kept: torch.Tensor, labels, title: str = "", ax=None):
    """Draw one next-token distribution as bars: kept tokens solid blue, cut tokens grey and hatched.

    ``probabilities`` and ``kept`` (bool) are 1-D over the tokens to show, ``labels`` their
    strings (drawn with spaces as "␣" and newlines as "⏎" so they stay visible). Each kept bar
    is labelled with its probability *after* the cut when ``probabilities`` are those; the
    caller chooses. Returns the matplotlib ``Axes``.
    """
    import matplotlib.pyplot as plt

    check.tensor("probabilities", probabilities, "(N,)")
    check.ndim("probabilities", probabilities, 1, "(N,)")
    kept = torch.as_tensor(kept, dtype=torch.bool).cpu()
    labels = [str(label).replace(" ", "␣").replace("\n", "⏎") for label in labels]
    if kept.shape != probabilities.shape or len(labels) != probabilities.numel():
        raise ValueError(f"probabilities {tuple(probabilities.shape)}, kept {tuple(kept.shape)} and "
                         f"{len(labels)} labels must all have one entry per token")
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 0.3 * len(labels) + 1.0), 2.8))
    values = probabilities.detach().cpu().float()
    positions = range(len(labels))
    ax.bar([i for i in positions if kept[i]], values[kept].tolist(), color=KEPT_COLOUR, label="kept")
    ax.bar([i for i in positions if not kept[i]], values[~kept].tolist(), color=CUT_COLOUR, hatch="///",
           edgecolor="#666666", linewidth=0.5, label="cut")
    ax.set_xticks(list(positions))
    ax.set_xticklabels(labels)
    ax.set_ylabel("probability")
    ax.set_title(title)
    ax.legend(loc="upper right", frameon=False)
    return ax
