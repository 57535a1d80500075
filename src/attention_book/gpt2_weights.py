"""Chapter 9: GPT-2's weights inside the book's :class:`~attention_book.gpt.GPT`.

OpenAI's GPT-2 has the architecture of chapter 9's GPT; only the names and the layout of its
weights differ. This module converts them:

* :func:`convert_gpt2_state_dict`: a Hugging Face GPT-2 state dict (``GPT2LMHeadModel.state_dict()``
  or a checkpoint file's keys without ``transformer.``) to the book's names and layout. GPT-2
  stores its linear layers as ``Conv1D``, ``(in, out)``, so every weight is transposed, and its
  ``c_attn`` holds the query, key and value projections side by side, so it is split in three.
* :func:`from_gpt2_state_dict`: the book's GPT holding those weights; it gives the same logits as
  ``transformers``.
* :func:`from_pretrained`: downloads OpenAI's checkpoint where the internet is reachable (e.g.
  Colab), through ``transformers`` when installed, else as one file read by
  :func:`read_safetensors` (no extra package); offline it fails within seconds, saying what to do.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Mapping, Optional, Tuple

import torch

from . import validation as check
from .gpt import GPT, GPTConfig

__all__ = [
    "GPT2_CONFIGS",
    "convert_gpt2_state_dict",
    "from_gpt2_state_dict",
    "from_pretrained",
    "read_safetensors",
    "transformers_gpt2",
]

#: the four GPT-2 sizes OpenAI released (Radford et al. 2019), as Hugging Face names them
GPT2_CONFIGS: Dict[str, Dict[str, int]] = {
    "gpt2": dict(n_layer=12, n_head=12, d_model=768),  # 124M parameters
    "gpt2-medium": dict(n_layer=24, n_head=16, d_model=1024),  # 350M
    "gpt2-large": dict(n_layer=36, n_head=20, d_model=1280),  # 774M
    "gpt2-xl": dict(n_layer=48, n_head=25, d_model=1600),  # 1558M
}


def from_gpt2_state_dict(state_dict: Mapping[str, torch.Tensor], n_head: int) -> GPT:
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
        model = GPT(config)
    model = model.to(reference.dtype)
    missing, unexpected = model.load_state_dict(converted, strict=False)
    not_buffers = [key for key in missing if not key.endswith("attn.mask")]  # masks: built, not loaded
    if not_buffers or unexpected:  # convert_gpt2_state_dict makes every weight: a bug if not
        raise RuntimeError(f"GPT-2 conversion left {not_buffers + unexpected} unmatched")
    return model.eval()


def from_pretrained(name: str = "gpt2", timeout: float = 10.0) -> GPT:
    """Download OpenAI's GPT-2 ``name`` (``"gpt2"`` = 124M parameters) into the book's GPT.

    With ``transformers`` installed (Colab has it) the weights come through
    ``GPT2LMHeadModel.from_pretrained``, which caches them and knows about mirrors and
    tokens. Without it the checkpoint file (``model.safetensors``, 548 MB for ``gpt2``) is
    downloaded from the Hugging Face hub once into ``~/.cache/attention_book`` and read with
    :func:`read_safetensors` (no extra package). Where the hub cannot be reached (no
    internet, ``HF_HUB_OFFLINE=1``), or ``transformers`` cannot load (it refuses PyTorch versions
    it does not support), this raises a ``RuntimeError`` within about ``timeout`` seconds that
    says what to do instead.
    """
    if name not in GPT2_CONFIGS:
        raise ValueError(f"name must be one of {sorted(GPT2_CONFIGS)}, got {name!r}; "
                         "e.g. from_pretrained('gpt2')")
    state_dict = _download_gpt2(name, timeout=check.positive_number("timeout", timeout))
    return from_gpt2_state_dict(state_dict, n_head=GPT2_CONFIGS[name]["n_head"])


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
    :func:`from_gpt2_state_dict`). Works on any device, the ``meta`` device included.

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
        f"could not download GPT-2 ({name!r}): {reason}. from_pretrained needs the internet "
        "(e.g. Google Colab). Offline, build the model from a state dict you have: "
        "attention_book.gpt2_weights.from_gpt2_state_dict(torch.load(path), n_head=12), or use a "
        "model you trained "
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
    except Exception:  # not installed (ImportError), or it refuses this PyTorch: download the file
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


def transformers_gpt2(name: str = "gpt2"):
    """``transformers``' own ``GPT2LMHeadModel`` of ``name``, in eval mode: the reference to compare with.

    Raises a ``RuntimeError`` with one sentence saying why when it cannot be had: ``transformers``
    not installed, a ``transformers`` that refuses this PyTorch (version 5 needs PyTorch 2.6 or
    later), or no download possible.
    """
    if name not in GPT2_CONFIGS:
        raise ValueError(f"name must be one of {sorted(GPT2_CONFIGS)}, got {name!r}")
    try:
        from transformers import GPT2LMHeadModel

        return GPT2LMHeadModel.from_pretrained(name).eval()
    except Exception as error:  # ImportError, OSError, or its own check of the PyTorch version
        first_line = (str(error).strip().splitlines() or [""])[0][:160]
        raise RuntimeError(
            f"transformers could not load {name!r} here ({type(error).__name__}: {first_line}); the "
            f"comparison needs transformers with a PyTorch it supports (this is torch {torch.__version__}) "
            "and the internet: pip install -U transformers torch, or skip the comparison"
        ) from None
