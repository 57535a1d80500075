"""Hidden tests of chapter 10 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import math
import numbers

import torch

from attention_book.instructor.hidden import Hint, RemoteNamespace, answer, hidden_test, randn


def _count(gpt_flops_per_token, *sizes):
    value = gpt_flops_per_token(*sizes)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise Hint(f"gpt_flops_per_token should return a number, got {type(value).__name__}")
    return value


# ---------------------------------------------------------------- ex-10-flops
# The count per token of chapter 9's GPT; the small sizes are measured with PyTorch's FLOP
# counter. The first test is the exercise's main value test (the scorer's main-value rule).


@hidden_test("ex-10-flops", "GPTs the self-check does not measure (one layer, one token, wide, long)", weight=2)
def flops_other_sizes(ns):
    from attention_book.checks.ch10 import _flops_diagnosis, gpt_flops_reference, measured_gpt_flops

    gpt_flops_per_token = answer(ns, "gpt_flops_per_token")
    for L, d, H, V, T in ((1, 8, 2, 11, 3), (4, 16, 4, 20, 1), (2, 40, 5, 33, 12)):
        value, expected = _count(gpt_flops_per_token, L, d, H, V, T), measured_gpt_flops(L, d, H, V, T)
        if not math.isclose(float(value), expected, rel_tol=1e-9):
            raise Hint(_flops_diagnosis(value, L, d, H, V, T) or (
                f"for n_layer={L}, d_model={d}, vocab_size={V}, num_tokens={T} the FLOP counter measures a "
                "different count: every product of a block, all T x T score pairs, and the output layer"))
    for L, d, H, V, T in ((48, 1600, 25, 50_257, 1024), (32, 4096, 32, 32_000, 131_072)):
        value = _count(gpt_flops_per_token, L, d, H, V, T)
        if not math.isclose(float(value), gpt_flops_reference(L, d, V, T), rel_tol=1e-9):
            raise Hint(f"for n_layer={L}, d_model={d}, vocab_size={V}, num_tokens={T}: write the count as a formula "
                       "(the small GPTs pass, large ones do not)")


@hidden_test("ex-10-flops", "the count does not depend on the number of heads", guard=True)
def flops_heads(ns):
    gpt_flops_per_token = answer(ns, "gpt_flops_per_token")
    if len({_count(gpt_flops_per_token, 3, 48, H, 70, 9) for H in (1, 2, 4, 8, 16)}) != 1:
        raise Hint("the count changes with the number of heads: H heads of d / H columns cost what one head of "
                   "d columns costs")


# ---------------------------------------------------------------- ex-10-kv-step


def _reference_step(query, new_key, new_value, cache_keys, cache_values):
    keys = torch.cat([cache_keys, new_key], dim=-2)
    values = torch.cat([cache_values, new_value], dim=-2)
    weights = torch.softmax(query @ keys.transpose(-2, -1) / query.shape[-1] ** 0.5, dim=-1)
    return weights @ values, keys, values


def _step(decode_step, *tensors):
    out = decode_step(*[t.clone() for t in tensors])
    if not isinstance(out, (tuple, list)) or len(out) != 3 or not all(isinstance(t, torch.Tensor) for t in out):
        raise Hint("decode_step should return three tensors (context, keys, values)")
    return [t.detach() for t in out]


@hidden_test("ex-10-kv-step", "one sequence, one head, head_dim 1 (sizes of 1 everywhere)")
def kv_sizes_of_one(ns):
    decode_step = answer(ns, "decode_step")
    for B, H, t, hd in ((1, 1, 1, 1), (1, 1, 3, 2), (3, 1, 2, 1)):
        tensors = [randn(B, H, 1, hd, seed=s) for s in (1, 2, 3)]
        tensors += [randn(B, H, t, hd, seed=4), randn(B, H, t, hd, seed=5)]
        got = _step(decode_step, *tensors)
        want = _reference_step(*tensors)
        for name, g, w in zip(("context", "keys", "values"), got, want):
            if tuple(g.shape) != tuple(w.shape):
                raise Hint(f"with B={B}, H={H}, t={t}, hd={hd} the {name} should have shape {tuple(w.shape)}, "
                           f"got {tuple(g.shape)}: keep every dimension (no .squeeze()) and concatenate "
                           "along dim=-2")
            if not torch.allclose(g, w, atol=1e-5):
                raise Hint(f"with B={B}, H={H}, t={t}, hd={hd} the {name} are wrong: scale by "
                           "query.shape[-1] ** 0.5 and attend over the cache followed by the new token")


@hidden_test("ex-10-kv-step", "large scores and a long float64 cache")
def kv_large_float64(ns):
    decode_step = answer(ns, "decode_step")
    B, H, t, hd = 2, 2, 40, 8
    tensors = [randn(B, H, 1, hd, seed=6, scale=40.0, dtype=torch.float64),
               randn(B, H, 1, hd, seed=7, scale=40.0, dtype=torch.float64),
               randn(B, H, 1, hd, seed=8, dtype=torch.float64),
               randn(B, H, t, hd, seed=9, scale=40.0, dtype=torch.float64),
               randn(B, H, t, hd, seed=10, dtype=torch.float64)]
    context, keys, values = _step(decode_step, *tensors)
    if not torch.isfinite(context).all():
        raise Hint("scores in the hundreds gave inf or nan: use torch.softmax (or subtract the maximum "
                   "before torch.exp) instead of exp(scores) / sum")
    if context.dtype != torch.float64 or keys.dtype != torch.float64:
        raise Hint(f"float64 inputs must give float64 outputs, got {context.dtype}: do not convert the dtype "
                   "or build the cache with a default-dtype torch.zeros(...)")
    want = _reference_step(*tensors)
    if not (torch.allclose(context, want[0], atol=1e-8) and torch.equal(keys, want[1])
            and torch.equal(values, want[2])):
        raise Hint(f"with a cache of {t} tokens and large scores the result differs from softmax(q k^T / "
                   "sqrt(hd)) @ v over the cache followed by the new token")


# ---------------------------------------------------------------- ex-10-chunk-mask
# Find the bug: the given code hands the book's mask (True = hidden) to SDPA (True = takes part).
# The first test is the exercise's main value test (the scorer's main-value rule).


def _chunk_case(ns, B, H, num_new, num_cached, hd, seed):
    from attention_book.checks.ch10 import chunk_diagnosis, chunk_reference

    attend_new_tokens = answer(ns, "attend_new_tokens")
    total = num_new + num_cached
    q, k, v = randn(B, H, num_new, hd, seed=seed), randn(B, H, total, hd, seed=seed + 1), randn(B, H, total, hd, seed=seed + 2)
    got = attend_new_tokens(q, k, v)
    want = chunk_reference(q, k, v)
    what = f"{num_new} new tokens after {num_cached} cached ones"
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        raise Hint(f"{what}: expected an output of shape {tuple(want.shape)}")
    if not torch.allclose(got, want, atol=1e-5):
        raise Hint(f"{what}: " + (chunk_diagnosis(got, q, k, v) or "the output differs from causal attention"))


@hidden_test("ex-10-chunk-mask", "new tokens after a cache: 1 after 9, 4 after 7, 2 after 1", weight=2)
def chunk_after_cache(ns):
    for num_new, num_cached, seed in ((1, 9, 600), (4, 7, 603), (2, 1, 606)):
        _chunk_case(ns, 2, 2, num_new, num_cached, 4, seed)


@hidden_test("ex-10-chunk-mask", "no cache, and a chunk longer than the cache")
def chunk_edges(ns):
    _chunk_case(ns, 1, 3, 3, 0, 8, 609)
    _chunk_case(ns, 1, 1, 9, 3, 2, 612)


@hidden_test("ex-10-chunk-mask", "the inputs stay unchanged", guard=True)
def chunk_unchanged(ns):
    attend_new_tokens = answer(ns, "attend_new_tokens")
    attend_new_tokens(randn(1, 2, 2, 4, seed=615), randn(1, 2, 5, 4, seed=616), randn(1, 2, 5, 4, seed=617))
    if attend_new_tokens.mutated:
        raise Hint("your function changed its inputs in place; build new tensors instead")


# ---------------------------------------------------------------- ex-10-rope


def _rotate(x, positions):
    """Pairs of neighbours turned by position * 10000 ** (-2 i / head_dim), in float64."""
    head_dim = x.shape[-1]
    theta = 10_000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = positions.double()[:, None] * theta
    a, b = x.double()[..., 0::2], x.double()[..., 1::2]
    turned = torch.stack((a * torch.cos(angles) - b * torch.sin(angles),
                          a * torch.sin(angles) + b * torch.cos(angles)), dim=-1)
    return turned.flatten(-2).to(x.dtype)


@hidden_test("ex-10-rope", "long positions, a wide head, float64 (the self-check's sizes differ)")
def rope_long_positions(student, reference):
    x = randn(1, 2, 4, 64, seed=41, dtype=torch.float64)
    positions = torch.tensor([1000, 1001, 1002, 4095])
    got = student.call("rotate", x, positions)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(x.shape):
        raise Hint(f"rotate(x, positions) must return a tensor of x's shape {tuple(x.shape)}")
    if got.dtype != torch.float64:
        raise Hint(f"a float64 x must give a float64 result, got {got.dtype}")
    # float32 angles (as in the chapter) round positions in the thousands to about 1e-4 rad
    if not torch.allclose(got, _rotate(x, positions), atol=5e-3):
        raise Hint("for positions in the thousands and head_dim 64 the rotation is wrong: pair "
                   "(2i, 2i + 1) turns by position * 10000 ** (-2 * i / head_dim), with the "
                   "positions given (not 0 .. T - 1)")


@hidden_test("ex-10-rope", "the smallest head (2 numbers, one pair) and a single token")
def rope_one_pair(student, reference):
    x = torch.tensor([[0.6, 0.8]])  # one token, one pair
    got = student.call("rotate", x, torch.tensor([2]))
    want = torch.tensor([[0.6 * math.cos(2) - 0.8 * math.sin(2), 0.6 * math.sin(2) + 0.8 * math.cos(2)]])
    if not isinstance(got, torch.Tensor) or not torch.allclose(got.float(), want, atol=1e-5):
        raise Hint("one pair (0.6, 0.8) at position 2 must turn by 2 radians counter-clockwise "
                   f"to {want.flatten().tolist()}; got {got if not isinstance(got, torch.Tensor) else got.tolist()}")


@hidden_test("ex-10-rope", "x left unchanged", guard=True)
def rope_no_mutation(student, reference):
    x = randn(2, 3, 6, seed=42)
    _, after = student.call_after("rotate", x, torch.arange(3))
    if not torch.equal(after["args"][0], x):
        raise Hint("rotate changed x in place: build a new tensor")


# ---------------------------------------------------------------- ex-10-gqa


def _grouped(queries, keys, values):
    groups = queries.shape[1] // keys.shape[1]
    keys = keys.repeat_interleave(groups, dim=1)
    values = values.repeat_interleave(groups, dim=1)
    T = queries.shape[-2]
    hide = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    scores = (queries @ keys.transpose(-2, -1) / queries.shape[-1] ** 0.5).masked_fill(hide, float("-inf"))
    return torch.softmax(scores, dim=-1) @ values


@hidden_test("ex-10-gqa", "groups of 4 and of 8, one token, float64")
def gqa_other_groupings(student, reference):
    for B, H, H_kv, T, hd in ((2, 8, 2, 7, 4), (1, 8, 1, 1, 2), (3, 12, 3, 5, 6)):
        q = randn(B, H, T, hd, seed=51, dtype=torch.float64)
        k = randn(B, H_kv, T, hd, seed=52, dtype=torch.float64)
        v = randn(B, H_kv, T, hd, seed=53, dtype=torch.float64)
        got = student.call("grouped_attention", q, k, v)
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != (B, H, T, hd):
            raise Hint(f"with {H} query heads and {H_kv} key/value heads the result must have shape "
                       f"{(B, H, T, hd)}")
        if not torch.allclose(got.double(), _grouped(q, k, v), atol=1e-8):
            raise Hint(f"with {H} query heads and {H_kv} key/value heads (groups of {H // H_kv}) the "
                       "context is wrong: query head h reads key/value head h // groups, causal, scaled "
                       "by 1/sqrt(head_dim)")


@hidden_test("ex-10-gqa", "large scores stay finite")
def gqa_large_scores(student, reference):
    q, k, v = randn(1, 4, 6, 8, seed=54, scale=30.0), randn(1, 2, 6, 8, seed=55, scale=30.0), randn(1, 2, 6, 8, seed=56)
    got = student.call("grouped_attention", q, k, v)
    if not isinstance(got, torch.Tensor) or not torch.isfinite(got).all():
        raise Hint("scores in the hundreds gave inf or nan: use torch.softmax (it subtracts the maximum)")
    if not torch.allclose(got, _grouped(q, k, v), atol=1e-4):
        raise Hint("with large scores the context differs from causal grouped attention")


@hidden_test("ex-10-gqa", "the grouping written by the student", guard=True)
def gqa_own_grouping(student, reference):
    if "enable_gqa" in student.source or "repeat_kv" in student.source:
        raise Hint("write the grouping yourself (no enable_gqa, no attention_book's repeat_kv)")
    answer(RemoteNamespace(student), "grouped_attention")


# ---------------------------------------------------------------- ex-10-sdpa
# fused_attention against the package's core (sdpa_reference), with the self-check's diagnosis.
# The first test is the exercise's main value test (the scorer's main-value rule).


def _sdpa_case(ns, shape, seed, what, **options):
    from attention_book.checks.ch10 import sdpa_diagnosis, sdpa_reference

    fused_attention = answer(ns, "fused_attention")
    B, H, T_q, T_k, hd = shape
    q, k, v = randn(B, H, T_q, hd, seed=seed), randn(B, H, T_k, hd, seed=seed + 1), randn(B, H, T_k, hd, seed=seed + 2)
    try:
        got = fused_attention(q, k, v, **options)
    except (RuntimeError, ValueError) as err:
        raise Hint(f"{what}: your code raised {type(err).__name__}; SDPA's attn_mask broadcasts to (B, H, T_q, T_k): "
                   "reshape the padding to (B, 1, 1, T_k), combine it with the causal part, invert it") from None
    masks = {key: value for key, value in options.items() if key in ("key_padding_mask", "causal", "scale")}
    want = sdpa_reference(q, k, v, **masks)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        raise Hint(f"{what}: expected an output of shape {tuple(want.shape)}")
    if not torch.allclose(got, want, atol=1e-5):
        raise Hint(f"{what}: " + (sdpa_diagnosis(got, q, k, v, **masks) or "the output differs from the core"))


@hidden_test("ex-10-sdpa", "masks against the core: causal, padding, both (left and right padding)", weight=3)
def sdpa_masks(ns):
    _sdpa_case(ns, (2, 2, 4, 4, 8), 500, "causal", causal=True)
    _sdpa_case(ns, (3, 1, 2, 5, 4), 503, "padding, B = 3, T_q = 2",
               key_padding_mask=torch.tensor([[False] * 5, [False, False, True, True, True], [False] * 4 + [True]]))
    _sdpa_case(ns, (2, 2, 4, 4, 4), 506, "left padding and causal", causal=True,
               key_padding_mask=torch.tensor([[True, True, True, False], [False, False, False, True]]))


@hidden_test("ex-10-sdpa", "a given scale, float64, one token")
def sdpa_scale(ns):
    _sdpa_case(ns, (1, 3, 5, 5, 2), 509, "scale=2.0", causal=True, scale=2.0)
    _sdpa_case(ns, (2, 1, 1, 1, 4), 512, "one token")


@hidden_test("ex-10-sdpa", "training=False: dropout off")
def sdpa_eval_dropout(ns):
    from attention_book.checks.ch10 import sdpa_reference

    fused_attention = answer(ns, "fused_attention")
    q, k, v = randn(2, 2, 5, 4, seed=515), randn(2, 2, 5, 4, seed=516), randn(2, 2, 5, 4, seed=517)
    got = fused_attention(q, k, v, causal=True, dropout=0.5, training=False)
    if not isinstance(got, torch.Tensor) or not torch.allclose(got, sdpa_reference(q, k, v, causal=True), atol=1e-5):
        raise Hint("with training=False dropout must be off: dropout_p=dropout if training else 0.0")


@hidden_test("ex-10-sdpa", "training=True: weights dropped with p and the rest rescaled")
def sdpa_train_dropout(ns):
    from attention_book.checks.ch07 import from_memory_dropout_verdict
    from attention_book.checks.ch10 import sdpa_reference

    fused_attention = answer(ns, "fused_attention")
    B, H, T, p = 6, 2, 6, 0.5
    q, k = randn(B, H, T, 8, seed=518), randn(B, H, T, 8, seed=519)
    v = torch.eye(T).expand(B, H, T, T).contiguous()  # each output row is a row of weights
    got = fused_attention(q, k, v, causal=True, dropout=p, training=True)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (B, H, T, T):
        raise Hint(f"expected an output of shape {(B, H, T, T)}")
    problem = from_memory_dropout_verdict(got.double(), sdpa_reference(q, k, v, causal=True).double(), None, p)
    if problem:
        raise Hint(problem.replace("create self.dropout = nn.Dropout(dropout)", "pass dropout_p=dropout"))


@hidden_test("ex-10-sdpa", "the inputs stay unchanged", guard=True)
def sdpa_unchanged(ns):
    fused_attention = answer(ns, "fused_attention")
    fused_attention(randn(2, 2, 3, 4, seed=520), randn(2, 2, 3, 4, seed=521), randn(2, 2, 3, 4, seed=522),
                    key_padding_mask=torch.tensor([[False, False, True], [False] * 3]), causal=True)
    if fused_attention.mutated:
        raise Hint("your function changed its inputs in place; build new tensors instead")


# ---------------------------------------------------------------- ex-10-cached-generation
# The learner's cached greedy loop on small seeded GPTs (probe "ch10.generate-cached"), against
# generation without a cache computed here on the same GPT. The first test is the exercise's
# main value test (the scorer's main-value rule); the second checks the caching itself.


def _generation(student, sizes, seed, B, P, n):
    from attention_book.checks.ch10 import cache_test_model, greedy_without_cache

    if not student.has("generate_cached"):
        raise Hint("`generate_cached` is not defined: run the cell that defines it (and keep its name)")
    prompt = torch.randint(0, sizes.get("vocab_size", 40), (B, P), generator=torch.Generator().manual_seed(seed + 50))
    got, rows = student.probe("ch10.generate-cached", sizes=sizes, seed=seed, prompt=prompt, max_new_tokens=n)
    want = greedy_without_cache(cache_test_model(seed=seed, **sizes), prompt, n)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        raise Hint(f"a prompt of shape {(B, P)} and {n} new tokens must give ids of shape {tuple(want.shape)}, "
                   "the prompt followed by the new tokens")
    if not torch.equal(got, want):
        raise Hint("the tokens differ from greedy generation without a cache: each step must compute what a full "
                   "forward pass computes for the last token (its position, every block with the cached keys and "
                   "values, ln_f, lm_head)")
    return rows


@hidden_test("ex-10-cached-generation", "the same tokens as generating without a cache (other GPTs and prompts)",
             weight=2)
def generation_same_tokens(student, reference):
    _generation(student, {"n_layer": 1, "d_model": 16, "n_head": 2, "vocab_size": 30, "context_length": 20},
                700, 3, 2, 12)
    _generation(student, {"n_layer": 4, "d_model": 24, "n_head": 3, "vocab_size": 50, "context_length": 12},
                701, 1, 11, 1)


@hidden_test("ex-10-cached-generation", "a cache: each step projects only the new token", weight=2)
def generation_caches(student, reference):
    sizes = {"n_layer": 2, "d_model": 16, "n_head": 4, "vocab_size": 30, "context_length": 24}
    B, P, n = 2, 4, 12
    rows = _generation(student, sizes, 702, B, P, n)
    if not isinstance(rows, int) or rows > B * (P + n) * sizes["n_layer"]:
        raise Hint("the key projections read every earlier token again at each step: project only the new token "
                   "and take the earlier keys and values from the cache")
