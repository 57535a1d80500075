"""Plausible wrong answers to the coding exercises of chapter 5 (multi-head attention)."""

from . import WrongAnswer

_SPLIT_OK = '''
def split_heads(x, num_heads):
    batch_size, num_tokens, d_out = x.shape
    return x.view(batch_size, num_tokens, num_heads, d_out // num_heads).transpose(1, 2)
'''

_MERGE_OK = '''
def merge_heads(heads):
    batch_size, num_heads, num_tokens, head_dim = heads.shape
    return heads.transpose(1, 2).contiguous().view(batch_size, num_tokens, num_heads * head_dim)
'''

_IMPORTS = "import torch\nfrom torch import nn\n"

SPLIT_HEADS = [
    WrongAnswer(
        "split-view-straight-to-heads",
        _IMPORTS + '''
def split_heads(x, num_heads):
    batch_size, num_tokens, d_out = x.shape
    return x.view(batch_size, num_heads, num_tokens, d_out // num_heads)
''' + _MERGE_OK,
        "tokens got mixed into heads",
    ),
    WrongAnswer(
        "split-no-transpose",
        _IMPORTS + '''
def split_heads(x, num_heads):
    batch_size, num_tokens, d_out = x.shape
    return x.view(batch_size, num_tokens, num_heads, d_out // num_heads)
''' + _MERGE_OK,
        "swap the token and head axes",
    ),
    WrongAnswer(
        "split-view-order-swapped",
        _IMPORTS + '''
def split_heads(x, num_heads):
    batch_size, num_tokens, d_out = x.shape
    return x.view(batch_size, num_tokens, d_out // num_heads, num_heads).transpose(1, 2)
''' + _MERGE_OK,
        "the view order is swapped",
    ),
    WrongAnswer(
        "split-transposes-last-axes",
        _IMPORTS + '''
def split_heads(x, num_heads):
    batch_size, num_tokens, d_out = x.shape
    return x.view(batch_size, num_tokens, num_heads, d_out // num_heads).transpose(2, 3)
''' + _MERGE_OK,
        "not the last two",
    ),
    WrongAnswer(
        "split-hard-coded-head-dim",
        _IMPORTS + '''
def split_heads(x, num_heads):
    batch_size, num_tokens, d_out = x.shape
    return x.view(batch_size, num_tokens, num_heads, 4).transpose(1, 2)
''' + _MERGE_OK,
        "do not hard-code it",
    ),
    WrongAnswer(
        "merge-reshape-without-transpose",
        _IMPORTS + _SPLIT_OK + '''
def merge_heads(heads):
    batch_size, num_heads, num_tokens, head_dim = heads.shape
    return heads.reshape(batch_size, num_tokens, num_heads * head_dim)
''',
        "mixes heads and tokens",
    ),
    WrongAnswer(
        "merge-view-without-contiguous",
        _IMPORTS + _SPLIT_OK + '''
def merge_heads(heads):
    batch_size, num_heads, num_tokens, head_dim = heads.shape
    return heads.transpose(1, 2).view(batch_size, num_tokens, num_heads * head_dim)
''',
        "call .contiguous() before .view",
    ),
    WrongAnswer(
        "merge-hard-coded-sizes",
        _IMPORTS + _SPLIT_OK + '''
def merge_heads(heads):
    return heads.transpose(1, 2).contiguous().view(2, 5, 12)
''',
        "instead of fixed numbers",
    ),
    WrongAnswer(
        "identity-non-attempt",
        _IMPORTS + '''
def split_heads(x, num_heads):
    return x


def merge_heads(heads):
    return heads
''',
        "expected shape",
        non_attempt=True,
    ),
    WrongAnswer(
        "zeros-non-attempt",
        _IMPORTS + '''
def split_heads(x, num_heads):
    batch_size, num_tokens, d_out = x.shape
    return torch.zeros(batch_size, num_heads, num_tokens, d_out // num_heads)


def merge_heads(heads):
    batch_size, num_heads, num_tokens, head_dim = heads.shape
    return torch.zeros(batch_size, num_tokens, num_heads * head_dim)
''',
        "head 0 should hold columns",
        non_attempt=True,
    ),
]

_TWIN_HEAD = _IMPORTS + '''
def to_torch_attention(mha):
    torch_mha = nn.MultiheadAttention(mha.d_out, mha.num_heads, batch_first=True)
    projections = [mha.W_query, mha.W_key, mha.W_value]
    with torch.no_grad():
'''

_TWIN_BIAS = '''        if mha.W_query.bias is not None:
            torch_mha.in_proj_bias.copy_(torch.cat([p.bias for p in projections]))
        else:
            torch_mha.in_proj_bias.zero_()
'''

_TWIN_OUT = '''        torch_mha.out_proj.weight.copy_(mha.out_proj.weight)
        torch_mha.out_proj.bias.copy_(mha.out_proj.bias)
'''

_TWIN_IN = "        torch_mha.in_proj_weight.copy_(torch.cat([p.weight for p in projections]))\n"

TORCH_TWIN = [
    WrongAnswer(
        "in-proj-transposed",
        _TWIN_HEAD
        + "        torch_mha.in_proj_weight.copy_(torch.cat([p.weight.T for p in projections]))\n"
        + _TWIN_BIAS + _TWIN_OUT + "    return torch_mha\n",
        "in_proj_weight holds the transposed matrices",
    ),
    WrongAnswer(
        "in-proj-order-kqv",
        _TWIN_HEAD
        + "        order = [mha.W_key, mha.W_query, mha.W_value]\n"
        + "        torch_mha.in_proj_weight.copy_(torch.cat([p.weight for p in order]))\n"
        + _TWIN_BIAS + _TWIN_OUT + "    return torch_mha\n",
        "right blocks in the wrong order",
    ),
    WrongAnswer(
        "out-proj-missing",
        _TWIN_HEAD + _TWIN_IN + _TWIN_BIAS + "    return torch_mha\n",
        "the output projection is missing",
    ),
    WrongAnswer(
        "out-proj-transposed",
        _TWIN_HEAD + _TWIN_IN + _TWIN_BIAS
        + "        torch_mha.out_proj.weight.copy_(mha.out_proj.weight.T)\n"
        + "        torch_mha.out_proj.bias.copy_(mha.out_proj.bias)\n"
        + "    return torch_mha\n",
        "out_proj.weight is transposed",
    ),
    WrongAnswer(
        "qkv-bias-not-copied",
        _TWIN_HEAD + _TWIN_IN + "        torch_mha.in_proj_bias.zero_()\n" + _TWIN_OUT
        + "    return torch_mha\n",
        "with qkv_bias=True the projections have biases too",
    ),
    WrongAnswer(
        "not-batch-first",
        _IMPORTS + '''
def to_torch_attention(mha):
    torch_mha = nn.MultiheadAttention(mha.d_out, mha.num_heads)
    projections = [mha.W_query, mha.W_key, mha.W_value]
    with torch.no_grad():
''' + _TWIN_IN + _TWIN_BIAS + _TWIN_OUT + "    return torch_mha\n",
        "batch_first=True",
    ),
    WrongAnswer(
        "hard-coded-sizes",
        _IMPORTS + '''
def to_torch_attention(mha):
    torch_mha = nn.MultiheadAttention(8, 2, batch_first=True)
    projections = [mha.W_query, mha.W_key, mha.W_value]
    with torch.no_grad():
''' + _TWIN_IN + _TWIN_BIAS + _TWIN_OUT + "    return torch_mha\n",
        "instead of fixed numbers",
    ),
    WrongAnswer(
        "shares-parameters",
        _IMPORTS + '''
def to_torch_attention(mha):
    torch_mha = nn.MultiheadAttention(mha.d_out, mha.num_heads, batch_first=True)
    projections = [mha.W_query, mha.W_key, mha.W_value]
    with torch.no_grad():
''' + _TWIN_IN + _TWIN_BIAS + '''    torch_mha.out_proj.weight = mha.out_proj.weight
    torch_mha.out_proj.bias = mha.out_proj.bias
    return torch_mha
''',
        "shares its tensors with ours",
    ),
    WrongAnswer(
        "fresh-module-non-attempt",
        _IMPORTS + '''
def to_torch_attention(mha):
    return nn.MultiheadAttention(mha.d_out, mha.num_heads, batch_first=True)
''',
        "in_proj_weight should be",
        non_attempt=True,
    ),
]

_CONTRIB_HEAD = _IMPORTS + '''
def head_contributions(mha, x):
    B, T, _ = x.shape
    H, hd = mha.num_heads, mha.head_dim
    _, weights = mha(x, return_weights=True)  # (B, H, T, T)
'''
_CONTRIB_VALUES = "    values = mha.W_value(x).view(B, T, H, hd).transpose(1, 2)\n"
_CONTRIB_W_O = "    W_O = mha.out_proj.weight.T.reshape(H, hd, mha.d_out)\n"

HEAD_CONTRIBUTIONS = [
    WrongAnswer(
        "bias-in-every-head",
        _CONTRIB_HEAD + _CONTRIB_VALUES + _CONTRIB_W_O
        + "    return (weights @ values) @ W_O + mha.out_proj.bias\n",
        "counts the bias num_heads times",
    ),
    WrongAnswer(
        "rows-of-out-proj-weight",
        _CONTRIB_HEAD + _CONTRIB_VALUES
        + "    W_O = mha.out_proj.weight.reshape(H, hd, mha.d_out)\n"
        + "    return (weights @ values) @ W_O\n",
        "columns h*head_dim:(h+1)*head_dim of out_proj.weight",
    ),
    WrongAnswer(
        "values-split-wrong-order",
        _CONTRIB_HEAD
        + "    values = mha.W_value(x).view(B, H, T, hd)\n" + _CONTRIB_W_O
        + "    return (weights @ values) @ W_O\n",
        "view(B, T, num_heads, head_dim).transpose(1, 2)",
    ),
    WrongAnswer(
        "out-proj-missing",
        _CONTRIB_HEAD + _CONTRIB_VALUES + "    return weights @ values\n",
        "through its part of out_proj",
    ),
    WrongAnswer(
        "share-of-the-output",
        _IMPORTS + '''
def head_contributions(mha, x):
    H = mha.num_heads
    share = (mha(x) - mha.out_proj.bias) / H  # (B, T, d_out)
    return share.unsqueeze(1).expand(-1, H, -1, -1)
''',
        "depend on that head alone",
    ),
    WrongAnswer(
        "own-softmax-without-causal-mask",
        _IMPORTS + '''
def head_contributions(mha, x):
    B, T, _ = x.shape
    H, hd = mha.num_heads, mha.head_dim
    queries = mha.W_query(x).view(B, T, H, hd).transpose(1, 2)
    keys = mha.W_key(x).view(B, T, H, hd).transpose(1, 2)
    values = mha.W_value(x).view(B, T, H, hd).transpose(1, 2)
    weights = torch.softmax(queries @ keys.transpose(2, 3) / hd**0.5, dim=-1)
    W_O = mha.out_proj.weight.T.reshape(H, hd, mha.d_out)
    return (weights @ values) @ W_O
''',
        "this module is causal",
    ),
    WrongAnswer(
        "hard-coded-three-heads",
        _IMPORTS + '''
def head_contributions(mha, x):
    B, T, _ = x.shape
    _, weights = mha(x, return_weights=True)
    values = mha.W_value(x).view(B, T, 3, 2).transpose(1, 2)
    W_O = mha.out_proj.weight.T.reshape(3, 2, 6)
    return (weights @ values) @ W_O
''',
        "take num_heads, head_dim and d_out from mha",
    ),
    WrongAnswer(
        "zeros-non-attempt",
        _IMPORTS + '''
def head_contributions(mha, x):
    B, T, _ = x.shape
    return torch.zeros(B, mha.num_heads, T, mha.d_out)
''',
        "do not add up to mha(x)",
        non_attempt=True,
    ),
]

WRONG_ANSWERS = {
    "ex-05-split-heads": SPLIT_HEADS,
    "ex-05-torch-twin": TORCH_TWIN,
    "ex-05-head-contributions": HEAD_CONTRIBUTIONS,
}


# ---------------------------------------------------------------- ex-05-find-the-bug-heads
_HEADS = ("import torch\n\n\ndef multihead_context(queries, keys, values, num_heads):\n"
          "    # (B, T, d_out) each -> (B, T, d_out)\n"
          "    B, T, d_out = queries.shape\n    head_dim = d_out // num_heads\n")
_VIEW_SPLIT = ("    q = queries.view(B, num_heads, T, head_dim)\n    k = keys.view(B, num_heads, T, head_dim)\n"
               "    v = values.view(B, num_heads, T, head_dim)\n")
_RIGHT_SPLIT = ("    q, k, v = (t.view(B, T, num_heads, head_dim).transpose(1, 2)\n"
                "               for t in (queries, keys, values))\n")
_WEIGHTS = "    weights = torch.softmax(q @ k.transpose(-2, -1) / head_dim ** 0.5, dim=-1)\n"
HEADS_CONTEXT = [
    WrongAnswer("the-given-bug-view-without-transpose",
                _HEADS + _VIEW_SPLIT + _WEIGHTS + "    return (weights @ v).view(B, T, d_out)\n",
                "heads split without the transpose"),
    WrongAnswer("only-the-merge-fixed",
                _HEADS + _VIEW_SPLIT + _WEIGHTS + "    return (weights @ v).transpose(1, 2).reshape(B, T, d_out)\n",
                "the split is still .view(B, num_heads, T, head_dim)"),
    WrongAnswer("only-the-split-fixed",
                _HEADS + _RIGHT_SPLIT + _WEIGHTS + "    return (weights @ v).reshape(B, T, d_out)\n",
                "the merge is not"),
    WrongAnswer("view-after-transpose",
                _HEADS + _RIGHT_SPLIT + _WEIGHTS + "    return (weights @ v).transpose(1, 2).view(B, T, d_out)\n",
                "not contiguous"),
    WrongAnswer("scaled-by-d_out",
                _HEADS + _RIGHT_SPLIT + "    weights = torch.softmax(q @ k.transpose(-2, -1) / d_out ** 0.5, dim=-1)\n"
                "    return (weights @ v).transpose(1, 2).reshape(B, T, d_out)\n",
                "not sqrt(d_out)"),
    WrongAnswer("softmax-over-queries",
                _HEADS + _RIGHT_SPLIT + "    weights = torch.softmax(q @ k.transpose(-2, -1) / head_dim ** 0.5, dim=-2)\n"
                "    return (weights @ v).transpose(1, 2).reshape(B, T, d_out)\n",
                "softmax over the wrong axis"),
    WrongAnswer("heads-not-merged",
                _HEADS + _RIGHT_SPLIT + _WEIGHTS + "    return weights @ v\n",
                "merge the heads back"),
    WrongAnswer("values-non-attempt", _HEADS + "    return values.clone()\n",
                "differs from multi-head attention", non_attempt=True),
]
WRONG_ANSWERS["ex-05-find-the-bug-heads"] = HEADS_CONTEXT
CORRECT_ANSWERS = {"ex-05-find-the-bug-heads": {
    "unflatten-permute": "import torch\n\n\ndef multihead_context(queries, keys, values, num_heads):\n"
                         "    q, k, v = (t.unflatten(-1, (num_heads, -1)).permute(0, 2, 1, 3)\n"
                         "               for t in (queries, keys, values))\n"
                         "    w = (q @ k.mT / q.shape[-1] ** 0.5).softmax(-1)\n"
                         "    return (w @ v).permute(0, 2, 1, 3).flatten(2)\n",
    "einsum-no-transpose": "import torch\n\n\ndef multihead_context(queries, keys, values, num_heads):\n"
                           "    B, T, C = queries.shape\n"
                           "    q, k, v = (t.reshape(B, T, num_heads, C // num_heads) for t in (queries, keys, values))\n"
                           "    s = torch.einsum('bqhd,bkhd->bhqk', q, k) / (C // num_heads) ** 0.5\n"
                           "    return torch.einsum('bhqk,bkhd->bqhd', s.softmax(-1), v).reshape(B, T, C)\n",
    "loop-over-heads": "import torch\n\n\ndef multihead_context(queries, keys, values, num_heads):\n"
                       "    size = queries.shape[-1] // num_heads\n    outs = []\n"
                       "    for h in range(num_heads):  # columns h*size .. (h+1)*size are head h\n"
                       "        cols = slice(h * size, (h + 1) * size)\n"
                       "        w = torch.softmax(queries[..., cols] @ keys[..., cols].transpose(1, 2)\n"
                       "                          / size ** 0.5, dim=-1)\n"
                       "        outs.append(w @ values[..., cols])\n"
                       "    return torch.cat(outs, dim=-1)\n",
}}
