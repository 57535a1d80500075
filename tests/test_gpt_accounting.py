"""Chapter 9's accounting (attention_book.gpt_accounting): parameters, FLOPs, MFU, training memory."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from attention_book.gpt import GPT, GPTConfig
from attention_book.gpt_accounting import (
    flops_per_token,
    matmul_ceiling,
    model_flops_utilization,
    parameter_breakdown,
    saved_activation_bytes,
    training_memory,
)

PART_OF = {"token_embedding": "token embedding (= output layer)", "position_embedding": "position embedding",
           "attn": "attention", "mlp": "MLP", "ln_1": "layer norms", "ln_2": "layer norms", "ln_f": "layer norms"}


def counted_by_name(model: GPT) -> dict:
    """The parameters of a built model, grouped by the part their name says they belong to."""
    counts = dict.fromkeys(parameter_breakdown(model), 0)
    for name, parameter in model.named_parameters():  # the tied output layer appears once
        part = next(PART_OF[piece] for piece in name.split(".") if piece in PART_OF)
        counts[part] += parameter.numel()
    return counts


@pytest.mark.parametrize("overrides", [dict(), dict(bias=False), dict(pre_norm=False), dict(n_layer=3, d_model=24)])
def test_parameter_breakdown_is_exact_for_every_part(overrides):
    config = GPTConfig(**(dict(vocab_size=23, context_length=12, d_model=16, n_layer=2, n_head=4) | overrides))
    model = GPT(config)
    assert parameter_breakdown(config) == counted_by_name(model) == parameter_breakdown(model)
    assert sum(parameter_breakdown(config).values()) == model.num_parameters()


def test_gpt2_small_breakdown():
    parts = parameter_breakdown(GPTConfig())  # GPT-2 small's sizes
    assert parts == {"token embedding (= output layer)": 38_597_376, "position embedding": 786_432,
                     "attention": 28_348_416, "MLP": 56_669_184, "layer norms": 38_400}
    assert sum(parts.values()) == 124_439_808


def test_flops_per_token_counts_the_matrix_products_and_the_causal_attention():
    config = GPTConfig(vocab_size=23, context_length=12, d_model=16, n_layer=2, n_head=4)
    parts = parameter_breakdown(config)
    n = sum(parts.values()) - parts["position embedding"]
    forward = flops_per_token(config, training=False)
    # attention: query t meets t + 1 keys and values, 4 d FLOPs each, in every layer; per token
    T, d, L = 12, 16, 2
    assert forward["attention"] == sum(4 * d * (t + 1) for t in range(T)) * L / T
    assert forward["matrix products"] == 2 * n
    training = flops_per_token(config)
    assert training["total"] == 3 * forward["total"] == training["matrix products"] + training["attention"]
    assert flops_per_token(config, context_length=6)["attention"] < training["attention"]


def test_the_matrix_product_flops_are_what_pytorch_counts():
    """FlopCounterMode counts the linear layers of a forward pass; with the book's core (which
    computes every score, the future's too, before masking) also the full T x T attention."""
    config = GPTConfig(vocab_size=23, context_length=12, d_model=16, n_layer=2, n_head=4, fused_attention=False)
    model = GPT(config).eval()
    B, T, d, L = 3, 12, 16, 2
    with FlopCounterMode(display=False) as counter:
        model(torch.randint(0, 23, (B, T)))
    measured = counter.get_total_flops() / (B * T)
    parts = parameter_breakdown(config)
    biases_and_norms = L * (4 * d + 5 * d) + parts["layer norms"]  # in N, but no matrix product
    matrix_products = flops_per_token(config, training=False)["matrix products"] - 2 * biases_and_norms
    full_attention = 4 * d * T * L  # every query against every key: twice the causal count
    assert measured == matrix_products + full_attention


def test_mfu_and_the_ceiling():
    assert model_flops_utilization(1000.0, 2e6, 4e9) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="ceiling"):
        model_flops_utilization(1000.0, 2e6, 0.0)
    ceiling = matmul_ceiling("cpu", size=64, repeats=2)
    assert ceiling > 1e6  # a FLOP/s figure, not seconds
    with pytest.raises(TypeError, match="dtype"):
        matmul_ceiling("cpu", dtype=torch.long, size=8)


def test_training_memory_counts_weights_gradients_adamw_and_measured_activations():
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=23, context_length=64, d_model=16, n_layer=2, n_head=4)
    model = GPT(config)
    idx = torch.randint(0, 23, (4, 64))
    memory = training_memory(model, idx, idx)
    assert memory["parameters"] == memory["gradients"] == 4 * model.num_parameters()
    assert memory["AdamW state"] == 2 * memory["parameters"]
    assert memory["activations"] > 0 and model.training  # the mode is left as it was
    # the activations grow with the batch ...
    assert saved_activation_bytes(model, idx[:2], idx[:2]) < memory["activations"]
    # ... and the book's core keeps each block's (B, H, T, T) weights for the backward pass
    core = GPT(GPTConfig(**(vars(config) | dict(fused_attention=False))))
    core.load_state_dict(model.state_dict())
    weights_bytes = 2 * 4 * 4 * 64 * 64 * 4  # layers x B x H x T x T x float32
    assert saved_activation_bytes(core, idx, idx) >= memory["activations"] + weights_bytes
    bf16 = saved_activation_bytes(model, idx, idx, autocast_dtype=torch.bfloat16)
    assert bf16 != memory["activations"]
    with pytest.raises(TypeError, match="GPT"):
        training_memory(torch.nn.Linear(2, 2), idx, idx)
