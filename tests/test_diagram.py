"""The whole-computation diagram and the weight-layout figure: drawn, highlighted, validated."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import FancyBboxPatch  # noqa: E402

from attention_book.diagram import HIGHLIGHT_FACE, STEPS, computation_diagram, weight_layout_diagram  # noqa: E402


def box_faces(fig):
    """Label text -> whether its box is highlighted, for every box of the diagram."""
    ax = fig.axes[0]
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    highlighted = [matplotlib.colors.to_hex(p.get_facecolor()) == HIGHLIGHT_FACE.lower() for p in boxes]
    return boxes, highlighted


def texts(fig):
    return [t.get_text() for t in fig.axes[0].texts]


def test_diagram_shows_every_step_with_its_shape():
    fig = computation_diagram()
    shown = " ".join(texts(fig))
    for label in ("$x$", "$W_q$", "$W_k$", "$W_v$", "$Q$", "$K$", "$V$", "$Q K^\\top$",
                  "$\\div\\sqrt{d_k}$", "softmax", "$@\\ V$", "$Z$"):
        assert label in texts(fig), label
    for shape in ("(T, d_in)", "(d_in, d_k)", "(d_in, d_v)", "(T, d_k)", "(T, d_v)", "(T, T)"):
        assert shape in shown, shape
    _, highlighted = box_faces(fig)
    assert not any(highlighted), "highlight=None must highlight nothing"
    plt.close(fig)


@pytest.mark.parametrize("step", list(STEPS))
def test_highlight_marks_exactly_the_boxes_of_a_step(step):
    fig = computation_diagram(highlight=step)
    boxes, highlighted = box_faces(fig)
    assert 1 <= sum(highlighted) <= 3, (step, sum(highlighted))
    bold = [t.get_text() for t in fig.axes[0].texts if t.get_fontweight() == "bold"]
    assert len(bold) == sum(highlighted)
    assert step in fig.axes[0].get_title()
    plt.close(fig)


def test_several_steps_and_an_existing_axes():
    fig, ax = plt.subplots()
    assert computation_diagram(highlight=["scale", "softmax"], ax=ax) is fig
    _, highlighted = box_faces(fig)
    assert sum(highlighted) == 2
    plt.close(fig)


def test_bad_highlight_is_explained():
    with pytest.raises(ValueError, match=r"highlight='soft max'.*choose from"):
        computation_diagram(highlight="soft max")
    with pytest.raises(TypeError, match="highlight must be None"):
        computation_diagram(highlight=3)
    with pytest.raises(TypeError, match="title must be a str"):
        computation_diagram(title=1)


def test_weight_layout_shows_the_transpose():
    fig = weight_layout_diagram(3, 2)
    shown = texts(fig)
    # w_32 (input 3 -> output 2) appears once in each grid
    assert shown.count("$w_{32}$") == 2
    assert any("(d_in, d_out) = (3, 2)" in t for t in shown)
    assert any("(d_out, d_in) = (2, 3)" in t for t in shown)
    assert "x @ weight.T" in shown
    plt.close(fig)
    with pytest.raises(ValueError, match="d_in=9"):
        weight_layout_diagram(9, 2)
    with pytest.raises(TypeError, match="d_out must be an int"):
        weight_layout_diagram(3, 2.0)
