"""Chapter 9: what a GPT costs, counted: parameters, FLOPs per token, speed, memory.

* :func:`parameter_breakdown`: the exact number of parameters in each part of a GPT (embeddings,
  attention, MLP, layer norms), from its configuration alone.
* :func:`flops_per_token`: the arithmetic of one training token: about ``6 N`` for the matrix
  products (``2 N`` forward, twice that backward) plus the attention scores and weighted sums,
  which grow with the context.
* :func:`matmul_ceiling`: the speed of a large matrix product on this device, in FLOP/s: the
  practical ceiling a training step can be compared with; :func:`model_flops_utilization` (MFU):
  the fraction of that ceiling a training run used.
* :func:`training_memory`: the bytes training needs: parameters, gradients, AdamW's two moments,
  and the activations kept for the backward pass (measured, not estimated:
  :func:`saved_activation_bytes`).

Counts (parameters, FLOPs, bytes of the weights) are exact facts of the configuration; speeds
and the activations' bytes depend on the device and its kernels, and are measured.
"""

from __future__ import annotations

import contextlib
import time
from typing import Dict, Optional

import torch
import torch.nn as nn

from . import validation as check
from .gpt import GPT, GPTConfig

__all__ = [
    "parameter_breakdown",
    "flops_per_token",
    "matmul_ceiling",
    "model_flops_utilization",
    "saved_activation_bytes",
    "training_memory",
]


def _config(model_or_config) -> GPTConfig:
    if isinstance(model_or_config, GPT):
        return model_or_config.config
    if isinstance(model_or_config, GPTConfig):
        return model_or_config
    raise TypeError(f"pass a GPT or a GPTConfig, got {type(model_or_config).__name__}")


def parameter_breakdown(model_or_config) -> Dict[str, int]:
    """Parameters per part of a GPT (a :class:`~attention_book.gpt.GPT` or its config), exactly.

    * ``"token embedding (= output layer)"``: ``V * d``, counted once (weight tying);
    * ``"position embedding"``: ``context_length * d``;
    * ``"attention"``: per block the query, key, value and output projections, ``4 d^2`` weights
      and ``4 d`` biases;
    * ``"MLP"``: per block ``d -> 4d -> d``, ``8 d^2`` weights and ``5 d`` biases;
    * ``"layer norms"``: a gain and a bias of ``d`` for each of the ``2 n_layer`` norms, and
      ``ln_f`` (pre-norm only).

    The values add up to ``GPT.num_parameters()``.
    """
    c = _config(model_or_config)
    d, L, b = c.d_model, c.n_layer, int(c.bias)
    norms = 2 * L + (1 if c.pre_norm else 0)
    return {
        "token embedding (= output layer)": c.vocab_size * d,
        "position embedding": c.context_length * d,
        "attention": L * (4 * d * d + b * 4 * d),
        "MLP": L * (8 * d * d + b * 5 * d),
        "layer norms": norms * d * (1 + b),
    }


def flops_per_token(model_or_config, context_length: Optional[int] = None,
                    training: bool = True) -> Dict[str, float]:
    """Floating-point operations per token of a GPT: the matrix products and the attention.

    ``N`` is the number of parameters without the position embedding (a lookup, no arithmetic;
    the token embedding counts, since the output layer multiplies by it). A token's forward pass
    multiplies its vector by every one of those weights once: ``2 N`` FLOPs (a multiply and an
    add each); the backward pass costs twice that (gradients for the inputs and for the weights):
    ``6 N`` per training token. Biases and layer norms are counted in ``N`` but cost far less;
    the approximation is the usual one (Kaplan et al. 2020).

    Attention adds what no weight accounts for: in every block, the query of the token at
    position ``t`` is compared with ``t + 1`` keys (``2 d`` FLOPs each) and sums as many values
    (``2 d`` each). Averaged over the positions of a causal window of ``T`` tokens that is
    ``2 d (T + 1)`` per block forward, ``6 d (T + 1)`` for training. ``context_length``: ``T``
    (default: the model's).

    Returns ``{"matrix products": ..., "attention": ..., "total": ...}`` per token, for training
    (forward + backward) or, with ``training=False``, the forward pass alone.
    """
    c = _config(model_or_config)
    T = c.context_length if context_length is None else check.positive_int("context_length", context_length)
    n = sum(parameter_breakdown(c).values()) - c.context_length * c.d_model  # without positions
    factor = 6 if training else 2
    matrices = factor * n
    attention = factor * c.n_layer * c.d_model * (T + 1)
    return {"matrix products": float(matrices), "attention": float(attention), "total": float(matrices + attention)}


def matmul_ceiling(device=None, dtype: torch.dtype = torch.float32, size: Optional[int] = None,
                   repeats: int = 5, tf32: bool = False) -> float:
    """Measured FLOP/s of a square matrix product on ``device``: the practical ceiling for training.

    The best of ``repeats`` products of two ``(size, size)`` matrices in ``dtype`` (default size:
    8,192 on a GPU, 1,024 elsewhere), ``2 size^3`` FLOPs each. On CUDA the time comes from CUDA
    events (the GPU's own clock); ``tf32=True`` lets float32 products use TF32 tensor cores.
    Measure in the dtype the training's matrix products run in (bfloat16 under bfloat16
    autocast): GPUs run float32 and 16-bit products on different units, many times apart.
    """
    device = torch.device("cpu" if device is None else device)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype such as torch.bfloat16, got {dtype!r}")
    cuda = device.type == "cuda"
    size = (8192 if cuda else 1024) if size is None else check.positive_int("size", size)
    repeats = check.positive_int("repeats", repeats)
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device, dtype)
    b = torch.randn(size, size, generator=generator).to(device, dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = bool(tf32)
    try:
        for _ in range(2):  # warm-up: kernel choice, clocks
            a @ b
        best = float("inf")
        for _ in range(repeats):
            if cuda:
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                a @ b
                stop.record()
                stop.synchronize()
                seconds = start.elapsed_time(stop) / 1e3
            else:
                begin = time.perf_counter()
                a @ b
                if device.type == "mps":
                    torch.mps.synchronize()
                seconds = time.perf_counter() - begin
            best = min(best, seconds)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2 * size ** 3 / best


def model_flops_utilization(tokens_per_second: float, flops_per_token: float, ceiling: float) -> float:
    """MFU: the fraction of the ``ceiling`` (FLOP/s) that training at ``tokens_per_second`` used,
    counting ``flops_per_token`` (e.g. ``flops_per_token(config)["total"]``) per token."""
    for name, value in (("tokens_per_second", tokens_per_second), ("flops_per_token", flops_per_token),
                        ("ceiling", ceiling)):
        check.positive_number(name, value)
    return tokens_per_second * flops_per_token / ceiling


def saved_activation_bytes(model: nn.Module, idx: torch.Tensor, targets: torch.Tensor,
                           autocast_dtype: Optional[torch.dtype] = None) -> int:
    """Bytes of the tensors autograd keeps for the backward pass of one training step's loss.

    Runs ``model(idx, targets)`` (training mode, gradients on) and records every tensor the
    forward pass saves for the backward pass (``torch.autograd.graph.saved_tensors_hooks``),
    each storage once, the parameters left out. Under autocast (``autocast_dtype``) the 16-bit
    copies of the weights are saved too and are counted. What is saved depends on the kernels
    the device uses (the fused attention kernel keeps far less than the ``(T, T)`` weights).
    """
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: Dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in parameters and key not in saved:
            saved[key] = storage.nbytes()
        return tensor

    was_training = model.training
    model.train()
    device_type = next(model.parameters()).device.type
    precision = (contextlib.nullcontext() if autocast_dtype is None
                 else torch.autocast(device_type, dtype=autocast_dtype))
    try:
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor), precision:
            _, loss = model(idx, targets)
        del loss
    finally:
        model.train(was_training)
    return sum(saved.values())


def training_memory(model: GPT, idx: torch.Tensor, targets: torch.Tensor,
                    autocast_dtype: Optional[torch.dtype] = None) -> Dict[str, int]:
    """Bytes a training step of ``model`` on the batch ``(idx, targets)`` needs, by kind.

    * ``"parameters"``: every parameter (float32: 4 bytes each);
    * ``"gradients"``: one gradient per parameter, the same size;
    * ``"AdamW state"``: AdamW's two running averages per parameter (first and second moment);
    * ``"activations"``: what the forward pass keeps for the backward pass
      (:func:`saved_activation_bytes`, measured on this device).

    The first three are fixed by the model; the activations grow with the batch and the context
    (and, with attention weights built, with the square of the context).
    """
    if not isinstance(model, GPT):
        raise TypeError(f"model must be a GPT, got {type(model).__name__}")
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    adam = sum(2 * p.numel() * 4 for p in model.parameters())  # two float32 moments each
    return {
        "parameters": weights,
        "gradients": weights,
        "AdamW state": adam,
        "activations": saved_activation_bytes(model, idx, targets, autocast_dtype),
    }
