"""Self-checks for chapter 7 (causal attention).

* :func:`causal_softmax` - ``ex-07-causal-softmax``: scores ``(..., T, T)`` -> causal weights.
* :func:`decoder_mask` - ``ex-07-decoder-mask``: combine the causal mask with a key padding
  mask into one ``(B, T, T)`` boolean mask.
"""

from __future__ import annotations

import torch

from ..masks import causal_mask
from .core import Hint, close, register

__all__ = ["causal_softmax", "decoder_mask"]


def _scores(*shape: int, seed: int = 7) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=generator)


def _reference_causal(scores: torch.Tensor) -> torch.Tensor:
    hide = causal_mask(scores.shape[-1])
    return torch.softmax(scores.masked_fill(hide, float("-inf")), dim=-1)


def _as_tensor(out, what: str) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise Hint(f"{what} should return a tensor, got {type(out).__name__}; did you forget `return`?")
    return out.detach().float()


def _strictly_upper(T: int) -> torch.Tensor:
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)


def _strictly_lower(T: int) -> torch.Tensor:
    return torch.tril(torch.ones(T, T, dtype=torch.bool), diagonal=-1)


@register("ex-07-causal-softmax", "Causal attention weights from scores")
def causal_softmax(causal_weights):
    """Check ``causal_weights(scores) -> weights`` on (T, T) and (B, T, T) scores."""
    T = 5
    scores = _scores(T, T)
    scores_before = scores.clone()
    out = _as_tensor(causal_weights(scores.clone()), "causal_weights(scores)")
    upper, lower = _strictly_upper(T), _strictly_lower(T)
    diagonal = torch.diagonal(out, dim1=-2, dim2=-1) if out.shape == (T, T) else None

    def shape():
        if out.shape != (T, T):
            raise Hint(
                f"for scores of shape ({T}, {T}) expected weights of shape ({T}, {T}), got "
                f"{tuple(out.shape)}; build the mask from scores.shape[-1] and keep one weight per "
                "(query, key) pair"
            )

    def sees_itself():
        shape()
        future_nonzero = bool((out[upper].abs() > 1e-6).any())
        if torch.isnan(diagonal).any() or bool((diagonal.abs() < 1e-6).any()):
            if future_nonzero:
                raise Hint(
                    "the diagonal is hidden and the future is visible: the mask has the wrong "
                    "triangle. torch.tril(torch.ones(T, T)) marks the entries to KEEP (1 = visible); "
                    "hide where it is 0, e.g. scores.masked_fill(tril == 0, float('-inf')), or hide "
                    "torch.triu(torch.ones(T, T), diagonal=1).bool()"
                )
            first_row_nan = bool(torch.isnan(out[0]).any())
            raise Hint(
                "each token must be allowed to attend to itself, but your weights on the diagonal "
                "are 0" + (" (and row 0 came out as NaN: every entry of it was hidden)" if first_row_nan else "")
                + "; the mask hides the diagonal: use torch.triu(..., diagonal=1) for the hidden "
                "entries (or torch.tril(..., diagonal=0) for the visible ones)"
            )

    def hides_future():
        shape()
        if torch.isnan(out).any():
            raise Hint("the weights contain NaN; only entries above the diagonal may be hidden")
        if bool((out[upper].abs() > 1e-6).any()):
            if bool((out[lower].abs() < 1e-6).all()):
                raise Hint(
                    "you hid the past (below the diagonal) instead of the future (above it): "
                    "the wrong triangle. Hide the entries where key index > query index, i.e. "
                    "torch.triu(torch.ones(T, T), diagonal=1).bool()"
                )
            raise Hint(
                "tokens can still see the future: entries above the diagonal (key after query) "
                "must be 0; fill them with float('-inf') before the softmax"
            )

    def rows_sum_to_one():
        shape()
        row_sums = out.sum(dim=-1)
        if close(row_sums, torch.ones(T), atol=1e-4):
            return
        plain = torch.softmax(scores_before, dim=-1)
        if close(out, plain * ~upper, atol=1e-4):
            raise Hint(
                "the future is zeroed but the rows no longer sum to 1: you masked after the softmax "
                "without renormalising. Divide each row by its sum (keepdim=True), or better, put "
                "-inf into the future scores before the softmax"
            )
        if close(out.sum(dim=-2), torch.ones(T), atol=1e-4):
            raise Hint(
                "the columns sum to 1, not the rows: take the softmax over the keys, dim=-1"
            )
        raise Hint(f"each row of weights must sum to 1, got row sums {[round(float(s), 4) for s in row_sums]}")

    def values():
        shape()
        expected = _reference_causal(scores_before)
        if close(out, expected, atol=1e-5):
            return
        for factor in (T ** 0.5, 2 ** 0.5):
            if close(out, _reference_causal(scores_before / factor), atol=1e-5):
                raise Hint(
                    "your weights are those of scaled scores: the function receives scores that are "
                    "already scaled, so apply the mask and the softmax without dividing again"
                )
        raise Hint(
            "the weights differ from a softmax over the visible scores of each row; hide the "
            "future with -inf, then softmax over dim=-1"
        )

    def batched():
        batch_scores = _scores(3, 4, 4, seed=11)
        wrong_t = (
            "use scores.shape[-1] for T (not shape[0]) so the (T, T) mask broadcasts over the batch"
        )
        try:
            out_batch = _as_tensor(causal_weights(batch_scores.clone()), "causal_weights(scores)")
        except RuntimeError as err:
            raise Hint(f"a batch of scores (3, 4, 4) made your code fail ({err}); {wrong_t}") from None
        if out_batch.shape != (3, 4, 4):
            raise Hint(
                f"for a batch of scores (3, 4, 4) expected weights (3, 4, 4), got "
                f"{tuple(out_batch.shape)}; {wrong_t}"
            )
        if not close(out_batch, _reference_causal(batch_scores), atol=1e-5):
            raise Hint(
                "correct for one (T, T) matrix but not for a batch (B, T, T): take the softmax over "
                "dim=-1 and build the mask from scores.shape[-1]"
            )

    def input_untouched():
        causal_weights(scores)
        if not torch.equal(scores, scores_before):
            raise Hint(
                "your function changed the caller's scores in place (masked_fill_ with an "
                "underscore); use scores.masked_fill(...) which returns a new tensor"
            )

    return [
        ("each token attends to itself", sees_itself),
        ("future tokens get weight 0", hides_future),
        ("each row sums to 1", rows_sum_to_one),
        ("matches a softmax over the visible scores", values),
        ("works on a batch (B, T, T)", batched),
        ("leaves the input scores unchanged", input_untouched),
    ]


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
    wrong = [
        (future & keys, "you combined the masks with & (and): then an entry is hidden only if it is "
         "in the future AND a padding key. An entry must be hidden if either holds: use | (or)"),
        (future | queries, "you hid the padded query rows instead of the padded key columns: the "
         "padding mask must broadcast along the queries, key_padding_mask[:, None, :] (B, 1, T), "
         "not key_padding_mask[:, :, None]"),
        (~_reference_decoder_mask(pad), "you returned the visible entries: True must mean hidden "
         "(the future and the padding keys), as masked_fill expects"),
        (torch.triu(ones, diagonal=0) | keys, "the diagonal is hidden: each (real) token must see "
         "itself; build the causal part with torch.triu(..., diagonal=1)"),
        (torch.tril(ones, diagonal=-1) | keys, "wrong triangle: you hid the past (below the "
         "diagonal) instead of the future; hide torch.triu(torch.ones(T, T), diagonal=1)"),
        (torch.tril(ones) | keys, "wrong triangle: torch.tril(torch.ones(T, T)) marks the entries "
         "to KEEP; the hidden causal part is torch.triu(torch.ones(T, T), diagonal=1).bool()"),
        (keys.expand(-1, T, -1), "the causal part is missing: future keys (j > i) must be hidden too"),
        (future.expand(pad.shape[0], T, T), "the padding part is missing: padding keys must be "
         "hidden from every query"),
    ]
    for candidate, hint in wrong:
        if torch.equal(out, candidate):
            return hint
    return ""


@register("ex-07-decoder-mask", "Causal mask plus padding mask")
def decoder_mask(make_mask):
    """Check ``make_mask(key_padding_mask (B, T)) -> (B, T, T)`` bool, True = hidden."""
    pad = torch.tensor([[False, False, False, False, False],
                        [False, False, False, True, True],
                        [False, False, True, True, True]])  # right padding, lengths 5, 3, 2
    pad_before = pad.clone()
    B, T = pad.shape
    out = make_mask(pad)
    if not isinstance(out, torch.Tensor):
        raise Hint(f"decoder_mask should return a tensor, got {type(out).__name__}; did you forget `return`?")
    out = out.detach().cpu()
    expected = _reference_decoder_mask(pad_before)
    diagnosis = _decoder_diagnosis(out, pad_before)

    def fail(generic: str):
        raise Hint(diagnosis or generic)

    def bool_shape():
        if out.shape != (B, T, T):
            what = {(T, T): "one (T, T) mask for the whole batch",
                    (B, T): "the (B, T) padding mask itself"}.get(tuple(out.shape), "")
            raise Hint(
                f"for a padding mask of shape ({B}, {T}) expected a mask of shape ({B}, {T}, {T}), got "
                f"{tuple(out.shape)}" + (f" ({what})" if what else "")
                + "; combine the (T, T) causal mask with key_padding_mask[:, None, :] (B, 1, T) so "
                "broadcasting gives (B, T, T)"
            )
        if out.dtype != torch.bool:
            raise Hint(
                f"return a boolean tensor (True = hidden), got dtype {out.dtype}; masked_fill needs "
                "booleans: build both parts as bool and combine them with |"
            )

    def hides_future():
        bool_shape()
        if not bool(out[:, causal_mask(T)].all()):
            fail("some future keys (j > i) are visible; every entry above the diagonal must be True")

    def sees_itself():
        bool_shape()
        real = ~pad_before  # (B, T): tokens that are not padding
        diagonal = torch.diagonal(out, dim1=-2, dim2=-1)  # (B, T)
        if bool(diagonal[real].any()):
            fail("a real token cannot see itself: the diagonal must stay visible (False) for "
                 "non-padding tokens")

    def hides_padding():
        bool_shape()
        hidden_keys = out.permute(0, 2, 1)[pad_before]  # rows = padded keys, over all queries
        if not bool(hidden_keys.all()):
            fail("some query can still attend to a padding key: a padded key column must be True "
                 "for every query")

    def nothing_else():
        bool_shape()
        if not torch.equal(out, expected):
            fail("your mask hides entries that should stay visible: hide only the future and the "
                 "padding keys")

    def other_batch():
        other = torch.tensor([[False, False, False, True], [False, False, False, False]])
        got = make_mask(other.clone())
        if not isinstance(got, torch.Tensor) or not torch.equal(got.detach().cpu(), _reference_decoder_mask(other)):
            raise Hint(
                "correct for one batch but not for a (2, 4) padding mask: take B and T from "
                "key_padding_mask.shape instead of fixed numbers"
            )

    def input_untouched():
        make_mask(pad)
        if not torch.equal(pad, pad_before):
            raise Hint("your function changed key_padding_mask in place; build a new tensor instead")

    return [
        ("returns a bool (B, T, T) mask", bool_shape),
        ("hides every future key", hides_future),
        ("each real token sees itself", sees_itself),
        ("hides padding keys from every query", hides_padding),
        ("hides nothing else", nothing_else),
        ("works for another batch size and length", other_batch),
        ("leaves the padding mask unchanged", input_untouched),
    ]
