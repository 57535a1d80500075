"""Plausible wrong answers to the coding exercises of chapter 7 (causal attention)."""

from . import WrongAnswer

_IMPORTS = "import torch\n"


def _causal(body: str) -> str:
    return _IMPORTS + "\n\ndef causal_weights(scores):\n    T = scores.shape[-1]\n" + body


_SOFTMAX = '    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)\n'

CAUSAL_SOFTMAX = [
    WrongAnswer(
        "mask-then-renormalise",
        _causal('''    kept = torch.softmax(scores, dim=-1) * torch.tril(torch.ones(T, T))
    return kept / kept.sum(dim=-1, keepdim=True)
'''),
        "with large scores in the future your weights turn into NaN",
    ),
    WrongAnswer(
        "diagonal-hidden",
        _causal("    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=0)\n"
                + _SOFTMAX),
        "the mask hides the diagonal",
    ),
    WrongAnswer(
        "off-by-one-diagonal",
        _causal("    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=2)\n"
                + _SOFTMAX),
        "off by one",
    ),
    WrongAnswer(
        "wrong-triangle",
        _causal("    hide = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)\n"
                + _SOFTMAX),
        "you hid the past",
    ),
    WrongAnswer(
        "transposed-mask",
        _causal("    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1).T\n"
                + _SOFTMAX),
        "wrong triangle",
    ),
    WrongAnswer(
        "keep-mask-used-as-hide-mask",
        _causal("    hide = torch.tril(torch.ones(T, T)).bool()\n" + _SOFTMAX),
        "torch.tril(torch.ones(T, T)) marks the entries to KEEP",
    ),
    WrongAnswer(
        "zeroed-after-softmax",
        _causal("    return torch.softmax(scores, dim=-1) * torch.tril(torch.ones(T, T))\n"),
        "without renormalising",
    ),
    WrongAnswer(
        "no-mask",
        _causal("    return torch.softmax(scores, dim=-1)\n"),
        "tokens can still see the future",
    ),
    WrongAnswer(
        "softmax-over-queries",
        _causal("    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)\n"
                '    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-2)\n'),
        "take the softmax over the keys, dim=-1",
    ),
    WrongAnswer(
        "scaled-again",
        _causal("    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)\n"
                "    scores = scores / T ** 0.5\n" + _SOFTMAX),
        "already scaled",
    ),
    WrongAnswer(
        "length-from-first-axis",
        _IMPORTS + '''

def causal_weights(scores):
    T = scores.shape[0]
    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
''' + _SOFTMAX,
        "use scores.shape[-1] for T",
    ),
    WrongAnswer(
        "hard-coded-length",
        _IMPORTS + '''

def causal_weights(scores):
    hide = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
''' + _SOFTMAX,
        "a fixed number",
    ),
    WrongAnswer(
        "in-place",
        _causal('''    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores.masked_fill_(hide, float("-inf"))
    return torch.softmax(scores, dim=-1)
'''),
        "in place",
    ),
    WrongAnswer(
        "package-masked-softmax",
        _IMPORTS + '''from attention_book.functional import masked_softmax
from attention_book.masks import causal_mask


def causal_weights(scores):
    return masked_softmax(scores, causal_mask(scores.shape[-1]))
''',
        "write your own",
        non_attempt=True,
    ),
    WrongAnswer(
        "scores-unchanged-non-attempt",
        _causal("    return scores\n"),
        "row 0 must be [1, 0, 0, 0, 0]",
        non_attempt=True,
    ),
    WrongAnswer(
        "zeros-non-attempt",
        _causal("    return torch.zeros_like(scores)\n"),
        "diagonal are 0",
        non_attempt=True,
    ),
]


def _decoder(body: str) -> str:
    return (_IMPORTS + "\n\ndef decoder_mask(key_padding_mask):\n"
            "    B, T = key_padding_mask.shape\n" + body)


_FUTURE = "    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)\n"

DECODER_MASK = [
    WrongAnswer(
        "and-instead-of-or",
        _decoder(_FUTURE + "    return future & key_padding_mask[:, None, :]\n"),
        "use | (or)",
    ),
    WrongAnswer(
        "padding-on-query-rows",
        _decoder(_FUTURE + "    return future | key_padding_mask[:, :, None]\n"),
        "you hid the padded query rows instead of the padded key columns",
    ),
    WrongAnswer(
        "returns-visible",
        _decoder(_FUTURE + "    return ~(future | key_padding_mask[:, None, :])\n"),
        "you returned the visible entries",
    ),
    WrongAnswer(
        "diagonal-hidden",
        _decoder("    future = torch.triu(torch.ones(T, T, dtype=torch.bool))\n"
                 "    return future | key_padding_mask[:, None, :]\n"),
        "the diagonal is hidden",
    ),
    WrongAnswer(
        "off-by-one-diagonal",
        _decoder("    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=2)\n"
                 "    return future | key_padding_mask[:, None, :]\n"),
        "off by one",
    ),
    WrongAnswer(
        "wrong-triangle",
        _decoder("    past = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)\n"
                 "    return past | key_padding_mask[:, None, :]\n"),
        "wrong triangle: you hid the past",
    ),
    WrongAnswer(
        "causal-part-missing",
        _decoder("    return key_padding_mask[:, None, :].expand(B, T, T)\n"),
        "the causal part is missing",
    ),
    WrongAnswer(
        "padding-part-missing",
        _decoder(_FUTURE + "    return future\n"),
        "one (T, T) mask for the whole batch",
    ),
    WrongAnswer(
        "float-mask",
        _decoder(_FUTURE + "    return (future | key_padding_mask[:, None, :]).float()\n"),
        "return a boolean tensor",
    ),
    WrongAnswer(
        "assumes-right-padding",
        _decoder('''    lengths = (~key_padding_mask).sum(dim=-1)  # (B,)
    after_end = torch.arange(T)[None, :] >= lengths[:, None]  # (B, T)
''' + _FUTURE + "    return future | after_end[:, None, :]\n"),
        "your mask assumes right padding",
    ),
    WrongAnswer(
        "hard-coded-sizes",
        _IMPORTS + '''

def decoder_mask(key_padding_mask):
    future = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    return future | key_padding_mask.view(3, 1, 5)
''',
        "take B and T from key_padding_mask.shape",
    ),
    WrongAnswer(
        "in-place",
        _decoder(_FUTURE + '''    mask = future | key_padding_mask[:, None, :]
    key_padding_mask.fill_(False)
    return mask
'''),
        "changed key_padding_mask in place",
    ),
    WrongAnswer(
        "nothing-hidden-non-attempt",
        _decoder("    return torch.zeros(B, T, T, dtype=torch.bool)\n"),
        "your mask hides nothing",
        non_attempt=True,
    ),
    WrongAnswer(
        "padding-mask-returned-non-attempt",
        _decoder("    return key_padding_mask\n"),
        "the (B, T) padding mask itself",
        non_attempt=True,
    ),
]

_BLOCK_IMPORTS = '''import torch
from torch import nn

from attention_book.multihead import MultiHeadAttention
'''


def _block(init: str, forward: str) -> str:
    return (_BLOCK_IMPORTS + '''

class DecoderBlock(nn.Module):
    def __init__(self, d_model, d_context, num_heads, context_length):
        super().__init__()
''' + init + '''
    def forward(self, x, encoder_output, encoder_padding_mask=None):
''' + forward)


_SELF = ("        self.self_attention = MultiHeadAttention(\n"
         "            d_model, d_model, context_length, 0.0, num_heads, causal={causal})\n")
_CROSS = ("        self.cross_attention = MultiHeadAttention(\n"
          "            d_model, d_model, context_length, 0.0, num_heads, causal={causal},\n"
          "            kdim=d_context)\n")
_INIT = _SELF.format(causal=True) + _CROSS.format(causal=False)
_CROSS_CALL = ("self.cross_attention(x, context=encoder_output,\n"
               "                                     key_padding_mask=encoder_padding_mask)")

DECODER_BLOCK = [
    WrongAnswer(
        "self-attention-not-causal",
        _block(_SELF.format(causal=False) + _CROSS.format(causal=False), f'''        x = x + self.self_attention(x)
        return x + {_CROSS_CALL}
'''),
        "they see the future",
    ),
    WrongAnswer(
        "past-hidden-instead-of-future",
        _block(_SELF.format(causal=False) + _CROSS.format(causal=False), f'''        T = x.shape[1]
        past = torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)
        x = x + self.self_attention(x, attn_mask=past)
        return x + {_CROSS_CALL}
'''),
        "and not the past",
    ),
    WrongAnswer(
        "cross-attention-causal",
        _block(_INIT, '''        x = x + self.self_attention(x)
        T_q, T_k = x.shape[1], encoder_output.shape[1]
        future = torch.triu(torch.ones(T_q, T_k, dtype=torch.bool), diagonal=1)
        return x + self.cross_attention(x, context=encoder_output,
                                        key_padding_mask=encoder_padding_mask,
                                        attn_mask=future)
'''),
        "the cross-attention must not be causal",
    ),
    WrongAnswer(
        "padding-ignored",
        _block(_INIT, '''        x = x + self.self_attention(x)
        return x + self.cross_attention(x, context=encoder_output)
'''),
        "changing the encoder output at padded positions",
    ),
    WrongAnswer(
        "padding-on-self-attention",
        _block(_INIT, '''        x = x + self.self_attention(x, key_padding_mask=encoder_padding_mask)
        return x + self.cross_attention(x, context=encoder_output)
'''),
        "to the CROSS-attention",
    ),
    WrongAnswer(
        "padding-on-queries",
        _block(_INIT, '''        x = x + self.self_attention(x)
        update = self.cross_attention(x, context=encoder_output)
        if encoder_padding_mask is not None:  # zeroes decoder ROWS, not encoder keys
            update = update.masked_fill(encoder_padding_mask[:, :, None], 0.0)
        return x + update
'''),
        "not applied to the decoder's queries (rows)",
    ),
    WrongAnswer(
        "no-residuals",
        _block(_INIT, f'''        x = self.self_attention(x)
        return {_CROSS_CALL}
'''),
        "a residual connection is missing",
    ),
    WrongAnswer(
        "self-attention-residual-missing",
        _block(_INIT, f'''        x = self.self_attention(x)
        return x + {_CROSS_CALL}
'''),
        "a residual connection is missing",
    ),
    WrongAnswer(
        "encoder-ignored",
        _block(_SELF.format(causal=True) + _SELF.format(causal=True).replace(
            "self_attention", "second_attention"), '''        x = x + self.self_attention(x)
        return x + self.second_attention(x)
'''),
        "changing the encoder output changed nothing",
    ),
    WrongAnswer(
        "returns-input-non-attempt",
        _block(_INIT, "        return x\n"),
        "may attend to it",
        non_attempt=True,
    ),
    WrongAnswer(
        "zeros-non-attempt",
        _block(_INIT, "        return torch.zeros_like(x)\n"),
        "may attend to it",
        non_attempt=True,
    ),
]

# ---------------------------------------------------------------- ex-07-from-memory
# One right answer (the chapter's style), and each classic mistake made in it by replacing one
# piece of its text; FROM_MEMORY_CORRECT holds unusual right answers that must pass.

_FROM_MEMORY = """import torch
from torch import nn


class CausalMultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads,
                 qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "num_heads must divide d_out"
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the heads
        self.dropout = nn.Dropout(dropout)
        # True = hidden: key j after query i; a buffer moves with .to(device)
        self.register_buffer("mask", torch.triu(torch.ones(
            context_length, context_length, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        B, T, _ = x.shape  # (B, T, d_in)
        H, hd = self.num_heads, self.head_dim

        def split(t):  # (B, T, d_out) -> (B, H, T, hd)
            return t.view(B, T, H, hd).transpose(1, 2)

        queries = split(self.W_query(x))
        keys = split(self.W_key(x))
        values = split(self.W_value(x))
        scores = queries @ keys.transpose(-2, -1) / hd ** 0.5  # (B, H, T, T)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        context = weights @ values  # (B, H, T, hd)
        context = context.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, C)
        return self.out_proj(context)
"""


def _memory(*replacements):
    code = _FROM_MEMORY
    for old, new in replacements:
        assert old in code, old
        code = code.replace(old, new)
    return code


_SOFTMAX_LINE = "weights = self.dropout(torch.softmax(scores, dim=-1))"
_MASK_LINE = 'scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))'
_MERGE_LINE = "context = context.transpose(1, 2).reshape(B, T, H * hd)  # (B, T, C)"
_SPLIT_LINE = "return t.view(B, T, H, hd).transpose(1, 2)"
_BUFFER = """        self.register_buffer("mask", torch.triu(torch.ones(
            context_length, context_length, dtype=torch.bool), diagonal=1))"""

_CORE = ("        scores = queries @ keys.transpose(-2, -1) / hd ** 0.5  # (B, H, T, T)\n"
         "        " + _MASK_LINE + "\n"
         "        " + _SOFTMAX_LINE + "\n"
         "        context = weights @ values  # (B, H, T, hd)\n")
_FUSED_CALL = ("        context = {call}(\n"
               "            queries, keys, values, is_causal=True,\n"
               "            dropout_p=self.dropout.p if self.training else 0.0)\n")

FROM_MEMORY = [
    WrongAnswer("softmax-over-queries",
                _memory((_SOFTMAX_LINE, _SOFTMAX_LINE.replace("dim=-1", "dim=-2"))),
                "softmax over the wrong axis"),
    WrongAnswer("scaled-by-d_out",
                _memory(("/ hd ** 0.5", "/ (H * hd) ** 0.5")),
                "scale by d_out"),
    WrongAnswer("not-scaled", _memory((" / hd ** 0.5", "")), "the scores are not scaled"),
    WrongAnswer("heads-split-without-transpose",
                _memory((_SPLIT_LINE, "return t.view(B, H, T, hd)"),
                        (_MERGE_LINE, "context = context.reshape(B, T, H * hd)")),
                "heads split without the transpose"),
    WrongAnswer("heads-merged-without-transpose",
                _memory((_MERGE_LINE, "context = context.reshape(B, T, H * hd)")),
                "heads merged in the wrong order"),
    WrongAnswer("heads-merged-head-dim-first",
                _memory((_MERGE_LINE, "context = context.permute(0, 2, 3, 1).reshape(B, T, H * hd)")),
                "heads merged in the wrong order"),
    WrongAnswer("mask-after-softmax",
                _memory(("        " + _MASK_LINE + "\n", ""),
                        (_SOFTMAX_LINE, "weights = self.dropout(torch.softmax(scores, dim=-1)"
                                        ".masked_fill(self.mask[:T, :T], 0.0))")),
                "mask applied after the softmax"),
    WrongAnswer("no-output-projection",
                _memory(("return self.out_proj(context)", "return context")),
                "no output projection"),
    WrongAnswer("not-causal", _memory(("        " + _MASK_LINE + "\n", "")), "not causal"),
    WrongAnswer("wrong-triangle",
                _memory(("diagonal=1))", "diagonal=1).T)")),
                "not causal"),
    WrongAnswer("diagonal-hidden",
                _memory(("diagonal=1))", "diagonal=0))")),
                "each token hidden from itself"),
    WrongAnswer("dropout-in-eval-mode",
                _memory((_SOFTMAX_LINE, "weights = torch.nn.functional.dropout(\n"
                         "            torch.softmax(scores, dim=-1), self.dropout.p, training=True)")),
                "dropout active in eval mode"),
    WrongAnswer("fused-sdpa",
                _memory(("        scores = queries @ keys.transpose(-2, -1) / hd ** 0.5  # (B, H, T, T)\n"
                         "        " + _MASK_LINE + "\n"
                         "        " + _SOFTMAX_LINE + "\n"
                         "        context = weights @ values  # (B, H, T, hd)\n",
                         "        context = torch.nn.functional.scaled_dot_product_attention(\n"
                         "            queries, keys, values, is_causal=True,\n"
                         "            dropout_p=self.dropout.p if self.training else 0.0)\n")),
                "a fused kernel used"),
    WrongAnswer("fused-torch-module",
                """import torch
from torch import nn


class CausalMultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads,
                 qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.num_heads, self.dropout = num_heads, dropout

    def forward(self, x):
        T = x.shape[1]
        torch_mha = nn.MultiheadAttention(
            self.out_proj.in_features, self.num_heads, dropout=self.dropout,
            batch_first=True, kdim=x.shape[-1], vdim=x.shape[-1]).to(x.dtype)
        hidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        return torch_mha(self.W_query(x), self.W_key(x), self.W_value(x),
                         attn_mask=hidden, need_weights=False)[0]
""",
                "a fused kernel used"),
    # the fused kernels reached by other names: each is still PyTorch's attention, not yours
    WrongAnswer("fused-sdpa-getattr",
                _memory(("from torch import nn\n", "from torch import nn\nimport torch.nn.functional as F\n"),
                        (_CORE, "        kernel = getattr(F, \"scaled_\" + \"dot_product_attention\")\n"
                                + _FUSED_CALL.format(call="kernel"))),
                "a fused kernel used"),
    WrongAnswer("fused-sdpa-module-alias",
                _memory(("from torch import nn\n", "from torch import nn\nimport torch.nn.functional as F\n\n"
                                                   "attend = F.scaled_dot_product_attention\n"),
                        (_CORE, _FUSED_CALL.format(call="attend"))),
                "a fused kernel used"),
    WrongAnswer("fused-sdpa-imported-as",
                _memory(("from torch import nn\n", "from torch import nn\nfrom torch.nn.functional import "
                                                   "scaled_dot_product_attention as s\n"),
                        (_CORE, _FUSED_CALL.format(call="s"))),
                "a fused kernel used"),
    WrongAnswer("fused-sdpa-torch-C",
                _memory((_CORE, _FUSED_CALL.format(call="torch._C._nn.scaled_dot_product_attention"))),
                "a fused kernel used"),
    WrongAnswer("fused-torch-module-renamed",
                """import torch
from torch import nn
from torch.nn import MultiheadAttention as Mixer


class CausalMultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads,
                 qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        # identity projections inside: the mixing is all PyTorch's own attention
        self.mixer = Mixer(d_out, num_heads, dropout=dropout, bias=False,
                           batch_first=True)
        with torch.no_grad():
            self.mixer.in_proj_weight.copy_(torch.eye(d_out).repeat(3, 1))
            self.mixer.out_proj.weight.copy_(torch.eye(d_out))
        self.mixer.requires_grad_(False)
        self.register_buffer("mask", torch.triu(torch.ones(
            context_length, context_length, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        T = x.shape[1]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        mixed = self.mixer(q, k, v, attn_mask=self.mask[:T, :T],
                           need_weights=False)[0]
        return self.out_proj(mixed)
""",
                "a fused kernel used"),
    WrongAnswer("mask-not-sliced",
                _memory((_MASK_LINE, 'scores = scores.masked_fill(self.mask, float("-inf"))')),
                "self.mask[:T, :T]"),
    WrongAnswer("mask-as-plain-attribute",
                _memory((_BUFFER, """        self.mask = torch.triu(torch.ones(
            context_length, context_length, dtype=torch.bool), diagonal=1)""")),
                "stays behind when the module moves"),
    WrongAnswer("dropout-not-rescaled",
                _memory((_SOFTMAX_LINE, "weights = torch.softmax(scores, dim=-1)\n"
                         "        if self.training:  # keep each weight with probability 1 - p\n"
                         "            keep = torch.rand_like(weights) >= self.dropout.p\n"
                         "            weights = weights * keep")),
                "does not scale the others"),
    WrongAnswer("dropout-on-scores",
                _memory((_SOFTMAX_LINE, "weights = torch.softmax(self.dropout(scores), dim=-1)")),
                "apply dropout to the weights after the softmax"),
    WrongAnswer("additive-mask-nan",
                _memory((_MASK_LINE, "T_ones = torch.ones(T, T, dtype=x.dtype)\n"
                         '        scores = scores + torch.triu(T_ones, diagonal=1) * float("-inf")')),
                "0 * -inf = NaN"),
    WrongAnswer("qkv-bias-ignored",
                _memory(("self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)",
                         "self.W_query = nn.Linear(d_in, d_out, bias=False)")),
                "with qkv_bias=True the projections need biases"),
    WrongAnswer("subclasses-the-package",
                """import torch
from attention_book.multihead import MultiHeadAttention


class CausalMultiHeadAttention(MultiHeadAttention):
    pass
""",
                "write your own", non_attempt=True),
    WrongAnswer("zeros-non-attempt",
                _memory(("return self.out_proj(context)",
                         "return torch.zeros_like(self.out_proj(context))")),
                "differs from", non_attempt=True),
]

#: unusual but right answers: each must pass the self-check and the hidden tests
FROM_MEMORY_CORRECT = {
    "einsum-and-mT": """import math

import torch
from torch import nn


class CausalMultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads,
                 qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.drop = nn.Dropout(dropout)
        self.h = num_heads
        # a float buffer of 0 and -inf, added to the scores
        self.register_buffer("bias", torch.full(
            (context_length, context_length), float("-inf")).triu(1))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = (layer(x).unflatten(-1, (self.h, -1)).mT.transpose(-1, -2)
                   for layer in (self.W_query, self.W_key, self.W_value))
        # q, k, v: (b, t, h, hd) -> (b, h, t, hd) via .mT then swap back
        q, k, v = (z.permute(0, 2, 1, 3) for z in (q.mT.mT, k, v))
        att = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
        att = (att + self.bias[:t, :t]).softmax(-1)
        y = torch.einsum("bhqk,bhkd->bqhd", self.drop(att), v)
        return self.out_proj(y.flatten(2))
""",
    "stacked-qkv-and-where": """import torch
import torch.nn.functional as F
from torch import nn


def scaled_dot_product_attention(q, k, v, keep, dropout):
    # my own helper (the name is Hugging Face's and PyTorch's): no fused kernel here;
    # a comment that names attention_book does not make this the package's code
    s = (q @ k.transpose(-1, -2)) * q.size(-1) ** -0.5
    s = torch.where(keep, s, torch.tensor(float("-inf"), dtype=s.dtype))
    return dropout(F.softmax(s, dim=-1)) @ v


class CausalMultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads,
                 qkv_bias=False):
        super().__init__()
        for name in ("W_query", "W_key", "W_value"):
            setattr(self, name, nn.Linear(d_in, d_out, bias=qkv_bias))
        self.out_proj = nn.Linear(d_out, d_out)
        self.attn_dropout = nn.Dropout(dropout)
        self.n_head = num_heads

    def forward(self, x):
        B, T, C = x.shape
        weight = torch.cat([self.W_query.weight, self.W_key.weight,
                            self.W_value.weight])  # one stacked (3 d_out, d_in)
        bias = None
        if self.W_query.bias is not None:
            bias = torch.cat([self.W_query.bias, self.W_key.bias,
                              self.W_value.bias])
        q, k, v = F.linear(x, weight, bias).chunk(3, dim=-1)
        q, k, v = [z.reshape(B, T, self.n_head, -1).permute(0, 2, 1, 3)
                   for z in (q, k, v)]
        keep = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        y = scaled_dot_product_attention(q, k, v, keep, self.attn_dropout)
        y = y.permute(0, 2, 1, 3).contiguous().view(B, T, -1)
        return self.out_proj(y)
""",
    "method-named-like-pytorchs-kernel": """import torch
import torch.nn.functional as F
from torch import nn


class CausalMultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads,
                 qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.num_heads, self.p = num_heads, dropout
        self.register_buffer("hidden", torch.ones(
            context_length, context_length, dtype=torch.bool).triu(1))

    def scaled_dot_product_attention(self, q, k, v):
        # my own, by hand (PyTorch's fused kernel has the same name)
        T = q.shape[-2]
        scores = q @ k.mT / q.shape[-1] ** 0.5
        scores = scores.masked_fill(self.hidden[:T, :T], float("-inf"))
        weights = F.dropout(F.softmax(scores, dim=-1), self.p, self.training)
        return weights @ v

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = (layer(x).unflatten(-1, (self.num_heads, -1)).transpose(1, 2)
                   for layer in (self.W_query, self.W_key, self.W_value))
        context = self.scaled_dot_product_attention(q, k, v)
        return self.out_proj(context.transpose(1, 2).flatten(2))
""",
    "loop-over-heads": """import torch
from torch import nn


class CausalMultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads,
                 qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout_p = dropout
        self.num_heads = num_heads
        self.register_buffer(
            "keep", torch.tril(torch.ones(context_length, context_length)),
            persistent=False)

    def forward(self, x):
        T = x.shape[1]
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        size = queries.shape[-1] // self.num_heads
        heads = []
        for h in range(self.num_heads):  # one head at a time, columns h*size..
            cols = slice(h * size, (h + 1) * size)
            scores = queries[..., cols] @ keys[..., cols].transpose(1, 2)
            scores = scores.masked_fill(self.keep[:T, :T] == 0, -torch.inf)
            weights = torch.softmax(scores / size ** 0.5, dim=-1)
            weights = torch.nn.functional.dropout(
                weights, self.dropout_p, training=self.training)
            heads.append(weights @ values[..., cols])
        return self.out_proj(torch.cat(heads, dim=-1))
""",
    "renormalised-after-softmax-float-mask": """import torch
from torch import nn


class CausalMultiHeadAttention(nn.Module):
    # chapter 7's way 1: zero the future weights, then renormalise each row
    def __init__(self, d_in, d_out, context_length, dropout, num_heads,
                 qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.heads = num_heads

    def forward(self, x):
        B, T, _ = x.shape
        split = lambda t: t.view(B, T, self.heads, -1).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        scores = q @ k.mT / q.shape[-1] ** 0.5
        scores = scores - scores.amax(dim=-1, keepdim=True)
        visible = torch.ones(T, T, device=x.device, dtype=x.dtype).tril()
        weights = scores.exp() * visible
        weights = weights / weights.sum(dim=-1, keepdim=True)
        out = (self.dropout(weights) @ v).transpose(1, 2).flatten(2)
        return self.out_proj(out)
""",
}


# ---------------------------------------------------------------- ex-07-find-the-bug-buffer
_BUFFER_CLASS = ("import torch\nfrom torch import nn\n\n\nclass CausalWeights(nn.Module):\n"
                 "    def __init__(self, context_length):\n        super().__init__()\n")
_BUFFER_FORWARD = ("\n    def forward(self, scores):  # (..., T, T) -> (..., T, T)\n"
                   "        T = scores.shape[-1]\n"
                   '        return torch.softmax(scores.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)\n')
_TRIU = "torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)"
MASK_BUFFER = [
    WrongAnswer("the-given-bug-plain-attribute",
                _BUFFER_CLASS + f"        self.mask = {_TRIU}\n" + _BUFFER_FORWARD, "the mask stays behind"),
    WrongAnswer("mask-made-in-forward-on-the-cpu",
                _BUFFER_CLASS + "        self.context_length = context_length\n"
                "\n    def forward(self, scores):\n        T = scores.shape[-1]\n"
                "        hidden = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)\n"
                '        return torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1)\n',
                "the mask stays behind"),
    WrongAnswer("mask-as-a-parameter",
                _BUFFER_CLASS + f"        self.mask = nn.Parameter({_TRIU}, requires_grad=False)\n" + _BUFFER_FORWARD,
                "must not be a parameter"),
    WrongAnswer("buffer-not-sliced",
                _BUFFER_CLASS + f'        self.register_buffer("mask", {_TRIU})\n'
                "\n    def forward(self, scores):\n"
                '        return torch.softmax(scores.masked_fill(self.mask, float("-inf")), dim=-1)\n',
                "self.mask[:T, :T]"),
    WrongAnswer("buffer-wrong-triangle",
                _BUFFER_CLASS + f'        self.register_buffer("mask", {_TRIU.replace("triu", "tril").replace("diagonal=1", "diagonal=-1")})\n'
                + _BUFFER_FORWARD, "hide key j > query i"),
    WrongAnswer("buffer-diagonal-hidden",
                _BUFFER_CLASS + f'        self.register_buffer("mask", {_TRIU.replace("diagonal=1", "diagonal=0")})\n'
                + _BUFFER_FORWARD, "hide key j > query i"),
    WrongAnswer("buffer-no-mask-used",
                _BUFFER_CLASS + f'        self.register_buffer("mask", {_TRIU})\n'
                "\n    def forward(self, scores):\n        return torch.softmax(scores, dim=-1)\n",
                "hide key j > query i", non_attempt=False),
    WrongAnswer("uniform-non-attempt",
                _BUFFER_CLASS + f'        self.register_buffer("mask", {_TRIU})\n'
                "\n    def forward(self, scores):\n        return torch.full_like(scores, 1.0 / scores.shape[-1])\n",
                "softmax over the visible keys", non_attempt=True),
]
FROM_MEMORY_CORRECT_BUFFER = {
    "buffer-not-persistent": _BUFFER_CLASS + f'        self.register_buffer("mask", {_TRIU}, persistent=False)\n'
                             + _BUFFER_FORWARD,
    "made-in-forward-on-the-scores-device": _BUFFER_CLASS + "        pass  # nothing to keep: built per call\n"
    "\n    def forward(self, scores):\n        T = scores.shape[-1]\n"
    "        keep = torch.ones(T, T, dtype=torch.bool, device=scores.device).tril()\n"
    '        return scores.masked_fill(~keep, float("-inf")).softmax(-1)\n',
    "float-buffer-added": _BUFFER_CLASS + '        self.register_buffer("minus_inf", torch.full(\n'
    '            (context_length, context_length), float("-inf")).triu(1))\n'
    "\n    def forward(self, scores):\n        T = scores.shape[-1]\n"
    "        return torch.softmax(scores + self.minus_inf[:T, :T], dim=-1)\n",
}


WRONG_ANSWERS = {
    "ex-07-causal-softmax": CAUSAL_SOFTMAX,
    "ex-07-decoder-mask": DECODER_MASK,
    "ex-07-decoder-block": DECODER_BLOCK,
    "ex-07-from-memory": FROM_MEMORY,
    "ex-07-find-the-bug-buffer": MASK_BUFFER,
}
CORRECT_ANSWERS = {
    "ex-07-from-memory": FROM_MEMORY_CORRECT,
    "ex-07-find-the-bug-buffer": FROM_MEMORY_CORRECT_BUFFER,
}
