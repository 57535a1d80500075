"""Plausible wrong answers to the coding exercises of chapter 10 (attention at scale)."""

from . import WrongAnswer

_IMPORTS = "import math\nimport torch\nimport torch.nn.functional as F\n"


def _flops(name, body, hint, non_attempt=False):
    code = _IMPORTS + "\ndef gpt_flops_per_token(n_layer, d_model, n_head, vocab_size, num_tokens):\n"
    code += "    L, d, H, V, T = n_layer, d_model, n_head, vocab_size, num_tokens\n" + body
    return WrongAnswer(name, code, hint, non_attempt)


FLOPS = [
    _flops("counts-multiply-adds", "    return L * (12 * d * d + 2 * T * d) + d * V\n", "you counted multiply-adds"),
    _flops("whole-sequence", "    return T * (L * (24 * d * d + 4 * T * d) + 2 * d * V)\n", "divide by the T tokens"),
    _flops("no-attention-core", "    return L * 24 * d * d + 2 * d * V\n", "the attention core is missing"),
    _flops("no-output-layer", "    return L * (24 * d * d + 4 * T * d)\n", "the output layer is missing"),
    _flops("embedding-counted", "    return L * (24 * d * d + 4 * T * d) + 4 * d * V\n",
           "the token embedding is a lookup"),
    _flops("mlp-as-wide-as-attention", "    return L * (12 * d * d + 4 * T * d) + 2 * d * V\n",
           "the MLP is d -> 4d -> d"),
    _flops("three-projections", "    return L * (22 * d * d + 4 * T * d) + 2 * d * V\n", "four projections"),
    _flops("causal-half", "    return L * (24 * d * d + 2 * (T + 1) * d) + 2 * d * V\n", "the causal half"),
    _flops("core-times-heads", "    return L * (24 * d * d + 4 * T * d * H) + 2 * d * V\n",
           "once per head with all d columns"),
    _flops("attention-layer-only-from-the-table", "    return 8 * d * d + 4 * T * d\n",
           "every matrix product of a block"),
    _flops("constant-non-attempt", "    return 0\n", "every matrix product of a block", non_attempt=True),
]


def _step(name, body, hint, non_attempt=False):
    code = _IMPORTS + "\ndef decode_step(query, new_key, new_value, cache_keys, cache_values):\n"
    return WrongAnswer(name, code + body, hint, non_attempt)


_CAT = ("    keys = torch.cat([cache_keys, new_key], dim=-2)\n"
        "    values = torch.cat([cache_values, new_value], dim=-2)\n")

KV_STEP = [
    _step("no-scale", _CAT + "    weights = torch.softmax(query @ keys.transpose(-2, -1), dim=-1)\n"
          "    return weights @ values, keys, values\n", "the scores are not scaled"),
    _step("softmax-over-queries", _CAT
          + "    scores = query @ keys.transpose(-2, -1) / query.shape[-1] ** 0.5\n"
          "    return torch.softmax(scores, dim=-2) @ values, keys, values\n",
          "the softmax runs over the wrong dimension"),
    _step("sdpa-is-causal", _CAT
          + "    context = F.scaled_dot_product_attention(query, keys, values, is_causal=True)\n"
          "    return context, keys, values\n", "aligns its mask top-left"),
    _step("forgets-itself",
          "    scores = query @ cache_keys.transpose(-2, -1) / query.shape[-1] ** 0.5\n"
          "    context = torch.softmax(scores, dim=-1) @ cache_values\n"
          + _CAT + "    return context, keys, values\n", "does not attend to itself"),
    _step("new-token-first",
          "    keys = torch.cat([new_key, cache_keys], dim=-2)\n"
          "    values = torch.cat([new_value, cache_values], dim=-2)\n"
          "    scores = query @ keys.transpose(-2, -1) / query.shape[-1] ** 0.5\n"
          "    return torch.softmax(scores, dim=-1) @ values, keys, values\n",
          "the new key is at the front"),
    _step("swaps-keys-and-values", _CAT
          + "    scores = query @ keys.transpose(-2, -1) / query.shape[-1] ** 0.5\n"
          "    return torch.softmax(scores, dim=-1) @ values, values, keys\n",
          "keys and values are swapped"),
    _step("cat-along-heads",
          "    keys = torch.cat([cache_keys, new_key], dim=1)\n"
          "    values = torch.cat([cache_values, new_value], dim=1)\n"
          "    return new_value, keys, values\n", "dim=-2"),
    _step("scales-query-in-place", "    query /= query.shape[-1] ** 0.5\n" + _CAT
          + "    weights = torch.softmax(query @ keys.transpose(-2, -1), dim=-1)\n"
          "    return weights @ values, keys, values\n", "changed its input tensors in place"),
    _step("cache-not-updated",
          "    keys = torch.cat([cache_keys, new_key], dim=-2)\n"
          "    values = torch.cat([cache_values, new_value], dim=-2)\n"
          "    scores = query @ keys.transpose(-2, -1) / query.shape[-1] ** 0.5\n"
          "    return torch.softmax(scores, dim=-1) @ values, cache_keys, cache_values\n",
          "still have 5 tokens"),
    _step("returns-inputs", "    return query, cache_keys, cache_values\n",
          "still have 5 tokens", non_attempt=True),
]


_CHUNK = ("import torch\nimport torch.nn.functional as F\n\n\ndef attend_new_tokens(queries, keys, values):\n"
          "    # queries (B, H, n, hd): the n newest tokens; keys, values (B, H, t + n, hd)\n"
          "    num_new, total = queries.shape[-2], keys.shape[-2]\n"
          "    hidden = torch.ones(num_new, total, dtype=torch.bool).triu(total - num_new + 1)\n")
CHUNK_MASK = [
    WrongAnswer("the-given-bug-book-mask-in-sdpa",
                _CHUNK + "    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=hidden)\n",
                "the mask means the opposite in SDPA"),
    WrongAnswer("is-causal-upper-left",
                _CHUNK + "    return F.scaled_dot_product_attention(queries, keys, values, is_causal=True)\n",
                "aligns the causal mask to the upper left"),
    WrongAnswer("no-mask",
                _CHUNK + "    return F.scaled_dot_product_attention(queries, keys, values)\n", "nothing is hidden"),
    WrongAnswer("diagonal-off-by-one",
                _CHUNK + "    allowed = ~torch.ones(num_new, total, dtype=torch.bool).triu(total - num_new)\n"
                "    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=allowed)\n",
                "does not see itself"),
    WrongAnswer("sees-the-next-token",
                _CHUNK + "    allowed = ~torch.ones(num_new, total, dtype=torch.bool).triu(total - num_new + 2)\n"
                "    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=allowed)\n",
                "sees the token after it"),
    WrongAnswer("upper-left-inverted-by-hand",
                _CHUNK + "    allowed = torch.ones(num_new, total, dtype=torch.bool).tril()\n"
                "    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=allowed)\n",
                "aligns the causal mask to the upper left"),
    WrongAnswer("values-non-attempt", _CHUNK + "    return values[..., -num_new:, :].clone()\n",
                "differs from causal attention", non_attempt=True),
]



def _rope(name, body, hint, non_attempt=False):
    code = _IMPORTS + "\ndef rotate(x, positions):\n"
    code += "    head_dim = x.shape[-1]\n"
    return WrongAnswer(name, code + body, hint, non_attempt)


_THETA = "    theta = 10000.0 ** (-torch.arange(0, head_dim, 2).float() / head_dim)\n"
_ANGLES = "    angles = positions.float()[:, None] * theta  # (T, hd/2)\n"
_PAIRS = "    a, b = x[..., 0::2], x[..., 1::2]\n"


def _turn(first, second):
    return ("    out = torch.stack((" + first + ", " + second + "), dim=-1)\n"
            "    return out.flatten(-2)\n")


_RIGHT_TURN = _turn("a * angles.cos() - b * angles.sin()", "a * angles.sin() + b * angles.cos()")

ROPE = [
    _rope("rotate-half-layout", _THETA + _ANGLES
          + "    a, b = x[..., :head_dim // 2], x[..., head_dim // 2:]\n"
          "    return torch.cat((a * angles.cos() - b * angles.sin(),\n"
          "                      a * angles.sin() + b * angles.cos()), dim=-1)\n",
          "rotate half"),
    _rope("clockwise", _THETA + _ANGLES + _PAIRS
          + _turn("a * angles.cos() + b * angles.sin()", "-a * angles.sin() + b * angles.cos()"),
          "turn the wrong way"),
    _rope("cos-and-sin-swapped", _THETA + _ANGLES + _PAIRS
          + _turn("a * angles.sin() - b * angles.cos()", "a * angles.cos() + b * angles.sin()"),
          "cos and sin are swapped"),
    _rope("exponent-counts-pairs-once",
          "    theta = 10000.0 ** (-torch.arange(head_dim // 2).float() / head_dim)\n"
          + _ANGLES + _PAIRS + _RIGHT_TURN, "fall too slowly"),
    _rope("frequencies-not-inverted",
          "    theta = 10000.0 ** (torch.arange(0, head_dim, 2).float() / head_dim)\n"
          + _ANGLES + _PAIRS + _RIGHT_TURN, "grow with the pair index"),
    _rope("ignores-the-position", _THETA + "    angles = theta.expand(len(positions), -1)\n"
          + _PAIRS + _RIGHT_TURN, "whatever its position"),
    _rope("index-instead-of-position", _THETA
          + "    angles = torch.arange(x.shape[-2]).float()[:, None] * theta\n"
          + _PAIRS + _RIGHT_TURN, "ignores the positions argument"),
    _rope("rotates-in-place", _THETA + _ANGLES
          + "    a, b = x[..., 0::2].clone(), x[..., 1::2].clone()\n"
          "    x[..., 0::2] = a * angles.cos() - b * angles.sin()\n"
          "    x[..., 1::2] = a * angles.sin() + b * angles.cos()\n"
          "    return x\n", "changed x in place"),
    _rope("pairs-as-a-new-dimension", _THETA + _ANGLES + _PAIRS
          + "    return torch.stack((a * angles.cos() - b * angles.sin(),\n"
          "                        a * angles.sin() + b * angles.cos()), dim=-1)\n",
          "flatten it back"),
    _rope("returns-x", "    return x\n", "not checked until the values are right", non_attempt=True),
]


def _gqa(name, body, hint, non_attempt=False):
    code = _IMPORTS + "\ndef grouped_attention(queries, keys, values):\n"
    code += ("    H, H_kv, T = queries.shape[1], keys.shape[1], queries.shape[2]\n"
             "    groups = H // H_kv\n"
             "    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)\n")
    return WrongAnswer(name, code + body, hint, non_attempt)


def _attend(scale="/ math.sqrt(queries.shape[-1])", mask=True, dim=-1):
    masked = ".masked_fill(hide, float('-inf'))" if mask else ""
    return (f"    scores = (queries @ keys.transpose(-2, -1) {scale}){masked}\n"
            f"    return torch.softmax(scores, dim={dim}) @ values\n")


_INTERLEAVE = ("    keys = keys.repeat_interleave(groups, dim=1)\n"
               "    values = values.repeat_interleave(groups, dim=1)\n")

GQA = [
    _gqa("tiles-the-heads", "    keys = keys.repeat(1, groups, 1, 1)\n"
         "    values = values.repeat(1, groups, 1, 1)\n" + _attend(), "you tiled the heads"),
    _gqa("not-causal", _INTERLEAVE + _attend(mask=False), "a query sees later tokens"),
    _gqa("no-scale", _INTERLEAVE + _attend(scale=""), "the scores are not scaled"),
    _gqa("first-head-for-all", "    keys = keys[:, :1].expand(-1, H, -1, -1)\n"
         "    values = values[:, :1].expand(-1, H, -1, -1)\n" + _attend(),
         "every query head reads key/value head 0"),
    _gqa("softmax-over-queries", _INTERLEAVE + _attend(dim=-2), "normalise over the keys"),
    _gqa("repeats-by-the-number-of-kv-heads", "    keys = keys.repeat_interleave(H_kv, dim=1)\n"
         "    values = values.repeat_interleave(H_kv, dim=1)\n" + _attend(),
         "repeat each key/value head for its group"),
    _gqa("uses-enable-gqa",
         "    return F.scaled_dot_product_attention(queries, keys, values, is_causal=True,\n"
         "                                          enable_gqa=True)\n",
         "write the grouping yourself"),
    _gqa("averages-the-queries-of-a-group",
         "    queries = queries.unflatten(1, (H_kv, groups)).mean(dim=2)\n" + _attend(),
         "the queries' shape"),
    _gqa("returns-queries", "    return queries\n", "not checked until the values are right", non_attempt=True),
]

WRONG_ANSWERS = {
    "ex-10-flops": FLOPS,
    "ex-10-kv-step": KV_STEP,
    "ex-10-chunk-mask": CHUNK_MASK,
    "ex-10-rope": ROPE,
    "ex-10-gqa": GQA,
}


# ---------------------------------------------------------------- ex-10-sdpa
_SDPA = ('''import torch
import torch.nn.functional as F


def fused_attention(query, key, value, key_padding_mask=None, causal=False,
                    dropout=0.0, training=False, scale=None):
    T_q, T_k = query.shape[-2], key.shape[-2]
    hidden = torch.zeros(T_q, T_k, dtype=torch.bool)
    if causal:
        hidden = hidden | torch.ones(T_q, T_k, dtype=torch.bool).triu(1)
    if key_padding_mask is not None:
        hidden = hidden | key_padding_mask[:, None, None, :]
''')
_ZERO_ROWS = ("    return out.masked_fill(hidden.all(dim=-1, keepdim=True), 0.0)\n")


def _sdpa(call: str) -> str:
    return _SDPA + "    out = " + call + "\n" + _ZERO_ROWS


SDPA = [
    WrongAnswer("book-mask-passed-as-is", _sdpa(
        "F.scaled_dot_product_attention(query, key, value, attn_mask=hidden,\n"
        "        dropout_p=dropout if training else 0.0, scale=scale)"), "the mask means the opposite in SDPA"),
    WrongAnswer("padding-mask-not-reshaped", '''import torch
import torch.nn.functional as F


def fused_attention(query, key, value, key_padding_mask=None, causal=False,
                    dropout=0.0, training=False, scale=None):
    mask = None if key_padding_mask is None else ~key_padding_mask
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=causal and mask is None,
                                          dropout_p=dropout if training else 0.0, scale=scale)
''', "reshape key_padding_mask (B, T_k) to"),
    WrongAnswer("causal-dropped-with-padding", '''import torch
import torch.nn.functional as F


def fused_attention(query, key, value, key_padding_mask=None, causal=False,
                    dropout=0.0, training=False, scale=None):
    if key_padding_mask is not None:  # is_causal cannot be combined with attn_mask: drop it
        return F.scaled_dot_product_attention(query, key, value, attn_mask=~key_padding_mask[:, None, None, :],
                                              dropout_p=dropout if training else 0.0, scale=scale)
    return F.scaled_dot_product_attention(query, key, value, is_causal=causal,
                                          dropout_p=dropout if training else 0.0, scale=scale)
''', "you passed only the padding"),
    WrongAnswer("dropout-in-eval", _sdpa(
        "F.scaled_dot_product_attention(query, key, value, attn_mask=~hidden,\n"
        "        dropout_p=dropout, scale=scale)"), "dropout is active with training=False"),
    WrongAnswer("dropout-never", _sdpa(
        "F.scaled_dot_product_attention(query, key, value, attn_mask=~hidden, scale=scale)"),
        "dropout is never applied"),
    WrongAnswer("scale-ignored", _sdpa(
        "F.scaled_dot_product_attention(query, key, value, attn_mask=~hidden,\n"
        "        dropout_p=dropout if training else 0.0)"), "the scale argument is ignored"),
    WrongAnswer("scale-as-divisor", _sdpa(
        "F.scaled_dot_product_attention(query, key, value, attn_mask=~hidden,\n"
        "        dropout_p=dropout if training else 0.0, scale=None if scale is None else 1 / scale)"),
        "not a divisor"),
    WrongAnswer("hand-written-core", _SDPA + '''    scores = query @ key.transpose(-2, -1) * (query.shape[-1] ** -0.5 if scale is None else scale)
    weights = torch.softmax(scores.masked_fill(hidden, float("-inf")), dim=-1).nan_to_num(0.0)
    weights = F.dropout(weights, dropout, training=training)
    return weights @ value
''', "write it with F.scaled_dot_product_attention instead of by hand"),
    # numerically right, by hand, in a helper of its own that carries PyTorch's name: the rule is
    # on what the function calls, not on what its helpers are called
    WrongAnswer("hand-written-core-named-sdpa", _SDPA + '''    return scaled_dot_product_attention(query, key, value, hidden, dropout if training else 0.0,
                                        scale, training)


def scaled_dot_product_attention(q, k, v, hidden, dropout_p, scale, training):
    scores = q @ k.mT * (q.shape[-1] ** -0.5 if scale is None else scale)
    weights = scores.masked_fill(hidden, float("-inf")).softmax(dim=-1).nan_to_num(0.0)
    return F.dropout(weights, dropout_p, training=training) @ v
''', "write it with F.scaled_dot_product_attention instead of by hand"),
    WrongAnswer("query-non-attempt", _SDPA + "    return query.clone()\n", "differs from the core",
                non_attempt=True),
]
SDPA_CORRECT = {
    "additive-float-mask": '''import torch
import torch.nn.functional as F


def fused_attention(query, key, value, key_padding_mask=None, causal=False,
                    dropout=0.0, training=False, scale=None):
    # a float mask is *added* to the scores: 0 where a key takes part, -inf where it is hidden
    T_q, T_k = query.shape[-2], key.shape[-2]
    bias = torch.zeros(T_q, T_k, dtype=query.dtype)
    if causal:
        bias = bias.masked_fill(torch.ones(T_q, T_k, dtype=torch.bool).triu(1), float("-inf"))
    if key_padding_mask is not None:
        bias = bias.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=bias,
                                         dropout_p=dropout * training, scale=scale)
    return torch.nan_to_num(out.masked_fill(torch.isinf(bias).all(-1, keepdim=True), 0.0))
''',
    "is-causal-when-it-can": '''import torch
import torch.nn.functional as F


def fused_attention(query, key, value, key_padding_mask=None, causal=False,
                    dropout=0.0, training=False, scale=None):
    p = dropout if training else 0.0
    if key_padding_mask is None:  # no padding: is_causal is enough (and the fastest)
        return F.scaled_dot_product_attention(query, key, value, is_causal=causal, dropout_p=p, scale=scale)
    allowed = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, T_k), True = takes part
    if causal:
        allowed = allowed & torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool).tril()
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=allowed, dropout_p=p, scale=scale)
    return torch.where(allowed.any(dim=-1, keepdim=True), out, torch.zeros_like(out))
''',
    "view-and-where": '''import torch
from torch.nn import functional


def fused_attention(query, key, value, key_padding_mask=None, causal=False,
                    dropout=0.0, training=False, scale=None):
    B = query.shape[0]
    keep = torch.ones(B, 1, query.shape[-2], key.shape[-2], dtype=torch.bool)
    if causal:
        keep = keep & torch.ones_like(keep[0, 0]).tril()
    if key_padding_mask is not None:
        keep = keep & ~key_padding_mask.view(B, 1, 1, -1)
    out = functional.scaled_dot_product_attention(query, key, value, attn_mask=keep,
                                                  dropout_p=dropout if training else 0.0, scale=scale)
    return out * keep.any(-1, keepdim=True)
''',
    # SDPA reached by other names: a module-level alias, the module imported under another name
    "module-level-alias": '''import torch
import torch.nn.functional as F

sdpa = F.scaled_dot_product_attention  # a short name for the fused kernel


def fused_attention(query, key, value, key_padding_mask=None, causal=False,
                    dropout=0.0, training=False, scale=None):
    keep = torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool)
    if causal:
        keep = keep.tril()
    if key_padding_mask is not None:
        keep = keep & ~key_padding_mask[:, None, None, :]
    out = sdpa(query, key, value, attn_mask=keep, dropout_p=dropout if training else 0.0, scale=scale)
    return torch.where(keep.any(-1, keepdim=True), out, 0.0)
''',
    "imported-under-other-names": '''import torch
import torch.nn.functional as nnf
from torch.nn.functional import scaled_dot_product_attention as fused


def fused_attention(query, key, value, key_padding_mask=None, causal=False,
                    dropout=0.0, training=False, scale=None):
    p = dropout if training else 0.0
    if key_padding_mask is None:
        return nnf.scaled_dot_product_attention(query, key, value, is_causal=causal, dropout_p=p, scale=scale)
    keep = ~key_padding_mask[:, None, None, :]
    if causal:
        keep = keep & torch.ones(query.shape[-2], key.shape[-2], dtype=torch.bool).tril()
    return fused(query, key, value, attn_mask=keep, dropout_p=p, scale=scale) * keep.any(-1, keepdim=True)
''',
}
WRONG_ANSWERS["ex-10-sdpa"] = SDPA
CHUNK_CORRECT = {
    "inverted": _CHUNK + "    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=~hidden)\n",
    "causal-lower-right": "import torch.nn.functional as F\nfrom torch.nn.attention.bias import causal_lower_right\n\n\n"
                          "def attend_new_tokens(queries, keys, values):\n"
                          "    bias = causal_lower_right(queries.shape[-2], keys.shape[-2])\n"
                          "    return F.scaled_dot_product_attention(queries, keys, values, attn_mask=bias)\n",
    "by-hand-with-positions": "import torch\n\n\ndef attend_new_tokens(queries, keys, values):\n"
                              "    n, total = queries.shape[-2], keys.shape[-2]\n"
                              "    position = torch.arange(total - n, total)[:, None]  # where each new token sits\n"
                              "    later = torch.arange(total)[None, :] > position\n"
                              "    scores = queries @ keys.mT / queries.shape[-1] ** 0.5\n"
                              '    return torch.softmax(scores.masked_fill(later, float("-inf")), dim=-1) @ values\n',
}
CORRECT_ANSWERS = {"ex-10-sdpa": SDPA_CORRECT, "ex-10-chunk-mask": CHUNK_CORRECT}


# ---------------------------------------------------------------- ex-10-cached-generation
_GENERATE = open(__file__.replace("ch10.py", "_generate_cached.py")).read()


def _generate(name, *replacements, hint, non_attempt=False):
    code = _GENERATE
    for old, new in replacements:
        assert old in code, old
        code = code.replace(old, new)
    return WrongAnswer(name, code, hint, non_attempt)


_POSITIONS = "positions = torch.arange(position, position + T, device=ids.device)"
_MASK = "hidden = torch.ones(T, total, dtype=torch.bool, device=ids.device).triu(total - T + 1)"
CACHED_GENERATION = [
    _generate("no-cache-full-forward", ("@torch.no_grad()\ndef generate_cached(model, ids, max_new_tokens):",
                                        "@torch.no_grad()\ndef generate_cached(model, ids, max_new_tokens):\n"
                                        "    for _ in range(max_new_tokens):\n"
                                        "        next_id = model(ids)[:, -1].argmax(dim=-1, keepdim=True)\n"
                                        "        ids = torch.cat([ids, next_id], dim=1)\n"
                                        "    return ids\n\n\ndef unused(model, ids, max_new_tokens):"),
              hint="each step must project only the new token"),
    _generate("positions-restart", (_POSITIONS, "positions = torch.arange(T, device=ids.device)"),
              hint="every step gives the new token position 0"),
    _generate("prefill-without-mask", ("            " + _MASK + "\n", ""), ("scores = (q @ k.transpose(-2, -1) / hd ** 0.5).masked_fill(hidden, float(\"-inf\"))",
                                                            "scores = q @ k.transpose(-2, -1) / hd ** 0.5"),
              hint="the prompt's tokens see each other without the causal mask"),
    _generate("no-final-norm", ("logits = model.lm_head(model.ln_f(x[:, -1]))", "logits = model.lm_head(x[:, -1])"),
              hint="the final layer norm is missing"),
    _generate("upper-left-mask", (_MASK, "hidden = torch.ones(T, total, dtype=torch.bool, device=ids.device).triu(1)"),
              hint="aligned to the upper left"),
    _generate("new-tokens-only", ("    return out\n", "    return out[:, ids.shape[1]:]\n"),
              hint="return the prompt followed by the new tokens"),
    _generate("cache-not-kept", ("            cache[index] = (k, v)\n", ""),
              hint="the tokens differ from generation without a cache"),
    _generate("prompt-non-attempt", ("@torch.no_grad()\ndef generate_cached(model, ids, max_new_tokens):",
                                     "@torch.no_grad()\ndef generate_cached(model, ids, max_new_tokens):\n"
                                     "    return torch.cat([ids, ids.new_zeros(ids.shape[0], max_new_tokens)], dim=1)\n"
                                     "\n\ndef unused(model, ids, max_new_tokens):"),
              hint="the tokens differ from generation without a cache", non_attempt=True),
]
WRONG_ANSWERS["ex-10-cached-generation"] = CACHED_GENERATION
CORRECT_ANSWERS["ex-10-cached-generation"] = {
    "sdpa-and-lists": '''import torch
import torch.nn.functional as F


def generate_cached(model, ids, max_new_tokens):
    """Keys and values kept as lists of per-step tensors; SDPA for the core."""
    keys = [[] for _ in model.blocks]
    values = [[] for _ in model.blocks]
    out, step_ids = ids, ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            start = out.shape[1] - step_ids.shape[1]
            T = step_ids.shape[1]
            x = model.token_embedding(step_ids) + model.position_embedding(torch.arange(start, start + T))
            for block, k_list, v_list in zip(model.blocks, keys, values):
                attn = block.attn
                h = block.ln_1(x)
                q, k, v = (lin(h).unflatten(-1, (attn.num_heads, -1)).transpose(1, 2)
                           for lin in (attn.W_query, attn.W_key, attn.W_value))
                k_list.append(k)
                v_list.append(v)
                k_all, v_all = torch.cat(k_list, dim=2), torch.cat(v_list, dim=2)
                if T > 1:  # the prompt: causal among itself (nothing is cached yet)
                    ctx = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=True)
                else:  # one new token sees everything before it
                    ctx = F.scaled_dot_product_attention(q, k_all, v_all)
                x = x + attn.out_proj(ctx.transpose(1, 2).flatten(2))
                x = x + block.mlp(block.ln_2(x))
            step_ids = model.lm_head(model.ln_f(x[:, -1:])).argmax(-1)
            out = torch.cat([out, step_ids], dim=1)
    return out
''',
    "preallocated-cache": '''import torch


def generate_cached(model, ids, max_new_tokens):
    B, P = ids.shape
    total = P + max_new_tokens
    attn0 = model.blocks[0].attn
    shape = (len(model.blocks), B, attn0.num_heads, total, attn0.head_dim)
    K, V = torch.zeros(shape), torch.zeros(shape)  # filled as we go
    out = torch.empty(B, total, dtype=ids.dtype)
    out[:, :P] = ids
    filled, step = 0, ids
    with torch.no_grad():
        for _ in range(max_new_tokens):
            T = step.shape[1]
            x = model.token_embedding(step) + model.position_embedding(torch.arange(filled, filled + T))
            for layer, block in enumerate(model.blocks):
                attn, h = block.attn, block.ln_1(x)
                q = attn.W_query(h).view(B, T, attn.num_heads, -1).transpose(1, 2)
                K[layer, :, :, filled:filled + T] = attn.W_key(h).view(B, T, attn.num_heads, -1).transpose(1, 2)
                V[layer, :, :, filled:filled + T] = attn.W_value(h).view(B, T, attn.num_heads, -1).transpose(1, 2)
                k, v = K[layer, :, :, :filled + T], V[layer, :, :, :filled + T]
                key_pos = torch.arange(filled + T)[None, :]
                query_pos = torch.arange(filled, filled + T)[:, None]
                s = (q @ k.mT) / q.shape[-1] ** 0.5
                s = torch.where(key_pos > query_pos, float("-inf"), s)
                x = x + attn.out_proj((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1))
                x = x + block.mlp(block.ln_2(x))
            filled += T
            nxt = model.lm_head(model.ln_f(x))[:, -1].argmax(-1)
            out[:, filled] = nxt
            step = nxt[:, None]
    return out
''',
}
