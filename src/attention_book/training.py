"""The training loop every model of the book shares (chapter 8's Hello-World model, chapter 9's GPT).

One update is always the same five lines: forward pass, loss, ``zero_grad``, ``backward``,
``step``. :func:`training_loop` runs them ``steps`` times; what differs between the chapters is
*which* batch the forward pass sees and what is recorded along the way, and the caller says that
in one function, ``loss_at(step)``, that returns the loss of that step (or ``None`` to stop
before updating)::

    def loss_at(step):
        inputs, targets = random_windows(train_ids, batch_size, context_length, generator)
        _, loss = model(inputs, targets)
        return loss

    training_loop(model, adamw(model.parameters(), lr=1e-3), steps=500, loss_at=loss_at)

Also here, for any model that maps token ids ``(B, T)`` to logits ``(B, T, V)``:
:func:`random_windows` cuts a batch of training examples out of one long sequence of token ids,
and :func:`held_out_loss` measures the loss on text the model was not trained on.
"""

from __future__ import annotations

import math
import os
from typing import Callable, Iterable, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import validation as check

__all__ = [
    "progress_default",
    "adamw",
    "warmup_cosine",
    "training_loop",
    "random_windows",
    "held_out_loss",
]


def progress_default() -> bool:
    """Show progress bars, except in the book build (nobody watches it; ``ATTENTION_BOOK_STATIC=1``)."""
    return os.environ.get("ATTENTION_BOOK_STATIC") != "1"


def adamw(params: Iterable, lr: float, weight_decay: float = 0.01, **options) -> torch.optim.Optimizer:
    """AdamW over ``params`` (parameters or parameter groups), with PyTorch's fused kernel when
    this PyTorch has one for the device: one kernel for the whole update, several times faster
    on a CPU (PyTorch >= 2.4). ``weight_decay=0.01`` is PyTorch's default."""
    lr = check.positive_number("lr", lr)
    params = list(params)
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True, **options)
    except (RuntimeError, TypeError, ValueError):  # older PyTorch or a device without it
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, **options)


def warmup_cosine(steps: int, warmup: int) -> Callable[[int], float]:
    """The learning-rate factor of step ``s``: a linear rise over ``warmup`` steps from
    ``1 / warmup`` to 1, then a cosine decay to 0.1 at the last step (GPT-2-style training)."""
    steps = check.positive_int("steps", steps)
    warmup = check.positive_int("warmup", warmup)
    if warmup > steps:
        raise ValueError(f"warmup={warmup} is longer than steps={steps}: pass warmup <= steps")

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, steps - 1 - warmup)  # 0 -> 1
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    return factor


def training_loop(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    steps: int,
    loss_at: Callable[[int], Optional[torch.Tensor]],
    lr_factor: Optional[Callable[[int], float]] = None,
    max_grad_norm: Optional[float] = None,
    progress: Optional[bool] = None,
    description: str = "training",
) -> int:
    """Run up to ``steps`` updates of ``model``; return how many were made.

    Each step: ``loss = loss_at(step)`` (the caller's forward pass and loss; ``None`` stops the
    loop before this update), then ``optimizer.zero_grad()``, ``loss.backward()``, optionally
    clip the gradient norm to ``max_grad_norm``, and ``optimizer.step()``. ``lr_factor(step)``,
    if given, multiplies every parameter group's learning rate at that step (e.g.
    :func:`warmup_cosine`). ``progress`` shows a tqdm bar (default: :func:`progress_default`).
    The model is in training mode (dropout on) during the loop and in eval mode afterwards.
    """
    steps = check.positive_int("steps", steps)
    if not callable(loss_at):
        raise TypeError(f"loss_at must be a function step -> loss, got {type(loss_at).__name__}")
    if lr_factor is not None and not callable(lr_factor):
        raise TypeError(f"lr_factor must be None or a function step -> factor, got {type(lr_factor).__name__}")
    check.optional(check.positive_number, "max_grad_norm", max_grad_norm)
    if progress is None:
        progress = progress_default()
    from tqdm.auto import tqdm

    base_lrs = [group["lr"] for group in optimizer.param_groups]
    model.train()
    updates = 0
    for step in tqdm(range(steps), desc=description, disable=not progress):
        loss = loss_at(step)
        if loss is None:
            break
        if lr_factor is not None:
            for group, base in zip(optimizer.param_groups, base_lrs):
                group["lr"] = base * lr_factor(step)
        optimizer.zero_grad(set_to_none=True)  # forget the previous step's gradients
        loss.backward()  # d loss / d parameter for every parameter
        if max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        optimizer.step()  # move every parameter a little against its gradient
        updates += 1
    if lr_factor is not None:
        for group, base in zip(optimizer.param_groups, base_lrs):
            group["lr"] = base
    model.eval()
    return updates


def _token_ids(name: str, ids) -> torch.Tensor:
    check.tensor(name, ids, "(N,)")
    if ids.dtype != torch.long:
        raise TypeError(f"{name} must hold torch.long token ids, got dtype {ids.dtype}; use {name}.long()")
    check.ndim(name, ids, 1, "(N,): the whole text as one sequence of token ids")
    return ids


def random_windows(ids: torch.Tensor, batch_size: int, context_length: int,
                   generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` random windows of ``context_length`` tokens from the 1-D ``ids``, and their targets.

    Returns ``(inputs, targets)``, both ``(batch_size, context_length)`` on the device of ``ids``:
    row ``b`` of ``inputs`` is ``ids[s : s + T]`` for a random start ``s``, and its targets are
    the same window shifted by one token, ``ids[s + 1 : s + T + 1]``. The starts are drawn on the
    CPU from ``generator`` (or the global generator), so a seed gives the same batches on every
    device.
    """
    _token_ids("ids", ids)
    batch_size = check.positive_int("batch_size", batch_size)
    context_length = check.positive_int("context_length", context_length)
    if ids.numel() < context_length + 1:
        raise ValueError(f"ids has {ids.numel()} tokens, too few for one window of context_length="
                         f"{context_length} plus its next token: pass a longer text or a shorter context")
    starts = torch.randint(ids.numel() - context_length, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(context_length + 1)  # (T + 1,)
    windows = ids[(starts[:, None] + offsets).to(ids.device)]  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


@torch.no_grad()
def held_out_loss(model: nn.Module, ids: torch.Tensor, context_length: int, max_windows: Optional[int] = None,
                  batch_size: int = 32) -> float:
    """Mean next-token cross-entropy (nats per token) of ``model`` on the 1-D ``ids``.

    The text is cut into consecutive, non-overlapping windows of ``context_length`` tokens (the
    last, incomplete one is dropped); with ``max_windows`` only that many, spread evenly over the
    text. No randomness: the same model gives the same number every time. The model must map
    ``(B, T)`` token ids to ``(B, T, V)`` logits; it is put in eval mode and left as it was.
    """
    _token_ids("ids", ids)
    context_length = check.positive_int("context_length", context_length)
    batch_size = check.positive_int("batch_size", batch_size)
    available = (ids.numel() - 1) // context_length
    if available < 1:
        raise ValueError(f"ids has {ids.numel()} tokens, too few for one window of context_length="
                         f"{context_length} plus its next token")
    count = available if max_windows is None else min(available, check.positive_int("max_windows", max_windows))
    starts = (torch.arange(count) * (available // count)) * context_length  # evenly spread
    offsets = torch.arange(context_length + 1)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, tokens = 0.0, 0
    for first in range(0, count, batch_size):
        windows = ids[(starts[first:first + batch_size, None] + offsets).to(ids.device)].to(device)  # (b, T + 1)
        logits = model(windows[:, :-1])  # (b, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        tokens += windows[:, 1:].numel()
    model.train(was_training)
    return total / tokens
