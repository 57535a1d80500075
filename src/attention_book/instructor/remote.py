"""Hidden tests written as functions of the student's namespace: ``answer(ns, "f")(x)``.

``ns`` is a :class:`RemoteNamespace` over a :class:`~.hidden.Session`: ``ns["f"]`` is a
:class:`RemoteFunction` that calls ``f`` in the kernel with data arguments and returns data. Tensor
arguments changed in place in the kernel are changed here too, and results of arguments with
``requires_grad`` carry gradients back (a ``torch.autograd.Function`` whose backward asks the
kernel), so tests of the form "call, compare, ``.backward()``, compare the gradients" work unchanged.
"""

from __future__ import annotations

import itertools

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
    """Calls the student's function in the kernel. Tensor arguments changed in place there are
    changed here too (so "input unchanged" tests work); a result that depends on arguments with
    ``requires_grad`` carries gradients back from the kernel (``.backward()`` works)."""

    def __init__(self, session: Session, name: str):
        self.session, self.name = session, name

    def __call__(self, *args, **kwargs):
        import torch

        grads = [(kind, key, t) for kind, key, t in _tensors(args, kwargs) if t.requires_grad]
        plain_args = tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)
        plain_kwargs = {k: (v.detach() if isinstance(v, torch.Tensor) else v) for k, v in kwargs.items()}
        if grads:
            return self._with_grad(plain_args, plain_kwargs, grads)
        value, after_args, after_kwargs = self.session.run(
            f"__r = {self.name}(*__args, **__kwargs)\n(__r, __args, __kwargs)",
            __args=plain_args, __kwargs=plain_kwargs)
        for kind, key, tensor in _tensors(args, kwargs):  # mirror in-place changes
            after = after_args[key] if kind == "a" else after_kwargs.get(key)
            if isinstance(after, torch.Tensor) and after.shape == tensor.shape and after.dtype == tensor.dtype:
                if not torch.equal(after, tensor):
                    with torch.no_grad():
                        tensor.copy_(after)
        return value

    def _with_grad(self, args, kwargs, grads):
        import torch

        positions = [key for kind, key, _ in grads if kind == "a"]
        names = [key for kind, key, _ in grads if kind == "k"]
        graph_id = f"g{id(self)}-{len(positions)}-{len(names)}-{next(_COUNTER)}"
        value = self.session.run(
            f"__a = list(__args)\n"
            f"for __i in __gp: __a[__i] = __a[__i].detach().requires_grad_(True)\n"
            f"for __k in __gk: __kwargs[__k] = __kwargs[__k].detach().requires_grad_(True)\n"
            f"__out = {self.name}(*__a, **__kwargs)\n"
            f"__graphs[__id] = (__out, [__a[i] for i in __gp] + [__kwargs[k] for k in __gk])\n"
            f"__out", __args=args, __kwargs=kwargs, __gp=positions, __gk=names, __id=graph_id)
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
                got = session.run(
                    "__o, __l = __graphs.pop(__id)\n"
                    "__outs = list(__o) if isinstance(__o, (tuple, list)) else [__o]\n"
                    "__pairs = [(o, g) for o, g in zip(__outs, __up) if g is not None and o.requires_grad]\n"
                    "(tuple(__torch.autograd.grad([o for o, _ in __pairs], __l, [g for _, g in __pairs], "
                    "allow_unused=True)) if __pairs else tuple(None for _ in __l))",
                    __id=graph_id, __up=list(upstream))
                return tuple(g if isinstance(g, torch.Tensor) else None for g in got)

        leaves = [t for _, _, t in grads]
        result = _Remote.apply(*leaves)
        result = result if isinstance(result, tuple) else (result,)
        if isinstance(value, (tuple, list)):
            return type(value)(result) if isinstance(value, tuple) else list(result)
        return result[0]


