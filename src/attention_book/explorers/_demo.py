"""Seeded demo data for the explorers page: projection weights and a tiny training run."""

from __future__ import annotations

from typing import List, Tuple

import torch

from ..functional import scaled_dot_product_attention
from ._inputs import check_int

__all__ = ["demo_training", "demo_weights", "demo_next_words"]


def demo_weights(seed: int = 123, d_in: int = 3, d_out: int = 8) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded random ``(W_query, W_key, W_value)``, each ``(d_in, d_out)``, for the explorer demos.

    Uses its own generator, so it neither reads nor changes the global random state.
    """
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(d_in, d_out, generator=generator) for _ in range(3))


def demo_training(seed: int = 0, steps: int = 120, every: int = 6, lr: float = 1.0):
    """A tiny training run whose attention weights make a good playback (about a second on a CPU).

    Two causal heads over the journey sentence. Unlike a language model, the loss supervises the
    attention weights directly: it is the negative log of the weight each query puts on its target
    key, the previous token for head 1 and the first token for head 2. The inputs are the journey
    embeddings plus a one-hot position. Returns ``(tokens, snapshots, losses)``: snapshots every
    ``every`` steps as ``(step, weights (2, T, T))`` and one loss per step, ready for
    :func:`training_playback`.
    """
    from ..data import journey_inputs

    steps = check_int("steps", steps, 1, 10**6)
    every = check_int("every", every, 1, 10**6)
    tokens, embeddings = journey_inputs()
    num_tokens = len(tokens)
    x = torch.cat([embeddings, torch.eye(num_tokens)], dim=1)  # (T, 3 + T)
    generator = torch.Generator().manual_seed(seed)
    head_dim, num_heads = 4, 2
    W_query = (0.3 * torch.randn(x.shape[1], num_heads * head_dim, generator=generator)).requires_grad_()
    W_key = (0.3 * torch.randn(x.shape[1], num_heads * head_dim, generator=generator)).requires_grad_()
    positions = torch.arange(num_tokens)
    targets = torch.stack([(positions - 1).clamp(min=0), torch.zeros_like(positions)])  # (H, T)
    hidden = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(diagonal=1)  # True = hidden

    def weights() -> torch.Tensor:
        q = (x @ W_query).view(num_tokens, num_heads, head_dim).transpose(0, 1)  # (H, T, hd)
        k = (x @ W_key).view(num_tokens, num_heads, head_dim).transpose(0, 1)  # (H, T, hd)
        _, attention = scaled_dot_product_attention(q, k, k, mask=hidden)  # values unused
        return attention  # (H, T, T)

    snapshots: List[Tuple[int, torch.Tensor]] = []
    losses: List[float] = []
    for step in range(steps + 1):
        attention = weights()
        loss = -attention.gather(2, targets.unsqueeze(-1)).clamp_min(1e-9).log().mean()
        if step % every == 0:
            snapshots.append((step, attention.detach().clone()))
        losses.append(loss.item())
        if step == steps:
            break
        W_query.grad = W_key.grad = None
        loss.backward()
        with torch.no_grad():  # plain gradient descent
            W_query -= lr * W_query.grad
            W_key -= lr * W_key.grad
    return tokens, snapshots, losses


def demo_next_words(context: str = "Mr.", top: int = 12) -> Tuple[List[str], torch.Tensor, int]:
    """Which words follow ``context`` in Jane Austen's novels: a next-word distribution by counting.

    The novels are chapter 9's corpus (``attention_book.corpus``); words are runs of letters with
    a trailing full stop kept ("Mr."), and the punctuation marks , ; ! ? count as words. Returns
    ``(words, logits, total)``: the ``top`` most frequent next words (ties in alphabetical order),
    their log counts as logits (a softmax of them gives back the frequencies among these words)
    and how often ``context`` was followed by any word. Nothing is trained; about a second.
    """
    import collections
    import re

    from ..corpus import load_novels

    if not isinstance(context, str) or not context.strip():
        raise TypeError(f"context must be a non-empty str such as 'Mr.', got {context!r}")
    top = check_int("top", top, 2, 200)
    words = re.findall(r"[A-Za-z]+\.?|[,;!?]", "\n".join(load_novels().values()))
    following = collections.Counter(nxt for word, nxt in zip(words, words[1:]) if word == context)
    if len(following) < 2:
        raise ValueError(f"context={context!r} is followed by {len(following)} different word(s) in the novels: "
                         "pick a more frequent word, e.g. 'Mr.' or 'said'")
    ranked = sorted(following.items(), key=lambda item: (-item[1], item[0]))[:top]
    counts = torch.tensor([count for _, count in ranked], dtype=torch.float64)
    return [word for word, _ in ranked], counts.log(), sum(following.values())
