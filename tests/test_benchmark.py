"""attention_book.benchmark (chapter 10): five implementations, one answer; tables and plot."""

from __future__ import annotations

import pytest
import torch

from attention_book.benchmark import (
    IMPLEMENTATIONS,
    Table,
    attention_implementations,
    benchmark_attention,
    DECODE_VARIANTS,
    benchmark_table,
    fused_overhead,
    plot_benchmark,
    sweep,
    time_decoding,
)
from attention_book.measure import Timing, time_call

IMPLEMENTATIONS_INDEX = {name: 2 + i for i, name in enumerate(IMPLEMENTATIONS)}


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
    assert table.to_markdown().split("\n\n")[0].count("\n") == 3  # then the note
    assert table._repr_html_().count("<tr>") == 3
    flops_cell = benchmark_table(rows, "GFLOP/s").rows[0][3]  # MHA, forward
    expected = rows[0]["flops"] / rows[0]["seconds"]["MHA"] / 1e9
    assert flops_cell.rstrip(" ⚠") == f"{expected:.0f}"
    # the seconds are the medians of the timings kept with them
    assert rows[0]["seconds"]["MHA"] == rows[0]["timings"]["MHA"].median


def _row(seconds_by_name):
    """A sweep row with hand-made timings: name -> tuple of seconds."""
    timings = {name: Timing(samples) for name, samples in seconds_by_name.items()}
    return dict(tokens=8, batch_size=1, d_model=8, num_heads=2, dtype="float32",
                pass_name="forward", timings=timings, flops=1e9,
                seconds={name: t.median for name, t in timings.items()})


def test_noisy_timings_are_marked_and_the_table_warns():
    steady = (1.00e-3, 1.01e-3, 1.02e-3, 0.99e-3, 1.00e-3)
    noisy = (1.0e-3, 3.0e-3, 1.1e-3, 9.0e-3, 1.2e-3)  # a busy machine
    quiet_table = benchmark_table([_row({name: steady for name in IMPLEMENTATIONS})])
    assert quiet_table.notes[0].startswith("✓ All 5 timings in this table were steady")
    assert "⚠" not in quiet_table.to_markdown()
    busy = dict({name: steady for name in IMPLEMENTATIONS}, fused=noisy)
    table = benchmark_table([_row(busy)])
    assert table.rows[0][IMPLEMENTATIONS_INDEX["fused"]].endswith("⚠")
    assert table.rows[0][IMPLEMENTATIONS_INDEX["MHA"]] == "1.0"
    assert len(table.notes) == 1 and table.notes[0].startswith("⚠ 1 of the 5 timings")
    assert table.notes[0] in table.to_markdown() and "timing-note" in table._repr_html_()
    assert repr(table) == repr(quiet_table)  # the printed text does not depend on the load
    spread = benchmark_table([_row(busy)], "spread")
    assert spread.rows[0][IMPLEMENTATIONS_INDEX["MHA"]] == "1%"  # IQR 0.01 ms of 1.00


def test_plot_benchmark_draws_one_line_per_implementation():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sweep([8, 16], d_model=8, num_heads=2, repeats=1, passes=["forward"])
    axes = plot_benchmark(rows)
    handles, labels = axes[0].get_legend_handles_labels()
    assert len(axes) == 1 and labels == list(IMPLEMENTATIONS)
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


def test_fused_overhead_times_both_on_the_same_input():
    result = fused_overhead(repeats=3, block_seconds=1e-4)
    assert set(result) == {"fused", "direct", "calls", "ratio"}
    assert result["calls"] >= 1 and len(result["fused"].samples) == 3
    assert result["ratio"] == result["fused"].best / result["direct"].best > 0
    assert fused_overhead(repeats=2, backward=True, block_seconds=1e-4)["ratio"] > 0


def test_time_decoding_variants_agree_with_the_full_pass():
    result = time_decoding(16, 2, 2, 7, repeats=2)
    assert result["agree"]
    assert list(result["timings"]) == [name for name in DECODE_VARIANTS
                                       if name not in ("CUDA graph", "torch.compile reduce-overhead")]
    assert all(len(t.samples) == 2 for t in result["timings"].values())
    assert result["no_cache"].median > 0
    with pytest.raises(ValueError, match="CUDA"):
        time_decoding(16, 2, 2, 7, variants=["CUDA graph"])
    with pytest.raises(ValueError, match="unknown"):
        time_decoding(16, 2, 2, 7, variants=["cat"])
