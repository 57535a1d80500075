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

**Mixed precision** (chapter 9 on a GPU): :func:`choose_precision` picks how the forward pass
runs on a device, a :class:`Precision`, and ``training_loop(..., precision=...)`` runs every
``loss_at`` under it: bfloat16 autocast on GPUs that have bfloat16 tensor cores (compute
capability 8.0 and later), float16 autocast with a gradient scaler below (e.g. Colab's T4), float32
on a CPU. The parameters and the optimizer stay in float32 either way.

Also here, for any model that maps token ids ``(B, T)`` to logits ``(B, T, V)``:
:func:`random_windows` cuts a batch of training examples out of one long sequence of token ids;
:func:`held_out_loss` measures the loss on text the model was not trained on, and
:func:`held_out_losses` the loss of each held-out window, so that :func:`mean_with_error` can put
an error bar on it.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import validation as check

__all__ = [
    "progress_default",
    "adamw",
    "warmup_cosine",
    "Precision",
    "PRECISIONS",
    "choose_precision",
    "training_loop",
    "random_windows",
    "random_starts",
    "windows_at",
    "held_out_windows",
    "held_out_losses",
    "held_out_loss",
    "mean_with_error",
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


#: the precisions :func:`choose_precision` knows ("auto" picks one of the others for the device)
PRECISIONS = ("auto", "float32", "tf32", "bfloat16", "float16")


@dataclass(frozen=True)
class Precision:
    """How :func:`training_loop` runs the forward pass and the loss (see :func:`choose_precision`).

    name: ``"float32"``, ``"tf32"``, ``"bfloat16"`` or ``"float16"``.
    device_type: ``"cpu"``, ``"cuda"``, ... (what ``torch.autocast`` needs).
    autocast_dtype: the dtype matrix products run in under ``torch.autocast`` (None: no autocast).
        The parameters, their gradients and the optimizer state stay float32 (*mixed* precision).
    tf32: let CUDA float32 matrix products use TF32 tensor cores (10-bit mantissa inputs,
        float32 accumulation); no effect elsewhere.

    float16 has a narrow range (largest 65504, smallest normal 6e-5): small gradients underflow to
    zero. Its training therefore multiplies the loss by a large factor before ``backward`` and
    divides the gradients by it before the update (a *gradient scaler*,
    ``torch.amp.GradScaler``, made by :meth:`grad_scaler`). bfloat16 has float32's range and
    needs no scaler.
    """

    name: str
    device_type: str
    autocast_dtype: Optional[torch.dtype] = None
    tf32: bool = False

    @property
    def needs_scaler(self) -> bool:
        return self.autocast_dtype == torch.float16

    def autocast(self):
        """A context manager: ``torch.autocast`` in ``autocast_dtype``, or nothing for float32."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    def grad_scaler(self):
        """A new ``torch.amp.GradScaler`` for float16, ``None`` otherwise."""
        return torch.amp.GradScaler(self.device_type) if self.needs_scaler else None


def _cuda_capability(device: torch.device) -> Tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def choose_precision(device, precision: str = "auto") -> Precision:
    """The :class:`Precision` for training on ``device``.

    ``"auto"``: on a CUDA GPU of compute capability 8.0 or later (A100, H100, RTX 30xx and later)
    bfloat16 autocast; on an older CUDA GPU (e.g. Colab's T4, 7.5: no bfloat16 tensor cores)
    float16 autocast with a gradient scaler; elsewhere (CPU, Apple's MPS) float32. The other names
    ask for one explicitly: ``"float32"``, ``"tf32"`` (float32 with TF32 matrix products on CUDA,
    plain float32 elsewhere), ``"bfloat16"``, ``"float16"`` (autocast; both also run on a CPU,
    which is how the tests check them).
    """
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError:
            raise ValueError(f"device must name a device such as 'cpu' or 'cuda', got {device!r}") from None
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a torch.device or a str such as 'cuda', got {type(device).__name__}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}; 'auto' picks one for the device")
    kind = device.type
    if precision == "auto":
        if kind != "cuda":
            precision = "float32"
        else:
            precision = "bfloat16" if _cuda_capability(device) >= (8, 0) else "float16"
    if precision == "bfloat16" and kind == "cuda" and _cuda_capability(device) < (8, 0):
        major, minor = _cuda_capability(device)
        raise ValueError(f"precision='bfloat16' on a GPU of compute capability {major}.{minor}: bfloat16 tensor "
                         "cores start at 8.0; use precision='float16' (with its gradient scaler) or 'auto'")
    dtypes = {"float32": None, "tf32": None, "bfloat16": torch.bfloat16, "float16": torch.float16}
    return Precision(precision, kind, dtypes[precision], tf32=precision == "tf32")


@contextlib.contextmanager
def _tf32(enabled: bool):
    """TF32 matrix products on CUDA while the block runs; the previous settings afterwards."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    if enabled:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def training_loop(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    steps: int,
    loss_at: Callable[[int], Optional[torch.Tensor]],
    lr_factor: Optional[Callable[[int], float]] = None,
    max_grad_norm: Optional[float] = None,
    progress: Optional[bool] = None,
    description: str = "training",
    precision: Optional[Precision] = None,
    grad_scaler=None,
) -> int:
    """Run up to ``steps`` updates of ``model``; return how many were made.

    Each step: ``loss = loss_at(step)`` (the caller's forward pass and loss; ``None`` stops the
    loop before this update), then ``optimizer.zero_grad()``, ``loss.backward()``, optionally
    clip the gradient norm to ``max_grad_norm``, and ``optimizer.step()``. ``lr_factor(step)``,
    if given, multiplies every parameter group's learning rate at that step (e.g.
    :func:`warmup_cosine`). ``progress`` shows a tqdm bar (default: :func:`progress_default`).
    The model is in training mode (dropout on) during the loop and in eval mode afterwards.

    ``precision`` (a :class:`Precision`, from :func:`choose_precision`; default float32) runs
    ``loss_at`` under autocast. With float16 the update goes through a gradient scaler:
    ``grad_scaler`` if given (anything with ``scale``, ``unscale_``, ``step`` and ``update``, e.g.
    ``torch.amp.GradScaler``), else a new one; the loss is scaled before ``backward``, the
    gradients unscaled before clipping, and a step whose gradients overflowed is skipped (the
    scaler then lowers its factor). The loop itself never waits for the GPU: nothing in it reads
    a number back to Python.
    """
    steps = check.positive_int("steps", steps)
    if not callable(loss_at):
        raise TypeError(f"loss_at must be a function step -> loss, got {type(loss_at).__name__}")
    if lr_factor is not None and not callable(lr_factor):
        raise TypeError(f"lr_factor must be None or a function step -> factor, got {type(lr_factor).__name__}")
    check.optional(check.positive_number, "max_grad_norm", max_grad_norm)
    if precision is not None and not isinstance(precision, Precision):
        raise TypeError(f"precision must be None or a Precision, got {type(precision).__name__}; "
                        "make one with choose_precision(device)")
    if grad_scaler is not None and not all(hasattr(grad_scaler, name)
                                           for name in ("scale", "unscale_", "step", "update")):
        raise TypeError(f"grad_scaler must be a torch.amp.GradScaler (or have its methods scale, unscale_, "
                        f"step, update), got {type(grad_scaler).__name__}")
    if precision is None:
        precision = Precision("float32", "cpu")
    if grad_scaler is None:
        grad_scaler = precision.grad_scaler()  # float16 only
    if progress is None:
        progress = progress_default()
    from tqdm.auto import tqdm

    base_lrs = [group["lr"] for group in optimizer.param_groups]
    model.train()
    updates = 0
    with _tf32(precision.tf32):
        for step in tqdm(range(steps), desc=description, disable=not progress):
            with precision.autocast():  # the forward pass in 16 bits where asked for
                loss = loss_at(step)
            if loss is None:
                break
            if lr_factor is not None:
                for group, base in zip(optimizer.param_groups, base_lrs):
                    group["lr"] = base * lr_factor(step)
            optimizer.zero_grad(set_to_none=True)  # forget the previous step's gradients
            if grad_scaler is None:
                loss.backward()  # d loss / d parameter for every parameter
                if max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
                optimizer.step()  # move every parameter a little against its gradient
            else:  # float16: scale the loss up so small gradients do not underflow to zero
                grad_scaler.scale(loss).backward()
                if max_grad_norm is not None:
                    grad_scaler.unscale_(optimizer)  # the true gradients, then clip them
                    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
                grad_scaler.step(optimizer)  # skipped when a gradient overflowed to inf / nan
                grad_scaler.update()  # lower the factor after an overflow, raise it slowly otherwise
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
    starts = random_starts(ids, batch_size, context_length, 1, generator)[0]  # (B,)
    return windows_at(ids, starts, context_length)


def random_starts(ids: torch.Tensor, batch_size: int, context_length: int, steps: int,
                  generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """The starts of ``steps`` batches of random windows at once: ``(steps, batch_size)``, on the CPU.

    Row ``i`` holds the starts the ``i``-th of ``steps`` calls of :func:`random_windows` would draw
    from the same ``generator`` (the generator yields the same numbers either way). A training loop
    draws them all before its first step and moves them to the device once: cutting the windows
    out there (:func:`windows_at`) then needs no copy from the CPU, and no wait for the GPU, per step.
    """
    _token_ids("ids", ids)
    batch_size = check.positive_int("batch_size", batch_size)
    context_length = check.positive_int("context_length", context_length)
    steps = check.positive_int("steps", steps)
    if ids.numel() < context_length + 1:
        raise ValueError(f"ids has {ids.numel()} tokens, too few for one window of context_length="
                         f"{context_length} plus its next token: pass a longer text or a shorter context")
    return torch.randint(ids.numel() - context_length, (steps, batch_size), generator=generator)


def windows_at(ids: torch.Tensor, starts: torch.Tensor, context_length: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(inputs, targets)`` of the windows of ``context_length`` tokens starting at ``starts`` ``(B,)``:
    ``ids[s : s + T]`` and ``ids[s + 1 : s + T + 1]`` for each start, on the device of ``ids``
    (``starts`` should be there too; no checks: it runs at every step)."""
    offsets = torch.arange(context_length + 1, device=ids.device)  # (T + 1,)
    windows = ids[starts.to(ids.device)[:, None] + offsets]  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]


def held_out_windows(num_tokens: int, context_length: int, max_windows: Optional[int] = None) -> torch.Tensor:
    """The start of every window :func:`held_out_losses` scores in a text of ``num_tokens`` ids.

    Consecutive, non-overlapping windows of ``context_length`` tokens (plus the next token); with
    ``max_windows`` only that many, spread evenly over the text. A 1-D ``torch.long`` tensor of
    starts, so that a baseline can be scored on exactly the same windows.
    """
    num_tokens = check.positive_int("num_tokens", num_tokens)
    context_length = check.positive_int("context_length", context_length)
    available = (num_tokens - 1) // context_length
    if available < 1:
        raise ValueError(f"ids has {num_tokens} tokens, too few for one window of context_length="
                         f"{context_length} plus its next token")
    count = available if max_windows is None else min(available, check.positive_int("max_windows", max_windows))
    return (torch.arange(count) * (available // count)) * context_length  # evenly spread


@torch.no_grad()
def held_out_losses(model: nn.Module, ids: torch.Tensor, context_length: int, max_windows: Optional[int] = None,
                    batch_size: int = 32) -> torch.Tensor:
    """The mean next-token cross-entropy (nats per token) of ``model`` on each held-out window.

    The windows are those of :func:`held_out_windows`. Returns a float32 CPU tensor with one
    loss per window: their mean is :func:`held_out_loss`, their spread says how much that mean
    would move on another sample of windows (:func:`mean_with_error`). The model must map
    ``(B, T)`` token ids to ``(B, T, V)`` logits; it runs in eval mode, in full precision (also
    inside an autocast region), and is left in the mode it was in.
    """
    _token_ids("ids", ids)
    context_length = check.positive_int("context_length", context_length)
    batch_size = check.positive_int("batch_size", batch_size)
    starts = held_out_windows(ids.numel(), context_length, max_windows)
    offsets = torch.arange(context_length + 1)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    losses = []
    with _full_precision(device.type):  # the same yardstick for every precision
        for first in range(0, starts.numel(), batch_size):
            index = (starts[first:first + batch_size, None] + offsets).to(ids.device)
            windows = ids[index].to(device)  # (b, T + 1)
            logits = model(windows[:, :-1]).float()  # (b, T, V)
            loss = F.cross_entropy(logits.transpose(1, 2), windows[:, 1:], reduction="none")  # (b, T)
            losses.append(loss.mean(dim=1))
    model.train(was_training)
    return torch.cat(losses).cpu()


def _full_precision(device_type: str):
    """Autocast switched off (inside a mixed-precision region), where this PyTorch knows the device."""
    try:
        return torch.autocast(device_type, enabled=False)
    except RuntimeError:  # a device type without autocast: nothing to switch off
        return contextlib.nullcontext()


def held_out_loss(model: nn.Module, ids: torch.Tensor, context_length: int, max_windows: Optional[int] = None,
                  batch_size: int = 32) -> float:
    """Mean next-token cross-entropy (nats per token) of ``model`` on the 1-D ``ids``.

    The text is cut into consecutive, non-overlapping windows of ``context_length`` tokens (the
    last, incomplete one is dropped); with ``max_windows`` only that many, spread evenly over the
    text. No randomness: the same model gives the same number every time. The model must map
    ``(B, T)`` token ids to ``(B, T, V)`` logits; it is put in eval mode and left as it was.
    The mean of :func:`held_out_losses` (every window has the same number of tokens).
    """
    return held_out_losses(model, ids, context_length, max_windows, batch_size).double().mean().item()


def mean_with_error(values) -> Tuple[float, float]:
    """``(mean, error)`` of per-window losses (or of paired differences of two models' losses).

    ``error`` is two standard errors of the mean, ``2 * std / sqrt(n)``: the half-width of an
    approximate 95% interval for the mean over another sample of windows like these. Pass the
    *difference* of two models' per-window losses on the same windows to compare them: the
    windows' own difficulty cancels, so the error bar of the difference is much smaller than
    either model's.
    """
    values = torch.as_tensor(values, dtype=torch.float64).flatten()
    if values.numel() < 2:
        raise ValueError(f"values must hold at least 2 numbers for an error bar, got {values.numel()}")
    return values.mean().item(), 2 * values.std().item() / math.sqrt(values.numel())
