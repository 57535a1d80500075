"""Hidden tests written as functions of the student's namespace: ``answer(ns, "f")(x)``.

``ns`` is a :class:`RemoteNamespace` over a :class:`~.hidden.Session`: ``ns["f"]`` is a
:class:`RemoteFunction` that calls ``f`` in the kernel with data arguments and returns data.

The grader's own tensors never change: what the answer did to its arguments in place is
reported, not copied back (:attr:`RemoteFunction.mutated`), so an expected value the test
computes from its inputs afterwards comes from the grader's untouched copies (an answer that
zeroes its inputs cannot zero the expected value). Results of arguments with ``requires_grad``
carry gradients back (a ``torch.autograd.Function`` whose backward asks the kernel), so tests of
the form "call, compare, ``.backward()``, compare the gradients" work unchanged.
"""

from __future__ import annotations

import itertools
from typing import List

from .hidden import Hint, Session

__all__ = ["RemoteNamespace", "RemoteFunction", "answer"]

_COUNTER = itertools.count()


class RemoteNamespace:
    """The student's names as a read-only mapping whose values are :class:`RemoteFunction`."""

    def __init__(self, session: Session):
        self.session = session

    def __contains__(self, name: str) -> bool:
        return self.session.has(name)

    def __getitem__(self, name: str) -> "RemoteFunction":
        if not self.session.has(name):
            raise KeyError(name)
        return RemoteFunction(self.session, name)


def answer(ns, name: str):
    """The student's ``name`` (a callable handle), or a Hint saying it is missing."""
    if name not in ns:
        raise Hint(f"`{name}` is not defined: run the cell that defines it (and keep its name)")
    return ns[name]


def _tensors(args, kwargs):
    import torch

    found = [("a", i, v) for i, v in enumerate(args) if isinstance(v, torch.Tensor)]
    found += [("k", k, v) for k, v in kwargs.items() if isinstance(v, torch.Tensor)]
    return found


class RemoteFunction:
    """Calls the student's function in the kernel.

    ``mutated`` lists the arguments any call so far changed in place ("argument 1",
    "argument keys"); the grader's tensors themselves stay as they were. A result that depends on
    arguments with ``requires_grad`` carries gradients back from the kernel (``.backward()``)."""

    def __init__(self, session: Session, name: str):
        self.session, self.name = session, name
        self.mutated: List[str] = []

    def __call__(self, *args, **kwargs):
        import torch

        grads = [(kind, key, t) for kind, key, t in _tensors(args, kwargs) if t.requires_grad]
        plain_args = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
        plain_kwargs = {k: (v.detach().clone() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        if grads:
            return self._with_grad(plain_args, plain_kwargs, grads)
        value, after = self.session.call_after(self.name, *plain_args, **plain_kwargs)
        after_args = after.get("args") if isinstance(after.get("args"), list) else []
        after_kwargs = after.get("kwargs") if isinstance(after.get("kwargs"), dict) else {}
        for kind, key, tensor in _tensors(args, kwargs):
            got = (after_args[key] if key < len(after_args) else None) if kind == "a" else after_kwargs.get(key)
            unchanged = (isinstance(got, torch.Tensor) and got.shape == tensor.shape and got.dtype == tensor.dtype
                         and torch.equal(got, tensor.detach()))
            if not unchanged:
                what = f"argument {key + 1}" if kind == "a" else f"argument {key}"
                if what not in self.mutated:
                    self.mutated.append(what)
                    self.session.note_mutation(self.name)
        return value

    def _with_grad(self, args, kwargs, grads):
        import torch

        positions = [key for kind, key, _ in grads if kind == "a"]
        names = [key for kind, key, _ in grads if kind == "k"]
        graph_id = f"g{id(self)}-{next(_COUNTER)}"
        value = self.session.request("grad", name=self.name, args=list(args), kwargs=dict(kwargs),
                                     positions=positions, names=names, graph=graph_id).get("value")
        outputs = list(value) if isinstance(value, (tuple, list)) else [value]
        if not outputs or not all(isinstance(v, torch.Tensor) and v.is_floating_point() for v in outputs):
            return value
        session = self.session

        class _Remote(torch.autograd.Function):
            @staticmethod
            def forward(ctx, *leaves):
                return tuple(v.clone() for v in outputs)

            @staticmethod
            def backward(ctx, *upstream):
                got = session.request("backward", graph=graph_id, upstream=list(upstream)).get("value")
                got = list(got) if isinstance(got, (tuple, list)) else []
                leaves = [t for _, _, t in grads]
                result = []
                for index, leaf in enumerate(leaves):
                    grad = got[index] if index < len(got) else None
                    ok = isinstance(grad, torch.Tensor) and grad.shape == leaf.shape and grad.is_floating_point()
                    result.append(grad.to(leaf.dtype) if ok else None)
                return tuple(result)

        leaves = [t for _, _, t in grads]
        result = _Remote.apply(*leaves)
        result = result if isinstance(result, tuple) else (result,)
        if isinstance(value, (tuple, list)):
            return type(value)(result) if isinstance(value, tuple) else list(result)
        return result[0]
