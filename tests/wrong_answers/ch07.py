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

WRONG_ANSWERS = {
    "ex-07-causal-softmax": CAUSAL_SOFTMAX,
    "ex-07-decoder-mask": DECODER_MASK,
    "ex-07-decoder-block": DECODER_BLOCK,
}
