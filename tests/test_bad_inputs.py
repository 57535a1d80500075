"""Every public constructor and forward pass, fed bad input: the right exception, a helpful message.

The rule (``attention_book.validation``): a wrong **type** raises ``TypeError``, a bad **value**
``ValueError``, and the message names the argument (and shows the value, and says how to fix it).

How to add rows (other modules' classes are welcome):

* a constructor: one line in ``CONSTRUCTORS`` -- the class, keyword arguments that work, and
  which of them are sizes (positive ints), probabilities and flags. The bad values below are
  tried for each (``3.0``, ``"3"``, ``True``, ``0``, ``-1`` for a size, and so on);
* anything else: ``Bad(id, call, error, argument)`` in ``CALLS``, where ``call`` is a function
  without arguments that does the bad thing, ``error`` is ``TypeError`` or ``ValueError`` and
  ``argument`` is the name the message must contain (``value``, optional, must appear too).

"Another device" is simulated with the ``meta`` device (tensors with a shape and no data), so
the table runs on a CPU-only machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import pytest
import torch

from attention_book.attention import SelfAttention, SelfAttentionParams, copy_weights
from attention_book.causal import CausalAttention, renormalise_masked
from attention_book.cross import CrossAttention, padded_softmax
from attention_book.data import build_vocabulary, encode
from attention_book.embedding import (
    TokenAndPositionEmbedding,
    bpe_decode,
    bpe_encode,
    count_pairs,
    merge_pair,
    next_token_windows,
    train_bpe,
)
from attention_book.corpus import CharTokenizer, ngram_loss, ngram_window_losses, train_and_held_out_text
from attention_book.functional import masked_softmax, scaled_dot_product_attention
from attention_book.gpt import GPT, GPTCache, GPTConfig
from attention_book.gpt2_weights import convert_gpt2_state_dict, from_pretrained, transformers_gpt2
from attention_book.gpt_accounting import (
    flops_per_token,
    matmul_ceiling,
    model_flops_utilization,
    parameter_breakdown,
    training_memory,
)
from attention_book.gpt_training import TrainingSettings, settings_for, train_gpt
from attention_book.masks import causal_mask
from attention_book.multihead import MultiHeadAttention, MultiHeadAttentionWrapper
from attention_book.sampling import apply_temperature, generate, sample_next, top_k_filter, top_p_filter
from attention_book.cost import causal_tile_fraction, decode_step_cost, generation_step_flops, kv_cache_bytes
from attention_book.gqa import GroupedQueryAttention, repeat_kv
from attention_book.kv_cache import KVCache, StaticKVCache
from attention_book.measure import Timing, compare, plan_for, regime, time_samples
from attention_book.positions import apply_rope, next_positions, positions_from_padding, rope_frequencies
from attention_book.scores import (
    additive_scores,
    attention_entropy,
    attention_scores,
    naive_softmax,
    scaled_attention_weights,
    soft_cap,
    stable_softmax,
    sum_normalize,
)
from attention_book.training import (
    choose_precision,
    held_out_loss,
    held_out_losses,
    held_out_windows,
    mean_with_error,
    random_starts,
    random_windows,
    training_loop,
    warmup_cosine,
)


@dataclass(frozen=True)
class Bad:
    id: str
    call: Callable[[], object]
    error: type
    argument: str
    value: Optional[str] = None


# ----------------------------------------------------------------- constructors
@dataclass(frozen=True)
class Constructor:
    cls: type
    good: Dict[str, object]
    sizes: Sequence[str] = ()
    probabilities: Sequence[str] = ()
    flags: Sequence[str] = ()
    optional: Sequence[str] = ()  # arguments for which None is a good value (a default)


CONSTRUCTORS: List[Constructor] = [
    Constructor(SelfAttention, dict(d_in=3, d_out_kq=2, d_out_v=4, qkv_bias=False),
                sizes=("d_in", "d_out_kq", "d_out_v"), flags=("qkv_bias",), optional=("d_out_v",)),
    Constructor(SelfAttentionParams, dict(d_in=3, d_out_kq=2, d_out_v=4, qkv_bias=False),
                sizes=("d_in", "d_out_kq", "d_out_v"), flags=("qkv_bias",), optional=("d_out_v",)),
    Constructor(CausalAttention, dict(d_in=3, d_out=2, context_length=6, dropout=0.0, qkv_bias=False),
                sizes=("d_in", "d_out", "context_length"), probabilities=("dropout",), flags=("qkv_bias",)),
    Constructor(CrossAttention, dict(d_in=3, d_out_kq=2, d_out_v=4, qkv_bias=False, d_context=5),
                sizes=("d_in", "d_out_kq", "d_out_v", "d_context"), flags=("qkv_bias",), optional=("d_context",)),
    Constructor(MultiHeadAttention, dict(d_in=3, d_out=4, context_length=6, dropout=0.0, num_heads=2,
                                         qkv_bias=False, causal=False, kdim=5),
                sizes=("d_in", "d_out", "context_length", "num_heads", "kdim"), probabilities=("dropout",),
                flags=("qkv_bias", "causal"), optional=("kdim",)),
    Constructor(MultiHeadAttentionWrapper, dict(d_in=3, d_out=4, context_length=6, dropout=0.0, num_heads=2,
                                                qkv_bias=False, causal=True),
                sizes=("d_in", "d_out", "context_length", "num_heads"), probabilities=("dropout",),
                flags=("qkv_bias", "causal")),
    Constructor(TokenAndPositionEmbedding, dict(vocab_size=10, context_length=4, embedding_dim=3),
                sizes=("vocab_size", "context_length", "embedding_dim")),
    # --- chapter 9
    Constructor(GPTConfig, dict(vocab_size=10, context_length=6, d_model=8, n_layer=1, n_head=1, dropout=0.0,
                                bias=True, pre_norm=True, fused_attention=True),
                sizes=("vocab_size", "context_length", "d_model", "n_layer", "n_head"), probabilities=("dropout",),
                flags=("bias", "pre_norm", "fused_attention")),
    Constructor(TrainingSettings, dict(n_layer=1, n_head=1, d_model=8, context_length=6, batch_size=2, steps=4,
                                       warmup=1, eval_every=2, eval_windows=1, dropout=0.0, fused_attention=True,
                                       compile=False),
                sizes=("n_layer", "n_head", "d_model", "context_length", "batch_size", "steps", "warmup",
                       "eval_every", "eval_windows"), probabilities=("dropout",), flags=("fused_attention", "compile")),
    Constructor(GPTCache, dict(n_layer=2, capacity=6), sizes=("n_layer", "capacity")),
    # --- chapter 10
    Constructor(GroupedQueryAttention, dict(d_in=4, d_out=4, context_length=6, dropout=0.0, num_heads=2,
                                            num_kv_heads=1, qkv_bias=False, causal=True, rope=True),
                sizes=("d_in", "d_out", "context_length", "num_heads", "num_kv_heads"),
                probabilities=("dropout",), flags=("qkv_bias", "causal", "rope"), optional=("num_kv_heads",)),
]

BAD_SIZES = [(3.0, TypeError), (2.5, TypeError), ("3", TypeError), (True, TypeError), (None, TypeError),
             (0, ValueError), (-1, ValueError)]
BAD_PROBABILITIES = [("0.1", TypeError), (None, TypeError), (False, TypeError), (1.0, ValueError),
                     (-0.1, ValueError), (float("nan"), ValueError)]
BAD_FLAGS = [(1, TypeError), ("yes", TypeError), (None, TypeError)]


def _constructor_rows() -> List[Bad]:
    rows = []
    for spec in CONSTRUCTORS:
        for names, bad_values in ((spec.sizes, BAD_SIZES), (spec.probabilities, BAD_PROBABILITIES),
                                  (spec.flags, BAD_FLAGS)):
            for name in names:
                for value, error in bad_values:
                    if value is None and name in spec.optional:
                        continue
                    kwargs = dict(spec.good, **{name: value})
                    rows.append(Bad(f"{spec.cls.__name__}({name}={value!r})",
                                    lambda cls=spec.cls, kwargs=kwargs: cls(**kwargs), error, name, repr(value)))
    return rows


def test_the_good_constructor_arguments_work():
    """Otherwise every row above would pass for the wrong reason."""
    for spec in CONSTRUCTORS:
        spec.cls(**spec.good)
        for name in spec.optional:
            spec.cls(**dict(spec.good, **{name: None}))


# ----------------------------------------------------------------- forward passes and functions
def _mha(**overrides):
    torch.manual_seed(0)
    kwargs = dict(d_in=4, d_out=4, context_length=6, dropout=0.0, num_heads=2) | overrides
    return MultiHeadAttention(**kwargs)


X = torch.zeros(2, 5, 4)  # (B, T, d_in) for the 4-wide modules
CONTEXT = torch.zeros(2, 7, 3)  # (B, T_kv, kdim=3)
META = torch.zeros(2, 5, 4, device="meta")


def _x_rows(name: str, module_factory: Callable[[], object], width: int, context_length: int,
            three_d_only: bool) -> List[Bad]:
    """The bad ``x`` every attention module must refuse."""
    rows = [
        Bad(f"{name}: x as a list", lambda: module_factory()([[0.0] * width]), TypeError, "x"),
        Bad(f"{name}: x of token ids", lambda: module_factory()(torch.zeros(1, 3, width, dtype=torch.long)),
            TypeError, "x"),
        Bad(f"{name}: x 4-D", lambda: module_factory()(torch.zeros(2, 1, 3, width)), ValueError, "x"),
        Bad(f"{name}: x 1-D", lambda: module_factory()(torch.zeros(width)), ValueError, "x"),
        Bad(f"{name}: x too wide", lambda: module_factory()(torch.zeros(1, 3, width + 1)), ValueError, "x",
            str(width + 1)),
        Bad(f"{name}: x float64", lambda: module_factory()(torch.zeros(1, 3, width, dtype=torch.float64)),
            TypeError, "x", "float64"),
        Bad(f"{name}: x on another device", lambda: module_factory()(torch.zeros(1, 3, width, device="meta")),
            ValueError, "x", "meta"),
        Bad(f"{name}: return_weights='yes'", lambda: module_factory()(torch.zeros(1, 3, width), return_weights="yes"),
            TypeError, "return_weights"),
    ]
    if context_length:
        rows.append(Bad(f"{name}: x longer than context_length",
                        lambda: module_factory()(torch.zeros(1, context_length + 1, width)), ValueError, "x",
                        f"context_length={context_length}"))
    if three_d_only:
        rows.append(Bad(f"{name}: x 2-D", lambda: module_factory()(torch.zeros(3, width)), ValueError, "x"))
    return rows


def _cross():
    torch.manual_seed(0)
    return CrossAttention(4, 2, 3, d_context=3)


def _embedding():
    torch.manual_seed(0)
    return TokenAndPositionEmbedding(vocab_size=10, context_length=4, embedding_dim=3)


Q, K, V = torch.zeros(2, 3, 4), torch.zeros(2, 5, 4), torch.zeros(2, 5, 6)


def _gpt():
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=10, context_length=6, d_model=8, n_layer=1, n_head=2))


IDS = torch.zeros(2, 5, dtype=torch.long)  # (B, T) token ids for the chapter 9 model
LOGITS = torch.zeros(2, 10)

CALLS: List[Bad] = [
    # --- chapter 4
    *_x_rows("SelfAttention", lambda: SelfAttention(4, 2), 4, 0, three_d_only=False),
    *_x_rows("SelfAttentionParams", lambda: SelfAttentionParams(4, 2), 4, 0, three_d_only=False),
    Bad("copy_weights: not attention modules", lambda: copy_weights(torch.nn.Linear(3, 2), SelfAttention(3, 2)),
        TypeError, "W_query"),
    Bad("copy_weights: other sizes", lambda: copy_weights(SelfAttention(3, 2), SelfAttention(3, 4)),
        ValueError, "W_query"),
    # --- chapter 5
    *_x_rows("MultiHeadAttention", lambda: _mha(), 4, 6, three_d_only=True),
    *_x_rows("MultiHeadAttentionWrapper", lambda: MultiHeadAttentionWrapper(4, 4, 6, 0.0, 2), 4, 6,
             three_d_only=True),
    Bad("MultiHeadAttention(d_out=5, num_heads=2)", lambda: _mha(d_out=5), ValueError, "num_heads"),
    Bad("MultiHeadAttention: context with causal=True", lambda: _mha(kdim=3)(X, CONTEXT), ValueError, "causal"),
    Bad("MultiHeadAttention: kdim module without context", lambda: _mha(kdim=3, causal=False)(X), ValueError,
        "kdim"),
    Bad("MultiHeadAttention: context as a list", lambda: _mha(kdim=3, causal=False)(X, CONTEXT.tolist()),
        TypeError, "context"),
    Bad("MultiHeadAttention: context too wide", lambda: _mha(kdim=3, causal=False)(X, torch.zeros(2, 7, 4)),
        ValueError, "context", "kdim=3"),
    Bad("MultiHeadAttention: context 2-D", lambda: _mha(kdim=3, causal=False)(X, torch.zeros(7, 3)),
        ValueError, "context"),
    Bad("MultiHeadAttention: context batch", lambda: _mha(kdim=3, causal=False)(X, torch.zeros(3, 7, 3)),
        ValueError, "context"),
    Bad("MultiHeadAttention: context float64",
        lambda: _mha(kdim=3, causal=False)(X, CONTEXT.double()), TypeError, "context", "float64"),
    Bad("MultiHeadAttention: context on another device",
        lambda: _mha(kdim=3, causal=False)(X, CONTEXT.to("meta")), ValueError, "context", "meta"),
    Bad("MultiHeadAttention: key_padding_mask float", lambda: _mha()(X, key_padding_mask=torch.zeros(2, 5)),
        TypeError, "key_padding_mask"),
    Bad("MultiHeadAttention: key_padding_mask list", lambda: _mha()(X, key_padding_mask=[[True] * 5] * 2),
        TypeError, "key_padding_mask"),
    Bad("MultiHeadAttention: key_padding_mask shape",
        lambda: _mha()(X, key_padding_mask=torch.zeros(2, 6, dtype=torch.bool)), ValueError, "key_padding_mask",
        "(2, 6)"),
    Bad("MultiHeadAttention: key_padding_mask of the queries in cross-attention",
        lambda: _mha(kdim=3, causal=False)(X, CONTEXT, key_padding_mask=torch.zeros(2, 5, dtype=torch.bool)),
        ValueError, "key_padding_mask"),
    Bad("MultiHeadAttention: attn_mask float", lambda: _mha()(X, attn_mask=torch.zeros(5, 5)), TypeError,
        "attn_mask"),
    Bad("MultiHeadAttention: attn_mask shape", lambda: _mha()(X, attn_mask=causal_mask(6)), ValueError,
        "attn_mask", "(6, 6)"),
    # --- chapter 6
    *[row for row in _x_rows("CrossAttention", lambda: lambda x, **kw: _cross()(x, torch.zeros(1, 2, 3), **kw),
                             4, 0, three_d_only=False)
      if "1-D" not in row.id],  # (a 1-D x meets the 3-D context: that error names both)
    Bad("CrossAttention: context as a list", lambda: _cross()(torch.zeros(5, 4), [[0.0] * 3]), TypeError,
        "context"),
    Bad("CrossAttention: context too wide", lambda: _cross()(torch.zeros(5, 4), torch.zeros(7, 4)), ValueError,
        "context", "d_context=3"),
    Bad("CrossAttention: context batch", lambda: _cross()(torch.zeros(2, 5, 4), torch.zeros(3, 7, 3)), ValueError,
        "context"),
    Bad("CrossAttention: context float64", lambda: _cross()(torch.zeros(5, 4), torch.zeros(7, 3).double()),
        TypeError, "context"),
    Bad("CrossAttention: context on another device",
        lambda: _cross()(torch.zeros(5, 4), torch.zeros(7, 3, device="meta")), ValueError, "context", "meta"),
    Bad("CrossAttention: key_padding_mask float",
        lambda: _cross()(torch.zeros(5, 4), torch.zeros(7, 3), key_padding_mask=torch.zeros(7)), TypeError,
        "key_padding_mask"),
    Bad("CrossAttention: key_padding_mask shape",
        lambda: _cross()(torch.zeros(5, 4), torch.zeros(7, 3), key_padding_mask=torch.zeros(5, dtype=torch.bool)),
        ValueError, "key_padding_mask"),
    Bad("padded_softmax: mask float", lambda: padded_softmax(torch.zeros(2, 3, 4), torch.zeros(2, 4)),
        TypeError, "key_padding_mask"),
    Bad("padded_softmax: mask shape",
        lambda: padded_softmax(torch.zeros(2, 3, 4), torch.zeros(2, 3, dtype=torch.bool)), ValueError,
        "key_padding_mask"),
    # --- chapter 7
    *_x_rows("CausalAttention", lambda: CausalAttention(4, 2, 6), 4, 6, three_d_only=True),
    Bad("renormalise_masked: hide float", lambda: renormalise_masked(torch.zeros(3, 3), torch.zeros(3, 3)),
        TypeError, "hide"),
    Bad("renormalise_masked: hide shape", lambda: renormalise_masked(torch.zeros(3, 3), causal_mask(4)),
        ValueError, "hide"),
    # --- chapter 1
    Bad("TokenAndPositionEmbedding: token_ids float", lambda: _embedding()(torch.zeros(1, 3)), TypeError,
        "token_ids"),
    Bad("TokenAndPositionEmbedding: token_ids list", lambda: _embedding()([1, 2]), TypeError, "token_ids"),
    Bad("TokenAndPositionEmbedding: token_ids 3-D", lambda: _embedding()(torch.zeros(1, 1, 2, dtype=torch.long)),
        ValueError, "token_ids"),
    Bad("TokenAndPositionEmbedding: too long", lambda: _embedding()(torch.zeros(1, 5, dtype=torch.long)),
        ValueError, "token_ids", "context_length=4"),
    Bad("TokenAndPositionEmbedding: id out of range", lambda: _embedding()(torch.tensor([[0, 10]])), ValueError,
        "token_ids", "vocab_size=10"),
    Bad("TokenAndPositionEmbedding: another device",
        lambda: _embedding()(torch.zeros(1, 3, dtype=torch.long, device="meta")), ValueError, "token_ids", "meta"),
    Bad("build_vocabulary: not a str", lambda: build_vocabulary(["a", "b"]), TypeError, "text"),
    Bad("build_vocabulary: no words", lambda: build_vocabulary(" , "), ValueError, "text"),
    Bad("encode: not a str", lambda: encode(3, {"a": 0}), TypeError, "text"),
    Bad("count_pairs: a str", lambda: count_pairs("abc"), TypeError, "ids"),
    Bad("count_pairs: float tensor", lambda: count_pairs(torch.zeros(3)), TypeError, "ids"),
    Bad("merge_pair: pair of three", lambda: merge_pair([1, 2], (1, 2, 3), 256), TypeError, "pair"),
    Bad("merge_pair: new_id float", lambda: merge_pair([1, 2], (1, 2), 256.0), TypeError, "new_id"),
    Bad("train_bpe: bytes", lambda: train_bpe(b"abab", 2), TypeError, "text"),
    Bad("train_bpe: num_merges 0", lambda: train_bpe("abab", 0), ValueError, "num_merges"),
    Bad("bpe_encode: merges list", lambda: bpe_encode("ab", [((97, 98), 256)]), TypeError, "merges"),
    Bad("bpe_encode: merges numbered wrongly", lambda: bpe_encode("ab", {(97, 98): 300}), ValueError,
        "merges", "300"),
    Bad("bpe_decode: unknown id", lambda: bpe_decode([256], {}), ValueError, "ids", "256"),
    Bad("next_token_windows: too short", lambda: next_token_windows([1, 2, 3], context_length=3),
        ValueError, "context_length", "3"),
    Bad("next_token_windows: stride 0", lambda: next_token_windows([1, 2, 3], context_length=1, stride=0),
        ValueError, "stride"),
    Bad("next_token_windows: float ids", lambda: next_token_windows([1.0, 2.0], context_length=1),
        TypeError, "token_ids"),
    # --- chapters 2 and 3
    Bad("attention_scores: list", lambda: attention_scores([[1.0]], torch.zeros(2, 1)), TypeError, "queries"),
    Bad("attention_scores: int keys", lambda: attention_scores(torch.zeros(2, 1), torch.zeros(2, 1).long()),
        TypeError, "keys"),
    Bad("attention_scores: d_k", lambda: attention_scores(torch.zeros(2, 3), torch.zeros(2, 4)), ValueError,
        "d_k"),
    Bad("sum_normalize: list", lambda: sum_normalize([1.0, 2.0]), TypeError, "scores"),
    Bad("naive_softmax: dim", lambda: naive_softmax(torch.zeros(2, 3), dim=2), ValueError, "dim"),
    Bad("stable_softmax: temperature str", lambda: stable_softmax(torch.zeros(3), temperature="hot"), TypeError,
        "temperature"),
    Bad("stable_softmax: temperature 0", lambda: stable_softmax(torch.zeros(3), temperature=0.0), ValueError,
        "temperature"),
    Bad("scaled_attention_weights: d_k", lambda: scaled_attention_weights(torch.zeros(2, 4), torch.zeros(3, 5)),
        ValueError, "d_k"),
    Bad("attention_entropy: negative", lambda: attention_entropy(torch.tensor([0.5, -0.5])), ValueError,
        "weights"),
    Bad("attention_entropy: dim str", lambda: attention_entropy(torch.ones(3), dim="-1"), TypeError, "dim"),
    Bad("additive_scores: v list", lambda: additive_scores(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3, 4),
                                                           torch.zeros(3, 4), [0.0] * 4), TypeError, "v"),
    Bad("additive_scores: W_query width", lambda: additive_scores(torch.zeros(2, 3), torch.zeros(2, 3),
                                                                  torch.zeros(5, 4), torch.zeros(3, 4),
                                                                  torch.zeros(4)), ValueError, "W_query", "(5, 4)"),
    Bad("additive_scores: v 2-D", lambda: additive_scores(torch.zeros(2, 3), torch.zeros(2, 3), torch.zeros(3, 4),
                                                          torch.zeros(3, 4), torch.zeros(1, 4)), ValueError, "v"),
    Bad("additive_scores: one query 1-D", lambda: additive_scores(torch.zeros(3), torch.zeros(2, 3),
                                                                  torch.zeros(3, 4), torch.zeros(3, 4),
                                                                  torch.zeros(4)), ValueError, "queries"),
    Bad("soft_cap: cap 0", lambda: soft_cap(torch.zeros(3), 0.0), ValueError, "cap"),
    Bad("soft_cap: cap str", lambda: soft_cap(torch.zeros(3), "50"), TypeError, "cap"),
    Bad("soft_cap: int scores", lambda: soft_cap(torch.zeros(3, dtype=torch.long), 50.0), TypeError, "scores"),
    # --- chapter 9
    Bad("GPT: config not a GPTConfig", lambda: GPT(dict(vocab_size=10)), TypeError, "config"),
    Bad("GPTConfig: d_model not divisible by n_head",
        lambda: GPTConfig(vocab_size=10, context_length=6, d_model=8, n_layer=1, n_head=3), ValueError, "n_head", "3"),
    Bad("GPT: idx float", lambda: _gpt()(IDS.float()), TypeError, "idx", "float32"),
    Bad("GPT: idx list", lambda: _gpt()([[1, 2]]), TypeError, "idx"),
    Bad("GPT: idx 3-D", lambda: _gpt()(IDS[None]), ValueError, "idx"),
    Bad("GPT: idx too long", lambda: _gpt()(torch.zeros(1, 7, dtype=torch.long)), ValueError, "idx",
        "context_length=6"),
    Bad("GPT: idx out of the vocabulary", lambda: _gpt()(torch.tensor([[0, 10]])), ValueError, "idx", "vocab_size=10"),
    Bad("GPT: idx on another device", lambda: _gpt()(IDS.to("meta")), ValueError, "idx", "meta"),
    Bad("GPT: targets of another shape", lambda: _gpt()(IDS, IDS[:, :3]), ValueError, "targets", "(2, 3)"),
    Bad("GPT: return_weights='yes'", lambda: _gpt()(IDS, return_weights="yes"), TypeError, "return_weights"),
    Bad("convert_gpt2_state_dict: a list", lambda: convert_gpt2_state_dict([1], n_head=12), TypeError, "state_dict"),
    Bad("convert_gpt2_state_dict: n_head=0", lambda: convert_gpt2_state_dict({}, n_head=0), ValueError, "n_head"),
    Bad("convert_gpt2_state_dict: no wte", lambda: convert_gpt2_state_dict({}, n_head=1), ValueError, "wte.weight"),
    Bad("from_pretrained: unknown name", lambda: from_pretrained("gpt3"), ValueError, "name", "'gpt3'"),
    Bad("from_pretrained: timeout=0", lambda: from_pretrained("gpt2", timeout=0), ValueError, "timeout"),
    Bad("transformers_gpt2: unknown name", lambda: transformers_gpt2("gpt3"), ValueError, "name", "'gpt3'"),
    Bad("GPT.new_cache: longer than the context", lambda: _gpt().new_cache(capacity=7), ValueError, "capacity", "7"),
    Bad("GPT: cache of another model", lambda: _gpt()(IDS, cache=GPTCache(3, 6)), TypeError, "cache"),
    Bad("GPT: cache too full", lambda: _gpt()(torch.zeros(1, 5, dtype=torch.long), cache=_gpt().new_cache(4)),
        ValueError, "cache", "0 of 4"),
    Bad("GPT: weights with a cache", lambda: _gpt()(IDS, cache=_gpt().new_cache(), return_weights=True), ValueError,
        "return_weights"),
    Bad("train_gpt: settings a dict", lambda: train_gpt(_gpt(), IDS[0], IDS[0], {}), TypeError, "settings"),
    Bad("train_gpt: ids beyond the vocabulary", lambda: train_gpt(_gpt(), torch.arange(20), torch.arange(20) % 10,
                                                                  TrainingSettings(context_length=6)),
        ValueError, "train_ids", "vocab_size=10"),
    Bad("flops_per_token: a dict", lambda: flops_per_token({}), TypeError, "GPTConfig"),
    Bad("flops_per_token: context_length=0", lambda: flops_per_token(_gpt(), 0), ValueError, "context_length"),
    Bad("matmul_ceiling: integer dtype", lambda: matmul_ceiling("cpu", dtype=torch.int32), TypeError, "dtype"),
    Bad("matmul_ceiling: size=0", lambda: matmul_ceiling("cpu", size=0), ValueError, "size"),
    Bad("model_flops_utilization: ceiling=0", lambda: model_flops_utilization(1.0, 1.0, 0.0), ValueError, "ceiling"),
    Bad("training_memory: not a GPT", lambda: training_memory(torch.nn.Linear(2, 2), IDS, IDS), TypeError, "GPT"),
    Bad("choose_precision: unknown", lambda: choose_precision("cpu", "fp8"), ValueError, "precision", "'fp8'"),
    Bad("choose_precision: an int device", lambda: choose_precision(3), TypeError, "device"),
    Bad("training_loop: precision a str", lambda: training_loop(_gpt(), None, 1, lambda step: None, precision="fp16"),
        TypeError, "precision"),
    Bad("training_loop: grad_scaler without methods", lambda: training_loop(_gpt(), None, 1, lambda step: None,
                                                                            grad_scaler=3), TypeError, "grad_scaler"),
    Bad("held_out_losses: max_windows=0", lambda: held_out_losses(_gpt(), torch.arange(20) % 10, 4, max_windows=0),
        ValueError, "max_windows"),
    Bad("mean_with_error: one value", lambda: mean_with_error([1.0]), ValueError, "values"),
    Bad("random_starts: steps=0", lambda: random_starts(IDS[0], 1, 2, 0), ValueError, "steps"),
    Bad("random_starts: float ids", lambda: random_starts(IDS[0].float(), 1, 2, 3), TypeError, "ids"),
    Bad("held_out_windows: too short", lambda: held_out_windows(5, 8), ValueError, "context_length=8"),
    Bad("ngram_window_losses: order=3", lambda: ngram_window_losses(IDS[0], IDS[0], 10, 3, 2), ValueError, "order"),
    Bad("parameter_breakdown: a dict", lambda: parameter_breakdown({}), TypeError, "GPTConfig"),
    Bad("TrainingSettings.replace: unknown field", lambda: TrainingSettings().replace(colour=1), ValueError, "colour"),
    Bad("settings_for: an int", lambda: settings_for(3), TypeError, "device"),
    Bad("settings_for: an unknown name", lambda: settings_for("gpu"), ValueError, "device", "'gpu'"),
    Bad("top_k_filter: k=0", lambda: top_k_filter(LOGITS, 0), ValueError, "k"),
    Bad("top_k_filter: k=2.5", lambda: top_k_filter(LOGITS, 2.5), TypeError, "k", "2.5"),
    Bad("top_k_filter: integer logits", lambda: top_k_filter(LOGITS.long(), 2), TypeError, "logits"),
    Bad("top_p_filter: p=0", lambda: top_p_filter(LOGITS, 0.0), ValueError, "p must", "0.0"),
    Bad("top_p_filter: p=1.5", lambda: top_p_filter(LOGITS, 1.5), ValueError, "p must", "1.5"),
    Bad("top_p_filter: p as a string", lambda: top_p_filter(LOGITS, "0.9"), TypeError, "p must", "'0.9'"),
    Bad("apply_temperature: negative", lambda: apply_temperature(LOGITS, -1.0), ValueError, "temperature", "-1.0"),
    Bad("apply_temperature: a string", lambda: apply_temperature(LOGITS, "hot"), TypeError, "temperature"),
    Bad("sample_next: 3-D logits", lambda: sample_next(LOGITS[None]), ValueError, "logits"),
    Bad("sample_next: generator a seed", lambda: sample_next(LOGITS, generator=0), TypeError, "generator"),
    Bad("generate: idx float", lambda: generate(_gpt(), IDS.float(), 2), TypeError, "idx"),
    Bad("generate: max_new_tokens=0", lambda: generate(_gpt(), IDS, 0), ValueError, "max_new_tokens"),
    Bad("generate: use_cache='yes'", lambda: generate(_gpt(), IDS, 2, use_cache="yes"), TypeError, "use_cache"),
    Bad("CharTokenizer: not a str", lambda: CharTokenizer(["a", "b"]), TypeError, "text"),
    Bad("CharTokenizer: unknown character", lambda: CharTokenizer("ab").encode("abc"), ValueError, "text", "'c'"),
    Bad("ngram_loss: order=3", lambda: ngram_loss(IDS[0], IDS[0], 10, order=3), ValueError, "order", "3"),
    Bad("train_and_held_out_text: unknown novel", lambda: train_and_held_out_text("ulysses"), ValueError,
        "held_out", "'ulysses'"),
    Bad("random_windows: float ids", lambda: random_windows(IDS[0].float(), 1, 2), TypeError, "ids"),
    Bad("random_windows: too short", lambda: random_windows(IDS[0], 1, 5), ValueError, "ids", "context_length=5"),
    Bad("random_windows: batch_size=0", lambda: random_windows(IDS[0], 0, 2), ValueError, "batch_size"),
    Bad("held_out_loss: context_length=0", lambda: held_out_loss(_gpt(), IDS[0], 0), ValueError, "context_length"),
    Bad("training_loop: steps=0", lambda: training_loop(_gpt(), None, 0, lambda step: None), ValueError, "steps"),
    Bad("warmup_cosine: warmup > steps", lambda: warmup_cosine(5, 10), ValueError, "warmup", "10"),
    # --- shared helpers
    Bad("causal_mask(0)", lambda: causal_mask(0), ValueError, "num_tokens"),
    Bad("causal_mask(2.0)", lambda: causal_mask(2.0), TypeError, "num_tokens"),
    Bad("masked_softmax: mask float", lambda: masked_softmax(torch.zeros(2, 3), torch.zeros(2, 3)), TypeError,
        "mask"),
    Bad("masked_softmax: mask shape", lambda: masked_softmax(torch.zeros(2, 3), causal_mask(3)), ValueError,
        "mask"),
    Bad("scaled_dot_product_attention: value on another device",
        lambda: scaled_dot_product_attention(Q, K, V.to("meta")), ValueError, "value", "meta"),
    Bad("scaled_dot_product_attention: key float64", lambda: scaled_dot_product_attention(Q, K.double(), V),
        TypeError, "key"),
    Bad("scaled_dot_product_attention: mask shape",
        lambda: scaled_dot_product_attention(Q, K, V, mask=causal_mask(3)), ValueError, "mask"),
    Bad("scaled_dot_product_attention: dropout float", lambda: scaled_dot_product_attention(Q, K, V, dropout=0.1),
        TypeError, "dropout"),
    # --- chapter 10: grouped-query attention, rotary positions, costs, timing
    *_x_rows("GroupedQueryAttention", lambda: GroupedQueryAttention(4, 4, 6, 0.0, 2, num_kv_heads=1), 4, 6,
             three_d_only=True),
    Bad("GroupedQueryAttention(num_heads=6, num_kv_heads=4)",
        lambda: GroupedQueryAttention(4, 6, 6, 0.0, 6, num_kv_heads=4),
        ValueError, "num_kv_heads", "4"),
    Bad("GroupedQueryAttention(rope=True, odd head_dim)", lambda: GroupedQueryAttention(4, 6, 6, 0.0, 2, rope=True),
        ValueError, "head_dim", "3"),
    Bad("GroupedQueryAttention: cache a dict", lambda: GroupedQueryAttention(4, 4, 6, 0.0, 2)(X, cache={}),
        TypeError, "cache"),
    Bad("GroupedQueryAttention: key_padding_mask shape",
        lambda: GroupedQueryAttention(4, 4, 6, 0.0, 2)(X, key_padding_mask=torch.zeros(2, 4, dtype=torch.bool)),
        ValueError, "key_padding_mask"),
    Bad("repeat_kv: groups 0", lambda: repeat_kv(torch.zeros(1, 2, 3, 4), 0), ValueError, "groups"),
    Bad("repeat_kv: 3-D", lambda: repeat_kv(torch.zeros(2, 3, 4), 2), ValueError, "keys_or_values"),
    Bad("rope_frequencies(head_dim=3)", lambda: rope_frequencies(3), ValueError, "head_dim", "3"),
    Bad("rope_frequencies(base='10000')", lambda: rope_frequencies(4, base="10000"), TypeError, "base"),
    Bad("apply_rope: positions float", lambda: apply_rope(torch.zeros(3, 4), torch.zeros(3)), TypeError,
        "positions"),
    Bad("apply_rope: positions of another length", lambda: apply_rope(torch.zeros(3, 4), torch.arange(2)),
        ValueError, "positions"),
    Bad("apply_rope: x of ints", lambda: apply_rope(torch.zeros(3, 4, dtype=torch.long), torch.arange(3)),
        TypeError, "x"),
    Bad("positions_from_padding: float mask", lambda: positions_from_padding(torch.zeros(2, 3)), TypeError,
        "key_padding_mask"),
    Bad("next_positions: num_new 0", lambda: next_positions(torch.arange(3), 0), ValueError, "num_new"),
    Bad("kv_cache_bytes: num_kv_heads 5 of 4", lambda: kv_cache_bytes(1, 8, 16, 4, num_kv_heads=5), ValueError,
        "num_kv_heads", "5"),
    Bad("decode_step_cost: num_layers 0", lambda: decode_step_cost(1, 8, 16, 4, num_layers=0), ValueError,
        "num_layers"),
    Bad("time_samples: repeats 0", lambda: time_samples(lambda: None, repeats=0), ValueError, "repeats"),
    Bad("compare: a list", lambda: compare([lambda: None]), TypeError, "calls"),
    Bad("Timing: no samples", lambda: Timing(()), ValueError, "sample"),
    # --- chapter 10 on a GPU: plans, regimes, per-part counts, preallocated caches
    Bad("time_samples: cuda_events on a CPU", lambda: time_samples(lambda: None, timer="cuda_events"),
        ValueError, "timer"),
    Bad("plan_for: capability '8.0'", lambda: plan_for("cuda", capability="8.0"), TypeError, "capability"),
    Bad("plan_for: memory_gib 0", lambda: plan_for("cuda", capability=(8, 0), memory_gib=0), ValueError,
        "memory_gib"),
    Bad("regime: seconds 0", lambda: regime(0.0, 1.0, 1.0), ValueError, "seconds"),
    Bad("regime: flops '1'", lambda: regime(1.0, "1", 1.0), TypeError, "flops"),
    Bad("generation_step_flops: mlp_ratio -1", lambda: generation_step_flops(8, 16, 4, True, mlp_ratio=-1),
        ValueError, "mlp_ratio"),
    Bad("causal_tile_fraction: key_block 0", lambda: causal_tile_fraction(8, 4, 0), ValueError, "key_block"),
    Bad("StaticKVCache(max_tokens=0)", lambda: StaticKVCache(0), ValueError, "max_tokens"),
    Bad("StaticKVCache: full", lambda: StaticKVCache(2).append(torch.zeros(1, 1, 3, 2), torch.zeros(1, 1, 3, 2)),
        ValueError, "max_tokens=2"),
    Bad("KVCache.truncate: beyond the cache", lambda: KVCache().truncate(1), ValueError, "num_tokens"),
]

ROWS = _constructor_rows() + CALLS


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input_gets_the_right_error_naming_the_argument(row: Bad):
    with pytest.raises((TypeError, ValueError)) as info:
        row.call()
    message = str(info.value)
    assert type(info.value) is row.error, f"{type(info.value).__name__} instead of {row.error.__name__}: {message}"
    assert row.argument in message, f"the message does not name {row.argument!r}: {message}"
    if row.value is not None:
        assert row.value in message, f"the message does not show {row.value!r}: {message}"


def test_row_ids_are_unique():
    ids = [row.id for row in ROWS]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})
