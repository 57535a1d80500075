"""attention_book.positions (chapter 10): rotary position embeddings and position ids."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from attention_book.positions import (
    ROPE_BASE,
    apply_rope,
    next_positions,
    positions_from_padding,
    rope_frequencies,
)

FAST = settings(max_examples=30, deadline=None)


def test_frequencies_fall_from_one_to_about_one_over_the_base():
    theta = rope_frequencies(8)
    expected = torch.tensor([ROPE_BASE ** (-i / 8) for i in (0, 2, 4, 6)])
    torch.testing.assert_close(theta, expected)
    torch.testing.assert_close(rope_frequencies(4, base=100.0), torch.tensor([1.0, 0.1]))


def test_rope_rotates_pairs_by_position_times_frequency():
    x = torch.tensor([[1.0, 0.0, 1.0, 0.0]])  # one token, head_dim 4
    rotated = apply_rope(x, torch.tensor([3]), base=100.0)
    # pair 0 turns by 3 * 1 rad, pair 1 by 3 * 0.1 rad
    expected = torch.tensor([[math.cos(3.0), math.sin(3.0), math.cos(0.3), math.sin(0.3)]])
    torch.testing.assert_close(rotated, expected)
    # position 0 is no rotation at all
    assert torch.equal(apply_rope(x, torch.tensor([0])), x)


@FAST
@given(st.integers(1, 4).map(lambda n: 2 * n), st.integers(0, 300), st.integers(0, 300),
       st.integers(0, 300), st.integers(0, 2**16))
def test_scores_depend_only_on_the_offset(head_dim, m, n, shift, seed):
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, 1, head_dim, generator=generator, dtype=torch.float64)
    score = apply_rope(q, torch.tensor([m])) @ apply_rope(k, torch.tensor([n])).T
    shifted = apply_rope(q, torch.tensor([m + shift])) @ apply_rope(k, torch.tensor([n + shift])).T
    # the angles are computed in float32 (as the module does): equal up to its rounding
    torch.testing.assert_close(score, shifted, atol=1e-3 * (1 + q.norm() * k.norm()), rtol=0)


def test_rotation_keeps_lengths_and_dtype():
    x = torch.randn(2, 3, 5, 8)
    rotated = apply_rope(x, torch.arange(5))
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    assert apply_rope(x.to(torch.bfloat16), torch.arange(5)).dtype == torch.bfloat16


def test_per_sequence_positions_broadcast_over_heads():
    x = torch.randn(2, 3, 4, 6)  # (B, H, T, hd)
    positions = torch.tensor([[0, 1, 2, 3], [5, 6, 7, 8]])
    rotated = apply_rope(x, positions)
    torch.testing.assert_close(rotated[1], apply_rope(x[1], torch.arange(5, 9)))
    torch.testing.assert_close(rotated[0], apply_rope(x[0], torch.arange(4)))


def test_positions_skip_left_padding_and_continue_after_a_cache():
    padding = torch.tensor([[True, True, False, False], [False, False, False, False]])
    positions = positions_from_padding(padding)
    assert positions.tolist() == [[0, 0, 0, 1], [0, 1, 2, 3]]
    assert next_positions(positions).tolist() == [[2], [4]]
    assert next_positions(torch.arange(3), num_new=2).tolist() == [3, 4]


@pytest.mark.parametrize("call, error, message", [
    (lambda: rope_frequencies(5), ValueError, "head_dim=5 is odd"),
    (lambda: rope_frequencies(4, base=0), ValueError, "base"),
    (lambda: apply_rope(torch.randn(3, 6), torch.arange(3.0)), TypeError, "positions"),
    (lambda: apply_rope(torch.randn(3, 6), torch.arange(4)), ValueError, "one position per token"),
    (lambda: apply_rope(torch.randn(3, 6), -torch.arange(3)), ValueError, "positions must be >= 0"),
    (lambda: apply_rope(torch.arange(6).view(3, 2), torch.arange(3)), TypeError, "x"),
    (lambda: apply_rope(torch.randn(2, 3, 6), torch.zeros(3, 3, dtype=torch.long)), ValueError, "same B"),
    (lambda: positions_from_padding(torch.zeros(2, 3)), TypeError, "key_padding_mask"),
    (lambda: positions_from_padding(torch.zeros(3, dtype=torch.bool)), ValueError, "key_padding_mask"),
    (lambda: next_positions(torch.arange(3), num_new=0), ValueError, "num_new"),
])
def test_errors_name_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
