"""Plausible wrong answers to chapter 4's coding exercises (see ``__init__.py`` for the rules)."""

from __future__ import annotations

from dataclasses import replace

from . import WrongAnswer

CONTEXT_VECTORS = [
    WrongAnswer("wrong-softmax-dim", '''
def context_vectors(queries, keys, values):
    scores = queries @ keys.transpose(-2, -1)
    return torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-2) @ values
''', "wrong softmax dim"),
    WrongAnswer("missing-scale", '''
def context_vectors(queries, keys, values):
    return torch.softmax(queries @ keys.transpose(-2, -1), dim=-1) @ values
''', "missing scale"),
    WrongAnswer("divides-by-d_k", '''
def context_vectors(queries, keys, values):
    scores = queries @ keys.transpose(-2, -1)
    return torch.softmax(scores / keys.shape[-1], dim=-1) @ values
''', "square root"),
    WrongAnswer("scales-by-d_v", '''
def context_vectors(queries, keys, values):
    scores = queries @ keys.transpose(-2, -1)
    return torch.softmax(scores / values.shape[-1] ** 0.5, dim=-1) @ values
''', "sqrt(d_v)"),
    WrongAnswer("global-d_k", '''
d_k = 2

def context_vectors(queries, keys, values):
    scores = queries @ keys.transpose(-2, -1)
    return torch.softmax(scores / d_k ** 0.5, dim=-1) @ values
''', "read d_k from keys.shape[-1]"),
    WrongAnswer("transposed-scores", '''
def context_vectors(queries, keys, values):
    scores = keys @ queries.transpose(-2, -1)
    return torch.softmax(scores / keys.shape[-1] ** 0.5, dim=-1) @ values
''', "transposed product"),
    WrongAnswer("transposed-weights", '''
def context_vectors(queries, keys, values):
    weights = torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-1)
    return weights.transpose(-2, -1) @ values
''', "weights @ values"),
    WrongAnswer("dot-T-breaks-batches", '''
def context_vectors(queries, keys, values):
    return torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1) @ values
''', "keys.transpose(-2, -1)"),
    WrongAnswer("returns-a-tuple", '''
def context_vectors(queries, keys, values):
    weights = torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-1)
    return weights @ values, weights
''', "not a tuple"),
    WrongAnswer("returns-the-weights", '''
def context_vectors(queries, keys, values):
    return torch.softmax(queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5, dim=-1)
''', "multiply the (T, T) weights by the values"),
    WrongAnswer("no-softmax", '''
def context_vectors(queries, keys, values):
    return (queries @ keys.transpose(-2, -1) / keys.shape[-1] ** 0.5) @ values
''', "no softmax"),
    WrongAnswer("zeros", '''
def context_vectors(queries, keys, values):
    return torch.zeros_like(values)
''', "every entry is 0", non_attempt=True),
    WrongAnswer("values-unchanged", '''
def context_vectors(queries, keys, values):
    return values
''', "values unchanged", non_attempt=True),
    WrongAnswer("package-function", '''
from attention_book.functional import scaled_dot_product_attention

def context_vectors(queries, keys, values):
    return scaled_dot_product_attention(queries, keys, values)[0]
''', "write your own", non_attempt=True),
]

COPY_WEIGHTS = [
    WrongAnswer("not-transposed", '''
def copy_into_linear(params_version, linear_version):
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            getattr(linear_version, name).weight.copy_(getattr(params_version, name))
''', "weights not transposed"),
    WrongAnswer("transposed-only-when-needed", '''
def copy_into_linear(params_version, linear_version):
    with torch.no_grad():
        for name in ("W_query", "W_key", "W_value"):
            matrix = getattr(params_version, name)
            weight = getattr(linear_version, name).weight
            weight.copy_(matrix if matrix.shape == weight.shape else matrix.T)
''', "weights not transposed"),
    WrongAnswer("no-no-grad", '''
def copy_into_linear(params_version, linear_version):
    for name in ("W_query", "W_key", "W_value"):
        getattr(linear_version, name).weight.copy_(getattr(params_version, name).T)
''', "torch.no_grad()"),
    WrongAnswer("assigns-a-plain-tensor", '''
def copy_into_linear(params_version, linear_version):
    for name in ("W_query", "W_key", "W_value"):
        getattr(linear_version, name).weight = getattr(params_version, name).T
''', "only be replaced by an nn.Parameter"),
    WrongAnswer("shares-memory", '''
def copy_into_linear(params_version, linear_version):
    for name in ("W_query", "W_key", "W_value"):
        matrix = getattr(params_version, name)
        getattr(linear_version, name).weight = torch.nn.Parameter(matrix.T)
''', "share memory"),
    WrongAnswer("swapped-query-and-key", '''
def copy_into_linear(params_version, linear_version):
    with torch.no_grad():
        linear_version.W_query.weight.copy_(params_version.W_key.T)
        linear_version.W_key.weight.copy_(params_version.W_query.T)
        linear_version.W_value.weight.copy_(params_version.W_value.T)
''', "W_query of the nn.Linear version holds W_key"),
    WrongAnswer("forgets-the-values", '''
def copy_into_linear(params_version, linear_version):
    with torch.no_grad():
        for name in ("W_query", "W_key"):
            getattr(linear_version, name).weight.copy_(getattr(params_version, name).T)
''', "copy all three"),
    WrongAnswer("does-nothing", '''
def copy_into_linear(params_version, linear_version):
    pass
''', "nothing was copied", non_attempt=True),
    WrongAnswer("package-function", '''
from attention_book.attention import copy_weights as copy_into_linear
''', "write your own", non_attempt=True),
]

PERMUTATION = [
    WrongAnswer("always-true", '''
def is_permutation_equivariant(module, x, permutation):
    return True
''', "your function says True", non_attempt=True),
    WrongAnswer("always-false", '''
def is_permutation_equivariant(module, x, permutation):
    return False
''', "your function says False", non_attempt=True),
    WrongAnswer("outputs-not-shuffled", '''
def is_permutation_equivariant(module, x, permutation):
    with torch.no_grad():
        return torch.allclose(module(x[permutation]), module(x), atol=1e-5)
''', "shuffle the outputs the same way"),
    WrongAnswer("inverse-permutation", '''
def is_permutation_equivariant(module, x, permutation):
    inverse = torch.argsort(permutation)
    with torch.no_grad():
        return torch.allclose(module(x[permutation]), module(x)[inverse], atol=1e-5)
''', "inverse permutation"),
    WrongAnswer("exact-comparison", '''
def is_permutation_equivariant(module, x, permutation):
    with torch.no_grad():
        return torch.equal(module(x[permutation]), module(x)[permutation])
''', "torch.allclose"),
    WrongAnswer("elementwise-not-reduced", '''
def is_permutation_equivariant(module, x, permutation):
    with torch.no_grad():
        return (module(x[permutation]) - module(x)[permutation]).abs() < 1e-5
''', "return one True or False"),
    WrongAnswer("compares-the-inputs", '''
def is_permutation_equivariant(module, x, permutation):
    return torch.allclose(x[permutation].sum(dim=0), x.sum(dim=0), atol=1e-5)
''', "your function says True"),
    WrongAnswer("shuffles-x-in-place", '''
def is_permutation_equivariant(module, x, permutation):
    with torch.no_grad():
        expected = module(x)[permutation]
        x[:] = x[permutation]
        return torch.allclose(module(x), expected, atol=1e-5)
''', "changed x"),
]

WRONG_ANSWERS = {
    "ex-04-context-vectors": CONTEXT_VECTORS,
    "ex-04-copy-weights": COPY_WEIGHTS,
    "ex-04-permutation": PERMUTATION,
}


def _with_torch(answers):
    # an answer cell runs after the chapter's setup cell, which imports torch
    return [replace(answer, code="import torch\n" + answer.code.lstrip("\n")) for answer in answers]


WRONG_ANSWERS = {label: _with_torch(answers) for label, answers in WRONG_ANSWERS.items()}
