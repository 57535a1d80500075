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

from ..masks import causal_mask
from .core import Guard, Hint, close, register

__all__ = ["causal_softmax", "decoder_mask", "decoder_block", "reference_decoder_block", "block_structure_hint",
           "block_values_hint", "block_cases"]


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
