"""Chapter 1's package code: vocabulary, token + position embeddings, the worked examples' data."""

from __future__ import annotations

import pytest
import torch

from attention_book import get_device, set_seed
from attention_book.data import journey_inputs, life_inputs, life_vocabulary
from attention_book.embedding import TokenAndPositionEmbedding, build_vocabulary, encode
from attention_book.masks import causal_mask, check_context_length
from attention_book.plotting import heatmap


def test_life_vocabulary_and_embeddings_match_the_source():
    assert life_vocabulary() == {"Life": 0, "dessert": 1, "eat": 2, "first": 3, "is": 4, "short": 5}
    tokens, token_ids, embeddings = life_inputs()
    assert tokens == ["Life", "is", "short", "eat", "dessert", "first"]
    assert token_ids.tolist() == [0, 4, 5, 2, 1, 3]
    # The source article prints these rows for torch.manual_seed(123), nn.Embedding(50_000, 3).
    expected = torch.tensor([[0.3374, -0.1778, -0.3035], [0.1794, 1.8951, 0.4954], [0.2692, -0.0770, -1.0205],
                             [-0.2196, -0.3792, 0.7671], [-0.5880, 0.3486, 0.6603], [-1.1925, 0.6984, -1.4097]])
    assert torch.allclose(embeddings, expected, atol=1e-4)
    assert not embeddings.requires_grad


def test_journey_inputs_shape_and_second_row():
    tokens, inputs = journey_inputs()
    assert tokens[1] == "journey" and inputs.shape == (6, 3)
    assert inputs[1].tolist() == pytest.approx([0.55, 0.87, 0.66])


def test_build_vocabulary_and_encode():
    vocabulary = build_vocabulary("b a, c a")
    assert vocabulary == {"a": 0, "b": 1, "c": 2}
    assert encode("c a b", vocabulary) == [2, 0, 1]
    with pytest.raises(KeyError, match=r"not in the vocabulary: \['z'\]"):
        encode("a z", vocabulary)
    with pytest.raises(ValueError, match="no words"):
        build_vocabulary(" , ")


def test_token_and_position_embedding_adds_positions():
    torch.manual_seed(0)
    layer = TokenAndPositionEmbedding(vocab_size=10, context_length=4, embedding_dim=3)
    ids = torch.tensor([[1, 2, 3], [3, 2, 1]])
    out = layer(ids)
    assert out.shape == (2, 3, 3)
    expected = layer.token_embedding.weight[ids] + layer.position_embedding.weight[:3]
    assert torch.allclose(out, expected)
    # the same token at different positions gets different vectors
    assert not torch.allclose(out[0, 0], out[1, 2])
    assert layer(ids[0]).shape == (3, 3)  # unbatched (T,) -> (T, C)


@pytest.mark.parametrize("ids, error, message", [
    (torch.tensor([[0, 1, 2, 3, 4]]), ValueError, "context_length=4"),
    (torch.tensor([[0, 10]]), ValueError, r"\[0, 9\]"),
    (torch.tensor([[-1, 0]]), ValueError, r"\[0, 9\]"),
    (torch.tensor([[0.0, 1.0]]), TypeError, "integer tensor"),
    (torch.zeros(1, 1, 2, dtype=torch.long), ValueError, r"\(T,\) or \(B, T\)"),
])
def test_token_and_position_embedding_rejects_bad_input(ids, error, message):
    layer = TokenAndPositionEmbedding(vocab_size=10, context_length=4, embedding_dim=3)
    with pytest.raises(error, match=message):
        layer(ids)


def test_token_and_position_embedding_rejects_bad_sizes():
    with pytest.raises(ValueError, match="context_length must be a positive int, got 0"):
        TokenAndPositionEmbedding(10, 0, 3)


def test_causal_mask_and_context_length():
    mask = causal_mask(3)
    assert mask.tolist() == [[False, True, True], [False, False, True], [False, False, False]]
    with pytest.raises(ValueError):
        causal_mask(0)
    check_context_length(4, 4)
    with pytest.raises(ValueError, match="truncate the input to its last 4 tokens"):
        check_context_length(5, 4)


def test_gpt2_tokenizer_facts(gpt2_tokenizer):
    assert gpt2_tokenizer.encode("Hello World") == [15496, 2159]
    assert gpt2_tokenizer.n_vocab == 50257
    assert gpt2_tokenizer.encode(" World") != gpt2_tokenizer.encode("World")
    text = "Self-attention is unbelievably useful!"
    assert gpt2_tokenizer.decode(gpt2_tokenizer.encode(text)) == text


def test_get_device_and_seed(capsys):
    device = get_device(verbose=True)
    assert device.type in ("cuda", "mps", "cpu")
    assert f"Using device: {device.type}" in capsys.readouterr().out
    set_seed(7)
    first = torch.rand(3)
    set_seed(7)
    assert torch.equal(first, torch.rand(3))


def test_heatmap_labels_and_rejects_3d():
    import matplotlib

    matplotlib.use("Agg")
    ax = heatmap(torch.eye(2), row_labels=["a", "b"], col_labels=["x", "y"], title="t")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    assert len(ax.texts) == 4
    with pytest.raises(ValueError, match="2-D"):
        heatmap(torch.zeros(2, 2, 2))


def test_one_tokenizer_for_chapter_1_and_the_worked_examples():
    from attention_book import data, embedding

    assert embedding.build_vocabulary is data.build_vocabulary and embedding.encode is data.encode
    assert life_vocabulary("b a, c a") == build_vocabulary("b a, c a")
    tokens, token_ids, _ = life_inputs()
    assert token_ids.tolist() == encode(" ".join(tokens), life_vocabulary())


def test_embedding_checks_its_sizes_with_the_shared_rule():
    with pytest.raises(TypeError, match=r"embedding_dim must be a positive int, got 2\.5 \(float\)"):
        TokenAndPositionEmbedding(10, 4, 2.5)  # used to be a raw torch TypeError
    with pytest.raises(ValueError, match="vocab_size must be a positive int, got 0"):
        TokenAndPositionEmbedding(0, 4, 3)
