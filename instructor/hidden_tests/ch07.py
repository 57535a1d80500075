"""Hidden tests of chapter 7 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.

The device tests use PyTorch's "meta" device (tensors with a shape and a device but no data): it
notices a mask built on the CPU next to scores on another device, without needing a GPU. The
first operation on a meta tensor loads PyTorch's meta kernels (about 2 s, once per kernel).
"""

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test


def _randn(*shape, seed, scale=1.0, dtype=torch.float32):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _reference_causal(scores):
    T = scores.shape[-1]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


def _reference_decoder_mask(key_padding_mask):
    T = key_padding_mask.shape[-1]
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1) | key_padding_mask[:, None, :]


DEVICE = ("on another device than the CPU your code fails{detail}: create the mask on the input's device, "
          "torch.ones(T, T, dtype=torch.bool, device={name}.device) (as the chapter's code does), so "
          "it also runs on a GPU")


def _reads_values(err):
    """A meta tensor has no values: code that reads them (.item(), bool(...)) cannot be checked there."""
    message = str(err)
    return "item()" in message or "data-dependent" in message or "Cannot copy out of meta" in message


# ---------------------------------------------------------------- ex-07-causal-softmax


@hidden_test("ex-07-causal-softmax", "one and two tokens (T = 1, T = 2)")
def causal_short(ns):
    causal_weights = answer(ns, "causal_weights")
    for shape in ((1, 1), (2, 1, 1), (2, 2), (3, 2, 2)):
        scores = _randn(*shape, seed=1)
        result = causal_weights(scores.clone())
        if not isinstance(result, torch.Tensor) or tuple(result.shape) != shape:
            got = tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
            raise Hint(f"scores of shape {shape} must give weights of shape {shape}, got {got}: keep every "
                       "dimension (no .squeeze())")
        if not torch.allclose(result.detach(), _reference_causal(scores), atol=1e-6):
            raise Hint(f"wrong weights for scores of shape {shape}: the first token sees only itself "
                       "(weight 1); build the mask from scores.shape[-1]")


@hidden_test("ex-07-causal-softmax", "large scores in float64")
def causal_large_float64(ns):
    causal_weights = answer(ns, "causal_weights")
    scores = _randn(2, 4, 4, seed=2, scale=500.0, dtype=torch.float64)
    result = causal_weights(scores.clone())
    if not isinstance(result, torch.Tensor):
        raise Hint(f"causal_weights must return a tensor, got {type(result).__name__}")
    result = result.detach()
    if not torch.isfinite(result).all():
        raise Hint("scores of a few thousand gave inf or nan: hide the future with -inf and use torch.softmax "
                   "(stable), not exp(scores) * mask / sum")
    if result.dtype != torch.float64:
        raise Hint(f"float64 scores must give float64 weights, got {result.dtype}: do not convert the dtype")
    if not torch.allclose(result, _reference_causal(scores), atol=1e-10):
        raise Hint("for large float64 scores the weights differ from a softmax over the visible scores")


@hidden_test("ex-07-causal-softmax", "device-agnostic: the mask follows the scores' device")
def causal_device(ns):
    causal_weights = answer(ns, "causal_weights")
    scores = torch.empty(2, 5, 5, device="meta")
    try:
        result = causal_weights(scores)
    except (RuntimeError, NotImplementedError) as err:
        if _reads_values(err):
            return  # the code reads tensor values in Python (fine on a GPU): nothing to check here
        if "meta" in str(err) or "device" in str(err):
            raise Hint(DEVICE.format(detail=f" ({str(err).splitlines()[0][:120]})", name="scores")) from None
        raise
    if not isinstance(result, torch.Tensor) or result.device.type != "meta" or tuple(result.shape) != (2, 5, 5):
        raise Hint(DEVICE.format(detail=": the weights did not stay on the scores' device", name="scores"))


# ---------------------------------------------------------------- ex-07-decoder-mask


@hidden_test("ex-07-decoder-mask", "one token, and a batch of one sequence")
def decoder_short(ns):
    decoder_mask = answer(ns, "decoder_mask")
    for pad in (torch.tensor([[False]]), torch.tensor([[False], [False]]),
                torch.tensor([[False, False, True]])):
        result = decoder_mask(pad.clone())
        B, T = pad.shape
        if not isinstance(result, torch.Tensor) or tuple(result.shape) != (B, T, T):
            got = tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
            raise Hint(f"a padding mask of shape {(B, T)} must give a mask of shape {(B, T, T)}, got {got}: "
                       "keep every dimension (no .squeeze())")
        if result.dtype != torch.bool or not torch.equal(result, _reference_decoder_mask(pad)):
            raise Hint(f"wrong mask for a padding mask of shape {(B, T)}: True above the diagonal and in "
                       "padded key columns, False elsewhere (bool)")


@hidden_test("ex-07-decoder-mask", "padding anywhere: left padding and holes")
def decoder_left_padding(ns):
    decoder_mask = answer(ns, "decoder_mask")
    pad = torch.tensor([[True, True, False, False],
                        [False, True, False, True],
                        [False, False, False, False]])
    result = decoder_mask(pad.clone())
    if not isinstance(result, torch.Tensor) or not torch.equal(result, _reference_decoder_mask(pad)):
        raise Hint("padding is not always at the end (left padding, holes): hide exactly the keys where "
                   "key_padding_mask is True, key_padding_mask[:, None, :], combined with the causal mask")


@hidden_test("ex-07-decoder-mask", "device-agnostic: the mask follows the padding mask's device")
def decoder_device(ns):
    decoder_mask = answer(ns, "decoder_mask")
    pad = torch.empty(2, 6, dtype=torch.bool, device="meta")
    try:
        result = decoder_mask(pad)
    except (RuntimeError, NotImplementedError) as err:
        if _reads_values(err):
            return  # the code reads tensor values in Python (fine on a GPU): nothing to check here
        if "meta" in str(err) or "device" in str(err):
            raise Hint(DEVICE.format(detail=f" ({str(err).splitlines()[0][:120]})",
                                     name="key_padding_mask")) from None
        raise
    if not isinstance(result, torch.Tensor) or result.device.type != "meta" or tuple(result.shape) != (2, 6, 6):
        raise Hint(DEVICE.format(detail=": the mask did not end up on the padding mask's device",
                                 name="key_padding_mask"))
