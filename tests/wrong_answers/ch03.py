"""Plausible wrong answers to chapter 3's coding exercises (see ``__init__.py`` for the rules)."""

from __future__ import annotations

from dataclasses import replace

from . import WrongAnswer

STABLE_SOFTMAX = [
    WrongAnswer("subtracts-row-mean", '''
def my_softmax(scores, dim=-1):
    shifted = scores - scores.mean(dim=dim, keepdim=True)
    exponentials = torch.exp(shifted)
    return exponentials / exponentials.sum(dim=dim, keepdim=True)
''', "only the maximum works"),
    WrongAnswer("subtracts-row-min", '''
def my_softmax(scores, dim=-1):
    shifted = scores - scores.amin(dim=dim, keepdim=True)
    exponentials = torch.exp(shifted)
    return exponentials / exponentials.sum(dim=dim, keepdim=True)
''', "only the maximum works"),
    WrongAnswer("naive-no-shift", '''
def my_softmax(scores, dim=-1):
    exponentials = torch.exp(scores)
    return exponentials / exponentials.sum(dim=dim, keepdim=True)
''', "Subtract each row's maximum"),
    WrongAnswer("whole-tensor-max", '''
def my_softmax(scores, dim=-1):
    exponentials = torch.exp(scores - scores.max())
    return exponentials / exponentials.sum(dim=dim, keepdim=True)
''', "maximum of the whole tensor"),
    WrongAnswer("log-softmax-exp", '''
def my_softmax(scores, dim=-1):
    return torch.log_softmax(scores, dim=dim).exp()
''', "ready-made softmax"),
    WrongAnswer("torch-special-softmax", '''
def my_softmax(scores, dim=-1):
    return torch.special.softmax(scores, dim)
''', "ready-made softmax"),
    WrongAnswer("functional-softmax", '''
import torch.nn.functional as F

def my_softmax(scores, dim=-1):
    return F.softmax(scores, dim=dim)
''', "ready-made softmax"),
    WrongAnswer("tensor-method-softmax", '''
def my_softmax(scores, dim=-1):
    return scores.softmax(dim)
''', "ready-made softmax"),
    WrongAnswer("logsumexp", '''
def my_softmax(scores, dim=-1):
    return torch.exp(scores - torch.logsumexp(scores, dim=dim, keepdim=True))
''', "ready-made softmax"),
    WrongAnswer("wrong-dim-hard-coded", '''
def my_softmax(scores, dim=-1):
    shifted = scores - scores.amax(dim=0, keepdim=True)
    exponentials = torch.exp(shifted)
    return exponentials / exponentials.sum(dim=0, keepdim=True)
''', "wrong softmax dim"),
    WrongAnswer("ignores-dim", '''
def my_softmax(scores, dim=-1):
    shifted = scores - scores.amax(dim=-1, keepdim=True)
    exponentials = torch.exp(shifted)
    return exponentials / exponentials.sum(dim=-1, keepdim=True)
''', "ignores its dim argument"),
    WrongAnswer("no-keepdim", '''
def my_softmax(scores, dim=-1):
    exponentials = torch.exp(scores - scores.amax(dim=dim))
    return exponentials / exponentials.sum(dim=dim)
''', "keepdim=True"),
    WrongAnswer("in-place-shift", '''
def my_softmax(scores, dim=-1):
    scores -= scores.amax(dim=dim, keepdim=True)
    exponentials = torch.exp(scores)
    return exponentials / exponentials.sum(dim=dim, keepdim=True)
''', "in place"),
    WrongAnswer("forgets-the-sum", '''
def my_softmax(scores, dim=-1):
    return torch.exp(scores - scores.amax(dim=dim, keepdim=True))
''', "forgot to divide by the sum"),
    WrongAnswer("divides-by-sum", '''
def my_softmax(scores, dim=-1):
    return scores / scores.sum(dim=dim, keepdim=True)
''', "divided the scores by their sum"),
    WrongAnswer("zeros", '''
def my_softmax(scores, dim=-1):
    return torch.zeros_like(scores)
''', "every weight is 0", non_attempt=True),
    WrongAnswer("input-unchanged", '''
def my_softmax(scores, dim=-1):
    return scores
''', "returned the scores unchanged", non_attempt=True),
    WrongAnswer("package-softmax", '''
from attention_book.scores import stable_softmax as my_softmax
''', "write your own", non_attempt=True),
]

SCALED_WEIGHTS = [
    WrongAnswer("missing-scale", '''
def scaled_weights(queries, keys):
    return torch.softmax(queries @ keys.T, dim=-1)
''', "missing scale"),
    WrongAnswer("divides-by-d_k", '''
def scaled_weights(queries, keys):
    return torch.softmax(queries @ keys.T / keys.shape[-1], dim=-1)
''', "you divided by d_k"),
    WrongAnswer("multiplies-by-sqrt", '''
def scaled_weights(queries, keys):
    return torch.softmax(queries @ keys.T * keys.shape[-1] ** 0.5, dim=-1)
''', "you multiplied by sqrt(d_k)"),
    WrongAnswer("wrong-dim", '''
def scaled_weights(queries, keys):
    return torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=0)
''', "wrong softmax dim"),
    WrongAnswer("transposed", '''
def scaled_weights(queries, keys):
    return torch.softmax(keys @ queries.T / keys.shape[-1] ** 0.5, dim=-1)
''', "transposed"),
    WrongAnswer("global-d_k", '''
d_k = 8

def scaled_weights(queries, keys):
    return torch.softmax(queries @ keys.T / d_k ** 0.5, dim=-1)
''', "read d_k from keys.shape[-1]"),
    WrongAnswer("chapter-d_k", '''
def scaled_weights(queries, keys):
    return torch.softmax(queries @ keys.T / 2 ** 0.5, dim=-1)
''', "read d_k from keys.shape[-1]"),
    WrongAnswer("number-of-tokens", '''
def scaled_weights(queries, keys):
    return torch.softmax(queries @ keys.T / keys.shape[0] ** 0.5, dim=-1)
''', "number of tokens"),
    WrongAnswer("naive-softmax-overflows", '''
def scaled_weights(queries, keys):
    exponentials = torch.exp(queries @ keys.T / keys.shape[-1] ** 0.5)
    return exponentials / exponentials.sum(dim=-1, keepdim=True)
''', "overflow"),
    WrongAnswer("no-softmax", '''
def scaled_weights(queries, keys):
    return queries @ keys.T / keys.shape[-1] ** 0.5
''', "no softmax"),
    WrongAnswer("zeros", '''
def scaled_weights(queries, keys):
    return torch.zeros(queries.shape[0], keys.shape[0])
''', "every weight is 0", non_attempt=True),
    WrongAnswer("package-function", '''
from attention_book.scores import scaled_attention_weights

def scaled_weights(queries, keys):
    return scaled_attention_weights(queries, keys)
''', "write your own", non_attempt=True),
]

TEMPERATURE = [
    WrongAnswer("multiplies", '''
def softmax_with_temperature(scores, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    return torch.softmax(scores * temperature, dim=-1)
''', "you multiplied by the temperature"),
    WrongAnswer("ignores-temperature", '''
def softmax_with_temperature(scores, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    return torch.softmax(scores, dim=-1)
''', "the temperature changes nothing"),
    WrongAnswer("no-validation", '''
def softmax_with_temperature(scores, temperature):
    return torch.softmax(scores / temperature, dim=-1)
''', "temperature=0.0 must raise ValueError"),
    WrongAnswer("only-zero-rejected", '''
def softmax_with_temperature(scores, temperature):
    if temperature == 0:
        raise ValueError("temperature must not be 0")
    return torch.softmax(scores / temperature, dim=-1)
''', "negative temperature"),
    WrongAnswer("assert-instead-of-valueerror", '''
def softmax_with_temperature(scores, temperature):
    assert temperature > 0, "temperature must be > 0"
    return torch.softmax(scores / temperature, dim=-1)
''', "raised AssertionError"),
    WrongAnswer("wrong-dim", '''
def softmax_with_temperature(scores, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    return torch.softmax(scores / temperature, dim=0)
''', "wrong softmax dim"),
    WrongAnswer("naive-overflows-when-cold", '''
def softmax_with_temperature(scores, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    exponentials = torch.exp(scores / temperature)
    return exponentials / exponentials.sum(dim=-1, keepdim=True)
''', "overflow"),
    WrongAnswer("divides-the-weights", '''
def softmax_with_temperature(scores, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    return torch.softmax(scores, dim=-1) / temperature
''', "divided the weights after the softmax"),
    WrongAnswer("zeros", '''
def softmax_with_temperature(scores, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    return torch.zeros_like(scores)
''', "every weight is 0", non_attempt=True),
    WrongAnswer("always-raises", '''
def softmax_with_temperature(scores, temperature):
    raise ValueError("temperature must be > 0")
''', "ValueError", non_attempt=True),
]

ATTEND = [
    WrongAnswer("too-soft", '''
def attending_projections(target, share):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = 1.0
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = torch.tensor(directions[target])
    return W_query, W_key
''', "too soft"),
    WrongAnswer("only-for-step", '''
def attending_projections(target, share):
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = 1.0
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 100.0 * torch.tensor([-1.0, 1.0, 0.0])
    return W_query, W_key
''', "same matrices for every target"),
    WrongAnswer("key-is-the-target-embedding", '''
def attending_projections(target, share):
    inputs = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                           [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = 1.0
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 100.0 * inputs[target]
    return W_query, W_key
''', "attend to another key first"),
    WrongAnswer("queries-of-mixed-sign", '''
def attending_projections(target, share):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = torch.tensor([1.0, -1.0, 0.0])
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 100.0 * torch.tensor(directions[target])
    return W_query, W_key
''', "attend to another key first"),
    WrongAnswer("nn-linear-layout", '''
def attending_projections(target, share):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    W_query = torch.zeros(2, 3)
    W_query[0, :] = 1.0
    W_key = torch.zeros(2, 3)
    W_key[0, :] = 100.0 * torch.tensor(directions[target])
    return W_query, W_key
''', "(d_in, d_k) = (3, d_k)"),
    WrongAnswer("overflowing-scale", '''
def attending_projections(target, share):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = 1e30
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 1e30 * torch.tensor(directions[target])
    return W_query, W_key
''', "nan"),
    WrongAnswer("swapped-pair", '''
def attending_projections(target, share):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = 1.0
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 100.0 * torch.tensor(directions[target])
    return W_key, W_query
''', "attend to another key first"),
    WrongAnswer("zeros", '''
def attending_projections(target, share):
    return torch.zeros(3, 2), torch.zeros(3, 2)
''', "too soft", non_attempt=True),
]


SOFT_CAP = [
    WrongAnswer("no-division", '''
def cap_scores(scores, cap):
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    return cap * torch.tanh(scores)
''', "inside tanh"),
    WrongAnswer("no-multiplication", '''
def cap_scores(scores, cap):
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    return torch.tanh(scores / cap)
''', "multiply by the cap"),
    WrongAnswer("hard-clamp", '''
def cap_scores(scores, cap):
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    return torch.clamp(scores, -cap, cap)
''', "hard clamp"),
    WrongAnswer("no-tanh", '''
def cap_scores(scores, cap):
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    return scores / cap
''', "tanh is missing"),
    WrongAnswer("multiplies-inside", '''
def cap_scores(scores, cap):
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    return cap * torch.tanh(scores * cap)
''', "do not multiply them"),
    WrongAnswer("in-place", '''
def cap_scores(scores, cap):
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    return scores.div_(cap).tanh_().mul_(cap)
''', "in place"),
    WrongAnswer("no-check-of-the-cap", '''
def cap_scores(scores, cap):
    return cap * torch.tanh(scores / cap)
''', "must raise ValueError"),
    WrongAnswer("the-package", '''
from attention_book.scores import soft_cap

def cap_scores(scores, cap):
    return soft_cap(scores, cap)
''', "write your own", non_attempt=True),
    WrongAnswer("input-unchanged", '''
def cap_scores(scores, cap):
    if cap <= 0:
        raise ValueError(f"cap must be > 0, got {cap}")
    return scores
''', "came back unchanged", non_attempt=True),
]

WRONG_ANSWERS = {
    "ex-03-stable-softmax": STABLE_SOFTMAX,
    "ex-03-scaled-weights": SCALED_WEIGHTS,
    "ex-03-temperature": TEMPERATURE,
    "ex-03-attend": ATTEND,
    "ex-03-soft-cap": SOFT_CAP,
}


def _with_torch(answers):
    # an answer cell runs after the chapter's setup cell, which imports torch
    return [replace(answer, code="import torch\n" + answer.code.lstrip("\n")) for answer in answers]


WRONG_ANSWERS = {label: _with_torch(answers) for label, answers in WRONG_ANSWERS.items()}


# ---------------------------------------------------------------- ex-03-find-the-bug-axis
_AXIS = ("import math\n\n\ndef attention_weights(queries, keys):\n"
         "    # (..., T_q, d_k), (..., T_k, d_k) -> (..., T_q, T_k), rows sum to 1\n")
_SCORES = "    scores = queries @ keys.transpose(-2, -1) / math.sqrt(keys.shape[-1])\n"
WEIGHTS_AXIS = [
    WrongAnswer("the-given-bug-dim-1", _AXIS + _SCORES + "    return torch.softmax(scores, dim=1)\n",
                "softmax over the wrong axis"),
    WrongAnswer("dim-0", _AXIS + _SCORES + "    return torch.softmax(scores, dim=0)\n", "softmax over the wrong axis"),
    WrongAnswer("dim-minus-2", _AXIS + _SCORES + "    return torch.softmax(scores, dim=-2)\n",
                "softmax over the wrong axis"),
    WrongAnswer("not-scaled", _AXIS + "    return torch.softmax(queries @ keys.mT, dim=-1)\n",
                "the scores are not scaled"),
    WrongAnswer("scaled-by-d_k", _AXIS + "    scores = queries @ keys.mT / keys.shape[-1]\n"
                "    return torch.softmax(scores, dim=-1)\n", "the scale is 1 / sqrt(d_k)"),
    WrongAnswer("scaled-after-softmax", _AXIS + "    weights = torch.softmax(queries @ keys.mT, dim=-1)\n"
                "    return weights / math.sqrt(keys.shape[-1])\n", "scale the scores before the softmax"),
    WrongAnswer("normalised-by-sum", _AXIS + _SCORES + "    return scores / scores.sum(dim=-1, keepdim=True)\n",
                "differ from softmax"),
    WrongAnswer("uniform-non-attempt", _AXIS + "    T_k = keys.shape[-2]\n"
                "    return torch.full((*queries.shape[:-1], T_k), 1.0 / T_k)\n",
                "differ from softmax", non_attempt=True),
]
WRONG_ANSWERS["ex-03-find-the-bug-axis"] = _with_torch(WEIGHTS_AXIS)
CORRECT_ANSWERS = {"ex-03-find-the-bug-axis": {
    "method-softmax": "import torch\n\n\ndef attention_weights(queries, keys):\n"
                      "    return (queries @ keys.mT * keys.shape[-1] ** -0.5).softmax(-1)\n",
    "last-axis-by-ndim": "import torch\nimport torch.nn.functional as F\n\n\ndef attention_weights(queries, keys):\n"
                         "    scores = torch.matmul(queries, keys.transpose(-1, -2)) / keys.size(-1) ** 0.5\n"
                         "    return F.softmax(scores, dim=scores.ndim - 1)\n",
    "by-hand-exp": "import torch\n\n\ndef attention_weights(queries, keys):\n"
                   "    s = torch.einsum('...qd,...kd->...qk', queries, keys) / keys.shape[-1] ** 0.5\n"
                   "    e = (s - s.amax(dim=-1, keepdim=True)).exp()\n"
                   "    return e / e.sum(dim=-1, keepdim=True)\n",
}}
