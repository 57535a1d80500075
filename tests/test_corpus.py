"""Chapter 9's corpus (the six novels shipped as package data), its tokenizer and the baselines."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from attention_book.corpus import (
    HELD_OUT,
    NOVELS,
    TEXTS,
    CharTokenizer,
    load_novels,
    ngram_loss,
    ngram_window_losses,
    train_and_held_out_text,
)

ROOT = Path(__file__).resolve().parents[1]


def test_the_novels_are_shipped_with_their_licence_and_are_large_enough():
    novels = load_novels()
    assert list(novels) == list(NOVELS) and len(novels) == 6
    assert sum(len(text) for text in novels.values()) >= 1_000_000
    readme = (TEXTS / "README.md").read_text(encoding="utf-8")
    assert "public domain" in readme and "r-cran-janeaustenr" in readme
    for stem, text in novels.items():
        assert text.endswith("\n") and not text.endswith("\n\n")
        assert "Project Gutenberg" not in text and "A NOTE ON THE TEXT" not in text  # header and notes removed
        assert f"`{stem}.txt`" in readme


def test_the_texts_are_package_data():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"texts/*.txt"' in pyproject and '"texts/*.md"' in pyproject
    assert TEXTS.parent.name == "attention_book"


def test_train_and_held_out_split():
    training, held_out = train_and_held_out_text()
    novels = load_novels()
    assert held_out == novels[HELD_OUT]
    assert held_out[:2000] not in training
    assert len(training) == sum(len(t) for s, t in novels.items() if s != HELD_OUT) + 2 * (len(novels) - 2)
    with pytest.raises(ValueError, match="held_out"):
        train_and_held_out_text("ulysses")


def test_char_tokenizer_round_trip_and_fast_encoding():
    tokenizer = CharTokenizer("".join(load_novels().values()))
    assert tokenizer.n_vocab == 81 and tokenizer.chars == sorted(tokenizer.chars)
    text = "It is a truth universally acknowledged, £20,000!\n"
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text and tokenizer.decode(torch.tensor(ids)) == text
    assert tokenizer.encode_tensor(text).tolist() == ids
    assert tokenizer.encode_tensor("").tolist() == []
    with pytest.raises(ValueError, match="'é'"):
        tokenizer.encode("café")
    with pytest.raises(ValueError, match="'é'"):
        tokenizer.encode_tensor("café")
    with pytest.raises(ValueError, match="ids"):
        tokenizer.decode([81])
    with pytest.raises(TypeError, match="text"):
        CharTokenizer(["a"])


def test_ngram_losses_match_a_count_done_by_hand():
    train = torch.tensor([0, 1, 0, 1, 1, 0])  # counts: 0 three times, 1 three times
    held = torch.tensor([0, 1, 1])
    # unigram with add-one over 3 tokens: counts 4, 4, 1 of 9; both targets are 1: p = 4/9
    assert ngram_loss(train, held, vocab_size=3, order=1) == pytest.approx(-math.log(4 / 9))
    # bigram pairs: 0->1 twice, 1->0 twice, 1->1 once; add-one over 3 next tokens
    expected = -(math.log((2 + 1) / (2 + 3)) + math.log((1 + 1) / (3 + 3))) / 2
    assert ngram_loss(train, held, vocab_size=3, order=2) == pytest.approx(expected)
    with pytest.raises(ValueError, match="order"):
        ngram_loss(train, held, 3, order=3)


def test_ngram_window_losses_score_the_windows_a_model_is_scored_on():
    generator = torch.Generator().manual_seed(0)
    train = torch.randint(0, 5, (400,), generator=generator)
    held = torch.randint(0, 5, (41,), generator=generator)  # 41 tokens: 5 windows of 8 and their next tokens
    for order in (1, 2):
        per_window = ngram_window_losses(train, held, 5, order, context_length=8)
        assert per_window.shape == (5,)
        # the windows tile the text: their mean is the n-gram loss of the whole text
        assert per_window.double().mean().item() == pytest.approx(ngram_loss(train, held, 5, order), rel=1e-6)
        # one window by hand: tokens 16..24, scored on 17..24
        assert per_window[2].item() == pytest.approx(ngram_loss(train, held[16:25], 5, order), rel=1e-6)
    assert ngram_window_losses(train, held, 5, 2, context_length=8, max_windows=2).shape == (2,)
    with pytest.raises(ValueError, match="context_length"):
        ngram_window_losses(train, held, 5, 2, context_length=0)
