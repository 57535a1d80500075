"""Module exercises judged on values: a module's own weights, as data, for a reference to use.

An exercise whose answer is an ``nn.Module`` class (chapter 7's decoder block, a multi-head
attention written from memory) is not judged on properties alone (causal, reads the encoder,
residuals: a block without attention can have them all). The check builds the student's module,
reads its weights out as plain tensors, copies them into a **reference implementation** and
compares the two modules' outputs on several inputs: only a module that computes what the
exercise asks, with whatever weights it holds, gives the same numbers.

The mechanism, for authors of module exercises:

* what the exercise's API fixes is stated in its text, e.g. "two attention layers with chapter
  5's parameter names ``W_query``, ``W_key``, ``W_value`` and ``out_proj`` and a ``num_heads``
  attribute, and no other parameters" (attribute names of the layers themselves are free);
* :func:`attention_layers` finds those layers wherever the student put them (any attribute
  name, a list, a ``ModuleDict``) and returns their weights as data (:class:`Layer`);
  :func:`extra_parameters` names parameters outside them;
* the self-check (``checks/chNN.py``) builds the module, redraws its weights
  (:func:`redraw`: clearly non-zero, so every path shows), runs it on its cases
  (:func:`outputs_on`) and compares with a reference function of the layers' weights written
  next to the check (``reference(layers, *inputs)``, plain torch);
* the hidden test gets the same data from the student's kernel with the public probe
  ``module.values`` (:mod:`attention_book.instructor.probes`: it runs these functions there)
  and computes the reference in the grader's process, with the same reference function.

This module holds no attention code (it is visible to the grader's own-work run).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["Layer", "LAYER_NAMES", "attention_layers", "extra_parameters", "redraw", "outputs_on",
           "layers_from_data", "layers_as_data"]

#: chapter 5's parameter names of an attention layer (nn.Linear each)
LAYER_NAMES = ("W_query", "W_key", "W_value", "out_proj")


@dataclass
class Layer:
    """One attention layer's weights as plain tensors: ``weights[name] = (weight, bias or None)``."""

    path: str
    num_heads: Optional[int]
    weights: Dict[str, Tuple[Any, Optional[Any]]] = field(default_factory=dict)

    def width_in(self, name: str) -> int:
        return int(self.weights[name][0].shape[1])


def attention_layers(module, names: Sequence[str] = LAYER_NAMES) -> List[Layer]:
    """The submodules of ``module`` that have every one of ``names`` as an ``nn.Linear``
    (chapter 5's attention layers, whatever the student called them), in registration order."""
    import torch

    found: List[Layer] = []
    for path, sub in module.named_modules():
        linears = [getattr(sub, name, None) for name in names]
        if all(isinstance(linear, torch.nn.Linear) for linear in linears):
            heads = getattr(sub, "num_heads", None)
            layer = Layer(path, int(heads) if isinstance(heads, int) and not isinstance(heads, bool) else None)
            for name, linear in zip(names, linears):
                bias = linear.bias.detach().clone() if linear.bias is not None else None
                layer.weights[name] = (linear.weight.detach().clone(), bias)
            found.append(layer)
    return found


def extra_parameters(module, layers: List[Layer], names: Sequence[str] = LAYER_NAMES) -> List[str]:
    """Names of ``module``'s parameters that belong to none of ``layers``."""
    inside = {f"{layer.path}.{name}.{kind}".lstrip(".") for layer in layers for name in names
              for kind in ("weight", "bias")}
    return [name for name, _ in module.named_parameters() if name not in inside]


def redraw(module, seed: int, scale: float = 0.5) -> None:
    """Every parameter of ``module`` drawn again, ``scale * N(0, 1)`` from ``seed`` (no global
    random state touched): clearly non-zero weights, so every path of the module shows."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(scale * torch.randn(parameter.shape, generator=generator, dtype=torch.float64)
                            .to(parameter.dtype))


def outputs_on(module, cases: Sequence[Sequence[Any]]) -> List[Any]:
    """``module(*case)`` for each case, in eval mode without gradients (a case's trailing
    ``None`` is left out: the call without that argument)."""
    import torch

    module.eval()
    outputs = []
    with torch.no_grad():
        for case in cases:
            args = list(case)
            while args and args[-1] is None:
                args.pop()
            outputs.append(module(*args))
    return outputs


def layers_as_data(layers: List[Layer]) -> List[dict]:
    return [{"path": layer.path, "num_heads": layer.num_heads,
             "weights": {name: [w, b] for name, (w, b) in layer.weights.items()}} for layer in layers]


def layers_from_data(data: Any, names: Sequence[str] = LAYER_NAMES) -> List[Layer]:
    """Layers sent back as data by the ``module.values`` probe (checked: tensors of matching widths)."""
    import torch

    layers: List[Layer] = []
    for item in data if isinstance(data, (list, tuple)) else []:
        if not isinstance(item, dict) or not isinstance(item.get("weights"), dict):
            continue
        heads = item.get("num_heads")
        layer = Layer(str(item.get("path", ""))[:200], heads if isinstance(heads, int) and not isinstance(heads, bool)
                      else None)
        for name in names:
            pair = item["weights"].get(name)
            if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], torch.Tensor)
                    and pair[0].dim() == 2 and (pair[1] is None or (isinstance(pair[1], torch.Tensor)
                                                                   and pair[1].shape == pair[0].shape[:1]))):
                break
            layer.weights[name] = (pair[0], pair[1])
        else:
            layers.append(layer)
    return layers
