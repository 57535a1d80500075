"""Self-checks of chapter 6 (Cross-attention)."""

from __future__ import annotations

import torch

from .core import Guard, Hint, close, register


def _reference_cross(x, context, W_query, W_key, W_value):
    """The answer to ex-06-cross, written out so the check does not depend on the package."""
    queries = x @ W_query  # (T_q, d_k)
    keys = context @ W_key  # (T_kv, d_k)
    values = context @ W_value  # (T_kv, d_v)
    weights = torch.softmax(queries @ keys.T / keys.shape[-1] ** 0.5, dim=-1)  # (T_q, T_kv)
    return weights @ values, weights


def _unpack_pair(result, what: str):
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise Hint(f"{what} must return a pair (context_vectors, attention_weights), got {type(result).__name__}")
    context_vectors, weights = result
    for name, value in (("context_vectors", context_vectors), ("attention_weights", weights)):
        if not isinstance(value, torch.Tensor):
            raise Hint(f"{name} must be a tensor, got {type(value).__name__}")
    return context_vectors, weights


PRODUCT_HINT = (
    "the matrix products do not fit together: queries = x @ W_query is (T_q, d_k), "
    "keys = context @ W_key is (T_kv, d_k), scores = queries @ keys.T is (T_q, T_kv) and the output "
    "is weights @ values with values = context @ W_value"
)


@register("ex-06-cross", "Cross-attention from two sequences")
def cross(cross_attention):
    generator = torch.Generator().manual_seed(6)
    T_q, T_kv, d_in, d_context, d_k, d_v = 6, 8, 3, 5, 2, 4
    x = torch.randn(T_q, d_in, generator=generator)
    context = torch.randn(T_kv, d_context, generator=generator)
    W_query = torch.randn(d_in, d_k, generator=generator)
    W_key = torch.randn(d_context, d_k, generator=generator)
    W_value = torch.randn(d_context, d_v, generator=generator)
    expected_out, expected_weights = _reference_cross(x, context, W_query, W_key, W_value)

    # Same embedding size for both sequences: an answer that swaps the sequences' roles still runs.
    x_same = torch.randn(T_q, d_in, generator=generator)
    context_same = torch.randn(T_kv, d_in, generator=generator)
    W_key_same = torch.randn(d_in, d_k, generator=generator)
    W_value_same = torch.randn(d_in, d_v, generator=generator)

    def call(*args):
        try:
            return _unpack_pair(cross_attention(*args), "cross_attention")
        except RuntimeError as err:
            if "cannot be multiplied" in str(err) or "size mismatch" in str(err) or "must match" in str(err):
                raise Hint(f"{PRODUCT_HINT} ({err})") from None
            raise

    def roles():
        out, weights = call(x_same, context_same, W_query, W_key_same, W_value_same)
        if weights.shape == (T_kv, T_q) or out.shape[0] == T_kv:
            raise Hint(
                f"your result has {T_kv} rows, one per context token: the queries must come from x "
                f"(one row per query token, {T_q} here) and the keys and values from context"
            )
        if weights.shape != (T_q, T_kv):
            raise Hint(f"attention_weights should be (T_q, T_kv) = {(T_q, T_kv)}, got {tuple(weights.shape)}")
        if out.shape != (T_q, d_v):
            raise Hint(f"context_vectors should be (T_q, d_v) = {(T_q, d_v)}, got {tuple(out.shape)}")

    def different_sizes():
        out, weights = call(x, context, W_query, W_key, W_value)
        if weights.shape != (T_q, T_kv) or out.shape != (T_q, d_v):
            raise Hint(
                f"with x {tuple(x.shape)} and context {tuple(context.shape)} expected weights "
                f"{(T_q, T_kv)} and context vectors {(T_q, d_v)}, got {tuple(weights.shape)} and "
                f"{tuple(out.shape)}"
            )

    def normalised_over_keys():
        _, weights = call(x, context, W_query, W_key, W_value)
        if close(weights.sum(dim=0), torch.ones(T_kv)) and not close(weights.sum(dim=-1), torch.ones(T_q)):
            raise Hint(
                "each column sums to 1: the softmax ran over the queries (dim=0); every query "
                "distributes its attention over the keys, so use softmax(..., dim=-1)"
            )
        if not close(weights.sum(dim=-1), torch.ones(T_q)):
            raise Hint("each row of attention_weights (one query) must sum to 1: apply softmax(..., dim=-1)")

    def scaled():
        _, weights = call(x, context, W_query, W_key, W_value)
        raw_scores = (x @ W_query) @ (context @ W_key).T
        if close(weights, torch.softmax(raw_scores, dim=-1)):
            raise Hint(
                "the scores are not scaled: divide them by sqrt(d_k) = keys.shape[-1] ** 0.5 "
                "before the softmax"
            )
        for name, size in (("d_in", d_in), ("d_context", d_context), ("d_v", d_v), ("T_kv", T_kv)):
            if close(weights, torch.softmax(raw_scores / size**0.5, dim=-1)):
                raise Hint(
                    f"the scores are divided by sqrt({name}) = sqrt({size}); the scale is the "
                    f"square root of the keys' size d_k = keys.shape[-1] = {d_k}"
                )
        if close(weights, torch.softmax(raw_scores / d_k, dim=-1)):
            raise Hint(f"the scores are divided by d_k = {d_k}; divide by its square root instead")
        if not close(weights, expected_weights):
            raise Hint("the weights differ from softmax(queries @ keys.T / sqrt(d_k), dim=-1)")

    def output():
        out, _ = call(x, context, W_query, W_key, W_value)
        if not close(out, expected_out):
            raise Hint(
                "the weights are right but the context vectors are not: return "
                "attention_weights @ values, with values = context @ W_value"
            )

    def self_attention_special_case():
        out, weights = call(x_same, x_same, W_query, W_key_same, W_value_same)
        expected, _ = _reference_cross(x_same, x_same, W_query, W_key_same, W_value_same)
        if weights.shape != (T_q, T_q) or not close(out, expected):
            raise Hint("with context = x the result must be ordinary self-attention")

    def other_d_k():
        # d_k = 3 instead of 2: a scale written as 2 ** 0.5 (or a fixed size) shows here
        g = torch.Generator().manual_seed(16)
        W_q3 = torch.randn(d_in, 3, generator=g)
        W_k3 = torch.randn(d_context, 3, generator=g)
        out, weights = call(x, context, W_q3, W_k3, W_value)
        expected_out3, expected_weights3 = _reference_cross(x, context, W_q3, W_k3, W_value)
        if close(weights, expected_weights3) and close(out, expected_out3):
            return
        raw = (x @ W_q3) @ (context @ W_k3).T
        if close(weights, torch.softmax(raw / 2**0.5, dim=-1)):
            raise Hint(
                "with d_k = 3 your scores are still divided by sqrt(2): the scale is hard-coded; "
                "read d_k from the keys, keys.shape[-1] ** 0.5"
            )
        if close(weights, torch.softmax(raw / 3, dim=-1)):
            raise Hint("with d_k = 3 the scores are divided by d_k = 3; divide by its square root")
        if close(weights, torch.softmax(raw / d_v**0.5, dim=-1)):
            raise Hint(
                f"with d_k = 3 the scores are divided by sqrt(d_v) = sqrt({d_v}): the scale is "
                "the square root of the keys' size, keys.shape[-1] ** 0.5"
            )
        raise Hint(
            "correct for d_k = 2 but not for d_k = 3: take every size from the tensors' "
            "shapes, not from the example"
        )

    def order_of_context():
        # cross-attention reads the context as a set: shuffling its tokens changes nothing,
        # shuffling the queries shuffles the output rows the same way
        perm_kv = torch.tensor([3, 7, 0, 5, 1, 6, 2, 4])
        perm_q = torch.tensor([2, 0, 5, 1, 4, 3])
        out, _ = call(x, context, W_query, W_key, W_value)
        out_kv, _ = call(x, context[perm_kv], W_query, W_key, W_value)
        out_q, _ = call(x[perm_q], context, W_query, W_key, W_value)
        if not close(out_kv, out, atol=1e-5):
            raise Hint(
                "shuffling the context tokens changed your output: cross-attention has no "
                "notion of order between the two sequences; did you add a causal mask? The "
                "decoder's cross-attention may read every context token"
            )
        if not close(out_q, out[perm_q], atol=1e-5):
            raise Hint(
                "shuffling the query tokens should shuffle the output rows the same way: each "
                "query is handled on its own (no mask between queries and context tokens)"
            )

    return [
        ("every row of weights sums to 1", normalised_over_keys),
        ("scores scaled by sqrt(d_k)", scaled),
        ("context vectors = weights @ values", output),
        ("cross(x, x) is self-attention", self_attention_special_case),
        ("works for another d_k", other_d_k),
        Guard("shuffling the context changes nothing", order_of_context),
        Guard("queries from x, keys and values from context", roles),
        Guard("works when the two sequences have different sizes", different_sizes),
    ]


def _reference_padded_softmax(scores, key_padding_mask):
    mask = key_padding_mask[:, None, :]  # (B, 1, T_kv)
    fully_padded = mask.all(dim=-1, keepdim=True)  # (B, 1, 1)
    weights = torch.softmax(scores.masked_fill(mask & ~fully_padded, float("-inf")), dim=-1)
    return weights.masked_fill(fully_padded, 0.0)


@register("ex-06-padding", "Hide the padding without NaN")
def padding(padded_softmax):
    generator = torch.Generator().manual_seed(60)
    B, T_q, T_kv = 2, 3, 5
    scores = torch.randn(B, T_q, T_kv, generator=generator)
    # sequence 0: 3 real tokens then 2 pads; sequence 1: 4 real tokens then 1 pad
    lengths = torch.tensor([3, 4])
    key_padding_mask = torch.arange(T_kv)[None, :] >= lengths[:, None]  # (B, T_kv), True = pad
    expected = _reference_padded_softmax(scores, key_padding_mask)

    def call(scores_in, mask_in):
        try:
            result = padded_softmax(scores_in.clone(), mask_in.clone())
        except RuntimeError as err:
            if "must match" in str(err) or "expanded size" in str(err) or "broadcast" in str(err):
                raise Hint(
                    "the (B, T_kv) mask does not line up with the (B, T_q, T_kv) scores: add a query "
                    f"axis, key_padding_mask[:, None, :] (shape (B, 1, T_kv)) ({err})"
                ) from None
            raise
        if not isinstance(result, torch.Tensor):
            raise Hint(f"return a tensor of weights, got {type(result).__name__}")
        if result.shape != scores_in.shape:
            raise Hint(f"the weights must have the scores' shape {tuple(scores_in.shape)}, got {tuple(result.shape)}")
        return result

    def padding_gets_zero():
        weights = call(scores, key_padding_mask)
        on_padding = weights.masked_select(key_padding_mask[:, None, :].expand_as(weights))
        on_real = weights.masked_select(~key_padding_mask[:, None, :].expand_as(weights))
        if torch.isnan(weights).any():
            raise Hint("the weights contain NaN although no sequence here is all padding")
        if close(weights, torch.zeros_like(weights)):
            raise Hint(
                "every weight is 0: each query must spread weight 1 over the real keys; "
                "softmax the scores with the padded keys filled with -inf"
            )
        if close(on_real, torch.zeros_like(on_real)) or (on_padding.abs().sum() > 0 and close(on_real.abs().sum(), 0.0)):
            raise Hint(
                "the mask is inverted: key_padding_mask is True at padding tokens, so fill the scores "
                "where the mask is True (scores.masked_fill(mask, -inf)), not where it is False"
            )
        if not close(on_padding, torch.zeros_like(on_padding)):
            raise Hint("padded keys (mask True) must get weight exactly 0: fill their scores with -inf before the softmax")

    def rows_sum_to_one():
        weights = call(scores, key_padding_mask)
        sums = weights.sum(dim=-1)
        if close(weights, torch.softmax(scores, dim=-1).masked_fill(key_padding_mask[:, None, :], 0.0)):
            raise Hint(
                "the padded weights were zeroed after the softmax, so the rows no longer sum to 1: "
                "mask the scores before the softmax (or divide each row by its new sum)"
            )
        if not close(sums, torch.ones(B, T_q)):
            raise Hint(f"every query's weights over the real keys must sum to 1; the row sums are {sums.tolist()}")

    def mask_per_sequence():
        # B == T_q: a mask broadcast without the query axis runs but masks the wrong rows.
        square_scores = scores[:, :2]  # (2, 2, T_kv)
        weights = call(square_scores, key_padding_mask)
        misaligned = torch.softmax(square_scores.masked_fill(key_padding_mask, float("-inf")), dim=-1)
        if close(weights, misaligned):
            raise Hint(
                "the mask was broadcast as (1, B, T_kv), so query i of every sequence used the mask of "
                "sequence i: index it as key_padding_mask[:, None, :] to get (B, 1, T_kv)"
            )
        if not close(weights, _reference_padded_softmax(square_scores, key_padding_mask)):
            raise Hint("with B == T_q the weights are wrong: each sequence must use its own row of the mask")

    def fully_padded_row():
        mask = key_padding_mask.clone()
        mask[1] = True  # sequence 1 is all padding (e.g. an empty prompt)
        weights = call(scores, mask)
        if torch.isnan(weights).any():
            raise Hint(
                "a sequence whose keys are all padding gives NaN: softmax of a row of -inf is 0/0. "
                "Give such rows all-zero weights, e.g. leave their scores unmasked for the softmax "
                "and zero the rows afterwards with weights.masked_fill(fully_padded, 0)"
            )
        uniform = torch.full((T_q, T_kv), 1.0 / T_kv)
        if close(weights[1], uniform, atol=1e-4):
            raise Hint(
                "a fully padded sequence gets uniform weights 1/T_kv over the padding (what a finite "
                "fill like -1e9 gives): the rule here is all-zero weights for such rows, so the "
                "query takes nothing from the padding"
            )
        if not close(weights[1], torch.zeros(T_q, T_kv)):
            raise Hint("a sequence whose keys are all padding must get all-zero weights")
        if not close(weights[0], expected[0]):
            raise Hint("the sequence with real tokens changed when the other one was fully padded")

    def leaves_scores_alone():
        scores_copy = scores.clone()
        padded_softmax(scores_copy, key_padding_mask.clone())
        if not torch.equal(scores_copy, scores):
            raise Hint(
                "the function changed the scores passed in (masked_fill_ works in place): use the "
                "out-of-place scores.masked_fill(...) so the caller's tensor stays as it was"
            )

    def finite_gradients():
        # the trap chapter 6 shows: an answer whose forward pass is right can still send NaN
        # backwards (an additive -inf mask, or zeroing NaN weights after the softmax)
        mask = key_padding_mask.clone()
        mask[1] = True  # sequence 1 is all padding
        scores_in = scores.clone().requires_grad_(True)
        weights = padded_softmax(scores_in * 1.0, mask.clone())  # not a leaf: in place ok
        if not isinstance(weights, torch.Tensor) or not weights.requires_grad:
            raise Hint(
                "the weights must stay differentiable with respect to the scores (no .detach(), "
                "no torch.no_grad()), so the model can learn through them"
            )
        if torch.isnan(weights).any():
            raise Hint("fix the NaN in the forward pass first (see the test above)")
        loss = (weights * torch.arange(1.0, T_kv + 1)).sum()  # any loss that uses the weights
        loss.backward()
        grad = scores_in.grad
        if grad is None or torch.isnan(grad).any():
            raise Hint(
                "the gradient of the scores has NaN although the weights have none: the softmax "
                "computed NaN for the fully padded rows (an additive -inf mask, scores + mask, "
                "or masking with -inf everywhere) and zeroing those rows afterwards does not "
                "stop NaN flowing backwards (0 * NaN = NaN). Use masked_fill on the scores, "
                "leave fully padded rows finite before the softmax, then zero them"
            )
        if not close(grad[1], torch.zeros(T_q, T_kv)):
            raise Hint(
                "a fully padded sequence must get zero gradient: its weights are 0 whatever "
                "its scores are, so zero the whole row after the softmax with masked_fill"
            )
        hidden = key_padding_mask[0][None, :].expand(T_q, -1)
        if not close(grad[0][hidden], torch.zeros(int(hidden.sum()))):
            raise Hint(
                "padded keys still get a gradient: their weight must not depend on their "
                "scores; fill them with -inf (masked_fill) instead of adding a finite number"
            )

    return [
        ("padded keys get weight 0", padding_gets_zero),
        ("each query's weights sum to 1", rows_sum_to_one),
        ("each sequence uses its own mask row", mask_per_sequence),
        ("fully padded sequence: zeros, no NaN", fully_padded_row),
        ("finite gradients, zero through the padding", finite_gradients),
        Guard("scores are not modified in place", leaves_scores_alone),
    ]


# ---------------------------------------------------------------- ex-06-find-the-bug-half
# Find the bug: `masked_fill(mask, -1e9)` works in float32 and bfloat16 but raises in float16,
# whose largest number is 65504: -1e9 cannot be written into a float16 tensor. Every sequence
# here has a real key, so float("-inf") (or the dtype's most negative number) is the fix.

HALF = (
    "-1e9 does not fit in float16 (its largest number is 65504), so masked_fill raises in half "
    "precision; fill with float('-inf') (every row here has a real key, so no row becomes NaN) "
    "or with torch.finfo(scores.dtype).min"
)
_HALF_CASES = (  # dtype, padding rows of a (3, 5) key padding mask
    (torch.float32, "float32"), (torch.float16, "float16"), (torch.bfloat16, "bfloat16"),
    (torch.float64, "float64"),
)
_HALF_PADDING = torch.tensor([[False, False, False, True, True],
                              [False, False, False, False, False],
                              [True, False, False, False, True]])


def half_reference(scores, key_padding_mask):
    """Softmax over the keys with the padded keys at weight exactly 0, in the scores' dtype."""
    hidden = key_padding_mask[:, None, :]
    return torch.softmax(scores.float().masked_fill(hidden, float("-inf")), dim=-1).to(scores.dtype)


def _half_call(padded_weights, scores, pad, what):
    try:
        out = padded_weights(scores.clone(), pad.clone())
    except RuntimeError as err:
        if "overflow" in str(err) or "cannot be converted" in str(err):
            raise Hint(f"{what}: {HALF}") from None
        raise
    if not isinstance(out, torch.Tensor):
        raise Hint(f"return a tensor, got {type(out).__name__}")
    return out.detach()


def _half_diagnosis(out, scores, pad, what) -> str:
    want = half_reference(scores, pad)
    if out.shape != want.shape:
        return f"{what}: expected weights of shape {tuple(want.shape)}, got {tuple(out.shape)}"
    if out.dtype != scores.dtype:
        return (f"{what}: the weights must keep the scores' dtype {scores.dtype}, got {out.dtype}: "
                "convert back with .to(scores.dtype) if you computed in float32")
    weights, tolerance = out.float(), 1e-2
    hidden = pad[:, None, :].expand_as(weights)
    if torch.allclose(weights, half_reference(scores, ~pad).float(), atol=tolerance, equal_nan=True):
        return (f"{what}: the real keys get weight 0 and the padding does not: True in "
                "key_padding_mask marks the padding, the keys to hide")
    rows = torch.softmax(scores.float().masked_fill(pad[:, : scores.shape[1], None], float("-inf")), dim=-1)
    if torch.allclose(weights, rows, atol=tolerance, equal_nan=True):
        return (f"{what}: your mask hides query rows: the padding mask marks keys, so it must "
                "broadcast over the queries, key_padding_mask[:, None, :] (B, 1, T_k)")
    if torch.isnan(weights).any():
        return f"{what}: your weights contain NaN: hide only the padded keys"
    padded_zero = bool((weights[hidden] == 0).all())
    sums_one = close(weights.sum(dim=-1), torch.ones(weights.shape[:-1]), atol=tolerance)
    if padded_zero and not sums_one:
        return (f"{what}: the padded keys are at 0 but the rows no longer sum to 1: you zeroed them "
                "after the softmax; hide them before it, with -inf in the scores")
    if not padded_zero and sums_one:
        if torch.allclose(weights, torch.softmax(scores.float(), dim=-1), atol=tolerance):
            return f"{what}: the padding is not hidden at all: fill the padded keys' scores first"
        real_share = weights.masked_fill(hidden, 0.0).sum(dim=-1)
        if bool((real_share < 0.5).any()):
            return (f"{what}: the padded keys still get some weight: the fill value must beat every real "
                    "score, whatever they are; float('-inf') does")
    return ""


@register("ex-06-find-the-bug-half", "Find the bug: padding in half precision")
def half_padding(padded_weights):
    """Check the fixed ``padded_weights(scores, key_padding_mask)`` in four dtypes."""

    def case(dtype, name, shift=0.0, seed=0):
        generator = torch.Generator().manual_seed(seed)
        scores = (3.0 * torch.randn(3, 4, 5, generator=generator) + shift).to(dtype)
        what = f"{name} scores" + (f" near {shift:g}" if shift else "")
        out = _half_call(padded_weights, scores, _HALF_PADDING, what)
        want = half_reference(scores, _HALF_PADDING)
        tolerance = 1e-3 if dtype in (torch.float16, torch.bfloat16) else 1e-6
        if out.shape == want.shape and out.dtype == want.dtype and torch.allclose(
                out.float(), want.float(), atol=tolerance * 8) and bool(
                (out.float()[_HALF_PADDING[:, None, :].expand_as(out)] == 0).all()):
            return
        raise Hint(_half_diagnosis(out, scores, _HALF_PADDING, what) or (
            f"{what}: the weights differ from a softmax over the real keys"))

    def unchanged():
        scores = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(9))
        mine, pad = scores.clone(), _HALF_PADDING.clone()
        padded_weights(mine, pad)
        if not (torch.equal(mine, scores) and torch.equal(pad, _HALF_PADDING)):
            raise Hint("your function changed its inputs in place (masked_fill_ with an underscore?); "
                       "use scores.masked_fill(...), which returns a new tensor")

    return [
        ("float16 scores: no error, padded keys at 0", lambda: case(torch.float16, "float16")),
        ("float32 scores", lambda: case(torch.float32, "float32", seed=1)),
        ("bfloat16 and float64 scores", lambda: (case(torch.bfloat16, "bfloat16", seed=2),
                                                 case(torch.float64, "float64", seed=3))),
        ("very negative real scores (-30000): padding still at 0",
         lambda: case(torch.float32, "float32", shift=-30000.0, seed=4)),
        Guard("leaves the inputs unchanged", unchanged),
    ]
