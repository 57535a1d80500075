"""attention_book.glue: a machine-dependent value recorded for the book build to paste."""

from __future__ import annotations

import nbformat
import pytest

from attention_book.glue import BUILD_LABEL, GLUE_PREFIX, glue, machine_label
from helpers import in_ci


def test_glue_returns_the_formatted_text_outside_a_notebook():
    assert glue("heldout_loss", 1.8000001, ".2f") == "1.80"
    assert glue("parameter_count", 301584, ",") == "301,584"
    assert glue("matching_weights", 5) == "5"
    assert glue("verdict", "not bit for bit equal") == "not bit for bit equal"


@pytest.mark.parametrize("name", ["", "Loss", "held out", "loss:2f", "loss`", "_loss", "loss__2", "loss-2"])
def test_names_must_read_as_words(name):
    with pytest.raises(ValueError, match="lower-case words"):
        glue(name, 1.0)


def test_bad_types_and_formats_say_what_to_use():
    with pytest.raises(TypeError, match="glue name must be a string"):
        glue(3, 1.0)
    with pytest.raises(TypeError, match="fmt must be a format spec"):
        glue("loss", 1.0, 2)
    with pytest.raises(ValueError, match="fmt='d' does not format value 1.5"):
        glue("loss", 1.5, "d")


def test_a_suggested_name_is_itself_valid():
    with pytest.raises(ValueError) as error:
        glue("Held-Out Loss", 1.0)
    assert "use e.g. 'held_out_loss'" in str(error.value)


def test_machine_label_names_the_build_machine_only_in_the_book_build(monkeypatch):
    monkeypatch.delenv("ATTENTION_BOOK_STATIC", raising=False)
    assert machine_label() == "this machine"
    monkeypatch.setenv("ATTENTION_BOOK_STATIC", "1")
    assert machine_label() == BUILD_LABEL == "this build's machine"


def _myst_nb_pastes(record: dict, spec: str = "s") -> str:
    """What myst-nb 1.4's ``{glue:text}`` role shows for a recorded output (its own function)."""
    try:
        from myst_nb.core.variables import format_plain_text
    except ImportError:
        if in_ci():
            pytest.fail("myst-nb (requirements-dev.txt) is missing in CI")
        pytest.skip("myst-nb not installed")
    return format_plain_text(record["data"]["text/plain"], spec)


@pytest.mark.slow
def test_a_kernel_records_what_myst_nb_pastes_digit_for_digit():
    """In a real kernel: one hidden display record per call, named for myst-nb, whose text the
    role pastes exactly as printed ("1.80", not the float 1.8)."""
    from helpers import ROOT, execute_notebook

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(
        "from attention_book.glue import glue\n"
        "print('loss', glue('heldout_loss', 1.8000001, '.2f'))\n"
        "glue('parameter_count', 301584, ',')\n"
        "glue('verdict', \"it's not bit for bit equal\")  # shown as the cell's result")]
    path = ROOT / "_build" / "glue-test.ipynb"
    path.parent.mkdir(exist_ok=True)
    nbformat.write(notebook, str(path))
    executed, _ = execute_notebook(path)
    outputs = executed.cells[0].outputs
    assert sorted(o.output_type for o in outputs) == ["display_data"] * 3 + ["execute_result", "stream"]
    assert [o.text for o in outputs if o.output_type == "stream"] == ["loss 1.80\n"]
    records = {o.metadata["scrapbook"]["name"]: o for o in outputs if o.output_type == "display_data"}
    assert set(records) == {"heldout_loss", "parameter_count", "verdict"}
    for record in records.values():
        assert record.metadata["scrapbook"]["mime_prefix"] == GLUE_PREFIX
        assert list(record.data) == [GLUE_PREFIX + "text/plain"]  # nothing a front end renders
    # myst-nb strips the prefix before it pastes
    pasted = {name: {"data": {"text/plain": o.data[GLUE_PREFIX + "text/plain"]}} for name, o in records.items()}
    assert _myst_nb_pastes(pasted["heldout_loss"]) == "1.80"
    assert _myst_nb_pastes(pasted["heldout_loss"], ".1f") == "1.8"  # a spec in the role still works
    assert _myst_nb_pastes(pasted["parameter_count"]) == "301,584"
    assert _myst_nb_pastes(pasted["verdict"]) == "it's not bit for bit equal"
