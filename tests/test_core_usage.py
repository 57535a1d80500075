"""Every attention computation of the package goes through the attention core.

The core is ``attention_book.functional`` (``masked_softmax``, ``scaled_dot_product_attention``).
This test reads every module of ``src/attention_book`` with ``ast`` and reports

* a call of a softmax (``torch.softmax``, ``F.softmax``, ``scores.softmax(-1)``, ``log_softmax``,
  ``nn.Softmax``, ...) or of PyTorch's fused ``F.scaled_dot_product_attention``;
* a function that *defines* its own softmax (a ``def`` whose name ends in ``softmax``)

outside ``functional.py`` and outside ``TEACHING``: the functions a chapter writes out on purpose.
Each entry of ``TEACHING`` names the test that compares it with the core (checked below).

Left out on purpose: ``checks/`` and ``instructor/``. They compute the expected answers of the
exercises, and the typical wrong ones, *independently* of the package: a self-check that shared
the package's code would pass the package's bugs.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "attention_book"
CORE = PACKAGE / "functional.py"
INDEPENDENT = ("checks", "instructor")  # subpackages left out (see the docstring)

SOFTMAX_NAMES = {"softmax", "log_softmax", "softmin", "Softmax", "LogSoftmax", "Softmin"}
TORCH_FUNCTIONAL = {"torch.nn.functional", "F", "functional"}

#: "module.function" (or "module.Class.method") -> the test comparing it with the core
TEACHING: Dict[str, str] = {
    # chapter 3 writes softmax out to show the overflow and the max trick
    "scores.naive_softmax": "tests/test_scores.py::test_naive_softmax_equals_the_core_on_moderate_scores",
    "scores.stable_softmax": "tests/test_scores.py::test_stable_softmax_equals_the_core_with_minus_inf_as_mask",
    # chapter 6's name for the core with a key padding mask (defines a softmax, calls the core)
    "cross.padded_softmax": "tests/test_core_usage.py::test_padded_softmax_is_the_core_with_a_padding_mask",
    # chapter 10 compares the from-scratch core with PyTorch's fused kernel: both on purpose
    "fused.naive_causal_attention": "tests/test_core_usage.py::test_fused_path_equals_the_core",
    "fused.FusedMultiHeadAttention.forward": "tests/test_core_usage.py::test_fused_path_equals_the_core",
    "fused.direct_sdpa": "tests/test_core_usage.py::test_fused_path_equals_the_core",
    # chapter 10's decoding hot paths use the fused kernel (fewer operator launches per step)
    "kv_cache.CachedMultiHeadAttention.step":
        "tests/test_kv_cache.py::test_return_weights_takes_the_core_and_agrees_with_the_fast_step",
    "kv_cache.CachedMultiHeadAttention.step_at":
        "tests/test_kv_cache.py::test_step_at_equals_step_at_every_position_without_growing_the_cache",
    # chapter 9's GPT trains and generates through the fused kernel when no weights are asked for
    "gpt.causal_self_attention": "tests/test_gpt.py::test_fused_attention_equals_the_core",
}


def _modules() -> List[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py")
                  if path != CORE and path.relative_to(PACKAGE).parts[0] not in INDEPENDENT)


def _qualified(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def _callee(node: ast.Call) -> Tuple[str, str]:
    """(base, attribute) of a call: torch.softmax -> ("torch", "softmax"), softmax -> ("", "softmax")."""
    function = node.func
    if isinstance(function, ast.Name):
        return "", function.id
    if isinstance(function, ast.Attribute):
        return ast.unparse(function.value), function.attr
    return "", ""


def _findings(path: Path) -> Iterator[Tuple[int, str, str]]:
    """(line, enclosing function, what) for every softmax or fused-kernel call and softmax definition."""
    tree = ast.parse(path.read_text(), str(path))
    module = _qualified(path)

    def visit(node: ast.AST, scope: List[str]):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope = scope + [node.name]
            if not isinstance(node, ast.ClassDef) and node.name.lower().endswith("softmax"):
                yield node.lineno, ".".join([module] + scope), f"defines its own softmax `{node.name}`"
        if isinstance(node, ast.Call):
            base, name = _callee(node)
            where = ".".join([module] + scope)
            if name in SOFTMAX_NAMES:
                yield node.lineno, where, f"calls `{ast.unparse(node.func)}`"
            elif name == "scaled_dot_product_attention" and base in TORCH_FUNCTIONAL:
                yield node.lineno, where, f"calls PyTorch's fused `{ast.unparse(node.func)}`"
        for child in ast.iter_child_nodes(node):
            yield from visit(child, scope)

    yield from visit(tree, [])


def _strays() -> List[str]:
    problems = []
    for path in _modules():
        for line, where, what in _findings(path):
            if where not in TEACHING:
                problems.append(f"{path.relative_to(ROOT)}:{line} {where} {what}")
    return problems


def test_attention_goes_through_the_core():
    problems = _strays()
    assert not problems, (
        "attention computed outside attention_book.functional (use masked_softmax or "
        "scaled_dot_product_attention; a function written out on purpose goes into TEACHING in "
        "tests/test_core_usage.py with a test comparing it with the core):\n" + "\n".join(problems)
    )


def test_every_teaching_exception_exists_and_has_a_comparison_test():
    found = {where for path in _modules() for _, where, _ in _findings(path)}
    stale = sorted(set(TEACHING) - found)
    assert not stale, f"TEACHING lists functions that no longer compute a softmax: {stale}; remove them"
    for where, test in TEACHING.items():
        file, _, name = test.partition("::")
        tree = ast.parse((ROOT / file).read_text())
        names = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert name in names, f"{where}: its comparison test {test} does not exist"


def test_the_scan_finds_what_it_should(tmp_path, monkeypatch):
    """The scanner can fail: a stray softmax in a fake module is reported, the core is not."""
    fake = tmp_path / "attention_book"
    fake.mkdir()
    (fake / "functional.py").write_text("import torch\ndef masked_softmax(s):\n    return torch.softmax(s, -1)\n")
    (fake / "model.py").write_text(
        "import torch\nimport torch.nn.functional as F\nclass Model:\n    def forward(self, s):\n"
        "        return s.softmax(-1), F.scaled_dot_product_attention(s, s, s)\n"
        "def my_softmax(s):\n    return s\n")
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    monkeypatch.setitem(globals(), "CORE", fake / "functional.py")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    problems = _strays()
    assert len(problems) == 3, problems
    assert "model.Model.forward calls `s.softmax`" in problems[0]
    assert "fused `F.scaled_dot_product_attention`" in problems[1]
    assert "model.my_softmax defines its own softmax" in problems[2]


# ----------------------------------------------------------------- the comparisons TEACHING names
def test_padded_softmax_is_the_core_with_a_padding_mask():
    import torch

    from attention_book.cross import padded_softmax
    from attention_book.functional import masked_softmax

    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        scores = torch.randn(3, 4, 6, generator=generator)
        padding = torch.rand(3, 6, generator=generator) < 0.6
        assert torch.equal(padded_softmax(scores, padding), masked_softmax(scores, padding[:, None, :]))
        assert torch.equal(padded_softmax(scores), masked_softmax(scores))


def test_fused_path_equals_the_core():
    """Chapter 10's fused module, its module-free reference and the written-out causal core give
    the core's numbers (eval mode: no dropout)."""
    torch = pytest.importorskip("torch")
    fused = pytest.importorskip("attention_book.fused")
    from attention_book.functional import scaled_dot_product_attention
    from attention_book.masks import causal_mask
    from attention_book.multihead import MultiHeadAttention

    generator = torch.Generator().manual_seed(1)
    for causal in (True, False):
        torch.manual_seed(2)
        module = MultiHeadAttention(8, 8, 6, 0.0, num_heads=2, causal=causal).eval()
        x = torch.randn(2, 6, 8, generator=generator)
        with torch.no_grad():
            expected = module(x)  # the core
            assert torch.allclose(fused.FusedMultiHeadAttention.from_module(module)(x), expected, atol=1e-5)
            assert torch.allclose(fused.direct_sdpa(module, x), expected, atol=1e-5)
    queries, keys, values = (torch.randn(2, 3, 5, 4, generator=generator) for _ in range(3))
    context, _ = scaled_dot_product_attention(queries, keys, values, mask=causal_mask(5))
    assert torch.allclose(fused.naive_causal_attention(queries, keys, values), context, atol=1e-6)
