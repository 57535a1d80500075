"""Argument checks shared by every constructor and ``forward`` of the package.

One rule for bad input everywhere in the book:

* a value of the wrong **type** (a float where a size belongs, a string, a ``bool`` posing as an
  int, a list instead of a tensor, an integer tensor where embeddings belong, a tensor whose
  dtype differs from the module's) raises :class:`TypeError`;
* a value of the right type that is **bad** (zero or negative sizes, a probability outside
  ``[0, 1)``, a tensor with the wrong number of dimensions or the wrong width, a mask of the
  wrong shape, a sequence longer than ``context_length``, a tensor on another device) raises
  :class:`ValueError`;
* every message names the argument, shows the value it got and says how to fix it, e.g.
  ``d_out must be a positive int, got 2.5 (float); pass a whole number such as d_out=4``.

Each check returns the (possibly normalised) value, so a constructor reads
``self.d_in = positive_int("d_in", d_in)``.
"""

from __future__ import annotations

import math
import numbers
from typing import Optional, Sequence, Tuple, Union

import torch

__all__ = [
    "positive_int",
    "probability",
    "boolean",
    "positive_number",
    "tensor",
    "floating_tensor",
    "ndim",
    "last_dim",
    "same_dtype",
    "same_device",
    "bool_mask",
    "context_tensor",
    "key_padding_mask",
    "dim_of",
    "sequence_length",
    "dims_broadcast",
    "optional",
]


def _describe(value) -> str:
    """Show a value in a message: tensors by shape, dtype and device, everything else by repr."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}, dtype {value.dtype}, device {value.device}"
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{text} ({type(value).__name__})"


def _is_number_string(value) -> bool:
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# Plain Python arguments (constructor hyper-parameters)
# --------------------------------------------------------------------------------------------


def positive_int(name: str, value) -> int:
    """``value`` as an ``int >= 1``: TypeError for non-integers (``bool`` included), ValueError below 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer() and value >= 1:
            fix = f"pass {name}={int(value)} (an int, not a float)"
        elif _is_number_string(value):
            fix = f"pass a number, not a string, e.g. {name}=4"
        else:
            fix = f"pass a whole number such as {name}=4"
        raise TypeError(f"{name} must be a positive int, got {_describe(value)}; {fix}")
    if value < 1:
        raise ValueError(f"{name} must be a positive int, got {value}; pass at least 1, e.g. {name}=4")
    return int(value)


def _real(name: str, value, what: str, example: str) -> float:
    """``value`` as a float if it is a real number (not a bool, not a string); TypeError otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        fix = f"pass a number, not a string: {name}={float(value)}" if _is_number_string(value) else f"pass {example}"
        raise TypeError(f"{name} must be {what}, got {_describe(value)}; {fix}")
    return float(value)


def probability(name: str, value) -> float:
    """``value`` as a float in ``[0, 1)`` (a dropout rate: 1 would drop everything)."""
    example = f"e.g. {name}=0.1, or {name}=0.0 to switch it off"
    value = _real(name, value, "a probability (a float in [0, 1))", example)
    if not 0.0 <= value < 1.0:  # also rejects nan
        raise ValueError(f"{name} must be a probability in [0, 1), got {value}; pass {example}")
    return value


def boolean(name: str, value) -> bool:
    """``value`` if it is ``True`` or ``False`` (``1``, ``"yes"`` or a tensor are refused)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {_describe(value)}; pass {name}=True or {name}=False")
    return value


def positive_number(name: str, value) -> float:
    """``value`` as a finite float ``> 0`` (a scale, a temperature)."""
    value = _real(name, value, "a positive number", f"e.g. {name}=1.0")
    if not (value > 0 and math.isfinite(value)):  # also rejects nan
        raise ValueError(f"{name} must be a finite number > 0, got {value}; pass e.g. {name}=1.0")
    return value


# --------------------------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------------------------


def tensor(name: str, value, shape: str = "") -> torch.Tensor:
    """``value`` if it is a ``torch.Tensor`` (TypeError otherwise); ``shape`` describes the expected shape."""
    if not isinstance(value, torch.Tensor):
        expected = f" of shape {shape}" if shape else ""
        raise TypeError(
            f"{name} must be a torch.Tensor{expected}, got {_describe(value)}; "
            f"convert it with torch.tensor(...)"
        )
    return value


def floating_tensor(name: str, value, shape: str = "") -> torch.Tensor:
    """A tensor of floating-point numbers (embeddings, scores); integer token ids are refused."""
    tensor(name, value, shape)
    if not value.is_floating_point():
        raise TypeError(
            f"{name} must hold floating-point numbers, got {_describe(value)}; token ids go through "
            f"an embedding layer (nn.Embedding) first, other numbers convert with {name}.float()"
        )
    return value


def ndim(name: str, value: torch.Tensor, allowed: Union[int, Sequence[int]], shape: str = "") -> torch.Tensor:
    """ValueError unless ``value.ndim`` is ``allowed`` (an int or a collection of ints)."""
    allowed = (allowed,) if isinstance(allowed, int) else tuple(allowed)
    if value.ndim in allowed:
        return value
    expected = shape or " or ".join(f"{n}-D" for n in allowed)
    if value.ndim + 1 in allowed:
        fix = f"add a leading (batch) dimension with {name}.unsqueeze(0)"
    elif value.ndim - 1 in allowed and value.shape[0] == 1:
        fix = f"drop the leading dimension with {name}.squeeze(0)"
    else:
        fix = f"reshape it to {expected}"
    raise ValueError(
        f"{name} must have shape {expected}, got a {value.ndim}-D tensor of shape "
        f"{tuple(value.shape)}; {fix}"
    )


def last_dim(name: str, value: torch.Tensor, size: int, argument: str) -> torch.Tensor:
    """ValueError unless ``value.shape[-1] == size``, the module's constructor argument ``argument``."""
    if value.shape[-1] != size:
        raise ValueError(
            f"{name} has {value.shape[-1]} features in its last dimension (shape {tuple(value.shape)}) "
            f"but the module was built with {argument}={size}; pass vectors of size {size} or build "
            f"the module with {argument}={value.shape[-1]}"
        )
    return value


def _same(attribute: str, error: type, name: str, value: torch.Tensor, reference_name: str,
          reference: torch.Tensor) -> torch.Tensor:
    mine, theirs = getattr(value, attribute), getattr(reference, attribute)
    if mine != theirs:
        raise error(
            f"{name} has {attribute} {mine} but {reference_name} has {attribute} {theirs}; "
            f"convert it with {name}.to({reference_name}.{attribute})"
        )
    return value


def same_dtype(name: str, value: torch.Tensor, reference_name: str, reference: torch.Tensor) -> torch.Tensor:
    """TypeError unless ``value`` has the dtype of ``reference`` (e.g. a module's weights)."""
    return _same("dtype", TypeError, name, value, reference_name, reference)


def same_device(name: str, value: torch.Tensor, reference_name: str, reference: torch.Tensor) -> torch.Tensor:
    """ValueError unless ``value`` is on the device of ``reference``."""
    return _same("device", ValueError, name, value, reference_name, reference)


def bool_mask(name: str, value, target_shape: Optional[Sequence[int]], meaning: str = "True = hidden") -> torch.Tensor:
    """A boolean mask that broadcasts to ``target_shape`` without growing it (``None``: any shape).

    TypeError for a non-tensor or a non-bool dtype (a 0/1 float mask has two opposite
    conventions, so it is never guessed), ValueError for a shape that does not broadcast.
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{name} must be a bool tensor ({meaning}), got {_describe(value)}; "
            f"build it with a comparison such as token_ids == pad_id"
        )
    if value.dtype != torch.bool:
        raise TypeError(
            f"{name} must be a bool tensor ({meaning}), got dtype {value.dtype}; if 1 marks what a "
            f"query may see (torch.tril(torch.ones(T, T))), pass {name} == 0, else {name}.bool()"
        )
    if target_shape is None:
        return value
    target_shape = tuple(target_shape)
    try:
        broadcast = tuple(torch.broadcast_shapes(value.shape, target_shape))
    except RuntimeError:
        broadcast = None
    if broadcast != target_shape:
        raise ValueError(
            f"{name} has shape {tuple(value.shape)}, which does not broadcast to {target_shape}; "
            f"slice or reshape it, e.g. a (T, T) mask to mask[:T, :T]"
        )
    return value


def dim_of(name: str, value: torch.Tensor, dim) -> int:
    """``dim`` if it indexes a dimension of the tensor ``name`` (which must not be 0-d)."""
    if value.ndim == 0:
        raise ValueError(f"{name} is a single number (a 0-d tensor); pass at least a 1-D row of {name}")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"dim must be an int, got {dim!r} ({type(dim).__name__}); pass dim=-1 for rows")
    if not -value.ndim <= dim < value.ndim:
        raise ValueError(
            f"dim={dim} is out of range for {name} of shape {tuple(value.shape)}; "
            "use dim=-1 to normalise each row (one row per query)"
        )
    return dim


def sequence_length(name: str, num_tokens: int, context_length: int) -> int:
    """ValueError when a sequence is longer than the ``context_length`` a module was built for."""
    if num_tokens > context_length:
        raise ValueError(
            f"{name} has {num_tokens} tokens but this module was built with "
            f"context_length={context_length}; truncate {name} to its last {context_length} "
            f"tokens or create the module with context_length >= {num_tokens}"
        )
    return num_tokens


def dims_broadcast(names: Tuple[str, ...], shapes: Tuple[Sequence[int], ...], what: str) -> Tuple[int, ...]:
    """The broadcast of ``shapes`` (batch dimensions); ValueError naming ``names`` if they do not broadcast."""
    try:
        return tuple(torch.broadcast_shapes(*[tuple(s) for s in shapes]))
    except RuntimeError:
        listing = ", ".join(f"{n} {tuple(s)}" for n, s in zip(names, shapes))
        raise ValueError(
            f"the {what} of {' and '.join(names)} do not match ({listing}); give them the same "
            f"batch and head dimensions (or size 1 where one is shared)"
        ) from None


def context_tensor(name: str, value, x: torch.Tensor, size: int, argument: str) -> torch.Tensor:
    """The keys' and values' sequence of cross-attention: checked against the queries' input ``x``.

    Floating point, ``(T_kv, size)`` if ``x`` is ``(T_q, C)`` or ``(B, T_kv, size)`` if ``x`` is
    ``(B, T_q, C)`` with the same ``B``, and the dtype and device of ``x``.
    """
    floating_tensor(name, value, f"(B, T_kv, {size})")
    if value.ndim != x.ndim:
        raise ValueError(
            f"x has shape {tuple(x.shape)} but {name} has shape {tuple(value.shape)}: pass both "
            f"with a batch axis (B, T, C) or both without one (T, C)"
        )
    if value.ndim == 3 and value.shape[0] != x.shape[0]:
        raise ValueError(
            f"x holds {x.shape[0]} sequences but {name} holds {value.shape[0]}: each query sequence "
            f"needs its own {name} sequence (repeat a shared one with {name}.expand({x.shape[0]}, -1, -1))"
        )
    if value.shape[-1] != size:
        raise ValueError(
            f"{name} has embedding size {value.shape[-1]} (shape {tuple(value.shape)}) but the module was "
            f"built with {argument}={size}: create it with {argument}={value.shape[-1]} (the keys' and "
            f"values' input size) or project {name} to {size} features"
        )
    same_dtype(name, value, "x", x)
    same_device(name, value, "x", x)
    return value


def key_padding_mask(name: str, value, keys_input: torch.Tensor) -> torch.Tensor:
    """A bool ``(B, T_kv)`` (or ``(T_kv,)``) mask, ``True`` = padding, one entry per token of ``keys_input``."""
    expected = tuple(keys_input.shape[:-1])
    bool_mask(name, value, None, meaning="True = padding")
    if tuple(value.shape) != expected:
        raise ValueError(
            f"{name} has shape {tuple(value.shape)} but the keys come from a tensor of shape "
            f"{tuple(keys_input.shape)}: the mask needs one entry per context token, shape {expected}"
        )
    return value


def optional(check, name: str, value, *args, **kwargs):
    """``None`` passes through; anything else goes through ``check(name, value, ...)``."""
    return None if value is None else check(name, value, *args, **kwargs)


def unsupported(owner: str, fix: str, **arguments) -> None:
    """ValueError for the first argument in ``arguments`` that is not None.

    For modules that accept a parent class's arguments but cannot use some of them (the fused and
    the cached modules of chapter 10 do causal self-attention only); ``fix`` says what to do instead.
    """
    for name, value in arguments.items():
        if value is not None:
            raise ValueError(f"{owner} cannot use {name} (got a {type(value).__name__}); {fix}")

