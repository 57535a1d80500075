"""Checking and converting what a reader passes to an explorer (one idea: input validation).

Everything an explorer sends to the browser is a nested list of finite floats or a list of
strings; these helpers turn tensors, arrays, nested lists or an ``nn.Linear`` into that, and
raise a ``TypeError`` (wrong kind of object) or an :class:`ExplorerInputError` (a ``ValueError``:
wrong shape or value) whose message names the argument, the value and the fix.
"""

from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import torch
import traitlets

from ..validation import boolean  # True or False, the message names the argument

__all__ = [
    "ExplorerInputError",
    "Matrix",
    "boolean",
    "check_heads",
    "check_int",
    "check_projection",
    "divisors",
    "to_matrix",
    "to_tokens",
    "to_vector",
    "Vector",
]

_INTEGER_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)


class ExplorerInputError(ValueError, traitlets.TraitError):
    """Bad input for an explorer. A ``ValueError`` (and a ``TraitError`` so traitlets rolls back)."""


def _real_tensor(name: str, value: Any, expected: str) -> torch.Tensor:
    """``value`` as a tensor of real numbers; a ``TypeError`` saying it must be ``expected`` otherwise."""
    try:
        tensor = torch.as_tensor(value.detach() if isinstance(value, torch.Tensor) else value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"{name} must be {expected}, got {type(value).__name__} ({error})") from None
    if tensor.dtype == torch.bool or tensor.is_complex() or not (
        tensor.is_floating_point() or tensor.dtype in _INTEGER_DTYPES
    ):
        raise TypeError(f"{name} must hold real numbers, got dtype {tensor.dtype}: pass a float tensor")
    return tensor


def to_matrix(name: str, value: Any, *, allow_linear: bool = False) -> List[List[float]]:
    """Turn a tensor / array / nested list (or an nn.Linear) into a finite 2-D list of floats."""
    if isinstance(value, torch.nn.Linear):
        if not allow_linear:
            raise ExplorerInputError(f"{name} must be a tensor, not an nn.Linear: pass its weight")
        value = value.weight.T  # nn.Linear stores (d_out, d_in); the book uses x @ W with (d_in, d_out)
    if isinstance(value, torch.nn.Module):
        raise TypeError(f"{name} must be a tensor or an nn.Linear, got {type(value).__name__}")
    tensor = _real_tensor(name, value, "a 2-D tensor, array or nested list of numbers")
    if tensor.ndim != 2:
        raise ExplorerInputError(f"{name} must be 2-D, got shape {tuple(tensor.shape)}")
    if tensor.shape[0] == 0 or tensor.shape[1] == 0:
        raise ExplorerInputError(f"{name} is empty (shape {tuple(tensor.shape)}): pass at least one row and column")
    tensor = tensor.cpu().to(torch.float64)  # exact: every float32 value is a float64 value
    bad = (~torch.isfinite(tensor)).nonzero()
    if len(bad):
        row, col = bad[0].tolist()
        raise ExplorerInputError(
            f"{name} contains a non-finite value ({tensor[row, col].item()}) at [{row}, {col}]: "
            "pass finite numbers (check for a division by zero or an exploding training run)"
        )
    return tensor.tolist()


def to_tokens(tokens: Any, name: str = "tokens") -> List[str]:
    """A non-empty list of strings (one label per row of the inputs)."""
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(
            f"{name} must be a list of strings, one per row of inputs, got {type(tokens).__name__}"
            + (" (split the sentence into words first)" if isinstance(tokens, str) else "")
        )
    bad = [t for t in tokens if not isinstance(t, str)]
    if bad:
        raise TypeError(f"{name} must be strings, got {bad[0]!r} ({type(bad[0]).__name__})")
    if len(tokens) == 0:
        raise ExplorerInputError(f"{name} is empty: pass one label per row of inputs")
    return list(tokens)


def check_int(name: str, value: Any, low: int, high: int, hint: str = "") -> int:
    """An int (numpy integers too) in ``low..high``; the message says which values are allowed."""
    if not isinstance(value, bool) and not isinstance(value, int) and hasattr(value, "__index__") \
            and type(value).__module__ == "numpy":
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if not low <= value <= high:
        raise ExplorerInputError(f"{name}={value} is out of range: choose {name} from {low} to {high}{hint}")
    return value


def divisors(n: int) -> Tuple[int, ...]:
    """The numbers of heads that split ``n`` projection columns evenly."""
    return tuple(k for k in range(1, n + 1) if n % k == 0)


def check_heads(num_heads: Any, d_out: int) -> int:
    """``num_heads`` must be an int that divides ``d_out``."""
    if isinstance(num_heads, bool) or not isinstance(num_heads, int):
        raise TypeError(f"num_heads must be an int, got {num_heads!r}")
    if num_heads < 1 or d_out % num_heads:
        raise ExplorerInputError(
            f"d_out={d_out} is not divisible by num_heads={num_heads}: choose num_heads from {divisors(d_out)}"
        )
    return num_heads


def check_projection(tokens: List[str], inputs: list, w_query: list, w_key: list) -> None:
    """Shapes must chain: (T, d_in) @ (d_in, d_out), with one token per row and W_q, W_k alike."""
    num_tokens, d_in = len(inputs), len(inputs[0])
    if len(tokens) != num_tokens:
        raise ExplorerInputError(
            f"there are {len(tokens)} tokens but inputs has {num_tokens} rows: "
            "pass one token label per row of inputs"
        )
    for name, matrix in (("W_query", w_query), ("W_key", w_key)):
        if len(matrix) != d_in:
            raise ExplorerInputError(
                f"{name} has shape ({len(matrix)}, {len(matrix[0])}) but inputs has d_in={d_in} columns: "
                f"{name} must be (d_in, d_out) = ({d_in}, ...) for x @ {name}"
                + (" (it looks transposed: pass its .T)" if len(matrix[0]) == d_in else "")
            )
    if len(w_query[0]) != len(w_key[0]):
        raise ExplorerInputError(
            f"W_query has d_out={len(w_query[0])} but W_key has d_out={len(w_key[0])}: "
            "queries and keys need the same width for their dot products"
        )


class Matrix(traitlets.List):
    """A list-of-lists trait that also accepts tensors, arrays and (optionally) nn.Linear."""

    def __init__(self, allow_linear: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.allow_linear = allow_linear

    def validate(self, obj, value):
        return to_matrix(self.name, value, allow_linear=self.allow_linear)


def to_vector(name: str, value: Any, *, max_length: int = 200) -> List[float]:
    """A 1-D tensor / array / list of numbers as a list of finite floats (2 to ``max_length`` of them)."""
    if isinstance(value, torch.nn.Module):
        raise TypeError(f"{name} must be a 1-D tensor or list of numbers, got {type(value).__name__}")
    tensor = _real_tensor(name, value, "a 1-D tensor, array or list of numbers")
    if tensor.is_floating_point() and not isinstance(value, torch.Tensor):
        tensor = torch.as_tensor(value, dtype=torch.float64)  # a list of floats: no float32 rounding
    if tensor.ndim != 1:
        fix = " (one row of scores: index the batch and the position, e.g. logits[0, -1])" if tensor.ndim > 1 else ""
        raise ExplorerInputError(f"{name} must be 1-D, got shape {tuple(tensor.shape)}{fix}")
    if not 2 <= len(tensor) <= max_length:
        raise ExplorerInputError(
            f"{name} has {len(tensor)} entries: pass 2 to {max_length} (e.g. the top 30 of a model's "
            f"next-token logits: {name}.topk(30))"
        )
    tensor = tensor.cpu().to(torch.float64)
    bad = (~torch.isfinite(tensor)).nonzero()
    if len(bad):
        index = int(bad[0])
        raise ExplorerInputError(
            f"{name} contains a non-finite value ({tensor[index].item()}) at [{index}]: pass finite scores "
            "(before any top-k or top-p cut: the explorer makes the cuts itself)"
        )
    return tensor.tolist()


class Vector(traitlets.List):
    """A list-of-floats trait that also accepts 1-D tensors and arrays."""

    def validate(self, obj, value):
        return to_vector(self.name, value)
