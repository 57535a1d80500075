"""The training loop shared by chapters 8 and 9, the batches and the held-out loss."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attention_book.gpt import GPT, GPTConfig
from attention_book import training
from attention_book.training import (
    Precision,
    adamw,
    choose_precision,
    held_out_loss,
    held_out_losses,
    held_out_windows,
    mean_with_error,
    random_starts,
    random_windows,
    training_loop,
    warmup_cosine,
    windows_at,
)


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


def test_held_out_losses_are_the_loss_of_each_window_and_average_to_held_out_loss():
    model = tiny_gpt().eval()
    ids = torch.randint(0, 13, (50,), generator=torch.Generator().manual_seed(2))
    per_window = held_out_losses(model, ids, 8, batch_size=4)
    assert per_window.shape == (6,) and per_window.dtype == torch.float32
    for number, start in enumerate(held_out_windows(50, 8).tolist()):
        window = ids[start:start + 9]
        expected = F.cross_entropy(model(window[None, :-1])[0], window[1:])
        torch.testing.assert_close(per_window[number], expected)
    assert held_out_loss(model, ids, 8) == pytest.approx(per_window.double().mean().item(), rel=1e-12)
    assert held_out_windows(50, 8, max_windows=3).tolist() == [0, 16, 32]  # spread over the text
    with pytest.raises(ValueError, match="too few"):
        held_out_windows(5, 8)


def test_mean_with_error_is_two_standard_errors():
    mean, error = mean_with_error([1.0, 2.0, 3.0, 4.0])
    assert mean == 2.5 and error == pytest.approx(2 * (5 / 3) ** 0.5 / 2)
    assert mean_with_error(torch.full((10,), 0.7)) == pytest.approx((0.7, 0.0))
    with pytest.raises(ValueError, match="at least 2"):
        mean_with_error([1.0])


# ----------------------------------------------------------------------------------- mixed precision
def test_choose_precision_follows_the_device(monkeypatch):
    assert choose_precision("cpu") == Precision("float32", "cpu")
    assert choose_precision(torch.device("cpu"), "bfloat16").autocast_dtype == torch.bfloat16
    assert choose_precision("cpu", "float16").needs_scaler
    assert choose_precision("cpu", "tf32").tf32 and choose_precision("cpu", "tf32").autocast_dtype is None
    capability = {"value": (9, 0)}
    monkeypatch.setattr(training, "_cuda_capability", lambda device: capability["value"])
    h100 = choose_precision("cuda")  # no GPU needed: the capability is what decides
    assert (h100.name, h100.autocast_dtype, h100.needs_scaler) == ("bfloat16", torch.bfloat16, False)
    capability["value"] = (7, 5)  # a T4: no bfloat16 tensor cores
    t4 = choose_precision("cuda:0")
    assert (t4.name, t4.autocast_dtype, t4.needs_scaler, t4.device_type) == ("float16", torch.float16, True, "cuda")
    with pytest.raises(ValueError, match="compute capability 7.5.*precision='float16'"):
        choose_precision("cuda", "bfloat16")
    with pytest.raises(ValueError, match="precision must be one of"):
        choose_precision("cpu", "fp8")
    with pytest.raises(ValueError, match="device"):
        choose_precision("gpu")


def test_the_loop_runs_loss_at_under_autocast():
    model = tiny_gpt()
    idx = torch.randint(0, 13, (2, 8), generator=torch.Generator().manual_seed(0))
    dtypes = []

    def loss_at(step):
        logits = model(idx)
        dtypes.append(logits.dtype)
        return F.cross_entropy(logits.float().reshape(-1, 13), idx.reshape(-1))

    training_loop(model, adamw(model.parameters(), lr=1e-2), 2, loss_at, progress=False,
                  precision=choose_precision("cpu", "bfloat16"))
    assert dtypes == [torch.bfloat16] * 2
    assert all(p.dtype == torch.float32 for p in model.parameters())  # the weights stay float32
    training_loop(model, adamw(model.parameters(), lr=1e-2), 1, loss_at, progress=False)
    assert dtypes[-1] == torch.float32


class MockScaler:
    """Records the order of the calls; ``overflow=True`` behaves as after an inf gradient."""

    def __init__(self, factor=8.0, overflow=False):
        self.factor, self.overflow, self.calls = factor, overflow, []

    def scale(self, loss):
        self.calls.append("scale")
        return loss * self.factor

    def unscale_(self, optimizer):
        self.calls.append("unscale_")
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad /= self.factor

    def step(self, optimizer):
        self.calls.append("step")
        if not self.overflow:
            optimizer.step()

    def update(self):
        self.calls.append("update")


def test_float16_updates_go_through_the_scaler_in_order(monkeypatch):
    model, twin = tiny_gpt(), tiny_gpt()
    idx = torch.randint(0, 13, (2, 8), generator=torch.Generator().manual_seed(0))
    clipped = []
    real_clip = torch.nn.utils.clip_grad_norm_

    def recording_clip(parameters, max_norm):
        scaler.calls.append("clip")
        clipped.append([p.grad.clone() for p in model.parameters()])
        return real_clip(parameters, max_norm)

    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", recording_clip)
    scaler = MockScaler()
    float16 = choose_precision("cpu", "float16")
    training_loop(model, torch.optim.SGD(model.parameters(), lr=0.5), 2, lambda step: model(idx, idx)[1],
                  max_grad_norm=1e9, progress=False, precision=float16, grad_scaler=scaler)
    assert scaler.calls == ["scale", "unscale_", "clip", "step", "update"] * 2
    # the gradients reaching the clip are the true ones (unscaled): compare with a float16 step by hand
    twin.train()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = twin(idx, idx)[1]
    loss.backward()
    for seen, reference in zip(clipped[0], (p.grad for p in twin.parameters())):
        torch.testing.assert_close(seen, reference, atol=1e-3, rtol=1e-2)  # float16 rounding; not 8x


def test_an_overflowing_float16_step_leaves_the_weights_alone():
    model = tiny_gpt()
    before = [p.detach().clone() for p in model.parameters()]
    idx = torch.randint(0, 13, (2, 8))
    scaler = MockScaler(overflow=True)
    updates = training_loop(model, torch.optim.SGD(model.parameters(), lr=0.5), 3, lambda step: model(idx, idx)[1],
                            progress=False, precision=choose_precision("cpu", "float16"), grad_scaler=scaler)
    assert updates == 3 and "unscale_" not in scaler.calls  # no clipping asked for: no unscale needed
    for old, new in zip(before, model.parameters()):
        assert torch.equal(old, new)


def test_a_real_grad_scaler_on_the_cpu_scales_and_learns():
    """torch.amp.GradScaler('cpu') (the scaler choose_precision makes for float16): the loop makes
    one for float16 by itself, and training with it lowers the loss like float32 does."""
    float16 = choose_precision("cpu", "float16")
    assert isinstance(float16.grad_scaler(), torch.amp.GradScaler)
    assert choose_precision("cpu", "bfloat16").grad_scaler() is None
    idx = torch.randint(0, 13, (4, 8), generator=torch.Generator().manual_seed(0))
    final = {}
    for precision in (None, float16):
        model = tiny_gpt()
        losses = []

        def loss_at(step):
            loss = model(idx, idx)[1]
            losses.append(loss.detach().float())
            return loss

        scaler = None if precision is None else float16.grad_scaler()
        training_loop(model, adamw(model.parameters(), lr=1e-2), 30, loss_at, max_grad_norm=1.0,
                      progress=False, precision=precision, grad_scaler=scaler)
        assert losses[-1] < 0.8 * losses[0]
        final[precision is None] = losses[-1].item()
        if scaler is not None:
            assert scaler.get_scale() > 1.0 and scaler.is_enabled()
    assert final[False] == pytest.approx(final[True], abs=0.05)


def test_tf32_is_switched_on_for_the_loop_only():
    model = tiny_gpt()
    idx = torch.randint(0, 13, (2, 8))
    before = torch.backends.cuda.matmul.allow_tf32
    seen = []

    def loss_at(step):
        seen.append(torch.backends.cuda.matmul.allow_tf32)
        return model(idx, idx)[1]

    training_loop(model, adamw(model.parameters(), lr=1e-3), 1, loss_at, progress=False,
                  precision=choose_precision("cpu", "tf32"))
    assert seen == [True] and torch.backends.cuda.matmul.allow_tf32 == before
    with pytest.raises(TypeError, match="precision"):
        training_loop(model, adamw(model.parameters(), lr=1e-3), 1, loss_at, progress=False, precision="bfloat16")
    with pytest.raises(TypeError, match="grad_scaler"):
        training_loop(model, adamw(model.parameters(), lr=1e-3), 1, loss_at, progress=False, grad_scaler=object())


def test_random_starts_are_the_starts_of_step_by_step_random_windows():
    """train_gpt draws every batch's starts at once: the same batches as one random_windows per step."""
    ids = torch.arange(500)
    generator = torch.Generator().manual_seed(4)
    one_by_one = [random_windows(ids, 6, 9, generator) for _ in range(7)]
    starts = random_starts(ids, 6, 9, 7, torch.Generator().manual_seed(4))
    assert starts.shape == (7, 6)
    for step, (inputs, targets) in enumerate(one_by_one):
        again = windows_at(ids, starts[step], 9)
        assert torch.equal(again[0], inputs) and torch.equal(again[1], targets)
    with pytest.raises(ValueError, match="steps"):
        random_starts(ids, 6, 9, 0)
