"""Chapter 9: a GPT built from the book's parts.

* :class:`GPTConfig`: the sizes of a GPT (vocabulary, context length, width, layers, heads).
* :class:`Block`: one pre-norm transformer block. The attention in it *is* chapter 5's causal
  :class:`~attention_book.multihead.MultiHeadAttention`; around it a layer norm before
  attention and before the MLP, and two residual connections::

      x = x + attn(ln_1(x))   # tokens exchange information (the only place they do)
      x = x + mlp(ln_2(x))    # each token thinks alone: Linear(d, 4d) -> GELU -> Linear(4d, d)

* :class:`GPT`: token + position embeddings, ``n_layer`` blocks, a final layer norm and an output
  layer that shares its weight with the token embedding (weight tying, as GPT-2).
* :func:`causal_self_attention`: the attention of a block when nobody asks for its weights
  (training, generation): the same projections, then PyTorch's fused kernel, which never
  builds the ``(T, T)`` matrix of weights (chapter 10 opens it up), or the book's core.
* :class:`GPTCache`: the keys and values of every block for generation, preallocated, so each
  new token runs through the model alone (``model(new_ids, cache=cache)``;
  :func:`attention_book.sampling.generate` with ``use_cache=True``).

Next to this module: GPT-2's weights in :mod:`attention_book.gpt2_weights`, the chapter's
training recipe in :mod:`attention_book.gpt_training`, what a GPT costs (parameters, FLOPs,
memory) in :mod:`attention_book.gpt_accounting`, sampling in :mod:`attention_book.sampling`, the
text and its tokenizer in :mod:`attention_book.corpus`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import validation as check
from .functional import scaled_dot_product_attention
from .hello_world import next_token_loss
from .multihead import MultiHeadAttention, merge_heads, split_heads

__all__ = [
    "GPTConfig",
    "MLP",
    "Block",
    "GPT",
    "GPTCache",
    "causal_self_attention",
]


# ----------------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------------


@dataclass
class GPTConfig:
    """The sizes of a GPT. The defaults are GPT-2 small (124M parameters).

    vocab_size: number of tokens (50,257 for GPT-2's byte-pair encoding).
    context_length: the longest input (number of position embeddings; GPT-2: 1024).
    d_model: the width of every vector in the residual stream (GPT-2 small: 768).
    n_layer: number of blocks.
    n_head: attention heads per block; must divide ``d_model``.
    dropout: dropout on the embeddings, the attention weights and both residual branches
        (GPT-2 trained with 0.1; 0.0 for inference and for short runs).
    bias: biases in the linear layers and layer norms (GPT-2: True).
    pre_norm: GPT-2's block, ``x + attn(ln_1(x))`` (True), or the original transformer's
        post-norm block, ``ln_1(x + attn(x))``, without a final layer norm (False; chapter 9
        trains both to compare them). Like ``norm_first`` of ``nn.TransformerEncoderLayer``.
    fused_attention: when the attention weights are not asked for, compute attention with
        PyTorch's fused kernel (True) or with the book's core (False); the same function either
        way (:func:`causal_self_attention`). Asked for, the weights always come from the core.
    """

    vocab_size: int = 50_257
    context_length: int = 1024
    d_model: int = 768
    n_layer: int = 12
    n_head: int = 12
    dropout: float = 0.0
    bias: bool = True
    pre_norm: bool = True
    fused_attention: bool = True

    def __post_init__(self):
        for name in ("vocab_size", "context_length", "d_model", "n_layer", "n_head"):
            setattr(self, name, check.positive_int(name, getattr(self, name)))
        self.dropout = check.probability("dropout", self.dropout)
        for name in ("bias", "pre_norm", "fused_attention"):
            setattr(self, name, check.boolean(name, getattr(self, name)))
        if self.d_model % self.n_head:
            divisors = [k for k in range(1, self.d_model + 1) if self.d_model % k == 0]
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_head={self.n_head}: every head gets "
                f"d_model // n_head columns; choose n_head from {divisors[:12]}"
            )


# ----------------------------------------------------------------------------------------------
# the key-value cache for generation
# ----------------------------------------------------------------------------------------------


class GPTCache:
    """The keys and values of every block for the tokens the model has seen, preallocated.

    Generating one token after another, the new token's query needs the keys and values of every
    earlier token, and with causal attention those never change. So each block stores them here
    once and the model runs only the *new* token through its layers: ``model(new_ids,
    cache=cache)`` (see :meth:`GPT.new_cache`).

    Two tensors, ``keys`` and ``values``, each ``(n_layer, B, H, capacity, head_dim)``, allocated
    at the first :meth:`store` (with the batch size, dtype and device of those keys); the first
    ``length`` positions are filled. A new token's keys are written into their place instead of
    being concatenated (``torch.cat`` would copy the whole cache at every token). ``capacity``
    is at most the model's context length: the position embeddings end there. The cache keeps no
    autograd graph (it is for inference; :func:`attention_book.sampling.generate` runs without
    gradients).
    """

    def __init__(self, n_layer: int, capacity: int):
        self.n_layer = check.positive_int("n_layer", n_layer)
        self.capacity = check.positive_int("capacity", capacity)
        self.keys: Optional[torch.Tensor] = None
        self.values: Optional[torch.Tensor] = None
        self.length = 0  # tokens stored in every layer

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        where = "empty" if self.keys is None else f"{tuple(self.keys.shape)}, {self.keys.dtype}, {self.keys.device}"
        return f"GPTCache({self.length} of {self.capacity} tokens, {self.n_layer} layers, {where})"

    def store(self, layer: int, keys: torch.Tensor, values: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Write the new tokens' ``keys`` and ``values`` ``(B, H, t, hd)`` of block ``layer`` after
        the ``length`` stored ones; return every stored key and value, ``(B, H, length + t, hd)``.

        ``length`` moves on only when the whole model has run (:meth:`advance`), so every block
        writes its new tokens at the same positions.
        """
        if self.keys is None:
            B, H, _, hd = keys.shape
            self.keys = keys.new_zeros(self.n_layer, B, H, self.capacity, hd)
            self.values = values.new_zeros(self.n_layer, B, H, self.capacity, hd)
        end = self.length + keys.shape[-2]
        self.keys[layer, :, :, self.length:end] = keys.detach()
        self.values[layer, :, :, self.length:end] = values.detach()
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]

    def advance(self, num_tokens: int) -> None:
        """The model has stored ``num_tokens`` new tokens in every block."""
        self.length += num_tokens

    def reset(self) -> None:
        """Forget every token (the memory stays allocated for the next sequence)."""
        self.length = 0


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------


def causal_self_attention(attn: MultiHeadAttention, x: torch.Tensor, fused: bool = True,
                          cache: Optional[GPTCache] = None, layer: int = 0) -> torch.Tensor:
    """``attn``'s causal self-attention of ``x`` ``(B, T, d)`` -> ``(B, T, d)``, without its weights.

    The projections of ``attn`` (a causal :class:`~attention_book.multihead.MultiHeadAttention`),
    then the scores, the causal mask, the softmax and the weighted sum of the values:

    * ``fused=True``: in one call of PyTorch's fused kernel,
      :func:`torch.nn.functional.scaled_dot_product_attention`, which never keeps the
      ``(B, H, T, T)`` weights (on a GPU it is several times faster and uses far less memory; on
      a CPU it is faster too). Chapter 10 opens this kernel up.
    * ``fused=False``: with the book's core,
      :func:`attention_book.functional.scaled_dot_product_attention`: what ``attn(x)`` computes.

    Both compute the same function (``tests/test_gpt.py`` compares them, with and without the
    cache, with dropout off); with dropout on, each draws its own random numbers.

    With a :class:`GPTCache`, ``x`` holds only the new tokens: their keys and values are stored
    in ``cache`` (block ``layer``) and their queries attend to every stored token, each new token
    to the tokens up to itself.

    No argument checks: :class:`GPT` checks its input once and calls this for every block at every
    step, where checks would only cost time.
    """
    H = attn.num_heads
    queries = split_heads(attn.W_query(x), H)  # (B, H, T, hd)
    keys = split_heads(attn.W_key(x), H)  # (B, H, T, hd)
    values = split_heads(attn.W_value(x), H)  # (B, H, T, hd)
    T = queries.shape[-2]
    past = 0
    if cache is not None:
        past = cache.length
        keys, values = cache.store(layer, keys, values)  # (B, H, past + T, hd): every token so far
    visible = None  # True = may attend; None: the plain causal mask (past == 0) or everything (T == 1)
    if past and T > 1:  # several new tokens after cached ones: token i sees keys up to past + i
        visible = torch.ones(T, past + T, dtype=torch.bool, device=x.device).tril(diagonal=past)
    if fused:
        dropout_p = attn.dropout.p if attn.training else 0.0
        context = F.scaled_dot_product_attention(  # (B, H, T, hd); is_causal: the kernel skips the future
            queries, keys, values, attn_mask=visible, dropout_p=dropout_p, is_causal=past == 0 and T > 1)
    else:
        hidden = None  # the book's masks: True = hidden
        if past == 0:
            hidden = attn.mask[:T, :T]
        elif visible is not None:
            hidden = ~visible
        context, _ = scaled_dot_product_attention(queries, keys, values, mask=hidden, dropout=attn.dropout)
    return attn.out_proj(merge_heads(context))  # (B, T, d)


class MLP(nn.Module):
    """The feed-forward part of a block: ``(B, T, d) -> (B, T, 4d) -> GELU -> (B, T, d)``.

    It works on every token separately (no token sees another here). GELU is the tanh
    approximation GPT-2 used (Hugging Face calls it ``gelu_new``); ``nn.GELU()`` without
    ``approximate="tanh"`` differs from it by less than 1e-3 (chapter 9 prints the largest gap).
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(config.d_model, 4 * config.d_model, bias=config.bias)  # GPT-2: mlp.c_fc
        self.gelu = nn.GELU(approximate="tanh")
        self.proj = nn.Linear(4 * config.d_model, config.d_model, bias=config.bias)  # GPT-2: mlp.c_proj
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(self.gelu(self.fc(x))))  # (B, T, d)


class Block(nn.Module):
    """One pre-norm transformer block: ``x + attn(ln_1(x))``, then ``+ mlp(ln_2(...))``.

    ``attn`` is the book's causal :class:`~attention_book.multihead.MultiHeadAttention` (chapter
    5) with biases on the query, key and value projections, as GPT-2 has them. The two
    additions are the *residual connections*: each sub-layer reads a normalised copy of the
    residual stream ``x`` and *adds* its result to it, so ``x`` itself is never replaced.

    ``forward(x)`` takes and returns ``(B, T, d_model)``; with ``return_weights=True`` it also
    returns the attention weights ``(B, n_head, T, T)``, computed by ``attn`` itself (the book's
    core). Without, the attention runs through :func:`causal_self_attention` (fused unless
    ``config.fused_attention=False``), which never builds them; ``cache`` and ``layer`` are
    passed on to it. With ``config.pre_norm=False`` the layer norms sit on the stream instead,
    after each addition (post-norm, the original transformer's order): ``x = ln_1(x +
    attn(x))``, then ``x = ln_2(x + mlp(x))``.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.pre_norm = config.pre_norm
        self.fused_attention = config.fused_attention
        d = config.d_model
        self.ln_1 = nn.LayerNorm(d, bias=config.bias)
        self.attn = MultiHeadAttention(d_in=d, d_out=d, context_length=config.context_length,
                                       dropout=config.dropout, num_heads=config.n_head,
                                       qkv_bias=config.bias, causal=True)
        if not config.bias:
            self.attn.out_proj = nn.Linear(d, d, bias=False)
        self.attn_dropout = nn.Dropout(config.dropout)  # on the branch, before it is added
        self.ln_2 = nn.LayerNorm(d, bias=config.bias)
        self.mlp = MLP(config)

    def attend(self, x: torch.Tensor, return_weights: bool, cache: Optional[GPTCache], layer: int):
        """``(attended, weights or None)``: the attention sub-layer on its input ``x``."""
        if return_weights:
            return self.attn(x, return_weights=True)  # (B, T, d), (B, H, T, T)
        return causal_self_attention(self.attn, x, self.fused_attention, cache, layer), None

    def forward(self, x: torch.Tensor, return_weights: bool = False, cache: Optional[GPTCache] = None,
                layer: int = 0):
        if not self.pre_norm:  # post-norm: normalise the stream itself after each addition
            attended, weights = self.attend(x, return_weights, cache, layer)
            x = self.ln_1(x + self.attn_dropout(attended))
            x = self.ln_2(x + self.mlp(x))
            return (x, weights) if return_weights else x
        attended, weights = self.attend(self.ln_1(x), return_weights, cache, layer)  # (B, T, d)
        x = x + self.attn_dropout(attended)  # tokens have exchanged information
        x = x + self.mlp(self.ln_2(x))  # each token processed on its own
        return (x, weights) if return_weights else x


class GPT(nn.Module):
    """A GPT: embeddings, ``n_layer`` pre-norm :class:`Block` s, a final layer norm, tied output layer.

    ``forward(idx)`` maps token ids ``(B, T)`` to logits ``(B, T, vocab_size)``: at every position
    a score for every possible next token. ``forward(idx, targets)`` returns ``(logits, loss)``
    (mean cross-entropy over all positions); ``return_weights=True`` appends the attention
    weights of every block, stacked as ``(n_layer, B, n_head, T, T)`` (computed only then).
    ``cache`` (from :meth:`new_cache`) runs only new tokens, after those the cache holds.
    ``validate=False`` skips the input checks: for a loop that checked its data once (training,
    generation), since checking that every id is in the vocabulary waits for the GPU.

    The weights start as GPT-2's did: normal with standard deviation 0.02, zero biases, and
    the two projections that write into the residual stream (``attn.out_proj``, ``mlp.proj``)
    scaled down by ``1 / sqrt(2 * n_layer)`` so the stream does not grow with depth. GPT-2's own
    weights load with :func:`attention_book.gpt2_weights.from_pretrained`.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}; "
                            "build one with GPTConfig(vocab_size=..., d_model=...)")
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.position_embedding = nn.Embedding(config.context_length, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        # pre-norm: the stream is a plain sum that grows with depth, normalise it once at the top;
        # post-norm: the last block's ln_2 already did
        self.ln_f = nn.LayerNorm(config.d_model, bias=config.bias) if config.pre_norm else nn.Identity()
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        # Weight tying (Press & Wolf 2017): the output layer scores token v by the dot product
        # with v's own embedding. One (V, d) matrix instead of two; GPT-2 does the same.
        self.lm_head.weight = self.token_embedding.weight
        self.apply(self._init_weights)
        for name, parameter in self.named_parameters():
            if name.endswith("out_proj.weight") or name.endswith("mlp.proj.weight"):
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def num_parameters(self, with_position_embedding: bool = True) -> int:
        """Number of parameters (the tied output layer counted once)."""
        total = sum(p.numel() for p in self.parameters())  # parameters() yields a tied one once
        return total if with_position_embedding else total - self.position_embedding.weight.numel()

    def new_cache(self, capacity: Optional[int] = None) -> GPTCache:
        """An empty :class:`GPTCache` for up to ``capacity`` tokens (default: the context length)."""
        capacity = self.config.context_length if capacity is None else check.positive_int("capacity", capacity)
        if capacity > self.config.context_length:
            raise ValueError(f"capacity={capacity} is longer than context_length={self.config.context_length}: "
                             "the model has no position embedding beyond it; pass capacity <= context_length")
        return GPTCache(self.config.n_layer, capacity)

    def check_inputs(self, idx, targets=None, cache=None) -> None:
        """Raise a clear TypeError / ValueError unless ``idx`` (and ``targets``, ``cache``) fit the model."""
        check.tensor("idx", idx, "(B, T)")
        if idx.dtype != torch.long:
            raise TypeError(f"idx must be a torch.long tensor of token ids, got dtype {idx.dtype}; "
                            "convert it with idx.long()")
        check.ndim("idx", idx, 2, "(B, T)")
        if idx.shape[1] == 0:
            raise ValueError(f"idx has shape {tuple(idx.shape)}: no tokens; give the model at least one")
        check.sequence_length("idx", idx.shape[1], self.config.context_length)
        check.same_device("idx", idx, "the model", self.token_embedding.weight)
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.config.vocab_size):
            raise ValueError(
                f"idx holds token ids from {int(idx.min())} to {int(idx.max())} but the model has "
                f"vocab_size={self.config.vocab_size}: encode the text with the model's own tokenizer"
            )
        if targets is not None:
            check.tensor("targets", targets, "(B, T)")
            if targets.shape != idx.shape:
                raise ValueError(f"targets have shape {tuple(targets.shape)} but idx {tuple(idx.shape)}: "
                                 "targets must be idx shifted by one token (one next token per position)")
        if cache is not None:
            if not isinstance(cache, GPTCache) or cache.n_layer != self.config.n_layer:
                raise TypeError(f"cache must be this model's GPTCache, got {cache!r}; make one with "
                                "model.new_cache()")
            if cache.length + idx.shape[1] > cache.capacity:
                raise ValueError(f"the cache holds {cache.length} of {cache.capacity} tokens and idx brings "
                                 f"{idx.shape[1]} more: call cache.reset() and run the last "
                                 f"{cache.capacity} tokens again (the window slides)")
            if cache.keys is not None and cache.keys.shape[1] != idx.shape[0]:
                raise ValueError(f"idx has a batch of {idx.shape[0]} sequences but the cache holds "
                                 f"{cache.keys.shape[1]}: use one cache per batch")

    def forward(self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None,
                return_weights: bool = False, cache: Optional[GPTCache] = None, validate: bool = True):
        if validate:
            self.check_inputs(idx, targets, cache)
            check.boolean("return_weights", return_weights)
            if return_weights and cache is not None:
                raise ValueError("return_weights=True with a cache: the cached path never builds the weights; "
                                 "run the whole sequence without a cache to look at them")
        past = 0 if cache is None else cache.length
        T = idx.shape[1]
        positions = torch.arange(past, past + T, device=idx.device)  # (T,)
        x = self.token_embedding(idx) + self.position_embedding(positions)  # (B, T, d) + (T, d)
        x = self.dropout(x)  # (B, T, d): the residual stream starts here
        all_weights = []
        for layer, block in enumerate(self.blocks):
            if return_weights:
                x, weights = block(x, return_weights=True)  # (B, T, d), (B, H, T, T)
                all_weights.append(weights)
            else:
                x = block(x, cache=cache, layer=layer)  # (B, T, d)
        if cache is not None:
            cache.advance(T)
        x = self.ln_f(x)  # (B, T, d)
        logits = self.lm_head(x)  # (B, T, V): one score per vocabulary token
        outputs = [logits]
        if targets is not None:
            outputs.append(next_token_loss(logits, targets))  # mean cross-entropy over all B * T positions
        if return_weights:
            outputs.append(torch.stack(all_weights))  # (n_layer, B, H, T, T)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
