"""What an answer *does*: the tensor operations it runs, recorded, replayed and judged.

"Write your own softmax" is a rule about behaviour, so it is decided on behaviour, never on how
the source spells things (a local variable called ``softmax`` is fine; ``getattr(torch,
"softmax")`` or ``Categorical(logits=s).probs`` is not):

* :func:`record` runs an answer under a ``TorchDispatchMode`` and writes down every ATen
  operation it reaches (below Python: aliases, ``getattr``, ``__dict__`` and library code all end
  in the same operations), with their arguments as references to the inputs, to earlier
  operations or to constants: a :class:`Graph`, plain data that can travel as the grader's data.
  A ``TorchFunctionMode`` notes the ``torch`` functions called too (``enable_gqa=True``).
* :func:`replay` executes a graph again (the grader's side: trusted, bounded). The grader does
  not believe the values a kernel reports: it takes the graph and computes the values itself, so
  whatever a notebook does to its own process, only the operations in the graph count.
* :func:`violations` says which of an exercise's rules (:class:`OpRule`, listed in
  :mod:`attention_book.checks.rules`) a graph breaks: a forbidden operation (``_softmax``,
  ``logsumexp``, the scaled-dot-product kernels), a lookup applied to an argument that must go
  through a matrix product, a kernel that groups heads itself.
* :func:`generalizes` replays a graph on fresh inputs it was not recorded on and compares with a
  graph recorded on those inputs: values computed outside the recorded operations (NumPy, values
  read in Python, a constant) do not carry over.

The self-check (student's kernel) and the grader (a fresh sandbox, the grader's process) use the
same functions: one decision procedure, the grader's being authoritative.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Tuple

__all__ = ["OpRule", "Graph", "GraphError", "Limits", "record", "replay", "violations", "rule_hint", "api_names",
           "is_random", "MISSING", "generalizes", "perturb",
           "same_values", "has_float_inputs",
           "flatten_tensors", "graph_ops", "describe_ops"]

GRAPH_VERSION = 1
#: how :func:`violations` names a required call that a graph does not make
MISSING = "no call of "


class GraphError(ValueError):
    """A graph that is not well formed or breaks the replay's bounds (refused, never run)."""


@dataclass(frozen=True)
class OpRule:
    """What an exercise forbids or requires, as operations (see :func:`violations`).

    ``ops``: substrings of ATen operation names the answer must not reach (``"softmax"``
    matches ``_softmax``, ``_log_softmax``, ``special_softmax``; ``"=mm"`` matches ``mm`` only);
    ``api``: the same for the ``torch`` functions it calls (recorded by the ``TorchFunctionMode``:
    ``F.scaled_dot_product_attention`` however it is reached, by an alias, ``getattr`` or
    ``torch._C._nn``, even where the CPU runs it as plain matrix products and a softmax;
    ``F.multi_head_attention_forward`` inside ``nn.MultiheadAttention``; a function of the
    answer's own is never one, whatever its name); ``lookup_of``: the position of
    an argument that must not be looked up by index (``weight[ids]``, ``F.embedding``,
    ``index_select``, ``gather``, ...: ex-01-one-hot asks for a matrix product); ``grouped_kernel``:
    a scaled-dot-product kernel must not get fewer key/value heads than query heads (the kernel
    would do the grouping, ``enable_gqa=True``); ``message``: the hint, ``{names}`` = what was found.
    ``requires``: ``torch`` functions (exact names) each call must reach, at least one of them
    (ex-10-sdpa: ``scaled_dot_product_attention``); ``missing_message``: the hint when a call
    reaches none, ``{names}`` = the required names.
    """

    ops: Tuple[str, ...] = ()
    lookup_of: Optional[int] = None
    grouped_kernel: bool = False
    message: str = "{names}"
    api: Tuple[str, ...] = ()
    requires: Tuple[str, ...] = ()
    missing_message: str = "{names}"


@dataclass
class Graph:
    """The operations one call ran: plain data (lists, dicts, numbers, strings, dtypes, tensors).

    ``nodes``: ``{"op": "aten::_softmax.default", "args": [...], "kwargs": {...}}`` in the order
    they ran; an argument is a literal or a reference ``{"@": "i", "k": n}`` (input tensor n),
    ``{"@": "n", "k": n, "p": [...]}`` (output of node n, at a position inside it),
    ``{"@": "c", "k": n}`` (constant tensor n: made outside the recorded operations) or a tagged
    literal (``{"@": "device", "v": "cpu"}``). ``output`` is the call's value in the same form.
    ``api``: the ``torch`` functions called, with their keyword flags (not replayed: reported).
    """

    nodes: List[dict] = field(default_factory=list)
    constants: List[Any] = field(default_factory=list)
    output: Any = None
    inputs: int = 0
    api: List[Tuple[str, Dict[str, Any]]] = field(default_factory=list)
    #: node index -> the shapes of its tensor results (set by :func:`record` and, for the grader,
    #: again by :func:`replay`; never read from a kernel)
    shapes: Dict[int, List[Tuple[int, ...]]] = field(default_factory=dict, repr=False)

    def as_data(self) -> dict:
        return {"version": GRAPH_VERSION, "nodes": self.nodes, "constants": self.constants,
                "output": self.output, "inputs": self.inputs, "api": [[n, k] for n, k in self.api]}

    @classmethod
    def from_data(cls, data: Any, limits: "Limits" = None) -> "Graph":
        limits = limits or Limits()
        if not isinstance(data, dict) or data.get("version") != GRAPH_VERSION:
            raise GraphError("not a graph of this version")
        nodes, constants = data.get("nodes"), data.get("constants")
        if not isinstance(nodes, list) or not isinstance(constants, list):
            raise GraphError("a graph needs a list of nodes and of constants")
        if len(nodes) > limits.max_nodes:
            raise GraphError(f"more than {limits.max_nodes} operations")
        inputs = data.get("inputs")
        if not isinstance(inputs, int) or isinstance(inputs, bool) or not 0 <= inputs <= 10_000:
            raise GraphError("a graph needs a count of inputs")
        api = []
        for entry in data.get("api") or []:
            if (isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], str)
                    and isinstance(entry[1], dict)):
                api.append((entry[0][:200], dict(entry[1])))
        for node in nodes:
            if not isinstance(node, dict) or not isinstance(node.get("op"), str):
                raise GraphError("a node needs an operation name")
            if not isinstance(node.get("args", []), (list, tuple)) or not isinstance(node.get("kwargs", {}), dict):
                raise GraphError("a node's arguments must be a list and a dict")
        return cls(list(nodes), list(constants), data.get("output"), inputs, api)


@dataclass(frozen=True)
class Limits:
    """Bounds of a replay: checked on each operation's output *before* it runs (meta tensors)."""

    max_nodes: int = 20_000
    max_numel: int = 4_000_000  # elements of one result
    max_total: int = 64_000_000  # elements of all results together
    max_flops: float = 2e9  # multiply-adds of the matrix products together
    max_constant_numel: int = 1_000_000


# ------------------------------------------------------------------------------------------------
# Flattening arguments: the inputs of a call, in a fixed order
# ------------------------------------------------------------------------------------------------


def flatten_tensors(args: Iterable[Any], kwargs: Optional[Dict[str, Any]] = None) -> List[Any]:
    """The tensors of a call's arguments in a fixed order (positions, then keywords by name;
    inside lists, tuples and dicts depth first): input ``n`` of a graph is the n-th of these."""
    import torch

    found: List[Any] = []

    def walk(value, depth=0):
        if depth > 8:
            return
        if isinstance(value, torch.Tensor):
            found.append(value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item, depth + 1)
        elif isinstance(value, dict):
            for key in sorted(value, key=str):
                walk(value[key], depth + 1)

    walk(list(args))
    walk(dict(kwargs or {}))
    return found


# ------------------------------------------------------------------------------------------------
# Recording (runs wherever the answer runs: the student's kernel, a sandbox)
# ------------------------------------------------------------------------------------------------


def _recorder_modes():
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Api(TorchFunctionMode):
        def __init__(self, graph: Graph):
            super().__init__()
            self.graph = graph

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if len(self.graph.api) < 10_000:
                name = getattr(func, "__name__", None) or type(func).__name__
                flags = {k: v for k, v in kwargs.items() if isinstance(v, (bool, type(None)))}
                self.graph.api.append((str(name)[:100], flags))
            return func(*args, **kwargs)

    class Ops(TorchDispatchMode):
        def __init__(self, graph: Graph, inputs: List[Any]):
            super().__init__()
            self.graph = graph
            self.refs: Dict[int, dict] = {id(t): {"@": "i", "k": n} for n, t in enumerate(inputs)}
            self.alive: List[Any] = list(inputs)  # ids stay unique while the objects live

        def ref(self, value, depth=0):
            if isinstance(value, torch.Tensor):
                found = self.refs.get(id(value))
                if found is not None:
                    return found
                index = len(self.graph.constants)
                self.graph.constants.append(value.detach().clone().to("cpu").contiguous()
                                            if value.device.type != "meta" else None)
                self.alive.append(value)
                self.refs[id(value)] = {"@": "c", "k": index}
                return self.refs[id(value)]
            return _literal(value, self.ref, depth)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            node = {"op": str(func._schema.name) + "." + (func._overloadname or "default"),
                    "args": [self.ref(a) for a in args], "kwargs": {k: self.ref(v) for k, v in kwargs.items()}}
            out = func(*args, **kwargs)
            index = len(self.graph.nodes)
            self.graph.nodes.append(node)
            self.bind(out, index, [])
            return out

        def bind(self, value, index, path):
            if isinstance(value, torch.Tensor):
                self.refs[id(value)] = {"@": "n", "k": index, "p": list(path)}
                self.alive.append(value)
                self.graph.shapes.setdefault(index, []).append(tuple(value.shape))
            elif isinstance(value, (tuple, list)) and len(path) < 4:
                for position, item in enumerate(value):
                    self.bind(item, index, path + [position])

    return Api, Ops


def _literal(value, ref, depth=0):
    """A non-tensor argument as data (tensors inside lists go through ``ref``)."""
    import torch

    if depth > 8:
        raise GraphError("arguments nested too deep")
    if value is None or type(value) in (bool, int, float, str, complex):
        return value
    if isinstance(value, (bool, int, float)):  # numpy scalars, SymInt-free subclasses
        return type(value).__mro__[-2](value) if not isinstance(value, bool) else bool(value)
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, torch.device):
        return {"@": "device", "v": str(value.type)}
    if isinstance(value, torch.layout):
        return {"@": "layout", "v": str(value).replace("torch.", "")}
    if isinstance(value, torch.memory_format):
        return {"@": "memory_format", "v": str(value).replace("torch.", "")}
    if isinstance(value, (list, tuple)):
        items = [ref(item, depth + 1) for item in value]
        return items if isinstance(value, list) else tuple(items)
    raise GraphError(f"an argument of type {type(value).__name__} cannot be recorded")


def record(function, args: Tuple = (), kwargs: Optional[Dict[str, Any]] = None) -> Tuple[Any, Graph]:
    """``(function(*args, **kwargs), graph)``: the value and every operation the call reached.

    The answer's exceptions pass through unchanged, holding what it reached before it failed as
    ``opgraph`` (FlexAttention, a higher-order operator, cannot run under the recorder: its name
    is in the partial graph's ``api``). A value that is not made of tensors and plain
    data, or an argument that cannot be written down, raises :class:`GraphError`."""
    kwargs = dict(kwargs or {})
    graph = Graph()
    inputs = flatten_tensors(args, kwargs)
    graph.inputs = len(inputs)
    Api, Ops = _recorder_modes()
    ops = Ops(graph, inputs)
    try:
        with Api(graph), ops:
            value = function(*args, **kwargs)
    except Exception as err:
        try:  # what the call reached before it failed (a fused kernel the recorder cannot run)
            err.opgraph = graph
        except Exception:  # noqa: BLE001 - an exception that takes no attributes
            pass
        raise
    graph.output = ops.ref(value) if _is_tensor(value) else _output(value, ops.ref)
    return value, graph


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _output(value, ref, depth=0):
    import torch

    if isinstance(value, torch.Tensor):
        return ref(value)
    if isinstance(value, (list, tuple)) and depth < 8:
        items = [_output(item, ref, depth + 1) for item in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict) and depth < 8:
        return {"@": "dict", "v": {str(k): _output(v, ref, depth + 1) for k, v in value.items()}}
    try:
        return _literal(value, ref, depth)
    except GraphError:  # not data (an object, a function): only its type travels
        return {"@": "opaque", "v": type(value).__name__[:100]}


# ------------------------------------------------------------------------------------------------
# Replaying (the grader: trusted code, hostile graph)
# ------------------------------------------------------------------------------------------------

#: ATen operations a graph may not hold: files, raw storage, sparse and quantized layouts (their
#: unchecked constructors), other devices, streams, in-place resizing, internal fused kernels
_REFUSED = ("from_file", "storage", "sparse", "_nested", "nested_", "quantize", "_make_per", "mkldnn", "cudnn",
            "miopen", "cufft", "fbgemm", "set_", "_unsafe_set", "pin_memory", "record_stream", "_copy_from",
            "resize", "_foreach", "_fused", "segment_reduce", "_assert", "_print", "_efficientzerotensor",
            "to_padded", "_cslt", "_mps", "_cuda", "cuda", "_use_", "_backward", "_jagged", "_amp_",
            "_validate", "_thnn", "_weight_int", "_convert_weight", "_dyn_quant", "_sobol", "_debug",
            "_has_same", "_functional", "_lazy", "_to_cpu", "_propagate", "_new_zeros_with_same", "_autocast",
            "_ops", "_wrapped", "_test", "_dimI", "_dimV", "_nnz", "_values", "_indices", "ccol", "crow",
            "lstm", "gru", "rnn_", "cdist", "_cummax", "_histogramdd", "triton", "_scaled_mm", "_int_mm",
            "_convolution_double", "_nnpack", "slow_conv", "_chunk_cat", "_embedding_bag_backward",
            "_pack_padded", "_pad_packed", "_ctc", "ctc_loss", "_fake_quant", "fake_quant", "_saturate",
            "_upsample", "_sparse", "_to_dense", "to_dense", "_coalesce", "coalesce", "_pdist",
            "_linalg_check", "_cholesky_solve_helper", "_fw_primal", "_make_dual", "_unpack_dual",
            "_version", "_is_zerotensor", "_conj_physical", "_resize", "_local_dense", "_addmm_activation")
#: operations whose output shape depends on the values (no meta kernel): bounded another way
_DATA_DEPENDENT = ("_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique", "unique_consecutive",
                   "_unique2", "repeat_interleave", "argwhere", "_is_all_true", "_is_any_true", "equal",
                   "is_nonzero", "is_same_size")
_MATMUL = ("mm", "bmm", "addmm", "baddbmm", "addbmm", "matmul", "dot", "vdot", "mv", "addmv", "linear",
           "einsum", "tensordot", "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math",
           "convolution", "_convolution", "conv1d", "conv2d", "outer", "ger", "addr", "kron", "chain_matmul",
           "linalg_multi_dot", "_native_multi_head_attention")
_MAX_INT_ARG = 1 << 31


def _resolve(name: str):
    """The ATen operation overload named ``aten::op.overload`` (namespace aten only)."""
    import torch

    if not isinstance(name, str) or len(name) > 200 or not name.startswith("aten::"):
        raise GraphError(f"only aten operations can be replayed, not {str(name)[:60]!r}")
    base, _, overload = name[6:].partition(".")
    if not base.replace("_", "a").isalnum() or not overload.replace("_", "a").isalnum():
        raise GraphError(f"not an operation name: {name[:60]!r}")
    lowered = base.lower()
    if any(part in lowered for part in _REFUSED):
        raise GraphError(f"the operation {name[:60]} is not replayed by the grader")
    packet = getattr(torch.ops.aten, base, None)
    op = getattr(packet, overload, None) if packet is not None else None
    if op is None:
        raise GraphError(f"no operation {name[:60]}")
    for argument in op._schema.arguments:
        text = str(argument.type)
        if any(word in text for word in ("Storage", "Stream", "Generator", "Dimname", "ScalarType[]")):
            if "Generator" in text and ("?" in text or text.startswith("Optional[")):
                continue  # an optional generator: None is fine, a generator cannot be recorded
            raise GraphError(f"the operation {name[:60]} takes a {text}")
    return op


def _decode_literal(value, deref, depth=0):
    import torch

    if depth > 8:
        raise GraphError("arguments nested too deep")
    if value is None or type(value) in (bool, float, str, complex):
        return value
    if type(value) is int:
        if abs(value) > _MAX_INT_ARG * _MAX_INT_ARG:
            raise GraphError("an integer argument out of range")
        return value
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, dict):
        tag = value.get("@")
        if tag in ("i", "n", "c"):
            return deref(value)
        if tag == "device":
            if value.get("v") not in ("cpu", "meta"):
                raise GraphError(f"the device {str(value.get('v'))[:20]!r} is not replayed")
            return torch.device(value["v"])
        if tag == "layout":
            if value.get("v") != "strided":
                raise GraphError("only strided tensors are replayed")
            return torch.strided
        if tag == "memory_format":
            found = getattr(torch, str(value.get("v")), None)
            if not isinstance(found, torch.memory_format):
                raise GraphError("an unknown memory format")
            return found
        if tag == "dict":
            inner = value.get("v")
            if not isinstance(inner, dict):
                raise GraphError("a malformed dict")
            return {str(k): _decode_literal(v, deref, depth + 1) for k, v in inner.items()}
        raise GraphError("an unknown tagged argument")
    if isinstance(value, (list, tuple)):
        if len(value) > 100_000:
            raise GraphError("an argument list is too long")
        items = [_decode_literal(item, deref, depth + 1) for item in value]
        return items if isinstance(value, list) else tuple(items)
    raise GraphError(f"an argument of type {type(value).__name__} is not data")


def _numel(value) -> int:
    import torch

    total = 0
    for item in _leaves(value):
        if isinstance(item, torch.Tensor):
            total += item.numel()
    return total


def _leaves(value, depth=0):
    if isinstance(value, (list, tuple)) and depth < 6:
        for item in value:
            yield from _leaves(item, depth + 1)
    else:
        yield value


def _to_meta(value, depth=0):
    import torch

    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta") \
            if value.device.type != "meta" else value
    if isinstance(value, torch.device):
        return torch.device("meta")
    if isinstance(value, list) and depth < 8:
        return [_to_meta(v, depth + 1) for v in value]
    if isinstance(value, tuple) and depth < 8:
        return tuple(_to_meta(v, depth + 1) for v in value)
    return value


def _flops(base: str, args, out) -> float:
    """A bound on the multiply-adds of a matrix product (its result's size x the inner size)."""
    import torch

    if not any(base == m or base.startswith(m) for m in _MATMUL):
        return 0.0
    inner = 1
    for item in _leaves(list(args)):
        if isinstance(item, torch.Tensor) and item.dim() >= 1:
            inner = max(inner, int(item.shape[-1]), int(item.shape[0]))
    return float(_numel(out)) * inner


def _zeroed(base: str, value):
    """Uninitialised memory never reaches a comparison: ``empty`` results are zeroed."""
    import torch

    if "empty" in base:
        for item in _leaves(value):
            if isinstance(item, torch.Tensor) and item.device.type != "meta":
                with torch.no_grad():
                    item.zero_()
    return value


def _meta_kernels_ready() -> None:
    """Meta kernels import ``torch._dynamo``, which makes a cache folder in the temporary folder
    when it is imported: make it in a throwaway folder, removed at once (the grader leaves
    nothing behind in its temporary folder)."""
    import os
    import shutil
    import sys
    import tempfile

    if "torch._dynamo" in sys.modules:
        return
    folder = tempfile.mkdtemp(prefix="ab-replay-")
    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(folder, "inductor")
    try:
        import torch._dynamo  # noqa: F401
    finally:
        if previous is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous
        shutil.rmtree(folder, ignore_errors=True)


def replay(graph: Graph, args: Tuple = (), kwargs: Optional[Dict[str, Any]] = None,
           limits: Limits = Limits()) -> Any:
    """Run ``graph`` on the given arguments (their tensors are its inputs, see
    :func:`flatten_tensors`) and return its output. Every operation is checked first: an ATen
    operation the grader replays (:data:`_REFUSED`), CPU only, and bounded in size and matrix
    products by running it on meta tensors before it runs on data. Raises :class:`GraphError`."""
    import torch

    _meta_kernels_ready()
    inputs = flatten_tensors(args, kwargs)
    graph.shapes = {}
    if len(inputs) != graph.inputs:
        raise GraphError(f"the graph has {graph.inputs} inputs, the call {len(inputs)}")
    constants: List[Any] = []
    for constant in graph.constants:
        if not isinstance(constant, torch.Tensor) or constant.numel() > limits.max_constant_numel:
            raise GraphError("a constant that is not a tensor of bounded size")
        constants.append(constant)
    results: List[Any] = []
    total = 0
    flops = 0.0

    def deref(ref):
        kind, index = ref.get("@"), ref.get("k")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise GraphError("a malformed reference")
        if kind == "i":
            if index >= len(inputs):
                raise GraphError("a reference to a missing input")
            return inputs[index]
        if kind == "c":
            if index >= len(constants):
                raise GraphError("a reference to a missing constant")
            return constants[index]
        if index >= len(results):
            raise GraphError("a reference to an operation that has not run yet")
        value = results[index]
        path = ref.get("p") or []
        if not isinstance(path, (list, tuple)) or len(path) > 4:
            raise GraphError("a malformed reference")
        for position in path:
            if not isinstance(position, int) or not isinstance(value, (list, tuple)) or not 0 <= position < len(value):
                raise GraphError("a reference to a missing part of a result")
            value = value[position]
        return value

    for node in graph.nodes:
        op = _resolve(node["op"])
        base = node["op"][6:].partition(".")[0]
        node_args = _decode_literal(list(node.get("args") or []), deref)
        node_kwargs = {str(k): _decode_literal(v, deref) for k, v in (node.get("kwargs") or {}).items()}
        for item in _leaves(node_args + list(node_kwargs.values())):
            if isinstance(item, torch.Tensor) and item.device.type != "cpu":
                raise GraphError("only CPU tensors are replayed")
        meta_kwargs = {k: _to_meta(v) for k, v in node_kwargs.items()}
        if any(argument.name == "device" for argument in op._schema.arguments):
            meta_kwargs["device"] = torch.device("meta")  # a factory: sized on meta, never allocated here
        try:
            with torch.no_grad():
                shape_only = op(*_to_meta(node_args), **meta_kwargs)
        except GraphError:
            raise
        except Exception:  # no meta kernel, or the shapes depend on the values
            if not any(base == d or base.startswith(d) for d in _DATA_DEPENDENT):
                raise GraphError(f"the operation {node['op'][:60]} could not be sized before it runs") from None
            shape_only = None
            bound = sum(_numel(v) for v in node_args if isinstance(v, torch.Tensor))
            if base.startswith("repeat_interleave"):
                repeats = next((v for v in node_args[1:2] + [node_kwargs.get("repeats")]
                                if isinstance(v, torch.Tensor)), None)
                if repeats is not None:
                    bound = int(repeats.clamp(min=0).sum()) * max(1, _numel(node_args[0]) // max(1, repeats.numel()))
            if bound > limits.max_numel:
                raise GraphError(f"the operation {node['op'][:60]} would make more than {limits.max_numel} elements")
        if shape_only is not None:
            size = _numel(shape_only)
            if size > limits.max_numel:
                raise GraphError(f"the operation {node['op'][:60]} makes {size} elements (at most {limits.max_numel})")
            total += size
            flops += _flops(base, node_args, shape_only)
            if total > limits.max_total or flops > limits.max_flops:
                raise GraphError("the operations together are larger than the grader replays")
        result = _zeroed(base, op(*node_args, **node_kwargs))
        graph.shapes[len(results)] = [tuple(t.shape) for t in _leaves(result) if isinstance(t, torch.Tensor)]
        results.append(result)

    def output(value, depth=0):
        if isinstance(value, dict) and value.get("@") == "opaque":
            from ..instructor.wire import Opaque

            return Opaque(str(value.get("v"))[:100])
        if isinstance(value, dict) and value.get("@") == "dict":
            inner = value.get("v") if isinstance(value.get("v"), dict) else {}
            return {str(k): output(v, depth + 1) for k, v in inner.items()}
        if isinstance(value, (list, tuple)) and depth < 8:
            items = [output(v, depth + 1) for v in value]
            return items if isinstance(value, list) else tuple(items)
        return _decode_literal(value, deref, depth)

    return output(graph.output)


# ------------------------------------------------------------------------------------------------
# Judging
# ------------------------------------------------------------------------------------------------


def graph_ops(graph: Graph) -> List[str]:
    """The distinct operation names of a graph (``"_softmax"``), in the order first reached."""
    seen: List[str] = []
    for node in graph.nodes:
        base = str(node.get("op", ""))[6:].partition(".")[0]
        if base not in seen:
            seen.append(base)
    return seen


#: operations that return (a view or copy of) their first argument's values: a lookup on their
#: result is still a lookup on the argument
_PASS_THROUGH = ("view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand", "contiguous", "clone",
                 "_to_copy", "to", "alias", "detach", "lift_fresh", "lift_fresh_copy", "unsqueeze", "squeeze",
                 "flatten", "slice", "narrow", "as_strided", "split", "split_with_sizes", "chunk", "unbind",
                 "movedim", "swapaxes", "swapdims", "numpy_T", "mT", "mH", "adjoint", "conj", "resolve_conj",
                 "resolve_neg", "type_as", "unflatten", "view_as", "reshape_as", "expand_as", "_reshape_alias",
                 "copy", "float", "double", "half")
#: operations that read rows of their first argument by index
_LOOKUPS = ("index", "_unsafe_index", "index_select", "gather", "take", "take_along_dim", "embedding",
            "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only", "select", "masked_select",
            "index_copy", "index_add", "cat", "stack")


def _tensor_refs(value, depth=0):
    if isinstance(value, dict) and value.get("@") in ("i", "n", "c"):
        yield value
    elif isinstance(value, (list, tuple)) and depth < 8:
        for item in value:
            yield from _tensor_refs(item, depth + 1)


def violations(graph: Graph, rule: OpRule, arguments: Optional[List[Any]] = None,
               complete: bool = True) -> List[str]:
    """Which of ``rule``'s forbidden behaviours ``graph`` shows, as short names for the hint
    (``"_softmax"``, ``"scaled_dot_product_attention"``, ``"index (a lookup of argument 2)"``,
    ``"a kernel that groups the heads"``, ``"no call of scaled_dot_product_attention"``);
    :func:`rule_hint` turns them into the hint.

    ``arguments``: the call's input tensors (for the shapes the ``grouped_kernel`` rule reads;
    the grader's own copies). ``complete=False``: the graph of a call that failed part way
    (what it reached so far): a required call it did not reach yet is not counted."""
    found: List[str] = []
    for patterns, names in ((rule.ops, graph_ops(graph)), (rule.api, api_names(graph))):
        for pattern in patterns:
            for name in names:
                hit = name == pattern[1:] if pattern.startswith("=") else pattern in name
                if hit and name not in found:
                    found.append(name)
    if rule.lookup_of is not None:
        found += _lookups(graph, rule.lookup_of)
    if rule.grouped_kernel:
        found += _grouped_kernels(graph, arguments)
    if rule.requires and complete and not set(rule.requires) & set(api_names(graph)):
        found.append(MISSING + " or ".join(rule.requires))
    return found


def rule_hint(rule: OpRule, found: List[str]) -> str:
    """The hint for what :func:`violations` found: the rule's ``message`` for what the answer must
    not do, its ``missing_message`` for a required call it did not make (both when both)."""
    forbidden = [name for name in found if not name.startswith(MISSING)]
    missing = [name[len(MISSING):] for name in found if name.startswith(MISSING)]
    parts = []
    if forbidden:
        parts.append(rule.message.format(names=", ".join(forbidden)))
    if missing:
        parts.append(rule.missing_message.format(names=", ".join(dict.fromkeys(missing))))
    return "; ".join(parts)


def api_names(graph: Graph) -> List[str]:
    """The distinct ``torch`` functions a graph's call made (its ``api``), in the order first called."""
    return list(dict.fromkeys(str(name) for name, _ in graph.api))


#: what the grader replays differently each time: random draws (dropout, initialisation)
_RANDOM = ("bernoulli", "dropout", "rand", "normal", "uniform", "multinomial", "exponential", "geometric",
           "cauchy", "log_normal", "random_", "poisson", "binomial", "_standard_gamma", "dirichlet")


def is_random(graph: Graph) -> bool:
    """Whether the graph's output depends on a random draw (a dropout mask; not a random
    initialisation overwritten afterwards): its values differ from run to run, so they are
    neither compared with the kernel's nor replayed on fresh inputs."""
    tainted = set()
    for index, node in enumerate(graph.nodes):
        base = str(node.get("op", ""))[6:].partition(".")[0]
        args = list(node.get("args") or [])
        kwargs = node.get("kwargs") or {}
        if any(word in base for word in _RANDOM):
            tainted.add(index)
            continue
        if "scaled_dot_product" in base:  # a fused kernel that drops inside (dropout_p > 0)
            dropout = kwargs.get("dropout_p", args[3] if len(args) > 3 else 0.0)
            if isinstance(dropout, (int, float)) and not isinstance(dropout, bool) and dropout > 0:
                tainted.add(index)
                continue
        if base in ("copy_", "copy"):  # the destination's old values are gone
            sources = list(_tensor_refs(args[1:2]))
        elif base in ("fill_", "zero_"):
            sources = []
        else:
            sources = list(_tensor_refs(args)) + list(_tensor_refs(list(kwargs.values())))
        if any(ref.get("@") == "n" and ref.get("k") in tainted for ref in sources):
            tainted.add(index)
    return any(ref.get("@") == "n" and ref.get("k") in tainted for ref in _tensor_refs([graph.output]))


def _lookups(graph: Graph, position: int) -> List[str]:
    """Lookups applied to input tensor ``position`` (or to a view or copy of it)."""
    tainted = set()  # node indices whose result is the argument's values
    found: List[str] = []

    def is_argument(ref) -> bool:
        return (ref.get("@") == "i" and ref.get("k") == position) or (ref.get("@") == "n" and ref.get("k") in tainted)

    for index, node in enumerate(graph.nodes):
        base = str(node.get("op", ""))[6:].partition(".")[0]
        args = list(node.get("args") or [])
        first = next(iter(_tensor_refs(args[:1])), None) if args else None
        if base in ("embedding", "embedding_bag", "_embedding_bag", "_embedding_bag_forward_only"):
            first = next(iter(_tensor_refs(args[:1])), None)  # embedding(weight, ids): the weight first
        if first is None or not is_argument(first):
            if base in ("cat", "stack") and args and any(is_argument(r) for r in _tensor_refs(args[0])):
                found.append(f"{base} (rows of argument {position + 1} put together)")
            continue
        if base in _PASS_THROUGH:
            tainted.add(index)
        elif base in _LOOKUPS:
            what = f"{base} (a lookup in argument {position + 1})"
            if what not in found:
                found.append(what)
    return found


def _grouped_kernels(graph: Graph, arguments: Optional[List[Any]]) -> List[str]:
    """Scaled-dot-product kernels called with fewer key/value heads than query heads."""
    found: List[str] = []
    for node in graph.nodes:
        base = str(node.get("op", ""))[6:].partition(".")[0]
        if "scaled_dot_product" not in base:
            continue
        refs = list(_tensor_refs(list(node.get("args") or [])[:2]))
        if len(refs) < 2:
            continue
        heads = [_heads(ref, graph, arguments) for ref in refs]
        if None not in heads and heads[0] != heads[1]:
            found.append(f"{base} (the kernel groups the heads: enable_gqa)")
    return found


def _heads(ref, graph: Graph, arguments) -> Optional[int]:
    """The head count (size -3) of a referenced tensor: an input's, or a result's as recorded or
    (the grader) replayed."""
    shape = None
    if ref.get("@") == "i" and arguments is not None and 0 <= ref.get("k", -1) < len(arguments):
        shape = tuple(arguments[ref["k"]].shape)
    elif ref.get("@") == "n":
        path = ref.get("p") or [0]
        shapes = graph.shapes.get(ref.get("k"), [])
        position = path[0] if path and isinstance(path[0], int) else 0
        shape = shapes[position] if 0 <= position < len(shapes) else None
    return shape[-3] if shape is not None and len(shape) >= 3 else None


def describe_ops(found: List[str]) -> str:
    return ", ".join(found)


# ------------------------------------------------------------------------------------------------
# Fresh inputs: does the graph compute the function, or replay numbers it was given?
# ------------------------------------------------------------------------------------------------


def perturb(args: Tuple, kwargs: Optional[Dict[str, Any]] = None, seed: Optional[int] = None):
    """``(args, kwargs)`` with every floating-point tensor moved by a small random amount (drawn
    from a secret seed unless one is given); infinities, NaN, integer and boolean tensors and
    everything else stay as they are (masks, ids and sizes keep their meaning)."""
    import torch

    generator = torch.Generator().manual_seed(seed if seed is not None else secrets.randbits(62))

    def move(value, depth=0):
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            base = value.detach()
            finite = torch.isfinite(base)
            spread = float(base[finite].abs().mean()) if bool(finite.any()) else 1.0
            noise = torch.randn(base.shape, generator=generator, dtype=torch.float64)
            noise = (noise * (0.1 * spread + 0.05)).to(base.dtype)
            moved = torch.where(finite, base + noise, base)
            return moved.requires_grad_(value.requires_grad) if value.requires_grad else moved
        if isinstance(value, (list, tuple)) and depth < 8:
            items = [move(v, depth + 1) for v in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict) and depth < 8:
            return {k: move(v, depth + 1) for k, v in value.items()}
        return value

    return tuple(move(a) for a in args), {k: move(v) for k, v in (kwargs or {}).items()}


def has_float_inputs(args: Tuple, kwargs: Optional[Dict[str, Any]] = None) -> bool:
    return any(t.is_floating_point() for t in flatten_tensors(args, kwargs))


def same_values(a, b, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """Two replayed values agree (tensors close, NaN where NaN, everything else equal)."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return False
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if a.dtype == torch.bool or not (a.is_floating_point() or a.is_complex()):
            return torch.equal(a, b)
        return bool(torch.allclose(a.detach(), b.detach(), rtol=rtol, atol=atol, equal_nan=True))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_values(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_values(a[k], b[k], rtol, atol) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
    return a == b


def generalizes(graph: Graph, fresh_graph: Graph, fresh_args: Tuple, fresh_kwargs: Optional[Dict[str, Any]] = None,
                limits: Limits = Limits()) -> bool:
    """Whether ``graph`` (recorded on other inputs) gives on ``fresh_args`` what ``fresh_graph``
    (recorded on them) gives: a graph that computes its values from its inputs does; one that
    carries numbers computed elsewhere (NumPy, ``.tolist()``, a constant) does not."""
    return same_values(replay(graph, fresh_args, fresh_kwargs, limits),
                       replay(fresh_graph, fresh_args, fresh_kwargs, limits))
