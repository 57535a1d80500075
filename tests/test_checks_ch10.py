"""Chapter 10 self-checks: the chapter's solutions pass, every wrong answer fails with its hint,
non-attempts score 0 (tests/wrong_answers/ch10.py)."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from attention_book.checks import ch10
from wrong_answers import load_answer
from wrong_answers.ch10 import CORRECT_ANSWERS, WRONG_ANSWERS

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "10_attention_at_scale.ipynb"
CHECKS = {
    "ex-10-flops": (ch10.flops, ("gpt_flops_per_token",)),
    "ex-10-kv-step": (ch10.kv_step, ("decode_step",)),
    "ex-10-chunk-mask": (ch10.chunk_mask, ("attend_new_tokens",)),
    "ex-10-rope": (ch10.rope, ("rotate",)),
    "ex-10-gqa": (ch10.gqa, ("grouped_attention",)),
    "ex-10-sdpa": (ch10.sdpa, ("fused_attention",)),
    "ex-10-cached-generation": (ch10.cached_generation, ("generate_cached",)),
}
PRELUDE = "import math\nimport torch\nimport torch.nn.functional as F\n"
CASES = [(label, wrong) for label, answers in WRONG_ANSWERS.items() for wrong in answers]

RIGHT_ANSWERS = {
    "ex-10-flops": [
        # block by block, the way a FLOP counter would see them
        "def gpt_flops_per_token(n_layer, d_model, n_head, vocab_size, num_tokens):\n"
        "    per_block = 0\n"
        "    for m, n, p in [(1, d_model, 3 * d_model), (1, d_model, d_model),  # qkv, out_proj\n"
        "                    (1, d_model, 4 * d_model), (1, 4 * d_model, d_model),  # MLP\n"
        "                    (1, d_model, num_tokens), (1, num_tokens, d_model)]:  # scores, context\n"
        "        per_block += 2 * m * n * p\n"
        "    return n_layer * per_block + 2 * d_model * vocab_size\n",
    ],
    "ex-10-kv-step": [
        "def decode_step(query, new_key, new_value, cache_keys, cache_values):\n"
        "    keys = torch.cat([cache_keys, new_key], dim=2)\n"
        "    values = torch.cat([cache_values, new_value], dim=2)\n"
        "    return F.scaled_dot_product_attention(query, keys, values), keys, values\n",
    ],
    "ex-10-rope": [
        # complex numbers: a pair is a + ib, a turn is a multiplication by e^(i angle)
        "def rotate(x, positions):\n"
        "    hd = x.shape[-1]\n"
        "    theta = 10000.0 ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)\n"
        "    turns = torch.polar(torch.ones(len(positions), hd // 2, dtype=torch.float64),\n"
        "                        positions.double()[:, None] * theta)\n"
        "    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], hd // 2, 2)\n"
        "                                  .contiguous())\n"
        "    return torch.view_as_real(pairs * turns).flatten(-2).to(x.dtype)\n",
        # a rotation matrix per pair
        "def rotate(x, positions):\n"
        "    hd = x.shape[-1]\n"
        "    out = x.clone()\n"
        "    for i in range(hd // 2):\n"
        "        angle = positions.to(x.dtype) * 10000 ** (-2 * i / hd)\n"
        "        a, b = x[..., 2 * i], x[..., 2 * i + 1]\n"
        "        out[..., 2 * i] = a * torch.cos(angle) - b * torch.sin(angle)\n"
        "        out[..., 2 * i + 1] = a * torch.sin(angle) + b * torch.cos(angle)\n"
        "    return out\n",
    ],
    "ex-10-gqa": [
        # expand + reshape instead of repeat_interleave, and SDPA for the attention itself
        "def grouped_attention(queries, keys, values):\n"
        "    B, H_kv, T, hd = keys.shape\n"
        "    g = queries.shape[1] // H_kv\n"
        "    keys = keys[:, :, None].expand(B, H_kv, g, T, hd).reshape(B, H_kv * g, T, hd)\n"
        "    values = values[:, :, None].expand(B, H_kv, g, T, hd).reshape(B, H_kv * g, T, hd)\n"
        "    return F.scaled_dot_product_attention(queries, keys, values, is_causal=True)\n",
        # grouping the queries instead of repeating the keys
        "def grouped_attention(queries, keys, values):\n"
        "    B, H, T, hd = queries.shape\n"
        "    H_kv = keys.shape[1]\n"
        "    q = queries.reshape(B, H_kv, H // H_kv, T, hd)\n"
        "    scores = q @ keys[:, :, None].transpose(-2, -1) / hd ** 0.5\n"
        "    hide = torch.ones(T, T, dtype=torch.bool).triu(1)\n"
        "    weights = torch.softmax(scores.masked_fill(hide, float('-inf')), dim=-1)\n"
        "    return (weights @ values[:, :, None]).reshape(B, H, T, hd)\n",
    ],
}


def solution_source(label):
    """The chapter's answer cell for ``label`` (the code cell after its solution-start)."""
    cells = nbformat.read(str(NOTEBOOK), as_version=4).cells
    for index, cell in enumerate(cells):
        if cell.cell_type == "markdown" and re.search(
            r"\{solution-start\}\s+" + re.escape(label) + r"\b", cell.source
        ):
            return next(c.source for c in cells[index + 1:] if c.cell_type == "code")
    raise AssertionError(f"no solution cell for {label} in {NOTEBOOK.name}")


def run_check(label, code, name):
    check, names = CHECKS[label]
    namespace = load_answer(code, name)
    return check(*(namespace[n] for n in names))


def test_every_coding_exercise_has_six_wrong_answers():
    assert set(WRONG_ANSWERS) == set(CHECKS)
    for label, answers in WRONG_ANSWERS.items():
        assert len(answers) >= 6, f"{label}: {len(answers)} wrong answers"
        assert len({a.name for a in answers}) == len(answers)
        assert any(a.non_attempt for a in answers), f"{label}: no non-attempt"


@pytest.mark.parametrize("label", sorted(CHECKS))
def test_the_chapters_solution_passes(label):
    verdict = run_check(label, PRELUDE + solution_source(label), f"solution {label}")
    assert verdict.ok, verdict.summary()
    assert verdict.score == 1.0


@pytest.mark.parametrize("label, index", [(label, i) for label, codes in RIGHT_ANSWERS.items()
                                          for i in range(len(codes))])
def test_other_right_answers_pass(label, index):
    verdict = run_check(label, PRELUDE + RIGHT_ANSWERS[label][index], f"right {label} {index}")
    assert verdict.ok, verdict.summary()


@pytest.mark.parametrize("label, wrong", CASES, ids=[f"{lab}:{w.name}" for lab, w in CASES])
def test_wrong_answer_fails_with_its_hint(label, wrong):
    verdict = run_check(label, wrong.code, wrong.name)
    text = " | ".join(hint for _, hint in verdict.failed)
    assert not verdict.ok, f"{wrong.name} passed every check"
    assert wrong.hint.lower() in text.lower(), text
    if wrong.non_attempt:
        assert verdict.score == 0.0, f"non-attempt {wrong.name} scored {verdict.score}"
    else:
        assert verdict.score < 1.0


@pytest.mark.parametrize("label", sorted(CHECKS))
def test_not_implemented_scores_zero(label):
    check, names = CHECKS[label]

    def todo(*args, **kwargs):
        raise NotImplementedError(f"{label}: your code here")

    verdict = check(*(todo for _ in names))
    assert verdict.not_implemented and verdict.score == 0.0


def test_banners_use_the_chapter_number():
    verdict = run_check("ex-10-flops", PRELUDE + solution_source("ex-10-flops"), "banner")
    assert verdict.name.startswith("Exercise 10.")


# unusual right answers pass (self-check and grader); the find-the-bug code fails the main hidden test
from exercise_fixtures import answer_tests  # noqa: E402

globals().update(answer_tests("10", CHECKS, WRONG_ANSWERS, CORRECT_ANSWERS))
