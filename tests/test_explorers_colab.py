"""The explorers in Colab: its custom widget manager is switched on, and no object repr is shown.

Colab cannot be run here, so a fake ``google.colab`` package stands in for it (the module Colab's
kernel imports at start, with ``output.enable_custom_widget_manager()``); anywidget's own Colab
code reads ``output._widgets._installed_url``, which the fake provides too.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from attention_book.explorers import _colab, dk_explorer, heads_explorer
from attention_book.explorers import _widgets

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def journey():
    torch.manual_seed(123)
    tokens = ["Your", "journey", "starts", "with", "one", "step"]
    return tokens, torch.rand(6, 3), torch.rand(3, 2), torch.rand(3, 2)


@pytest.fixture
def fake_colab(monkeypatch):
    """A stand-in for Colab's ``google.colab`` package that records the manager being enabled."""
    calls = []
    google = types.ModuleType("google")
    colab = types.ModuleType("google.colab")
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: calls.append("enable")
    output._widgets = types.SimpleNamespace(_installed_url="https://colab.example/custom-widgets.js")
    google.colab, colab.output = colab, output
    for name, module in (("google", google), ("google.colab", colab), ("google.colab.output", output)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(_colab, "_enabled", False)
    return calls


def test_in_colab_the_custom_widget_manager_is_enabled_once(journey, fake_colab):
    first = dk_explorer(*journey)
    data, _ = first._repr_mimebundle_()
    assert WIDGET_MIME in data and fake_colab, "Colab's custom widget manager was not enabled"
    heads_explorer(*journey)._repr_mimebundle_()
    first._repr_mimebundle_()
    assert _colab._enabled
    # anywidget may enable it too (when google.colab.output is imported); ours runs once per kernel
    assert 1 <= len(fake_colab) <= 2


def test_the_manager_is_enabled_even_when_only_google_colab_is_imported(journey, monkeypatch):
    """Colab's kernel imports ``google.colab``; ``google.colab.output`` may not be imported yet
    (anywidget only looks for the latter), so the course imports it itself."""
    calls = []
    google, colab = types.ModuleType("google"), types.ModuleType("google.colab")
    google.colab = colab
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: calls.append("enable")
    colab.output = output
    monkeypatch.setitem(sys.modules, "google", google)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.delitem(sys.modules, "google.colab.output", raising=False)
    monkeypatch.setattr(_colab, "_enabled", False)
    assert _colab.enable_colab_widgets() and calls == ["enable"]


def test_outside_colab_nothing_is_enabled(journey, monkeypatch):
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.setattr(_colab, "_enabled", False)
    dk_explorer(*journey)._repr_mimebundle_()
    assert not _colab.in_colab() and not _colab._enabled


def test_a_colab_without_the_manager_gets_a_warning_not_an_error(journey, fake_colab, monkeypatch):
    def broken():
        raise AttributeError("enable_custom_widget_manager")

    monkeypatch.setattr(sys.modules["google.colab.output"], "enable_custom_widget_manager", broken)
    with pytest.warns(RuntimeWarning, match="custom widget manager"):
        assert _colab.enable_colab_widgets() is False
    assert not _colab._enabled


def test_a_front_end_without_widgets_reads_a_sentence_not_a_repr(journey, fake_colab):
    explorer = dk_explorer(*journey)
    data, _ = explorer._repr_mimebundle_()
    text = data["text/plain"]
    assert "object at 0x" not in text and "DkExplorer" in text and "6 tokens" in text
    assert "enable_custom_widget_manager()" in text and "anywidget" in text
    assert data[WIDGET_MIME]["model_id"] == explorer.model_id


def test_anywidgets_colab_metadata_is_kept(journey, fake_colab):
    """anywidget names Colab's custom widget manager in the display metadata; it must survive."""
    _, metadata = dk_explorer(*journey)._repr_mimebundle_()
    if metadata:  # anywidget releases that add it
        assert metadata[WIDGET_MIME]["colab"]["custom_widget_manager"]["url"].startswith("https://colab.example/")


def test_the_ipywidgets_7_display_path_publishes_the_same_bundle(journey, fake_colab):
    """Older Colab runtimes ship ipywidgets 7, which displays through ``_ipython_display_``."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    InteractiveShell.instance()
    explorer = dk_explorer(*journey)
    with capture_output() as captured:
        explorer._display_with_ipywidgets7()
    (output,) = captured.outputs
    assert WIDGET_MIME in output.data and "object at 0x" not in output.data["text/plain"]
    assert fake_colab
    if _widgets._IPYWIDGETS_MAJOR < 8:
        assert type(explorer)._ipython_display_ is _widgets._Explorer._display_with_ipywidgets7
