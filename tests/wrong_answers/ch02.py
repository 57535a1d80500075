"""Plausible wrong answers to chapter 2's coding exercises (see ``__init__.py`` for the rules)."""

from __future__ import annotations

from dataclasses import replace

from . import WrongAnswer

SCORE_LOOP = [
    WrongAnswer("transposed", '''
def scores_by_loop(queries, keys):
    scores = torch.empty(keys.shape[0], queries.shape[0])
    for i, query in enumerate(queries):
        for j, key in enumerate(keys):
            scores[j, i] = torch.dot(query, key)
    return scores
''', "transposed"),
    WrongAnswer("queries-twice", '''
def scores_by_loop(queries, keys):
    scores = torch.empty(queries.shape[0], queries.shape[0])
    for i in range(queries.shape[0]):
        for j in range(queries.shape[0]):
            scores[i, j] = torch.dot(queries[i], queries[j])
    return scores
''', "(3, 5) matrix"),
    WrongAnswer("inner-loop-over-queries", '''
def scores_by_loop(queries, keys):
    scores = torch.zeros(queries.shape[0], keys.shape[0])
    for i in range(queries.shape[0]):
        for j in range(queries.shape[0]):
            scores[i, j] = torch.dot(queries[i], keys[j])
    return scores
''', "loop j over all the keys"),
    WrongAnswer("products-not-summed", '''
def scores_by_loop(queries, keys):
    scores = torch.empty(queries.shape[0], keys.shape[0])
    for i in range(queries.shape[0]):
        for j in range(keys.shape[0]):
            scores[i, j] = queries[i] * keys[j]
    return scores
''', "sum the products"),
    WrongAnswer("hard-coded-sizes", '''
def scores_by_loop(queries, keys):
    scores = torch.empty(3, 5)
    for i in range(3):
        for j in range(5):
            scores[i, j] = torch.dot(queries[i], keys[j])
    return scores
''', "do not hard-code the sizes"),
    WrongAnswer("matrix-product", '''
def scores_by_loop(queries, keys):
    return queries @ keys.T
''', "two loops"),
    WrongAnswer("one-loop", '''
def scores_by_loop(queries, keys):
    return torch.stack([keys @ query for query in queries])
''', "two loops"),
    WrongAnswer("zeros", '''
def scores_by_loop(queries, keys):
    return torch.zeros(queries.shape[0], keys.shape[0])
''', "every score is 0", non_attempt=True),
]

PROJECTED_SCORES = [
    WrongAnswer("transposed-product", '''
def projected_scores(inputs, W_query, W_key):
    return (inputs @ W_key) @ (inputs @ W_query).T
''', "transposed (keys @ queries.T)"),
    WrongAnswer("no-projection", '''
def projected_scores(inputs, W_query, W_key):
    return inputs @ inputs.T
''', "first project them with W_query and W_key"),
    WrongAnswer("query-weights-twice", '''
def projected_scores(inputs, W_query, W_key):
    queries = inputs @ W_query
    return queries @ queries.T
''', "you used W_query for the keys too"),
    WrongAnswer("nn-linear-habit", '''
def projected_scores(inputs, W_query, W_key):
    return (inputs @ W_query.T) @ (inputs @ W_key.T).T
''', "inputs @ W_query"),
    WrongAnswer("already-softmaxed", '''
def projected_scores(inputs, W_query, W_key):
    scores = (inputs @ W_query) @ (inputs @ W_key).T
    return torch.softmax(scores / W_key.shape[-1] ** 0.5, dim=-1)
''', "scaling and softmax come in chapter 3"),
    WrongAnswer("detached", '''
def projected_scores(inputs, W_query, W_key):
    return ((inputs @ W_query) @ (inputs @ W_key).T).detach()
''', "no grad_fn"),
    WrongAnswer("hard-coded-size", '''
def projected_scores(inputs, W_query, W_key):
    if inputs.shape[0] != 5:
        return torch.zeros(5, 5)
    return (inputs @ W_query) @ (inputs @ W_key).T
''', "do not hard-code any size"),
    WrongAnswer("zeros", '''
def projected_scores(inputs, W_query, W_key):
    return torch.zeros(inputs.shape[0], inputs.shape[0])
''', "every score is 0", non_attempt=True),
    WrongAnswer("package-function", '''
from attention_book.scores import attention_scores

def projected_scores(inputs, W_query, W_key):
    return attention_scores(inputs @ W_query, inputs @ W_key)
''', "write your own", non_attempt=True),
]

POINT_AT = [
    WrongAnswer("only-for-step", '''
def pointing_projections(target):
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = 1.0
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 10.0 * torch.tensor([-1.0, 1.0, 0.0])
    return W_query, W_key
''', "same matrices for every target"),
    WrongAnswer("key-is-the-target-embedding", '''
def pointing_projections(target):
    inputs = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                           [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = 1.0
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 10.0 * inputs[target]
    return W_query, W_key
''', "score another key highest"),
    WrongAnswer("margin-too-small", '''
def pointing_projections(target):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = 0.1
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 0.1 * torch.tensor(directions[target])
    return W_query, W_key
''', "margin"),
    WrongAnswer("queries-of-mixed-sign", '''
def pointing_projections(target):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = torch.tensor([1.0, -1.0, 0.0])
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 10.0 * torch.tensor(directions[target])
    return W_query, W_key
''', "score another key highest"),
    WrongAnswer("nn-linear-layout", '''
def pointing_projections(target):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    W_query = torch.zeros(2, 3)
    W_query[0, :] = 1.0
    W_key = torch.zeros(2, 3)
    W_key[0, :] = 10.0 * torch.tensor(directions[target])
    return W_query, W_key
''', "(d_in, d_k) = (3, d_k)"),
    WrongAnswer("swapped-pair", '''
def pointing_projections(target):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    W_query = torch.zeros(3, 2)
    W_query[:, 0] = 1.0
    W_key = torch.zeros(3, 2)
    W_key[:, 0] = 10.0 * torch.tensor(directions[target])
    return W_key, W_query
''', "score another key highest"),
    WrongAnswer("lists-not-tensors", '''
def pointing_projections(target):
    directions = {0: [0.0, 0.0, 1.0], 4: [1.0, 0.0, 0.0], 5: [-1.0, 1.0, 0.0]}
    return [[1.0, 0.0]] * 3, [[10.0 * d, 0.0] for d in directions[target]]
''', "must be a torch.Tensor"),
    WrongAnswer("zeros", '''
def pointing_projections(target):
    return torch.zeros(3, 2), torch.zeros(3, 2)
''', "margin", non_attempt=True),
]


ADDITIVE = [
    WrongAnswer("transposed", '''
def additive_attention_scores(queries, keys, W_query, W_key, v):
    hidden = torch.tanh((keys @ W_key)[:, None, :] + (queries @ W_query)[None, :, :])
    return hidden @ v
''', "transposed"),
    WrongAnswer("no-tanh", '''
def additive_attention_scores(queries, keys, W_query, W_key, v):
    return ((queries @ W_query)[:, None, :] + (keys @ W_key)[None, :, :]) @ v
''', "tanh is missing"),
    WrongAnswer("tanh-after-v", '''
def additive_attention_scores(queries, keys, W_query, W_key, v):
    return torch.tanh(((queries @ W_query)[:, None, :] + (keys @ W_key)[None, :, :]) @ v)
''', "before v"),
    WrongAnswer("relu", '''
def additive_attention_scores(queries, keys, W_query, W_key, v):
    return torch.relu((queries @ W_query)[:, None, :] + (keys @ W_key)[None, :, :]) @ v
''', "you used relu"),
    WrongAnswer("sum-instead-of-v", '''
def additive_attention_scores(queries, keys, W_query, W_key, v):
    return torch.tanh((queries @ W_query)[:, None, :] + (keys @ W_key)[None, :, :]).sum(dim=-1)
''', "without v"),
    WrongAnswer("dot-product", '''
def additive_attention_scores(queries, keys, W_query, W_key, v):
    return (queries @ W_query) @ (keys @ W_key).T
''', "dot product of the projections"),
    WrongAnswer("weights-swapped", '''
def additive_attention_scores(queries, keys, W_query, W_key, v):
    return torch.tanh((queries @ W_key)[:, None, :] + (keys @ W_query)[None, :, :]) @ v
''', "through W_query"),
    WrongAnswer("no-broadcasting", '''
def additive_attention_scores(queries, keys, W_query, W_key, v):
    return torch.tanh(queries @ W_query + keys @ W_key) @ v
''', "a hidden vector for every pair"),
    WrongAnswer("the-package", '''
from attention_book.scores import additive_scores

def additive_attention_scores(queries, keys, W_query, W_key, v):
    return additive_scores(queries, keys, W_query, W_key, v)
''', "write your own", non_attempt=True),
    WrongAnswer("zeros", '''
def additive_attention_scores(queries, keys, W_query, W_key, v):
    return torch.zeros(queries.shape[0], keys.shape[0])
''', "every score is 0", non_attempt=True),
]

WRONG_ANSWERS = {
    "ex-02-score-loop": SCORE_LOOP,
    "ex-02-projected-scores": PROJECTED_SCORES,
    "ex-02-point-at": POINT_AT,
    "ex-02-additive-scores": ADDITIVE,
}


def _with_torch(answers):
    # an answer cell runs after the chapter's setup cell, which imports torch
    return [replace(answer, code="import torch\n" + answer.code.lstrip("\n")) for answer in answers]


WRONG_ANSWERS = {label: _with_torch(answers) for label, answers in WRONG_ANSWERS.items()}


# ---------------------------------------------------------------- ex-02-find-the-bug-batch
_BATCH = "def batch_scores(queries, keys):\n    # (..., T_q, d_k), (..., T_k, d_k) -> (..., T_q, T_k)\n"

BATCH_SCORES = [
    WrongAnswer("the-given-bug-dot-T", _BATCH + "    return queries @ keys.T\n", "reverses *every* dimension"),
    WrongAnswer("transpose-0-1", _BATCH + "    return queries @ keys.transpose(0, 1)\n",
                "transpose the last two dimensions"),
    WrongAnswer("permute-3d-only", _BATCH + "    return queries @ keys.permute(0, 2, 1)\n",
                "transpose the last two dimensions"),
    WrongAnswer("bmm-3d-only", _BATCH + "    return torch.bmm(queries, keys.transpose(1, 2))\n",
                "transpose the last two dimensions"),
    WrongAnswer("einsum-3d-only", _BATCH + '    return torch.einsum("bid,bjd->bij", queries, keys)\n',
                "transpose the last two dimensions"),
    WrongAnswer("scores-transposed", _BATCH + "    return keys @ queries.mT\n", "your scores are transposed"),
    WrongAnswer("scaled", _BATCH + "    return queries @ keys.mT / queries.shape[-1] ** 0.5\n",
                "do not divide by sqrt(d_k)"),
    WrongAnswer("zeros-non-attempt",
                _BATCH + "    return torch.zeros(*queries.shape[:-1], keys.shape[-2])\n",
                "must be queries[b, i] . keys[b, j]", non_attempt=True),
]
BATCH_SCORES_CORRECT = {
    "mT": _BATCH + "    return queries @ keys.mT\n",
    "einsum-ellipsis": _BATCH + '    return torch.einsum("...id,...jd->...ij", queries, keys)\n',
    "swapaxes-matmul": _BATCH + "    keys_t = keys.swapaxes(-1, -2)  # the last two only\n"
                                "    return torch.matmul(queries, keys_t)\n",
}
WRONG_ANSWERS["ex-02-find-the-bug-batch"] = _with_torch(BATCH_SCORES)
CORRECT_ANSWERS = {"ex-02-find-the-bug-batch": {name: "import torch\n" + code
                                                for name, code in BATCH_SCORES_CORRECT.items()}}
