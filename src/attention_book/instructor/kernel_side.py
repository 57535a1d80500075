"""Runs inside a submission's kernel: answers one call of the grader, as data.

The grader (:mod:`.runner`) writes a request file ``{"code": str, "inputs": {name: value}}`` with
``torch.save`` and sends ``kernel_side.answer(get_ipython().user_ns, request, reply)`` as a
silent execute request. This module

1. loads the request with ``torch.load(..., weights_only=True)`` (tensors and plain data only);
2. runs ``code`` with the notebook's names plus the inputs (a copy of the namespace: the snippet's
   own assignments do not leak into the notebook), the value of its last expression is the answer;
3. saves ``{"ok": True, "value": ...}`` or ``{"ok": False, "ename": ..., "evalue": ...}`` to the
   reply file (tensors detached, on the CPU; other objects become ``{"__opaque__": type name}``).

The torch, ``random`` and NumPy random states are restored afterwards, and what the code prints
is swallowed. Nothing here decides a point: the grader compares the values with its own reference,
and nothing the kernel writes is trusted beyond "data of a bounded size".
"""

from __future__ import annotations

import ast
import contextlib
import io
import random
from typing import Any, Dict

MAX_TEXT = 2000
GRAPHS: Dict[str, Any] = {}  # autograd graphs kept between a call and its backward (hidden.RemoteFunction)


class _Sink(io.TextIOBase):
    def write(self, text: str) -> int:  # noqa: D401
        return len(text)


def _plain(value: Any, depth: int = 0) -> Any:
    import torch

    if depth > 6:
        return {"__opaque__": "nested too deep"}
    if isinstance(value, torch.Tensor):
        if value.is_sparse or value.is_quantized or value.is_meta:
            return {"__opaque__": f"{value.layout} tensor"}
        return value.detach().to("cpu").clone().contiguous()
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, torch.Size):
        return tuple(int(v) for v in value)
    if isinstance(value, (tuple, list)):
        items = [_plain(v, depth + 1) for v in list(value)[:1000]]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {str(k)[:200]: _plain(v, depth + 1) for k, v in list(value.items())[:1000]}
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        with contextlib.suppress(Exception):  # a NumPy scalar
            return value.item()
    return {"__opaque__": type(value).__name__}


def _random_state():
    import torch

    state = {"torch": torch.get_rng_state(), "random": random.getstate()}
    with contextlib.suppress(Exception):
        import numpy

        state["numpy"] = numpy.random.get_state()
    return state


def _restore(state) -> None:
    import torch

    torch.set_rng_state(state["torch"])
    random.setstate(state["random"])
    if "numpy" in state:
        import numpy

        numpy.random.set_state(state["numpy"])


def _execute(code: str, namespace: Dict[str, Any]) -> Any:
    tree = ast.parse(code, "<grader call>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<grader call>", "exec"), namespace)  # noqa: S102 - the grader's snippet
    if last is None:
        return None
    return eval(compile(last, "<grader call>", "eval"), namespace)  # noqa: S307


def evaluate(ns: Dict[str, Any], code: str, inputs: Dict[str, Any]) -> Dict[str, Any]:
    """Run ``code`` with the notebook's names and ``inputs``; the reply as plain data."""
    import torch

    state = None
    try:
        namespace = dict(ns)
        namespace.update(inputs)
        namespace["__graphs"], namespace["__torch"] = GRAPHS, torch
        state = _random_state()
        with contextlib.redirect_stdout(_Sink()), contextlib.redirect_stderr(_Sink()):
            value = _execute(code, namespace)
        return {"ok": True, "value": _plain(value)}
    except BaseException as err:  # the student's error, or an interrupt at the time limit
        return {"ok": False, "ename": type(err).__name__[:100], "evalue": str(err)[:MAX_TEXT]}
    finally:
        if state is not None:
            with contextlib.suppress(Exception):
                _restore(state)


def answer(ns: Dict[str, Any], request_path: str, reply_path: str) -> None:
    import torch

    try:
        request = torch.load(request_path, weights_only=True)
        reply = evaluate(ns, request["code"], request["inputs"])
    except BaseException as err:
        reply = {"ok": False, "ename": type(err).__name__[:100], "evalue": str(err)[:MAX_TEXT]}
    try:
        torch.save(reply, reply_path)
    except BaseException as err:  # a value torch cannot save: say so
        torch.save({"ok": False, "ename": "UnsavableValue", "evalue": str(err)[:MAX_TEXT]}, reply_path)
