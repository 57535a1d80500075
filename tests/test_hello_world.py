"""Chapter 8: the Hello-World model, its data helpers and its training loop."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from attention_book import set_seed
from attention_book.hello_world import (
    CHAPTER_SETTINGS,
    HELLO_WORLD,
    SIX_SENTENCES,
    HelloWorldModel,
    _progress_default,
    encode_texts,
    last_token_accuracy,
    next_token_loss,
    next_token_pairs,
    train,
)

SMALL_VOCAB = 30


def small_model(n_embd=5, context_length=5, seed=0):
    torch.manual_seed(seed)
    return HelloWorldModel(n_embd=n_embd, context_length=context_length, vocab_size=SMALL_VOCAB)


def random_ids(B=2, T=4, seed=0):
    return torch.randint(0, SMALL_VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------ the model
def test_intermediates_have_the_right_shapes():
    model = small_model(n_embd=5)
    idx = random_ids(B=2, T=4)
    logits, seen = model(idx, return_intermediates=True)
    assert logits.shape == (2, 4, SMALL_VOCAB)
    for name in ["token_embeddings", "inputs", "queries", "keys", "values", "context"]:
        assert seen[name].shape == (2, 4, 5), name
    assert seen["position_embeddings"].shape == (4, 5)
    for name in ["scores", "masked_scores", "weights"]:
        assert seen[name].shape == (2, 4, 4), name
    assert all(not t.requires_grad for t in seen.values()), "intermediates are detached"
    assert torch.equal(model(idx), logits), "return_intermediates must not change the logits"


@pytest.mark.parametrize("n_embd", [3, 5, 8])
def test_attention_is_causal_and_scaled_by_its_own_size(n_embd):
    model = small_model(n_embd=n_embd)
    _, seen = model(random_ids(B=3, T=5), return_intermediates=True)
    q, k = seen["queries"], seen["keys"]
    hidden = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    expected = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(hidden, -math.inf) / math.sqrt(n_embd), dim=-1)
    assert torch.allclose(seen["weights"], expected, atol=1e-6)
    assert torch.all(seen["weights"][:, hidden] == 0)
    assert torch.allclose(seen["weights"].sum(-1), torch.ones(3, 5), atol=1e-6)
    assert torch.allclose(seen["context"], seen["weights"] @ seen["values"], atol=1e-6)


def test_earlier_positions_do_not_see_later_tokens():
    model = small_model()
    idx = random_ids(B=1, T=5)
    changed = idx.clone()
    changed[0, -1] = (changed[0, -1] + 1) % SMALL_VOCAB
    assert torch.allclose(model(idx)[:, :-1], model(changed)[:, :-1])
    assert not torch.allclose(model(idx)[:, -1], model(changed)[:, -1])


def test_model_follows_the_device_of_its_buffers():
    model = small_model()
    assert model.mask.dtype == torch.bool and model.mask.shape == (5, 5)
    assert "mask" not in model.state_dict(), "the mask is rebuilt, not saved"


def test_model_rejects_bad_input():
    model = small_model(context_length=4)
    with pytest.raises(ValueError, match="context_length=4"):
        model(random_ids(B=1, T=5))
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        model(torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="torch.long"):
        model(torch.zeros(1, 3))
    with pytest.raises(ValueError, match="at least one token"):
        model(torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="n_embd must be a positive integer"):
        HelloWorldModel(n_embd=0, vocab_size=SMALL_VOCAB)


# ------------------------------------------------------------------ data helpers
def test_encode_texts_and_pairs(gpt2_tokenizer):
    ids = encode_texts([HELLO_WORLD], tokenizer=gpt2_tokenizer)
    assert ids.tolist() == [[15496, 2159, 0]]
    inputs, targets = next_token_pairs(encode_texts(SIX_SENTENCES, tokenizer=gpt2_tokenizer))
    assert inputs.shape == targets.shape == (6, 4)
    assert torch.equal(inputs[:, 1:], targets[:, :-1]), "targets are the inputs shifted by one"
    assert gpt2_tokenizer.decode(targets[:, -1].tolist()) == " animal person mineral plant vehicle star"


def test_encode_texts_rejects_bad_input(gpt2_tokenizer):
    with pytest.raises(ValueError, match="encodes to no tokens"):
        encode_texts([""], tokenizer=gpt2_tokenizer)
    with pytest.raises(ValueError, match="empty list"):
        encode_texts([], tokenizer=gpt2_tokenizer)
    with pytest.raises(ValueError, match=r"different numbers of tokens.*'Hello World!': 3"):
        encode_texts(["The dog is an animal", HELLO_WORLD], tokenizer=gpt2_tokenizer)
    with pytest.raises(ValueError, match="has 5 tokens but the context length is 4"):
        encode_texts(["The dog is an animal"], context_length=4, tokenizer=gpt2_tokenizer)
    with pytest.raises(TypeError, match="needs strings"):
        encode_texts([42], tokenizer=gpt2_tokenizer)


def test_next_token_pairs_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 2 tokens"):
        next_token_pairs(torch.tensor([[5]]))
    with pytest.raises(ValueError, match=r"unsqueeze\(0\)"):
        next_token_pairs(torch.tensor([1, 2, 3]))
    with pytest.raises(TypeError, match="tensor"):
        next_token_pairs([[1, 2, 3]])


# ------------------------------------------------------------------ loss, accuracy
def test_loss_and_accuracy():
    logits = torch.randn(3, 4, SMALL_VOCAB, generator=torch.Generator().manual_seed(1))
    targets = random_ids(B=3, T=4, seed=2)
    manual = F.cross_entropy(logits.permute(0, 2, 1), targets)  # (B, V, T) form
    assert torch.allclose(next_token_loss(logits, targets), manual)
    targets[:2, -1] = logits[:2, -1].argmax(-1)
    targets[2, -1] = (logits[2, -1].argmax(-1) + 1) % SMALL_VOCAB
    assert last_token_accuracy(logits, targets) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="targets have shape"):
        next_token_loss(logits, targets[:, :-1])


# ------------------------------------------------------------------ training
def test_train_step_is_a_complete_optimizer_step():
    """One SGD update of `train` equals zero_grad + backward + step done by hand."""
    model = small_model(seed=3)
    reference = small_model(seed=3)
    idx = random_ids(B=2, T=5, seed=4)
    inputs, targets = next_token_pairs(idx)
    result = train(model, inputs, targets, steps=2, lr=0.5, optimizer="sgd", progress=False)
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.5)
    losses = []
    for _ in range(2):
        loss = next_token_loss(reference(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        assert torch.allclose(mine, theirs, atol=1e-6)
    assert result.losses[:2] == pytest.approx(losses)
    assert len(result.losses) == len(result.accuracies) == 3


def test_train_rejects_bad_input():
    model = small_model()
    inputs, targets = next_token_pairs(random_ids(B=2, T=5))
    with pytest.raises(ValueError, match="must both be"):
        train(model, inputs, targets[:1], steps=1, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        train(model, inputs, targets, steps=0, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="optimizer must be"):
        train(model, inputs, targets, steps=1, lr=0.1, optimizer="rmsprop", progress=False)


def test_progress_bar_is_off_in_the_book_build(monkeypatch):
    monkeypatch.setenv("ATTENTION_BOOK_STATIC", "1")
    assert _progress_default() is False
    monkeypatch.delenv("ATTENTION_BOOK_STATIC")
    assert _progress_default() is True


def test_stage_1_learns_hello_world(gpt2_tokenizer):
    inputs, targets = next_token_pairs(encode_texts([HELLO_WORLD], tokenizer=gpt2_tokenizer))
    set_seed(123)
    model = HelloWorldModel(n_embd=3)
    result = train(model, inputs, targets, steps=100, lr=3e-2, progress=False)
    assert result.losses[-1] < 0.05 < 10 < result.losses[0]
    prediction = model(encode_texts(["Hello"], tokenizer=gpt2_tokenizer))[0, -1].argmax().item()
    assert gpt2_tokenizer.decode([prediction]) == " World"


def test_chapter_settings_reach_six_out_of_six(gpt2_tokenizer):
    """The chapter's recipe, seed included, predicts all six last words (CPU, fixed seed)."""
    settings = dict(CHAPTER_SETTINGS)
    inputs, targets = next_token_pairs(encode_texts(SIX_SENTENCES, tokenizer=gpt2_tokenizer))
    set_seed(settings.pop("seed"))
    model = HelloWorldModel(n_embd=settings.pop("n_embd"))
    result = train(model, inputs, targets, snapshot_every=10, progress=False, **settings)
    with torch.no_grad():
        logits = model(inputs)
    assert last_token_accuracy(logits, targets) == 1.0
    assert round(last_token_accuracy(logits, targets) * 6) == 6
    assert result.accuracies[-1] == 1.0 and result.accuracies[0] < 1.0
    assert result.first_step_all_correct() is not None
    assert len(result.losses) == CHAPTER_SETTINGS["steps"] + 1
    assert result.losses[-1] < result.losses[0] / 10
    # snapshots: (step, (B, T, T) weights), increasing steps from 0 to the last update
    steps = [step for step, _ in result.snapshots]
    assert steps[0] == 0 and steps[-1] == CHAPTER_SETTINGS["steps"] and steps == sorted(set(steps))
    assert all(weights.shape == (6, 4, 4) for _, weights in result.snapshots)
    assert torch.allclose(result.snapshots[-1][1], model(inputs, return_intermediates=True)[1]["weights"])
    # in "The human is a", the last row attends to the noun
    assert result.snapshots[-1][1][1, -1].argmax().item() == 1


def test_stop_when_all_correct(gpt2_tokenizer):
    inputs, targets = next_token_pairs(encode_texts(SIX_SENTENCES, tokenizer=gpt2_tokenizer))
    set_seed(CHAPTER_SETTINGS["seed"])
    model = HelloWorldModel(n_embd=CHAPTER_SETTINGS["n_embd"])
    result = train(model, inputs, targets, steps=CHAPTER_SETTINGS["steps"], lr=CHAPTER_SETTINGS["lr"],
                   progress=False, stop_when_all_correct=True)
    assert result.accuracies[-1] == 1.0
    assert len(result.accuracies) - 1 == result.first_step_all_correct() < CHAPTER_SETTINGS["steps"]
