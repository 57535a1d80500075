"""Chapter 9's training recipe (attention_book.gpt_training): settings, train_gpt, mixed precision."""

from __future__ import annotations

import pytest
import torch

from attention_book.gpt import GPT
from attention_book.gpt_training import (
    CPU_SETTINGS,
    GPU_SETTINGS,
    NORM_RUNS,
    PRE_POST_SETTINGS,
    TrainingSettings,
    settings_for,
    train_gpt,
)

TINY = TrainingSettings(n_layer=1, n_head=2, d_model=16, context_length=8, batch_size=8, steps=40,
                        lr=1e-2, warmup=5, eval_every=20, eval_windows=8, seed=3)


def test_training_decreases_the_held_out_loss():
    torch.manual_seed(0)
    text = torch.arange(200) % 7  # a repeating pattern: easy to learn
    settings = TrainingSettings(n_layer=1, n_head=2, d_model=16, context_length=8, batch_size=8, steps=40,
                                lr=1e-2, warmup=5, eval_every=20, eval_windows=8, seed=3)
    model = GPT(settings.model_config(vocab_size=7))
    result = train_gpt(model, text, text, settings, progress=False)
    assert len(result.train_losses) == 40 and [s for s, _ in result.held_out] == [0, 20, 40]
    assert result.held_out[-1][1] < 0.5 * result.held_out[0][1]
    assert result.tokens_seen == 40 * 8 * 8 and not model.training


def test_training_is_repeatable_and_the_batches_depend_only_on_the_seed():
    settings = TrainingSettings(n_layer=1, n_head=1, d_model=8, context_length=8, batch_size=4, steps=6,
                                warmup=2, eval_every=3, eval_windows=4)
    text = torch.randint(0, 11, (300,), generator=torch.Generator().manual_seed(0))
    runs = []
    for _ in range(2):
        torch.manual_seed(1)
        runs.append(train_gpt(GPT(settings.model_config(11)), text, text, settings, progress=False))
    assert runs[0].train_losses == runs[1].train_losses and runs[0].held_out == runs[1].held_out


def test_settings_follow_the_device_and_the_gpu_recipe_runs_on_a_cpu():
    assert settings_for("cpu") == CPU_SETTINGS == settings_for(torch.device("cpu")) == settings_for("mps")
    gpu = settings_for("cuda")
    assert gpu == settings_for("cuda:0") == GPU_SETTINGS
    assert gpu.d_model > CPU_SETTINGS.d_model and gpu.context_length > CPU_SETTINGS.context_length
    assert gpu.steps * gpu.tokens_per_step() > 10 * CPU_SETTINGS.steps * CPU_SETTINGS.tokens_per_step()
    # the GPU recipe's code path, forced on the CPU: its model, two updates on two windows
    short = gpu.replace(steps=2, batch_size=2, warmup=1, eval_every=1, eval_windows=1)
    torch.manual_seed(0)
    model = GPT(short.model_config(vocab_size=81))
    assert model.config.d_model == 384 and model.config.dropout == 0.1
    text = torch.randint(0, 81, (2 * 256 + 2,))
    result = train_gpt(model, text, text, short, progress=False)
    assert len(result.train_losses) == 2 and len(result.held_out) == 3
    with pytest.raises(ValueError, match="no field 'colour'"):
        gpu.replace(colour="red")


def test_train_gpt_trains_chapter_8s_model_on_the_same_batches():
    from attention_book.hello_world import HelloWorldModel

    settings = TrainingSettings(n_layer=1, n_head=1, d_model=8, context_length=8, batch_size=4, steps=30, lr=1e-2,
                                warmup=3, eval_every=30, eval_windows=4)
    text = torch.arange(120) % 5
    torch.manual_seed(0)
    model = HelloWorldModel(n_embd=8, context_length=8, vocab_size=5)
    result = train_gpt(model, text, text, settings, progress=False)
    assert result.held_out[-1][1] < result.held_out[0][1]


def test_the_gpu_recipe_asks_for_mixed_precision_and_fused_attention():
    assert GPU_SETTINGS.precision == "auto" and GPU_SETTINGS.fused_attention and not GPU_SETTINGS.compile
    assert GPU_SETTINGS.model_config(81).fused_attention
    assert not TrainingSettings(fused_attention=False).model_config(81).fused_attention
    with pytest.raises(ValueError, match="precision must be one of"):
        TrainingSettings(precision="half")
    with pytest.raises(TypeError, match="compile"):
        TrainingSettings(compile="yes")


@pytest.mark.parametrize("precision", ["bfloat16", "float16"])
def test_mixed_precision_trains_on_a_cpu_as_well_as_float32(precision):
    """bfloat16 autocast, and float16 autocast with a real GradScaler, run on the CPU: they learn
    the pattern and end near the float32 run (the same batches, the same initial weights)."""
    text = torch.arange(200) % 7
    results = {}
    for name in ("float32", precision):
        torch.manual_seed(0)
        model = GPT(TINY.model_config(vocab_size=7))
        results[name] = train_gpt(model, text, text, TINY.replace(precision=name), progress=False)
    mixed, full = results[precision], results["float32"]
    assert mixed.precision == precision and full.precision == "float32"
    assert mixed.final_held_out_loss < 0.5 * mixed.held_out[0][1]
    assert mixed.final_held_out_loss == pytest.approx(full.final_held_out_loss, abs=0.1)
    assert all(map(torch.isfinite, torch.tensor(mixed.train_losses)))


def test_float16_goes_through_the_grad_scaler_given():
    """train_gpt passes its scaler to the loop: scale, unscale_ before clipping, step, update."""
    calls = []

    class RecordingScaler:
        def scale(self, loss):
            calls.append("scale")
            return loss * 1024.0

        def unscale_(self, optimizer):
            calls.append("unscale_")
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is not None:
                        p.grad /= 1024.0

        def step(self, optimizer):
            calls.append("step")
            optimizer.step()

        def update(self):
            calls.append("update")

    text = torch.arange(200) % 7
    torch.manual_seed(0)
    model = GPT(TINY.model_config(vocab_size=7))
    settings = TINY.replace(precision="float16", steps=3, eval_every=3)
    train_gpt(model, text, text, settings, progress=False, grad_scaler=RecordingScaler())
    assert calls == ["scale", "unscale_", "step", "update"] * 3


def test_no_step_reads_a_number_back(monkeypatch):
    """No host sync per step: the numbers read back to Python (item, int, tolist) do not grow
    with the number of steps, only with the number of evaluations."""
    text = torch.arange(400) % 7
    counts = {}
    for steps in (10, 30):
        reads = []
        for name in ("item", "tolist", "__int__", "__float__"):
            original = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, lambda self, *a, _o=original, _n=name, **k: (
                reads.append(_n), _o(self, *a, **k))[1])
        torch.manual_seed(0)
        model = GPT(TINY.model_config(vocab_size=7))
        result = train_gpt(model, text, text, TINY.replace(steps=steps, eval_every=100), progress=False)
        monkeypatch.undo()
        assert len(result.held_out) == 2 and len(result.train_losses) == steps
        counts[steps] = len(reads)
    assert 0 < counts[10] == counts[30], counts


def test_the_speed_is_measured_without_the_evaluations():
    text = torch.arange(200) % 7
    torch.manual_seed(0)
    result = train_gpt(GPT(TINY.model_config(vocab_size=7)), text, text, TINY, progress=False)
    assert result.tokens_per_second > 0 and 0 < result.eval_seconds < result.seconds
    assert 0 < result.first_step_seconds < result.seconds


def test_compile_compiles_the_model_used_for_the_steps(monkeypatch):
    compiled = []

    def fake_compile(model, **kwargs):
        compiled.append(model)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    text = torch.arange(200) % 7
    model = GPT(TINY.model_config(vocab_size=7))
    train_gpt(model, text, text, TINY.replace(compile=True, steps=2), progress=False)
    assert compiled == [model]


def test_train_gpt_checks_the_ids_once():
    model = GPT(TINY.model_config(vocab_size=7))
    with pytest.raises(ValueError, match="train_ids holds token ids from 0 to 9 but the model has vocab_size=7"):
        train_gpt(model, torch.arange(100) % 10, torch.arange(100) % 7, TINY, progress=False)
    with pytest.raises(TypeError, match="settings"):
        train_gpt(model, torch.arange(100) % 7, torch.arange(100) % 7, {"steps": 3})


def test_the_norm_experiment_asks_the_chapters_question_first():
    label, pre_norm, lr, warmup = NORM_RUNS[0]
    assert pre_norm and (lr, warmup) == (PRE_POST_SETTINGS.lr, PRE_POST_SETTINGS.warmup)
    assert NORM_RUNS[1][1:] == (False, PRE_POST_SETTINGS.lr, 1)
    assert {warmup for _, pre, _, warmup in NORM_RUNS if not pre} == {1, 100}  # with and without warm-up
    assert len({label for label, *_ in NORM_RUNS}) == len(NORM_RUNS)
    for _, _, lr, warmup in NORM_RUNS:
        PRE_POST_SETTINGS.replace(lr=lr, warmup=warmup)  # valid settings
