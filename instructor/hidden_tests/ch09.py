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

# Runs in the notebook's kernel: seeded parts of width C (the book's MultiHeadAttention, GPT-2's
# MLP with the tanh GELU), then the answer; returns its output and the caller's x afterwards.
def _block(session, x, C, heads, seed):
    return session.probe("ch09.block", x=x, C=C, heads=heads, seed=seed)


@hidden_test("ex-09-block", "other widths and lengths: C = 12 with 3 heads, T = 1 and T = 7")
def block_other_sizes(student, reference):
    for T, seed in ((1, 1), (7, 2)):
        x = randn(2, T, 12, seed=seed, scale=2.0) + 1.0
        got, _ = _block(student, x, 12, 3, seed)
        want, _ = _block(reference, x, 12, 3, seed)
        same(got, want, f"prenorm_block on a (2, {T}, 12) stream", atol=1e-4,
             hint="pre-norm: each sub-layer (the attention, then the MLP on the updated stream) reads "
                  "a layer-normed copy of the stream and its output is added to the un-normalised stream")


@hidden_test("ex-09-block", "a float64 stream stays float64")
def block_float64(student, reference):
    x = randn(1, 5, 8, seed=3, scale=3.0, dtype=torch.float64)
    got, _ = _block(student, x, 8, 2, 4)
    want, _ = _block(reference, x, 8, 2, 4)
    same(got, want, "prenorm_block on a float64 stream", atol=1e-10, rtol=1e-8,
         hint="keep the stream's dtype (no .float()) and add each sub-layer's output to it")


@hidden_test("ex-09-block", "the caller's x is left unchanged", guard=True)
def block_input_untouched(student, reference):
    x = randn(2, 4, 8, seed=5)
    _, after = _block(student, x, 8, 2, 6)
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


# ---------------------------------------------------------------- ex-09-prev-token-head


def _causal(scores):
    T = scores.shape[-1]
    return torch.softmax(scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf")), dim=-1)


def _head_weights(n_layer, n_head, T, best, seed, dtype=torch.float32):
    scores = randn(n_layer, n_head, T, T, seed=seed, dtype=dtype)
    rows, cols = torch.arange(T)[:, None], torch.arange(T)[None, :]
    scores[best] = scores[best] + 3.0 * (cols == rows - 1)
    return _causal(scores)


def _head_answer(session, weights):
    result = session.call("previous_token_head", weights)
    if isinstance(result, torch.Tensor):
        result = result.tolist()
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        raise Hint("previous_token_head must return three values: (layer, head, score)")
    layer, head, score = (v.item() if isinstance(v, torch.Tensor) and v.numel() == 1 else v for v in result)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (layer, head, score)):
        raise Hint("previous_token_head must return numbers: two ints and a float")
    return int(layer), int(head), float(score)


def _compare_heads(student, reference, weights, what):
    got, want = _head_answer(student, weights), _head_answer(reference, weights)
    if got[:2] != want[:2]:
        raise Hint(f"{what}: expected (layer, head) = {want[:2]}, got {got[:2]}: average "
                   "weights[layer, head, t, t-1] over t = 1 .. T-1 for every head (sizes from weights.shape)")
    if not math.isclose(got[2], want[2], rel_tol=1e-5, abs_tol=1e-7):
        raise Hint(f"{what}: expected the score {want[2]:.6f}, got {got[2]:.6f}: the mean over the T-1 "
                   "queries that have a previous token")


@hidden_test("ex-09-prev-token-head", "GPT-2 small's 12 x 12 heads on 16 tokens")
def head_gpt2_small(student, reference):
    _compare_heads(student, reference, _head_weights(12, 12, 16, (7, 4), seed=21), "weights of shape (12, 12, 16, 16)")


@hidden_test("ex-09-prev-token-head", "one layer, one head, two tokens; one layer of eight heads")
def head_tiny(student, reference):
    _compare_heads(student, reference, _head_weights(1, 1, 2, (0, 0), seed=22), "weights of shape (1, 1, 2, 2)")
    _compare_heads(student, reference, _head_weights(1, 8, 6, (0, 6), seed=23), "weights of shape (1, 8, 6, 6)")


@hidden_test("ex-09-prev-token-head", "float64 weights")
def head_float64(student, reference):
    weights = _head_weights(3, 2, 9, (2, 0), seed=24, dtype=torch.float64)
    _compare_heads(student, reference, weights, "float64 weights of shape (3, 2, 9, 9)")


@hidden_test("ex-09-prev-token-head", "the weights passed in stay unchanged", guard=True)
def head_input_untouched(student, reference):
    weights = _head_weights(2, 3, 5, (1, 2), seed=25)
    _, after = student.call_after("previous_token_head", weights)
    if not torch.equal(after["args"][0], weights):
        raise Hint("your function changed the weights passed in: compute the scores without writing into them")


# ---------------------------------------------------------------- ex-09-conv1d


def _pairs(session, weight, bias):
    result = session.call("conv1d_to_linear", weight, bias)
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        raise Hint("conv1d_to_linear must return three (weight, bias) pairs: query, key, value")
    return [tuple(pair) if isinstance(pair, (tuple, list)) else pair for pair in result]


def _compare_pairs(student, reference, d, seed, dtype=torch.float32):
    weight, bias = randn(d, 3 * d, seed=seed, dtype=dtype), randn(3 * d, seed=seed + 1, dtype=dtype)
    got, want = _pairs(student, weight, bias), _pairs(reference, weight, bias)
    for role, g, w in zip(("query", "key", "value"), got, want):
        same(list(g) if isinstance(g, tuple) else g, list(w), f"the {role} (weight, bias) for d = {d}",
             atol=0.0, rtol=0.0,
             hint="columns role*d .. role*d + d-1 of the (d, 3d) Conv1D weight, transposed to (d_out, d_in); "
                  "the matching d entries of the bias")


@hidden_test("ex-09-conv1d", "widths the self-check does not use: d = 1 and d = 64")
def conv1d_other_widths(student, reference):
    _compare_pairs(student, reference, 1, seed=31)
    _compare_pairs(student, reference, 64, seed=33)


@hidden_test("ex-09-conv1d", "a float64 checkpoint stays float64")
def conv1d_float64(student, reference):
    _compare_pairs(student, reference, 5, seed=35, dtype=torch.float64)


@hidden_test("ex-09-conv1d", "nn.Linear layers built from the pairs compute GPT-2's q, k, v")
def conv1d_linear_layers(student, reference):
    weight, bias = randn(16, 48, seed=37), randn(48, seed=38)
    x = randn(2, 3, 16, seed=39)
    try:
        got = student.probe("ch09.conv1d-linear", weight=weight, bias=bias, x=x)
    except NotImplementedYet:
        raise
    except AnswerError as err:
        raise Hint(f"nn.Linear(16, 16) could not load your pairs ({err.evalue.splitlines()[-1][:150]})") from None
    same(got, x @ weight + bias, "the three nn.Linear layers on x, concatenated", atol=1e-5,
         hint="together they must compute x @ weight + bias, GPT-2's Conv1D")


@hidden_test("ex-09-conv1d", "the checkpoint's weight and bias stay unchanged", guard=True)
def conv1d_inputs_untouched(student, reference):
    weight, bias = randn(4, 12, seed=41), randn(12, seed=42)
    _, after = student.call_after("conv1d_to_linear", weight, bias)
    if not (torch.equal(after["args"][0], weight) and torch.equal(after["args"][1], bias)):
        raise Hint("your function changed the checkpoint's weight or bias in place (e.g. .t_()): leave them intact")
