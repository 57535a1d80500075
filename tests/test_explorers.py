"""Kernel-side tests of the explorers: input checks, traits, two-way sync, the static fallback.

The browser side (the JavaScript math, sliders, keyboard) is tested in test_explorers_browser.py.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import re
from importlib import resources

import pytest
import torch

from attention_book.data import journey_inputs
from attention_book.explorers import (
    DkExplorer,
    TrainingPlayback,
    demo_training,
    demo_weights,
    dk_explorer,
    heads_explorer,
    mask_explorer,
    training_playback,
)

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture(autouse=True)
def live_kernel_mode(monkeypatch):
    """Tests run as in JupyterLab unless they opt into the book build's static mode."""
    monkeypatch.delenv("ATTENTION_BOOK_STATIC", raising=False)


@pytest.fixture
def journey():
    tokens, inputs = journey_inputs()
    W_query, W_key, _ = demo_weights(seed=123)
    return tokens, inputs, W_query, W_key


def torch_weights(inputs, W_query, W_key, columns, causal=False, scaled=True):
    """Plain torch: softmax((x Wq[:, cols]) (x Wk[:, cols])^T / sqrt(d) + mask)."""
    x = inputs.double()
    queries, keys = x @ W_query.double()[:, columns], x @ W_key.double()[:, columns]
    d = queries.shape[1]
    scores = queries @ keys.T / (math.sqrt(d) if scaled else 1.0)
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(len(x), len(x), dtype=torch.bool), 1), float("-inf"))
    return torch.softmax(scores, dim=-1)


class RecordingComm:
    """Stands in for the kernel comm: records what the widget sends to the front end."""

    comm_id = "recording-comm"
    kernel = True

    def __init__(self):
        self.sent = []

    def send(self, data=None, buffers=None, **kwargs):
        self.sent.append(data)

    def on_msg(self, callback):
        pass

    def close(self, *args, **kwargs):
        pass


def front_end_update(widget, **state):
    """Simulate the message the browser sends when the reader moves a control."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


# --------------------------------------------------------------------------- construction and traits


def test_traits_carry_the_readers_tensors_exactly(journey):
    tokens, inputs, W_query, W_key = journey
    explorer = dk_explorer(tokens, inputs, W_query, W_key)
    assert isinstance(explorer, DkExplorer) and explorer.kind == "dk"
    assert explorer.tokens == tokens
    assert torch.equal(torch.tensor(explorer.inputs, dtype=torch.float32), inputs)
    assert torch.equal(torch.tensor(explorer.w_query, dtype=torch.float32), W_query)
    assert explorer.d_k == W_query.shape[1] and explorer.scaled is True  # d_k=None starts at d_out
    state = explorer.get_state()
    assert state["w_key"] == W_key.double().tolist() and state["d_k"] == 8


def test_nn_linear_is_used_as_weight_transposed(journey):
    tokens, inputs, _, _ = journey
    torch.manual_seed(0)
    query, key = torch.nn.Linear(3, 4, bias=False), torch.nn.Linear(3, 4, bias=False)
    explorer = heads_explorer(tokens, inputs, query, key, num_heads=2)
    assert torch.allclose(torch.tensor(explorer.w_query, dtype=torch.float64), query.weight.T.double())
    expected = torch_weights(inputs, query.weight.T.detach(), key.weight.T.detach(), slice(0, 2))
    assert torch.allclose(explorer.attention_weights()[0], expected, atol=1e-12)


def test_attention_weights_match_plain_torch(journey):
    tokens, inputs, W_query, W_key = journey
    dk = dk_explorer(tokens, inputs, W_query, W_key, d_k=3, scaled=False)
    assert torch.allclose(dk.attention_weights(), torch_weights(inputs, W_query, W_key, slice(0, 3), scaled=False))
    heads = heads_explorer(tokens, inputs, W_query, W_key, num_heads=4, causal=True)
    weights = heads.attention_weights()
    assert weights.shape == (4, 6, 6)
    assert torch.allclose(weights[3], torch_weights(inputs, W_query, W_key, slice(6, 8), causal=True))
    mask = mask_explorer(tokens, inputs, W_query, W_key, causal=True)
    masked = mask.attention_weights()
    assert torch.all(masked.triu(1) == 0) and torch.allclose(masked.sum(-1), torch.ones(6, dtype=torch.float64))
    assert mask.query_index == 2  # default: the middle token
    assert mask_explorer(tokens, inputs, W_query, W_key, query_index=-1).query_index == 5


# --------------------------------------------------------------------------- bad input


def _bad_inputs():
    tokens, inputs = journey_inputs()
    W_query, W_key, _ = demo_weights(seed=123)
    nan_inputs = inputs.clone()
    nan_inputs[1, 2] = float("nan")
    inf_key = W_key.clone()
    inf_key[0, 0] = float("inf")
    return [
        ("token count", lambda: dk_explorer(tokens[:5], inputs, W_query, W_key), "5 tokens but inputs has 6 rows"),
        ("transposed W", lambda: dk_explorer(tokens, inputs, W_query.T, W_key), "looks transposed"),
        ("d_out mismatch", lambda: dk_explorer(tokens, inputs, W_query, W_key[:, :4]), "same width"),
        ("d_k zero", lambda: dk_explorer(tokens, inputs, W_query, W_key, d_k=0), "choose d_k from 1 to 8"),
        ("d_k too big", lambda: dk_explorer(tokens, inputs, W_query, W_key, d_k=9), "choose d_k from 1 to 8"),
        ("heads", lambda: heads_explorer(tokens, inputs, W_query, W_key, num_heads=3),
         r"d_out=8 is not divisible by num_heads=3: choose num_heads from \(1, 2, 4, 8\)"),
        ("nan", lambda: mask_explorer(tokens, nan_inputs, W_query, W_key), r"non-finite value \(nan\) at \[1, 2\]"),
        ("inf", lambda: heads_explorer(tokens, inputs, W_query, inf_key), r"W_key contains a non-finite value"),
        ("1-D", lambda: dk_explorer(tokens, inputs[0], W_query, W_key), r"inputs must be 2-D, got shape \(3,\)"),
        ("query", lambda: mask_explorer(tokens, inputs, W_query, W_key, query_index=6), "choose query_index"),
        ("empty tokens", lambda: training_playback([], [(0, torch.ones(1, 1))]), "tokens is empty"),
        ("no snapshots", lambda: training_playback(tokens, []), "snapshots is empty"),
        ("snapshot shape", lambda: training_playback(tokens, [(0, torch.ones(5, 5))]), r"expected \(6, 6\)"),
        ("steps order", lambda: training_playback(tokens, [(5, torch.ones(6, 6)), (5, torch.ones(6, 6))]),
         "steps must increase"),
        ("heads change", lambda: training_playback(tokens, [(0, torch.ones(6, 6)), (1, torch.ones(2, 6, 6))]),
         "first snapshot has"),
        ("losses length", lambda: training_playback(tokens, [(0, torch.ones(6, 6)), (10, torch.ones(6, 6))],
                                                    losses=[1.0, 0.9, 0.8]), "one loss per snapshot"),
        ("losses nan", lambda: training_playback(tokens, [(0, torch.ones(6, 6))], losses=[float("nan")]),
         "losses contains NaN"),
    ]


@pytest.mark.parametrize("make, message", [case[1:] for case in _bad_inputs()],
                         ids=[case[0] for case in _bad_inputs()])
def test_bad_input_raises_a_clear_value_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_wrong_types_raise_type_errors(journey):
    tokens, inputs, W_query, W_key = journey
    with pytest.raises(TypeError, match="split the sentence into words"):
        dk_explorer("Your journey starts", inputs, W_query, W_key)
    with pytest.raises(TypeError, match="d_k must be an int"):
        dk_explorer(tokens, inputs, W_query, W_key, d_k=True)
    with pytest.raises(TypeError, match="num_heads must be an int"):
        heads_explorer(tokens, inputs, W_query, W_key, num_heads=2.0)
    with pytest.raises(TypeError, match="causal must be True or False"):
        mask_explorer(tokens, inputs, W_query, W_key, causal=1)
    with pytest.raises(TypeError, match="W_query must be a tensor or an nn.Linear"):
        dk_explorer(tokens, inputs, torch.nn.ReLU(), W_key)


def test_bad_trait_values_from_python_are_refused_and_the_old_value_kept(journey):
    tokens, inputs, W_query, W_key = journey
    heads = heads_explorer(tokens, inputs, W_query, W_key, num_heads=2)
    with pytest.raises(ValueError, match=r"choose num_heads from \(1, 2, 4, 8\)"):
        heads.num_heads = 3
    assert heads.num_heads == 2
    dk = dk_explorer(tokens, inputs, W_query, W_key, d_k=2)
    with pytest.raises(ValueError, match="choose d_k from 1 to 8"):
        dk.d_k = 9
    with pytest.raises(ValueError, match="inputs has 6 rows"):
        dk.tokens = tokens[:4]
    assert dk.d_k == 2 and dk.tokens == tokens


def test_update_changes_related_traits_together_or_not_at_all(journey):
    tokens, inputs, W_query, W_key = journey
    dk = dk_explorer(tokens, inputs, W_query, W_key, d_k=8)
    dk.update(tokens=tokens[:4], inputs=inputs[:4])  # T changes: both at once is consistent
    assert dk.tokens == tokens[:4] and len(dk.inputs) == 4
    with pytest.raises(ValueError, match="choose d_k from 1 to 4"):
        dk.update(w_query=W_query[:, :4], w_key=W_key[:, :4])  # d_k=8 no longer fits
    assert len(dk.w_query[0]) == 8, "a refused update must leave the widget unchanged"
    dk.update(w_query=W_query[:, :4], w_key=W_key[:, :4], d_k=4)
    assert dk.d_k == 4


# --------------------------------------------------------------------------- two-way sync


def test_python_side_change_is_sent_to_the_front_end(journey):
    tokens, inputs, W_query, W_key = journey
    explorer = mask_explorer(tokens, inputs, W_query, W_key, causal=True, query_index=1)
    explorer.comm = RecordingComm()
    explorer.query_index = 4
    explorer.causal = False
    updates = [message["state"] for message in explorer.comm.sent if message.get("method") == "update"]
    assert {"query_index": 4} in updates and {"causal": False} in updates
    assert explorer.get_state()["query_index"] == 4 and explorer.get_state()["causal"] is False
    explorer.close()


@pytest.mark.parametrize("kind, change", [
    ("dk", {"d_k": 5}), ("dk", {"scaled": False}), ("heads", {"num_heads": 8}), ("heads", {"causal": True}),
    ("mask", {"query_index": 0}), ("mask", {"causal": False}), ("playback", {"snapshot_index": 3}),
])
def test_front_end_slider_update_reaches_the_python_trait(journey, kind, change):
    tokens, inputs, W_query, W_key = journey
    if kind == "playback":
        explorer = training_playback(tokens, [(step, torch.eye(6)) for step in range(0, 50, 10)])
    else:
        make = {"dk": dk_explorer, "heads": heads_explorer, "mask": mask_explorer}[kind]
        explorer = make(tokens, inputs, W_query, W_key)
    seen = []
    explorer.observe(lambda change: seen.append((change["name"], change["new"])), names=list(change))
    front_end_update(explorer, **change)
    (name, value), = change.items()
    assert getattr(explorer, name) == value
    assert seen == [(name, value)], "observers of the trait must fire when the reader moves the control"


def test_front_end_update_changes_what_python_computes(journey):
    tokens, inputs, W_query, W_key = journey
    explorer = dk_explorer(tokens, inputs, W_query, W_key, d_k=8)
    before = explorer.attention_weights()
    front_end_update(explorer, d_k=1)
    assert torch.allclose(explorer.attention_weights(), torch_weights(inputs, W_query, W_key, slice(0, 1)))
    assert not torch.allclose(before, explorer.attention_weights())


# --------------------------------------------------------------------------- display bundles


def _decode(b64: str) -> str:
    return gzip.decompress(base64.b64decode(b64)).decode("utf-8")


def test_live_mode_shows_the_widget_only(journey):
    explorer = dk_explorer(*journey)
    data, _ = explorer._repr_mimebundle_()
    assert WIDGET_MIME in data and "text/html" not in data
    assert explorer.comm is not None


def test_static_mode_emits_a_self_contained_html_fallback(journey, monkeypatch):
    monkeypatch.setenv("ATTENTION_BOOK_STATIC", "1")
    explorer = heads_explorer(*journey, num_heads=4, causal=True)
    assert explorer.comm is None, "the book build must not save widget state (it would be embedded in the page)"
    data, _ = explorer._repr_mimebundle_()
    assert set(data) == {"text/plain", "text/html"}
    html = data["text/html"]
    element_id = re.search(r'<div class="abx-static" id="([^"]+)"', html).group(1)
    assert 'document.getElementById(id)' in html and f'const id = "{element_id}"' in html
    script = html.split('<script type="module">', 1)[1]
    assert script.count("</script>") == 1 and script.endswith("</script>") and "<!--" not in html
    assert "http://" not in html.replace("http://www.w3.org", "") and "https://" not in html
    code = json.loads(_decode(re.search(r'const code = "([^"]+)"', html).group(1)))
    assert ".abx" in code["css"] and code["js"].rstrip().endswith("return { render, standInModel };")
    assert "export default" not in code["js"]
    state = json.loads(_decode(re.search(r'const data = "([^"]+)"', html).group(1)))
    assert state["kind"] == "heads" and state["num_heads"] == 4 and state["causal"] is True
    assert state["w_query"] == explorer.w_query and state["tokens"] == explorer.tokens


def test_same_explorer_twice_on_a_page_gets_unique_ids(journey, monkeypatch):
    monkeypatch.setenv("ATTENTION_BOOK_STATIC", "1")
    explorer = dk_explorer(*journey)
    first, second = explorer.static_html(), explorer.static_html()
    other = dk_explorer(*journey).static_html()
    ids = [re.search(r'id="(abx-[^"]+)"', html).group(1) for html in (first, second, other)]
    assert len(set(ids)) == 3


def test_display_in_static_mode_publishes_the_html(journey, monkeypatch):
    """Goes through IPython's display machinery (``_ipython_display_`` on ipywidgets 7)."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.display import display
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    monkeypatch.setenv("ATTENTION_BOOK_STATIC", "1")
    explorer = mask_explorer(*journey)
    with capture_output() as captured:
        display(explorer)
    assert len(captured.outputs) == 1
    assert 'data-explorer-root="mask"' in captured.outputs[0].data["text/html"]


def test_module_and_css_ship_with_the_package():
    folder = resources.files("attention_book.explorers")
    source = (folder / "explorer.js").read_text(encoding="utf-8")
    assert source.rstrip().endswith("export default { render };")
    assert "</script" not in source.lower() and "<!--" not in source
    assert "stopPropagation" in source, "arrow keys must not reach JupyterLab's notebook shortcuts"
    assert (folder / "explorer.css").is_file()


# --------------------------------------------------------------------------- playback and demo data


def test_training_playback_traits_and_loss_alignment():
    tokens, _ = journey_inputs()
    snapshots = [(step, torch.softmax(torch.randn(2, 6, 6), -1)) for step in (0, 5, 10)]
    per_snapshot = training_playback(tokens, snapshots, losses=[3.0, 2.0, 1.0])
    assert isinstance(per_snapshot, TrainingPlayback) and per_snapshot.loss_steps == [0, 5, 10]
    per_step = training_playback(tokens, snapshots, losses=torch.linspace(3, 1, 11))
    assert per_step.loss_steps == list(range(11))
    assert torch.allclose(per_step.weights_at(1), snapshots[1][1], atol=1e-6)
    assert per_step.steps == [0, 5, 10] and per_step.snapshot_index == 0
    with pytest.raises(ValueError, match="choose snapshot_index from 0 to 2"):
        per_step.snapshot_index = 3


def test_demo_weights_are_seeded_and_leave_the_global_rng_alone():
    state = torch.get_rng_state()
    first, second = demo_weights(seed=7), demo_weights(seed=7)
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert not torch.equal(demo_weights(seed=8)[0], first[0])
    assert first[0].shape == (3, 8)


def test_demo_training_learns_the_two_patterns():
    tokens, snapshots, losses = demo_training(seed=0)
    steps = [step for step, _ in snapshots]
    assert steps == list(range(0, 121, 6)) and len(losses) == 121
    assert losses[-1] < 0.1 * losses[0]
    final = snapshots[-1][1]  # (2, T, T)
    assert final.shape == (2, 6, 6) and torch.all(final.triu(1) == 0)
    assert final[0, 1:].argmax(-1).tolist() == [0, 1, 2, 3, 4]  # head 1: the previous token
    assert final[1].argmax(-1).tolist() == [0] * 6  # head 2: the first token


# --------------------------------------------------------------------------- several sentences, structure


def sentence_batch(num_sentences=3, num_tokens=4, steps=(0, 10, 20), heads=None, seed=0):
    """Causal (S, T, T) (or (S, H, T, T)) weights per step for ``num_sentences`` sentences."""
    generator = torch.Generator().manual_seed(seed)
    tokens = [[f"w{s}{t}" for t in range(num_tokens)] for s in range(num_sentences)]
    shape = (num_sentences,) + ((heads,) if heads else ()) + (num_tokens, num_tokens)
    hidden = torch.ones(num_tokens, num_tokens, dtype=torch.bool).triu(1)
    snapshots = [(step, torch.randn(shape, generator=generator).masked_fill(hidden, float("-inf")).softmax(-1))
                 for step in steps]
    return tokens, snapshots


@pytest.mark.parametrize("heads", [None, 2])
def test_training_playback_takes_several_sentences(heads):
    tokens, snapshots = sentence_batch(heads=heads)
    playback = training_playback(tokens, snapshots, losses=[3.0, 2.0, 1.0])
    assert playback.tokens == tokens and playback.sentence_index == 0 and playback.causal is True
    for index, (_, weights) in enumerate(snapshots):
        for sentence in range(3):
            expected = weights[sentence] if heads else weights[sentence].unsqueeze(0)
            assert torch.allclose(playback.weights_at(index, sentence=sentence), expected, atol=1e-6)
    playback.sentence_index = 2
    assert torch.allclose(playback.weights_at(1), snapshots[1][1][2].reshape(-1, 4, 4), atol=1e-6)
    with pytest.raises(ValueError, match="choose sentence_index from 0 to 2"):
        playback.sentence_index = 3
    assert playback.sentence_index == 2


def test_training_playback_sentence_errors_name_the_fix():
    tokens, snapshots = sentence_batch()
    with pytest.raises(ValueError, match=r"different lengths \[3, 4\]"):
        training_playback([tokens[0][:3]] + tokens[1:], snapshots)
    with pytest.raises(ValueError, match=r"expected \(3, 4, 4\) or \(3, num_heads, 4, 4\) for 3 sentences"):
        training_playback(tokens, [(step, weights[:2]) for step, weights in snapshots])
    with pytest.raises(TypeError, match=r"tokens\[1\] must be strings"):
        training_playback([tokens[0], [1, 2, 3, 4], tokens[2]], snapshots)


def test_training_playback_hatches_causal_zeros_only_when_they_are_causal():
    tokens, snapshots = sentence_batch()
    assert training_playback(tokens, snapshots).causal is True
    dense = [(step, torch.full((3, 4, 4), 0.25)) for step, _ in snapshots]
    assert training_playback(tokens, dense).causal is False
    assert training_playback(tokens, snapshots, causal=False).causal is False
    with pytest.raises(TypeError, match="causal must be True or False"):
        training_playback(tokens, snapshots, causal=1)


def test_static_playback_carries_sentences_and_the_selector_code(monkeypatch):
    monkeypatch.setenv("ATTENTION_BOOK_STATIC", "1")
    tokens, snapshots = sentence_batch()
    html = training_playback(tokens, snapshots)._repr_mimebundle_()[0]["text/html"]
    state = json.loads(gzip.decompress(base64.b64decode(re.search(r'const data = "([^"]+)"', html).group(1))))
    assert state["tokens"] == tokens and state["sentence_index"] == 0 and state["causal"] is True
    assert len(state["snapshots"]) == 3 and len(state["snapshots"][0]) == 3  # (steps, S, H, T, T)
    source = (resources.files("attention_book.explorers") / "explorer.js").read_text(encoding="utf-8")
    assert '"sentence_index"' in source and 'h("select"' in source


def test_explorers_namespace_exports_nothing_private():
    import types

    import attention_book.explorers as explorers

    leaked = [name for name, value in vars(explorers).items()
              if name.startswith("_") and not name.startswith("__") and not isinstance(value, types.ModuleType)]
    assert leaked == [], f"private names re-exported by attention_book.explorers: {leaked}"
    assert all(hasattr(explorers, name) for name in explorers.__all__)
    assert not [name for name in explorers.__all__ if name.startswith("_")]


def called_names(function) -> set:
    import ast
    import inspect
    import textwrap

    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            names.add(ast.unparse(node.func))
    return names


def test_explorers_compute_attention_through_the_core():
    from attention_book.explorers import _demo, _widgets

    for function in (_widgets._ProjectionExplorer._weights, _demo.demo_training):
        names = called_names(function)
        assert "scaled_dot_product_attention" in names, f"{function.__qualname__} must use attention_book.functional"
        assert not {"torch.softmax", "F.softmax", "softmax"} & names, f"{function.__qualname__} has its own softmax"
    assert _widgets.scaled_dot_product_attention.__module__ == "attention_book.functional"
    assert _demo.scaled_dot_product_attention.__module__ == "attention_book.functional"


def test_in_a_kernel_only_the_first_explorer_of_a_page_carries_the_module(journey, monkeypatch):
    from attention_book.explorers import _static

    monkeypatch.setattr(_static, "_in_kernel", lambda: True)
    monkeypatch.setattr(_static, "_sent_in_kernel", set())
    first, second = (dk_explorer(*journey).static_html(once_per_page=True) for _ in range(2))
    code = re.compile(r'const code = "([^"]*)"')
    assert len(code.search(first).group(1)) > 1000 and code.search(second).group(1) == ""
    assert "missing: an earlier explorer on this page carries it" in second
    assert len(code.search(dk_explorer(*journey).static_html()).group(1)) > 1000, "default: self-contained"


# --------------------------------------------------------------------------- the sampling explorer (chapter 9)

from attention_book.explorers import SamplingExplorer, demo_next_words, sampling_explorer  # noqa: E402

SAMPLE_TOKENS = [" the", " a", " her", " his", "\n", " Mr", ",", " Emma"]
SAMPLE_LOGITS = torch.tensor([3.1, 2.4, 2.2, 1.5, 0.3, -0.4, -1.0, -2.2])


def torch_sampling(logits, temperature=1.0, top_k=None, top_p=None):
    """Plain torch, float64: softmax(logits / T), keep the k highest, then the nucleus of mass p."""
    scaled = torch.as_tensor(logits, dtype=torch.float64) / temperature
    keep = torch.ones_like(scaled, dtype=torch.bool)
    if top_k is not None:
        keep[scaled.argsort(descending=True, stable=True)[top_k:]] = False
    if top_p is not None and top_p < 1:
        probs = torch.softmax(scaled.masked_fill(~keep, float("-inf")), dim=-1)
        sorted_probs, order = probs.sort(descending=True, stable=True)
        keep_sorted = (sorted_probs.cumsum(-1) - sorted_probs) < top_p
        keep &= keep_sorted.scatter(0, order, keep_sorted)
    return torch.softmax(scaled.masked_fill(~keep, float("-inf")), dim=-1)


def test_sampling_explorer_traits_and_defaults():
    explorer = sampling_explorer(SAMPLE_TOKENS, SAMPLE_LOGITS)
    assert isinstance(explorer, SamplingExplorer) and explorer.kind == "sampling"
    assert explorer.tokens == SAMPLE_TOKENS and explorer.logits == SAMPLE_LOGITS.double().tolist()
    assert (explorer.temperature, explorer.top_k, explorer.top_p) == (1.0, 8, 1.0)  # no cut
    assert torch.allclose(explorer.probabilities(), torch.softmax(SAMPLE_LOGITS.double(), -1), atol=1e-12)
    assert explorer.kept().all()
    state = explorer.get_state()
    assert state["logits"] == explorer.logits and state["top_k"] == 8


@pytest.mark.parametrize("temperature, top_k, top_p", [
    (1.0, None, None), (0.5, 3, None), (1.5, None, 0.6), (0.7, 5, 0.8), (2.0, 1, 0.9), (0.1, 8, 0.05),
    (1.25, 6, 0.95),
])
def test_sampling_explorer_probabilities_match_plain_torch_and_the_package(temperature, top_k, top_p):
    from attention_book.sampling import next_token_probabilities

    explorer = sampling_explorer(SAMPLE_TOKENS, SAMPLE_LOGITS, temperature=temperature, top_k=top_k, top_p=top_p)
    shown = explorer.probabilities()
    expected = torch_sampling(SAMPLE_LOGITS, temperature, top_k, top_p)
    assert torch.allclose(shown, expected, atol=1e-12), (shown, expected)
    package = next_token_probabilities(SAMPLE_LOGITS.double(), temperature=temperature, top_k=top_k, top_p=top_p)
    assert torch.allclose(shown, package, atol=1e-12)
    assert torch.equal(explorer.kept(), expected > 0) and abs(float(shown.sum()) - 1) < 1e-12


def test_sampling_explorer_keeps_float64_logits_exactly():
    logits = torch.tensor([5.572154032177765, 5.541263545158426, 1 / 3], dtype=torch.float64)
    for given in (logits, logits.tolist(), logits.numpy()):
        explorer = sampling_explorer(["a", "b", "c"], given)
        assert explorer.logits == logits.tolist(), type(given)
    explorer.logits = [0.1, 0.2, 0.3]
    assert explorer.logits == [0.1, 0.2, 0.3]


def test_sampling_explorer_keeps_tied_logits_in_their_order():
    tokens, logits = ["a", "b", "c", "d", "e"], [1.0, 2.0, 1.0, 1.0, 0.0]
    explorer = sampling_explorer(tokens, logits, top_k=3)
    assert explorer.kept().tolist() == [True, True, True, False, False]  # "a" and "c" before "d"
    explorer.top_k, explorer.top_p = 5, 0.7  # 0.45 + 0.16 < 0.7: two of the three ties are needed
    assert explorer.kept().tolist() == [True, True, True, False, False]
    assert torch.allclose(explorer.probabilities(), torch_sampling(logits, 1.0, 5, 0.7), atol=1e-12)


def _sampling_bad_inputs():
    tokens, logits = SAMPLE_TOKENS, SAMPLE_LOGITS
    return [
        ("count", lambda: sampling_explorer(tokens[:5], logits), ValueError, "5 tokens but 8 logits"),
        ("2-D logits", lambda: sampling_explorer(tokens, logits[None]), ValueError, r"logits must be 1-D.*logits\[0, -1\]"),
        ("one logit", lambda: sampling_explorer(tokens[:1], logits[:1]), ValueError, "pass 2 to 200"),
        ("vocabulary", lambda: sampling_explorer([str(i) for i in range(50257)], torch.zeros(50257)), ValueError,
         r"topk\(30\)"),
        ("-inf", lambda: sampling_explorer(tokens, logits.masked_fill(logits < 0, float("-inf"))), ValueError,
         r"non-finite value \(-inf\) at \[5\]"),
        ("T small", lambda: sampling_explorer(tokens, logits, temperature=0.0), ValueError,
         "choose temperature from 0.1 to 2.0"),
        ("T big", lambda: sampling_explorer(tokens, logits, temperature=3), ValueError, "choose temperature from 0.1"),
        ("T nan", lambda: sampling_explorer(tokens, logits, temperature=float("nan")), ValueError, "temperature=nan"),
        ("T str", lambda: sampling_explorer(tokens, logits, temperature="0.7"), TypeError, "temperature must be a number"),
        ("k zero", lambda: sampling_explorer(tokens, logits, top_k=0), ValueError, "choose top_k from 1 to 8"),
        ("k big", lambda: sampling_explorer(tokens, logits, top_k=9), ValueError, "choose top_k from 1 to 8"),
        ("k float", lambda: sampling_explorer(tokens, logits, top_k=2.0), TypeError, "top_k must be an int"),
        ("k bool", lambda: sampling_explorer(tokens, logits, top_k=True), TypeError, "top_k must be an int"),
        ("p zero", lambda: sampling_explorer(tokens, logits, top_p=0.0), ValueError, r"choose top_p from \(0, 1\]"),
        ("p big", lambda: sampling_explorer(tokens, logits, top_p=1.5), ValueError, "top_p=1.5 is out of range"),
        ("p str", lambda: sampling_explorer(tokens, logits, top_p="0.9"), TypeError, "top_p must be a number"),
        ("tokens str", lambda: sampling_explorer("the a her", logits), TypeError, "split the sentence"),
        ("logits str", lambda: sampling_explorer(tokens, "3.1 2.4"), TypeError, "logits must be a 1-D tensor"),
        ("logits bool", lambda: sampling_explorer(tokens, logits > 0), TypeError, "logits must hold real numbers"),
    ]


@pytest.mark.parametrize("make, error, message", [case[1:] for case in _sampling_bad_inputs()],
                         ids=[case[0] for case in _sampling_bad_inputs()])
def test_sampling_explorer_bad_input_names_the_fix(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_sampling_explorer_refuses_bad_slider_values_from_python_and_keeps_the_old_ones():
    explorer = sampling_explorer(SAMPLE_TOKENS, SAMPLE_LOGITS, top_k=4, top_p=0.8, temperature=0.7)
    for name, value, message in (("top_k", 9, "choose top_k from 1 to 8"), ("top_p", 0.0, "top_p=0.0"),
                                 ("temperature", 2.5, "choose temperature from 0.1 to 2.0")):
        with pytest.raises(ValueError, match=message):
            setattr(explorer, name, value)
    assert (explorer.top_k, explorer.top_p, explorer.temperature) == (4, 0.8, 0.7)
    with pytest.raises(ValueError, match="5 tokens but 8 logits"):
        explorer.tokens = SAMPLE_TOKENS[:5]
    with pytest.raises(ValueError, match="choose top_k from 1 to 3"):
        explorer.update(tokens=SAMPLE_TOKENS[:3], logits=SAMPLE_LOGITS[:3])  # k = 4 no longer fits
    explorer.update(tokens=SAMPLE_TOKENS[:3], logits=SAMPLE_LOGITS[:3], top_k=2)
    assert explorer.top_k == 2 and len(explorer.logits) == 3


@pytest.mark.parametrize("change", [{"temperature": 0.35}, {"top_k": 3}, {"top_p": 0.45}])
def test_sampling_slider_update_from_the_front_end_reaches_python(change):
    explorer = sampling_explorer(SAMPLE_TOKENS, SAMPLE_LOGITS)
    before = explorer.probabilities()
    seen = []
    explorer.observe(lambda event: seen.append((event["name"], event["new"])), names=list(change))
    front_end_update(explorer, **change)
    (name, value), = change.items()
    assert getattr(explorer, name) == value and seen == [(name, value)]
    assert not torch.allclose(explorer.probabilities(), before), "the front end's change must change the bars"


def test_sampling_explorer_static_fallback_carries_its_state(monkeypatch):
    monkeypatch.setenv("ATTENTION_BOOK_STATIC", "1")
    explorer = sampling_explorer(SAMPLE_TOKENS, SAMPLE_LOGITS, temperature=0.8, top_k=5, top_p=0.9, title="next")
    assert explorer.comm is None
    html = explorer._repr_mimebundle_()[0]["text/html"]
    assert 'data-explorer-root="sampling"' in html and "https://" not in html
    state = json.loads(_decode(re.search(r'const data = "([^"]+)"', html).group(1)))
    assert state == {"kind": "sampling", "title": "next", "tokens": SAMPLE_TOKENS, "logits": explorer.logits,
                     "temperature": 0.8, "top_k": 5, "top_p": 0.9}
    code = json.loads(_decode(re.search(r'const code = "([^"]+)"', html).group(1)))
    assert "samplingExplorer" in code["js"] and "abx-dist" in code["css"]


def test_demo_next_words_counts_the_novels():
    words, logits, total = demo_next_words("Mr.", top=12)
    assert len(words) == 12 == len(logits) and len(set(words)) == 12
    counts = logits.exp().round()
    assert torch.allclose(logits.exp(), counts, atol=1e-9) and bool((counts[:-1] >= counts[1:]).all())
    assert counts.sum() <= total and words[0][0].isupper()
    with pytest.raises(ValueError, match="pick a more frequent word"):
        demo_next_words("Zzyzx")
    with pytest.raises(TypeError, match="context must be a non-empty str"):
        demo_next_words("")
