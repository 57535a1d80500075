"""Chapter 9's sampling functions: greedy, temperature, top-k, top-p, sample_next, generate."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from attention_book.gpt import GPT, GPTConfig
from attention_book.sampling import (
    apply_temperature,
    generate,
    greedy,
    next_token_probabilities,
    sample_next,
    top_k_filter,
    top_p_filter,
)

rows = st.lists(st.floats(-20, 20, allow_nan=False, width=32), min_size=1, max_size=40).map(
    lambda values: torch.tensor(values, dtype=torch.float32))


def test_greedy_is_the_argmax_of_every_row():
    logits = torch.randn(4, 3, 17)
    assert torch.equal(greedy(logits), logits.argmax(dim=-1))
    assert greedy(torch.tensor([0.0, 3.0, 1.0])).item() == 1


@given(rows, st.integers(1, 45))
def test_top_k_keeps_exactly_k_of_the_highest(logits, k):
    kept = top_k_filter(logits, k)
    finite = torch.isfinite(kept)
    assert int(finite.sum()) == min(k, logits.numel())
    assert torch.equal(kept[finite], logits[finite])  # survivors unchanged
    if finite.sum() < logits.numel():
        assert logits[finite].min() >= logits[~finite].max()  # nothing dropped beats a survivor


def test_top_k_with_ties_still_keeps_k():
    kept = top_k_filter(torch.tensor([[1.0, 2.0, 2.0, 2.0, 0.0]]), 2)
    assert int(torch.isfinite(kept).sum()) == 2 and set(kept[torch.isfinite(kept)].tolist()) == {2.0}


@given(rows, st.floats(0.01, 0.999))
def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p(logits, p):
    kept = torch.isfinite(top_p_filter(logits, p))
    probabilities = torch.softmax(logits.double(), dim=-1)
    mass = probabilities[kept].sum().item()
    assert kept[logits.argmax()]  # the most likely token always survives
    assert mass >= p - 1e-5 or kept.all()
    # smallest: without its least likely survivor the set would fall short of p
    weakest = probabilities[kept].min().item()
    assert kept.sum() == 1 or mass - weakest < p + 1e-5
    # and it is a top set: every survivor at least as likely as every dropped token
    if (~kept).any():
        assert probabilities[kept].min() >= probabilities[~kept].max() - 1e-9


def test_top_p_examples():
    probs = torch.tensor([0.5, 0.3, 0.15, 0.05])
    logits = probs.log()
    assert torch.isfinite(top_p_filter(logits, 0.5)).tolist() == [True, False, False, False]
    assert torch.isfinite(top_p_filter(logits, 0.6)).tolist() == [True, True, False, False]
    assert torch.isfinite(top_p_filter(logits, 0.8)).tolist() == [True, True, False, False]
    assert torch.isfinite(top_p_filter(logits, 0.81)).tolist() == [True, True, True, False]
    assert torch.isfinite(top_p_filter(logits, 1.0)).all()
    assert torch.isfinite(top_p_filter(torch.tensor([[9.0, 0.0], [0.0, 9.0]]), 0.5)).tolist() == [
        [True, False], [False, True]]  # each row on its own, back in vocabulary order


def test_temperature_sharpens_flattens_and_approaches_greedy():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
    base = torch.softmax(logits, -1)
    cold = next_token_probabilities(logits, temperature=0.5)
    hot = next_token_probabilities(logits, temperature=2.0)
    assert cold[0, 0] > base[0, 0] > hot[0, 0]
    assert next_token_probabilities(logits, temperature=0.01)[0, 0] > 1 - 1e-6
    assert torch.equal(next_token_probabilities(logits, temperature=0.0), torch.tensor([[1.0, 0, 0, 0]]))
    torch.testing.assert_close(apply_temperature(logits, 2.0), logits / 2)
    with pytest.raises(ValueError, match="greedy"):
        apply_temperature(logits, 0.0)


def test_filters_combine_and_sum_to_one():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    probabilities = next_token_probabilities(logits, temperature=0.7, top_k=10, top_p=0.8)
    torch.testing.assert_close(probabilities.sum(-1), torch.ones(3))
    assert ((probabilities > 0).sum(-1) <= 10).all()


def test_sample_next_draws_from_the_kept_tokens_reproducibly():
    logits = torch.randn(2, 30, generator=torch.Generator().manual_seed(1))
    draws = torch.stack([sample_next(logits, top_k=3, generator=torch.Generator().manual_seed(s))
                         for s in range(50)])  # (50, 2)
    top3 = torch.topk(logits, 3).indices
    for row in range(2):
        assert set(draws[:, row].tolist()) <= set(top3[row].tolist())
    again = sample_next(logits, top_k=3, generator=torch.Generator().manual_seed(7))
    assert torch.equal(again, sample_next(logits, top_k=3, generator=torch.Generator().manual_seed(7)))
    assert torch.equal(sample_next(logits, temperature=0), greedy(logits))


def test_generate_appends_tokens_and_greedy_is_deterministic():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, context_length=6, d_model=8, n_layer=1, n_head=2))
    idx = torch.tensor([[1, 2, 3]])
    out = generate(model, idx, max_new_tokens=9, temperature=0)  # longer than the context: a window
    assert out.shape == (1, 12) and torch.equal(out[:, :3], idx)
    assert torch.equal(out, generate(model, idx, max_new_tokens=9, temperature=0))
    # a greedy step is the argmax of the model at the last position
    assert out[0, 3].item() == model(idx)[0, -1].argmax().item()
    sampled = generate(model, idx, 5, temperature=1.0, top_p=0.9, generator=torch.Generator().manual_seed(0))
    assert sampled.shape == (1, 8)


def tiny_double_gpt(seed=0, **overrides):
    """A small GPT in float64: cached and uncached logits agree to ~1e-15, so no near-tie between
    two tokens can turn out differently and the token-for-token comparison is exact on any CPU."""
    torch.manual_seed(seed)
    config = dict(vocab_size=11, context_length=8, d_model=16, n_layer=2, n_head=2) | overrides
    return GPT(GPTConfig(**config)).double().eval()


@pytest.mark.parametrize("fused", [True, False])
@pytest.mark.parametrize("how", [dict(temperature=0), dict(temperature=1.0), dict(temperature=0.8, top_k=4),
                                 dict(temperature=1.2, top_p=0.9)])
def test_cached_generation_writes_the_same_tokens(fused, how):
    """use_cache=True: the same tokens as without, greedy and seeded sampling, a batch of two
    prompts, past the end of the context (where the window slides and the cache starts again)."""
    model = tiny_double_gpt(fused_attention=fused)
    idx = torch.tensor([[1, 2, 3], [4, 4, 0]])
    plain = generate(model, idx, 14, generator=torch.Generator().manual_seed(5), **how)
    cached = generate(model, idx, 14, generator=torch.Generator().manual_seed(5), use_cache=True, **how)
    assert plain.shape == (2, 17) and torch.equal(cached, plain)


def test_cached_generation_runs_one_token_per_step_inside_the_context(monkeypatch):
    """Inside the context each step after the prompt runs one token; past it, the whole window."""
    model = tiny_double_gpt()
    lengths = []
    real_forward = GPT.forward

    def recording(self, idx, *args, **kwargs):
        lengths.append(idx.shape[1])
        return real_forward(self, idx, *args, **kwargs)

    monkeypatch.setattr(GPT, "forward", recording)
    generate(model, torch.tensor([[1, 2, 3]]), 8, temperature=0, use_cache=True)
    assert lengths == [3, 1, 1, 1, 1, 1, 8, 8]  # prompt; 5 single tokens fill the 8 places; then windows
    lengths.clear()
    generate(model, torch.tensor([[1, 2, 3]]), 8, temperature=0)
    assert lengths == [3, 4, 5, 6, 7, 8, 8, 8]


def test_cached_generation_in_float32_matches_too():
    torch.manual_seed(1)
    model = GPT(GPTConfig(vocab_size=23, context_length=16, d_model=32, n_layer=2, n_head=4)).eval()
    idx = torch.randint(0, 23, (1, 4), generator=torch.Generator().manual_seed(0))
    assert torch.equal(generate(model, idx, 10, temperature=0, use_cache=True), generate(model, idx, 10, temperature=0))


def test_cached_generation_needs_the_gpt_and_checks_its_arguments_once():
    from attention_book.hello_world import HelloWorldModel

    chapter8 = HelloWorldModel(n_embd=8, context_length=6, vocab_size=11)
    with pytest.raises(TypeError, match="use_cache=True needs the chapter's GPT"):
        generate(chapter8, torch.tensor([[1, 2]]), 3, use_cache=True)
    assert generate(chapter8, torch.tensor([[1, 2]]), 3, temperature=0).shape == (1, 5)
    model = tiny_double_gpt()
    with pytest.raises(ValueError, match="vocab_size=11"):
        generate(model, torch.tensor([[1, 20]]), 3, use_cache=True)
    with pytest.raises(ValueError, match="top_k"):
        generate(model, torch.tensor([[1, 2]]), 3, top_k=0)
    with pytest.raises(TypeError, match="use_cache"):
        generate(model, torch.tensor([[1, 2]]), 3, use_cache="yes")


def test_sampling_leaves_its_input_alone():
    logits = torch.randn(2, 9)
    copy = logits.clone()
    for result in (top_k_filter(logits, 2), top_p_filter(logits, 0.5), top_k_filter(logits, 20),
                   top_p_filter(logits, 1.0)):
        assert result is not logits
    assert torch.equal(logits, copy)


def test_plot_cut_draws_kept_and_cut_bars():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from attention_book.sampling import KEPT_COLOUR, plot_cut

    probabilities = torch.tensor([0.5, 0.3, 0.2])
    ax = plot_cut(probabilities, torch.tensor([True, True, False]), ["a", " ", "\n"], title="t")
    bars = ax.patches
    assert len(bars) == 3 and [t.get_text() for t in ax.get_xticklabels()] == ["a", "␣", "⏎"]
    kept = [b for b in bars if matplotlib.colors.to_hex(b.get_facecolor()) == KEPT_COLOUR.lower()]
    assert len(kept) == 2 and sum(b.get_height() for b in kept) == pytest.approx(0.8)
    assert [b.get_hatch() for b in bars if b not in kept] == ["///"]  # cut: not told by colour alone
    with pytest.raises(ValueError, match="labels"):
        plot_cut(probabilities, torch.tensor([True, False, False]), ["a"])
    plt.close("all")
