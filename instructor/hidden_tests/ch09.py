"""Hidden tests of chapter 9 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets two answer
sessions, ``student`` and ``reference`` (the chapter's own solution), and raises
Hint("what is wrong and how to fix it") when the student's answer differs. The sizes here are
ones the public self-checks do not use (GPT-2's vocabulary, 12 x 12 heads, d = 1, T = 1, float64).
"""

import math

import torch

from attention_book.instructor.hidden import AnswerError, Hint, NotImplementedYet, hidden_test, randn, same

# ---------------------------------------------------------------- ex-09-block
# Both orders of a block on seeded parts (probe "ch09.block"), against the chapter's solution.
# The first test is the exercise's main value test (the scorer's main-value rule).

def _block(session, x, C, heads, seed, pre_norm=True):
    return session.probe("ch09.block", x=x, C=C, heads=heads, seed=seed, pre_norm=pre_norm)


@hidden_test("ex-09-block", "both orders on other widths and lengths: C = 12, 3 heads, T = 1 and T = 7", weight=2)
def block_other_sizes(student, reference):
    for T, seed in ((1, 1), (7, 2)):
        x = randn(2, T, 12, seed=seed, scale=2.0) + 1.0
        for pre_norm, order in ((True, "pre-norm"), (False, "post-norm")):
            got, _ = _block(student, x, 12, 3, seed, pre_norm)
            want, _ = _block(reference, x, 12, 3, seed, pre_norm)
            same(got, want, f"transformer_block(pre_norm={pre_norm}) on a (2, {T}, 12) stream", atol=1e-4,
                 hint=("pre-norm: each sub-layer reads a layer-normed copy of the stream and adds its output to "
                       "the un-normalised stream" if pre_norm else
                       "post-norm: each sub-layer reads the stream itself and the layer norm acts on the stream "
                       "after each residual sum"))


@hidden_test("ex-09-block", "a float64 stream stays float64, in both orders")
def block_float64(student, reference):
    x = randn(1, 5, 8, seed=3, scale=3.0, dtype=torch.float64)
    for pre_norm in (True, False):
        got, _ = _block(student, x, 8, 2, 4, pre_norm)
        want, _ = _block(reference, x, 8, 2, 4, pre_norm)
        same(got, want, f"transformer_block(pre_norm={pre_norm}) on a float64 stream", atol=1e-10, rtol=1e-8,
             hint="keep the stream's dtype (no .float())")


@hidden_test("ex-09-block", "the caller's x is left unchanged", guard=True)
def block_input_untouched(student, reference):
    x = randn(2, 4, 8, seed=5)
    for pre_norm in (True, False):
        _, after = _block(student, x, 8, 2, 6, pre_norm)
        if not torch.equal(after, x):
            raise Hint("your function changed the caller's x in place (x += ...): write x = x + ...")


# ---------------------------------------------------------------- ex-09-top-p


def _filtered(session, logits, p):
    out = session.call("top_p_filter", logits, p)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(logits.shape):
        found = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise Hint(f"top_p_filter(logits of shape {tuple(logits.shape)}, p={p}) must return the same "
                   f"shape, got {found}")
    return out


def _nucleus_problem(logits, out, p):
    """Why ``out`` is not a valid nucleus filtering of ``logits`` (rows along the last axis); ""."""
    if out.dtype != logits.dtype:
        return f"logits of dtype {logits.dtype} must come back in that dtype, got {out.dtype}"
    if torch.isnan(out).any():
        return "the result contains NaN: a cut token gets float('-inf'), nothing else"
    kept = torch.isfinite(out)
    if not torch.equal(out[kept], logits[kept]):
        return "the kept tokens' logits changed: return them exactly as they were"
    probs = torch.softmax(logits.double(), dim=-1).reshape(-1, logits.shape[-1])
    for row, (row_probs, row_kept) in enumerate(zip(probs, kept.reshape(-1, logits.shape[-1]))):
        if not bool(row_kept.any()):
            return f"row {row}: every token was cut; the most likely token always stays"
        if bool((row_kept & ~torch.isfinite(logits.reshape(-1, logits.shape[-1])[row])).any()):
            return f"row {row}: a token whose logit was -inf came back finite"
        kept_probs, cut_probs = row_probs[row_kept], row_probs[~row_kept]
        if len(cut_probs) and float(kept_probs.min()) < float(cut_probs.max()) - 1e-12:
            return f"row {row}: a cut token is more likely than a kept one: keep the MOST likely tokens"
        mass = float(kept_probs.sum())
        if mass < min(p, 1.0) - 1e-5:
            return f"row {row}: the kept tokens hold {mass:.6f} < p = {p}: keep tokens until they reach p"
        if p < 1.0 and mass - float(kept_probs.min()) >= p + 1e-5:
            return (f"row {row}: {int(row_kept.sum())} tokens kept, but fewer already reach p = {p}: "
                    "the nucleus is the SMALLEST such set")
    return ""


@hidden_test("ex-09-top-p", "GPT-2's vocabulary size (V = 50257), p = 0.9 and p = 0.5")
def top_p_vocabulary(student, reference):
    logits = randn(2, 50257, seed=11, scale=3.0)
    for p in (0.9, 0.5):
        problem = _nucleus_problem(logits, _filtered(student, logits, p), p)
        if problem:
            raise Hint(f"for a (2, 50257) batch and p = {p}: {problem}")


@hidden_test("ex-09-top-p", "a (B, T, V) batch, p = 0.01 (the top token only) and float64")
def top_p_batch_small_p(student, reference):
    logits = randn(2, 3, 7, seed=12, scale=2.0, dtype=torch.float64)
    for p in (0.01, 0.35, 0.8):
        out = _filtered(student, logits, p)
        problem = _nucleus_problem(logits, out, p)
        if problem:
            raise Hint(f"for float64 logits of shape (2, 3, 7) and p = {p}: {problem}")
    top_only = _filtered(student, logits, 0.01)
    if int(torch.isfinite(top_only).sum()) != 6:
        raise Hint("with p = 0.01 each of the 6 rows keeps exactly its most likely token")


@hidden_test("ex-09-top-p", "after top-k: logits that already hold -inf")
def top_p_after_top_k(student, reference):
    logits = randn(3, 9, seed=13, scale=2.0)
    logits[:, 5:] = float("-inf")  # four tokens already cut, e.g. by top-k
    for p in (0.5, 0.95):
        problem = _nucleus_problem(logits, _filtered(student, logits, p), p)
        if problem:
            raise Hint(f"for logits with -inf entries (after a top-k cut) and p = {p}: {problem}")


@hidden_test("ex-09-top-p", "tied tokens at the edge of the nucleus: just enough of them")
def top_p_ties(student, reference):
    # probabilities 0.45, then three tied at 0.16, then 0.06: p = 0.7 needs two of the three
    logits = torch.tensor([[1.0, 2.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0, 3.0]])
    for p in (0.7, 0.9):
        problem = _nucleus_problem(logits, _filtered(student, logits, p), p)
        if problem:
            raise Hint(f"for tied logits {logits.tolist()} and p = {p}: {problem} (keep only as many tied "
                       "tokens as you need; which ones does not matter)")


@hidden_test("ex-09-top-p", "p = 1 and a one-token vocabulary keep everything", guard=True)
def top_p_keep_all(student, reference):
    logits = torch.cat([torch.linspace(8.0, -20.0, 40)[None], randn(15, 40, seed=14, scale=4.0)])
    out = _filtered(student, logits, 1.0)
    if not torch.equal(out, logits):
        raise Hint(f"with p = 1 every token must stay; {int((~torch.isfinite(out)).sum())} were cut "
                   "(float32 sums reach 1.0 before the tiniest probabilities)")
    single = torch.tensor([[0.3]])
    if not torch.equal(_filtered(student, single, 0.5), single):
        raise Hint("a vocabulary of one token must keep that token")


@hidden_test("ex-09-top-p", "the logits passed in stay unchanged", guard=True)
def top_p_input_untouched(student, reference):
    logits = randn(2, 10, seed=15, scale=2.0)
    _, after = student.call_after("top_p_filter", logits, 0.6)
    if not torch.equal(after["args"][0], logits):
        raise Hint("your function changed the logits passed in (masked_fill_ or an assignment): return a "
                   "new tensor")


# ---------------------------------------------------------------- ex-09-induction-head
# induction_scores on planted weights of sizes the self-check does not use. The first test is
# the exercise's main value test (the scorer's main-value rule).


def _induction_case(student, n_layer, n_head, period, repeats, plant, seed, dtype=torch.float32):
    from attention_book.checks.ch09 import _induction_diagnosis, _induction_weights, induction_reference

    weights = _induction_weights(n_layer, n_head, period, repeats, plant, seed).to(dtype)
    got = student.call("induction_scores", weights, period)
    want = induction_reference(weights, period)
    if not isinstance(got, torch.Tensor):
        raise Hint(f"induction_scores must return a tensor of shape (n_layer, n_head), got {type(got).__name__}")
    if tuple(got.shape) != tuple(want.shape) or not torch.allclose(got.double(), want.double(), atol=1e-6):
        raise Hint(_induction_diagnosis(got.double(), weights.double(), period) or (
            f"{n_layer} layers x {n_head} heads, period {period}: each head's score is its mean weight on key "
            "t - period + 1 over the queries t = period .. T-1"))
    return got


@hidden_test("ex-09-induction-head", "GPT-2 small's 12 x 12 heads, a block of 8 repeated twice and three times",
             weight=2)
def induction_gpt2_sized(student, reference):
    _induction_case(student, 12, 12, 8, 2, {(5, 1): "induction", (4, 11): "previous", (1, 0): "duplicate"}, 800)
    _induction_case(student, 12, 12, 6, 3, {(6, 9): "induction"}, 801)


@hidden_test("ex-09-induction-head", "one layer, one head; float64 weights")
def induction_small(student, reference):
    _induction_case(student, 1, 1, 3, 2, {(0, 0): "induction"}, 802)
    got = _induction_case(student, 2, 2, 4, 3, {(1, 1): "induction"}, 803, dtype=torch.float64)
    if got.dtype != torch.float64:
        raise Hint("float64 weights must give float64 scores: do not convert the dtype")


@hidden_test("ex-09-induction-head", "the weights passed in stay unchanged", guard=True)
def induction_unchanged(ns):
    from attention_book.checks.ch09 import _induction_weights
    from attention_book.instructor.hidden import answer

    induction_scores = answer(ns, "induction_scores")
    induction_scores(_induction_weights(2, 2, 4, 2, {(0, 1): "induction"}, 804), 4)
    if induction_scores.mutated:
        raise Hint("your function changed the weights passed in: compute the scores without writing into them")


# ---------------------------------------------------------------- ex-09-parameters
# The count as a formula, against PyTorch's count on GPTs the self-check does not build and the
# known GPT-2 sizes. The first test is the exercise's main value test (the scorer's main-value rule).


def _parameters(student, *sizes):
    value = student.call("gpt_parameters", *sizes)
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise Hint(f"gpt_parameters must return a number, got {type(value).__name__}")
    return value


@hidden_test("ex-09-parameters", "other GPTs, counted by PyTorch", weight=2)
def parameters_other_sizes(student, reference):
    from attention_book.checks.ch09 import _parameters_diagnosis, measured_gpt_parameters

    for V, T, d, L, H in ((3, 2, 4, 1, 2), (50, 10, 16, 4, 8), (11, 33, 20, 3, 5)):
        value = _parameters(student, V, T, d, L, H)
        if value != measured_gpt_parameters(V, T, d, L, H):
            raise Hint(_parameters_diagnosis(value, V, T, d, L, H) or (
                f"vocab_size={V}, context_length={T}, d_model={d}, n_layer={L}: your count differs from the "
                "model's parameters"))


@hidden_test("ex-09-parameters", "GPT-2 medium, large and XL")
def parameters_gpt2_sizes(student, reference):
    for d, L, H, known in ((1024, 24, 16, 354_823_168), (1280, 36, 20, 774_030_080), (1600, 48, 25, 1_557_611_200)):
        if _parameters(student, 50_257, 1024, d, L, H) != known:
            raise Hint(f"GPT-2 with d_model={d} and {L} layers has {known:,} parameters: write the count as a "
                       "formula in the sizes")


# ---------------------------------------------------------------- ex-09-find-the-bug-scale
# The code as given divides by sqrt(C) instead of sqrt(C // n_head): right for one head only. The
# first test is the exercise's main value test (the scorer's main-value rule).


def _scale_case(ns, B, T, C, n_head, seed):
    from attention_book.checks.ch09 import _SCALE_MISTAKES, gpt_attention_reference
    from attention_book.instructor.hidden import answer

    gpt_attention = answer(ns, "gpt_attention")
    x, c_attn = randn(B, T, C, seed=seed), randn(C, 3 * C, seed=seed + 1, scale=2.0 / C ** 0.5)
    got = gpt_attention(x, c_attn, n_head)
    want = gpt_attention_reference(x, c_attn, n_head)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
        raise Hint(f"C = {C} with {n_head} heads: expected an output of shape {tuple(want.shape)}")
    if torch.allclose(got, want, atol=1e-5):
        return
    for keywords, hint in _SCALE_MISTAKES:
        if torch.allclose(got, gpt_attention_reference(x, c_attn, n_head, **keywords), atol=1e-5):
            raise Hint(hint)
    raise Hint(f"C = {C} with {n_head} heads: the output differs from causal attention scaled by 1 / sqrt(C // n_head)")


@hidden_test("ex-09-find-the-bug-scale", "many heads: 8 heads of 2, 6 heads of 8", weight=2)
def scale_many_heads(ns):
    _scale_case(ns, 3, 4, 16, 8, 900)
    _scale_case(ns, 1, 7, 48, 6, 902)


@hidden_test("ex-09-find-the-bug-scale", "one token, and one head")
def scale_edges(ns):
    _scale_case(ns, 2, 1, 12, 3, 904)
    _scale_case(ns, 2, 5, 8, 1, 906)


@hidden_test("ex-09-find-the-bug-scale", "the inputs stay unchanged", guard=True)
def scale_unchanged(ns):
    from attention_book.instructor.hidden import answer

    gpt_attention = answer(ns, "gpt_attention")
    gpt_attention(randn(1, 3, 8, seed=908), randn(8, 24, seed=909), 2)
    if gpt_attention.mutated:
        raise Hint("your function changed its inputs in place; compute new tensors instead")
