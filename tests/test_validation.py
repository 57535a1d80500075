"""attention_book.validation: TypeError for wrong types, ValueError for bad values, and messages
that name the argument, show the value and say how to fix it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attention_book import validation as check


# ----------------------------------------------------------------- accepted values come back
def test_good_values_are_returned_normalised():
    assert check.positive_int("d_in", 3) == 3
    assert type(check.positive_int("d_in", np.int64(3))) is int
    assert check.probability("dropout", 0) == 0.0 and type(check.probability("dropout", 0)) is float
    assert check.probability("dropout", 0.999) == 0.999
    assert check.boolean("causal", False) is False
    assert check.positive_number("scale", 2) == 2.0
    x = torch.zeros(2, 3, 4)
    assert check.tensor("x", x) is x
    assert check.floating_tensor("x", x) is x
    assert check.ndim("x", x, (2, 3)) is x
    assert check.last_dim("x", x, 4, "d_in") is x
    assert check.same_dtype("x", x, "weights", torch.ones(1)) is x
    assert check.same_device("x", x, "weights", torch.ones(1)) is x
    mask = torch.ones(3, 3, dtype=torch.bool)
    assert check.bool_mask("mask", mask, (2, 3, 3)) is mask
    assert check.sequence_length("x", 5, 5) == 5
    assert check.dim_of("scores", torch.zeros(2, 3), -2) == -2
    assert check.dims_broadcast(("a", "b"), ((2, 1), (1, 3)), "batch dimensions") == (2, 3)
    assert check.optional(check.positive_int, "kdim", None) is None
    assert check.optional(check.positive_int, "kdim", 4) == 4


# ----------------------------------------------------------------- bad values: type, message
BAD = [
    # (call, exception type, words the message must contain: argument, value, a fix)
    (lambda: check.positive_int("d_in", 3.0), TypeError, ["d_in", "3.0", "d_in=3"]),
    (lambda: check.positive_int("d_in", 2.5), TypeError, ["d_in", "2.5", "whole number"]),
    (lambda: check.positive_int("d_in", "3"), TypeError, ["d_in", "'3'", "not a string"]),
    (lambda: check.positive_int("d_in", "inf"), TypeError, ["d_in", "'inf'", "not a string"]),
    (lambda: check.positive_int("d_in", float("inf")), TypeError, ["d_in", "inf"]),
    (lambda: check.positive_int("d_in", True), TypeError, ["d_in", "True", "d_in=4"]),
    (lambda: check.positive_int("d_in", None), TypeError, ["d_in", "None"]),
    (lambda: check.positive_int("d_in", 0), ValueError, ["d_in", "0", "d_in=4"]),
    (lambda: check.positive_int("num_heads", -2), ValueError, ["num_heads", "-2"]),
    (lambda: check.probability("dropout", "0.1"), TypeError, ["dropout", "'0.1'", "dropout=0.1"]),
    (lambda: check.probability("dropout", None), TypeError, ["dropout", "None", "dropout=0.0"]),
    (lambda: check.probability("dropout", False), TypeError, ["dropout", "False"]),
    (lambda: check.probability("dropout", 1.0), ValueError, ["dropout", "1.0", "[0, 1)"]),
    (lambda: check.probability("dropout", -0.1), ValueError, ["dropout", "-0.1"]),
    (lambda: check.probability("dropout", float("nan")), ValueError, ["dropout", "nan"]),
    (lambda: check.boolean("causal", 1), TypeError, ["causal", "1", "causal=True"]),
    (lambda: check.boolean("qkv_bias", "False"), TypeError, ["qkv_bias", "'False'"]),
    (lambda: check.positive_number("scale", 0), ValueError, ["scale", "0", "scale=1.0"]),
    (lambda: check.positive_number("scale", float("inf")), ValueError, ["scale", "inf"]),
    (lambda: check.positive_number("scale", "2"), TypeError, ["scale", "'2'"]),
    (lambda: check.tensor("x", [[1.0]]), TypeError, ["x", "[[1.0]]", "torch.tensor"]),
    (lambda: check.floating_tensor("x", torch.tensor([1, 2])), TypeError, ["x", "torch.int64", "nn.Embedding"]),
    (lambda: check.ndim("x", torch.zeros(4, 3), 3, "(B, T, C)"), ValueError, ["x", "(4, 3)", "unsqueeze(0)"]),
    (lambda: check.ndim("x", torch.zeros(1, 2, 4, 3), 3), ValueError, ["x", "(1, 2, 4, 3)", "squeeze(0)"]),
    (lambda: check.ndim("x", torch.zeros(3), 3), ValueError, ["x", "(3,)", "reshape"]),
    (lambda: check.last_dim("x", torch.zeros(2, 5), 4, "d_in"), ValueError, ["x", "5", "d_in=4", "d_in=5"]),
    (lambda: check.same_dtype("x", torch.zeros(2, dtype=torch.float64), "weights", torch.zeros(1)),
     TypeError, ["x", "float64", "float32", "x.to(weights.dtype)"]),
    (lambda: check.same_device("x", torch.zeros(2, device="meta"), "weights", torch.zeros(1)),
     ValueError, ["x", "meta", "cpu", "x.to(weights.device)"]),
    (lambda: check.bool_mask("mask", torch.ones(3, 3), (3, 3)), TypeError, ["mask", "torch.float32", "mask == 0"]),
    (lambda: check.bool_mask("mask", "causal", (3, 3)), TypeError, ["mask", "'causal'"]),
    (lambda: check.bool_mask("mask", torch.ones(4, 4, dtype=torch.bool), (3, 3)), ValueError,
     ["mask", "(4, 4)", "(3, 3)"]),
    (lambda: check.bool_mask("mask", torch.ones(2, 3, 3, dtype=torch.bool), (3, 3)), ValueError, ["mask", "(2, 3, 3)"]),
    (lambda: check.dim_of("scores", torch.zeros(2, 3), 2), ValueError, ["dim=2", "scores", "(2, 3)", "dim=-1"]),
    (lambda: check.dim_of("scores", torch.zeros(2, 3), 1.0), TypeError, ["dim", "1.0", "dim=-1"]),
    (lambda: check.dim_of("weights", torch.tensor(1.0), -1), ValueError, ["weights", "0-d"]),
    (lambda: check.sequence_length("x", 9, 8), ValueError, ["x", "9", "context_length=8", ">= 9"]),
    (lambda: check.dims_broadcast(("query", "key"), ((2,), (3,)), "batch dimensions"), ValueError,
     ["query", "key", "(2,)", "(3,)"]),
]


@pytest.mark.parametrize("call, error, words", BAD, ids=[f"bad-{i}" for i in range(len(BAD))])
def test_bad_values_raise_the_right_error_with_a_helpful_message(call, error, words):
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error  # exactly TypeError / ValueError, nothing wrapped
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} missing from: {message}"


@pytest.mark.parametrize("argument", ["context", "key_padding_mask", "attn_mask"])
def test_fused_and_cached_modules_refuse_what_they_cannot_use(argument):
    from attention_book.fused import FusedMultiHeadAttention
    from attention_book.kv_cache import CachedMultiHeadAttention, KVCache

    x = torch.randn(1, 3, 4)
    value = torch.zeros(1, 3, dtype=torch.bool) if argument != "context" else torch.randn(1, 3, 4)
    fused = FusedMultiHeadAttention(4, 4, 8, 0.0, 2)
    cached = CachedMultiHeadAttention(4, 4, 8, 0.0, 2)
    with pytest.raises(ValueError, match=f"cannot use {argument} .*MultiHeadAttention"):
        fused(x, **{argument: value})
    with pytest.raises(ValueError, match=f"cannot use {argument} .*without cache="):
        cached(x, cache=KVCache(), **{argument: value})


def test_unsupported_passes_when_every_argument_is_none():
    from attention_book import validation

    assert validation.unsupported("M", "fix", context=None, attn_mask=None) is None
