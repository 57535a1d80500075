"""attention_book.cost (chapter 10): FLOPs, bytes and arithmetic intensity, exact."""

from __future__ import annotations

import pytest
import torch

from attention_book.cost import (
    QUERY_BLOCK,
    arithmetic_intensity,
    attention_bytes_moved,
    attention_flops,
    block_flops,
    causal_tile_fraction,
    cpu_flash_blocks,
    decode_step_cost,
    generation_step_flops,
    kv_cache_bytes,
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


def test_bytes_moved_from_scratch_writes_and_reads_the_square_matrices():
    B, T, d, H = 1, 1024, 64, 4
    scratch = attention_bytes_moved(B, T, d, H, fused=False)
    assert scratch == (4 * B * T * d + 4 * B * H * T * T) * 4
    assert attention_bytes_moved(B, T, d, H, fused=False, dtype=torch.float16) == scratch // 2


def test_fused_kernel_rereads_keys_and_values_once_per_block_of_queries():
    B, T, d, H = 2, 1000, 64, 4
    # Q read once, O written once, K and V read ceil(T / block) times
    for block in (1, 64, 128, 999, 1000, 4096):
        passes = -(-T // block)
        expected = (2 * B * T * d + passes * 2 * B * T * d) * 4
        assert attention_bytes_moved(B, T, d, H, query_block=block) == expected
    # everything on chip (one block): the ideal 4 B T d
    assert attention_bytes_moved(B, T, d, H, query_block=T) == 4 * B * T * d * 4
    assert attention_bytes_moved(B, T, d, H) == attention_bytes_moved(B, T, d, H,
                                                                      query_block=QUERY_BLOCK)


def test_intensity_levels_off_for_both_cores():
    B, d, H = 1, 768, 12
    flops = attention_flops(B, 4096, d, H, projections=False)
    assert arithmetic_intensity(B, 4096, d, H) == flops / attention_bytes_moved(B, 4096, d, H)
    # from scratch: towards d_head / 4 FLOP per float32 byte; fused: towards block / (2 * 4)
    scratch = [arithmetic_intensity(B, T, d, H, fused=False) for T in (1024, 4096, 16384, 65536)]
    fused = [arithmetic_intensity(B, T, d, H, query_block=128) for T in (1024, 4096, 16384, 65536)]
    assert scratch == sorted(scratch) and fused == sorted(fused)  # rising ...
    assert scratch[-1] < (d // H) / 4 and fused[-1] < 2 * 128 / 4  # ... but bounded
    assert scratch[-1] > 0.99 * (d // H) / 4 and fused[-1] > 0.99 * 2 * 128 / 4
    # a fused kernel with larger blocks reaches a higher ceiling; half precision doubles it
    assert arithmetic_intensity(B, 65536, d, H, query_block=256) > 1.9 * fused[-1]
    assert (arithmetic_intensity(B, 4096, d, H, dtype=torch.bfloat16)
            == 2 * arithmetic_intensity(B, 4096, d, H))


def test_kv_cache_bytes_and_grouped_query_savings():
    # GPT-2 small: 12 layers, d = 768, 12 heads, 1,024 tokens, float32: 72 MiB
    assert kv_cache_bytes(1, 1024, 768, 12, num_layers=12) == 2 * 12 * 1024 * 768 * 4 == 72 * 2**20
    mha = kv_cache_bytes(4, 100, 64, 8, num_layers=2)
    assert kv_cache_bytes(4, 100, 64, 8, num_layers=2, num_kv_heads=2) == mha // 4
    assert kv_cache_bytes(4, 100, 64, 8, num_layers=2, num_kv_heads=1) == mha // 8
    assert kv_cache_bytes(4, 100, 64, 8, num_layers=2, dtype=torch.bfloat16) == mha // 2


def test_decode_step_is_memory_bound():
    cost = decode_step_cost(1, 1023, 768, 12, num_layers=12)
    assert cost["attention_flops"] == 2 * 2 * 1024 * 768 * 12
    assert cost["cache_bytes"] == kv_cache_bytes(1, 1024, 768, 12, num_layers=12)
    assert cost["weight_bytes"] == 12 * 768**2 * 12 * 4
    assert cost["attention_intensity"] == 0.5  # 2 FLOPs per cached float32 number read
    assert decode_step_cost(1, 1023, 768, 12, 12, dtype=torch.bfloat16)["attention_intensity"] == 1.0
    # grouped-query attention: every key/value head read once serves `groups` query heads
    assert decode_step_cost(1, 1023, 768, 12, 12, num_kv_heads=3)["attention_intensity"] == 2.0
    # a batch shares the weights but not the caches
    batch = decode_step_cost(64, 1023, 768, 12, 12)
    assert batch["attention_intensity"] == 0.5 and batch["intensity"] > 4 * cost["intensity"]


@pytest.mark.parametrize("call, error, message", [
    (lambda: attention_flops(1, 8, 10, 3), ValueError, "choose num_heads from"),
    (lambda: attention_flops(1, 8.0, 12, 3), TypeError, "num_tokens"),
    (lambda: attention_flops(0, 8, 12, 3), ValueError, "batch_size"),
    (lambda: score_matrix_bytes(1, 10, 2, dtype="float32"), TypeError, "torch.dtype"),
    (lambda: attention_bytes_moved(1, 8, 12, 3, dtype=4), TypeError, "torch.dtype"),
    (lambda: block_flops(1, 8, 12, 3, mlp_ratio=0), ValueError, "mlp_ratio"),
    (lambda: attention_bytes_moved(1, 8, 12, 3, query_block=0), ValueError, "query_block"),
    (lambda: kv_cache_bytes(1, 8, 12, 4, num_kv_heads=3), ValueError, "num_kv_heads"),
    (lambda: decode_step_cost(1, 8, 12, 4, num_layers=1.5), TypeError, "num_layers"),
])
def test_errors_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_generation_step_flops_gpt2_small_at_1024_tokens():
    # issue 27's review: the saving of a KV cache is mostly in the linear layers
    full = generation_step_flops(1024, 768, 12, cached=False)
    assert full["linear"] == 24 * 768**2 * 1024 == 14_495_514_624  # "about 14.5 GFLOP"
    assert full["attention_core"] == 4 * 768 * (1024 * 1025 // 2) == 1_612_185_600  # "1.6"
    assert full["projections"] + full["mlp"] == full["linear"]
    assert full["total"] == full["linear"] + full["attention_core"]
    cached = generation_step_flops(1024, 768, 12, cached=True)
    assert cached["linear"] == 24 * 768**2 and cached["attention_core"] == 4 * 768 * 1024
    saved = {part: full[part] - cached[part] for part in ("linear", "attention_core")}
    assert saved["linear"] > 8 * saved["attention_core"]
    # the attention-only stack of the chapter: no MLP
    assert generation_step_flops(32, 256, 4, cached=True, mlp_ratio=0)["mlp"] == 0
    # agrees with attention_flops for the attention part of a full pass
    assert (full["projections"] + full["attention_core"]
            == attention_flops(1, 1024, 768, 12, causal=True))


@pytest.mark.parametrize("kwargs, error", [(dict(mlp_ratio=-1), ValueError), (dict(mlp_ratio=2.0), TypeError),
                                           (dict(cached="yes"), TypeError), (dict(num_tokens=0), ValueError)])
def test_generation_step_flops_errors(kwargs, error):
    arguments = dict(dict(num_tokens=8, d_model=16, num_heads=4, cached=True), **kwargs)
    with pytest.raises(error, match=next(iter(kwargs))):
        generation_step_flops(**arguments)


def test_cpu_flash_kernel_blocks_predict_the_reference_causal_saving():
    assert cpu_flash_blocks(1024) == (256, 512) and cpu_flash_blocks(768) == (256, 512)
    assert cpu_flash_blocks(767) == (64, 512) and cpu_flash_blocks(191) == (32, 512)
    # 4 query blocks x 2 key blocks at T = 1024: 1 + 1 + 2 + 2 of 8 tiles
    assert causal_tile_fraction(1024, *cpu_flash_blocks(1024)) == 0.75
    # no saving while one key block holds every key; towards 1/2 with more blocks
    assert causal_tile_fraction(512, *cpu_flash_blocks(512)) == 1.0
    assert causal_tile_fraction(2048, 256, 512) == 0.625
    assert causal_tile_fraction(4096, 256, 512) == 0.5625
    assert abs(causal_tile_fraction(2**16, 64, 64) - 0.5) < 1e-3
    with pytest.raises(ValueError, match="key_block"):
        causal_tile_fraction(8, 4, 0)
