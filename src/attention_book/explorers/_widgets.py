"""The explorer widgets: anywidgets whose JavaScript (``explorer.js``) does the attention math.

Python validates the reader's tensors (``_inputs``) and hands them to the browser as traits (nested
lists of floats). Moving a slider sets a trait in the browser, which ipywidgets syncs back to
Python; setting a trait in Python (``explorer.d_k = 2``) redraws the view. In the book build each
widget also returns its static HTML version (``_static``). ``attention_weights()`` recomputes what
is drawn with the book's attention core, ``attention_book.functional``.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import anywidget
import ipywidgets
import torch
import traitlets

from ..functional import masked_softmax, scaled_dot_product_attention
from ._colab import enable_colab_widgets, no_widget_text
from ._inputs import ExplorerInputError, Matrix, Vector, check_heads, check_int, check_projection
from ._static import CSS, ESM, static_build, static_html

__all__ = ["DkExplorer", "HeadsExplorer", "MaskExplorer", "TrainingPlayback", "SamplingExplorer",
           "TEMPERATURE_RANGE"]

_IPYWIDGETS_MAJOR = int(ipywidgets.__version__.split(".")[0])


class _Explorer(anywidget.AnyWidget):
    """Shared plumbing: the ES module, the CSS, joint validation and the static HTML fallback."""

    _esm = ESM
    _css = CSS
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

    def static_html(self, once_per_page: bool = False) -> str:
        """Self-contained HTML that renders this explorer on a page with no kernel (see ``_static``)."""
        return static_html(self.kind, {name: getattr(self, name) for name in self._static_traits}, once_per_page)

    def open(self):
        """Open the comm to the front end, except in the static book build.

        In the book build the page shows the ``text/html`` fallback only. Without a comm the
        executed notebook saves no widget state, which myst-nb would otherwise embed in the page
        (about 27 KB per explorer: the module source and the data a second time).
        """
        if static_build():
            return
        super().open()

    def _plain_text(self) -> str:
        return f"<{type(self).__name__}: {len(self.tokens)} tokens>"

    def _repr_mimebundle_(self, **kwargs):
        if static_build() or self.comm is None:
            return {"text/plain": self._plain_text(), "text/html": self.static_html(once_per_page=True)}, {}
        enable_colab_widgets()  # before the view is sent: Colab renders it with its custom manager
        bundle = getattr(super(), "_repr_mimebundle_", lambda **_: None)(**kwargs)
        data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        if not data:  # an anywidget without its own bundle (older releases)
            data = {"application/vnd.jupyter.widget-view+json": {
                "version_major": 2, "version_minor": 0, "model_id": self.model_id}}
        # a front end that cannot render the widget shows text/plain: say why, not the object's repr
        return dict(data, **{"text/plain": no_widget_text(type(self).__name__, len(self.tokens))}), metadata

    def _display_with_ipywidgets7(self, **kwargs):
        """ipywidgets 7 (older Colab runtimes) displays widgets through ``_ipython_display_``,
        whose text/plain would be the object's repr: publish this class's bundle instead."""
        from IPython.display import display

        data, metadata = self._repr_mimebundle_()
        display(data, raw=True, metadata=metadata)
        if not (static_build() or self.comm is None) and hasattr(self, "_handle_displayed"):
            self._handle_displayed(**kwargs)

    if _IPYWIDGETS_MAJOR < 8:
        _ipython_display_ = _display_with_ipywidgets7


class _ProjectionExplorer(_Explorer):
    """Explorers that compute weights from inputs and W_query / W_key in the browser."""

    inputs = Matrix().tag(sync=True)
    w_query = Matrix(allow_linear=True).tag(sync=True)
    w_key = Matrix(allow_linear=True).tag(sync=True)

    def _weights(self, columns: slice, scale: float, causal: bool) -> torch.Tensor:
        """(T, T) weights of the projection columns ``columns``, through the book's attention core."""
        x = torch.tensor(self.inputs, dtype=torch.float64)  # (T, d_in)
        queries = x @ torch.tensor(self.w_query, dtype=torch.float64)[:, columns]  # (T, d)
        keys = x @ torch.tensor(self.w_key, dtype=torch.float64)[:, columns]  # (T, d)
        num_tokens = len(x)
        hidden = None
        if causal:  # True = hidden: a query never sees a later key
            hidden = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(diagonal=1)
        _, weights = scaled_dot_product_attention(queries, keys, keys, mask=hidden, scale=scale)
        return weights


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
        check_projection(state["tokens"], state["inputs"], state["w_query"], state["w_key"])
        check_int("d_k", state["d_k"], 1, len(state["w_query"][0]), " (the number of projection columns used)")

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
        check_projection(state["tokens"], state["inputs"], state["w_query"], state["w_key"])
        check_heads(state["num_heads"], len(state["w_query"][0]))

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
        check_projection(state["tokens"], state["inputs"], state["w_query"], state["w_key"])
        check_int("query_index", state["query_index"], 0, len(state["tokens"]) - 1, " (a row of the weights)")

    def attention_weights(self) -> torch.Tensor:
        """The (T, T) weights the explorer shows, scaled by 1/sqrt(d_out) (float64)."""
        d_out = len(self.w_query[0])
        return self._weights(slice(0, d_out), 1 / math.sqrt(d_out), self.causal)


class TrainingPlayback(_Explorer):
    """Chapter 8: scrub through attention weights saved during training. Make it with :func:`training_playback`.

    ``tokens`` holds one token list per sentence and ``snapshots`` the saved weights as nested
    lists of shape ``(steps, sentences, heads, T, T)``; ``snapshot_index`` and ``sentence_index``
    are what the slider and the sentence selector show. ``causal`` hatches the zeros above the
    diagonal (set by :func:`training_playback` when every snapshot is causal).
    """

    kind = traitlets.Unicode("playback").tag(sync=True)
    tokens = traitlets.List(traitlets.List(traitlets.Unicode())).tag(sync=True)  # one list per sentence
    steps = traitlets.List(traitlets.Int()).tag(sync=True)
    snapshots = traitlets.List().tag(sync=True)  # (steps, S, H, T, T) nested lists
    losses = traitlets.List(traitlets.Float()).tag(sync=True)
    loss_steps = traitlets.List(traitlets.Int()).tag(sync=True)
    causal = traitlets.Bool(False).tag(sync=True)
    snapshot_index = traitlets.Int(0).tag(sync=True)
    sentence_index = traitlets.Int(0).tag(sync=True)
    _static_traits = ("kind", "title", "tokens", "steps", "snapshots", "losses", "loss_steps", "causal",
                      "snapshot_index", "sentence_index")

    @traitlets.validate("tokens", "steps", "snapshots", "losses", "loss_steps", "snapshot_index",
                        "sentence_index")
    def _validate_all(self, proposal):
        self._check(self._state_with(proposal))
        return proposal["value"]

    def _check(self, state):
        steps, snapshots, sentences = state["steps"], state["snapshots"], state["tokens"]
        if len(steps) != len(snapshots) or not steps:
            raise ExplorerInputError(
                f"got {len(steps)} steps for {len(snapshots)} snapshots: pass a non-empty list of (step, weights)"
            )
        if not sentences:
            raise ExplorerInputError("tokens is empty: pass one token list per sentence")
        num_tokens = len(sentences[0])
        expected = (len(sentences), len(snapshots[0][0]) if snapshots[0] else 0, num_tokens, num_tokens)
        for step, stack in zip(steps, snapshots):
            shape = _nested_shape(stack, 4)
            if shape != expected or expected[1] == 0:
                raise ExplorerInputError(
                    f"snapshot at step {step} has shape {shape}, expected (sentences, heads, T, T) = {expected}"
                )
        if len(state["losses"]) != len(state["loss_steps"]):
            raise ExplorerInputError("losses and loss_steps must have the same length")
        check_int("snapshot_index", state["snapshot_index"], 0, len(steps) - 1, " (one per snapshot)")
        check_int("sentence_index", state["sentence_index"], 0, len(sentences) - 1, " (one per sentence)")

    def _plain_text(self) -> str:
        return f"<TrainingPlayback: {len(self.tokens)} sentence(s) of {len(self.tokens[0])} tokens>"

    def weights_at(self, index: Optional[int] = None, sentence: Optional[int] = None) -> torch.Tensor:
        """The (H, T, T) weights of snapshot ``index`` for ``sentence`` (default: what is shown)."""
        index = self.snapshot_index if index is None else check_int("index", index, 0, len(self.steps) - 1)
        sentence = self.sentence_index if sentence is None else check_int(
            "sentence", sentence, 0, len(self.tokens) - 1)
        return torch.tensor(self.snapshots[index][sentence])


def _nested_shape(value, depth: int) -> Tuple[int, ...]:
    """The shape of a regular nested list, read along its first elements (``depth`` levels)."""
    shape = []
    for _ in range(depth):
        if not isinstance(value, list):
            break
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return tuple(shape)


#: what the temperature slider covers (steps of 0.05)
TEMPERATURE_RANGE = (0.1, 2.0)


def _real_number(name: str, value, expected: str, example: str) -> float:
    """``value`` (an int, a float or a numpy number, not a bool) as a float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not (
            hasattr(value, "__float__") and type(value).__module__ == "numpy"):
        raise TypeError(f"{name} must be {expected}, got {value!r} ({type(value).__name__}); pass e.g. {example}")
    return float(value)


def check_temperature(value) -> float:
    """A real number in :data:`TEMPERATURE_RANGE` (the slider's range)."""
    value = _real_number("temperature", value, "a number", "temperature=0.8")
    low, high = TEMPERATURE_RANGE
    if not low <= value <= high:  # also rejects nan
        raise ExplorerInputError(f"temperature={value} is out of range: choose temperature from {low} to {high} "
                                 "(the slider's range; below 1 sharper, above 1 flatter)")
    return value


def check_top_p(value) -> float:
    """A real number in (0, 1]; 1 keeps every token."""
    value = _real_number("top_p", value, "a number in (0, 1] or None", "top_p=0.9")
    if not 0.0 < value <= 1.0:  # also rejects nan
        raise ExplorerInputError(f"top_p={value} is out of range: choose top_p from (0, 1], e.g. top_p=0.9 "
                                 "(1 or None: no cut)")
    return value


class SamplingExplorer(_Explorer):
    """Chapter 9: temperature, top-k and top-p cuts of a next-token distribution. Make it with
    :func:`sampling_explorer`.

    ``tokens`` and ``logits`` (one score per token) describe the distribution; ``temperature``,
    ``top_k`` (``len(tokens)`` = no cut) and ``top_p`` (1.0 = no cut) are the sliders. The
    browser applies them in the order of :func:`attention_book.sampling.next_token_probabilities`:
    divide by the temperature, keep the ``top_k`` highest scores, then the nucleus of mass
    ``top_p`` of what is left. :meth:`probabilities` computes the same with torch.
    """

    kind = traitlets.Unicode("sampling").tag(sync=True)
    logits = Vector().tag(sync=True)
    temperature = traitlets.Float(1.0).tag(sync=True)
    top_k = traitlets.Int(1).tag(sync=True)
    top_p = traitlets.Float(1.0).tag(sync=True)
    _static_traits = ("kind", "title", "tokens", "logits", "temperature", "top_k", "top_p")

    @traitlets.validate("tokens", "logits", "temperature", "top_k", "top_p")
    def _validate_all(self, proposal):
        self._check(self._state_with(proposal))
        return proposal["value"]

    def _check(self, state):
        tokens, logits = state["tokens"], state["logits"]
        if len(tokens) != len(logits):
            raise ExplorerInputError(f"there are {len(tokens)} tokens but {len(logits)} logits: pass one token "
                                     "label per logit")
        check_temperature(state["temperature"])
        check_int("top_k", state["top_k"], 1, len(logits), f" ({len(logits)} keeps every token)")
        check_top_p(state["top_p"])

    def _plain_text(self) -> str:
        return f"<SamplingExplorer: {len(self.tokens)} tokens>"

    def probabilities(self) -> torch.Tensor:
        """The distribution the bars show (float64, sums to 1), computed with torch.

        The same cuts as :func:`attention_book.sampling.next_token_probabilities`; tied logits
        keep their order (a stable sort), in the browser and here.
        """
        logits = torch.tensor(self.logits, dtype=torch.float64)  # (n,)
        scaled = logits / self.temperature
        order = torch.sort(logits, descending=True, stable=True).indices  # most likely first
        keep = torch.zeros_like(logits, dtype=torch.bool)
        keep[order[:self.top_k]] = True  # top-k
        if self.top_p < 1.0:  # top-p on what top-k left, renormalised
            ranked = masked_softmax(scaled, ~keep)[order]  # (n,), cut tokens hidden
            mass_before = ranked.cumsum(dim=-1) - ranked  # of the more likely tokens
            keep[order[mass_before >= self.top_p]] = False
        return masked_softmax(scaled, ~keep)

    def kept(self) -> torch.Tensor:
        """``True`` for the tokens the cuts keep (bool, one per token)."""
        return self.probabilities() > 0
