"""Self-checks for chapter 7 (causal attention).

* :func:`causal_softmax` - ``ex-07-causal-softmax``: scores ``(..., T, T)`` -> causal weights.
* :func:`decoder_mask` - ``ex-07-decoder-mask``: combine the causal mask with a key padding
  mask into one ``(B, T, T)`` boolean mask (right and left padding).
* :func:`decoder_block` - ``ex-07-decoder-block``: the capstone, a decoder block (causal
  self-attention, cross-attention to a padded encoder output, residuals) judged on values: its
  two attention layers' own weights are copied into a reference block
  (:func:`reference_decoder_block`, :mod:`attention_book.checks.modules`) and the outputs must
  match on several inputs (the grader does the same); then checked from the outside: change a
  future token, change a padded encoder position, compare a padded batch with unpadded runs.

Tests that a non-attempt would pass (the input left unchanged, the shape kept) are
:class:`~attention_book.checks.core.Guard` s: they count only once a value test passes.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ..masks import causal_mask
from .core import Guard, Hint, check_operations, close, register

__all__ = ["causal_softmax", "decoder_mask", "decoder_block", "reference_decoder_block", "block_structure_hint",
           "block_values_hint", "block_cases", "from_memory", "mask_buffer"]


def _scores(*shape: int, seed: int = 7) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator)


def _reference_causal(scores: torch.Tensor) -> torch.Tensor:
    hide = causal_mask(scores.shape[-1])
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)


def _as_tensor(out, what: str) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise Hint(
            f"{what} should return a tensor, got {type(out).__name__}; did you forget `return`?"
        )
    return out.detach().float()


def _strictly_upper(T: int) -> torch.Tensor:
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def _strictly_lower(T: int) -> torch.Tensor:
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)


# ---------------------------------------------------------------- ex-07-causal-softmax


@register("ex-07-causal-softmax", "Causal weights from scores")
def causal_softmax(causal_weights):
    """Check ``causal_weights(scores) -> weights`` on (T, T) and (B, T, T) scores."""
    T = 5
    scores = _scores(T, T)
    scores_before = scores.clone()
    out = _as_tensor(causal_weights(scores.clone()), "causal_weights(scores)")
    upper, lower = _strictly_upper(T), _strictly_lower(T)

    def shape():
        if out.shape != (T, T):
            raise Hint(
                f"for scores of shape ({T}, {T}) expected weights of shape ({T}, {T}), got "
                f"{tuple(out.shape)}; build the mask from scores.shape[-1] and keep one weight "
                "per (query, key) pair"
            )

    def first_token_sees_itself():
        shape()
        diagonal = torch.diagonal(out, dim1=-2, dim2=-1)
        future_nonzero = bool((out[upper].abs() > 1e-6).any())
        if torch.isnan(diagonal).any() or bool((diagonal.abs() < 1e-6).any()):
            if future_nonzero:
                raise Hint(
                    "the diagonal is hidden and the future is visible: the mask has the wrong "
                    "triangle. torch.tril(torch.ones(T, T)) marks the entries to KEEP "
                    "(1 = visible); hide where it is 0, e.g. scores.masked_fill(tril == 0, "
                    "float('-inf')), or hide torch.triu(torch.ones(T, T), diagonal=1).bool()"
                )
            first_row_nan = bool(torch.isnan(out[0]).any())
            raise Hint(
                "each token must be allowed to attend to itself, but your weights on the "
                "diagonal are 0"
                + (" (and row 0 came out as NaN: every entry of it was hidden)"
                   if first_row_nan else "")
                + "; the mask hides the diagonal: use torch.triu(..., diagonal=1) for the "
                "hidden entries (or torch.tril(..., diagonal=0) for the visible ones)"
            )
        if not close(out[0], torch.eye(T)[0], atol=1e-5):
            raise Hint(
                "the first token sees only itself, so row 0 must be [1, 0, 0, 0, 0], got "
                f"{[round(float(w), 4) for w in out[0]]}; hide every key after the query "
                "with -inf and take the softmax over dim=-1"
            )

    def hides_future():
        shape()
        if torch.isnan(out).any():
            raise Hint("the weights contain NaN; only entries above the diagonal may be hidden")
        visible_future = out[upper].abs() > 1e-6
        if bool(visible_future.any()):
            if bool((out[lower].abs() < 1e-6).all()):
                raise Hint(
                    "you hid the past (below the diagonal) instead of the future (above it): "
                    "the wrong triangle. Hide the entries where key index > query index, i.e. "
                    "torch.triu(torch.ones(T, T), diagonal=1).bool()"
                )
            next_token = torch.diagonal(out, offset=1).abs() > 1e-6
            further = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=2)
            if bool(next_token.all()) and not bool((out[further].abs() > 1e-6).any()):
                raise Hint(
                    "off by one: every token still sees the NEXT token (the first entry above "
                    "the diagonal); hide torch.triu(torch.ones(T, T), diagonal=1), not "
                    "diagonal=2"
                )
            raise Hint(
                "tokens can still see the future: entries above the diagonal (key after "
                "query) must be 0; fill them with float('-inf') before the softmax"
            )

    def rows_sum_to_one():
        shape()
        row_sums = out.sum(dim=-1)
        if close(row_sums, torch.ones(T), atol=1e-4):
            return
        plain = torch.softmax(scores_before, dim=-1)
        if close(out, plain * ~upper, atol=1e-4):
            raise Hint(
                "the future is zeroed but the rows no longer sum to 1: you masked after the "
                "softmax without renormalising. Put -inf into the future scores before the "
                "softmax instead"
            )
        if close(out.sum(dim=-2), torch.ones(T), atol=1e-4):
            raise Hint(
                "the columns sum to 1, not the rows: take the softmax over the keys, dim=-1"
            )
        raise Hint(
            "each row of weights must sum to 1, got row sums "
            f"{[round(float(s), 4) for s in row_sums]}"
        )

    def values():
        shape()
        expected = _reference_causal(scores_before)
        if close(out, expected, atol=1e-5):
            return
        for factor in (T ** 0.5, 2 ** 0.5):
            if close(out, _reference_causal(scores_before / factor), atol=1e-5):
                raise Hint(
                    "your weights are those of scaled scores: the function receives scores "
                    "that are already scaled, so apply the mask and the softmax without "
                    "dividing again"
                )
        raise Hint(
            "the weights differ from a softmax over the visible scores of each row; hide the "
            "future with -inf, then softmax over dim=-1"
        )

    def batched():
        batch_scores = _scores(3, 4, 4, seed=11)
        wrong_t = (
            "use scores.shape[-1] for T (not shape[0] or a fixed number) so the (T, T) mask "
            "broadcasts over the batch"
        )
        try:
            out_batch = _as_tensor(causal_weights(batch_scores.clone()), "causal_weights")
        except RuntimeError as err:
            raise Hint(
                f"a batch of scores (3, 4, 4) made your code fail ({err}); {wrong_t}"
            ) from None
        if out_batch.shape != (3, 4, 4):
            raise Hint(
                f"for a batch of scores (3, 4, 4) expected weights (3, 4, 4), got "
                f"{tuple(out_batch.shape)}; {wrong_t}"
            )
        if not close(out_batch, _reference_causal(batch_scores), atol=1e-5):
            raise Hint(
                "correct for one (T, T) matrix but not for a batch (B, T, T): take the "
                "softmax over dim=-1 and build the mask from scores.shape[-1]"
            )

    def large_future_scores():
        # visible scores near 0, future scores near 200: a softmax over ALL scores underflows
        # the visible weights to exactly 0 in float32, and renormalising divides 0 by 0
        large = _scores(T, T, seed=12) + 200.0 * upper
        expected = _reference_causal(large)
        got = _as_tensor(causal_weights(large.clone()), "causal_weights(scores)")
        if got.shape != expected.shape:
            raise Hint("fix the shape first (see the first test)")
        if torch.isnan(got).any():
            raise Hint(
                "with large scores in the future your weights turn into NaN: a softmax over "
                "all scores gives the visible entries weight 0 (underflow) and renormalising "
                "divides 0 by 0. Hide the future with -inf BEFORE the softmax, so future "
                "scores never enter it"
            )
        if not close(got, expected, atol=1e-5):
            raise Hint(
                "with large scores in the future your weights change: future scores must "
                "not influence the weights at all; use masked_fill(future, float('-inf')) "
                "before the softmax (a finite fill such as -100 is not enough)"
            )

    def input_untouched():
        copy_in = scores_before.clone()
        causal_weights(copy_in)
        if not torch.equal(copy_in, scores_before):
            raise Hint(
                "your function changed the caller's scores in place (masked_fill_ with an "
                "underscore); use scores.masked_fill(...) which returns a new tensor"
            )

    return [
        ("the first token attends only to itself", first_token_sees_itself),
        ("each row sums to 1", rows_sum_to_one),
        ("matches a softmax over the visible scores", values),
        ("works on a batch (B, T, T)", batched),
        ("large future scores: no NaN, no change", large_future_scores),
        Guard("future tokens get weight 0", hides_future),
        Guard("leaves the input scores unchanged", input_untouched),
    ]


# ---------------------------------------------------------------- ex-07-decoder-mask


def _reference_decoder_mask(key_padding_mask: torch.Tensor) -> torch.Tensor:
    return causal_mask(key_padding_mask.shape[-1]) | key_padding_mask[:, None, :]


def _decoder_diagnosis(out: torch.Tensor, pad: torch.Tensor) -> str:
    """A specific hint when ``out`` equals a typical wrong answer, else an empty string."""
    T = pad.shape[-1]
    ones = torch.ones(T, T, dtype=torch.bool)
    keys, queries = pad[:, None, :], pad[:, :, None]
    future = causal_mask(T)
    if out.dtype != torch.bool or out.shape != (pad.shape[0], T, T):
        return ""
    lengths = (~pad).sum(dim=-1)  # (B,)
    after_length = torch.arange(T)[None, :] >= lengths[:, None]  # right padding assumed
    wrong = [
        (future & keys, "you combined the masks with & (and): then an entry is hidden only "
         "if it is in the future AND a padding key. An entry must be hidden if either holds: "
         "use | (or)"),
        (future | queries, "you hid the padded query rows instead of the padded key columns: "
         "the padding mask must broadcast along the queries, key_padding_mask[:, None, :] "
         "(B, 1, T), not key_padding_mask[:, :, None]"),
        (future | queries | keys, "you hid the padded query rows as well as the padded key "
         "columns: only keys need the padding mask, key_padding_mask[:, None, :]"),
        (~_reference_decoder_mask(pad), "you returned the visible entries: True must mean "
         "hidden (the future and the padding keys), as masked_fill expects"),
        (torch.triu(ones, diagonal=0) | keys, "the diagonal is hidden: each (real) token "
         "must see itself; build the causal part with torch.triu(..., diagonal=1)"),
        (torch.triu(ones, diagonal=2) | keys, "off by one: each token sees the next token; "
         "build the causal part with torch.triu(..., diagonal=1), not diagonal=2"),
        (torch.tril(ones, diagonal=-1) | keys, "wrong triangle: you hid the past (below the "
         "diagonal) instead of the future; hide torch.triu(torch.ones(T, T), diagonal=1)"),
        (torch.tril(ones) | keys, "wrong triangle: torch.tril(torch.ones(T, T)) marks the "
         "entries to KEEP; the hidden causal part is "
         "torch.triu(torch.ones(T, T), diagonal=1).bool()"),
        (keys.expand(-1, T, -1), "the causal part is missing: future keys (j > i) must be "
         "hidden too"),
        (future.expand(pad.shape[0], T, T), "the padding part is missing: padding keys must "
         "be hidden from every query"),
        (future | after_length[:, None, :], "your mask assumes right padding (it hides every "
         "key after the sequence's length): with LEFT padding the padding comes first. Use "
         "the key_padding_mask itself, key_padding_mask[:, None, :], not the lengths"),
    ]
    if not bool(out.any()):
        return ("your mask hides nothing (all False): True must mark the hidden entries, the "
                "future keys (torch.triu(torch.ones(T, T), diagonal=1)) and the padding keys")
    for candidate, hint in wrong:
        if torch.equal(out, candidate):
            return hint
    return ""


# lengths 5, 3, 2 padded on the right, and the same lengths padded on the left
_RIGHT = torch.tensor([[False, False, False, False, False],
                       [False, False, False, True, True],
                       [False, False, True, True, True]])
_LEFT = torch.tensor([[False, False, False, False, False],
                      [True, True, False, False, False],
                      [True, True, True, False, False]])


@register("ex-07-decoder-mask", "One mask for a padded decoder batch")
def decoder_mask(make_mask):
    """Check ``make_mask(key_padding_mask (B, T)) -> (B, T, T)`` bool, True = hidden."""
    B, T = _RIGHT.shape

    def run(pad: torch.Tensor) -> torch.Tensor:
        try:
            out = make_mask(pad.clone())
        except RuntimeError as err:
            if pad.shape == _RIGHT.shape or "shape" not in str(err):
                raise
            raise Hint(
                f"a padding mask of shape {tuple(pad.shape)} made your code fail "
                f"({str(err).splitlines()[0]}): take B and T from key_padding_mask.shape "
                "instead of fixed numbers"
            ) from None
        if not isinstance(out, torch.Tensor):
            raise Hint(
                f"decoder_mask should return a tensor, got {type(out).__name__}; did you "
                "forget `return`?"
            )
        return out.detach().cpu()

    def bool_shape():
        out = run(_RIGHT)
        if out.shape != (B, T, T):
            what = {(T, T): "one (T, T) mask for the whole batch",
                    (B, T): "the (B, T) padding mask itself"}.get(tuple(out.shape), "")
            raise Hint(
                f"for a padding mask of shape ({B}, {T}) expected a mask of shape "
                f"({B}, {T}, {T}), got {tuple(out.shape)}" + (f" ({what})" if what else "")
                + "; combine the (T, T) causal mask with key_padding_mask[:, None, :] "
                "(B, 1, T) so broadcasting gives (B, T, T)"
            )
        if out.dtype != torch.bool:
            raise Hint(
                f"return a boolean tensor (True = hidden), got dtype {out.dtype}; masked_fill "
                "needs booleans: build both parts as bool and combine them with |"
            )

    def exact(pad: torch.Tensor, generic: str):
        bool_shape()
        out = run(pad)
        if not torch.equal(out, _reference_decoder_mask(pad)):
            raise Hint(_decoder_diagnosis(out, pad) or generic)

    def no_padding():
        exact(_RIGHT[:1], "for a sequence without padding the mask must be exactly the "
              "causal mask torch.triu(torch.ones(T, T), diagonal=1): every future key hidden, "
              "the token itself and the past visible")

    def right_padding():
        exact(_RIGHT, "with right padding, hide exactly the future keys and the padding keys "
              "(for every query); nothing else")

    def left_padding():
        exact(_LEFT, "with left padding (padding first), hide exactly the future keys and "
              "the padding keys; build the padding part from key_padding_mask[:, None, :]")

    def other_batch():
        other = torch.tensor([[False, False, False, True], [True, False, False, False]])
        got = run(other)
        if got.shape != (2, 4, 4) or not torch.equal(got, _reference_decoder_mask(other)):
            raise Hint(
                "correct for one batch but not for a (2, 4) padding mask: take B and T from "
                "key_padding_mask.shape instead of fixed numbers"
            )

    def input_untouched():
        pad = _RIGHT.clone()
        make_mask(pad)
        if not torch.equal(pad, _RIGHT):
            raise Hint(
                "your function changed key_padding_mask in place; build a new tensor instead"
            )

    return [
        ("no padding: exactly the causal mask", no_padding),
        ("right padding: future and padding keys hidden", right_padding),
        ("left padding: future and padding keys hidden", left_padding),
        ("works for another batch size and length", other_batch),
        Guard("returns a bool (B, T, T) mask", bool_shape),
        Guard("leaves the padding mask unchanged", input_untouched),
    ]


# ---------------------------------------------------------------- ex-07-decoder-block
# Judged on values: the student's block is built, its two attention layers' own weights are read
# out (checks/modules.py) and copied into the reference block below; outputs must match on
# several inputs. The grader does the same with the data of the ``module.values`` probe
# (instructor/hidden_tests/ch07.py), with these functions.

# The check's sizes: decoder width 8, encoder width 6, 2 heads, decoder and encoder length 5.
D_MODEL, D_CONTEXT, HEADS, T_DEC, T_ENC = 8, 6, 2, 5, 5

#: what the exercise's API fixes (stated in the exercise's text)
BLOCK_API = (
    "DecoderBlock must hold exactly two attention layers with chapter 5's parameter names "
    "(W_query, W_key, W_value, out_proj: the MultiHeadAttention class), a causal self-attention "
    "and a cross-attention, under any attribute names, and no other parameters"
)
#: named mistakes: (variant of the reference, hint)
BLOCK_MISTAKES = (
    ("self_not_causal", "the self-attention is not causal: build it with causal=True, so a "
                        "decoder token sees itself and earlier tokens only"),
    ("no_padding", "padded encoder positions are not hidden: pass encoder_padding_mask to the "
                   "cross-attention as key_padding_mask (True = padding)"),
    ("no_residuals", "the residual connections are missing: add each sub-layer's output to its "
                     "input, x = x + self_attention(x), then x = x + cross_attention(...)"),
    ("no_self_residual", "the residual around the self-attention is missing: x = x + self_attention(x)"),
    ("no_cross_residual", "the residual around the cross-attention is missing: "
                          "x = x + cross_attention(x, context=encoder_output, ...)"),
    ("parallel", "the cross-attention's queries must come from the self-attention's result "
                 "(x after x = x + self_attention(x)), not from the block's input"),
    ("cross_first", "the order is wrong: first the causal self-attention, then the cross-attention"),
    ("no_self", "the self-attention is missing: x = x + self_attention(x) comes first"),
    ("no_cross", "the cross-attention is missing: the decoder must read encoder_output"),
)


def _attend(layer, x, source, causal, key_padding_mask, num_heads):
    """One attention layer (chapter 5's multi-head attention) from its weights as data."""

    def project(tensor, name):
        weight, bias = layer.weights[name]
        out = tensor @ weight.T.to(tensor.dtype)
        return out + bias.to(tensor.dtype) if bias is not None else out

    queries, keys, values = project(x, "W_query"), project(source, "W_key"), project(source, "W_value")
    batch, num_queries, width = queries.shape
    num_keys, head_dim = keys.shape[1], width // num_heads

    def split(tensor):  # (B, T, width) -> (B, H, T, head_dim)
        return tensor.reshape(batch, tensor.shape[1], num_heads, head_dim).transpose(1, 2)

    scores = split(queries) @ split(keys).transpose(-2, -1) / head_dim ** 0.5
    hide = torch.zeros(num_queries, num_keys, dtype=torch.bool)
    if causal:
        hide = torch.triu(torch.ones(num_queries, num_keys, dtype=torch.bool), diagonal=1)
    hide = hide.expand(batch, 1, num_queries, num_keys)
    if key_padding_mask is not None:
        hide = hide | key_padding_mask[:, None, None, :]
    weights = torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1).nan_to_num(0.0)
    merged = (weights @ split(values)).transpose(1, 2).reshape(batch, num_queries, width)
    return project(merged, "out_proj")


def block_roles(layers, d_model: int, d_context: int):
    """``(self-attention, cross-attention)`` among two layers: the cross-attention's keys read the
    encoder (width ``d_context``); with equal widths, the first registered is the self-attention."""
    if len(layers) != 2:
        return None
    first, second = layers
    if d_context != d_model:
        reads = [layer.width_in("W_key") == d_context for layer in layers]
        if reads == [False, True]:
            return first, second
        if reads == [True, False]:
            return second, first
        return None
    return first, second


def reference_decoder_block(layers, x, encoder_output, padding=None, num_heads: int = HEADS, variant: str = ""):
    """What a decoder block with these two attention layers' weights returns (``variant``: one of
    :data:`BLOCK_MISTAKES`' names, for the hints)."""
    roles = block_roles(layers, x.shape[-1], encoder_output.shape[-1])
    if roles is None:
        return None
    self_layer, cross_layer = roles

    def self_part(h, causal=True):
        return _attend(self_layer, h, h, causal, None, num_heads)

    def cross_part(h, pad=padding):
        return _attend(cross_layer, h, encoder_output, False, pad, num_heads)

    if variant == "self_not_causal":
        h = x + self_part(x, causal=False)
        return h + cross_part(h)
    if variant == "no_padding":
        h = x + self_part(x)
        return h + cross_part(h, pad=None)
    if variant == "no_residuals":
        return cross_part(self_part(x))
    if variant == "no_self_residual":
        h = self_part(x)
        return h + cross_part(h)
    if variant == "no_cross_residual":
        return cross_part(x + self_part(x))
    if variant == "parallel":
        return x + self_part(x) + cross_part(x)
    if variant == "cross_first":
        h = x + cross_part(x)
        return h + self_part(h)
    if variant == "no_self":
        return x + cross_part(x)
    if variant == "no_cross":
        return x + self_part(x)
    h = x + self_part(x)
    return h + cross_part(h)


def block_structure_hint(layers, extra, d_model: int, d_context: int, num_heads: int):
    """A named hint when the block's parts are not the exercise's (else None)."""
    if len(layers) != 2:
        return (f"{BLOCK_API}; found {len(layers)} such layer{'' if len(layers) == 1 else 's'}: a block "
                "without attention can look causal and read the encoder, but it is not a decoder block")
    if block_roles(layers, d_model, d_context) is None:
        return ("the cross-attention's keys and values come from encoder_output, of width d_context: "
                "build it with kdim=d_context (and the self-attention without)")
    if extra:
        return (f"the block has parameters outside its two attention layers ({', '.join(extra[:4])}): "
                "the exercise's block is the two attention layers and the residual connections only")
    wrong = [layer.path for layer in layers if layer.num_heads is not None and layer.num_heads != num_heads]
    if wrong:
        return f"build both attention layers with num_heads={num_heads} (the block's argument)"
    return None


def block_values_hint(layers, cases, outputs, num_heads: int):
    """None when every output matches the reference block built from ``layers``; else the named
    mistake whose variant matches every case, or a general hint."""
    wrong = []
    for case, out in zip(cases, outputs):
        want = reference_decoder_block(layers, *case, num_heads=num_heads)
        if not (isinstance(out, torch.Tensor) and out.shape == want.shape
                and torch.allclose(out.to(want.dtype), want, atol=1e-4, rtol=1e-4)):
            wrong.append((case, out))
    if not wrong:
        return None
    for variant, hint in BLOCK_MISTAKES:
        if all(isinstance(out, torch.Tensor) and out.shape == case[0].shape and torch.allclose(
                out.to(case[0].dtype), reference_decoder_block(layers, *case, num_heads=num_heads, variant=variant),
                atol=1e-4, rtol=1e-4) for case, out in wrong):
            return hint
    case, out = wrong[0]
    if not isinstance(out, torch.Tensor) or out.shape != case[0].shape:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return (f"the block must keep the decoder's shape (B, T, d_model) = {tuple(case[0].shape)}, got {shape}; "
                "forward returns only the output (not the attention weights)")
    return ("the outputs differ from a decoder block built from your block's own attention weights: "
            "x = x + causal self-attention(x), then x = x + cross-attention(x, context=encoder_output, "
            "key_padding_mask=encoder_padding_mask), dropout 0")


def block_cases(seed: int = 3, d_model: int = D_MODEL, d_context: int = D_CONTEXT):
    """The inputs the values are compared on: a padded batch, another batch with left padding
    and holes, and the call without a padding mask (``None``)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(2, T_DEC, d_model, generator=generator)
    encoder_output = torch.randn(2, T_ENC, d_context, generator=generator)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    x2 = torch.randn(3, 2, d_model, generator=generator)
    encoder2 = torch.randn(3, 4, d_context, generator=generator)
    padding2 = torch.tensor([[False, False, False, True], [True, False, True, False], [False] * 4])
    x3 = torch.randn(1, 4, d_model, generator=generator)
    encoder3 = torch.randn(1, 3, d_context, generator=generator)
    return [(x, encoder_output, padding), (x2, encoder2, padding2), (x3, encoder3, None)]


def _build_block(DecoderBlock, seed: int = 0):
    from .modules import redraw

    with torch.random.fork_rng(devices=[]):  # leave the reader's random state untouched
        torch.manual_seed(seed)
        block = DecoderBlock(D_MODEL, D_CONTEXT, HEADS, 8)
    if not isinstance(block, torch.nn.Module):
        raise Hint(
            f"DecoderBlock(...) should create an nn.Module, got {type(block).__name__}"
        )
    redraw(block, seed + 1)  # clearly non-zero parameters, so every path shows
    return block.eval()


def _block_inputs(seed: int = 3):
    return block_cases(seed)[0]


@register("ex-07-decoder-block", "Capstone: a decoder block")  # may use MultiHeadAttention: checks/rules.py
def decoder_block(DecoderBlock):
    """Check ``DecoderBlock(d_model, d_context, num_heads, context_length)`` on values, then from
    the outside.

    ``block(x, encoder_output, encoder_padding_mask)``: x (B, T, d_model), encoder_output
    (B, T_enc, d_context), encoder_padding_mask (B, T_enc) bool with True = padding.
    """
    from .modules import attention_layers, extra_parameters, outputs_on

    block = _build_block(DecoderBlock)
    x, encoder_output, padding = _block_inputs()

    def run(module, x_in, enc_in, pad_in):
        with torch.no_grad():
            out = module(x_in.clone(), enc_in.clone(), pad_in.clone())
        if not isinstance(out, torch.Tensor):
            raise Hint(
                f"forward should return a tensor, got {type(out).__name__}; if you return "
                "(output, weights), return only the output"
            )
        if out.shape != x_in.shape:
            raise Hint(
                f"the block must keep the decoder's shape (B, T, d_model) = "
                f"{tuple(x_in.shape)}, got {tuple(out.shape)}; the queries come from x, the "
                "keys and values from encoder_output, and the output width is d_model"
            )
        return out

    def structure():
        layers = attention_layers(block)
        hint = block_structure_hint(layers, extra_parameters(block, layers), D_MODEL, D_CONTEXT, HEADS)
        if hint:
            raise Hint(hint)
        return layers

    def reference_values():
        layers = structure()
        cases = block_cases()
        outputs = []
        for case in cases:
            clone = [t.clone() if isinstance(t, torch.Tensor) else t for t in case]
            outputs.append(outputs_on(block, [clone])[0])
        hint = block_values_hint(layers, cases, outputs, HEADS)
        if hint:
            raise Hint(hint)

    base = None

    def baseline():
        nonlocal base
        if base is None:
            base = run(block, x, encoder_output, padding)
        return base

    def keeps_shape():
        baseline()

    def future_token():
        out = baseline()
        changed = x.clone()
        changed[:, 3] = torch.randn(2, D_MODEL, generator=torch.Generator().manual_seed(9))
        new = run(block, changed, encoder_output, padding)
        if not close(new[:, :3], out[:, :3], atol=1e-5):
            raise Hint(
                "changing token 3 changed the outputs at positions 0-2: they see the future. "
                "The decoder's self-attention must be causal (causal=True), hiding key j > "
                "query i, and not the past"
            )
        if close(new[:, 4], out[:, 4], atol=1e-6):
            raise Hint(
                "changing token 3 did not change the output at position 4, which may attend "
                "to it: the self-attention must mix the decoder's tokens (x attends to x)"
            )

    def reads_encoder():
        out = baseline()
        changed = encoder_output.clone()
        changed[:, 2] += 1.0  # a real token in both sequences
        new = run(block, x, changed, padding)
        moved = (new - out).abs().amax(dim=-1)  # (B, T)
        if close(moved, torch.zeros_like(moved), atol=1e-7):
            raise Hint(
                "changing the encoder output changed nothing: the cross-attention must take "
                "its keys and values from encoder_output (context=encoder_output)"
            )
        if bool((moved[:, 0] < 1e-7).any()):
            raise Hint(
                "changing encoder token 2 did not change decoder position 0: the "
                "cross-attention must not be causal (causal=False); every decoder position "
                "may read every real encoder token"
            )

    def residuals():
        zeroed = copy.deepcopy(block)
        with torch.no_grad():
            for parameter in zeroed.parameters():
                parameter.zero_()
        out = run(zeroed, x, encoder_output, padding)
        if not close(out, x, atol=1e-5):
            raise Hint(
                "with every parameter set to 0 both attention layers output 0, so the block "
                "should return x unchanged; yours does not: a residual connection is missing "
                "(x = x + self_attention(x); x = x + cross_attention(x, ...))"
            )

    def padded_positions_ignored():
        out = baseline()
        changed = encoder_output.clone()
        changed[1, 3:] = 100.0  # the padding slots of sequence 1
        new = run(block, x, changed, padding)
        if not close(new, out, atol=1e-5):
            raise Hint(
                "changing the encoder output at padded positions changed your output: pass "
                "encoder_padding_mask as key_padding_mask to the CROSS-attention, so the "
                "padded encoder keys (columns) are hidden; padding is not applied to the "
                "decoder's queries (rows) or to its self-attention"
            )

    def padded_batch_matches_unpadded():
        out = baseline()
        alone = run(block, x[1:], encoder_output[1:, :3], torch.zeros(1, 3, dtype=torch.bool))
        if not close(out[1:], alone, atol=1e-5):
            raise Hint(
                "the padded sequence's output differs from running it alone with its 3 real "
                "encoder tokens: the padded encoder keys must be hidden in the "
                "cross-attention, and nothing else may change (do not zero or mask decoder "
                "rows)"
            )

    def padding_optional():
        with torch.no_grad():
            out = block(x.clone(), encoder_output.clone())
        full = run(block, x, encoder_output, torch.zeros(2, T_ENC, dtype=torch.bool))
        if not isinstance(out, torch.Tensor) or not close(out, full, atol=1e-5):
            raise Hint(
                "block(x, encoder_output) without a padding mask should equal a mask of all "
                "False: give encoder_padding_mask the default None"
            )

    return [
        ("same outputs as a decoder block built from your block's own weights", reference_values),
        Guard("two attention layers (W_query, W_key, W_value, out_proj), no other parameters", structure),
        Guard("earlier outputs ignore a changed future token", future_token),
        Guard("every position reads the encoder output", reads_encoder),
        Guard("keeps the (B, T, d_model) shape", keeps_shape),
        Guard("padded batch equals unpadded runs", padded_batch_matches_unpadded),
        Guard("padded encoder positions change nothing", padded_positions_ignored),
        Guard("residual connections (all-zero parameters give x)", residuals),
        Guard("works without a padding mask", padding_optional),
    ]


# ---------------------------------------------------------------- ex-07-from-memory
# The capstone written from memory: a causal multi-head attention class with chapter 5's
# constructor and parameter names. The check loads its own float64 weights into the reader's
# W_query, W_key, W_value and out_proj, compares the output with torch.nn.MultiheadAttention
# holding the same weights (and with the same formula written out, for d_in != d_out, which
# PyTorch's class does not take), and names a classic mistake when the output equals what that
# mistake computes (FROM_MEMORY_MISTAKES). Train mode is checked from the outside: with value
# vectors that are one-hot per position, the output *is* each head's attention weights, so the
# check reads which weights dropout zeroed and how it scaled the rest.

#: (B, T, d_in, d_out, num_heads, context_length, qkv_bias, dropout): T below context_length,
#: T = context_length, T = 1, d_in != d_out, with and without qkv biases
FROM_MEMORY_SHAPES = (
    (2, 5, 6, 6, 2, 8, False, 0.0),
    (3, 6, 8, 8, 4, 9, True, 0.3),
    (2, 4, 5, 6, 3, 7, False, 0.0),
    (1, 4, 4, 4, 2, 4, True, 0.0),
    (2, 1, 4, 4, 2, 3, False, 0.0),
)
FROM_MEMORY_CLASS = "CausalMultiHeadAttention"
_LINEARS = ("W_query", "W_key", "W_value", "out_proj")


def from_memory_parameters(d_in: int, d_out: int, qkv_bias: bool, seed: int) -> dict:
    """Seeded float64 weights for the four projections, in ``nn.Linear``'s ``(out, in)`` layout.

    Large enough that the scores spread (a wrong scale or axis shows), every bias non-zero."""
    generator = torch.Generator().manual_seed(seed)

    def draw(*shape, scale):
        return scale * torch.randn(*shape, generator=generator, dtype=torch.float64)

    params = {}
    for name in ("W_query", "W_key", "W_value"):
        params[f"{name}.weight"] = draw(d_out, d_in, scale=1.5 / d_in ** 0.5)
        if qkv_bias:
            params[f"{name}.bias"] = draw(d_out, scale=0.5)
    params["out_proj.weight"] = draw(d_out, d_out, scale=1.0 / d_out ** 0.5)
    params["out_proj.bias"] = draw(d_out, scale=0.5)
    return params


def from_memory_reference(params: dict, x: torch.Tensor, num_heads: int, *, softmax_dim: int = -1,
                          scale: str = "head", split: str = "ok", merge: str = "ok",
                          mask: str = "before", out_proj: bool = True) -> torch.Tensor:
    """Causal multi-head attention with ``params`` on ``x`` ``(B, T, d_in)``, written out.

    The defaults are the right computation; each keyword makes one classic mistake instead
    (the variants FROM_MEMORY_MISTAKES names), so a wrong output can be recognised."""
    B, T, _ = x.shape
    d_out = params["W_query.weight"].shape[0]
    hd = d_out // num_heads

    def project(name):
        out = x @ params[f"{name}.weight"].T
        bias = params.get(f"{name}.bias")
        return out if bias is None else out + bias

    def heads(t):  # (B, T, d_out) -> (B, H, T, hd)
        if split == "no-transpose":
            return t.reshape(B, num_heads, T, hd)
        return t.view(B, T, num_heads, hd).transpose(1, 2)

    q, k, v = heads(project("W_query")), heads(project("W_key")), heads(project("W_value"))
    scores = q @ k.transpose(-2, -1)  # (B, H, T, T)
    scores = scores / {"head": hd ** 0.5, "d_out": d_out ** 0.5, "none": 1.0,
                       "head-no-sqrt": float(hd), "d_in": x.shape[-1] ** 0.5}[scale]
    ones = torch.ones(T, T, dtype=torch.bool)
    future = torch.triu(ones, diagonal=1)
    if mask == "before":
        weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=softmax_dim)
    elif mask == "diagonal":  # each token hidden from itself too
        weights = torch.softmax(scores.masked_fill(torch.triu(ones), float("-inf")), dim=softmax_dim)
    elif mask == "past":  # the wrong triangle
        weights = torch.softmax(scores.masked_fill(torch.tril(ones, diagonal=-1), float("-inf")),
                                dim=softmax_dim)
    elif mask == "none":
        weights = torch.softmax(scores, dim=softmax_dim)
    elif mask == "after":  # zeroed after the softmax, rows no longer sum to 1
        weights = torch.softmax(scores, dim=softmax_dim).masked_fill(future, 0.0)
    elif mask == "after-inf":  # -inf written into the weights after the softmax
        weights = torch.softmax(scores, dim=softmax_dim).masked_fill(future, float("-inf"))
    else:
        raise ValueError(f"mask={mask!r}")
    context = weights @ v  # (B, H, T, hd)
    if merge == "no-transpose":
        merged = context.reshape(B, T, d_out)
    elif merge == "head-dim-first":
        merged = context.permute(0, 2, 3, 1).reshape(B, T, d_out)
    else:
        merged = context.transpose(1, 2).reshape(B, T, d_out)
    if not out_proj:
        return merged
    return merged @ params["out_proj.weight"].T + params["out_proj.bias"]


def from_memory_torch(params: dict, x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """The same weights in ``torch.nn.MultiheadAttention`` (d_in = d_out), causal, eval mode."""
    d_out, d_in = params["W_query.weight"].shape
    if d_in != d_out:
        raise ValueError("torch.nn.MultiheadAttention takes queries of width embed_dim = d_out only")
    torch_mha = nn.MultiheadAttention(d_out, num_heads, bias=True, batch_first=True,
                                      dtype=torch.float64).eval()
    zeros = torch.zeros(d_out, dtype=torch.float64)
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat([params[f"{n}.weight"] for n in _LINEARS[:3]]))
        torch_mha.in_proj_bias.copy_(torch.cat([params.get(f"{n}.bias", zeros) for n in _LINEARS[:3]]))
        torch_mha.out_proj.weight.copy_(params["out_proj.weight"])
        torch_mha.out_proj.bias.copy_(params["out_proj.bias"])
        hidden = torch.triu(torch.ones(x.shape[1], x.shape[1], dtype=torch.bool), diagonal=1)
        return torch_mha(x, x, x, attn_mask=hidden, need_weights=False)[0]


#: (variant keywords, the mistake's name, the hint): what a wrong output is compared with
FROM_MEMORY_MISTAKES = (
    (dict(softmax_dim=-2), "softmax over the wrong axis",
     "softmax over the wrong axis: your weights are normalised over the queries (dim=-2), so the "
     "columns sum to 1; each query's row must: torch.softmax(scores, dim=-1)"),
    (dict(scale="d_out"), "scale by d_out",
     "scale by d_out: you divided the scores by sqrt(d_out); each head's dot product has "
     "head_dim = d_out // num_heads terms, so divide by sqrt(head_dim)"),
    (dict(scale="d_in"), "scale by d_in",
     "you divided the scores by sqrt(d_in), the input width; divide by sqrt(head_dim), the width "
     "of each head's queries and keys"),
    (dict(scale="none"), "no scale",
     "the scores are not scaled: divide them by sqrt(head_dim) before the softmax"),
    (dict(scale="head-no-sqrt"), "scale by head_dim",
     "you divided the scores by head_dim; the scale is 1 / sqrt(head_dim)"),
    (dict(split="no-transpose", merge="no-transpose"), "heads split without the transpose",
     "heads split without the transpose: .view(B, num_heads, T, head_dim) on (B, T, d_out) mixes "
     "tokens and heads; split with .view(B, T, num_heads, head_dim).transpose(1, 2)"),
    (dict(split="no-transpose"), "heads split without the transpose",
     "heads split without the transpose: .view(B, num_heads, T, head_dim) on (B, T, d_out) mixes "
     "tokens and heads; split with .view(B, T, num_heads, head_dim).transpose(1, 2)"),
    (dict(merge="no-transpose"), "heads merged in the wrong order",
     "heads merged in the wrong order: (B, H, T, head_dim) reshaped straight to (B, T, d_out) "
     "mixes tokens and heads; merge with .transpose(1, 2) first, then .reshape(B, T, d_out)"),
    (dict(merge="head-dim-first"), "heads merged in the wrong order",
     "heads merged in the wrong order: the merged columns must hold head 0's head_dim numbers, "
     "then head 1's, ...; transpose (B, H, T, hd) to (B, T, H, hd), then reshape to (B, T, d_out)"),
    (dict(mask="after"), "mask applied after softmax",
     "mask applied after the softmax: the future weights are zeroed but the rows no longer sum "
     "to 1; fill the future scores with float('-inf') before the softmax instead"),
    (dict(mask="after-inf"), "mask applied after softmax",
     "mask applied after the softmax: -inf written into the weights gives -inf and NaN outputs; "
     "fill the future *scores* with float('-inf') before the softmax"),
    (dict(out_proj=False), "no output projection",
     "no output projection: the merged heads go straight out; apply self.out_proj to the "
     "(B, T, d_out) context (it mixes the heads)"),
    (dict(mask="none"), "not causal",
     "not causal: every token sees the future; hide key j > query i (torch.triu(..., "
     "diagonal=1)) with float('-inf') before the softmax"),
    (dict(mask="past"), "not causal",
     "not causal: you hid the past (below the diagonal) and kept the future visible; hide "
     "torch.triu(torch.ones(T, T), diagonal=1), the keys after each query"),
    (dict(mask="diagonal"), "each token hidden from itself",
     "each token hidden from itself: your mask hides the diagonal (torch.triu(..., diagonal=0)), "
     "so token 0 sees nothing (NaN); hide only key j > query i, torch.triu(..., diagonal=1)"),
)

NOT_A_BUFFER = (
    "the mask stays behind when the module moves (.to(device)): a tensor kept as a plain "
    "attribute is not moved; register it with self.register_buffer('mask', ...) (chapter 7) or "
    "build it in forward on x.device"
)


def from_memory_diagnosis(got: torch.Tensor, params: dict, x: torch.Tensor, num_heads: int) -> str:
    """The hint of the classic mistake whose output ``got`` equals, else ``""``."""
    if got.shape != (x.shape[0], x.shape[1], params["W_query.weight"].shape[0]):
        return ""
    right = from_memory_reference(params, x, num_heads)
    for keywords, _, hint in FROM_MEMORY_MISTAKES:
        candidate = from_memory_reference(params, x, num_heads, **keywords)
        if torch.allclose(candidate, right, atol=1e-8, rtol=1e-6):
            continue  # this input cannot tell the mistake (e.g. one token)
        if torch.allclose(got, candidate, atol=1e-8, rtol=1e-6, equal_nan=True):
            return hint
    if bool(torch.isnan(got).all()):
        return ("your output is NaN everywhere: an additive mask made as ones * float('-inf') "
                "holds 0 * -inf = NaN where it should hold 0; build it with masked_fill, "
                "torch.where or torch.full((T, T), float('-inf')).triu(1)")
    if bool(torch.isnan(got).any()):
        return ("your output has NaN: a row of weights in which every key is hidden (did the "
                "mask hide the diagonal?) or -inf where a weight should be 0")
    return ""


def _from_memory_build(Cls, d_in, d_out, context_length, dropout, num_heads, qkv_bias, params,
                       seed: int = 0):
    """The reader's module built with chapter 5's signature, in float64, holding ``params``."""
    with torch.random.fork_rng(devices=[]):  # building draws random numbers
        torch.manual_seed(seed)
        module = Cls(d_in, d_out, context_length, dropout, num_heads, qkv_bias=qkv_bias)
    if not isinstance(module, nn.Module):
        raise Hint(f"{FROM_MEMORY_CLASS}(...) should create an nn.Module, got "
                   f"{type(module).__name__}: subclass nn.Module and call super().__init__()")
    module.double()  # before the copy: float64 values must not pass through float32
    load_from_memory_parameters(module, params, qkv_bias)
    return module


def load_from_memory_parameters(module, params: dict, qkv_bias: bool) -> None:
    """Copy ``params`` into the module's W_query, W_key, W_value and out_proj (hints if missing)."""
    for name in _LINEARS:
        layer = getattr(module, name, None)
        weight = getattr(layer, "weight", None)
        want = params[f"{name}.weight"].shape
        d_out, d_in = want
        made = f"nn.Linear({d_in}, {d_out}{', bias=qkv_bias' if name != 'out_proj' else ''})"
        if not isinstance(weight, torch.Tensor):
            raise Hint(
                f"the module has no `{name}` with a weight: chapter 5's names are W_query, W_key, "
                f"W_value (nn.Linear(d_in, d_out, bias=qkv_bias)) and out_proj (nn.Linear(d_out, "
                f"d_out)); create self.{name} = {made} in __init__"
            )
        if tuple(weight.shape) != tuple(want):
            raise Hint(
                f"{name}.weight has shape {tuple(weight.shape)}, expected {tuple(want)}: create "
                f"it as {made} (nn.Linear stores (out_features, in_features))"
            )
        bias = getattr(layer, "bias", None)
        wants_bias = name == "out_proj" or qkv_bias
        if wants_bias and not isinstance(bias, torch.Tensor):
            raise Hint(
                f"{name} has no bias: " + ("out_proj is nn.Linear(d_out, d_out) with its bias"
                                           if name == "out_proj" else
                                           "with qkv_bias=True the projections need biases: "
                                           "nn.Linear(d_in, d_out, bias=qkv_bias)")
            )
        if not wants_bias and isinstance(bias, torch.Tensor):
            raise Hint(f"{name} has a bias although qkv_bias=False: create it as "
                       "nn.Linear(d_in, d_out, bias=qkv_bias)")
        with torch.no_grad():
            weight.copy_(params[f"{name}.weight"].to(weight.dtype))
            if wants_bias:
                bias.copy_(params[f"{name}.bias"].to(bias.dtype))


def from_memory_one_hot(num_heads: int = 2, num_tokens: int = 6, batch_size: int = 6, seed: int = 40):
    """Weights and input that make the output show the attention weights themselves.

    W_value and out_proj are the identity (no biases) and token t's input holds e_t in every
    head's slice, so output[b, i, h * T + j] is head h's weight of query i on key j."""
    d = num_heads * num_tokens
    params = from_memory_parameters(d, d, False, seed)
    params["W_value.weight"] = torch.eye(d, dtype=torch.float64)
    params["out_proj.weight"] = torch.eye(d, dtype=torch.float64)
    params["out_proj.bias"] = torch.zeros(d, dtype=torch.float64)
    eye = torch.eye(num_tokens, dtype=torch.float64)
    x = torch.cat([eye] * num_heads, dim=-1).expand(batch_size, num_tokens, d).contiguous()
    return params, x


def from_memory_weights(out: torch.Tensor, num_heads: int) -> torch.Tensor:
    """``(B, T, H * T)`` output of the one-hot setup -> the weights ``(B, H, T, T)``."""
    B, T, _ = out.shape
    return out.view(B, T, num_heads, T).transpose(1, 2)


def from_memory_dropout_verdict(train_weights: torch.Tensor, eval_weights: torch.Tensor,
                                again, p: float) -> str:
    """What is wrong with dropout in training mode, read from the weights, else ``""``.

    ``train_weights`` and ``again``: two training-mode calls (``again`` None: one call only);
    ``eval_weights``: evaluation mode (the weights without dropout), all ``(B, H, T, T)``."""
    T = eval_weights.shape[-1]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    if not torch.isfinite(train_weights).all():
        return ("in training mode your output has inf or NaN: apply dropout to the weights "
                "after the softmax (dropout of a -inf score before it gives 0 * -inf = NaN)")
    if bool((train_weights[..., future].abs() > 1e-9).any()):
        return ("in training mode the future is visible: keep the causal mask in both modes and "
                "apply dropout to the weights after the masked softmax")
    visible = (~future).expand_as(eval_weights) & (eval_weights > 1e-6)
    ratio = train_weights[visible] / eval_weights[visible]
    tolerance = 1e-4  # relative: float32 kernels add their own rounding
    if torch.allclose(ratio, torch.ones_like(ratio), atol=tolerance):
        return ("dropout is never applied in training mode: create self.dropout = "
                "nn.Dropout(dropout) and apply it to the attention weights after the softmax")
    dropped = ratio.abs() < tolerance
    kept = (ratio - 1.0 / (1.0 - p)).abs() < tolerance
    if bool((dropped | (ratio - 1.0).abs().lt(tolerance)).all()) and bool(dropped.any()):
        return (f"dropout drops weights but does not scale the others by 1 / (1 - p) = "
                f"{1 / (1 - p):g}: use nn.Dropout, which does (expected values stay the same)")
    if not bool((dropped | kept).all()):
        return ("in training mode each attention weight must be either dropped (0) or scaled by "
                "1 / (1 - p): apply nn.Dropout to the weights after the softmax (not to the "
                "scores before it)")
    fraction = float(dropped.float().mean())
    if abs(fraction - p) > 0.2:
        return (f"dropout zeroed a fraction {fraction:.2f} of the weights with dropout={p}: pass "
                "the constructor's dropout probability to nn.Dropout")
    dropped_full = torch.zeros_like(visible)
    dropped_full[visible] = dropped
    mixed = False  # a key dropped for one query and kept for another (of the same head)
    for key in range(T - 1):
        valid = visible[..., key:, key]
        some_dropped = (dropped_full[..., key:, key] & valid).any(dim=-1)
        some_kept = (~dropped_full[..., key:, key] & valid).any(dim=-1)
        mixed = mixed or bool((some_dropped & some_kept).any())
    if not mixed:
        return ("dropout zeroes whole columns (the same keys for every query): apply it to the "
                "(B, H, T, T) weights, not to the keys or values")
    if again is not None and torch.equal(train_weights, again):
        return ("two training-mode calls dropped exactly the same weights: draw a new dropout "
                "mask in every forward pass (nn.Dropout does)")
    return ""


@register("ex-07-from-memory", "Capstone: causal multi-head attention from memory")
def from_memory(CausalMultiHeadAttention):
    """Check ``CausalMultiHeadAttention(d_in, d_out, context_length, dropout, num_heads,
    qkv_bias=False)`` against ``torch.nn.MultiheadAttention`` with the same weights."""
    Cls = CausalMultiHeadAttention
    if isinstance(Cls, nn.Module):
        raise Hint(f"pass the class itself, {FROM_MEMORY_CLASS}, not an object of it")

    def run(module, x):
        with torch.no_grad():
            try:
                out = module(x.clone())
            except RuntimeError as err:
                message = str(err).splitlines()[0]
                if "size" in message or "shape" in message or "match" in message:
                    raise Hint(
                        f"for an input of shape {tuple(x.shape)} your forward fails ({message}): "
                        "read B and T from x.shape, slice the (context_length, context_length) "
                        "mask to the input, self.mask[:T, :T], and take head_dim from d_out // "
                        "num_heads"
                    ) from None
                raise
        if isinstance(out, tuple):
            raise Hint("forward should return only the output tensor (B, T, d_out), not a tuple")
        if not isinstance(out, torch.Tensor):
            raise Hint(f"forward should return a tensor, got {type(out).__name__}; did you "
                       "forget `return`?")
        return out.detach()

    def shape_and_values(index: int):
        B, T, d_in, d_out, H, context_length, qkv_bias, dropout = FROM_MEMORY_SHAPES[index]
        params = from_memory_parameters(d_in, d_out, qkv_bias, seed=100 + index)
        module = _from_memory_build(Cls, d_in, d_out, context_length, dropout, H, qkv_bias, params)
        module.eval()
        x = torch.randn(B, T, d_in, generator=torch.Generator().manual_seed(200 + index),
                        dtype=torch.float64)
        got = run(module, x)
        if got.shape != (B, T, d_out):
            raise Hint(f"for x of shape {(B, T, d_in)} (d_out={d_out}, num_heads={H}) expected "
                       f"an output of shape {(B, T, d_out)}, got {tuple(got.shape)}")
        if got.dtype != torch.float64:
            raise Hint(f"a float64 module and input must give a float64 output, got {got.dtype}: "
                       "do not convert the dtype (build masks as bool, fill with float('-inf'))")
        want = (from_memory_torch(params, x, H) if d_in == d_out
                else from_memory_reference(params, x, H))
        if torch.allclose(got, want, atol=1e-10, rtol=1e-8):
            return
        again = run(module, x)
        if dropout > 0 and not torch.equal(got, again):
            raise Hint(
                "dropout active in eval mode: two calls after .eval() give different outputs; "
                "use nn.Dropout (it switches off in eval mode) or F.dropout(weights, p, "
                "training=self.training)"
            )
        what = (f"B={B}, T={T}, d_in={d_in}, d_out={d_out}, num_heads={H}, "
                f"context_length={context_length}, qkv_bias={qkv_bias}")
        reference = "nn.MultiheadAttention" if d_in == d_out else "causal multi-head attention"
        raise Hint(from_memory_diagnosis(got, params, x, H) or (
            f"the output differs from {reference} with the same weights ({what}); compare each "
            "step with chapter 5: project, split (B, T, d_out) -> (B, H, T, head_dim), scores / "
            "sqrt(head_dim), causal mask with -inf, softmax over the keys, weights @ values, "
            "merge, out_proj"))

    def future_ignored():
        B, T, d, H = 2, 6, 8, 2
        params = from_memory_parameters(d, d, False, seed=7)
        module = _from_memory_build(Cls, d, d, 8, 0.0, H, False, params).eval()
        x = torch.randn(B, T, d, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
        changed = x.clone()
        changed[:, 4] += 3.0
        before, after = run(module, x), run(module, changed)
        if not torch.allclose(before[:, :4], after[:, :4], atol=1e-10):
            raise Hint("not causal: changing token 4 changed the outputs at positions 0-3; hide "
                       "every key after its query (torch.triu(..., diagonal=1)) before the softmax")
        if torch.allclose(before[:, 5], after[:, 5], atol=1e-12):
            raise Hint("changing token 4 did not change the output at position 5, which must "
                       "attend to it: hide only the future, not the past")

    def first_token_itself():
        d, H = 6, 3
        params = from_memory_parameters(d, d, True, seed=9)
        module = _from_memory_build(Cls, d, d, 5, 0.0, H, True, params).eval()
        x = torch.randn(2, 5, d, generator=torch.Generator().manual_seed(10), dtype=torch.float64)
        got = run(module, x)
        value = x[:, 0] @ params["W_value.weight"].T + params["W_value.bias"]
        want = value @ params["out_proj.weight"].T + params["out_proj.bias"]
        if torch.isnan(got[:, 0]).any():
            raise Hint(FROM_MEMORY_MISTAKES[-1][2])
        if not torch.allclose(got[:, 0], want, atol=1e-10):
            raise Hint("token 0 sees only itself, so its output must be out_proj(W_value(x_0)) "
                       "(weight 1 on itself); yours is not: check the mask's triangle and that "
                       "out_proj comes last")

    def output_projection():
        d, H = 6, 2
        params = from_memory_parameters(d, d, False, seed=11)
        params["out_proj.weight"] = torch.zeros(d, d, dtype=torch.float64)
        module = _from_memory_build(Cls, d, d, 6, 0.0, H, False, params).eval()
        x = torch.randn(2, 4, d, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
        got = run(module, x)
        if not torch.allclose(got, params["out_proj.bias"].expand_as(got), atol=1e-12):
            raise Hint("with out_proj's weight set to 0 every output must equal out_proj.bias: "
                       "your forward does not end with self.out_proj(context) (no output "
                       "projection, or something after it)")

    def eval_mode_dropout():
        B, T, d, H, p = 3, 5, 8, 2, 0.5
        params = from_memory_parameters(d, d, True, seed=13)
        module = _from_memory_build(Cls, d, d, 6, p, H, True, params).eval()
        x = torch.randn(B, T, d, generator=torch.Generator().manual_seed(14), dtype=torch.float64)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(15)
            first, second = run(module, x), run(module, x)
        if not torch.equal(first, second) or not torch.allclose(
                first, from_memory_torch(params, x, H), atol=1e-10):
            if not torch.equal(first, second):
                raise Hint("dropout active in eval mode: with dropout=0.5 two calls after .eval() "
                           "differ; nn.Dropout switches itself off in eval mode (F.dropout needs "
                           "training=self.training)")
            raise Hint("with dropout=0.5 in eval mode the output must equal the output without "
                       "dropout: dropout is for training only")

    def train_mode_no_dropout():
        B, T, d, H = 2, 5, 6, 2
        params = from_memory_parameters(d, d, False, seed=16)
        module = _from_memory_build(Cls, d, d, 8, 0.0, H, False, params).train()
        x = torch.randn(B, T, d, generator=torch.Generator().manual_seed(17), dtype=torch.float64)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(18)
            got = run(module, x)
        if not torch.allclose(got, from_memory_torch(params, x, H), atol=1e-10):
            raise Hint("in training mode with dropout=0 the output must equal eval mode's: "
                       "the mask, the scale and the softmax are the same in both modes")

    def train_mode_dropout():
        H, p = 2, 0.5
        params, x = from_memory_one_hot(H)
        T, d = x.shape[1], x.shape[2]
        module = _from_memory_build(Cls, d, d, T + 2, p, H, False, params)
        eval_weights = from_memory_weights(run(module.eval(), x), H)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(19)
            module.train()
            first = from_memory_weights(run(module, x), H)
            second = from_memory_weights(run(module, x), H)
        problem = from_memory_dropout_verdict(first, eval_weights, second, p)
        if problem:
            raise Hint(problem)

    def no_fused_kernel():
        # judged on what the module does, built and run in both modes (the same rule the grader
        # applies to its own runs, checks/rules.py): SDPA, nn.MultiheadAttention or FlexAttention
        # reached by any name, alias or getattr counts; a helper of one's own named
        # scaled_dot_product_attention does not
        d, H = 6, 2
        params = from_memory_parameters(d, d, False, seed=23)
        x = torch.randn(2, 5, d, generator=torch.Generator().manual_seed(24), dtype=torch.float64)

        def build_and_run(x):
            module = _from_memory_build(Cls, d, d, 8, 0.5, H, False, params)
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                torch.manual_seed(25)
                return module.eval()(x), module.train()(x)

        check_operations("ex-07-from-memory", build_and_run, x)

    def moves_with_module():
        d, H = 6, 2
        module = _from_memory_build(Cls, d, d, 8, 0.0, H, False,
                                    from_memory_parameters(d, d, False, seed=20)).eval()
        try:
            module = module.to("meta")
            with torch.no_grad():
                out = module(torch.empty(2, 5, d, dtype=torch.float64, device="meta"))
        except (RuntimeError, NotImplementedError) as err:
            message = str(err)
            if "item()" in message or "data-dependent" in message or "meta" not in message.lower():
                return  # reads tensor values in Python (fine on a GPU), or not about devices
            raise Hint(NOT_A_BUFFER) from None
        if isinstance(out, torch.Tensor) and out.device.type != "meta":
            raise Hint(NOT_A_BUFFER)

    def input_unchanged():
        d, H = 6, 2
        module = _from_memory_build(Cls, d, d, 8, 0.0, H, False,
                                    from_memory_parameters(d, d, False, seed=21)).eval()
        x = torch.randn(2, 4, d, generator=torch.Generator().manual_seed(22), dtype=torch.float64)
        mine = x.clone()
        with torch.no_grad():
            module(mine)
        if not torch.equal(mine, x):
            raise Hint("your forward changed x in place; compute new tensors instead")

    return [
        ("matches nn.MultiheadAttention (T < context_length, float64)", lambda: shape_and_values(0)),
        ("matches with qkv_bias=True, 4 heads, dropout in eval mode", lambda: shape_and_values(1)),
        ("matches with d_in != d_out (3 heads)", lambda: shape_and_values(2)),
        ("matches with T = context_length", lambda: shape_and_values(3)),
        ("matches with one token (T = 1)", lambda: shape_and_values(4)),
        ("earlier outputs ignore a changed future token", future_ignored),
        ("token 0 attends only to itself", first_token_itself),
        ("ends with the output projection", output_projection),
        ("eval mode: dropout switched off", eval_mode_dropout),
        ("train mode, dropout=0: same as eval mode", train_mode_no_dropout),
        ("train mode: weights dropped with p and rescaled", train_mode_dropout),
        Guard("written without a fused kernel", no_fused_kernel),
        Guard("the mask moves with the module (.to(device))", moves_with_module),
        Guard("leaves x unchanged", input_unchanged),
    ]


# ---------------------------------------------------------------- ex-07-find-the-bug-buffer
# Find the bug: a mask kept as a plain attribute (`self.mask = torch.triu(...)`) is right on
# the CPU, but `.to(device)` moves parameters and buffers only, so on a GPU the scores and the
# mask live on different devices. The check moves the module to PyTorch's "meta" device
# (shapes without data), where the same mismatch shows without a GPU.

LEFT_BEHIND = (
    "the mask stays behind when the module moves: .to(device) moves parameters and buffers, "
    "not plain attributes, so on a GPU masked_fill gets scores on cuda and a mask on the CPU; "
    "keep it with self.register_buffer('mask', ...)"
)


def _buffer_module(CausalWeights, context_length):
    with torch.random.fork_rng(devices=[]):
        module = CausalWeights(context_length)
    if not isinstance(module, nn.Module):
        raise Hint(f"CausalWeights(...) should create an nn.Module, got {type(module).__name__}")
    return module


@register("ex-07-find-the-bug-buffer", "Find the bug: a mask left behind")
def mask_buffer(CausalWeights):
    """Check the fixed ``CausalWeights(context_length)``: ``module(scores)`` -> causal weights."""

    def moves():
        values((2, 5, 5), 8, 0)  # right where it was built, then moved
        module = _buffer_module(CausalWeights, 8).to("meta")
        try:
            with torch.no_grad():
                out = module(torch.empty(2, 5, 5, device="meta"))
        except (RuntimeError, NotImplementedError) as err:
            message = str(err)
            if "device" in message or "meta" in message:
                raise Hint(LEFT_BEHIND + f" (here: {message.splitlines()[0][:100]})") from None
            raise
        if not isinstance(out, torch.Tensor) or out.device.type != "meta" or tuple(out.shape) != (2, 5, 5):
            raise Hint("after module.to(device) the weights must come out on that device, with the "
                       "scores' shape: " + LEFT_BEHIND)

    def values(shape, context_length, seed):
        module = _buffer_module(CausalWeights, context_length)
        scores = _scores(*shape, seed=seed)
        with torch.no_grad():
            try:
                out = module(scores.clone())
            except RuntimeError as err:
                if "size" in str(err) or "shape" in str(err):
                    raise Hint(f"scores of shape {shape} with context_length={context_length} fail "
                               f"({str(err).splitlines()[0]}): slice the mask to the scores, "
                               "self.mask[:T, :T]") from None
                raise
        out = _as_tensor(out, "forward")
        if out.shape != scores.shape or not close(out, _reference_causal(scores), atol=1e-5):
            raise Hint("the weights must be a softmax over the visible keys: hide key j > query i "
                       "(torch.triu(..., diagonal=1)) with -inf before the softmax")

    def not_trained():
        module = _buffer_module(CausalWeights, 6)
        learnable = sum(p.numel() for p in module.parameters())
        if learnable:
            raise Hint("the mask is not learned, so it must not be a parameter (the optimiser would "
                       "get it, state_dict would save it as one): register_buffer keeps a tensor "
                       "that moves with the module without training it")

    return [
        ("moves with the module: .to(device), then forward", moves),
        ("right weights for T < context_length, a batch", lambda: values((3, 5, 5), 8, 1)),
        ("right weights for T = context_length and heads", lambda: values((2, 2, 4, 4), 4, 2)),
        Guard("the mask is not a trainable parameter", not_trained),
    ]
