"""Chapter 9: GPT-2's weights in the book's GPT (attention_book.gpt2_weights), against transformers.

``transformers`` is a test dependency only (requirements-dev.txt): readers never need it. The
loader is checked against ``GPT2LMHeadModel`` built from small random configurations whose
weights are all moved away from their initial values, and against the key names and shapes of
the real 124M checkpoint, built on the ``meta`` device (nothing is downloaded).
"""

from __future__ import annotations

import pytest
import torch

from attention_book.gpt import GPT
from attention_book.gpt2_weights import (
    GPT2_CONFIGS,
    convert_gpt2_state_dict,
    from_gpt2_state_dict,
    from_pretrained,
    read_safetensors,
    transformers_gpt2,
)
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


# ----------------------------------------------------------------------------------- GPT-2 loading
@pytest.mark.parametrize("n_layer, n_head, d_model", [(1, 1, 8), (2, 4, 32), (3, 6, 48), (2, 2, 20)])
def test_loader_reproduces_transformers_logits(n_layer, n_head, d_model):
    reference = random_hf_gpt2(n_layer, n_head, d_model, seed=n_layer * 100 + d_model)
    ours = from_gpt2_state_dict(reference.state_dict(), n_head=n_head)
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
    ours = from_gpt2_state_dict(state_dict, n_head=2)
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
    model = from_gpt2_state_dict(theirs, n_head=12)  # builds on the meta device too
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


@pytest.mark.parametrize("hide_transformers", [False, True])
def test_from_pretrained_fails_fast_and_clearly_offline(monkeypatch, hide_transformers):
    """No internet here: a RuntimeError naming what to do, within seconds, both download paths."""
    if hide_transformers:
        monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    monkeypatch.setenv("XDG_CACHE_HOME", "/nonexistent-cache-for-the-test")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    import urllib.request

    timeouts = []
    real_urlopen = urllib.request.urlopen

    def recording_urlopen(request, *args, timeout=None, **kwargs):
        timeouts.append(timeout)
        return real_urlopen(request, *args, timeout=timeout, **kwargs)

    monkeypatch.setattr(urllib.request, "urlopen", recording_urlopen)
    try:
        from_pretrained("gpt2", timeout=5)
    except RuntimeError as error:
        message = str(error)
    else:
        pytest.skip("the Hugging Face hub is reachable from here: nothing offline to test")
    # fails fast: one request, bounded by the timeout (no library's long retries); no clock here
    assert timeouts[:1] == [5]
    assert "from_gpt2_state_dict" in message and "internet" in message


@pytest.mark.parametrize("hide_transformers", [False, True])
def test_from_pretrained_respects_hf_hub_offline(monkeypatch, tmp_path, hide_transformers):
    """HF_HUB_OFFLINE=1: no request at all; a clear error when no copy is cached (HF_HOME empty)."""
    if hide_transformers:
        monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    import urllib.request

    def no_request(*args, **kwargs):
        raise AssertionError("HF_HUB_OFFLINE=1 but a request was made")

    monkeypatch.setattr(urllib.request, "urlopen", no_request)
    with pytest.raises(RuntimeError, match="HF_HUB_OFFLINE is set"):
        from_pretrained("gpt2")


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
    ours = from_pretrained("gpt2")
    idx = torch.randint(0, 61, (1, 16))
    with torch.no_grad():
        assert (ours(idx) - reference(idx).logits).abs().max() <= 1e-4


def test_from_pretrained_uses_transformers_cache_when_the_hub_is_unreachable(monkeypatch):
    """No internet and no HF_HUB_OFFLINE: a copy transformers cached earlier is still used, asked
    for with local_files_only (no download attempt, no long retries)."""
    transformers_or_fail()
    import transformers

    from attention_book import gpt2_weights as gpt2_module

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
    monkeypatch.setattr(gpt2_module, "_check_reachable", unreachable)
    monkeypatch.setattr(transformers.GPT2LMHeadModel, "from_pretrained", staticmethod(cached_only))
    monkeypatch.setitem(GPT2_CONFIGS, "gpt2", dict(n_layer=1, n_head=2, d_model=8))
    ours = from_pretrained("gpt2")
    assert asked == [True]
    idx = torch.randint(0, 61, (1, 16))
    with torch.no_grad():
        assert (ours(idx) - reference(idx).logits).abs().max() <= 1e-4
    monkeypatch.setattr(transformers.GPT2LMHeadModel, "from_pretrained",
                        staticmethod(lambda name, **kwargs: (_ for _ in ()).throw(OSError("no copy"))))
    with pytest.raises(RuntimeError, match="not reachable"):
        from_pretrained("gpt2")


def test_from_pretrained_refuses_unknown_names():
    with pytest.raises(ValueError, match="gpt2-medium"):
        from_pretrained("gpt3")


def test_transformers_gpt2_degrades_to_one_sentence_when_transformers_cannot_load(monkeypatch):
    """transformers missing, or refusing this PyTorch (transformers 5 on torch 2.5): a RuntimeError
    that says why in one sentence, never a traceback from inside transformers."""
    transformers = transformers_or_fail()

    def refuses(name, **kwargs):
        raise ImportError("this version of transformers requires torch>=2.6\nmore lines")

    monkeypatch.setattr(transformers.GPT2LMHeadModel, "from_pretrained", staticmethod(refuses))
    with pytest.raises(RuntimeError, match=r"could not load 'gpt2' here \(ImportError: .*requires torch>=2.6\)") \
            as caught:
        transformers_gpt2("gpt2")
    assert "\n" not in str(caught.value) and torch.__version__ in str(caught.value)
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)  # not installed
    with pytest.raises(RuntimeError, match=r"could not load 'gpt2' here \((ModuleNotFound|Import)Error"):
        transformers_gpt2("gpt2")
    with pytest.raises(ValueError, match="gpt2-medium"):
        transformers_gpt2("gpt3")
