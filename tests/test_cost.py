"""attention_book.cost (chapter 10): FLOPs, bytes and arithmetic intensity, exact."""

from __future__ import annotations

import pytest
import torch

from attention_book.cost import (
    arithmetic_intensity,
    attention_bytes_moved,
    attention_flops,
    block_flops,
    score_matrix_bytes,
)


def test_attention_flops_counts_matrix_products():
    B, T, d, H = 2, 10, 12, 3
    projections = 4 * 2 * B * T * d * d
    core = 2 * 2 * B * T * T * d
    assert attention_flops(B, T, d, H) == projections + core
    assert attention_flops(B, T, d, H, projections=False) == core
    causal_core = 2 * 2 * B * (T * (T + 1) // 2) * d
    assert attention_flops(B, T, d, H, causal=True, projections=False) == causal_core


def test_attention_flops_do_not_depend_on_the_number_of_heads():
    assert attention_flops(1, 64, 48, 1) == attention_flops(1, 64, 48, 12)


def test_attention_flops_core_is_quadratic_in_tokens():
    one = attention_flops(1, 100, 16, 2, projections=False)
    assert attention_flops(1, 200, 16, 2, projections=False) == 4 * one


def test_block_flops_quadratic_part_wins_beyond_six_d():
    # 4 B T^2 d > (8 + 16) B T d^2  <=>  T > 6 d  (attention + a 4d-wide MLP)
    d = 64
    below, above = block_flops(1, 6 * d, d, 4), block_flops(1, 6 * d + 1, d, 4)
    assert below["quadratic"] == below["linear"]
    assert above["quadratic"] > above["linear"]
    assert below["total"] == below["linear"] + below["quadratic"]
    # attention alone: the core wins beyond 2 d
    alone = attention_flops(1, 2 * d, d, 4, projections=False)
    assert alone == attention_flops(1, 2 * d, d, 4) - alone


def test_score_matrix_bytes():
    assert score_matrix_bytes(8, 1024, 12) == 8 * 12 * 1024 * 1024 * 4
    assert score_matrix_bytes(1, 10, 2, dtype=torch.bfloat16) == 2 * 100 * 2


def test_bytes_moved_and_intensity():
    B, T, d, H = 1, 1024, 64, 4
    fused = attention_bytes_moved(B, T, d, H)
    scratch = attention_bytes_moved(B, T, d, H, fused=False)
    assert fused == 4 * B * T * d * 4
    assert scratch == fused + 4 * B * H * T * T * 4
    assert attention_bytes_moved(B, T, d, H, dtype=torch.float16) == fused // 2
    flops = attention_flops(B, T, d, H, projections=False)
    assert arithmetic_intensity(B, T, d, H) == flops / fused
    # the fused kernel's intensity grows with T, the from-scratch one's stalls
    assert arithmetic_intensity(B, 2 * T, d, H) == 2 * arithmetic_intensity(B, T, d, H)
    assert (arithmetic_intensity(B, 2 * T, d, H, fused=False)
            < 1.1 * arithmetic_intensity(B, T, d, H, fused=False))


@pytest.mark.parametrize("call, error, message", [
    (lambda: attention_flops(1, 8, 10, 3), ValueError, "choose num_heads from"),
    (lambda: attention_flops(1, 8.0, 12, 3), TypeError, "num_tokens"),
    (lambda: attention_flops(0, 8, 12, 3), ValueError, "batch_size"),
    (lambda: score_matrix_bytes(1, 10, 2, dtype="float32"), TypeError, "torch.dtype"),
    (lambda: attention_bytes_moved(1, 8, 12, 3, dtype=4), TypeError, "torch.dtype"),
    (lambda: block_flops(1, 8, 12, 3, mlp_ratio=0), ValueError, "mlp_ratio"),
])
def test_errors_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
