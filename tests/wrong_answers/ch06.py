"""Plausible wrong answers to the coding exercises of chapter 6 (cross-attention)."""

from . import WrongAnswer

_IMPORTS = "import torch\n"


def _cross(body: str) -> str:
    return _IMPORTS + "\n\ndef cross_attention(x, context, W_query, W_key, W_value):\n" + body


_PROJECT = '''    queries = x @ W_query
    keys = context @ W_key
    values = context @ W_value
'''

CROSS = [
    WrongAnswer(
        "queries-from-context",
        _cross('''    queries = context @ W_query
    keys = x @ W_key
    values = x @ W_value
    weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1)
    return weights @ values, weights
'''),
        "queries must come from x",
    ),
    WrongAnswer(
        "keys-from-x",
        _cross('''    queries = x @ W_query
    keys = x @ W_key
    values = context @ W_value
    weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1)
    return weights @ values, weights
'''),
        "matrix products do not fit",
    ),
    WrongAnswer(
        "softmax-over-queries",
        _cross(_PROJECT + '''    weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=0)
    return weights @ values, weights
'''),
        "the softmax ran over the queries",
    ),
    WrongAnswer(
        "not-scaled",
        _cross(_PROJECT + '''    weights = torch.softmax(queries @ keys.T, dim=-1)
    return weights @ values, weights
'''),
        "the scores are not scaled",
    ),
    WrongAnswer(
        "scaled-by-context-width",
        _cross(_PROJECT + '''    weights = torch.softmax(queries @ keys.T / context.shape[-1] ** 0.5, dim=-1)
    return weights @ values, weights
'''),
        "sqrt(d_context)",
    ),
    WrongAnswer(
        "scaled-by-d-k-not-its-root",
        _cross(_PROJECT + '''    weights = torch.softmax(queries @ keys.T / keys.shape[-1], dim=-1)
    return weights @ values, weights
'''),
        "divide by its square root",
    ),
    WrongAnswer(
        "scale-hard-coded",
        _cross(_PROJECT + '''    weights = torch.softmax(queries @ keys.T / 2 ** 0.5, dim=-1)
    return weights @ values, weights
'''),
        "the scale is hard-coded",
    ),
    WrongAnswer(
        "causal-mask-in-cross-attention",
        _cross(_PROJECT + '''    scores = queries @ keys.T / keys.shape[-1] ** 0.5
    future = torch.triu(torch.ones(scores.shape, dtype=torch.bool), diagonal=1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return weights @ values, weights
'''),
        "did you add a causal mask",
    ),
    WrongAnswer(
        "weights-times-raw-context",
        _cross(_PROJECT + '''    weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1)
    return weights @ context, weights
'''),
        "return attention_weights @ values",
    ),
    WrongAnswer(
        "package-core",
        _IMPORTS + '''from attention_book.functional import scaled_dot_product_attention


def cross_attention(x, context, W_query, W_key, W_value):
    return scaled_dot_product_attention(x @ W_query, context @ W_key, context @ W_value)
''',
        "write your own",
        non_attempt=True,
    ),
    WrongAnswer(
        "zeros-non-attempt",
        _cross('''    weights = torch.zeros(x.shape[0], context.shape[0])
    return torch.zeros(x.shape[0], W_value.shape[1]), weights
'''),
        "must sum to 1",
        non_attempt=True,
    ),
]


def _padding(body: str) -> str:
    return _IMPORTS + "\n\ndef padded_softmax(scores, key_padding_mask):\n" + body


PADDING = [
    WrongAnswer(
        "additive-mask-then-zero",
        _padding('''    additive = torch.zeros(key_padding_mask.shape)
    additive = additive.masked_fill(key_padding_mask, float("-inf"))  # (B, T_kv)
    weights = torch.softmax(scores + additive[:, None, :], dim=-1)
    fully_padded = key_padding_mask.all(dim=-1)[:, None, None]
    return weights.masked_fill(fully_padded, 0.0)
'''),
        "the gradient of the scores has NaN",
    ),
    WrongAnswer(
        "mask-on-query-axis",
        _padding('''    mask = key_padding_mask[:, :, None]  # (B, T_kv, 1): hides query rows
    fully = mask.all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(mask & ~fully, float("-inf")), dim=-1)
    return weights.masked_fill(fully, 0.0)
'''),
        "add a query axis",
    ),
    WrongAnswer(
        "zeroed-after-softmax",
        _padding('''    weights = torch.softmax(scores, dim=-1)
    return weights.masked_fill(key_padding_mask[:, None, :], 0.0)
'''),
        "rows no longer sum to 1",
    ),
    WrongAnswer(
        "mask-inverted",
        _padding('''    mask = ~key_padding_mask[:, None, :]
    fully = mask.all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(mask & ~fully, float("-inf")), dim=-1)
    return weights.masked_fill(fully, 0.0)
'''),
        "the mask is inverted",
    ),
    WrongAnswer(
        "no-query-axis",
        _padding('''    mask = key_padding_mask  # broadcasts as (1, B, T_kv)
    fully = mask.all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(mask & ~fully, float("-inf")), dim=-1)
    return weights.masked_fill(fully, 0.0)
'''),
        "(1, B, T_kv)",
    ),
    WrongAnswer(
        "finite-fill",
        _padding('''    fill = torch.finfo(scores.dtype).min
    return torch.softmax(scores.masked_fill(key_padding_mask[:, None, :], fill), dim=-1)
'''),
        "uniform weights",
    ),
    WrongAnswer(
        "plain-minus-inf",
        _padding('''    masked = scores.masked_fill(key_padding_mask[:, None, :], float("-inf"))
    return torch.softmax(masked, dim=-1)
'''),
        "0/0",
    ),
    WrongAnswer(
        "in-place",
        _padding('''    mask = key_padding_mask[:, None, :]
    fully = mask.all(dim=-1, keepdim=True)
    scores.masked_fill_(mask & ~fully, float("-inf"))
    return torch.softmax(scores, dim=-1).masked_fill(fully, 0.0)
'''),
        "in place",
    ),
    WrongAnswer(
        "detached",
        _padding('''    mask = key_padding_mask[:, None, :]
    fully = mask.all(dim=-1, keepdim=True)
    weights = torch.softmax(scores.masked_fill(mask & ~fully, float("-inf")), dim=-1)
    return weights.masked_fill(fully, 0.0).detach()
'''),
        "must stay differentiable",
    ),
    WrongAnswer(
        "package-padded-softmax",
        _IMPORTS + '''from attention_book.cross import padded_softmax
''',
        "write your own",
        non_attempt=True,
    ),
    WrongAnswer(
        "scores-unchanged-non-attempt",
        _padding("    return scores\n"),
        "padded keys (mask true) must get weight exactly 0",
        non_attempt=True,
    ),
    WrongAnswer(
        "zeros-non-attempt",
        _padding("    return torch.zeros_like(scores)\n"),
        "every weight is 0",
        non_attempt=True,
    ),
]

WRONG_ANSWERS = {
    "ex-06-cross": CROSS,
    "ex-06-padding": PADDING,
}


# ---------------------------------------------------------------- ex-06-find-the-bug-half
_HALF = ("import torch\n\n\ndef padded_weights(scores, key_padding_mask):\n"
         "    # scores (B, T_q, T_k) in any float dtype; key_padding_mask (B, T_k), True = padding\n"
         "    hidden = key_padding_mask[:, None, :]  # (B, 1, T_k): the same keys for every query\n")
HALF_PADDING = [
    WrongAnswer("the-given-bug-minus-1e9",
                _HALF + "    return torch.softmax(scores.masked_fill(hidden, -1e9), dim=-1)\n",
                "-1e9 does not fit in float16"),
    WrongAnswer("minus-1e4-fits-float16",
                _HALF + "    return torch.softmax(scores.masked_fill(hidden, -1e4), dim=-1)\n",
                "the padded keys still get some weight"),
    WrongAnswer("float32-not-cast-back",
                _HALF + '    return torch.softmax(scores.float().masked_fill(hidden, float("-inf")), dim=-1)\n',
                "must keep the scores' dtype"),
    WrongAnswer("mask-on-the-queries",
                "import torch\n\n\ndef padded_weights(scores, key_padding_mask):\n"
                '    hidden = key_padding_mask[:, :, None]\n'
                '    return torch.softmax(scores.masked_fill(hidden[:, :scores.shape[1]], float("-inf")), dim=-1)\n',
                "your mask hides query rows"),
    WrongAnswer("mask-inverted",
                _HALF + '    return torch.softmax(scores.masked_fill(~hidden, float("-inf")), dim=-1)\n',
                "True in key_padding_mask marks the padding"),
    WrongAnswer("zeroed-after-softmax",
                _HALF + "    return torch.softmax(scores, dim=-1).masked_fill(hidden, 0.0)\n",
                "no longer sum to 1"),
    WrongAnswer("in-place",
                _HALF + '    scores.masked_fill_(hidden, float("-inf"))\n    return torch.softmax(scores, dim=-1)\n',
                "changed its inputs in place"),
    WrongAnswer("uniform-non-attempt",
                _HALF + "    return torch.full_like(scores, 1.0 / scores.shape[-1])\n",
                "differ from a softmax", non_attempt=True),
]
WRONG_ANSWERS["ex-06-find-the-bug-half"] = HALF_PADDING
CORRECT_ANSWERS = {"ex-06-find-the-bug-half": {
    "dtype-minimum": _HALF + "    lowest = torch.finfo(scores.dtype).min  # fits every dtype\n"
                             "    return torch.softmax(scores.masked_fill(hidden, lowest), dim=-1)\n",
    "float32-and-back": _HALF + "    # -1e9 is fine in float32: compute there, return in the caller's dtype\n"
                                "    weights = torch.softmax(scores.float().masked_fill(hidden, -1e9), dim=-1)\n"
                                "    return weights.to(scores.dtype)\n",
    "where-minus-inf": _HALF + '    minus_inf = torch.tensor(float("-inf"), dtype=scores.dtype)\n'
                               "    return torch.where(hidden, minus_inf, scores).softmax(dim=-1)\n",
}}
