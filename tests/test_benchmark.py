"""attention_book.benchmark (chapter 10): five implementations, one answer; tables and plot."""

from __future__ import annotations

import pytest
import torch

from attention_book.benchmark import (
    IMPLEMENTATIONS,
    Table,
    attention_implementations,
    benchmark_attention,
    benchmark_table,
    plot_benchmark,
    sweep,
)
from attention_book.measure import time_call


def test_implementations_agree_except_the_wrapper_without_out_proj():
    functions = attention_implementations(d_model=16, num_heads=4, context_length=6)
    assert list(functions) == list(IMPLEMENTATIONS)
    x = torch.randn(2, 6, 16)
    with torch.no_grad():
        reference = functions["MHA"](x)
        for name in ("fused", "SDPA", "nn.MHA"):
            torch.testing.assert_close(functions[name](x), reference, atol=1e-5, rtol=1e-5)
        assert functions["wrapper"](x).shape == reference.shape


def test_sweep_and_tables():
    rows = sweep([8], batch_size=1, d_model=8, num_heads=2, repeats=1,
                 skip=lambda T, pass_name, name: name == "wrapper" and pass_name != "forward")
    assert [row["pass_name"] for row in rows] == ["forward", "forward+backward"]
    assert "wrapper" not in rows[1]["seconds"] and rows[0]["dtype"] == "float32"
    assert rows[1]["flops"] == 3 * rows[0]["flops"]
    table = benchmark_table(rows)
    assert isinstance(table, Table) and len(table.rows) == 2
    assert "skipped" in table.rows[1]
    assert "1.0x" in benchmark_table(rows, "ratio").rows[0]
    assert repr(table) == "<Table: 2 rows x 7 columns>"
    assert table.to_markdown().count("\n") == 3
    assert table._repr_html_().count("<tr>") == 3
    flops_cell = benchmark_table(rows, "GFLOP/s").rows[0][3]  # MHA, forward
    expected = rows[0]["flops"] / rows[0]["seconds"]["MHA"] / 1e9
    assert flops_cell == f"{expected:.0f}"


def test_plot_benchmark_draws_one_line_per_implementation():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sweep([8, 16], d_model=8, num_heads=2, repeats=1, passes=["forward"])
    axes = plot_benchmark(rows)
    assert len(axes) == 1 and len(axes[0].lines) == len(IMPLEMENTATIONS)
    plt.close("all")


def test_bfloat16_sweep_runs():
    rows = sweep([8], d_model=8, num_heads=2, repeats=1, passes=["forward"],
                 dtype=torch.bfloat16)
    assert rows[0]["dtype"] == "bfloat16" and len(rows[0]["seconds"]) == 5


@pytest.mark.parametrize("call, message", [
    (lambda: Table(["a", "b"], [[1, 2, 3]]), "the header has 2"),
    (lambda: sweep([8], d_model=8, num_heads=2, passes=["backward"]), "passes must be"),
    (lambda: benchmark_attention(8, d_model=8, num_heads=2, names=["flash"]), "choose from"),
    (lambda: benchmark_table([], quantity="seconds"), "quantity"),
    (lambda: time_call(lambda: None, statistic="mean"), "statistic"),
])
def test_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()
