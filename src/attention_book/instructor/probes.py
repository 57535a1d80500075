"""The kernel-side vocabulary of the hidden tests: fixed, public procedures that exercise an answer.

Hidden tests never send code to a submission's kernel (issue 19): a test that needs more than a
plain call (build a module, run a training step, take a gradient) names one of these procedures,
``student.probe("ch01.positions", seed=3, B=1, ...)``, and sends its inputs only. Each procedure
gets the notebook's namespace and the inputs, looks the answer up by its name, and returns data
(tensors, numbers, strings, tuples); the grader compares that data with the reference, computed
the same way on the chapter's own notebook, in its own process.

These procedures are public (they ship with the package): what the hidden tests check, their
inputs and their verdicts stay with the grader. Adding one: a function ``(ns, **inputs)`` here,
registered with :func:`probe`, that reads only names of the exercise it tests.
"""

from __future__ import annotations

from typing import Any, Callable, Dict

__all__ = ["PROBES", "probe"]

PROBES: Dict[str, Callable[..., Any]] = {}


def probe(name: str):
    def register(function):
        PROBES[name] = function
        return function

    return register


def _answer(ns: Dict[str, Any], name: str):
    if name not in ns:
        raise NameError(f"name '{name}' is not defined")
    return ns[name]


def _as_int_or_type(value):
    if hasattr(value, "item") and getattr(value, "numel", lambda: 0)() == 1:
        return ("tensor", int(value.item()))
    return value if isinstance(value, int) and not isinstance(value, bool) else ("type", repr(value)[:40])


# ---------------------------------------------------------------- chapter 1


@probe("ch01.positions")
def positions(ns, seed, B, T, C, context_length):
    """add_positions on a seeded batch; the result, the table's gradient, tokens + table rows."""
    import torch

    add_positions = _answer(ns, "add_positions")
    torch.manual_seed(seed)
    tokens = torch.randn(B, T, C)
    table = torch.nn.Embedding(context_length, C)
    result = add_positions(tokens, table)
    result.sum().backward()
    return (result, table.weight.grad, tokens + table.weight[:T])


@probe("ch01.which-token")
def which_token(ns, seed, vocab_size, C, context_length, long_rows, cases):
    """which_token on vectors built from seeded tables (some rows made long)."""
    import torch

    answer = _answer(ns, "which_token")
    torch.manual_seed(seed)
    token_embedding = torch.nn.Embedding(vocab_size, C)
    position_embedding = torch.nn.Embedding(context_length, C)
    with torch.no_grad():
        token_embedding.weight[long_rows] *= 12.0  # long rows win "largest dot product"
    found = []
    for token, position in cases:
        vector = (token_embedding.weight[token] + position_embedding.weight[position]).detach()
        found.append(_as_int_or_type(answer(vector, position, token_embedding, position_embedding)))
    return found


# ---------------------------------------------------------------- chapter 4


@probe("ch04.copy-weights")
def copy_weights(ns, seed, d_in, d_kq, d_v, dtype, inputs):
    """copy_into_linear(source, target) on seeded modules: weights before/after, copied, outputs."""
    import torch

    from attention_book.attention import SelfAttention, SelfAttentionParams

    copy_into_linear = _answer(ns, "copy_into_linear")
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    torch.manual_seed(seed)
    source = SelfAttentionParams(d_in, d_kq, d_v).to(dtype)
    target = SelfAttention(d_in, d_kq, d_v).to(dtype)
    before = {n: getattr(source, n).detach().clone() for n in ("W_query", "W_key", "W_value")}
    copy_into_linear(source, target)
    with torch.no_grad():
        out, want = target(inputs.to(dtype)), source(inputs.to(dtype))
    return (before, {n: getattr(source, n).detach() for n in before},
            {n: getattr(target, n).weight.detach() for n in before}, out, want)


@probe("ch04.permutation")
def permutation(ns, seed, x, permutation):
    """is_permutation_equivariant on five modules (two equivariant, three not)."""
    import torch

    answer = _answer(ns, "is_permutation_equivariant")
    torch.manual_seed(seed)
    T, d = x.shape

    class Attention(torch.nn.Module):  # self-attention without positions: equivariant
        def __init__(self):
            super().__init__()
            self.W = torch.nn.Linear(d, 3, bias=False)

        def forward(self, inputs):
            values = self.W(inputs)
            return torch.softmax(values @ values.T / 3 ** 0.5, dim=-1) @ values

    class Positions(Attention):  # the same plus position vectors: not equivariant
        def __init__(self):
            super().__init__()
            self.positions = torch.nn.Parameter(torch.randn(T, d))

        def forward(self, inputs):
            return super().forward(inputs + self.positions)

    class RunningMean(torch.nn.Module):  # mixes tokens in order: not equivariant
        def forward(self, inputs):
            return inputs.cumsum(dim=0) / torch.arange(1, inputs.shape[0] + 1)[:, None]

    before = x.clone()
    answers = []
    for module in (torch.nn.Linear(d, 2), Attention(), Positions(), RunningMean(), torch.nn.Identity()):
        value = answer(module, x, permutation)
        if hasattr(value, "item") and getattr(value, "numel", lambda: 0)() == 1:
            value = bool(value.item())
        answers.append(value if isinstance(value, bool) else repr(value)[:40])
    return (answers, bool(torch.equal(x, before)))


# ---------------------------------------------------------------- chapter 5


@probe("ch05.torch-twin")
def torch_twin(ns, d, num_heads, qkv_bias, causal, seed, x):
    """to_torch_attention(mha) on a seeded MultiHeadAttention: type, sizes, output, independence."""
    import torch
    from torch import nn

    from attention_book.masks import causal_mask
    from attention_book.multihead import MultiHeadAttention

    to_torch_attention = _answer(ns, "to_torch_attention")
    torch.manual_seed(seed)
    mha = MultiHeadAttention(d, d, 8, 0.0, num_heads=num_heads, qkv_bias=qkv_bias, causal=causal)
    with torch.no_grad():  # clearly non-zero biases, so a forgotten copy shows
        for parameter in mha.parameters():
            if parameter.dim() == 1:
                parameter.normal_()
    mha.eval()
    before = {name: p.detach().clone() for name, p in mha.named_parameters()}
    theirs = to_torch_attention(mha)
    kind = type(theirs).__name__ if not isinstance(theirs, nn.MultiheadAttention) else "MultiheadAttention"
    if kind != "MultiheadAttention":
        return (kind,)
    theirs.eval()
    with torch.no_grad():
        got = theirs(x, x, x, attn_mask=causal_mask(x.shape[1]) if causal else None, need_weights=False)[0]
    unchanged = all(torch.equal(p.detach(), before[n]) for n, p in mha.named_parameters())
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.add_(1.0)
    shared = [n for n, p in mha.named_parameters() if not torch.equal(p.detach(), before[n])]
    return (kind, theirs.embed_dim, theirs.num_heads, got, unchanged, shared)


@probe("ch05.head-contributions")
def head_contributions(ns, seed, x, d_out, num_heads, causal):
    """head_contributions(mha, x) on a seeded module; the whole output without its bias; unchanged."""
    import torch

    from attention_book.multihead import MultiHeadAttention

    answer = _answer(ns, "head_contributions")
    torch.manual_seed(seed)
    mha = MultiHeadAttention(x.shape[-1], d_out, 16, 0.0, num_heads=num_heads, causal=causal, qkv_bias=True).eval()
    before = {name: p.detach().clone() for name, p in mha.named_parameters()}
    parts = answer(mha, x)
    with torch.no_grad():
        whole = mha(x)
    return (parts, whole - mha.out_proj.bias.detach(),
            all(torch.equal(p.detach(), before[n]) for n, p in mha.named_parameters()))


# ---------------------------------------------------------------- chapter 7


@probe("ch07.meta-device")
def meta_device(ns, name, shape, dtype):
    """The answer ``name`` on a tensor of the "meta" device: does its result stay there?"""
    import torch

    function = _answer(ns, name)
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    try:
        result = function(torch.empty(*shape, dtype=dtype, device="meta"))
        return ("ok", str(result.device) if isinstance(result, torch.Tensor) else type(result).__name__,
                tuple(result.shape) if isinstance(result, torch.Tensor) else None)
    except (RuntimeError, NotImplementedError) as err:
        return ("error", type(err).__name__, str(err)[:300])


@probe("ch07.decoder-block")
def decoder_block(ns, seed, x, encoder_output, padding, d_model, d_context, num_heads):
    """DecoderBlock on x, and with the last token, padded and visible encoder positions changed."""
    import torch

    block_class = _answer(ns, "DecoderBlock")
    torch.manual_seed(seed)
    block = block_class(d_model, d_context, num_heads, 16).eval()
    with torch.no_grad():
        out = block(x, encoder_output, padding)
        future = x.clone()
        future[:, -1] += 3.0
        out_future = block(future, encoder_output, padding)
        padded = encoder_output.clone()
        padded[padding] += 5.0
        out_padded = block(x, padded, padding)
        visible = encoder_output.clone()
        visible[~padding] += 5.0
        out_visible = block(x, visible, padding)
    return (out, out_future, out_padded, out_visible)


@probe("ch07.from-memory")
def from_memory(ns, config, params, x, mode, seed, calls=1, device=None):
    """CausalMultiHeadAttention(**config) in float64 holding ``params``, called ``calls`` times on x
    in ``mode`` ("eval" or "train"), or moved to ``device`` ("meta") first.

    Returns ``("ok", [outputs], x as the calls left it)``, ``("missing", what)`` when the module
    lacks chapter 5's layers, or ``("device", error)`` when it fails on the other device."""
    import torch

    from attention_book.checks.core import Hint
    from attention_book.checks.ch07 import load_from_memory_parameters

    answer = _answer(ns, "CausalMultiHeadAttention")
    torch.manual_seed(seed)
    module = answer(config["d_in"], config["d_out"], config["context_length"], config["dropout"],
                    config["num_heads"], qkv_bias=config["qkv_bias"])
    if not isinstance(module, torch.nn.Module):
        return ("missing", f"CausalMultiHeadAttention(...) made a {type(module).__name__}, not an nn.Module")
    module.double()
    try:
        load_from_memory_parameters(module, params, config["qkv_bias"])
    except Hint as hint:
        return ("missing", str(hint))
    module.train(mode == "train")
    x = x.clone()
    if device is not None:
        try:
            module.to(device)
            with torch.no_grad():
                out = module(torch.empty(x.shape, dtype=x.dtype, device=device))
        except (RuntimeError, NotImplementedError) as err:
            return ("device", str(err)[:300])
        return ("ok", [str(out.device) if isinstance(out, torch.Tensor) else type(out).__name__], x)
    outputs = []
    with torch.no_grad():
        for _ in range(calls):
            out = module(x)
            outputs.append(out if isinstance(out, torch.Tensor) else type(out).__name__)
    return ("ok", outputs, x)


@probe("ch07.mask-buffer")
def mask_buffer(ns, context_length, scores, device=None):
    """CausalWeights(context_length) on ``scores`` (or, with ``device``, moved there and run on an
    empty tensor of that shape): ``("ok", result or its device, parameter count)`` or
    ``("error", message)``."""
    import torch

    module = _answer(ns, "CausalWeights")(context_length)
    learnable = sum(p.numel() for p in module.parameters()) if isinstance(module, torch.nn.Module) else -1
    try:
        with torch.no_grad():
            if device is not None:
                out = module.to(device)(torch.empty(scores.shape, dtype=scores.dtype, device=device))
                return ("ok", str(out.device) if isinstance(out, torch.Tensor) else type(out).__name__, learnable)
            return ("ok", module(scores), learnable)
    except (RuntimeError, NotImplementedError) as err:
        if isinstance(err, NotImplementedError) and "meta" not in str(err):
            raise
        return ("error", str(err)[:300])


# ---------------------------------------------------------------- chapter 8


@probe("ch08.training-steps")
def training_steps(ns, seed, token_ids, vocab_size, optimizer_name, steps, contiguous):
    """training_step on a seeded HelloWorldModel: the values it returns and the parameters after."""
    import torch

    from attention_book.hello_world import HelloWorldModel

    training_step = _answer(ns, "training_step")
    torch.manual_seed(seed)
    model = HelloWorldModel(n_embd=6, context_length=token_ids.shape[1], vocab_size=vocab_size)
    optimizer = (torch.optim.AdamW(model.parameters(), lr=0.05) if optimizer_name == "AdamW"
                 else torch.optim.SGD(model.parameters(), lr=0.3))
    inputs, targets = token_ids[:, :-1], token_ids[:, 1:]  # slices of one tensor: not contiguous
    if contiguous:
        inputs, targets = inputs.contiguous(), targets.contiguous()
    returned = []
    for _ in range(steps):
        value = training_step(model, optimizer, inputs, targets)
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = float(value.detach())
        returned.append(value if isinstance(value, (int, float)) and not isinstance(value, bool)
                        else type(value).__name__)
    return (returned, {name: p.detach() for name, p in model.named_parameters()})


@probe("ch08.override")
def override(ns, seed, inputs, last_row, vocab_size, n_embd):
    """predict_with_last_row on a fresh seeded model; whether the model stayed unchanged."""
    import torch

    from attention_book.hello_world import HelloWorldModel

    answer = _answer(ns, "predict_with_last_row")
    torch.manual_seed(seed)
    fresh = HelloWorldModel(n_embd=n_embd, context_length=inputs.shape[1], vocab_size=vocab_size).eval()
    before = {name: p.detach().clone() for name, p in fresh.named_parameters()}
    predicted = answer(fresh, inputs, last_row)
    return (predicted, all(torch.equal(p.detach(), before[n]) for n, p in fresh.named_parameters()))


# ---------------------------------------------------------------- chapter 1: byte-pair decoding


@probe("ch01.bpe-decode")
def bpe_decode(ns, pairs, ids):
    """decode_tokens(ids, merges) with the merges numbered from 256 in the order given."""
    answer = _answer(ns, "decode_tokens")
    merges = {tuple(pair): 256 + rank for rank, pair in enumerate(pairs)}
    return answer(list(ids), merges)


# ---------------------------------------------------------------- chapter 2: additive scores


@probe("ch02.additive")
def additive(ns, seed, T_q, d_q, T_k, d_k, d_h):
    """additive_attention_scores on seeded inputs; the scores and the gradient of v."""
    import torch

    answer = _answer(ns, "additive_attention_scores")
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(T_q, d_q, generator=generator)
    keys = torch.randn(T_k, d_k, generator=generator)
    W_query = torch.randn(d_q, d_h, generator=generator)
    W_key = torch.randn(d_k, d_h, generator=generator)
    v = torch.randn(d_h, generator=generator, requires_grad=True)
    scores = answer(queries, keys, W_query, W_key, v)
    scores.sum().backward()
    return (scores, v.grad)


# ---------------------------------------------------------------- chapter 9: a GPT


@probe("ch09.block")
def transformer_block(ns, x, C, heads, seed, pre_norm=True):
    """transformer_block(x, ln_1, attn, ln_2, mlp, pre_norm=...) with seeded parts moved off their
    initial values; the output and x as the call left it."""
    import torch

    from attention_book.multihead import MultiHeadAttention

    answer = _answer(ns, "transformer_block")
    torch.manual_seed(seed)
    parts = [torch.nn.LayerNorm(C), MultiHeadAttention(C, C, 16, 0.0, heads, qkv_bias=True),
             torch.nn.LayerNorm(C),
             torch.nn.Sequential(torch.nn.Linear(C, 4 * C), torch.nn.GELU(approximate="tanh"),
                                 torch.nn.Linear(4 * C, C))]
    with torch.no_grad():
        for part in parts:
            for p in part.parameters():
                p.copy_(0.5 * torch.randn(p.shape) + (1.0 if p.ndim == 1 and p.shape[0] == C else 0.0))
    parts = [part.to(x.dtype).eval() for part in parts]
    x = x.clone()
    with torch.no_grad():
        out = answer(x, *parts, pre_norm=pre_norm)
    return (out, x)


# ---------------------------------------------------------------- chapter 10: generation with a KV cache


@probe("ch10.generate-cached")
def generate_cached(ns, sizes, seed, prompt, max_new_tokens):
    """generate_cached on a small seeded GPT (attention_book.checks.ch10.cache_test_model):
    the ids it returns and the token rows its key projections read."""
    from attention_book.checks.ch10 import cache_test_model, count_key_rows

    answer = _answer(ns, "generate_cached")
    model = cache_test_model(seed=seed, **sizes)
    counted, handles = count_key_rows(model)
    try:
        out = answer(model, prompt.clone(), max_new_tokens)
    finally:
        for handle in handles:
            handle.remove()
    return (out, counted[0])
