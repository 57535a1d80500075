"""Chapter 9: the training recipe of the chapter's GPT, for a CPU and for a GPU.

* :class:`TrainingSettings`: a model size and a training budget; :data:`CPU_SETTINGS` (a small GPT
  that trains in well under a minute on one core), :data:`GPU_SETTINGS` (a larger one, longer
  windows, many more steps, mixed precision), :func:`settings_for` picks one for a device.
* :data:`PRE_POST_SETTINGS` and :data:`NORM_RUNS`: the pre-norm / post-norm experiment (a small
  deep GPT at several learning rates, with and without warm-up).
* :func:`train_gpt`: the shared training loop (:func:`attention_book.training.training_loop`) on
  random windows of a text, the held-out loss every ``eval_every`` steps, and the speed.

On a GPU the recipe runs the way GPUs are fast: the forward pass in bfloat16 (or float16 with a
gradient scaler on GPUs without bfloat16 tensor cores, such as Colab's T4), attention through
the fused kernel (the weights are never built while training), no step that waits for the GPU
(the losses stay on the device until the end), and optionally ``torch.compile``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Tuple

import torch
import torch.nn as nn

from . import validation as check
from .gpt import GPT, GPTConfig
from .hello_world import next_token_loss
from .training import (PRECISIONS, adamw, choose_precision, held_out_loss, random_starts, training_loop,
                       warmup_cosine, windows_at)

__all__ = [
    "TrainingSettings",
    "CPU_SETTINGS",
    "GPU_SETTINGS",
    "PRE_POST_SETTINGS",
    "NORM_RUNS",
    "settings_for",
    "GPTTrainResult",
    "train_gpt",
]


@dataclass(frozen=True)
class TrainingSettings:
    """A model size and a training budget for chapter 9 (see :func:`settings_for`).

    Model: ``n_layer`` blocks of ``n_head`` heads, width ``d_model``, ``context_length`` tokens,
    ``dropout``. Training: ``steps`` AdamW updates on ``batch_size`` random windows each, peak
    learning rate ``lr`` reached after ``warmup`` steps and decayed along a cosine
    (:func:`attention_book.training.warmup_cosine`), weight decay on the matrices only,
    gradients clipped to norm ``max_grad_norm``. The held-out loss is measured every
    ``eval_every`` steps on ``eval_windows`` windows. ``seed`` seeds the model and the batches.

    How the steps run: ``precision`` (``"auto"``, ``"float32"``, ``"tf32"``, ``"bfloat16"``,
    ``"float16"``; see :func:`attention_book.training.choose_precision`: ``"auto"`` is bfloat16 on
    recent GPUs, float16 on older ones, float32 on a CPU), ``fused_attention`` (attention through
    PyTorch's fused kernel while training, see :class:`~attention_book.gpt.GPTConfig`) and
    ``compile`` (``torch.compile`` the model first: faster steps after a compilation of tens of
    seconds, worth it on a GPU for long runs).
    """

    n_layer: int = 2
    n_head: int = 4
    d_model: int = 128
    context_length: int = 64
    dropout: float = 0.0
    batch_size: int = 32
    steps: int = 400
    lr: float = 1e-2
    warmup: int = 40
    weight_decay: float = 0.1
    max_grad_norm: float = 1.0
    eval_every: int = 100
    eval_windows: int = 128
    seed: int = 1234
    precision: str = "auto"
    fused_attention: bool = True
    compile: bool = False

    def __post_init__(self):
        for name in ("n_layer", "n_head", "d_model", "context_length", "batch_size", "steps", "warmup",
                     "eval_every", "eval_windows"):
            check.positive_int(name, getattr(self, name))
        check.probability("dropout", self.dropout)
        check.positive_number("lr", self.lr)
        check.positive_number("max_grad_norm", self.max_grad_norm)
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise TypeError(f"seed must be an int, got {self.seed!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        check.boolean("fused_attention", self.fused_attention)
        check.boolean("compile", self.compile)

    def model_config(self, vocab_size: int, pre_norm: bool = True) -> GPTConfig:
        """The :class:`GPTConfig` of this size for a vocabulary of ``vocab_size`` tokens."""
        return GPTConfig(vocab_size=vocab_size, context_length=self.context_length, d_model=self.d_model,
                         n_layer=self.n_layer, n_head=self.n_head, dropout=self.dropout, bias=True,
                         pre_norm=pre_norm, fused_attention=self.fused_attention)

    def replace(self, **changes) -> "TrainingSettings":
        """A copy with some fields changed, e.g. ``settings.replace(steps=10)``."""
        unknown = sorted(set(changes) - set(asdict(self)))
        if unknown:
            raise ValueError(f"TrainingSettings has no field {unknown[0]!r}; fields: {sorted(asdict(self))}")
        return TrainingSettings(**{**asdict(self), **changes})

    def tokens_per_step(self) -> int:
        return self.batch_size * self.context_length


#: on a CPU: a small GPT and a budget that trains in under a minute on one core
CPU_SETTINGS = TrainingSettings()
#: on a CUDA GPU (e.g. Colab's T4): a larger model, longer windows, many more steps, mixed precision
GPU_SETTINGS = TrainingSettings(n_layer=6, n_head=6, d_model=384, context_length=256, dropout=0.1, batch_size=64,
                                steps=2000, lr=1e-3, warmup=100, eval_every=250, eval_windows=256)

#: chapter 9's pre-norm / post-norm comparison: 4 small blocks, 300 steps; as given, a high
#: learning rate and no warm-up (warmup=1: the full rate from the first step); :data:`NORM_RUNS`
#: changes the two
PRE_POST_SETTINGS = TrainingSettings(n_layer=4, n_head=4, d_model=32, context_length=32, batch_size=16,
                                     steps=300, lr=1e-2, warmup=1, eval_every=300, eval_windows=128)

#: the runs of the pre-/post-norm experiment: ``(label, pre_norm, lr, warmup)``, each on
#: :data:`PRE_POST_SETTINGS` with that learning rate and warm-up. First the chapter's question (a
#: high rate without warm-up), then the two precautions the original transformer took (a
#: warm-up; a smaller rate), and pre-norm at the smaller rate for comparison.
NORM_RUNS: Tuple[Tuple[str, bool, float, int], ...] = (
    ("pre-norm, lr 1e-2, no warm-up", True, 1e-2, 1),
    ("post-norm, lr 1e-2, no warm-up", False, 1e-2, 1),
    ("post-norm, lr 1e-2, warm-up 100", False, 1e-2, 100),
    ("post-norm, lr 1e-3, warm-up 100", False, 1e-3, 100),
    ("post-norm, lr 3e-3, warm-up 100", False, 3e-3, 100),
    ("pre-norm, lr 3e-3, no warm-up", True, 3e-3, 1),
)


def settings_for(device) -> TrainingSettings:
    """:data:`GPU_SETTINGS` on a CUDA device, :data:`CPU_SETTINGS` elsewhere (CPU, Apple's MPS).

    ``device`` is a ``torch.device`` or its name (``"cuda"``, ``"cuda:0"``, ``"cpu"``, ``"mps"``).
    """
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError:
            raise ValueError(f"device must name a device such as 'cpu' or 'cuda', got {device!r}") from None
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a torch.device or a str such as 'cuda', got {type(device).__name__}")
    return GPU_SETTINGS if device.type == "cuda" else CPU_SETTINGS


@dataclass
class GPTTrainResult:
    """What :func:`train_gpt` returns.

    train_losses: the loss of every update's batch (``steps`` values).
    held_out: ``(step, held-out loss)`` pairs: before the first update, every ``eval_every``
        updates and after the last one.
    tokens_seen: training tokens the model read (``steps * batch_size * context_length``).
    seconds: wall time of the whole loop (evaluations included).
    eval_seconds: the part of it spent measuring the held-out loss.
    first_step_seconds: the first update alone (with ``compile``: the compilation).
    tokens_per_second: the training speed after the first update, evaluations left out.
    precision: how the forward pass ran (``"float32"``, ``"tf32"``, ``"bfloat16"``, ``"float16"``).
    """

    train_losses: List[float] = field(default_factory=list)
    held_out: List[Tuple[int, float]] = field(default_factory=list)
    tokens_seen: int = 0
    seconds: float = 0.0
    eval_seconds: float = 0.0
    first_step_seconds: float = 0.0
    tokens_per_second: float = float("nan")
    precision: str = "float32"

    @property
    def final_held_out_loss(self) -> float:
        return self.held_out[-1][1]


def _optimizer(model: nn.Module, settings: TrainingSettings) -> torch.optim.Optimizer:
    """AdamW; weight decay on the matrices only (not on biases and layer-norm gains)."""
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": matrices, "weight_decay": settings.weight_decay},
              {"params": vectors, "weight_decay": 0.0}]
    return adamw(groups, lr=settings.lr, betas=(0.9, 0.95))


def _synchronize(device: torch.device) -> None:
    """Wait for the device to finish its queued work (GPUs run behind Python)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def train_gpt(model: nn.Module, train_ids: torch.Tensor, held_out_ids: torch.Tensor, settings: TrainingSettings,
              progress: Optional[bool] = None, description: str = "training",
              grad_scaler=None) -> GPTTrainResult:
    """Train ``model`` on random windows of ``train_ids`` as ``settings`` say; measure the held-out loss.

    ``model`` maps ``(B, T)`` token ids to ``(B, T, V)`` logits: the chapter's
    :class:`~attention_book.gpt.GPT`, or chapter 8's model for a comparison on the same batches
    (the batches depend only on ``settings.seed``). ``train_ids`` and ``held_out_ids`` are 1-D
    ``torch.long`` tensors (e.g. :meth:`attention_book.corpus.CharTokenizer.encode_tensor`); the
    training ids and every batch's random starts are copied to the model's device once, so that each
    batch is cut out there (the batches are those :func:`~attention_book.training.random_windows`
    draws from a generator seeded with ``settings.seed``). The
    update is the shared :func:`attention_book.training.training_loop`, with
    ``settings.precision`` for the device (``grad_scaler``: for float16, a scaler of your own
    instead of a new ``torch.amp.GradScaler``).

    Nothing in a step waits for the GPU: each step's loss stays on the device until the end
    (``result.train_losses``), and only the held-out evaluations, every ``eval_every`` steps,
    read a number back. The model's input checks run once here, not at every step.
    """
    if not isinstance(settings, TrainingSettings):
        raise TypeError(f"settings must be TrainingSettings (e.g. settings_for(device)), got {type(settings).__name__}")
    # every batch's starts, drawn at once (the same as step-by-step draws) and moved to the device once
    starts = random_starts(train_ids, settings.batch_size, settings.context_length, settings.steps,
                           torch.Generator().manual_seed(settings.seed))  # the batches: same on every device
    device = next(model.parameters()).device
    precision = choose_precision(device, settings.precision)
    vocab_size = getattr(getattr(model, "config", None), "vocab_size", None)
    if vocab_size is not None and train_ids.numel():
        low, high = int(train_ids.min()), int(train_ids.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(f"train_ids holds token ids from {low} to {high} but the model has "
                             f"vocab_size={vocab_size}: encode the text with the model's own tokenizer")
    on_device, starts = train_ids.to(device), starts.to(device)
    checked_once = {"validate": False} if isinstance(model, GPT) else {}
    forward = torch.compile(model) if settings.compile else model
    losses = torch.zeros(settings.steps, device=device)
    result = GPTTrainResult(precision=precision.name)
    clock = {"eval": 0.0, "after_first": None, "eval_before_first": 0.0}

    def evaluate(step: int) -> None:
        _synchronize(device)
        start = time.perf_counter()
        loss = held_out_loss(model, held_out_ids, settings.context_length, max_windows=settings.eval_windows)
        result.held_out.append((step, loss))
        clock["eval"] += time.perf_counter() - start

    def loss_at(step: int) -> torch.Tensor:
        if step == 1:  # one wait for the GPU: the first update (and any compilation) is done
            _synchronize(device)
            clock["after_first"] = time.perf_counter()
            clock["eval_before_first"] = clock["eval"]
        if step % settings.eval_every == 0:
            evaluate(step)
        inputs, targets = windows_at(on_device, starts[step], settings.context_length)  # (B, T) each
        loss = next_token_loss(forward(inputs, **checked_once), targets)  # logits (B, T, V)
        losses[step] = loss.detach()  # stays on the device: no wait
        return loss

    start = time.perf_counter()
    updates = training_loop(model, _optimizer(model, settings), settings.steps, loss_at,
                            lr_factor=warmup_cosine(settings.steps, min(settings.warmup, settings.steps)),
                            max_grad_norm=settings.max_grad_norm, progress=progress, description=description,
                            precision=precision, grad_scaler=grad_scaler)
    _synchronize(device)
    end, eval_during = time.perf_counter(), clock["eval"]
    if clock["after_first"] is not None:
        result.first_step_seconds = clock["after_first"] - start - clock["eval_before_first"]
        steady = end - clock["after_first"] - (eval_during - clock["eval_before_first"])
        result.tokens_per_second = (updates - 1) * settings.tokens_per_step() / steady
    else:  # a single update
        result.first_step_seconds = end - start - eval_during
    evaluate(updates)
    result.seconds = time.perf_counter() - start
    result.eval_seconds = clock["eval"]
    result.tokens_seen = updates * settings.tokens_per_step()
    result.train_losses = losses[:updates].tolist()
    return result
