"""Hidden tests of chapter 4 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test, randn, same


def _reference(queries, keys, values):
    scores = queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5
    return torch.softmax(scores, dim=-1) @ values


def _context(context_vectors, *args):
    result = context_vectors(*args)
    if isinstance(result, tuple):
        raise Hint("return only the context vectors (one tensor), not a tuple")
    if not isinstance(result, torch.Tensor):
        raise Hint(f"context_vectors must return a torch.Tensor, got {type(result).__name__}")
    return result


# ---------------------------------------------------------------- ex-04-context-vectors


@hidden_test("ex-04-context-vectors", "main values: a (2, 5, 4) batch, d_v 3")
def context_main(student, reference):
    args = (randn(2, 5, 4, seed=11), randn(2, 5, 4, seed=12), randn(2, 5, 3, seed=13))
    same(student.call("context_vectors", *args), reference.call("context_vectors", *args),
         "context_vectors(queries, keys, values)", hint="softmax(Q K^T / sqrt(d_k), dim=-1) @ V")


@hidden_test("ex-04-context-vectors", "one token (T = 1): the context vector is its value", guard=True)
def context_single_token(ns):
    context_vectors = answer(ns, "context_vectors")
    cases = [((1, 3), (1, 3), (1, 2)), ((4, 1, 3), (4, 1, 3), (4, 1, 5))]
    for q_shape, k_shape, v_shape in cases:
        queries, keys, values = randn(*q_shape, seed=1), randn(*k_shape, seed=2), randn(*v_shape, seed=3)
        result = _context(context_vectors, queries, keys, values).detach()
        if tuple(result.shape) != v_shape:
            raise Hint(f"for queries {q_shape} and values {v_shape} the context vectors must have shape "
                       f"{v_shape}, got {tuple(result.shape)}: keep every dimension (no .squeeze())")
        if not torch.allclose(result, values, atol=1e-5):
            raise Hint("with one token its only weight is 1, so its context vector must equal its value "
                       "vector; check the softmax dimension (dim=-1)")


VALUES_FIRST = ("not checked until the values are right: {what} differ from the right answer's, "
                "so their gradients cannot match yet (the other tests say what is wrong)")


@hidden_test("ex-04-context-vectors", "gradients reach queries, keys and values")
def context_gradients(ns):
    context_vectors = answer(ns, "context_vectors")
    tensors = [randn(2, 4, 3, seed=4), randn(2, 4, 3, seed=5), randn(2, 4, 2, seed=6)]
    mine = [t.clone().requires_grad_(True) for t in tensors]
    reference = [t.clone().requires_grad_(True) for t in tensors]
    upstream = randn(2, 4, 2, seed=7)
    result = _context(context_vectors, *mine)
    if result.grad_fn is None:
        raise Hint("the context vectors are cut off from their inputs (no grad_fn): keep it a torch "
                   "computation, without .detach(), .numpy() or torch.tensor(...)")
    expected = _reference(*tensors)
    if result.shape != expected.shape or not torch.allclose(result.detach(), expected, atol=1e-5):
        raise Hint(VALUES_FIRST.format(what="the context vectors"))
    (result * upstream).sum().backward()
    (_reference(*reference) * upstream).sum().backward()
    for name, got, want in zip(("queries", "keys", "values"), mine, reference):
        if got.grad is None or not torch.allclose(got.grad, want.grad, atol=1e-5):
            raise Hint(f"the gradient with respect to the {name} is missing or wrong: compute "
                       "softmax(Q K^T / sqrt(d_k)) @ V from the given tensors with differentiable operations")


@hidden_test("ex-04-context-vectors", "float64 batch of other sizes stays float64")
def context_float64(ns):
    context_vectors = answer(ns, "context_vectors")
    queries = randn(3, 6, 5, seed=8, dtype=torch.float64)
    keys = randn(3, 6, 5, seed=9, dtype=torch.float64)
    values = randn(3, 6, 7, seed=10, dtype=torch.float64)
    result = _context(context_vectors, queries, keys, values).detach()
    if tuple(result.shape) != (3, 6, 7):
        raise Hint(f"queries (3, 6, 5) and values (3, 6, 7) must give context vectors (3, 6, 7), got "
                   f"{tuple(result.shape)}")
    if result.dtype != torch.float64:
        raise Hint(f"float64 inputs must give float64 context vectors, got {result.dtype}: do not convert "
                   "the dtype or build new tensors")
    if not torch.allclose(result, _reference(queries, keys, values), atol=1e-10):
        raise Hint("for a (3, 6, 5) batch with d_v = 7 the context vectors differ from "
                   "softmax(Q K^T / sqrt(d_k)) @ V: scale by keys.shape[-1] ** 0.5, softmax over dim=-1")


# ---------------------------------------------------------------- ex-04-copy-weights


@hidden_test("ex-04-copy-weights", "copies from params_version into linear_version, not back")
def copy_direction(student, reference):
    before, after, copied, _, _ = student.probe("ch04.copy-weights", seed=11, d_in=4, d_kq=3, d_v=2, dtype=torch.float32,
                                              inputs=randn(2, 3, 4, seed=14))
    for name, matrix in before.items():
        if not torch.equal(after[name], matrix):
            raise Hint(f"params_version.{name} changed: copy from the version-1 module (params_version) "
                       "into the nn.Linear layers of linear_version, e.g. "
                       f"linear_version.{name}.weight.copy_(params_version.{name}.T); never the other way")
        if not torch.allclose(copied[name], matrix.T):
            raise Hint(f"linear_version.{name}.weight should hold params_version.{name}.T after the copy")

@hidden_test("ex-04-copy-weights", "float64 modules: an exact copy that keeps the dtype")
def copy_float64(student, reference):
    inputs = randn(2, 3, 5, seed=13, dtype=torch.float64)
    before, _, copied, out, _ = student.probe("ch04.copy-weights", seed=12, d_in=5, d_kq=2, d_v=1, dtype=torch.float64,
                                            inputs=inputs)
    for name in ("W_query", "W_key", "W_value"):
        weight = copied[name]
        if weight.dtype != torch.float64:
            raise Hint(f"{name}.weight became {weight.dtype} although both modules are float64: copy the "
                       "values into the existing weight with .copy_(...) inside torch.no_grad() instead "
                       "of building a new tensor (torch.tensor(...) or .float() change the dtype)")
        if not torch.equal(weight, before[name].T):
            raise Hint(f"{name}.weight is not an exact copy of {name}.T in float64 (d_in=5, d_k=2, d_v=1): "
                       "copy the tensor itself, not a rounded or converted version")
    _, _, _, want, _ = reference.probe("ch04.copy-weights", seed=12, d_in=5, d_kq=2, d_v=1, dtype=torch.float64, inputs=inputs)
    if not torch.allclose(out, want, atol=1e-12):
        raise Hint("after the copy the two float64 modules return different context vectors")



# ---------------------------------------------------------------- ex-04-permutation

PERMUTATION_NAMES = ("a Linear layer", "self-attention without positions", "self-attention with position vectors",
                     "a running mean over the tokens", "the identity")


def _permutation(student, reference, seed, T, d):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(T, d, generator=generator)
    permutation = torch.randperm(T, generator=generator)
    got, unchanged = student.probe("ch04.permutation", seed=seed, x=x, permutation=permutation)
    want, _ = reference.probe("ch04.permutation", seed=seed, x=x, permutation=permutation)
    for name, value, expected in zip(PERMUTATION_NAMES, got, want):
        if not isinstance(value, bool):
            raise Hint(f"is_permutation_equivariant should return True or False, got {value}")
        if value != expected:
            raise Hint(f"for {name} (T={T}) you return {value}, the right answer is {expected}: compare "
                       "module(x[permutation]) with module(x)[permutation] using torch.allclose")
    return unchanged


@hidden_test("ex-04-permutation", "five modules, other sizes (T = 7, d_in = 5)")
def permutation_modules(student, reference):
    _permutation(student, reference, seed=21, T=7, d=5)


@hidden_test("ex-04-permutation", "two tokens swapped (T = 2)")
def permutation_two(student, reference):
    _permutation(student, reference, seed=22, T=2, d=3)


@hidden_test("ex-04-permutation", "x is left unchanged", guard=True)
def permutation_input_unchanged(student, reference):
    if not _permutation(student, reference, seed=23, T=4, d=3):
        raise Hint("your function changed x: shuffle a copy (x[permutation] makes a new tensor)")
