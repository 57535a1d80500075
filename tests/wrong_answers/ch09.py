"""Plausible wrong answers to the coding exercises of chapter 9 (a GPT that writes)."""

from . import WrongAnswer

_IMPORTS = "import torch\nfrom torch import nn\n"


# ---------------------------------------------------------------- ex-09-block


_POST_NORM = ("    if not pre_norm:  # the original transformer: normalise after each sum\n"
              "        x = ln_1(x + attn(x))\n        return ln_2(x + mlp(x))\n")


def _block(body: str, post_norm: str = _POST_NORM) -> str:
    """A block whose pre-norm branch is ``body`` (its post-norm branch right unless given)."""
    return (_IMPORTS + "\n\ndef transformer_block(x, ln_1, attn, ln_2, mlp, pre_norm=True):\n"
            + post_norm + body)


BLOCK = [
    WrongAnswer(
        "post-norm-for-both",
        _block("    x = ln_1(x + attn(x))\n    x = ln_2(x + mlp(x))\n    return x\n", post_norm=""),
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
        "flag-ignored-always-pre-norm",
        _block("    x = x + attn(ln_1(x))\n    return x + mlp(ln_2(x))\n", post_norm=""),
        "still computes the pre-norm order",
    ),
    WrongAnswer(
        "post-norm-with-normed-inputs",
        _block("    x = x + attn(ln_1(x))\n    return x + mlp(ln_2(x))\n",
               post_norm="    if not pre_norm:\n        x = ln_1(x + attn(ln_1(x)))\n        return ln_2(x + mlp(ln_2(x)))\n"),
        "the attention reads the stream x itself",
    ),
    WrongAnswer(
        "post-norm-last-norm-missing",
        _block("    x = x + attn(ln_1(x))\n    return x + mlp(ln_2(x))\n",
               post_norm="    if not pre_norm:\n        x = ln_1(x + attn(x))\n        return x + mlp(x)\n"),
        "the MLP's too",
    ),
    WrongAnswer(
        "post-norm-mlp-reads-unnormalised-sum",
        _block("    x = x + attn(ln_1(x))\n    return x + mlp(ln_2(x))\n",
               post_norm="    if not pre_norm:\n        h = x + attn(x)\n        return ln_2(ln_1(h) + mlp(h))\n"),
        "normalise the stream after the attention's residual sum",
    ),
    WrongAnswer(
        "returns-input-non-attempt",
        _block("    return x\n", post_norm=""),
        "attn was never called",
        non_attempt=True,
    ),
    WrongAnswer(
        "zeros-non-attempt",
        _block("    return torch.zeros_like(x)\n", post_norm=""),
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


# ---------------------------------------------------------------- ex-09-induction-head
_INDUCTION = (_IMPORTS + "\n\ndef induction_scores(weights, period):\n"
              "    # weights (n_layer, n_head, T, T) on a block of period tokens, repeated\n"
              "    T = weights.shape[-1]\n    t = torch.arange(period, T)  # the queries of a repeat\n")
INDUCTION = [
    WrongAnswer("duplicate-token-offset", _INDUCTION + "    return weights[..., t, t - period].mean(dim=-1)\n",
                "duplicate-token head"),
    WrongAnswer("previous-token-scores",
                _INDUCTION + "    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1)\n",
                "these are previous-token scores"),
    WrongAnswer("first-copy-included",
                _INDUCTION + "    return weights.diagonal(offset=-(period - 1), dim1=-2, dim2=-1).mean(dim=-1)\n",
                "still in the first copy"),
    WrongAnswer("summed", _INDUCTION + "    return weights[..., t, t - period + 1].sum(dim=-1)\n",
                "your scores are sums"),
    WrongAnswer("best-head-only", _INDUCTION + "    scores = weights[..., t, t - period + 1].mean(dim=-1)\n"
                "    best = int(scores.argmax())\n    return torch.tensor(divmod(best, scores.shape[1]))\n",
                "not the best head"),
    WrongAnswer("layers-and-heads-swapped", _INDUCTION + "    return weights[..., t, t - period + 1].mean(dim=-1).T\n",
                "layers and heads are swapped"),
    WrongAnswer("period-hard-coded", _INDUCTION.replace("t = torch.arange(period, T)", "t = torch.arange(5, T)")
                + "    return weights[..., t, t - 4].mean(dim=-1)\n", "mean weight on key t - period + 1"),
    WrongAnswer("in-place", _INDUCTION + "    weights.mul_(1.0)\n    weights[..., 0, 0] = 0.0\n"
                "    return weights[..., t, t - period + 1].mean(dim=-1)\n", "changed the weights passed in"),
    WrongAnswer("zeros-non-attempt", _INDUCTION + "    return torch.zeros(weights.shape[:2])\n",
                "mean weight on key t - period + 1", non_attempt=True),
]


# ---------------------------------------------------------------- ex-09-parameters
_PARAMS = (_IMPORTS + "\n\ndef gpt_parameters(vocab_size, context_length, d_model, n_layer, n_head):\n"
           "    V, T, d, L = vocab_size, context_length, d_model, n_layer\n")
PARAMETERS = [
    WrongAnswer("output-layer-counted-twice", _PARAMS + "    return 2 * V * d + T * d + L * (12 * d * d + 13 * d) + 2 * d\n",
                "the output layer is tied"),
    WrongAnswer("no-position-embeddings", _PARAMS + "    return V * d + L * (12 * d * d + 13 * d) + 2 * d\n",
                "the position embeddings are missing"),
    WrongAnswer("matrices-only", _PARAMS + "    return V * d + T * d + L * 12 * d * d\n",
                "the biases and layer norms are missing"),
    WrongAnswer("no-final-norm", _PARAMS + "    return V * d + T * d + L * (12 * d * d + 13 * d)\n",
                "the final layer norm ln_f is missing"),
    WrongAnswer("mlp-two-d-by-d", _PARAMS + "    return V * d + T * d + L * (6 * d * d + 10 * d) + 2 * d\n",
                "the MLP is d -> 4d -> d"),
    WrongAnswer("three-projections", _PARAMS + "    return V * d + T * d + L * (11 * d * d + 12 * d) + 2 * d\n",
                "attention has four projections"),
    WrongAnswer("per-head", _PARAMS + "    return V * d + T * d + n_head * L * (12 * d * d + 13 * d) + 2 * d\n",
                "the heads do not multiply the parameters"),
    WrongAnswer("gpt2-hard-coded", _PARAMS + "    return 124_439_808\n", "the model holds"),
    WrongAnswer("zero-non-attempt", _PARAMS + "    return 0\n", "the model holds", non_attempt=True),
]


# ---------------------------------------------------------------- ex-09-find-the-bug-scale
_SCALE = ("import math\n\nimport torch\n\n\ndef gpt_attention(x, c_attn, n_head):\n"
          "    # x (B, T, C); c_attn (C, 3C): queries, keys, values side by side\n"
          "    B, T, C = x.shape\n"
          "    q, k, v = (x @ c_attn).split(C, dim=-1)\n"
          "    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))\n")
_SCALE_END = ("    hidden = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)\n"
              '    weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)\n'
              "    return (weights @ v).transpose(1, 2).reshape(B, T, C)\n")
SCALE = [
    WrongAnswer("the-given-bug-sqrt-C", _SCALE + "    scores = q @ k.transpose(-2, -1) / math.sqrt(C)\n" + _SCALE_END,
                "the width of the whole model"),
    WrongAnswer("scale-removed", _SCALE + "    scores = q @ k.transpose(-2, -1)\n" + _SCALE_END, "not scaled at all"),
    WrongAnswer("head-dim-without-sqrt", _SCALE + "    scores = q @ k.transpose(-2, -1) / (C // n_head)\n" + _SCALE_END,
                "you divided by head_dim"),
    WrongAnswer("sqrt-n-head", _SCALE + "    scores = q @ k.transpose(-2, -1) / math.sqrt(n_head)\n" + _SCALE_END,
                "you divided by sqrt(n_head)"),
    WrongAnswer("mask-dropped", _SCALE + "    scores = q @ k.transpose(-2, -1) / math.sqrt(C // n_head)\n"
                "    weights = torch.softmax(scores, dim=-1)\n"
                "    return (weights @ v).transpose(1, 2).reshape(B, T, C)\n", "the causal mask is gone"),
    WrongAnswer("queries-and-keys-swapped",
                _SCALE.replace("q, k, v = (x @ c_attn)", "k, q, v = (x @ c_attn)")
                + "    scores = q @ k.transpose(-2, -1) / math.sqrt(C // n_head)\n" + _SCALE_END,
                "queries, then the keys, then the values"),
    WrongAnswer("in-place", _SCALE + "    x.mul_(1.0)\n    c_attn.mul_(1.0)\n    c_attn[0, 0] = 0.0\n"
                "    scores = q @ k.transpose(-2, -1) / math.sqrt(C // n_head)\n" + _SCALE_END,
                "changed its inputs in place"),
    WrongAnswer("zeros-non-attempt", _SCALE + "    return torch.zeros_like(x)\n",
                "differs from causal multi-head attention", non_attempt=True),
]


WRONG_ANSWERS = {
    "ex-09-block": BLOCK,
    "ex-09-top-p": TOP_P,
    "ex-09-induction-head": INDUCTION,
    "ex-09-parameters": PARAMETERS,
    "ex-09-find-the-bug-scale": SCALE,
}

CORRECT_ANSWERS = {"ex-09-find-the-bug-scale": {
    "scale-from-the-keys": _SCALE + "    scores = q @ k.transpose(-2, -1) * k.size(-1) ** -0.5\n" + _SCALE_END,
    "scale-the-queries-first": _SCALE.replace("(t.view(B, T, n_head, C // n_head)", "(t.reshape(B, T, n_head, -1)")
    + "    q = q / math.sqrt(q.shape[-1])  # scaling q scales every score\n"
      "    scores = q @ k.mT\n" + _SCALE_END,
    "sdpa": _SCALE + "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)"
                     ".transpose(1, 2).reshape(B, T, C)\n",
}}
