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
``training_playback(tokens, snapshots, losses)``       8: the training step
====================================================  =======================================

The widgets sync both ways: ``explorer.d_k = 2`` in Python redraws the view, and after a reader
moves the slider ``explorer.d_k`` holds the new value. ``explorer.attention_weights()`` returns
what is drawn, computed with torch. Bad input raises a ``ValueError`` saying how to fix it.

The book build sets ``ATTENTION_BOOK_STATIC=1``; each explorer then also returns a small
self-contained ``text/html`` version of itself for the static site.
"""

from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence, Tuple

import torch

from ._widgets import (  # noqa: F401
    STATIC_ENV,
    DkExplorer,
    ExplorerInputError,
    HeadsExplorer,
    MaskExplorer,
    TrainingPlayback,
    _check_int,
    _check_projection,
    _to_matrix,
    _to_tokens,
    divisors,
)

__all__ = [
    "dk_explorer",
    "heads_explorer",
    "mask_explorer",
    "training_playback",
    "demo_weights",
    "demo_training",
    "DkExplorer",
    "HeadsExplorer",
    "MaskExplorer",
    "TrainingPlayback",
    "divisors",
    "ExplorerInputError",
]


def _projection_data(tokens, inputs, W_query, W_key):
    tokens = _to_tokens(tokens)
    data = dict(
        tokens=tokens,
        inputs=_to_matrix("inputs", inputs),
        w_query=_to_matrix("W_query", W_query, allow_linear=True),
        w_key=_to_matrix("W_key", W_key, allow_linear=True),
    )
    _check_projection(data["tokens"], data["inputs"], data["w_query"], data["w_key"])
    return data


def _check_bool(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def dk_explorer(tokens, inputs, W_query, W_key, d_k: Optional[int] = None, scaled: bool = True,
                title: str = "") -> DkExplorer:
    """Chapter 3: a d_k slider and a scaling switch over the attention weights of ``inputs``.

    The projections use the first ``d_k`` columns of ``W_query`` / ``W_key`` (shape
    ``(d_in, d_out)``), so the slider runs from 1 to ``d_out``; ``d_k=None`` starts at ``d_out``.
    With ``scaled=True`` the scores are divided by ``sqrt(d_k)`` before the softmax. Beside each
    row the explorer shows its largest weight and its entropy (how spread out it is).
    """
    data = _projection_data(tokens, inputs, W_query, W_key)
    d_out = len(data["w_query"][0])
    d_k = d_out if d_k is None else _check_int("d_k", d_k, 1, d_out, " (the number of projection columns used)")
    return DkExplorer(**data, d_k=d_k, scaled=_check_bool("scaled", scaled), title=title)


def heads_explorer(tokens, inputs, W_query, W_key, num_heads: int = 2, causal: bool = False,
                   title: str = "") -> HeadsExplorer:
    """Chapter 5: split the ``d_out`` projection columns into heads, one heatmap per head.

    Head ``h`` uses columns ``h*head_dim:(h+1)*head_dim`` with ``head_dim = d_out // num_heads``
    and scales its scores by ``1/sqrt(head_dim)``. The slider offers every divisor of ``d_out``.
    """
    data = _projection_data(tokens, inputs, W_query, W_key)
    d_out = len(data["w_query"][0])
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise TypeError(f"num_heads must be an int, got {num_heads!r}")
    if num_heads < 1 or d_out % num_heads:
        raise ExplorerInputError(
            f"d_out={d_out} is not divisible by num_heads={num_heads}: choose num_heads from {divisors(d_out)}"
        )
    return HeadsExplorer(**data, num_heads=num_heads, causal=_check_bool("causal", causal), title=title)


def mask_explorer(tokens, inputs, W_query, W_key, causal: bool = True, query_index: Optional[int] = None,
                  title: str = "") -> MaskExplorer:
    """Chapter 7: switch the causal mask on and off and follow one query row.

    Scores are scaled by ``1/sqrt(d_out)``; masked positions get ``-inf`` before the softmax, so
    their weights are exactly 0 and every row still sums to 1. ``query_index`` (default: the middle
    token) selects the highlighted row; negative values count from the end.
    """
    data = _projection_data(tokens, inputs, W_query, W_key)
    num_tokens = len(data["tokens"])
    if query_index is None:
        query_index = (num_tokens - 1) // 2
    query_index = _check_int("query_index", query_index, -num_tokens, num_tokens - 1, " (a row of the weights)")
    return MaskExplorer(**data, causal=_check_bool("causal", causal), query_index=query_index % num_tokens,
                        title=title)


def _compact(value: float) -> float:
    # 7 significant digits: float32 precision, about half the bytes of a full float64 repr.
    return float(f"{value:.7g}")


def training_playback(tokens, snapshots: Iterable[Tuple[int, object]], losses: Optional[Sequence[float]] = None,
                      title: str = "") -> TrainingPlayback:
    """Chapter 8: a slider that scrubs through attention weights saved during training.

    ``snapshots`` is a list of ``(step, weights)`` with ``weights`` of shape ``(T, T)`` or
    ``(H, T, T)`` (one heatmap per head) and steps increasing. ``losses`` (optional) is either one
    loss per snapshot, or one loss per training step (``losses[i]`` at step ``i``); the explorer
    draws the curve and marks the current step. Weights are stored to 7 significant digits.
    """
    tokens = _to_tokens(tokens)
    try:
        snapshots = list(snapshots)
    except TypeError:
        raise TypeError("snapshots must be a list of (step, weights) pairs") from None
    if not snapshots:
        raise ExplorerInputError("snapshots is empty: save at least one (step, weights) pair during training")
    num_tokens = len(tokens)
    steps, stacks, first_shape = [], [], None
    for position, item in enumerate(snapshots):
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TypeError(f"snapshots[{position}] must be a (step, weights) pair, got {type(item).__name__}")
        step, weights = item
        if isinstance(step, torch.Tensor) and step.numel() == 1 and not step.is_floating_point():
            step = int(step)
        step = _check_int(f"the step of snapshots[{position}]", step, 0, 10**12)
        if steps and step <= steps[-1]:
            raise ExplorerInputError(
                f"snapshot steps must increase: step {step} comes after step {steps[-1]}; sort the snapshots by step"
            )
        tensor = torch.as_tensor(weights.detach() if isinstance(weights, torch.Tensor) else weights)
        if tensor.ndim == 2:
            tensor = tensor.unsqueeze(0)
        if tensor.ndim != 3 or tuple(tensor.shape[1:]) != (num_tokens, num_tokens):
            raise ExplorerInputError(
                f"the weights at step {step} have shape {tuple(tensor.shape)}: expected ({num_tokens}, {num_tokens}) "
                f"or (num_heads, {num_tokens}, {num_tokens}) for {num_tokens} tokens"
            )
        if first_shape is None:
            first_shape = tuple(tensor.shape)
        elif tuple(tensor.shape) != first_shape:
            raise ExplorerInputError(
                f"the weights at step {step} have shape {tuple(tensor.shape)} but the first snapshot has {first_shape}"
            )
        heads = [_to_matrix(f"the weights at step {step}", head) for head in tensor]
        steps.append(step)
        stacks.append([[[_compact(w) for w in row] for row in head] for head in heads])
    loss_values, loss_steps = [], []
    if losses is not None:
        loss_values = [float(v) for v in torch.as_tensor(losses, dtype=torch.float64).reshape(-1).tolist()]
        if not all(math.isfinite(v) for v in loss_values):
            raise ExplorerInputError("losses contains NaN or inf: pass finite loss values")
        if len(loss_values) == len(steps):
            loss_steps = list(steps)
        elif len(loss_values) > steps[-1]:
            loss_steps = list(range(len(loss_values)))
        else:
            raise ExplorerInputError(
                f"got {len(loss_values)} losses for {len(steps)} snapshots up to step {steps[-1]}: pass one loss "
                f"per snapshot ({len(steps)} values) or one per training step (at least {steps[-1] + 1} values)"
            )
        loss_values = [_compact(v) for v in loss_values]
    return TrainingPlayback(tokens=tokens, steps=steps, snapshots=stacks, losses=loss_values,
                            loss_steps=loss_steps, snapshot_index=0, title=title)


# --------------------------------------------------------------------------- demo data


def demo_weights(seed: int = 123, d_in: int = 3, d_out: int = 8) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded random ``(W_query, W_key, W_value)``, each ``(d_in, d_out)``, for the explorer demos.

    Uses its own generator, so it neither reads nor changes the global random state.
    """
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(d_in, d_out, generator=generator) for _ in range(3))


def demo_training(seed: int = 0, steps: int = 120, every: int = 6, lr: float = 1.0):
    """A tiny training run whose attention weights make a good playback (about a second on a CPU).

    Two causal heads over the journey sentence learn two patterns: head 1 attends to the previous
    token, head 2 to the first token. The inputs are the journey embeddings plus a one-hot position.
    Returns ``(tokens, snapshots, losses)``: snapshots every ``every`` steps as
    ``(step, weights (2, T, T))`` and one loss per step, ready for :func:`training_playback`.
    """
    from ..data import journey_inputs

    tokens, embeddings = journey_inputs()
    num_tokens = len(tokens)
    x = torch.cat([embeddings, torch.eye(num_tokens)], dim=1)  # (T, 3 + T)
    generator = torch.Generator().manual_seed(seed)
    head_dim, num_heads = 4, 2
    W_query = (0.3 * torch.randn(x.shape[1], num_heads * head_dim, generator=generator)).requires_grad_()
    W_key = (0.3 * torch.randn(x.shape[1], num_heads * head_dim, generator=generator)).requires_grad_()
    positions = torch.arange(num_tokens)
    targets = torch.stack([(positions - 1).clamp(min=0), torch.zeros_like(positions)])  # (H, T)
    hidden = torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool), diagonal=1)

    def weights():
        q = (x @ W_query).view(num_tokens, num_heads, head_dim).transpose(0, 1)  # (H, T, hd)
        k = (x @ W_key).view(num_tokens, num_heads, head_dim).transpose(0, 1)
        scores = (q @ k.transpose(1, 2) / math.sqrt(head_dim)).masked_fill(hidden, float("-inf"))
        return torch.softmax(scores, dim=-1)  # (H, T, T)

    snapshots, losses = [], []
    for step in range(steps + 1):
        attention = weights()
        loss = -attention.gather(2, targets.unsqueeze(-1)).clamp_min(1e-9).log().mean()
        if step % every == 0:
            snapshots.append((step, attention.detach().clone()))
        losses.append(loss.item())
        if step == steps:
            break
        W_query.grad = W_key.grad = None
        loss.backward()
        with torch.no_grad():  # plain gradient descent
            W_query -= lr * W_query.grad
            W_key -= lr * W_key.grad
    return tokens, snapshots, losses
