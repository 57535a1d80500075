"""The explorer widgets: an anywidget whose JavaScript (``explorer.js``) does the attention math.

Python validates the reader's tensors and hands them to the browser as traits (nested lists of
floats). Moving a slider sets a trait in the browser, which ipywidgets syncs back to Python; setting
a trait in Python (``explorer.d_k = 2``) redraws the view.

For the static book (``ATTENTION_BOOK_STATIC=1``, set by ``make book``) every explorer also returns
a self-contained ``text/html`` fallback: a ``<div>`` plus an inline ``<script type="module">`` that
runs the same module against a tiny stand-in for the widget model, so the published page stays
interactive without a kernel, a widget manager or any outside script.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import itertools
import json
import math
import os
import pathlib
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

import anywidget
import ipywidgets
import torch
import traitlets

STATIC_ENV = "ATTENTION_BOOK_STATIC"
_HERE = pathlib.Path(__file__).parent
_ESM = (_HERE / "explorer.js").read_text(encoding="utf-8")
_CSS = (_HERE / "explorer.css").read_text(encoding="utf-8")
_IPYWIDGETS_MAJOR = int(ipywidgets.__version__.split(".")[0])
_EXPORT_LINE = "export default { render };"
_static_counter = itertools.count(1)


class ExplorerInputError(ValueError, traitlets.TraitError):
    """Bad input for an explorer. A ``ValueError`` (and a ``TraitError`` so traitlets rolls back)."""


# --------------------------------------------------------------------------- conversion helpers


def _to_matrix(name: str, value: Any, *, allow_linear: bool = False) -> List[List[float]]:
    """Turn a tensor / array / nested list (or an nn.Linear) into a finite 2-D list of floats."""
    if isinstance(value, torch.nn.Linear):
        if not allow_linear:
            raise ExplorerInputError(f"{name} must be a tensor, not an nn.Linear")
        value = value.weight.T  # nn.Linear stores (d_out, d_in); the book uses x @ W with (d_in, d_out)
    if isinstance(value, torch.nn.Module):
        raise TypeError(f"{name} must be a tensor or an nn.Linear, got {type(value).__name__}")
    try:
        tensor = torch.as_tensor(value.detach() if isinstance(value, torch.Tensor) else value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(
            f"{name} must be a 2-D tensor, array or nested list of numbers, got {type(value).__name__} ({error})"
        ) from None
    if tensor.dtype == torch.bool or tensor.is_complex() or not (tensor.is_floating_point() or tensor.dtype in (
        torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8
    )):
        raise TypeError(f"{name} must hold real numbers, got dtype {tensor.dtype}")
    if tensor.ndim != 2:
        raise ExplorerInputError(f"{name} must be 2-D, got shape {tuple(tensor.shape)}")
    if tensor.shape[0] == 0 or tensor.shape[1] == 0:
        raise ExplorerInputError(f"{name} is empty (shape {tuple(tensor.shape)})")
    tensor = tensor.cpu().to(torch.float64)  # exact: every float32 value is a float64 value
    bad = (~torch.isfinite(tensor)).nonzero()
    if len(bad):
        row, col = bad[0].tolist()
        raise ExplorerInputError(
            f"{name} contains a non-finite value ({tensor[row, col].item()}) at [{row}, {col}]: "
            "pass finite numbers (check for a division by zero or an exploding training run)"
        )
    return tensor.tolist()


def _to_tokens(tokens: Any) -> List[str]:
    if isinstance(tokens, str) or not isinstance(tokens, Sequence):
        raise TypeError(
            f"tokens must be a list of strings, one per row of inputs, got {type(tokens).__name__}"
            + (" (split the sentence into words first)" if isinstance(tokens, str) else "")
        )
    bad = [t for t in tokens if not isinstance(t, str)]
    if bad:
        raise TypeError(f"tokens must be strings, got {bad[0]!r} ({type(bad[0]).__name__})")
    if len(tokens) == 0:
        raise ExplorerInputError("tokens is empty: pass one label per row of inputs")
    return list(tokens)


def _check_int(name: str, value: Any, low: int, high: int, hint: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            import numpy as np  # numpy integers are fine too

            if isinstance(value, np.integer):
                value = int(value)
        except ImportError:  # pragma: no cover
            pass
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if not low <= value <= high:
        raise ExplorerInputError(f"{name}={value} is out of range: choose {name} from {low} to {high}{hint}")
    return value


def divisors(n: int) -> Tuple[int, ...]:
    """The numbers of heads that split ``n`` projection columns evenly."""
    return tuple(k for k in range(1, n + 1) if n % k == 0)


def _check_projection(tokens: List[str], inputs: list, w_query: list, w_key: list) -> None:
    """Shapes must chain: (T, d_in) @ (d_in, d_out), with one token per row and W_q, W_k alike."""
    num_tokens, d_in = len(inputs), len(inputs[0])
    if len(tokens) != num_tokens:
        raise ExplorerInputError(
            f"there are {len(tokens)} tokens but inputs has {num_tokens} rows: "
            "pass one token label per row of inputs"
        )
    for name, matrix in (("W_query", w_query), ("W_key", w_key)):
        if len(matrix) != d_in:
            raise ExplorerInputError(
                f"{name} has shape ({len(matrix)}, {len(matrix[0])}) but inputs has d_in={d_in} columns: "
                f"{name} must be (d_in, d_out) = ({d_in}, ...) for x @ {name}"
                + (" (it looks transposed: pass its .T)" if len(matrix[0]) == d_in else "")
            )
    if len(w_query[0]) != len(w_key[0]):
        raise ExplorerInputError(
            f"W_query has d_out={len(w_query[0])} but W_key has d_out={len(w_key[0])}: "
            "queries and keys need the same width for their dot products"
        )


class _Matrix(traitlets.List):
    """A list-of-lists trait that also accepts tensors, arrays and (optionally) nn.Linear."""

    def __init__(self, allow_linear: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.allow_linear = allow_linear

    def validate(self, obj, value):
        return _to_matrix(self.name, value, allow_linear=self.allow_linear)


# --------------------------------------------------------------------------- the widget classes


class _Explorer(anywidget.AnyWidget):
    """Shared plumbing: the ES module, the CSS and the static HTML fallback."""

    _esm = _ESM
    _css = _CSS
    kind = traitlets.Unicode("").tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    tokens = traitlets.List(traitlets.Unicode()).tag(sync=True)

    # Traits the JavaScript reads; the static fallback carries exactly these.
    _static_traits: Tuple[str, ...] = ("kind", "title", "tokens")

    def _state_with(self, proposal) -> Dict[str, Any]:
        state = {name: getattr(self, name) for name in self._static_traits}
        state[proposal["trait"].name] = proposal["value"]
        return state

    def _check(self, state: Dict[str, Any]) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def update(self, **values) -> None:
        """Set several traits at once (checked together), e.g. ``explorer.update(tokens=..., inputs=...)``."""
        with self.hold_sync(), self.hold_trait_notifications():
            for name, value in values.items():
                if not self.has_trait(name) or name.startswith("_"):
                    raise ExplorerInputError(f"{type(self).__name__} has no setting {name!r}")
                setattr(self, name, value)

    # ---- static site -----------------------------------------------------------------------
    def static_html(self) -> str:
        """Self-contained HTML (div + inline module script) that renders this explorer without a kernel.

        The module code, the CSS and this explorer's data travel gzip-compressed and base64-encoded
        (about 8 KB in all); the browser inflates them with ``DecompressionStream``, runs the module
        against a stand-in widget model, and reuses the module for further explorers on the page.
        """
        state = {name: getattr(self, name) for name in self._static_traits}
        state_json = json.dumps(state, allow_nan=False, separators=(",", ":"))
        digest = hashlib.sha1(state_json.encode()).hexdigest()[:8]
        element_id = f"abx-{self.kind}-{next(_static_counter)}-{digest}"
        code_key, code = _static_payload()
        return (
            f'<div class="abx-static" id="{element_id}" data-explorer-root="{self.kind}">'
            "<p>Interactive explorer: it needs JavaScript and a browser from 2023 or later.</p></div>\n"
            '<script type="module">\n'
            f'const id = "{element_id}", key = "{code_key}";\n'
            f'const code = "{code}";\n'
            f'const data = "{_gzip_b64(state_json)}";\n'
            f"{_LOADER}\n"
            "</script>"
        )

    def open(self):
        """Open the comm to the front end, except in the static book build.

        In the book build the page shows the ``text/html`` fallback only. Without a comm the
        executed notebook saves no widget state, which myst-nb would otherwise embed in the page
        (about 27 KB per explorer: the module source and the data a second time).
        """
        if _static_build():
            return
        super().open()

    def _repr_mimebundle_(self, **kwargs):
        if _static_build() or self.comm is None:
            return {"text/plain": _plain_text(self), "text/html": self.static_html()}, {}
        return super()._repr_mimebundle_(**kwargs)

    if _IPYWIDGETS_MAJOR < 8:  # ipywidgets 7 (Colab) displays widgets through _ipython_display_

        def _ipython_display_(self, **kwargs):
            if not (_static_build() or self.comm is None):
                return super()._ipython_display_(**kwargs)
            from IPython.display import display

            data, _ = self._repr_mimebundle_()
            display(data, raw=True)


def _static_build() -> bool:
    return os.environ.get(STATIC_ENV) == "1"


def _plain_text(explorer: "_Explorer") -> str:
    return f"<{type(explorer).__name__}: {len(explorer.tokens)} tokens>"


# Runs inside the page: inflate the payloads, load the module once per page, render.
_LOADER = """\
const inflate = async (b64) => new Response(new Blob([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))]).stream().pipeThrough(new DecompressionStream("gzip"))).text();
const modules = (window.__abxModules = window.__abxModules || {});
modules[key] = modules[key] || inflate(code).then((text) => {
const { css, js } = JSON.parse(text);
const style = document.createElement("style");
style.textContent = css;
document.head.append(style);
return new Function(js)();
});
const explorer = await modules[key];
const el = document.getElementById(id);
el.replaceChildren();
explorer.render({ model: explorer.standInModel(JSON.parse(await inflate(data))), el });"""

# A stand-in for the widget model (get/set/on/off/save_changes): on the static page the explorer's
# state lives only in the browser. set() fires "change:<name>" at once, as Backbone models do.
_STAND_IN_MODEL = """\
function standInModel(state) {
const handlers = {};
return {
get: (name) => state[name],
set: (name, value) => { if (state[name] === value) return; state[name] = value; (handlers["change:" + name] || []).slice().forEach((f) => f()); },
on: (event, f) => { (handlers[event] = handlers[event] || []).push(f); },
off: (event, f) => { if (!event) { for (const key in handlers) delete handlers[key]; return; } handlers[event] = f ? (handlers[event] || []).filter((g) => g !== f) : []; },
save_changes: () => {},
send: () => {},
};
}"""


def _minify_js(source: str) -> str:
    """Drop comment-only lines, indentation and blank lines (the file is written to allow this)."""
    lines = []
    for line in source.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("//"):
            lines.append(stripped)
    return "\n".join(lines)


def _minify_css(source: str) -> str:
    source = re.sub(r"/\*.*?\*/", "", source, flags=re.S)
    return "\n".join(line.strip() for line in source.splitlines() if line.strip())


def _gzip_b64(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)).decode("ascii")


@functools.lru_cache(maxsize=None)
def _static_payload() -> Tuple[str, str]:
    """``(key, base64 gzip of {css, js})``; js is the ES module as a function body returning its export."""
    code = _minify_js(_ESM)
    if code.count(_EXPORT_LINE) != 1 or not code.rstrip().endswith(_EXPORT_LINE):
        raise RuntimeError(f"explorer.js must end with the line {_EXPORT_LINE!r}")
    body = code.replace(_EXPORT_LINE, _STAND_IN_MODEL + "\nreturn { render, standInModel };")
    payload = json.dumps({"css": _minify_css(_CSS), "js": body}, separators=(",", ":"))
    return hashlib.sha1(payload.encode()).hexdigest()[:12], _gzip_b64(payload)


class _ProjectionExplorer(_Explorer):
    """Explorers that compute weights from inputs and W_query / W_key in the browser."""

    inputs = _Matrix().tag(sync=True)
    w_query = _Matrix(allow_linear=True).tag(sync=True)
    w_key = _Matrix(allow_linear=True).tag(sync=True)

    def _weights(self, columns: slice, scale: float, causal: bool) -> torch.Tensor:
        x = torch.tensor(self.inputs, dtype=torch.float64)
        queries = x @ torch.tensor(self.w_query, dtype=torch.float64)[:, columns]
        keys = x @ torch.tensor(self.w_key, dtype=torch.float64)[:, columns]
        scores = queries @ keys.T * scale
        if causal:
            hidden = torch.triu(torch.ones(len(x), len(x), dtype=torch.bool), diagonal=1)
            scores = scores.masked_fill(hidden, float("-inf"))
        return torch.softmax(scores, dim=-1)


class DkExplorer(_ProjectionExplorer):
    """Chapter 3: how d_k and the 1/sqrt(d_k) scaling shape the softmax. Make it with :func:`dk_explorer`."""

    kind = traitlets.Unicode("dk").tag(sync=True)
    d_k = traitlets.Int(1).tag(sync=True)
    scaled = traitlets.Bool(True).tag(sync=True)
    _static_traits = ("kind", "title", "tokens", "inputs", "w_query", "w_key", "d_k", "scaled")

    @traitlets.validate("tokens", "inputs", "w_query", "w_key", "d_k")
    def _validate_all(self, proposal):
        self._check(self._state_with(proposal))
        return proposal["value"]

    def _check(self, state):
        _check_projection(state["tokens"], state["inputs"], state["w_query"], state["w_key"])
        _check_int("d_k", state["d_k"], 1, len(state["w_query"][0]), " (the number of projection columns used)")

    def attention_weights(self) -> torch.Tensor:
        """The (T, T) weights the explorer shows for its current settings (float64)."""
        scale = 1 / math.sqrt(self.d_k) if self.scaled else 1.0
        return self._weights(slice(0, self.d_k), scale, causal=False)


class HeadsExplorer(_ProjectionExplorer):
    """Chapter 5: one heatmap per head. Make it with :func:`heads_explorer`."""

    kind = traitlets.Unicode("heads").tag(sync=True)
    num_heads = traitlets.Int(1).tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    _static_traits = ("kind", "title", "tokens", "inputs", "w_query", "w_key", "num_heads", "causal")

    @traitlets.validate("tokens", "inputs", "w_query", "w_key", "num_heads")
    def _validate_all(self, proposal):
        self._check(self._state_with(proposal))
        return proposal["value"]

    def _check(self, state):
        _check_projection(state["tokens"], state["inputs"], state["w_query"], state["w_key"])
        d_out = len(state["w_query"][0])
        num_heads = state["num_heads"]
        if isinstance(num_heads, bool) or not isinstance(num_heads, int):
            raise TypeError(f"num_heads must be an int, got {num_heads!r}")
        if num_heads < 1 or d_out % num_heads:
            raise ExplorerInputError(
                f"d_out={d_out} is not divisible by num_heads={num_heads}: "
                f"choose num_heads from {divisors(d_out)}"
            )

    def attention_weights(self) -> torch.Tensor:
        """The (num_heads, T, T) weights the explorer shows (float64)."""
        head_dim = len(self.w_query[0]) // self.num_heads
        return torch.stack([
            self._weights(slice(h * head_dim, (h + 1) * head_dim), 1 / math.sqrt(head_dim), self.causal)
            for h in range(self.num_heads)
        ])


class MaskExplorer(_ProjectionExplorer):
    """Chapter 7: the causal mask, one query row at a time. Make it with :func:`mask_explorer`."""

    kind = traitlets.Unicode("mask").tag(sync=True)
    causal = traitlets.Bool(True).tag(sync=True)
    query_index = traitlets.Int(0).tag(sync=True)
    _static_traits = ("kind", "title", "tokens", "inputs", "w_query", "w_key", "causal", "query_index")

    @traitlets.validate("tokens", "inputs", "w_query", "w_key", "query_index")
    def _validate_all(self, proposal):
        self._check(self._state_with(proposal))
        return proposal["value"]

    def _check(self, state):
        _check_projection(state["tokens"], state["inputs"], state["w_query"], state["w_key"])
        _check_int("query_index", state["query_index"], 0, len(state["tokens"]) - 1, " (a row of the weights)")

    def attention_weights(self) -> torch.Tensor:
        """The (T, T) weights the explorer shows, scaled by 1/sqrt(d_out) (float64)."""
        d_out = len(self.w_query[0])
        return self._weights(slice(0, d_out), 1 / math.sqrt(d_out), self.causal)


class TrainingPlayback(_Explorer):
    """Chapter 8: scrub through attention weights saved during training. Make it with :func:`training_playback`."""

    kind = traitlets.Unicode("playback").tag(sync=True)
    steps = traitlets.List(traitlets.Int()).tag(sync=True)
    snapshots = traitlets.List().tag(sync=True)  # (S, H, T, T) nested lists
    losses = traitlets.List(traitlets.Float()).tag(sync=True)
    loss_steps = traitlets.List(traitlets.Int()).tag(sync=True)
    snapshot_index = traitlets.Int(0).tag(sync=True)
    _static_traits = ("kind", "title", "tokens", "steps", "snapshots", "losses", "loss_steps", "snapshot_index")

    @traitlets.validate("tokens", "steps", "snapshots", "losses", "loss_steps", "snapshot_index")
    def _validate_all(self, proposal):
        self._check(self._state_with(proposal))
        return proposal["value"]

    def _check(self, state):
        steps, snapshots = state["steps"], state["snapshots"]
        if len(steps) != len(snapshots) or not steps:
            raise ExplorerInputError(
                f"got {len(steps)} steps for {len(snapshots)} snapshots: pass a non-empty list of (step, weights)"
            )
        num_tokens = len(state["tokens"])
        for step, heads in zip(steps, snapshots):
            shape = (len(heads), len(heads[0]), len(heads[0][0])) if heads and heads[0] else (len(heads),)
            if len(shape) != 3 or shape[1:] != (num_tokens, num_tokens) or shape[0] != len(snapshots[0]):
                raise ExplorerInputError(
                    f"snapshot at step {step} has shape {shape}, expected "
                    f"({len(snapshots[0])}, {num_tokens}, {num_tokens}) like the first one"
                )
        if len(state["losses"]) != len(state["loss_steps"]):
            raise ExplorerInputError("losses and loss_steps must have the same length")
        _check_int("snapshot_index", state["snapshot_index"], 0, len(steps) - 1, " (one per snapshot)")

    def weights_at(self, index: Optional[int] = None) -> torch.Tensor:
        """The (H, T, T) weights of snapshot ``index`` (default: the one shown)."""
        index = self.snapshot_index if index is None else index
        return torch.tensor(self.snapshots[index])
