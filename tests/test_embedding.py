"""Chapter 1's package code: vocabulary, token + position embeddings, the worked examples' data."""

from __future__ import annotations

import pytest
import torch

from attention_book import get_device, set_seed
from attention_book.data import journey_inputs, life_inputs, life_vocabulary
from attention_book.embedding import (
    TokenAndPositionEmbedding,
    bpe_decode,
    bpe_encode,
    build_vocabulary,
    count_pairs,
    encode,
    merge_pair,
    next_token_windows,
    train_bpe,
)
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


# ----------------------------------------------------------------- byte-pair encoding (chapter 1)


def test_count_pairs_and_merge_pair():
    assert count_pairs([1, 2, 1, 2, 3]) == {(1, 2): 2, (2, 1): 1, (2, 3): 1}
    assert list(count_pairs([5, 6, 7])) == [(5, 6), (6, 7)]  # first-seen order
    assert count_pairs([4]) == {} and count_pairs([]) == {}
    ids = [7, 7, 7, 1, 7, 7]
    assert merge_pair(ids, (7, 7), 256) == [256, 7, 1, 256]  # left to right, no overlaps
    assert ids == [7, 7, 7, 1, 7, 7]  # a new list, the input is unchanged
    assert merge_pair([1, 2], (2, 1), 256) == [1, 2]  # the order within a pair matters
    assert merge_pair(torch.tensor([3, 4, 3, 4]), (3, 4), 300) == [300, 300]


def test_train_bpe_learns_the_most_frequent_pair_first_and_builds_on_merges():
    merges = train_bpe("low lower lowest, slow slower slowest", 3)
    assert merges == {(108, 111): 256, (256, 119): 257, (257, 101): 258}  # 'lo', 'low', 'lowe'
    assert bpe_decode([258], merges) == "lowe"
    # ties go to the pair seen first: (a, b) and (c, d) both occur twice
    assert list(train_bpe("abab cdcd", 1)) == [(97, 98)]
    # stops early when no pair repeats
    assert train_bpe("abc", 5) == {}


def test_bpe_encode_and_decode_round_trip_any_text():
    text = "low lower lowest, slow slower slowest, new newer newest"
    merges = train_bpe(text, 10)
    for sample in [text, "the slowest newer lower", "Größe 🙂 naïve", ""]:
        ids = bpe_encode(sample, merges)
        assert bpe_decode(ids, merges) == sample
        assert all(0 <= i < 256 + len(merges) for i in ids)
    assert len(bpe_encode(text, merges)) < len(text.encode("utf-8"))  # the merges compress
    # the merges are applied in training order, each everywhere: the loop's own tokenization
    ids = list(text.encode("utf-8"))
    for pair, new_id in merges.items():
        ids = merge_pair(ids, pair, new_id)
    assert bpe_encode(text, merges) == ids


def test_bpe_encode_agrees_with_merging_the_earliest_learned_pair_first():
    """GPT-2's rule (merge the lowest-ranked pair present, repeat) gives the same ids."""
    merges = train_bpe("the cat sat on the mat; the cat ate the rat", 12)
    for sample in ["the rat sat", "a cat at the mat", "tthhee"]:
        ids = list(sample.encode("utf-8"))
        while True:
            ranked = [pair for pair in zip(ids, ids[1:]) if pair in merges]
            if not ranked:
                break
            pair = min(ranked, key=merges.get)
            ids = merge_pair(ids, pair, merges[pair])
        assert bpe_encode(sample, merges) == ids


def test_bpe_decode_joins_bytes_before_decoding():
    merges = {(99, 97): 256, (0xA9, 32): 257}  # 'ca', and the second byte of 'é' plus a space
    assert bpe_decode([256, 0xC3, 257], merges) == "caé "
    assert bpe_decode([0xFF], {}) == "\ufffd"  # not UTF-8: the replacement character
    with pytest.raises(ValueError, match="not in the vocabulary"):
        bpe_decode([300], merges)
    with pytest.raises(ValueError, match="merges must number new tokens 256"):
        bpe_decode([1], {(1, 2): 300})


def test_next_token_windows_shift_the_targets_by_one():
    ids = list(range(10, 21))  # 11 tokens
    inputs, targets = next_token_windows(ids, context_length=4)
    assert inputs.tolist() == [[10, 11, 12, 13], [14, 15, 16, 17]]
    assert targets.tolist() == [[11, 12, 13, 14], [15, 16, 17, 18]]
    assert inputs.dtype == torch.long
    inputs, targets = next_token_windows(torch.tensor(ids), context_length=4, stride=1)
    assert inputs.shape == targets.shape == (7, 4)  # starts 0..6: the last target is token 10
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert targets[-1, -1].item() == 20
    inputs, _ = next_token_windows(ids, context_length=10)  # exactly one window fits
    assert inputs.shape == (1, 10)
    with pytest.raises(ValueError, match="context_length=10"):
        next_token_windows(ids[:10], context_length=10)


def test_next_token_windows_of_the_gpt2_tokens_of_a_text(gpt2_tokenizer):
    ids = gpt2_tokenizer.encode("Your journey starts with one small step")
    inputs, targets = next_token_windows(ids, context_length=len(ids) - 1)
    assert inputs[0].tolist() == ids[:-1] and targets[0].tolist() == ids[1:]


def test_gpt2_vocabulary_is_bytes_merges_and_one_special_token(gpt2_tokenizer):
    single = sum(len(gpt2_tokenizer.decode_single_token_bytes(i)) == 1 for i in range(gpt2_tokenizer.n_vocab))
    assert single == 256
    assert gpt2_tokenizer.special_tokens_set == {"<|endoftext|>"}
    assert gpt2_tokenizer.eot_token == 50256
    assert gpt2_tokenizer.n_vocab - single - 1 == 50_000


def test_how_to_run_names_the_tiktoken_cache_files():
    """book/how_to_run.md says how to make tiktoken's cache: its file names are the SHA-1 of the
    two URLs that tiktoken's gpt2 encoding downloads (tiktoken/load.py, read_file_cached)."""
    import hashlib
    import inspect
    import re
    from pathlib import Path

    tiktoken_ext = pytest.importorskip("tiktoken_ext.openai_public")
    page = (Path(__file__).resolve().parents[1] / "book" / "how_to_run.md").read_text()
    urls = re.findall(r"https://openaipublic\.blob\.core\.windows\.net/gpt-2/encodings/main/[\w.]*\w", page)
    assert sorted(set(urls)) == sorted(set(re.findall(r'"(https://openaipublic[^"]+/gpt-2/[^"]+)"',
                                                      inspect.getsource(tiktoken_ext.gpt2))))
    for url in set(urls):
        name = hashlib.sha1(url.encode()).hexdigest()
        assert name in page, f"how_to_run.md does not name the cache file of {url} ({name})"
    shared = Path(__file__).resolve().parents[2] / "shared" / "tiktoken-cache"
    if shared.is_dir():
        assert {hashlib.sha1(url.encode()).hexdigest() for url in urls} <= {p.name for p in shared.iterdir()}
