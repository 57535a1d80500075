"""The training loop shared by chapters 8 and 9, the batches and the held-out loss."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attention_book.gpt import GPT, GPTConfig
from attention_book.training import adamw, held_out_loss, random_windows, training_loop, warmup_cosine


def tiny_gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=13, context_length=8, d_model=8, n_layer=1, n_head=2))


def test_one_update_is_zero_grad_backward_step():
    model, twin = tiny_gpt(), tiny_gpt()
    idx = torch.randint(0, 13, (2, 8), generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    assert training_loop(model, optimizer, 1, lambda step: model(idx, idx)[1], progress=False) == 1
    twin_optimizer = torch.optim.SGD(twin.parameters(), lr=0.5)
    twin.train()
    twin(idx, idx)[1].backward()
    twin_optimizer.step()
    for mine, theirs in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(mine, theirs)
    assert not model.training  # eval mode afterwards


def test_loop_stops_when_loss_at_says_none_and_restores_the_learning_rate():
    model = tiny_gpt()
    idx = torch.randint(0, 13, (2, 8))
    optimizer = adamw(model.parameters(), lr=1e-2)
    seen = []

    def loss_at(step):
        seen.append(optimizer.param_groups[0]["lr"])
        return None if step == 3 else model(idx, idx)[1]

    assert training_loop(model, optimizer, 10, loss_at, lr_factor=lambda s: 0.5, progress=False) == 3
    assert optimizer.param_groups[0]["lr"] == 1e-2
    with pytest.raises(TypeError, match="loss_at"):
        training_loop(model, optimizer, 2, loss_at=3)


def test_warmup_cosine_rises_then_decays_to_a_tenth():
    factor = warmup_cosine(100, 10)
    assert factor(0) == pytest.approx(0.1) and factor(9) == pytest.approx(1.0)
    assert factor(10) == pytest.approx(1.0) and factor(99) == pytest.approx(0.1)
    values = [factor(s) for s in range(10, 100)]
    assert all(a >= b for a, b in zip(values, values[1:]))
    with pytest.raises(ValueError, match="warmup"):
        warmup_cosine(5, 10)


def test_random_windows_are_windows_and_their_next_tokens():
    ids = torch.arange(100)
    inputs, targets = random_windows(ids, 5, 7, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (5, 7)
    assert torch.equal(targets, inputs + 1)  # arange: the next token is the id plus one
    assert torch.equal(inputs[:, 1:] - inputs[:, :-1], torch.ones(5, 6, dtype=torch.long))
    again, _ = random_windows(ids, 5, 7, torch.Generator().manual_seed(0))
    assert torch.equal(inputs, again)
    with pytest.raises(ValueError, match="too few"):
        random_windows(ids[:5], 1, 7)
    with pytest.raises(TypeError, match="ids"):
        random_windows(ids.float(), 1, 3)


def test_held_out_loss_is_the_mean_cross_entropy_of_consecutive_windows():
    model = tiny_gpt().eval()
    ids = torch.randint(0, 13, (50,), generator=torch.Generator().manual_seed(2))
    windows = ids[:48].view(6, 8), ids[1:49].view(6, 8)  # 6 full windows of 8 (+ next token)
    expected = F.cross_entropy(model(windows[0]).reshape(-1, 13), windows[1].reshape(-1)).item()
    assert held_out_loss(model, ids, 8, batch_size=4) == pytest.approx(expected, rel=1e-6)
    assert held_out_loss(model, ids, 8, max_windows=3) == held_out_loss(model, ids, 8, max_windows=3)
    model.train()
    held_out_loss(model, ids, 8)
    assert model.training  # left as it was
