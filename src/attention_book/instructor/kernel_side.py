"""Runs inside a submission's kernel: answers one request of the grader, as data.

The grader (:mod:`.runner`) sends the same silent execute request for every call,
``kernel_side.serve()``, and one request frame (:mod:`.wire` data) on the pipe it owns
(``REQUEST_FD``). No code of the hidden tests travels: a request is one of a fixed vocabulary,

========  =============================================================================
op        what it does
========  =============================================================================
call      ``name(*args, **kwargs)``; the tensor arguments are sent back too ("after")
has       whether the notebook defines ``name``
trace     like call, and the tensor operations the call ran (:mod:`attention_book.checks.opgraph`):
          the grader replays them itself and judges them ("write your own softmax"); a call
          that fails replies ``{"ok": True, "failed": [ename, evalue], "graph": ...}`` with what
          it reached before (FlexAttention cannot run under the recorder)
grad      like call, with the arguments listed in ``positions``/``names`` requiring
          gradients; the graph is kept under ``graph`` for a later ``backward``
backward  the gradients of a kept graph's leaves for the ``upstream`` gradients
probe     one of the public procedures of :mod:`.probes`, with ``inputs``; with ``trace``, the
          operations and torch calls it ran too (``graph``, as for trace): a module's answer,
          judged on its construction and forward
========  =============================================================================

The reply (one frame on ``REPLY_FD``) is ``{"ok": True, "value": ...}`` or ``{"ok": False,
"ename": ..., "evalue": ...}``; tensors are detached, on the CPU, contiguous; values that are not
data become :class:`~.wire.Opaque` (their type name). The torch, ``random`` and NumPy random
states are restored afterwards, and what the answer prints is swallowed.

Nothing here decides a point or is trusted: a notebook can replace this module, and the grader
treats every reply as hostile data (size, depth, items and tensors bounded, values compared in
the grader with its own reference).
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import time
from typing import Any, Dict

from . import wire
from .sandbox_init import REPLY_FD, REQUEST_FD

MAX_TEXT = 2000
MAX_GRAPHS = 64
GRAPHS: Dict[str, Any] = {}  # autograd graphs kept between a "grad" request and its "backward"
REPLY_BOUNDS = wire.Bounds()


class _Sink(io.TextIOBase):
    def write(self, text: str) -> int:  # noqa: D401
        return len(text)


def _fds():
    """The call pipes: sandbox_init's fixed descriptors, or ATTENTION_BOOK_GRADER_FDS (--unsafe)."""
    found = os.environ.get("ATTENTION_BOOK_GRADER_FDS")
    if found:
        request, reply = (int(x) for x in found.split(","))
        return request, reply
    return REQUEST_FD, REPLY_FD


def plain(value: Any, depth: int = 0, budget: Any = None) -> Any:
    """``value`` as data the format can carry (anything else: an Opaque with its type name); at most
    ``REPLY_BOUNDS.max_items`` items are visited (lists sharing their items are not walked forever)."""
    import torch

    budget = budget if budget is not None else [REPLY_BOUNDS.max_items]
    budget[0] -= 1
    if budget[0] < 0:
        return wire.Opaque("too many items")
    if depth > 6:
        return wire.Opaque("nested too deep")
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided or value.is_quantized or value.device.type == "meta":
            return wire.Opaque(f"{value.layout} tensor" if value.layout != torch.strided else "meta tensor")
        if value.numel() * value.element_size() > REPLY_BOUNDS.max_bytes // 2:
            return wire.Opaque("tensor too large")
        result = value.detach().to("cpu").contiguous()
        return result if type(result) is torch.Tensor else result.as_subclass(torch.Tensor)
    if value is None or type(value) in (bool, int, float, complex):
        return value
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, str):
        return str(value[:MAX_TEXT])
    if isinstance(value, torch.Size):
        return tuple(int(v) for v in value)
    if isinstance(value, (tuple, list)):
        items = [plain(v, depth + 1, budget) for v in list(value)[:1000]]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {str(k)[:200]: plain(v, depth + 1, budget) for k, v in list(value.items())[:1000]}
    if hasattr(value, "item") and hasattr(value, "dtype") and getattr(value, "shape", None) == ():
        with contextlib.suppress(Exception):  # a NumPy scalar
            return plain(value.item(), depth + 1, budget)
    if isinstance(value, (bool, int, float)):  # subclasses of numbers
        with contextlib.suppress(Exception):
            return type(value).__mro__[-2](value)
    return wire.Opaque(type(value).__name__)


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


def _function(ns: Dict[str, Any], name: Any):
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError("a name defined by the notebook is needed")
    if name not in ns:
        raise NameError(f"name '{name}' is not defined")
    return ns[name]


def _after(args, kwargs):
    import torch

    return {"args": [plain(a) if isinstance(a, torch.Tensor) else None for a in args],
            "kwargs": {k: plain(v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)}}


def _traced(function, args, kwargs) -> Dict[str, Any]:
    """A trace reply: the value and the graph, or the error and the graph of what it reached."""
    from ..checks.opgraph import record

    try:
        value, graph = record(function, args, kwargs)
    except Exception as err:
        partial = getattr(err, "opgraph", None)
        if partial is None:
            raise
        return {"ok": True, "failed": [type(err).__name__[:100], str(err)[:MAX_TEXT]], "graph": partial.as_data()}
    return {"ok": True, "value": plain(value), "graph": graph.as_data()}


def handle(ns: Dict[str, Any], request: Dict[str, Any]) -> Dict[str, Any]:
    """Answer one request (see the table above) on the notebook's namespace ``ns``."""
    import torch

    op = request.get("op")
    state = None
    try:
        state = _random_state()
        with contextlib.redirect_stdout(_Sink()), contextlib.redirect_stderr(_Sink()):
            if op == "has":
                name = request.get("name")
                return {"ok": True, "value": isinstance(name, str) and name in ns}
            if op == "probe":
                from .probes import PROBES

                procedure = PROBES.get(request.get("name"))
                if procedure is None:
                    raise ValueError(f"no probe named {str(request.get('name'))[:60]!r}")
                inputs = dict(request.get("inputs") or {})
                if request.get("trace"):
                    return _traced(lambda **given: procedure(ns, **given), (), inputs)
                return {"ok": True, "value": plain(procedure(ns, **inputs))}
            if op == "backward":
                graph = GRAPHS.pop(str(request.get("graph")), None)
                if graph is None:
                    raise KeyError("no graph kept under this name")
                out, leaves = graph
                outs = list(out) if isinstance(out, (tuple, list)) else [out]
                pairs = [(o, g) for o, g in zip(outs, request.get("upstream") or [])
                         if g is not None and isinstance(o, torch.Tensor) and o.requires_grad]
                grads = (torch.autograd.grad([o for o, _ in pairs], leaves, [g for _, g in pairs], allow_unused=True)
                         if pairs else tuple(None for _ in leaves))
                return {"ok": True, "value": plain(tuple(grads))}
            if op not in ("call", "grad", "trace"):
                raise ValueError(f"unknown request {str(op)[:40]!r}")
            function = _function(ns, request.get("name"))
            args = list(request.get("args") or [])
            kwargs = dict(request.get("kwargs") or {})
            if op == "trace":
                return _traced(function, tuple(args), kwargs)
            if op == "call":
                value = function(*args, **kwargs)
                return {"ok": True, "value": plain(value), "after": _after(args, kwargs)}
            if op == "grad":
                leaves = []
                for position in request.get("positions") or []:
                    args[position] = args[position].detach().requires_grad_(True)
                    leaves.append(args[position])
                for key in request.get("names") or []:
                    kwargs[key] = kwargs[key].detach().requires_grad_(True)
                    leaves.append(kwargs[key])
                out = function(*args, **kwargs)
                while len(GRAPHS) >= MAX_GRAPHS:
                    GRAPHS.pop(next(iter(GRAPHS)))
                GRAPHS[str(request.get("graph"))] = (out, leaves)
                return {"ok": True, "value": plain(out)}
            raise ValueError(f"unknown request {str(op)[:40]!r}")
    except BaseException as err:  # the student's error, or an interrupt at the time limit
        return {"ok": False, "ename": type(err).__name__[:100], "evalue": str(err)[:MAX_TEXT]}
    finally:
        if state is not None:
            with contextlib.suppress(Exception):
                _restore(state)


def encode_reply(reply: Dict[str, Any]) -> bytes:
    try:
        return wire.encode(reply, REPLY_BOUNDS, strict=False)
    except (wire.WireError, TypeError, ValueError, OverflowError) as err:
        return wire.encode({"ok": False, "ename": "UnsavableValue", "evalue": str(err)[:MAX_TEXT]})


def serve() -> None:
    """Read one request frame, answer it, write one reply frame (called by the grader's request)."""
    request_fd, reply_fd = _fds()
    deadline = time.monotonic() + 600
    try:
        nonce, length = wire.read_header(request_fd, deadline)
        if length > REPLY_BOUNDS.max_bytes:
            return
        payload = wire.read_exactly(request_fd, length, deadline)
    except (OSError, EOFError, TimeoutError, wire.WireError):
        return
    try:
        request = wire.decode(payload)
        reply = handle(get_ipython().user_ns, request) if isinstance(request, dict) else {
            "ok": False, "ename": "BadRequest", "evalue": "not a request"}
    except BaseException as err:  # noqa: BLE001
        reply = {"ok": False, "ename": type(err).__name__[:100], "evalue": str(err)[:MAX_TEXT]}
    data = encode_reply(reply)
    try:
        wire.write_frame(reply_fd, nonce, data)
    except OSError:
        pass


def get_ipython():  # the kernel's shell (a module-level name so tests can replace it)
    import IPython

    return IPython.get_ipython()
