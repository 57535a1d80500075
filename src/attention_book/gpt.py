"""Chapter 9: a GPT built from the book's parts, and GPT-2's weights inside it.

* :class:`GPTConfig`: the sizes of a GPT (vocabulary, context length, width, layers, heads).
* :class:`Block`: one pre-norm transformer block. The attention in it *is* chapter 5's causal
  :class:`~attention_book.multihead.MultiHeadAttention`; around it a layer norm before
  attention and before the MLP, and two residual connections::

      x = x + attn(ln_1(x))   # tokens exchange information (the only place they do)
      x = x + mlp(ln_2(x))    # each token thinks alone: Linear(d, 4d) -> GELU -> Linear(4d, d)

* :class:`GPT`: token + position embeddings, ``n_layer`` blocks, a final layer norm and an output
  layer that shares its weight with the token embedding (weight tying, as GPT-2).
  ``GPT.from_gpt2_state_dict(state_dict, n_head)`` fills it with a Hugging Face GPT-2 state dict
  (``GPT2LMHeadModel.state_dict()``, or a checkpoint file's keys without ``transformer.``) and
  gives the same logits as ``transformers``; ``GPT.from_pretrained("gpt2")`` downloads OpenAI's
  124M-parameter checkpoint where the internet is reachable (e.g. Colab).
* The chapter's training recipe: :func:`settings_for` picks a model and a budget for the device
  (a small one on a CPU, a larger one on a GPU) and :func:`train_gpt` trains it with the loop
  every chapter shares (:func:`attention_book.training.training_loop`).

Sampling from the model (greedy, temperature, top-k, top-p, ``generate``) lives in
:mod:`attention_book.sampling`; the chapter's text and its character tokenizer in
:mod:`attention_book.corpus`.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Mapping, Optional, Tuple

import torch
import torch.nn as nn

from . import validation as check
from .hello_world import next_token_loss
from .multihead import MultiHeadAttention
from .training import adamw, held_out_loss, random_windows, training_loop, warmup_cosine

__all__ = [
    "GPTConfig",
    "Block",
    "GPT",
    "GPT2_CONFIGS",
    "convert_gpt2_state_dict",
    "read_safetensors",
    "TrainingSettings",
    "CPU_SETTINGS",
    "GPU_SETTINGS",
    "PRE_POST_SETTINGS",
    "settings_for",
    "GPTTrainResult",
    "train_gpt",
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
    """

    vocab_size: int = 50_257
    context_length: int = 1024
    d_model: int = 768
    n_layer: int = 12
    n_head: int = 12
    dropout: float = 0.0
    bias: bool = True
    pre_norm: bool = True

    def __post_init__(self):
        for name in ("vocab_size", "context_length", "d_model", "n_layer", "n_head"):
            setattr(self, name, check.positive_int(name, getattr(self, name)))
        self.dropout = check.probability("dropout", self.dropout)
        self.bias = check.boolean("bias", self.bias)
        self.pre_norm = check.boolean("pre_norm", self.pre_norm)
        if self.d_model % self.n_head:
            divisors = [k for k in range(1, self.d_model + 1) if self.d_model % k == 0]
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_head={self.n_head}: every head gets "
                f"d_model // n_head columns; choose n_head from {divisors[:12]}"
            )


#: the four GPT-2 sizes OpenAI released (Radford et al. 2019), as Hugging Face names them
GPT2_CONFIGS: Dict[str, Dict[str, int]] = {
    "gpt2": dict(n_layer=12, n_head=12, d_model=768),  # 124M parameters
    "gpt2-medium": dict(n_layer=24, n_head=16, d_model=1024),  # 350M
    "gpt2-large": dict(n_layer=36, n_head=20, d_model=1280),  # 774M
    "gpt2-xl": dict(n_layer=48, n_head=25, d_model=1600),  # 1558M
}


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------


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
    returns the attention weights ``(B, n_head, T, T)``. With ``config.pre_norm=False`` the layer
    norms sit on the stream instead, after each addition (post-norm, the original transformer's
    order): ``x = ln_1(x + attn(x))``, then ``x = ln_2(x + mlp(x))``.
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.pre_norm = config.pre_norm
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

    def forward(self, x: torch.Tensor, return_weights: bool = False):
        if not self.pre_norm:  # post-norm: normalise the stream itself after each addition
            attended, weights = self.attn(x, return_weights=True)
            x = self.ln_1(x + self.attn_dropout(attended))
            x = self.ln_2(x + self.mlp(x))
            return (x, weights) if return_weights else x
        attended, weights = self.attn(self.ln_1(x), return_weights=True)  # (B, T, d), (B, H, T, T)
        x = x + self.attn_dropout(attended)  # tokens have exchanged information
        x = x + self.mlp(self.ln_2(x))  # each token processed on its own
        return (x, weights) if return_weights else x


class GPT(nn.Module):
    """A GPT: embeddings, ``n_layer`` pre-norm :class:`Block` s, a final layer norm, tied output layer.

    ``forward(idx)`` maps token ids ``(B, T)`` to logits ``(B, T, vocab_size)``: at every position
    a score for every possible next token. ``forward(idx, targets)`` returns ``(logits, loss)``
    (mean cross-entropy over all positions); ``return_weights=True`` appends the attention
    weights of every block, stacked as ``(n_layer, B, n_head, T, T)``.

    The weights start as GPT-2's did: normal with standard deviation 0.02, zero biases, and
    the two projections that write into the residual stream (``attn.out_proj``, ``mlp.proj``)
    scaled down by ``1 / sqrt(2 * n_layer)`` so the stream does not grow with depth.
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

    def check_inputs(self, idx, targets=None) -> None:
        """Raise a clear TypeError / ValueError unless ``idx`` (and ``targets``) fit the model."""
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

    def forward(self, idx: torch.Tensor, targets: Optional[torch.Tensor] = None,
                return_weights: bool = False):
        self.check_inputs(idx, targets)
        check.boolean("return_weights", return_weights)
        T = idx.shape[1]
        positions = torch.arange(T, device=idx.device)  # (T,)
        x = self.token_embedding(idx) + self.position_embedding(positions)  # (B, T, d) + (T, d)
        x = self.dropout(x)  # (B, T, d): the residual stream starts here
        all_weights = []
        for block in self.blocks:
            x, weights = block(x, return_weights=True)  # (B, T, d), (B, H, T, T)
            all_weights.append(weights)
        x = self.ln_f(x)  # (B, T, d)
        logits = self.lm_head(x)  # (B, T, V): one score per vocabulary token
        outputs = [logits]
        if targets is not None:
            outputs.append(next_token_loss(logits, targets))  # mean cross-entropy over all B * T positions
        if return_weights:
            outputs.append(torch.stack(all_weights))  # (n_layer, B, H, T, T)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    # ------------------------------------------------------------------------------------------
    # GPT-2's weights
    # ------------------------------------------------------------------------------------------

    @classmethod
    def from_gpt2_state_dict(cls, state_dict: Mapping[str, torch.Tensor], n_head: int) -> "GPT":
        """The book's GPT holding the weights of a Hugging Face GPT-2 ``state_dict``.

        ``state_dict`` as ``GPT2LMHeadModel.state_dict()`` returns it (keys ``transformer.h.0...``
        and ``lm_head.weight``) or as the checkpoint files store it (keys ``h.0...``, no output
        layer). The sizes are read from the shapes; ``n_head`` cannot be (GPT-2 small has 12).
        Buffers such as ``attn.bias`` and ``attn.masked_bias`` (old causal masks) are ignored.
        The model is built on the device and in the dtype of the state dict, in eval mode.
        """
        config, converted = convert_gpt2_state_dict(state_dict, n_head)
        reference = converted["token_embedding.weight"]
        with torch.device(reference.device):
            model = cls(config)
        model = model.to(reference.dtype)
        missing, unexpected = model.load_state_dict(converted, strict=False)
        not_buffers = [key for key in missing if not key.endswith("attn.mask")]  # masks: built, not loaded
        if not_buffers or unexpected:  # convert_gpt2_state_dict makes every weight: a bug if not
            raise RuntimeError(f"GPT-2 conversion left {not_buffers + unexpected} unmatched")
        return model.eval()

    @classmethod
    def from_pretrained(cls, name: str = "gpt2", timeout: float = 10.0) -> "GPT":
        """Download OpenAI's GPT-2 ``name`` (``"gpt2"`` = 124M parameters) and load it.

        With ``transformers`` installed (Colab has it) the weights come through
        ``GPT2LMHeadModel.from_pretrained``, which caches them and knows about mirrors and
        tokens. Without it the checkpoint file (``model.safetensors``, 548 MB for ``gpt2``) is
        downloaded from the Hugging Face hub once into ``~/.cache/attention_book`` and read with
        :func:`read_safetensors` (no extra package). Where the hub cannot be reached (no
        internet, ``HF_HUB_OFFLINE=1``) this raises a ``RuntimeError`` within about
        ``timeout`` seconds that says what to do instead.
        """
        if name not in GPT2_CONFIGS:
            raise ValueError(f"name must be one of {sorted(GPT2_CONFIGS)}, got {name!r}; "
                             "e.g. GPT.from_pretrained('gpt2')")
        state_dict = _download_gpt2(name, timeout=check.positive_number("timeout", timeout))
        return cls.from_gpt2_state_dict(state_dict, n_head=GPT2_CONFIGS[name]["n_head"])


# ----------------------------------------------------------------------------------------------
# GPT-2 state dicts
# ----------------------------------------------------------------------------------------------

# GPT-2's Conv1D layers store their weight as (in, out) and compute x @ W + b; nn.Linear stores
# (out, in) and computes x @ W.T + b. So every Conv1D weight is transposed on the way in.
def _block_weights(d: int, bias: bool) -> List[Tuple[str, str, Tuple[int, ...], bool]]:
    """``(GPT-2 name in h.N, our name in blocks.N, GPT-2 shape, is a Conv1D weight)`` besides c_attn."""
    table = [
        ("ln_1.weight", "ln_1.weight", (d,), False), ("ln_1.bias", "ln_1.bias", (d,), False),
        ("attn.c_proj.weight", "attn.out_proj.weight", (d, d), True),
        ("attn.c_proj.bias", "attn.out_proj.bias", (d,), False),
        ("ln_2.weight", "ln_2.weight", (d,), False), ("ln_2.bias", "ln_2.bias", (d,), False),
        ("mlp.c_fc.weight", "mlp.fc.weight", (d, 4 * d), True),
        ("mlp.c_fc.bias", "mlp.fc.bias", (4 * d,), False),
        ("mlp.c_proj.weight", "mlp.proj.weight", (4 * d, d), True),
        ("mlp.c_proj.bias", "mlp.proj.bias", (d,), False),
    ]
    return [row for row in table if bias or not row[0].endswith(".bias")]


_IGNORED = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")  # old causal-mask buffers


def convert_gpt2_state_dict(state_dict: Mapping[str, torch.Tensor],
                            n_head: int) -> Tuple[GPTConfig, Dict[str, torch.Tensor]]:
    """``(config, our_state_dict)`` for a Hugging Face GPT-2 state dict (see
    :meth:`GPT.from_gpt2_state_dict`). Works on any device, the ``meta`` device included.

    Raises a ``ValueError`` naming the key when a weight is missing, has a shape that does not
    fit, or is left over (a key this function does not know would otherwise be lost silently).
    """
    if not isinstance(state_dict, Mapping):
        raise TypeError(f"state_dict must be a mapping of names to tensors, got {type(state_dict).__name__}; "
                        "pass GPT2LMHeadModel.state_dict()")
    n_head = check.positive_int("n_head", n_head)
    weights = {}
    for key, value in state_dict.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise TypeError(f"state_dict must map str to torch.Tensor, got {key!r}: {type(value).__name__}")
        short = key[len("transformer."):] if key.startswith("transformer.") else key
        if short in weights:
            raise ValueError(f"state_dict has {short!r} twice (with and without 'transformer.'): pass one")
        weights[short] = value
    for required in ("wte.weight", "wpe.weight", "ln_f.weight"):
        if required not in weights:
            raise ValueError(f"state_dict has no {required!r} (nor 'transformer.{required}'): pass the "
                             "state dict of a GPT2LMHeadModel or GPT2Model")
    token_embedding, position_embedding = weights.pop("wte.weight"), weights.pop("wpe.weight")
    vocab_size, d_model = token_embedding.shape
    layers = sorted({int(m.group(1)) for k in weights if (m := re.match(r"^h\.(\d+)\.", k))})
    if layers != list(range(len(layers))) or not layers:
        raise ValueError(f"state_dict has blocks {layers}: expected h.0, h.1, ... without gaps")
    bias = "ln_f.bias" in weights
    config = GPTConfig(vocab_size=vocab_size, context_length=position_embedding.shape[0], d_model=d_model,
                       n_layer=len(layers), n_head=n_head, dropout=0.0, bias=bias)

    def take(key: str, shape: Tuple[int, ...]) -> torch.Tensor:
        if key not in weights:
            raise ValueError(f"state_dict has no {key!r}: a GPT-2 block needs it")
        tensor = weights.pop(key)
        if tuple(tensor.shape) != shape:
            raise ValueError(f"{key!r} has shape {tuple(tensor.shape)}, expected {shape} for a GPT-2 "
                             f"with d_model={d_model}")
        return tensor

    d = d_model
    ours = {"token_embedding.weight": token_embedding, "position_embedding.weight": position_embedding}
    for layer in layers:
        h, b = f"h.{layer}.", f"blocks.{layer}."
        # c_attn computes queries, keys and values in one product: (d, 3d) = [W_q | W_k | W_v]
        qkv_weight = take(h + "attn.c_attn.weight", (d, 3 * d)).t()  # (3d, d), nn.Linear layout
        for name, part in zip(("W_query", "W_key", "W_value"), qkv_weight.split(d, dim=0)):
            ours[b + f"attn.{name}.weight"] = part.contiguous()  # (d, d)
        if bias:
            qkv_bias = take(h + "attn.c_attn.bias", (3 * d,))
            for name, part in zip(("W_query", "W_key", "W_value"), qkv_bias.split(d)):
                ours[b + f"attn.{name}.bias"] = part.contiguous()
        for theirs, mine, shape, conv1d in _block_weights(d, bias):
            tensor = take(h + theirs, shape)
            ours[b + mine] = tensor.t().contiguous() if conv1d else tensor  # Conv1D (in, out) -> (out, in)
    ours["ln_f.weight"] = take("ln_f.weight", (d,))
    if bias:
        ours["ln_f.bias"] = take("ln_f.bias", (d,))
    output = weights.pop("lm_head.weight", None)
    if output is not None and output.device.type != "meta" and not torch.equal(output, token_embedding):
        raise ValueError("lm_head.weight differs from wte.weight: this GPT ties its output layer to the token "
                         "embedding (as GPT-2 does) and cannot hold an untied one")
    ours["lm_head.weight"] = token_embedding
    leftover = sorted(k for k in weights if not _IGNORED.match(k))
    if leftover:
        raise ValueError(f"state_dict has keys a GPT-2 does not have: {leftover[:5]}; pass the state dict "
                         "of a GPT2LMHeadModel")
    return config, ours


# ----------------------------------------------------------------------------------------------
# downloading GPT-2
# ----------------------------------------------------------------------------------------------

_HUB_FILE = "https://huggingface.co/{name}/resolve/main/model.safetensors"


def _offline_message(name: str, reason: str) -> str:
    return (
        f"could not download GPT-2 ({name!r}): {reason}. GPT.from_pretrained needs the internet "
        "(e.g. Google Colab). Offline, build the model from a state dict you have: "
        "GPT.from_gpt2_state_dict(torch.load(path), n_head=12), or use a model you trained "
        "(chapter 9's cells fall back to theirs)."
    )


def _cache_path(filename: str) -> str:
    folder = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "attention_book")
    return os.path.join(folder, filename)


def _download_gpt2(name: str, timeout: float) -> Dict[str, torch.Tensor]:
    """GPT-2's state dict: from our cache, else through transformers, else one file from the hub."""
    cached = _cache_path(f"{name}.safetensors")
    if os.path.isfile(cached):  # downloaded before without transformers: no network needed
        return read_safetensors(cached)
    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
    unreachable: Optional[RuntimeError] = None
    if not offline:
        try:
            _check_reachable(name, timeout)  # one quick request instead of a library's retries
        except RuntimeError as error:  # a copy transformers cached earlier may still be there
            unreachable, offline = error, True
    try:
        from transformers import GPT2LMHeadModel  # installed in Colab: its cache, mirrors, tokens
    except ImportError:
        GPT2LMHeadModel = None
    if GPT2LMHeadModel is not None:
        try:  # offline: only its cache (the flag also holds if huggingface_hub read the variable earlier)
            return GPT2LMHeadModel.from_pretrained(name, local_files_only=offline).state_dict()
        except Exception as error:  # OSError, or a connection error of the HTTP library it uses
            if unreachable is not None:
                raise unreachable from None
            reason = "HF_HUB_OFFLINE is set and transformers has no copy" if offline else f"transformers: {error}"
            raise RuntimeError(_offline_message(name, reason)) from None
    if unreachable is not None:
        raise unreachable
    if offline:
        raise RuntimeError(_offline_message(name, "HF_HUB_OFFLINE is set and no copy is cached"))
    return read_safetensors(_cached_download(_HUB_FILE.format(name=name), cached, timeout))


def _check_reachable(name: str, timeout: float) -> None:
    """Fail fast (one request, ``timeout`` seconds) instead of a library's long retries."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(_HUB_FILE.format(name=name), method="HEAD")
    try:
        urllib.request.urlopen(request, timeout=timeout).close()
    except urllib.error.HTTPError as error:
        if error.code >= 500:
            raise RuntimeError(_offline_message(name, f"the hub answered {error.code}")) from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise RuntimeError(_offline_message(name, f"the hub is not reachable ({reason})")) from None


def _cached_download(url: str, path: str, timeout: float) -> str:
    import shutil
    import urllib.error
    import urllib.request

    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = path + ".part"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out, length=1 << 20)
    except (urllib.error.URLError, OSError) as error:
        if os.path.exists(partial):
            os.remove(partial)
        reason = getattr(error, "reason", error)
        name = os.path.basename(path).split(".")[0]
        raise RuntimeError(_offline_message(name, f"the download failed ({reason})")) from None
    os.replace(partial, path)  # only a complete file gets the final name
    return path


def read_safetensors(path: str) -> Dict[str, torch.Tensor]:
    """Read a ``.safetensors`` file into a dict of CPU tensors, without the ``safetensors`` package.

    The format is simple: 8 bytes (little-endian) giving the length of a JSON header, the
    header (for each tensor its dtype, shape and byte range), then the raw bytes.
    """
    import json

    dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
              "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8, "BOOL": torch.bool}
    with open(path, "rb") as handle:
        header_length = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(header_length))
        data = bytearray(handle.read())
    tensors = {}
    for key, entry in header.items():
        if key == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        dtype = dtypes[entry["dtype"]]
        flat = torch.frombuffer(data, dtype=dtype, count=(end - start) // torch.tensor([], dtype=dtype).element_size(),
                                offset=start) if end > start else torch.empty(0, dtype=dtype)
        tensors[key] = flat.reshape(entry["shape"]).clone()
    return tensors


# ----------------------------------------------------------------------------------------------
# the chapter's training recipe
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingSettings:
    """A model size and a training budget for chapter 9 (see :func:`settings_for`).

    Model: ``n_layer`` blocks of ``n_head`` heads, width ``d_model``, ``context_length`` tokens,
    ``dropout``. Training: ``steps`` AdamW updates on ``batch_size`` random windows each, peak
    learning rate ``lr`` reached after ``warmup`` steps and decayed along a cosine
    (:func:`attention_book.training.warmup_cosine`), weight decay on the matrices only,
    gradients clipped to norm ``max_grad_norm``. The held-out loss is measured every
    ``eval_every`` steps on ``eval_windows`` windows. ``seed`` seeds the model and the batches.
    """

    n_layer: int = 2
    n_head: int = 4
    d_model: int = 128
    context_length: int = 64
    dropout: float = 0.0
    batch_size: int = 32
    steps: int = 400
    lr: float = 1e-2
    warmup: int = 40
    weight_decay: float = 0.1
    max_grad_norm: float = 1.0
    eval_every: int = 100
    eval_windows: int = 128
    seed: int = 1234

    def __post_init__(self):
        for name in ("n_layer", "n_head", "d_model", "context_length", "batch_size", "steps", "warmup",
                     "eval_every", "eval_windows"):
            check.positive_int(name, getattr(self, name))
        check.probability("dropout", self.dropout)
        check.positive_number("lr", self.lr)
        check.positive_number("max_grad_norm", self.max_grad_norm)
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise TypeError(f"seed must be an int, got {self.seed!r}")

    def model_config(self, vocab_size: int, pre_norm: bool = True) -> GPTConfig:
        """The :class:`GPTConfig` of this size for a vocabulary of ``vocab_size`` tokens."""
        return GPTConfig(vocab_size=vocab_size, context_length=self.context_length, d_model=self.d_model,
                         n_layer=self.n_layer, n_head=self.n_head, dropout=self.dropout, bias=True,
                         pre_norm=pre_norm)

    def replace(self, **changes) -> "TrainingSettings":
        """A copy with some fields changed, e.g. ``settings.replace(steps=10)``."""
        unknown = sorted(set(changes) - set(asdict(self)))
        if unknown:
            raise ValueError(f"TrainingSettings has no field {unknown[0]!r}; fields: {sorted(asdict(self))}")
        return TrainingSettings(**{**asdict(self), **changes})

    def tokens_per_step(self) -> int:
        return self.batch_size * self.context_length


#: on a CPU: a small GPT and a budget that trains in about half a minute on one core
CPU_SETTINGS = TrainingSettings()
#: on a CUDA GPU (e.g. Colab's T4): a larger model, longer windows, many more steps
GPU_SETTINGS = TrainingSettings(n_layer=6, n_head=6, d_model=384, context_length=256, dropout=0.1, batch_size=64,
                                steps=2000, lr=1e-3, warmup=100, eval_every=250, eval_windows=256)

#: chapter 9's pre-norm / post-norm comparison: 4 small blocks, a high learning rate, no warm-up
#: (warmup=1: the full rate from the first step), 300 steps
PRE_POST_SETTINGS = TrainingSettings(n_layer=4, n_head=4, d_model=32, context_length=32, batch_size=16,
                                     steps=300, lr=1e-2, warmup=1, eval_every=300, eval_windows=128)


def settings_for(device) -> TrainingSettings:
    """:data:`GPU_SETTINGS` on a CUDA device, :data:`CPU_SETTINGS` elsewhere (CPU, Apple's MPS).

    ``device`` is a ``torch.device`` or its name (``"cuda"``, ``"cuda:0"``, ``"cpu"``, ``"mps"``).
    """
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError:
            raise ValueError(f"device must name a device such as 'cpu' or 'cuda', got {device!r}") from None
    if not isinstance(device, torch.device):
        raise TypeError(f"device must be a torch.device or a str such as 'cuda', got {type(device).__name__}")
    return GPU_SETTINGS if device.type == "cuda" else CPU_SETTINGS


@dataclass
class GPTTrainResult:
    """What :func:`train_gpt` returns.

    train_losses: the loss of every update's batch (``steps`` values).
    held_out: ``(step, held-out loss)`` pairs: before the first update, every ``eval_every``
        updates and after the last one.
    tokens_seen: training tokens the model read (``steps * batch_size * context_length``).
    seconds: wall time of the loop (evaluations included).
    """

    train_losses: List[float] = field(default_factory=list)
    held_out: List[Tuple[int, float]] = field(default_factory=list)
    tokens_seen: int = 0
    seconds: float = 0.0

    @property
    def final_held_out_loss(self) -> float:
        return self.held_out[-1][1]


def _optimizer(model: nn.Module, settings: TrainingSettings) -> torch.optim.Optimizer:
    """AdamW; weight decay on the matrices only (not on biases and layer-norm gains)."""
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": matrices, "weight_decay": settings.weight_decay},
              {"params": vectors, "weight_decay": 0.0}]
    return adamw(groups, lr=settings.lr, betas=(0.9, 0.95))


def train_gpt(model: nn.Module, train_ids: torch.Tensor, held_out_ids: torch.Tensor, settings: TrainingSettings,
              progress: Optional[bool] = None, description: str = "training") -> GPTTrainResult:
    """Train ``model`` on random windows of ``train_ids`` as ``settings`` say; measure the held-out loss.

    ``model`` maps ``(B, T)`` token ids to ``(B, T, V)`` logits: the chapter's :class:`GPT`, or
    chapter 8's model for a comparison on the same batches (the batches depend only on
    ``settings.seed``). ``train_ids`` and ``held_out_ids`` are 1-D ``torch.long`` tensors (e.g.
    :meth:`attention_book.corpus.CharTokenizer.encode_tensor`); they stay where they are and only
    each batch is moved to the model's device. The update is the shared
    :func:`attention_book.training.training_loop`.
    """
    import time

    if not isinstance(settings, TrainingSettings):
        raise TypeError(f"settings must be TrainingSettings (e.g. settings_for(device)), got {type(settings).__name__}")
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(settings.seed)  # the batches: same on every device
    result = GPTTrainResult()

    def evaluate(step: int) -> None:
        loss = held_out_loss(model, held_out_ids, settings.context_length, max_windows=settings.eval_windows)
        result.held_out.append((step, loss))

    def loss_at(step: int) -> torch.Tensor:
        if step % settings.eval_every == 0:
            evaluate(step)
        inputs, targets = random_windows(train_ids, settings.batch_size, settings.context_length, generator)
        loss = next_token_loss(model(inputs.to(device)), targets.to(device))  # logits (B, T, V)
        result.train_losses.append(loss.item())
        return loss

    start = time.perf_counter()
    updates = training_loop(model, _optimizer(model, settings), settings.steps, loss_at,
                            lr_factor=warmup_cosine(settings.steps, min(settings.warmup, settings.steps)),
                            max_grad_norm=settings.max_grad_norm, progress=progress, description=description)
    evaluate(updates)
    result.seconds = time.perf_counter() - start
    result.tokens_seen = updates * settings.tokens_per_step()
    return result
