"""Chapter 9's GPT (attention_book.gpt): blocks, the model, fused attention, the generation cache."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_book.gpt import GPT, Block, GPTCache, GPTConfig, causal_self_attention
from attention_book.multihead import MultiHeadAttention


def small_gpt(seed=0, **overrides):
    torch.manual_seed(seed)
    config = dict(vocab_size=23, context_length=12, d_model=16, n_layer=2, n_head=4) | overrides
    return GPT(GPTConfig(**config))


# ----------------------------------------------------------------------------------- the model
def test_block_is_pre_norm_with_the_books_attention():
    torch.manual_seed(0)
    block = Block(GPTConfig(vocab_size=10, context_length=8, d_model=16, n_layer=1, n_head=4)).eval()
    assert isinstance(block.attn, MultiHeadAttention) and block.attn.causal
    assert block.attn.W_query.bias is not None  # GPT-2 has biases on q, k, v
    x = torch.randn(2, 8, 16)
    after_attention = x + block.attn(block.ln_1(x))
    expected = after_attention + block.mlp.proj(F.gelu(block.mlp.fc(block.ln_2(after_attention)),
                                                        approximate="tanh"))
    torch.testing.assert_close(block(x), expected)
    output, weights = block(x, return_weights=True)
    assert weights.shape == (2, 4, 8, 8)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 8))


def test_post_norm_block_normalises_the_stream_after_each_addition():
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=10, context_length=8, d_model=16, n_layer=2, n_head=4, pre_norm=False)
    block = Block(config).eval()
    x = torch.randn(2, 8, 16)
    after_attention = block.ln_1(x + block.attn(x))
    expected = block.ln_2(after_attention + block.mlp(after_attention))
    torch.testing.assert_close(block(x), expected)
    assert isinstance(GPT(config).ln_f, torch.nn.Identity)  # the last ln_2 already normalised the stream
    assert isinstance(small_gpt().ln_f, torch.nn.LayerNorm)  # pre-norm: the plain sum needs one at the top


def test_gpt_shapes_loss_weights_and_tied_output_layer():
    model = small_gpt().eval()
    idx = torch.randint(0, 23, (3, 12))
    logits = model(idx)
    assert logits.shape == (3, 12, 23)
    logits2, loss = model(idx, idx)
    torch.testing.assert_close(loss, F.cross_entropy(logits.reshape(-1, 23), idx.reshape(-1)))
    logits3, loss3, weights = model(idx, idx, return_weights=True)
    assert weights.shape == (2, 3, 4, 12, 12)
    _, weights_only = model(idx, return_weights=True)
    torch.testing.assert_close(weights_only, weights)
    assert model.lm_head.weight is model.token_embedding.weight
    assert model.num_parameters() == sum(p.numel() for p in set(model.parameters()))


def test_gpt_is_causal():
    model = small_gpt().eval()
    idx = torch.randint(0, 23, (1, 12))
    changed = idx.clone()
    changed[0, 7:] = (changed[0, 7:] + 1) % 23  # change the future of position 6
    torch.testing.assert_close(model(idx)[:, :7], model(changed)[:, :7])
    assert not torch.allclose(model(idx)[:, 7:], model(changed)[:, 7:])


def test_residual_projections_start_smaller():
    model = small_gpt(n_layer=8, d_model=64)
    assert abs(model.blocks[0].attn.out_proj.weight.std().item() - 0.02 / math.sqrt(16)) < 0.002
    assert abs(model.blocks[0].attn.W_query.weight.std().item() - 0.02) < 0.002


def test_gpt_without_checks_computes_the_same_logits():
    model = small_gpt().eval()
    idx = torch.randint(0, 23, (3, 12))
    torch.testing.assert_close(model(idx, validate=False), model(idx), rtol=0, atol=0)
    with pytest.raises(ValueError, match="vocab_size=23"):
        model(torch.full((1, 3), 23))  # the checks catch it ...
    bad = torch.full((1, 3), 23)
    with pytest.raises(IndexError):
        model(bad, validate=False)  # ... and without them the embedding fails less clearly


# ----------------------------------------------------------------------------------- fused attention
@pytest.mark.parametrize("pre_norm", [True, False])
def test_fused_attention_equals_the_core(pre_norm):
    """The fused path (PyTorch's kernel) and the book's core compute the same function: the
    attention sub-layer alone, whole models, their gradients, and the weights the core returns."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(d_in=16, d_out=16, context_length=10, dropout=0.0, num_heads=4, qkv_bias=True)
    x = torch.randn(3, 10, 16, requires_grad=True)
    core = attn(x)  # the book's MultiHeadAttention: the attention core
    torch.testing.assert_close(causal_self_attention(attn, x, fused=True), core)
    torch.testing.assert_close(causal_self_attention(attn, x, fused=False), core, rtol=0, atol=0)
    fused, book = small_gpt(pre_norm=pre_norm), small_gpt(pre_norm=pre_norm, fused_attention=False)
    book.load_state_dict(fused.state_dict())
    idx = torch.randint(0, 23, (3, 12), generator=torch.Generator().manual_seed(1))
    loss_fused, loss_book = fused(idx, idx)[1], book(idx, idx)[1]
    torch.testing.assert_close(loss_fused, loss_book)
    loss_fused.backward()
    loss_book.backward()
    for (name, a), b in zip(fused.named_parameters(), book.parameters()):
        torch.testing.assert_close(a.grad, b.grad, msg=name)
    # weights asked for: the core computes them, and the logits stay those of the fused path
    logits, weights = fused.eval()(idx, return_weights=True)
    torch.testing.assert_close(logits, fused(idx))
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 4, 12))


def test_fused_attention_applies_dropout_only_in_training():
    torch.manual_seed(0)
    attn = MultiHeadAttention(d_in=8, d_out=8, context_length=6, dropout=0.5, num_heads=2, qkv_bias=True)
    x = torch.randn(2, 6, 8)
    attn.eval()
    torch.testing.assert_close(causal_self_attention(attn, x), attn(x))
    attn.train()
    torch.manual_seed(1)
    first = causal_self_attention(attn, x)
    torch.manual_seed(2)
    assert not torch.allclose(first, causal_self_attention(attn, x))  # dropped weights differ per draw


def test_fused_attention_runs_in_bfloat16_autocast_with_the_core_close():
    """Mixed precision on the CPU: the fused path under bfloat16 autocast stays close to float32."""
    model = small_gpt().eval()
    idx = torch.randint(0, 23, (2, 12), generator=torch.Generator().manual_seed(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(idx)
    assert logits.dtype == torch.bfloat16
    torch.testing.assert_close(logits.float(), model(idx), atol=0.05, rtol=0.05)


# ----------------------------------------------------------------------------------- the cache
@pytest.mark.parametrize("fused", [True, False])
def test_cached_forward_equals_the_whole_sequence(fused):
    """Feeding a sequence in pieces through a GPTCache gives the logits of feeding it at once,
    whatever the pieces: the prompt, several tokens at a time, one token at a time."""
    model = small_gpt(fused_attention=fused).eval()
    idx = torch.randint(0, 23, (2, 12), generator=torch.Generator().manual_seed(2))
    whole = model(idx)
    cache = model.new_cache()
    pieces = [model(idx[:, a:b], cache=cache) for a, b in ((0, 5), (5, 9), (9, 10), (10, 11), (11, 12))]
    torch.testing.assert_close(torch.cat(pieces, dim=1), whole)
    assert len(cache) == 12 and cache.keys.shape == (2, 2, 4, 12, 4)  # (layers, B, H, capacity, hd)
    keys = cache.keys
    cache.reset()
    torch.testing.assert_close(model(idx[:, :4], cache=cache), whole[:, :4])
    assert cache.keys is keys  # preallocated once: reset keeps the memory


def test_the_cache_is_preallocated_and_refuses_what_does_not_fit():
    model = small_gpt().eval()
    cache = model.new_cache(capacity=6)
    assert isinstance(cache, GPTCache) and cache.keys is None and "0 of 6" in repr(cache)
    idx = torch.randint(0, 23, (2, 4))
    model(idx, cache=cache)
    with pytest.raises(ValueError, match="cache holds 4 of 6 tokens and idx brings 3 more"):
        model(idx[:, :3], cache=cache)
    with pytest.raises(ValueError, match="batch of 1 sequences but the cache holds 2"):
        model(idx[:1, :1], cache=cache)
    with pytest.raises(ValueError, match="return_weights=True with a cache"):
        model(idx[:, :1], cache=cache, return_weights=True)
    with pytest.raises(TypeError, match="model.new_cache"):
        model(idx, cache=GPTCache(n_layer=5, capacity=12))
    with pytest.raises(ValueError, match="capacity=13 is longer than context_length=12"):
        model.new_cache(capacity=13)


def test_the_cache_takes_the_dtype_of_the_keys_under_autocast():
    model = small_gpt().eval()
    cache = model.new_cache()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.randint(0, 23, (1, 3)), cache=cache)
        model(torch.randint(0, 23, (1, 1)), cache=cache)
    assert cache.keys.dtype == torch.bfloat16 and len(cache) == 4
