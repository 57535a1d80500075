"""Hidden tests of chapter 7 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.

The device tests use PyTorch's "meta" device (tensors with a shape and a device but no data): it
notices a mask built on the CPU next to scores on another device, without needing a GPU. The
first operation on a meta tensor loads PyTorch's meta kernels (about 2 s, once per kernel).
"""

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test, randn


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



# ---------------------------------------------------------------- ex-07-causal-softmax


@hidden_test("ex-07-causal-softmax", "one and two tokens (T = 1, T = 2)")
def causal_short(ns):
    causal_weights = answer(ns, "causal_weights")
    for shape in ((1, 1), (2, 1, 1), (2, 2), (3, 2, 2)):
        scores = randn(*shape, seed=1)
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
    scores = randn(2, 4, 4, seed=2, scale=500.0, dtype=torch.float64)
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


def _meta(student, name, shape, dtype):
    if not student.has(name):
        raise Hint(f"`{name}` is not defined: run the cell that defines it (and keep its name)")
    return student.probe("ch07.meta-device", name=name, shape=shape, dtype=dtype)


def _device_verdict(outcome, shape, what, name):
    if outcome[0] == "error":
        if outcome[1] == "NotImplementedError" and "meta" not in outcome[2]:
            from attention_book.instructor.hidden import NotImplementedYet
            raise NotImplementedYet(outcome[1], outcome[2])
        message = outcome[2]
        if "item()" in message or "data-dependent" in message or "Cannot copy out of meta" in message:
            return  # the code reads tensor values in Python (fine on a GPU): nothing to check here
        raise Hint(DEVICE.format(detail=f" ({message.splitlines()[0][:120] if message else outcome[1]})", name=name))
    if outcome[1] != "meta" or tuple(outcome[2] or ()) != shape:
        raise Hint(DEVICE.format(detail=f": the {what} did not stay on the input's device", name=name))


@hidden_test("ex-07-causal-softmax", "device-agnostic: the mask follows the scores' device", guard=True)
def causal_device(student, reference):
    _device_verdict(_meta(student, "causal_weights", (2, 5, 5), torch.float32), (2, 5, 5), "weights", "scores")

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


@hidden_test("ex-07-decoder-mask", "device-agnostic: the mask follows the padding mask's device", guard=True)
def decoder_device(student, reference):
    _device_verdict(_meta(student, "decoder_mask", (2, 6), torch.bool), (2, 6, 6), "mask", "key_padding_mask")



# ---------------------------------------------------------------- ex-07-decoder-block
# Properties of the student's block, checked here on the values it returns: causal over the
# decoder's tokens, blind to padded encoder positions, and using the encoder at all.

def _decoder(student, seed=31, B=2, T=5, T_enc=4, d_model=8, d_context=6, num_heads=2):
    x = randn(B, T, d_model, seed=seed)
    encoder_output = randn(B, T_enc, d_context, seed=seed + 1)
    padding = torch.zeros(B, T_enc, dtype=torch.bool)
    padding[0, -1] = True  # the first sequence's last encoder position is padding
    padding[-1, -2:] = True
    out, out_future, out_padded, out_visible = student.probe(
        "ch07.decoder-block", seed=seed, x=x, encoder_output=encoder_output, padding=padding, d_model=d_model,
        d_context=d_context, num_heads=num_heads)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (B, T, d_model):
        found = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise Hint(f"DecoderBlock({d_model}, {d_context}, {num_heads}, 16) on x of shape {(B, T, d_model)} must "
                   f"return {(B, T, d_model)}, got {found}")
    return x, out, out_future, out_padded, out_visible


@hidden_test("ex-07-decoder-block", "uses the encoder output (and is not the identity)")
def decoder_uses_encoder(student, reference):
    x, out, _, _, out_visible = _decoder(student)
    if torch.allclose(out, out_visible, atol=1e-6):
        raise Hint("changing the (unpadded) encoder output does not change the result: the cross-attention "
                   "must take its keys and values from encoder_output (context=encoder_output)")
    if torch.allclose(out, x, atol=1e-6):
        raise Hint("the block returns x unchanged: add the self-attention and the cross-attention outputs")


@hidden_test("ex-07-decoder-block", "causal: a later decoder token does not change earlier outputs", guard=True)
def decoder_causal(student, reference):
    _, out, out_future, _, _ = _decoder(student, seed=32, T=6, d_model=4, d_context=3, num_heads=2)
    if not torch.allclose(out[:, :-1], out_future[:, :-1], atol=1e-5):
        raise Hint("changing the last decoder token changed the outputs of earlier tokens: the self-attention "
                   "must be causal (causal=True)")


@hidden_test("ex-07-decoder-block", "padded encoder positions are ignored", guard=True)
def decoder_padding(student, reference):
    _, out, _, out_padded, _ = _decoder(student, seed=33, T=3, T_enc=5)
    if not torch.allclose(out, out_padded, atol=1e-5):
        raise Hint("changing padded encoder positions changed the result: pass encoder_padding_mask to the "
                   "cross-attention as key_padding_mask (True = padding)")


# ---------------------------------------------------------------- ex-07-from-memory
# The reader's CausalMultiHeadAttention holds the grader's float64 weights (probe
# "ch07.from-memory") and is compared with the chapter's own class holding the same weights.
# The first test is the exercise's main value test (the scorer's main-value rule).

from attention_book.checks.ch07 import (  # noqa: E402 - the shared diagnosis of the self-check
    from_memory_diagnosis, from_memory_dropout_verdict, from_memory_one_hot,
    from_memory_parameters, from_memory_weights)

_MEMORY_SHAPES = (  # (B, T, d_in, d_out, num_heads, context_length, qkv_bias)
    (2, 5, 8, 8, 2, 9, False),
    (3, 4, 6, 6, 3, 6, True),
    (2, 6, 5, 8, 4, 8, True),
    (1, 1, 4, 4, 2, 5, False),
)


def _memory_config(d_in, d_out, num_heads, context_length, qkv_bias, dropout=0.0):
    return {"d_in": d_in, "d_out": d_out, "context_length": context_length, "dropout": dropout,
            "num_heads": num_heads, "qkv_bias": qkv_bias}


def _memory_run(session, config, params, x, mode="eval", seed=0, calls=1, device=None):
    if not session.has("CausalMultiHeadAttention"):
        raise Hint("`CausalMultiHeadAttention` is not defined: run the cell that defines it (and keep its name)")
    result = session.probe("ch07.from-memory", config=config, params=params, x=x, mode=mode, seed=seed,
                           calls=calls, device=device)
    if result[0] == "missing":
        raise Hint(result[1])
    return result


def _memory_outputs(session, config, params, x, **options):
    _, outputs, _ = _memory_run(session, config, params, x, **options)
    B, T, _ = x.shape
    for out in outputs:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (B, T, config["d_out"]):
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else out
            raise Hint(f"forward on x of shape {(B, T, config['d_in'])} must return one tensor of shape "
                       f"{(B, T, config['d_out'])}, got {got}")
    return outputs


@hidden_test("ex-07-from-memory", "matches the chapter's attention in eval mode (float64, several shapes)", weight=4)
def memory_values(student, reference):
    for index, (B, T, d_in, d_out, H, context_length, qkv_bias) in enumerate(_MEMORY_SHAPES):
        config = _memory_config(d_in, d_out, H, context_length, qkv_bias)
        params = from_memory_parameters(d_in, d_out, qkv_bias, seed=300 + index)
        x = randn(B, T, d_in, seed=310 + index, dtype=torch.float64)
        got = _memory_outputs(student, config, params, x)[0]
        want = _memory_outputs(reference, config, params, x)[0]
        if got.dtype != torch.float64:
            raise Hint(f"a float64 module and input must give a float64 output, got {got.dtype}")
        if not torch.allclose(got, want, atol=1e-10, rtol=1e-8):
            raise Hint(from_memory_diagnosis(got, params, x, H) or (
                f"the output differs from causal multi-head attention with the same weights (T={T}, "
                f"num_heads={H}, d_in={d_in}, d_out={d_out}): project, split into heads, scale by "
                "1/sqrt(head_dim), hide the future with -inf, softmax over the keys, merge, out_proj"))


@hidden_test("ex-07-from-memory", "eval mode with dropout=0.5: dropout switched off")
def memory_eval_dropout(student, reference):
    config = _memory_config(6, 6, 2, 8, True, dropout=0.5)
    params = from_memory_parameters(6, 6, True, seed=320)
    x = randn(3, 5, 6, seed=321, dtype=torch.float64)
    first, second = _memory_outputs(student, config, params, x, calls=2)
    want = _memory_outputs(reference, config, params, x)[0]
    if not torch.equal(first, second):
        raise Hint("dropout active in eval mode: two calls after .eval() differ; nn.Dropout switches itself "
                   "off in eval mode (F.dropout needs training=self.training)")
    if not torch.allclose(first, want, atol=1e-10, rtol=1e-8):
        raise Hint("with dropout=0.5 in eval mode the output must equal the output without dropout")


@hidden_test("ex-07-from-memory", "train mode with dropout=0: the same as eval mode")
def memory_train_no_dropout(student, reference):
    config = _memory_config(8, 8, 4, 8, False)
    params = from_memory_parameters(8, 8, False, seed=330)
    x = randn(2, 6, 8, seed=331, dtype=torch.float64)
    got = _memory_outputs(student, config, params, x, mode="train")[0]
    want = _memory_outputs(reference, config, params, x)[0]
    if not torch.allclose(got, want, atol=1e-10, rtol=1e-8):
        raise Hint("in training mode with dropout=0 the output must equal eval mode's: the mask, the scale and "
                   "the softmax are the same in both modes")


@hidden_test("ex-07-from-memory", "train mode: attention weights dropped with p and the rest rescaled")
def memory_train_dropout(student, reference):
    H, p = 2, 0.5
    params, x = from_memory_one_hot(H, num_tokens=6, batch_size=8, seed=340)
    config = _memory_config(x.shape[-1], x.shape[-1], H, 8, False, dropout=p)
    eval_out = _memory_outputs(reference, config, params, x)[0]
    first, second = _memory_outputs(student, config, params, x, mode="train", seed=341, calls=2)
    problem = from_memory_dropout_verdict(from_memory_weights(first, H), from_memory_weights(eval_out, H),
                                          from_memory_weights(second, H), p)
    if problem:
        raise Hint(problem)


@hidden_test("ex-07-from-memory", "the mask moves with the module (.to(device))", guard=True)
def memory_device(student, reference):
    config = _memory_config(6, 6, 2, 8, False)
    params = from_memory_parameters(6, 6, False, seed=350)
    result = _memory_run(student, config, params, randn(2, 5, 6, seed=351, dtype=torch.float64), device="meta")
    if result[0] == "device":
        message = result[1]
        if "item()" in message or "data-dependent" in message or "meta" not in message.lower():
            return  # reads values in Python (fine on a GPU), or fails for another reason
        raise Hint("the mask stays behind when the module moves (.to(device)): register it with "
                   "self.register_buffer('mask', ...) or build it in forward on x.device")
    if result[1] != ["meta"]:
        raise Hint("after .to(device) the output is not on that device: keep every tensor the module uses as a "
                   "buffer or parameter, or build it on x.device")


@hidden_test("ex-07-from-memory", "x is left unchanged", guard=True)
def memory_input_unchanged(student, reference):
    config = _memory_config(6, 6, 3, 8, False)
    params = from_memory_parameters(6, 6, False, seed=360)
    x = randn(2, 4, 6, seed=361, dtype=torch.float64)
    _, _, after = _memory_run(student, config, params, x)
    if not torch.equal(after, x):
        raise Hint("your forward changed x in place; compute new tensors instead")



# ---------------------------------------------------------------- ex-07-find-the-bug-buffer
# The code as given keeps the mask as a plain attribute: right on the CPU, left behind by
# .to(device). The first test is the exercise's main value test (the scorer's main-value rule).


def _buffer_run(student, context_length, scores, device=None):
    if not student.has("CausalWeights"):
        raise Hint("`CausalWeights` is not defined: run the cell that defines it (and keep its name)")
    return student.probe("ch07.mask-buffer", context_length=context_length, scores=scores, device=device)


@hidden_test("ex-07-find-the-bug-buffer", "moves with .to(device): runs on the new device", weight=2)
def buffer_moves(student, reference):
    scores = randn(3, 4, 4, seed=95)
    here = _buffer_run(student, 6, scores)
    if here[0] == "error" or not isinstance(here[1], torch.Tensor) or tuple(here[1].shape) != (3, 4, 4) \
            or not torch.allclose(here[1], _reference_causal(scores), atol=1e-6):
        raise Hint("before it moves, the module must already give causal weights: a softmax over the keys "
                   "j <= i of each query i")
    outcome = _buffer_run(student, 6, scores, device="meta")
    if outcome[0] == "error" or outcome[1] != "meta":
        raise Hint("after module.to(device) the forward pass fails or leaves the device: the mask stays "
                   "behind as a plain attribute; keep it with self.register_buffer('mask', ...)")


@hidden_test("ex-07-find-the-bug-buffer", "causal weights on the CPU: T < context_length, T = 1")
def buffer_values(student, reference):
    for shape, context_length, seed in (((2, 5, 5), 9, 96), ((1, 1, 1), 3, 97), ((2, 3, 6, 6), 6, 98)):
        scores = randn(*shape, seed=seed)
        outcome = _buffer_run(student, context_length, scores)
        want = _reference_causal(scores)
        if outcome[0] == "error" or not isinstance(outcome[1], torch.Tensor) or tuple(outcome[1].shape) != shape:
            raise Hint(f"scores of shape {shape} with context_length={context_length}: slice the mask to the "
                       "scores, self.mask[:T, :T], and return weights of the scores' shape")
        if not torch.allclose(outcome[1], want, atol=1e-6):
            raise Hint(f"scores of shape {shape}: the weights must be a softmax over the visible keys "
                       "(key j <= query i)")


@hidden_test("ex-07-find-the-bug-buffer", "the mask is not a trainable parameter", guard=True)
def buffer_not_parameter(student, reference):
    outcome = _buffer_run(student, 4, randn(1, 4, 4, seed=99))
    if outcome[0] == "ok" and outcome[2] != 0:
        raise Hint("the mask is not learned: register it as a buffer, not as an nn.Parameter")
