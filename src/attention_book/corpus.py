"""Chapter 9's text: Jane Austen's six novels, shipped with the package, and a character tokenizer.

The novels are in the public domain (Austen died in 1817; ``texts/README.md`` says where the
files come from and what was removed). They live inside the package, so the chapter needs no
download, in Colab neither.

* :func:`load_novels` returns the six texts in order of publication; :data:`HELD_OUT` names the
  novel the chapter never trains on (*Persuasion*), :func:`train_and_held_out_text` the split.
* :class:`CharTokenizer`: one token per character (about 80 of them). A GPT over characters
  trains in a minute on a laptop CPU; GPT-2's 50,257 byte-pair tokens would make the output
  layer alone hundreds of times larger.
* :func:`ngram_loss`: what counting alone achieves on held-out text (the unigram and bigram
  baselines a trained model must beat); :func:`ngram_window_losses`: the same on each of the
  held-out windows a model is scored on, for a comparison with an error bar.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple

import torch

from . import validation as check
from .training import held_out_windows

__all__ = [
    "TEXTS",
    "NOVELS",
    "HELD_OUT",
    "load_novels",
    "train_and_held_out_text",
    "CharTokenizer",
    "ngram_loss",
    "ngram_window_losses",
]

#: the folder holding the novels (package data)
TEXTS = Path(__file__).resolve().parent / "texts"

#: file stem -> title, in order of publication
NOVELS: Dict[str, str] = {
    "sense_and_sensibility": "Sense and Sensibility (1811)",
    "pride_and_prejudice": "Pride and Prejudice (1813)",
    "mansfield_park": "Mansfield Park (1814)",
    "emma": "Emma (1815)",
    "northanger_abbey": "Northanger Abbey (1817)",
    "persuasion": "Persuasion (1817)",
}

#: the novel kept out of training: the held-out loss is measured on it
HELD_OUT = "persuasion"


def load_novels() -> Dict[str, str]:
    """The six novels as ``{file stem: text}``, in order of publication."""
    missing = [stem for stem in NOVELS if not (TEXTS / f"{stem}.txt").is_file()]
    if missing:
        raise FileNotFoundError(
            f"the novels {missing} are missing from {TEXTS}: reinstall the course package "
            "(pip install --force-reinstall attention-book) or check out the repository again"
        )
    return {stem: (TEXTS / f"{stem}.txt").read_text(encoding="utf-8") for stem in NOVELS}


def train_and_held_out_text(held_out: str = HELD_OUT) -> Tuple[str, str]:
    """``(training text, held-out text)``: five novels joined by blank lines, and the sixth."""
    novels = load_novels()
    if held_out not in novels:
        raise ValueError(f"held_out must be one of {list(novels)}, got {held_out!r}")
    training = "\n\n".join(text for stem, text in novels.items() if stem != held_out)
    return training, novels[held_out]


class CharTokenizer:
    """Characters <-> token ids: the vocabulary is every character of ``text``, sorted.

    ``encode(text)`` returns a list of ids, ``decode(ids)`` the string; the same methods as
    tiktoken's GPT-2 encoding, so code that shows tokens works with both. A character that
    was not in the text raises a ``ValueError`` naming it.
    """

    def __init__(self, text: str):
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}; pass the training text")
        if not text:
            raise ValueError("text is empty: the vocabulary is made of the characters of a text")
        self.chars: List[str] = sorted(set(text))
        self.ids = {char: i for i, char in enumerate(self.chars)}

    @property
    def n_vocab(self) -> int:
        """Number of tokens (tiktoken's name for it)."""
        return len(self.chars)

    def encode(self, text: str) -> List[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        try:
            return [self.ids[char] for char in text]
        except KeyError as error:
            raise ValueError(
                f"text contains {error.args[0]!r}, which is not in the vocabulary of "
                f"{self.n_vocab} characters: use only characters of the training text "
                f"(e.g. letters, digits and {''.join(c for c in self.chars if not c.isalnum())!r})"
            ) from None

    def encode_tensor(self, text: str) -> torch.Tensor:
        """``encode`` as a 1-D ``torch.long`` tensor, fast for a whole book."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        if not text:
            return torch.zeros(0, dtype=torch.long)
        codes = torch.frombuffer(bytearray(text.encode("utf-32-le")), dtype=torch.int32).long()  # (N,)
        table = torch.full((max(max(map(ord, self.chars)), int(codes.max())) + 1,), -1, dtype=torch.long)
        table[torch.tensor([ord(c) for c in self.chars])] = torch.arange(self.n_vocab)
        ids = table[codes]
        if (ids < 0).any():
            self.encode(chr(int(codes[ids < 0][0])))  # raises the ValueError naming the character
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.tolist()
        ids = list(ids)
        bad = [i for i in ids if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < self.n_vocab]
        if bad:
            raise ValueError(f"ids must be ints from 0 to {self.n_vocab - 1}, got {bad[0]!r}")
        return "".join(self.chars[i] for i in ids)

    def __repr__(self) -> str:
        return f"CharTokenizer({self.n_vocab} characters)"


def _ngram_log_probs(train_ids: torch.Tensor, held_out_ids: torch.Tensor, vocab_size: int, order: int,
                     smoothing: float) -> torch.Tensor:
    """Checked arguments -> the table of log-probabilities: ``(V,)`` (unigram) or ``(V, V)`` (bigram)."""
    for name, ids in (("train_ids", train_ids), ("held_out_ids", held_out_ids)):
        check.tensor(name, ids, "(N,)")
        check.ndim(name, ids, 1, "(N,)")
    vocab_size = check.positive_int("vocab_size", vocab_size)
    smoothing = check.positive_number("smoothing", smoothing)
    if order not in (1, 2):
        raise ValueError(f"order must be 1 (unigram) or 2 (bigram), got {order!r}")
    train_ids = train_ids.cpu()
    if order == 1:
        counts = torch.bincount(train_ids, minlength=vocab_size).double() + smoothing  # (V,)
        return (counts / counts.sum()).log()
    pairs = train_ids[:-1] * vocab_size + train_ids[1:]  # one number per (previous, next) pair
    counts = torch.bincount(pairs, minlength=vocab_size ** 2).double().view(vocab_size, vocab_size) + smoothing
    return (counts / counts.sum(dim=1, keepdim=True)).log()  # (V, V): row = previous token


def ngram_loss(train_ids: torch.Tensor, held_out_ids: torch.Tensor, vocab_size: int, order: int,
               smoothing: float = 1.0) -> float:
    """Held-out cross-entropy (nats per token) of a counting model: unigram or bigram.

    ``order=1`` predicts every token with its frequency in the training ids; ``order=2`` with
    the frequency of each token *after the previous one*. Counts get ``smoothing`` added
    (add-one / Laplace smoothing by default), so an unseen pair does not cost infinity.
    The held-out ids are scored from their second token on, like a model's next-token loss.
    """
    log_probs = _ngram_log_probs(train_ids, held_out_ids, vocab_size, order, smoothing)
    held_out_ids = held_out_ids.cpu()
    targets = held_out_ids[1:]
    if order == 1:
        return -log_probs[targets].mean().item()
    return -log_probs[held_out_ids[:-1], targets].mean().item()


def ngram_window_losses(train_ids: torch.Tensor, held_out_ids: torch.Tensor, vocab_size: int, order: int,
                        context_length: int, max_windows: Optional[int] = None,
                        smoothing: float = 1.0) -> torch.Tensor:
    """:func:`ngram_loss` on each held-out window a model is scored on: one loss per window.

    The windows are :func:`attention_book.training.held_out_windows` (those of
    :func:`attention_book.training.held_out_losses`), each scored on its ``context_length`` next
    tokens, the bigram reading the token before each. Pair the result with a model's per-window
    losses to compare the two on exactly the same text (:func:`attention_book.training.mean_with_error`).
    """
    log_probs = _ngram_log_probs(train_ids, held_out_ids, vocab_size, order, smoothing)
    context_length = check.positive_int("context_length", context_length)
    starts = held_out_windows(held_out_ids.numel(), context_length, max_windows)
    windows = held_out_ids.cpu()[starts[:, None] + torch.arange(context_length + 1)]  # (n, T + 1)
    previous, targets = windows[:, :-1], windows[:, 1:]
    chosen = log_probs[targets] if order == 1 else log_probs[previous, targets]  # (n, T)
    return (-chosen.mean(dim=1)).float()
