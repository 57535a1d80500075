"""Chapter 9's self-checks: the chapter's solutions pass, other right answers pass too, every
plausible wrong answer fails with its specific hint, and a non-attempt scores exactly 0."""

from __future__ import annotations

import re

import nbformat
import pytest
import torch

from attention_book.checks import REGISTRY, ch09
from attention_book.instructor.markup import analyse_notebook
from exercise_fixtures import (answer_runner, assert_random_state_untouched, fixture_tests, hints, notebook_path,
                               solution_code)
from helpers import ROOT, execute_notebook
from wrong_answers.ch09 import CORRECT_ANSWERS, WRONG_ANSWERS

#: The chapter whose exercise cells these tests read (notebooks/09_gpt.ipynb).
CHAPTER = "09"
#: label -> (self-check, names of the answer's objects it takes)
CHECKS = {
    "ex-09-block": (ch09.transformer_block, ["transformer_block"]),
    "ex-09-top-p": (ch09.top_p, ["top_p_filter"]),
    "ex-09-induction-head": (ch09.induction_head, ["induction_scores"]),
    "ex-09-parameters": (ch09.parameters, ["gpt_parameters"]),
    "ex-09-find-the-bug-scale": (ch09.attention_scale, ["gpt_attention"]),
}


run = answer_runner(CHECKS)
# the four tests every chapter's self-checks get
globals().update(fixture_tests(CHAPTER, CHECKS, WRONG_ANSWERS))


def test_titles_and_labels_agree_with_the_exercise_cells():
    nb = nbformat.read(str(notebook_path(CHAPTER)), as_version=4)
    exercises = {ex.label: ex for ex in analyse_notebook(nb, CHAPTER).exercises}
    coding = {label for label, ex in exercises.items() if ex.kind == "code"}
    assert coding == set(CHECKS), "every coding exercise of chapter 9 has a self-check, no more"
    for label, (check, _) in CHECKS.items():
        assert REGISTRY[label] is check
        assert check.title == exercises[label].title, f"{label}: the self-check's title must equal the exercise's"
    assert any(ex.kind == "written" for ex in exercises.values())


def test_checks_leave_the_readers_random_state_untouched():
    assert_random_state_untouched(run, CHAPTER, CHECKS, WRONG_ANSWERS)


# ---------------------------------------------------------------- other right answers pass

RIGHT_ANSWERS = {
    "ex-09-block": [
        '''import torch


def transformer_block(x, ln_1, attn, ln_2, mlp, pre_norm=True):
    norm_in = ln_1 if pre_norm else (lambda t: t)  # where each layer norm sits
    stream = x + attn(norm_in(x))
    if not pre_norm:
        stream = ln_1(stream)
    out = stream + mlp(ln_2(stream) if pre_norm else stream)
    return out if pre_norm else ln_2(out)
''',
        # the layer norms applied through their parameters (the check's parts pass them on)
        '''import torch
import torch.nn.functional as F


def transformer_block(x, ln_1, attn, ln_2, mlp, pre_norm=True):
    def norm(ln, t):
        return F.layer_norm(t, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
    if pre_norm:
        x = x + attn(norm(ln_1, x))
        return x + mlp(norm(ln_2, x))
    x = norm(ln_1, x + attn(x))
    return norm(ln_2, x + mlp(x))
''',
        # a sub-layer called twice on the same input is wasteful, not wrong
        '''import torch


def transformer_block(x, ln_1, attn, ln_2, mlp, pre_norm=True):
    print("attention output", tuple(attn(ln_1(x)).shape))
    if pre_norm:
        x = x + attn(ln_1(x))
        return x + mlp(ln_2(x))
    x = ln_1(x + attn(x))
    return ln_2(x + mlp(x))
''',
    ],
    "ex-09-top-p": [
        # Hugging Face's formulation: ascending sort, cut while the mass up to a token <= 1 - p
        '''import torch


def top_p_filter(logits, p):
    sorted_logits, order = torch.sort(logits, dim=-1)
    mass = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    cut_sorted = mass <= 1 - p
    cut_sorted[..., -1] = False
    cut = cut_sorted.scatter(-1, order, cut_sorted)
    return logits.masked_fill(cut, float("-inf"))
''',
        # float64 probabilities, a stable sort, an explicit keep mask
        '''import torch


def top_p_filter(logits, p):
    if p >= 1:
        return logits.clone()
    probs = torch.softmax(logits.double(), dim=-1)
    sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    keep_sorted = (sorted_probs.cumsum(-1) - sorted_probs) < p
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return torch.where(keep, logits, torch.full_like(logits, float("-inf")))
''',
    ],
    "ex-09-induction-head": [
        '''import torch


def induction_scores(weights, period):
    # the diagonal period - 1 below the main one, without its first-copy entry
    along = weights.diagonal(offset=-(period - 1), dim1=-2, dim2=-1)  # queries period-1 .. T-1
    return along[..., 1:].mean(dim=-1)
''',
        '''import torch


def induction_scores(weights, period):
    n_layer, n_head, T, _ = weights.shape
    total = torch.zeros(n_layer, n_head, dtype=weights.dtype)
    for t in range(period, T):  # every query of a repeat
        total += weights[:, :, t, t - period + 1]
    return total / (T - period)
''',
        '''import torch


def induction_scores(weights, period):
    T = weights.shape[-1]
    keys = (torch.arange(period, T) - period + 1).view(1, 1, -1, 1)
    rows = weights[..., period:, :]  # (L, H, T - period, T)
    picked = rows.gather(-1, keys.expand(*rows.shape[:-1], 1))
    return picked.squeeze(-1).mean(-1)
''',
    ],
    "ex-09-parameters": [
        '''import torch


def gpt_parameters(vocab_size, context_length, d_model, n_layer, n_head):
    d = d_model
    layer_norm = 2 * d  # a gain and a bias
    linear = lambda n_in, n_out: n_in * n_out + n_out  # noqa: E731 - weight and bias
    block = (2 * layer_norm + 4 * linear(d, d)  # two layer norms, q, k, v, out_proj
             + linear(d, 4 * d) + linear(4 * d, d))  # the MLP
    embeddings = vocab_size * d + context_length * d  # lm_head shares the first
    return embeddings + n_layer * block + layer_norm
''',
        # built with torch and counted (a small model per call: fine for the check's sizes)
        '''import torch
from torch import nn


def gpt_parameters(vocab_size, context_length, d_model, n_layer, n_head):
    d = d_model
    block = nn.ModuleList([nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d),
                           nn.Linear(d, 4 * d), nn.Linear(4 * d, d)])
    per_block = sum(p.numel() for p in block.parameters())
    return (vocab_size + context_length) * d + n_layer * per_block + 2 * d
''',
    ],
}
RIGHT = [(label, index, code) for label, codes in RIGHT_ANSWERS.items() for index, code in enumerate(codes)]


@pytest.mark.parametrize("label,index,code", RIGHT, ids=[f"{label}:{index}" for label, index, _ in RIGHT])
def test_other_right_answers_pass(label, index, code):
    verdict = run(label, code, f"right {label} {index}")
    assert verdict.ok and verdict.score == 1.0, str(verdict)


# ---------------------------------------------------------------- what the hints say


right_top_p = answer_runner({"top-p": (lambda f: f, ["top_p_filter"])})(
    "top-p", RIGHT_ANSWERS["ex-09-top-p"][1], "right top-p")


def test_top_p_ties_accept_any_tie_break():
    """With tied tokens at the edge, keeping either of them is right; keeping both is not."""
    def keep(indices):
        def top_p_filter(logits, p):
            if not (logits.ndim == 1 and logits.tolist() == [1.0, 2.0, 1.0, 0.0, 1.0]):
                return right_top_p(logits, p)
            kept = torch.zeros(5, dtype=torch.bool)
            kept[indices] = True
            return logits.masked_fill(~kept, float("-inf"))
        return top_p_filter

    for tied in ([0, 2], [0, 4], [2, 4]):
        assert ch09.top_p(keep([1] + tied)).ok, tied
    verdict = ch09.top_p(keep([1, 0, 2, 4]))
    assert not verdict.ok and "keep only as many as you need" in hints(verdict)
    verdict = ch09.top_p(keep([1, 0]))
    assert not verdict.ok and "off by one" in hints(verdict)


def test_crashes_and_missing_returns_are_reported_not_raised():
    def crashes(*args):
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    for check, _ in CHECKS.values():
        verdict = check(crashes)
        assert not verdict.ok and verdict.score == 0.0
        assert "your code raised RuntimeError" in hints(verdict)
    assert "did you forget `return`" in hints(ch09.top_p(lambda logits, p: None))
    assert "did you forget `return`" in hints(ch09.induction_head(lambda weights, period: None))
    assert "did you forget `return`" in hints(ch09.parameters(lambda *sizes: None))
    assert "did you forget `return`" in hints(ch09.transformer_block(lambda x, a, b, c, d, pre_norm=True: None))


def test_post_norm_for_both_orders_is_named_post_norm():
    code = '''def transformer_block(x, ln_1, attn, ln_2, mlp, pre_norm=True):
    x = ln_1(x + attn(x))
    return ln_2(x + mlp(x))
'''
    verdict = run("ex-09-block", code, "post-norm")
    failed = dict(verdict.failed)
    assert failed["pre_norm=True: GPT-2's block"].startswith("post-norm")
    assert "pre_norm=False: the original transformer's block" in verdict.passed


def test_the_hints_never_contain_the_solution_lines():
    """A hint names the mistake; it never hands out a line of the model solution."""
    solution_lines = set()
    for label in CHECKS:
        code = solution_code(CHAPTER, label)
        body = re.search(r"# BEGIN SOLUTION\n(.*?)# END SOLUTION", code, re.S).group(1)
        solution_lines |= {re.sub(r"\s*#.*", "", line).strip() for line in body.splitlines()}
    solution_lines = {line for line in solution_lines if len(line) > 20}
    for label, answers in WRONG_ANSWERS.items():
        for answer in answers:
            text = hints(run(label, answer.code, answer.name))
            leaked = [line for line in solution_lines if line in text]
            assert not leaked, f"{label}:{answer.name} hint contains solution code {leaked}"


# ---------------------------------------------------------------- the exercise cells run


@pytest.mark.slow
def test_the_exercise_section_runs_top_to_bottom_in_a_fresh_kernel(tmp_path):
    """The chapter's exercise section runs on its own after a short prelude (the exercises
    need nothing else from the chapter but a model: an untrained small GPT stands in for the
    trained one), and every self-check in it reports all checks passed."""
    nb = nbformat.read(str(notebook_path(CHAPTER)), as_version=4)
    start = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                 and c.source.startswith("## Exercises"))
    end = next((i for i, c in enumerate(nb.cells) if i > start and c.cell_type == "markdown"
                and re.match(r"## (?!#)", c.source)), len(nb.cells))
    prelude = nbformat.v4.new_code_cell(
        "import torch\nfrom torch import nn\n\nfrom attention_book.gpt import GPT, GPTConfig\n\n"
        "torch.manual_seed(0)\ndevice = torch.device('cpu')\n"
        "model = GPT(GPTConfig(vocab_size=30, context_length=16, d_model=32, n_layer=2, n_head=4)).eval()\n")
    section = nbformat.v4.new_notebook(cells=[prelude] + nb.cells[start:end], metadata=nb.metadata)
    path = tmp_path / "exercises.ipynb"
    nbformat.write(section, str(path))
    executed, _ = execute_notebook(path, cwd=ROOT)
    verdicts = [output["data"]["text/plain"] for cell in executed.cells if cell.cell_type == "code"
                for output in cell.get("outputs", []) if output.get("output_type") == "execute_result"]
    assert len(verdicts) == len(CHECKS)
    assert all("Well done: all" in text for text in verdicts), "\n".join(verdicts)


# unusual right answers pass (self-check and grader); the find-the-bug code fails the main hidden test
from exercise_fixtures import answer_tests  # noqa: E402

globals().update(answer_tests(CHAPTER, CHECKS, WRONG_ANSWERS, CORRECT_ANSWERS))
