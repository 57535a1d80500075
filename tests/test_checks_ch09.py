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
from wrong_answers.ch09 import WRONG_ANSWERS

#: The chapter whose exercise cells these tests read (notebooks/09_gpt.ipynb).
CHAPTER = "09"
#: label -> (self-check, names of the answer's objects it takes)
CHECKS = {
    "ex-09-block": (ch09.prenorm_block, ["prenorm_block"]),
    "ex-09-top-p": (ch09.top_p, ["top_p_filter"]),
    "ex-09-prev-token-head": (ch09.previous_token_head, ["previous_token_head"]),
    "ex-09-conv1d": (ch09.conv1d_to_linear, ["conv1d_to_linear"]),
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


def prenorm_block(x, ln_1, attn, ln_2, mlp):
    h = ln_1(x)
    stream = x + attn(h)
    return stream + mlp(ln_2(stream))
''',
        # the layer norms applied through their parameters (the check's parts pass them on)
        '''import torch
import torch.nn.functional as F


def prenorm_block(x, ln_1, attn, ln_2, mlp):
    def norm(ln, t):
        return F.layer_norm(t, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
    x = x + attn(norm(ln_1, x))
    return x + mlp(norm(ln_2, x))
''',
        # a sub-layer called twice on the same input is wasteful, not wrong
        '''import torch


def prenorm_block(x, ln_1, attn, ln_2, mlp):
    print("attention output", tuple(attn(ln_1(x)).shape))
    x = x + attn(ln_1(x))
    return x + mlp(ln_2(x))
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
    "ex-09-prev-token-head": [
        '''import torch


def previous_token_head(weights):
    best = None
    n_layer, n_head, T, _ = weights.shape
    for layer in range(n_layer):
        for head in range(n_head):
            score = sum(weights[layer, head, t, t - 1] for t in range(1, T)) / (T - 1)
            if best is None or score > best[2]:
                best = (layer, head, score)
    return best
''',
        # tensors instead of Python numbers: 0-d tensors are fine
        '''import torch


def previous_token_head(weights):
    scores = weights[..., 1:, :-1].diagonal(dim1=-2, dim2=-1).mean(-1)
    flat = scores.flatten().argmax()
    return flat // weights.shape[1], flat % weights.shape[1], scores.flatten()[flat]
''',
    ],
    "ex-09-conv1d": [
        '''import torch


def conv1d_to_linear(weight, bias):
    d = weight.shape[0]
    q, k, v = weight.T.chunk(3, dim=0)
    return ((q, bias[:d]), (k, bias[d:2 * d]), (v, bias[2 * d:]))
''',
        '''import torch


def conv1d_to_linear(weight, bias):
    d = weight.shape[0]
    stacked = weight.T.reshape(3, d, d)
    return [(stacked[i], bias.view(3, d)[i]) for i in range(3)]
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
    assert "did you forget `return`" in hints(ch09.previous_token_head(lambda weights: None))
    assert "did you forget `return`" in hints(ch09.conv1d_to_linear(lambda weight, bias: None))
    assert "did you forget `return`" in hints(ch09.prenorm_block(lambda x, a, b, c, d: None))


def test_post_norm_is_named_in_every_value_check():
    code = '''def prenorm_block(x, ln_1, attn, ln_2, mlp):
    x = ln_1(x + attn(x))
    return ln_2(x + mlp(x))
'''
    verdict = run("ex-09-block", code, "post-norm")
    value_checks = [hint for name, hint in verdict.failed if "residuals" not in name and "another" not in name
                    and "unchanged" not in name]
    assert len(value_checks) == 3 and all(hint.startswith("post-norm") for hint in value_checks)


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
    need nothing else from the chapter), and every self-check in it reports all checks passed."""
    nb = nbformat.read(str(notebook_path(CHAPTER)), as_version=4)
    start = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                 and c.source.startswith("## Exercises"))
    end = next((i for i, c in enumerate(nb.cells) if i > start and c.cell_type == "markdown"
                and re.match(r"## (?!#)", c.source)), len(nb.cells))
    prelude = nbformat.v4.new_code_cell("import torch\nfrom torch import nn\n\ntorch.manual_seed(0);")
    section = nbformat.v4.new_notebook(cells=[prelude] + nb.cells[start:end], metadata=nb.metadata)
    path = tmp_path / "exercises.ipynb"
    nbformat.write(section, str(path))
    executed, _ = execute_notebook(path, cwd=ROOT)
    verdicts = [output["data"]["text/plain"] for cell in executed.cells if cell.cell_type == "code"
                for output in cell.get("outputs", []) if output.get("output_type") == "execute_result"]
    assert len(verdicts) == len(CHECKS)
    assert all("Well done: all" in text for text in verdicts), "\n".join(verdicts)
