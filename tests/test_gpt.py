"""Chapter 9: the GPT, its GPT-2 loader (against transformers), the training recipe and the corpus.

``transformers`` is a test dependency only (requirements-dev.txt): readers never need it. The
loader is checked against ``GPT2LMHeadModel`` built from small random configurations whose
weights are all moved away from their initial values, and against the key names and shapes of
the real 124M checkpoint, built on the ``meta`` device (nothing is downloaded).
"""

from __future__ import annotations

import math
import time

import pytest
import torch
import torch.nn.functional as F

from attention_book.gpt import (
    CPU_SETTINGS,
    GPT,
    GPT2_CONFIGS,
    GPU_SETTINGS,
    Block,
    GPTConfig,
    TrainingSettings,
    convert_gpt2_state_dict,
    read_safetensors,
    settings_for,
    train_gpt,
)
from attention_book.multihead import MultiHeadAttention
from conftest import require


def transformers_or_fail():
    """``transformers``, or a skip locally / a failure in CI (it is in requirements-dev.txt)."""
    try:
        import transformers
    except ImportError:
        require(False, "transformers is not installed: pip install -r requirements-dev.txt")
    transformers.logging.set_verbosity_error()  # small vocabularies make it warn about token ids
    return transformers


def random_hf_gpt2(n_layer, n_head, d_model, vocab_size=61, context_length=16, seed=0):
    """A GPT2LMHeadModel whose every parameter (biases, layer norms, embeddings) is off its init."""
    transformers = transformers_or_fail()
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=vocab_size, n_positions=context_length, n_embd=d_model,
                                     n_layer=n_layer, n_head=n_head, resid_pdrop=0.0, embd_pdrop=0.0,
                                     attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            # layer norms start at exactly 1 and 0, biases at 0: move every one of them
            parameter.add_(0.3 * torch.randn_like(parameter))
    return model


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


# ----------------------------------------------------------------------------------- GPT-2 loading
@pytest.mark.parametrize("n_layer, n_head, d_model", [(1, 1, 8), (2, 4, 32), (3, 6, 48), (2, 2, 20)])
def test_loader_reproduces_transformers_logits(n_layer, n_head, d_model):
    reference = random_hf_gpt2(n_layer, n_head, d_model, seed=n_layer * 100 + d_model)
    ours = GPT.from_gpt2_state_dict(reference.state_dict(), n_head=n_head)
    assert ours.config.n_layer == n_layer and ours.config.d_model == d_model and not ours.training
    idx = torch.randint(0, 61, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = reference(idx).logits
        logits = ours(idx)
    difference = (logits - expected).abs().max().item()
    assert difference <= 1e-4, f"max |logit difference| {difference:.2e}"
    assert expected.abs().max() > 1.0  # the logits are not trivially small


def test_loader_takes_checkpoint_keys_and_ignores_old_mask_buffers():
    """The checkpoint files have no 'transformer.' prefix, no lm_head, and (older files) attn.bias buffers."""
    reference = random_hf_gpt2(2, 2, 16, seed=5)
    state_dict = {key.removeprefix("transformer."): value for key, value in reference.state_dict().items()
                  if key != "lm_head.weight"}
    for layer in range(2):
        state_dict[f"h.{layer}.attn.bias"] = torch.tril(torch.ones(1, 1, 16, 16))
        state_dict[f"h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
    ours = GPT.from_gpt2_state_dict(state_dict, n_head=2)
    idx = torch.randint(0, 61, (1, 16))
    with torch.no_grad():
        assert (ours(idx) - reference(idx).logits).abs().max() <= 1e-4


def test_loader_refuses_what_it_cannot_hold():
    state_dict = dict(random_hf_gpt2(1, 2, 8, seed=3).state_dict())
    with pytest.raises(ValueError, match="lm_head.weight differs"):
        convert_gpt2_state_dict(dict(state_dict, **{"lm_head.weight": torch.zeros(61, 8)}), n_head=2)
    with pytest.raises(ValueError, match="transformer.h.0.extra.weight|h.0.extra.weight"):
        convert_gpt2_state_dict(dict(state_dict, **{"transformer.h.0.extra.weight": torch.zeros(1)}), n_head=2)
    missing = {k: v for k, v in state_dict.items() if "mlp.c_fc.bias" not in k}
    with pytest.raises(ValueError, match="h.0.mlp.c_fc.bias"):
        convert_gpt2_state_dict(missing, n_head=2)
    with pytest.raises(ValueError, match="n_head=3"):
        convert_gpt2_state_dict(state_dict, n_head=3)  # 8 columns do not split into 3 heads


def test_loader_consumes_every_key_of_the_real_124m_checkpoint():
    """GPT2Config() is GPT-2 small; on the meta device its 124M parameters take no memory."""
    transformers = transformers_or_fail()
    with torch.device("meta"):
        reference = transformers.GPT2LMHeadModel(transformers.GPT2Config())
    theirs = reference.state_dict()
    config, converted = convert_gpt2_state_dict(theirs, n_head=12)
    assert (config.vocab_size, config.context_length, config.d_model, config.n_layer, config.n_head) == (
        50_257, 1024, 768, 12, 12)
    with torch.device("meta"):
        ours = GPT(config)
    expected = {k: tuple(v.shape) for k, v in ours.state_dict().items() if not k.endswith("attn.mask")}
    assert {k: tuple(v.shape) for k, v in converted.items()} == expected
    model = GPT.from_gpt2_state_dict(theirs, n_head=12)  # builds on the meta device too
    assert model.num_parameters() == 124_439_808  # GPT-2 small, tied output layer counted once
    assert GPT2_CONFIGS["gpt2"] == dict(n_layer=12, n_head=12, d_model=768)


def test_read_safetensors_matches_the_safetensors_package(tmp_path):
    transformers_or_fail()
    from safetensors.torch import save_file

    tensors = {"a": torch.randn(3, 4), "b": torch.arange(5, dtype=torch.int64), "h.0.c": torch.randn(2).half()}
    save_file(tensors, str(tmp_path / "x.safetensors"))
    read = read_safetensors(str(tmp_path / "x.safetensors"))
    assert read.keys() == tensors.keys()
    for key in tensors:
        assert torch.equal(read[key], tensors[key]) and read[key].dtype == tensors[key].dtype


#: seconds an offline from_pretrained may take before it counts as hanging (a retry loop or a
#: download waiting for the network takes minutes; a busy 2-core machine stretches seconds)
OFFLINE_BOUND = 120


@pytest.mark.parametrize("hide_transformers", [False, True])
def test_from_pretrained_fails_fast_and_clearly_offline(monkeypatch, hide_transformers):
    """No internet here: a RuntimeError naming what to do, within seconds, both download paths."""
    if hide_transformers:
        monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    monkeypatch.setenv("XDG_CACHE_HOME", "/nonexistent-cache-for-the-test")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    start = time.perf_counter()
    try:
        GPT.from_pretrained("gpt2", timeout=5)
    except RuntimeError as error:
        message = str(error)
    else:
        pytest.skip("the Hugging Face hub is reachable from here: nothing offline to test")
    # a bound for a hang (retries without end), not a speed test: one 5 s attempt plus imports takes
    # seconds on a quiet machine; OFFLINE_BOUND leaves room for a busy one
    assert time.perf_counter() - start < OFFLINE_BOUND
    assert "GPT.from_gpt2_state_dict" in message and "internet" in message


@pytest.mark.parametrize("hide_transformers", [False, True])
def test_from_pretrained_respects_hf_hub_offline(monkeypatch, tmp_path, hide_transformers):
    """HF_HUB_OFFLINE=1: no request at all; a clear error when no copy is cached (HF_HOME empty)."""
    if hide_transformers:
        monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="HF_HUB_OFFLINE is set"):
        GPT.from_pretrained("gpt2")
    assert time.perf_counter() - start < OFFLINE_BOUND  # no request: only imports (seconds on a quiet machine)


def test_from_pretrained_reads_a_cached_checkpoint_without_network(monkeypatch, tmp_path):
    """A checkpoint downloaded once (here: a small GPT-2 written as safetensors) is read offline."""
    transformers_or_fail()
    from safetensors.torch import save_file

    reference = random_hf_gpt2(1, 2, 8, seed=4)
    checkpoint = {k.removeprefix("transformer."): v.contiguous() for k, v in reference.state_dict().items()
                  if k != "lm_head.weight"}
    (tmp_path / "attention_book").mkdir()
    save_file(checkpoint, str(tmp_path / "attention_book" / "gpt2.safetensors"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setitem(GPT2_CONFIGS, "gpt2", dict(n_layer=1, n_head=2, d_model=8))
    ours = GPT.from_pretrained("gpt2")
    idx = torch.randint(0, 61, (1, 16))
    with torch.no_grad():
        assert (ours(idx) - reference(idx).logits).abs().max() <= 1e-4


def test_from_pretrained_uses_transformers_cache_when_the_hub_is_unreachable(monkeypatch):
    """No internet and no HF_HUB_OFFLINE: a copy transformers cached earlier is still used, asked
    for with local_files_only (no download attempt, no long retries)."""
    transformers_or_fail()
    import transformers

    from attention_book import gpt as gpt_module

    reference = random_hf_gpt2(1, 2, 8, seed=5)
    asked = []

    def cached_only(name, local_files_only=False, **kwargs):
        asked.append(local_files_only)
        if not local_files_only:
            raise OSError("would download")
        return reference

    def unreachable(name, timeout):
        raise RuntimeError("the hub is not reachable (test)")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/nonexistent-cache-for-the-test")
    monkeypatch.setattr(gpt_module, "_check_reachable", unreachable)
    monkeypatch.setattr(transformers.GPT2LMHeadModel, "from_pretrained", staticmethod(cached_only))
    monkeypatch.setitem(GPT2_CONFIGS, "gpt2", dict(n_layer=1, n_head=2, d_model=8))
    ours = GPT.from_pretrained("gpt2")
    assert asked == [True]
    idx = torch.randint(0, 61, (1, 16))
    with torch.no_grad():
        assert (ours(idx) - reference(idx).logits).abs().max() <= 1e-4
    monkeypatch.setattr(transformers.GPT2LMHeadModel, "from_pretrained",
                        staticmethod(lambda name, **kwargs: (_ for _ in ()).throw(OSError("no copy"))))
    with pytest.raises(RuntimeError, match="not reachable"):
        GPT.from_pretrained("gpt2")


def test_from_pretrained_refuses_unknown_names():
    with pytest.raises(ValueError, match="gpt2-medium"):
        GPT.from_pretrained("gpt3")


# ----------------------------------------------------------------------------------- training
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
