"""The recall sheet (book/recall_sheet.md) runs, and computes what the package computes.

Its code blocks are run as they stand: the class equals ``attention_book.multihead.
MultiHeadAttention`` (causal) with the same weights, in evaluation and training mode, and the
fused line equals the hand-written core; its table of shapes matches what the class passes
through; the chapters that build on it link to it.
"""

from __future__ import annotations

import re

import nbformat
import pytest
import torch

from helpers import ROOT

from attention_book.functional import scaled_dot_product_attention
from attention_book.masks import causal_mask
from attention_book.multihead import MultiHeadAttention

PAGE = ROOT / "book" / "recall_sheet.md"


def code_blocks():
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), flags=re.S)


def sheet_class():
    namespace: dict = {"__name__": "recall_sheet"}
    exec(compile(code_blocks()[0], str(PAGE), "exec"), namespace)  # noqa: S102 - the book's code
    return namespace["CausalMultiHeadAttention"]


def twins(d_in, d_out, context_length, dropout, num_heads, qkv_bias, seed=0):
    torch.manual_seed(seed)
    ours = MultiHeadAttention(d_in, d_out, context_length, dropout, num_heads, qkv_bias=qkv_bias)
    torch.manual_seed(seed)
    sheet = sheet_class()(d_in, d_out, context_length, dropout, num_heads, qkv_bias=qkv_bias)
    sheet.load_state_dict(ours.state_dict(), strict=False)
    return ours, sheet


def test_the_page_has_the_class_and_the_fused_line():
    blocks = code_blocks()
    assert len(blocks) == 2
    assert "class CausalMultiHeadAttention(nn.Module)" in blocks[0]
    assert "scaled_dot_product_attention" in blocks[1]
    for block in blocks:
        assert all(len(line) <= 79 for line in block.splitlines()), "code wider than 79 characters"


@pytest.mark.parametrize("d_in, d_out, context_length, num_heads, qkv_bias, T", [
    (6, 6, 8, 2, False, 5), (8, 12, 10, 3, True, 10), (4, 4, 4, 1, False, 1), (16, 16, 32, 4, True, 7)])
def test_the_class_computes_the_packages_attention(d_in, d_out, context_length, num_heads, qkv_bias, T):
    ours, sheet = twins(d_in, d_out, context_length, 0.0, num_heads, qkv_bias)
    assert sorted(n for n, _ in sheet.named_parameters()) == sorted(n for n, _ in ours.named_parameters())
    x = torch.randn(3, T, d_in)
    with torch.no_grad():
        assert torch.allclose(sheet.eval()(x), ours.eval()(x), atol=1e-6)
        assert torch.allclose(sheet.train()(x), ours.train()(x), atol=1e-6)  # dropout 0


def test_training_mode_drops_the_same_weights_as_the_package():
    """Same seed, same Bernoulli draws in the same order: dropout sits where the package has it."""
    ours, sheet = twins(8, 8, 8, 0.4, 2, True)
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        torch.manual_seed(3)
        want = ours.train()(x)
        torch.manual_seed(3)
        got = sheet.train()(x)
    assert torch.allclose(got, want, atol=1e-6)
    assert not torch.allclose(got, sheet.eval()(x), atol=1e-3)


def test_the_fused_line_is_the_core():
    queries, keys, values = (torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(s))
                             for s in range(3))

    class Module(torch.nn.Module):
        dropout = torch.nn.Dropout(0.1)

    namespace = {"torch": torch, "queries": queries, "keys": keys, "values": values,
                 "self": Module().eval()}
    exec(compile(code_blocks()[1], str(PAGE), "exec"), namespace)  # noqa: S102 - the book's code
    want, _ = scaled_dot_product_attention(queries, keys, values, mask=causal_mask(5))
    assert torch.allclose(namespace["context"], want, atol=1e-6)


def test_the_shape_table_is_what_the_class_passes_through():
    text = PAGE.read_text(encoding="utf-8")
    trace = [m.group(1) for m in re.finditer(r"\| `(\([^`]*\))`", text)]
    assert trace[:4] == ["(B, T, C)", "(B, H, T, hd)", "(B, H, T, T)", "(B, H, T, T)"], trace
    seen = []
    sheet = sheet_class()(6, 6, 8, 0.0, 2).eval()
    original_softmax = torch.softmax

    def spy(tensor, *args, **kwargs):
        seen.append(tuple(tensor.shape))
        return original_softmax(tensor, *args, **kwargs)

    torch.softmax = spy
    try:
        with torch.no_grad():
            out = sheet(torch.randn(2, 5, 6))
    finally:
        torch.softmax = original_softmax
    assert seen == [(2, 2, 5, 5)]  # (B, H, T, T)
    assert out.shape == (2, 5, 6)  # (B, T, C)


@pytest.mark.parametrize("chapter", ["05", "06", "07", "08", "09", "10"])
def test_the_chapters_that_build_on_it_link_to_it(chapter):
    path = next((ROOT / "notebooks").glob(f"{chapter}_*.ipynb"))
    cells = nbformat.read(str(path), as_version=4).cells
    linked = [cell for cell in cells if cell.cell_type == "markdown" and "book/recall_sheet" in cell.source]
    assert linked, f"{path.name} does not link to the recall sheet"
