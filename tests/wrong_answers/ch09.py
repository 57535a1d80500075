"""Plausible wrong answers to the coding exercises of chapter 9 (a GPT that writes)."""

from . import WrongAnswer

_IMPORTS = "import torch\nfrom torch import nn\n"


# ---------------------------------------------------------------- ex-09-block


def _block(body: str) -> str:
    return _IMPORTS + "\n\ndef prenorm_block(x, ln_1, attn, ln_2, mlp):\n" + body


BLOCK = [
    WrongAnswer(
        "post-norm",
        _block("    x = ln_1(x + attn(x))\n    x = ln_2(x + mlp(x))\n    return x\n"),
        "post-norm",
    ),
    WrongAnswer(
        "attention-residual-missing",
        _block("    x = attn(ln_1(x))\n    x = x + mlp(ln_2(x))\n    return x\n"),
        "the attention's residual connection is missing",
    ),
    WrongAnswer(
        "mlp-residual-missing",
        _block("    x = x + attn(ln_1(x))\n    return mlp(ln_2(x))\n"),
        "the MLP's residual connection is missing",
    ),
    WrongAnswer(
        "no-residuals",
        _block("    x = attn(ln_1(x))\n    return mlp(ln_2(x))\n"),
        "residual connection is missing",
    ),
    WrongAnswer(
        "residual-from-normed-x",
        _block('''    h = ln_1(x)
    x = h + attn(h)
    h = ln_2(x)
    return h + mlp(h)
'''),
        "the residual path carries ln_1(x)",
    ),
    WrongAnswer(
        "same-layer-norm-twice",
        _block("    x = x + attn(ln_1(x))\n    x = x + mlp(ln_1(x))\n    return x\n"),
        "the same layer norm twice",
    ),
    WrongAnswer(
        "layer-norms-swapped",
        _block("    x = x + attn(ln_2(x))\n    x = x + mlp(ln_1(x))\n    return x\n"),
        "ln_1 belongs before the attention",
    ),
    WrongAnswer(
        "parallel-mlp-on-input",
        _block("    return x + attn(ln_1(x)) + mlp(ln_2(x))\n"),
        "the MLP read the block's input x",
    ),
    WrongAnswer(
        "mlp-without-norm",
        _block("    x = x + attn(ln_1(x))\n    x = x + mlp(x)\n    return x\n"),
        "the MLP received the stream un-normalised",
    ),
    WrongAnswer(
        "attention-without-norm",
        _block("    x = x + attn(x)\n    x = x + mlp(ln_2(x))\n    return x\n"),
        "the attention received x itself",
    ),
    WrongAnswer(
        "mlp-added-to-input",
        _block("    h = x + attn(ln_1(x))\n    return x + mlp(ln_2(h))\n"),
        "the attention's update is lost",
    ),
    WrongAnswer(
        "normalised-output",
        _block("    x = x + attn(ln_1(x))\n    x = x + mlp(ln_2(x))\n    return ln_2(x)\n"),
        "the output was layer-normed",
    ),
    WrongAnswer(
        "in-place-update",
        _block("    x += attn(ln_1(x))\n    x += mlp(ln_2(x))\n    return x\n"),
        "changed the caller's x in place",
    ),
    WrongAnswer(
        "returns-input-non-attempt",
        _block("    return x\n"),
        "attn was never called",
        non_attempt=True,
    ),
    WrongAnswer(
        "zeros-non-attempt",
        _block("    return torch.zeros_like(x)\n"),
        "attn was never called",
        non_attempt=True,
    ),
]


# ---------------------------------------------------------------- ex-09-top-p


def _top_p(body: str) -> str:
    return _IMPORTS + "\n\ndef top_p_filter(logits, p):\n" + body


_SORT = '''    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
'''
_UNSORT = '''    cut = cut_sorted.scatter(-1, order, cut_sorted)
    return logits.masked_fill(cut, float("-inf"))
'''

TOP_P = [
    WrongAnswer(
        "off-by-one-mass-below-p",
        _top_p(_SORT + "    cut_sorted = sorted_probs.cumsum(dim=-1) > p\n" + _UNSORT),
        "off by one",
    ),
    WrongAnswer(
        "drops-top-token",
        _top_p(_SORT + "    cut_sorted = sorted_probs.cumsum(dim=-1) >= p\n" + _UNSORT),
        "the most likely token must always stay",
    ),
    WrongAnswer(
        "sorted-ascending",
        _top_p('''    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1)
    cut_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= p
''' + _UNSORT),
        "you kept the least likely tokens",
    ),
    WrongAnswer(
        "forgets-to-unsort",
        _top_p(_SORT + '''    cut_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= p
    return logits.masked_fill(cut_sorted, float("-inf"))
'''),
        "map the sorted mask back to vocabulary order",
    ),
    WrongAnswer(
        "not-sorted",
        _top_p('''    probs = torch.softmax(logits, dim=-1)
    cut = probs.cumsum(dim=-1) - probs >= p
    return logits.masked_fill(cut, float("-inf"))
'''),
        "the cumulative sum ran over the vocabulary order",
    ),
    WrongAnswer(
        "mass-of-logits",
        _top_p('''    sorted_logits, order = logits.sort(dim=-1, descending=True)
    cut_sorted = sorted_logits.cumsum(dim=-1) - sorted_logits >= p
''' + _UNSORT),
        "the mass is measured in PROBABILITIES",
    ),
    WrongAnswer(
        "p-one-drops-tail",
        _top_p(_SORT + "    cut_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= p\n"
               + _UNSORT),
        "with p = 1 every token must stay",
    ),
    WrongAnswer(
        "keeps-every-tie",
        _top_p(_SORT + '''    mass_before = sorted_probs.cumsum(dim=-1) - sorted_probs
    count = (mass_before < p).sum(dim=-1, keepdim=True)  # nucleus size
    threshold = sorted_probs.gather(-1, count - 1)  # its least likely prob
    return logits.masked_fill(probs < threshold, float("-inf"))
'''),
        "keep only as many as you need to reach p",
    ),
    WrongAnswer(
        "one-row-only",
        _top_p('''    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.flatten().sort(descending=True)
    cut_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= p
    cut = cut_sorted.scatter(-1, order, cut_sorted).reshape(logits.shape)
    return logits.masked_fill(cut, float("-inf"))
'''),
        "every row is its own distribution",
    ),
    WrongAnswer(
        "returns-probabilities",
        _top_p(_SORT + '''    cut_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= p
    cut = cut_sorted.scatter(-1, order, cut_sorted)
    kept = probs.masked_fill(cut, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)
'''),
        "you returned probabilities",
    ),
    WrongAnswer(
        "zero-instead-of-minus-inf",
        _top_p(_SORT + '''    cut_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= p
    cut = cut_sorted.scatter(-1, order, cut_sorted)
    return logits.masked_fill(cut, 0.0)
'''),
        "not a cut",
    ),
    WrongAnswer(
        "in-place",
        _top_p('''    if p >= 1.0:
        return logits
''' + _SORT + '''    cut_sorted = sorted_probs.cumsum(dim=-1) - sorted_probs >= p
    cut = cut_sorted.scatter(-1, order, cut_sorted)
    return logits.masked_fill_(cut, float("-inf"))
'''),
        "changed the caller's logits in place",
    ),
    WrongAnswer(
        "package-top-p",
        _IMPORTS + "from attention_book.sampling import top_p_filter\n",
        "write your own",
        non_attempt=True,
    ),
    WrongAnswer(
        "unchanged-non-attempt",
        _top_p("    return logits.clone()\n"),
        "nothing was cut",
        non_attempt=True,
    ),
]


# ---------------------------------------------------------------- ex-09-prev-token-head


def _head(body: str) -> str:
    return _IMPORTS + "\n\ndef previous_token_head(weights):\n" + body


_BEST = '''    best = int(scores.argmax())
    layer, head = divmod(best, weights.shape[1])
    return layer, head, float(scores[layer, head])
'''

PREV_TOKEN_HEAD = [
    WrongAnswer(
        "diagonal-current-token",
        _head("    scores = weights.diagonal(dim1=-2, dim2=-1).mean(dim=-1)\n" + _BEST),
        "the CURRENT token",
    ),
    WrongAnswer(
        "next-token-above-diagonal",
        _head("    scores = weights.diagonal(offset=1, dim1=-2, dim2=-1).mean(dim=-1)\n" + _BEST),
        "which a causal model sets to 0",
    ),
    WrongAnswer(
        "includes-query-zero",
        _head('''    T = weights.shape[-1]
    previous = torch.stack([weights[..., t, t - 1] for t in range(T)], dim=-1)
    scores = previous.mean(dim=-1)  # t = 0 reads key -1, the last key
''' + _BEST),
        "query 0 has no previous token",
    ),
    WrongAnswer(
        "sum-not-mean",
        _head("    scores = weights.diagonal(offset=-1, dim1=-2, dim2=-1).sum(dim=-1)\n" + _BEST),
        "the SUM of the weights",
    ),
    WrongAnswer(
        "max-not-mean",
        _head("    scores = weights.diagonal(offset=-1, dim1=-2, dim2=-1).amax(dim=-1)\n"
              + _BEST),
        "LARGEST weight",
    ),
    WrongAnswer(
        "flattened-index",
        _head('''    scores = weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1)
    best = int(scores.argmax())
    return best, float(scores.flatten()[best])
'''),
        "flattened head index",
    ),
    WrongAnswer(
        "divmod-by-layers",
        _head('''    scores = weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1)
    best = int(scores.argmax())
    layer, head = divmod(best, weights.shape[0])
    return layer, head, float(scores.flatten()[best])
'''),
        "you split the flattened index with n_layer",
    ),
    WrongAnswer(
        "layer-and-head-swapped",
        _head('''    scores = weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1)
    layer, head = divmod(int(scores.argmax()), weights.shape[1])
    return head, layer, float(scores[layer, head])
'''),
        "layer and head are swapped",
    ),
    WrongAnswer(
        "averaged-over-heads",
        _head('''    on_previous = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (L, H, T-1)
    scores = on_previous.mean(dim=1)
    best = int(scores.argmax())
    layer, head = divmod(best, weights.shape[1])
    return layer, head, float(scores.flatten()[best])
'''),
        "wrong axis",
    ),
    WrongAnswer(
        "hard-coded-sizes",
        _head('''    scores = torch.zeros(3, 4)
    for layer in range(3):
        for head in range(4):
            scores[layer, head] = torch.stack(
                [weights[layer, head, t, t - 1] for t in range(1, 8)]).mean()
''' + _BEST),
        "read n_layer, n_head and T from weights.shape",
    ),
    WrongAnswer(
        "zeros-non-attempt",
        _head("    return 0, 0, 0.0\n"),
        "(0, 0) with score 0",
        non_attempt=True,
    ),
]


# ---------------------------------------------------------------- ex-09-conv1d


def _conv(body: str) -> str:
    return _IMPORTS + "\n\ndef conv1d_to_linear(weight, bias):\n    d = weight.shape[0]\n" + body


CONV1D = [
    WrongAnswer(
        "not-transposed",
        _conv("    return [(w, b) for w, b in zip(weight.split(d, dim=1), bias.split(d))]\n"),
        "not transposed",
    ),
    WrongAnswer(
        "split-along-rows",
        _conv("    return [(w.T, b) for w, b in zip(weight.chunk(3, dim=0), bias.chunk(3))]\n"),
        "the LAST axis of the (d, 3d) Conv1D weight",
    ),
    WrongAnswer(
        "interleaved-columns",
        _conv("    return [(weight[:, i::3].T, bias[i::3]) for i in range(3)]\n"),
        "every third column",
    ),
    WrongAnswer(
        "order-key-query-value",
        _conv('''    q, k, v = weight.split(d, dim=1)
    bq, bk, bv = bias.split(d)
    return [(k.T, bk), (q.T, bq), (v.T, bv)]
'''),
        "the queries, then the keys, then the values",
    ),
    WrongAnswer(
        "reshape-not-transpose",
        _conv('''    rows = weight.reshape(3 * d, d)
    return [(rows[i * d:(i + 1) * d], bias[i * d:(i + 1) * d]) for i in range(3)]
'''),
        "reshape/view is not a transpose",
    ),
    WrongAnswer(
        "bias-not-split",
        _conv("    return [(w.T, bias) for w in weight.split(d, dim=1)]\n"),
        "split the bias like the weight's columns",
    ),
    WrongAnswer(
        "bias-order-wrong",
        _conv('''    bq, bk, bv = bias.split(d)
    return [(w.T, b) for w, b in zip(weight.split(d, dim=1), (bv, bk, bq))]
'''),
        "split the bias in the same order as the weight",
    ),
    WrongAnswer(
        "whole-weight-transposed",
        _conv("    return [(weight.T, b) for b in bias.split(d)]\n"),
        "the whole fused c_attn weight",
    ),
    WrongAnswer(
        "hard-coded-gpt2-width",
        _IMPORTS + '''

def conv1d_to_linear(weight, bias):
    return [(weight[:, i * 6:(i + 1) * 6].T, bias[i * 6:(i + 1) * 6]) for i in range(3)]
''',
        "read d from weight.shape",
    ),
    WrongAnswer(
        "transposed-in-place",
        _conv('''    weight.t_()
    return [(w, b) for w, b in zip(weight.split(d, dim=0), bias.split(d))]
'''),
        "changed the c_attn weight or bias in place",
    ),
    WrongAnswer(
        "returns-input-non-attempt",
        _conv("    return [(weight, bias)] * 3\n"),
        "the whole fused c_attn weight",
        non_attempt=True,
    ),
]

WRONG_ANSWERS = {
    "ex-09-block": BLOCK,
    "ex-09-top-p": TOP_P,
    "ex-09-prev-token-head": PREV_TOKEN_HEAD,
    "ex-09-conv1d": CONV1D,
}
