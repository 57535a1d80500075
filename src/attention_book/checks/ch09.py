"""Self-checks for chapter 9 (a GPT that writes).

* :func:`prenorm_block` - ``ex-09-block``: the forward of a pre-norm transformer block from its
  parts, ``prenorm_block(x, ln_1, attn, ln_2, mlp)``. The parts the check passes record what
  they receive, so a hint can say which sub-layer read the wrong tensor (post-norm, a missing
  residual, the same layer norm twice, the MLP reading the block's input, ...).
* :func:`top_p` - ``ex-09-top-p``: nucleus filtering, ``top_p_filter(logits, p)``: every token
  outside the smallest set of most likely tokens whose probability reaches ``p`` gets ``-inf``.
* :func:`previous_token_head` - ``ex-09-prev-token-head``: from attention weights
  ``(n_layer, n_head, T, T)``, the ``(layer, head, score)`` of the head that puts the most
  average weight on the previous token.
* :func:`conv1d_to_linear` - ``ex-09-conv1d``: GPT-2's fused ``c_attn`` Conv1D weight ``(d, 3d)``
  and bias ``(3d,)`` -> three ``(weight, bias)`` pairs in ``nn.Linear``'s layout.

Tests that a non-attempt would pass (the input left unchanged, p = 1 keeping every token, zero
sub-layers giving x back) are :class:`~attention_book.checks.core.Guard` s: they count only once
a value test passes. Test data comes from seeded generators: the reader's random state is left
alone.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, List, Optional, Tuple

import torch
from torch import nn

from ..multihead import MultiHeadAttention
from .core import Guard, Hint, close, register

__all__ = ["prenorm_block", "top_p", "previous_token_head", "conv1d_to_linear"]


def _randn(*shape: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _same(a: Optional[torch.Tensor], b: torch.Tensor, atol: float = 1e-5) -> bool:
    return a is not None and close(a, b, atol=atol)


# ---------------------------------------------------------------- ex-09-block

_B, _T, _C, _HEADS = 2, 5, 8, 2


class _Spy(nn.Module):
    """Wraps one part of the block and records the tensors it receives (and how often)."""

    def __init__(self, module: nn.Module, name: str):
        super().__init__()
        self.module = module
        self.part_name = name
        self.inputs: List[torch.Tensor] = []

    def forward(self, x, *args, **kwargs):
        self.inputs.append(x.detach().clone())
        return self.module(x, *args, **kwargs)

    def __getattr__(self, name):  # ln_1.weight, ln_1.normalized_shape, ... reach the real part
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("module"), name)


def _block_parts(seed: int = 0, zero_updates: bool = False):
    """ln_1, attn, ln_2, mlp of width _C with clearly non-default parameters (no grad)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # leave the reader's random state untouched
        torch.manual_seed(seed)
        ln_1, ln_2 = nn.LayerNorm(_C), nn.LayerNorm(_C)
        attn = MultiHeadAttention(_C, _C, _T, 0.0, _HEADS, qkv_bias=True)
        mlp = nn.Sequential(nn.Linear(_C, 4 * _C), nn.GELU(approximate="tanh"), nn.Linear(4 * _C, _C))
    with torch.no_grad():
        for module in (ln_1, ln_2, attn, mlp):
            for parameter in module.parameters():
                parameter.copy_(0.6 * torch.randn(parameter.shape, generator=generator))
        ln_1.weight.add_(1.0)
        ln_2.weight.add_(1.0)
        if zero_updates:  # both sub-layers then add exactly 0 to the stream
            attn.out_proj.weight.zero_()
            attn.out_proj.bias.zero_()
            mlp[2].weight.zero_()
            mlp[2].bias.zero_()
    for module in (ln_1, ln_2, attn, mlp):
        module.eval().requires_grad_(False)
    return ln_1, attn, ln_2, mlp


def _stream_input(seed: int = 3) -> torch.Tensor:
    # an offset and a scale, so a forgotten layer norm changes the numbers a lot
    return _randn(_B, _T, _C, seed=seed, scale=2.0) + 1.5


def _block_diagnosis(x, parts, spies, out) -> Tuple[str, str, str]:
    """Hints (attention input, MLP input, output); "" where that part is right."""
    ln_1, attn, ln_2, mlp = parts
    spy_ln_1, spy_attn, _, spy_mlp = spies
    with torch.no_grad():
        a = attn(ln_1(x))  # the attention's update
        stream = x + a  # the residual stream after attention
        m = mlp(ln_2(stream))
        expected = stream + m
        attn_of_x = attn(x)
        post_1 = ln_1(x + attn_of_x)  # the original Transformer's order
    seen_attn = spy_attn.inputs[0] if spy_attn.inputs else None
    seen_mlp = spy_mlp.inputs[0] if spy_mlp.inputs else None

    attention_hint = ""
    if seen_attn is None:
        attention_hint = ("attn was never called: the block's first sub-layer is the attention, "
                          "applied to the layer-normed stream")
    elif _same(seen_attn, x) and any(_same(seen, x + attn_of_x, 1e-4) for seen in spy_ln_1.inputs):
        attention_hint = (
            "post-norm: the attention read x itself and ln_1 normalised the sum x + attn(x) (the "
            "original Transformer's order). A pre-norm block (GPT-2) normalises the INPUT of each "
            "sub-layer and adds the sub-layer's output to the un-normalised stream")
    elif _same(seen_attn, x):
        attention_hint = ("the attention received x itself: in a pre-norm block each sub-layer "
                          "reads a layer-normed copy of the stream (ln_1 before the attention)")
    elif _same(seen_attn, ln_2(x)):
        attention_hint = ("the attention read ln_2's output: ln_1 belongs before the attention, "
                          "ln_2 before the MLP (each sub-layer has its own layer norm)")
    elif not all(_same(seen, ln_1(x)) for seen in spy_attn.inputs):
        attention_hint = ("the attention must read ln_1 of the block's input x, and only that "
                          f"(it was called {len(spy_attn.inputs)} time(s), on something else)")

    mlp_hint = ""
    if seen_mlp is None:
        mlp_hint = ("mlp was never called: after the attention's update the block's second "
                    "sub-layer, the MLP, reads the layer-normed stream")
    elif all(_same(seen, ln_2(stream), 1e-4) for seen in spy_mlp.inputs):
        mlp_hint = ""
    elif _same(seen_mlp, ln_2(x)):
        mlp_hint = ("the MLP read the block's input x: the two sub-layers run one after the "
                    "other, so the MLP reads the stream AFTER the attention's update (x plus the "
                    "attention's output), normalised by ln_2")
    elif _same(seen_mlp, ln_1(stream), 1e-4):
        mlp_hint = ("the MLP's input was normalised with ln_1, the same layer norm twice: each "
                    "sub-layer has its own layer norm (ln_2 before the MLP, with its own weights)")
    elif _same(seen_mlp, stream, 1e-4):
        mlp_hint = ("the MLP received the stream un-normalised: pre-norm normalises each "
                    "sub-layer's input, here with ln_2")
    elif _same(seen_mlp, ln_2(a), 1e-4):
        mlp_hint = ("the attention's residual connection is missing: the stream after the "
                    "attention is x PLUS the attention's output, not the output alone")
    elif _same(seen_mlp, ln_2(ln_1(x) + a), 1e-4):
        mlp_hint = ("the residual path carries ln_1(x): the skip connection must add the "
                    "attention's output to x itself; the layer norm only feeds the sub-layer, the "
                    "stream stays un-normalised")
    elif _same(seen_mlp, ln_2(post_1), 1e-4) or _same(seen_mlp, post_1, 1e-4):
        mlp_hint = ("post-norm: the stream was normalised after the residual sum; in a pre-norm "
                    "block the stream itself is never normalised, only the sub-layers' inputs")
    else:
        mlp_hint = ("the MLP must read ln_2 of the stream after the attention (x plus the "
                    "attention's output), and only that")

    output_hint = ""
    if not isinstance(out, torch.Tensor):
        output_hint = (f"prenorm_block should return a tensor, got {type(out).__name__}; did you "
                       "forget `return`?")
    elif tuple(out.shape) != tuple(x.shape):
        output_hint = (f"the block must keep the shape (B, T, C) = {tuple(x.shape)}, got "
                       f"{tuple(out.shape)}")
    elif not _same(out, expected, 1e-4):
        outcome = out.detach()
        with torch.no_grad():
            if seen_mlp is not None and _same(outcome, mlp(seen_mlp), 1e-4):
                output_hint = ("the MLP's residual connection is missing: the block returns the "
                               "stream plus the MLP's output, not the MLP's output alone")
            elif seen_mlp is not None and _same(outcome, seen_mlp + mlp(seen_mlp), 1e-4):
                output_hint = ("the MLP's residual adds its normalised input: add the MLP's output "
                               "to the un-normalised stream instead")
            elif _same(outcome, ln_2(expected), 1e-4) or _same(outcome, ln_1(expected), 1e-4) \
                    or _same(outcome, nn.functional.layer_norm(expected, (_C,)), 1e-4):
                output_hint = ("the output was layer-normed: a block returns the residual stream "
                               "itself (GPT applies one final layer norm after the LAST block)")
            elif _same(outcome, ln_2(post_1 + mlp(post_1)), 1e-4):
                output_hint = ("post-norm: your output is the layer-normed sum of the stream and "
                               "the MLP's output; in a pre-norm block the layer norm only feeds "
                               "the MLP, whose output is added to the un-normalised stream")
            elif _same(outcome, x + m, 1e-4):
                output_hint = ("the attention's update is lost at the end: you added the MLP's "
                               "output to the block's input x instead of to the stream after the "
                               "attention")
            elif _same(outcome, x + a + mlp(ln_2(x)), 1e-4):
                output_hint = ("the MLP read the block's input x (a 'parallel' block): in GPT-2 it "
                               "reads the stream after the attention's update")
            else:
                output_hint = ("the output must be the stream after the attention plus the MLP's "
                               "output on ln_2 of that stream")
    return attention_hint, mlp_hint, output_hint


@register("ex-09-block", "A pre-norm block")
def prenorm_block(block_forward):
    """Check ``prenorm_block(x, ln_1, attn, ln_2, mlp) -> (B, T, C)``."""
    parts = _block_parts()
    x = _stream_input()

    def run(parts_to_use, x_in):
        spies = [_Spy(part, name) for part, name in zip(parts_to_use, ("ln_1", "attn", "ln_2", "mlp"))]
        with torch.no_grad():
            out = block_forward(x_in, *spies)
        return spies, out

    diagnosis = None

    def diagnose():
        nonlocal diagnosis
        if diagnosis is None:
            spies, out = run(parts, x.clone())
            diagnosis = _block_diagnosis(x, parts, spies, out)
        return diagnosis

    def attention_input():
        hint = diagnose()[0]
        if hint:
            raise Hint(hint)

    def mlp_input():
        hint = diagnose()[1]
        if hint:
            raise Hint(hint)

    def output():
        hint = diagnose()[2]
        if hint:
            raise Hint(hint)

    def other_input():
        other = _randn(_B, 3, _C, seed=11, scale=0.5) - 2.0  # a shorter sequence, other values
        ln_1, attn, ln_2, mlp = parts
        with torch.no_grad():
            stream = other + attn(ln_1(other))
            expected = stream + mlp(ln_2(stream))
        _, out = run(parts, other.clone())
        if isinstance(out, torch.Tensor) and _same(out, expected, 1e-4):
            return
        if any(diagnose()):
            raise Hint("wrong for a (2, 3, 8) input too: fix the checks above first")
        raise Hint("right for the first input but not for a (2, 3, 8) input: use only x and "
                   "the four parts passed in (no sizes or tensors from outside the function)")

    def zero_updates_give_x():
        zero_parts = _block_parts(zero_updates=True)
        _, out = run(zero_parts, x.clone())
        if not isinstance(out, torch.Tensor) or not _same(out, x, 1e-5):
            raise Hint("when the attention and the MLP both output 0 the block must return x "
                       "unchanged (that is what the residual connections are for); yours does not")

    def input_untouched():
        x_in = x.clone()
        run(parts, x_in)
        if not torch.equal(x_in, x):
            raise Hint("your function changed the caller's x in place (x += ... or an in-place "
                       "method): write x = x + ..., which makes a new tensor; the caller may still "
                       "need its x")

    return [
        ("the attention reads ln_1 of the input", attention_input),
        ("the MLP reads ln_2 of the stream after the attention", mlp_input),
        ("returns the stream plus the MLP's output", output),
        ("works for another input (2, 3, 8)", other_input),
        Guard("zero sub-layer outputs give x back (residuals)", zero_updates_give_x),
        Guard("leaves the caller's x unchanged", input_untouched),
    ]


# ---------------------------------------------------------------- ex-09-top-p

# one row of 10 logits (probabilities 0.30, 0.22, 0.15, 0.11, ... once sorted): with p = 0.6 the
# nucleus is the top three tokens (0.67). The most likely tokens are NOT at the start of the
# vocabulary, so an answer that forgets to map the sorted mask back to vocabulary order keeps the
# wrong tokens, and the least likely tokens hold more than p, so an ascending sort cuts the top.
_TOP_P_ROW = torch.tensor([-0.5, 1.1, -2.3, 1.8, 0.0, 0.8, -1.2, 1.5, -0.2, 0.5])
_TOP_P = 0.6


def _nucleus(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Reference: True where a token is kept (float64, stable sort: ties broken by index)."""
    if p >= 1.0:
        return torch.isfinite(logits)
    probs = torch.softmax(logits.double(), dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
    keep_sorted = (sorted_probs.cumsum(dim=-1) - sorted_probs) < p
    return keep_sorted.scatter(-1, order, keep_sorted)


def _top_p_output(top_p_filter, logits: torch.Tensor, p: float) -> torch.Tensor:
    out = top_p_filter(logits.clone(), p)
    if not isinstance(out, torch.Tensor):
        raise Hint(f"top_p_filter should return a tensor, got {type(out).__name__}; did you "
                   "forget `return`?")
    if tuple(out.shape) != tuple(logits.shape):
        raise Hint(f"for logits of shape {tuple(logits.shape)} expected filtered logits of the "
                   f"same shape, got {tuple(out.shape)}: keep every token and set the cut ones to "
                   "float('-inf')")
    return out.detach()


def _valid_nucleus(kept: torch.Tensor, logits: torch.Tensor, p: float) -> bool:
    """Is ``kept`` (one row) a smallest set of most likely tokens reaching p? (any tie-break)."""
    probs = torch.softmax(logits.double(), dim=-1)
    if not bool(kept.any()):
        return False
    if bool(kept.all()) and p >= 1.0:
        return True
    kept_probs, cut_probs = probs[kept], probs[~kept]
    if len(cut_probs) and float(kept_probs.min()) < float(cut_probs.max()) - 1e-12:
        return False  # a cut token is more likely than a kept one
    mass = float(kept_probs.sum())
    return mass >= p - 1e-9 and mass - float(kept_probs.min()) < p


def _top_p_row_hint(out: torch.Tensor, logits: torch.Tensor, p: float) -> str:
    """A hint for one filtered row ``out`` of ``logits``; "" when it is right."""
    finite = torch.isfinite(out)
    probs = torch.softmax(logits.double(), dim=-1)
    reference = _nucleus(logits, p)
    if torch.isnan(out).any():
        return "your filtered logits contain NaN: set cut tokens to float('-inf'), nothing else"
    if bool(finite.all()) and bool(((out >= 0) & (out <= 1)).all()) and \
            abs(float(out.double().sum()) - 1.0) < 1e-4 and not close(out, logits):
        return ("you returned probabilities: return the LOGITS, with the cut tokens set to "
                "float('-inf') (sampling applies the softmax afterwards)")
    if bool(finite.all()) and not close(out, logits):
        zeros = out == 0
        if bool(zeros.any()) and close(out[~zeros], logits[~zeros]):
            return ("cut tokens got the logit 0, which is not a cut: exp(0) = 1 still gives them "
                    "probability. Set them to float('-inf')")
    if not bool(finite.any()):
        return ("every token was cut: the most likely token must always stay, even when its "
                "probability alone exceeds p")
    if not torch.equal(out[finite], logits[finite]):
        return ("the kept tokens' logits changed: keep them exactly as they were (no softmax, "
                "temperature or renormalisation on the values you return)")
    kept = finite
    if torch.equal(kept, reference):
        return ""
    if bool(kept.all()):
        return (f"nothing was cut: with p = {p} only the most likely tokens whose probabilities "
                "together reach p stay; every other token's logit must become float('-inf')")
    for candidate, hint in _top_p_mistakes(logits, p):
        if torch.equal(kept, candidate):
            return hint
    mass = float(probs[kept].sum())
    order = probs.sort(descending=True, stable=True)[1]
    prefix = bool(kept[order[:int(kept.sum())]].all())
    if prefix and mass < p:
        return (f"your kept tokens hold {mass:.3f} < p = {p}: keep tokens until their mass "
                "reaches p")
    if prefix:
        return (f"you kept {int(kept.sum())} tokens, but {int(reference.sum())} already hold at "
                f"least p = {p}: the nucleus is the SMALLEST set of most likely tokens reaching p")
    return ("wrong tokens kept: sort the probabilities in descending order and keep each token "
            "whose more likely tokens hold less than p (the top token always stays)")


def _top_p_mistakes(logits: torch.Tensor, p: float):
    """(kept mask, hint) of typical wrong answers on one row, most specific first."""
    probs = torch.softmax(logits.double(), dim=-1)
    sorted_probs, order = probs.sort(descending=True, stable=True)
    n_ref = int(_nucleus(logits, p).sum())

    def unsort(keep_sorted, indices=order):
        return keep_sorted.scatter(0, indices, keep_sorted)

    ascending_probs, ascending = probs.sort(stable=True)
    sorted_logits, logit_order = logits.double().sort(descending=True, stable=True)
    threshold = sorted_probs[n_ref - 1]
    yield ((probs.cumsum(-1) - probs) < p,
           "the cumulative sum ran over the vocabulary order: sort the probabilities from the most "
           "to the least likely first, so the nucleus collects the most likely tokens")
    yield (unsort(sorted_probs.cumsum(-1) < p),
           f"off by one: the token that makes the mass REACH p belongs to the nucleus; your kept "
           f"tokens hold less than p = {p} (cut a token only when the tokens MORE likely than it "
           "already hold p)")
    yield (unsort((ascending_probs.cumsum(-1) - ascending_probs) < p, ascending),
           "you kept the least likely tokens and cut the most likely: sort the probabilities in "
           "DESCENDING order, the nucleus starts at the top token")
    yield (torch.arange(len(logits)) < n_ref,
           "you kept the first tokens of the vocabulary, not the most likely ones: the cut was "
           "decided in sorted order and applied to the unsorted logits. Map the sorted mask back "
           "to vocabulary order (e.g. scatter it with the sort indices)")
    for keep in ((sorted_logits.cumsum(-1) - sorted_logits) < p, sorted_logits.cumsum(-1) < p):
        yield (unsort(keep, logit_order),
               "the cut was computed on the logits: the mass is measured in PROBABILITIES, so "
               "take the softmax of the logits before the cumulative sum")
    yield (probs >= threshold,
           "with tied tokens at the edge of the nucleus keep only as many as you need to reach "
           "p (any of them), not every token as likely as the last one you need")


@register("ex-09-top-p", "Top-p (nucleus) sampling")
def top_p(top_p_filter):
    """Check ``top_p_filter(logits (..., V), p) -> (..., V)`` with -inf outside the nucleus."""

    def one_row():
        out = _top_p_output(top_p_filter, _TOP_P_ROW, _TOP_P)
        hint = _top_p_row_hint(out, _TOP_P_ROW, _TOP_P)
        if hint:
            raise Hint(hint)

    def top_token_stays():
        # the top token alone holds 0.63: with p = 0.3 it is the whole nucleus
        logits = torch.tensor([0.5, 2.5, 0.1, 1.0, -1.0, 0.3])
        out = _top_p_output(top_p_filter, logits, 0.3)
        hint = _top_p_row_hint(out, logits, 0.3)
        if hint:
            raise Hint(hint + " (logits " + str([round(v, 2) for v in logits.tolist()]) + ", p = 0.3)")

    def batch():
        logits = _randn(3, 4, 12, seed=21, scale=2.0)  # (B, T, V): each row has its own nucleus
        p = 0.7
        try:
            out = _top_p_output(top_p_filter, logits, p)
        except RuntimeError as err:
            raise Hint(f"a (3, 4, 12) batch of logits made your code fail ({str(err).splitlines()[0]}): "
                       "work along the last dimension (dim=-1) so any leading dimensions pass "
                       "through") from None
        expected = _nucleus(logits, p)
        if torch.equal(torch.isfinite(out), expected) and torch.equal(out[expected], logits[expected]):
            return
        alone = _top_p_output(top_p_filter, logits[0, 0], p)  # the first row on its own
        hint = _top_p_row_hint(alone, logits[0, 0], p)
        if hint:
            raise Hint(f"for the first row of a (3, 4, 12) batch, on its own: {hint}")
        raise Hint("right for one row on its own, wrong in a (B, T, V) batch: every row is its own "
                   "distribution, so softmax, sort and cumulative sum along the last dimension "
                   "(dim=-1), one nucleus per row")

    def ties():
        # probabilities 0.45, 0.16, 0.16, 0.16, 0.06: p = 0.7 needs the top token and TWO of the
        # three tied ones; which two does not matter
        logits = torch.tensor([1.0, 2.0, 1.0, 0.0, 1.0])
        p = 0.7
        out = _top_p_output(top_p_filter, logits, p)
        kept = torch.isfinite(out)
        if int(kept.sum()) == 5 and not bool((out == 0).any()):
            raise Hint("nothing was cut for logits [1, 2, 1, 0, 1] and p = 0.7: the top token and "
                       "two of the three tied tokens already hold 0.78")
        if not _valid_nucleus(kept, logits, p):
            hint = _top_p_row_hint(out, logits, p)
            raise Hint(hint or "for logits [1, 2, 1, 0, 1] and p = 0.7 keep the top token and two "
                       "of the three tied ones")

    def p_one_keeps_all():
        # wide ranges of logits: float32 cumulative sums reach 1.0 before the last, tiny
        # probabilities, so a cut decided by `mass >= p` drops some of them at p = 1
        logits = torch.cat([torch.linspace(8.0, -20.0, 40)[None], _randn(31, 40, seed=4, scale=4.0)])
        out = _top_p_output(top_p_filter, logits, 1.0)
        cut = int((~torch.isfinite(out)).sum())
        if cut:
            raise Hint(f"with p = 1 every token must stay (the nucleus is the whole vocabulary), "
                       f"your answer cut {cut} of {logits.numel()} logits in a (32, 40) batch: in "
                       "float32 the cumulative sum reaches 1.0 before the last, tiny "
                       "probabilities; treat p = 1 (or more) as 'keep everything'")
        if not torch.equal(out, logits):
            raise Hint("with p = 1 the logits must come back unchanged")

    def input_untouched():
        logits = _TOP_P_ROW.clone()
        top_p_filter(logits, _TOP_P)
        if not torch.equal(logits, _TOP_P_ROW):
            raise Hint("your function changed the caller's logits in place (masked_fill_ or an "
                       "assignment into logits): return a new tensor")

    return [
        ("one row: the smallest set of most likely tokens reaching p", one_row),
        ("the top token always stays", top_token_stays),
        ("a batch (B, T, V): one nucleus per row", batch),
        ("tied tokens at the edge: keep just enough", ties),
        Guard("p = 1 keeps every token", p_one_keeps_all),
        Guard("leaves the caller's logits unchanged", input_untouched),
    ]


# ---------------------------------------------------------------- ex-09-prev-token-head


def _planted_weights(n_layer: int, n_head: int, T: int, plant: dict, seed: int) -> torch.Tensor:
    """Causal weights ``(n_layer, n_head, T, T)`` with chosen heads given a pattern.

    ``plant`` maps (layer, head) to "previous" (about 0.8 on t-1), "current" (about 0.9 on the
    diagonal), "first" (about 0.9 on token 0) or "once" (weight 1 on t-1 at the last query only).
    """
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(n_layer, n_head, T, T, generator=generator)
    rows, cols = torch.arange(T)[:, None], torch.arange(T)[None, :]
    for (layer, head), kind in plant.items():
        if kind == "previous":
            scores[layer, head] += 3.5 * (cols == rows - 1)
        elif kind == "current":
            scores[layer, head] += 4.5 * (cols == rows)
        elif kind == "first":
            scores[layer, head] += 4.5 * (cols == 0)
        elif kind == "once":
            scores[layer, head, T - 1] += 30.0 * (cols[0] == T - 2)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


def _previous_scores(weights: torch.Tensor) -> torch.Tensor:
    """(n_layer, n_head): the mean weight on t-1 over queries t = 1..T-1."""
    return weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1)


# layer 2 head 1 is the previous-token head; distractors: a current-token head whose diagonal is
# heavier than any t-1 average, a first-token head, a head that looks back strongly only once
_HEAD_SHAPE = (3, 4, 8)
_HEAD_PLANT = {(2, 1): "previous", (0, 3): "current", (1, 0): "first", (0, 1): "once"}


def _unpack(result, n_head: int) -> Tuple[int, int, float]:
    if isinstance(result, torch.Tensor) and result.numel() in (2, 3):
        result = result.tolist()
    if not isinstance(result, (tuple, list)):
        raise Hint(f"previous_token_head should return (layer, head, score), got "
                   f"{type(result).__name__}; did you forget `return`?")
    if len(result) == 2:
        first = result[0]
        if isinstance(first, (tuple, list)) and len(first) == 2:
            raise Hint("return three values, layer, head and score, not ((layer, head), score)")
        raise Hint(f"previous_token_head should return three values (layer, head, score), got "
                   f"two; a single flattened head index counts layer * n_head + head: split it "
                   f"into its layer and head (divide by n_head = {n_head})")
    if len(result) != 3:
        raise Hint(f"previous_token_head should return three values (layer, head, score), got "
                   f"{len(result)}")
    values = []
    for name, value in zip(("layer", "head"), result[:2]):
        if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise Hint(f"{name} must be a whole number (an index), got {value!r}")
        values.append(int(value))
    score = result[2]
    if isinstance(score, torch.Tensor) and score.numel() == 1:
        score = float(score)
    if isinstance(score, bool) or not isinstance(score, numbers.Real):
        raise Hint(f"score must be a number, got {type(score).__name__}")
    return values[0], values[1], float(score)


def _head_hint(answer: Tuple[int, int, float], weights: torch.Tensor) -> str:
    """A hint naming the mistake behind a wrong (layer, head, score); "" when it is right."""
    n_layer, n_head, T, _ = weights.shape
    scores = _previous_scores(weights.double())
    best = int(scores.flatten().argmax())
    layer, head, score = answer
    want = (best // n_head, best % n_head, float(scores.flatten()[best]))
    flat = weights.double()
    if (layer, head) == want[:2]:
        if math.isclose(score, want[2], rel_tol=1e-4, abs_tol=1e-6):
            return ""
        if math.isclose(score, want[2] * (T - 1) / T, rel_tol=1e-4):
            return (f"your score is {score:.4f}, the average over all {T} queries: query 0 has no "
                    f"previous token, average over t = 1 .. T-1 only ({T - 1} queries)")
        if math.isclose(score, want[2] * (T - 1), rel_tol=1e-4):
            return ("your score is the SUM of the weights on the previous token: the score is "
                    "their average over t = 1 .. T-1")
        return (f"right head, wrong score {score:.4f}: the score is the head's mean weight on "
                "key t-1 over the queries t = 1 .. T-1")
    previous = flat.diagonal(offset=-1, dim1=-2, dim2=-1)  # (n_layer, n_head, T-1)
    if n_layer != n_head and (layer, head) == divmod(best, n_layer):
        return (f"(layer, head) = ({layer}, {head}): you split the flattened index with n_layer = "
                f"{n_layer}; each layer holds n_head = {n_head} heads, so divide by n_head")
    for axis, what in ((1, "the heads"), (0, "the layers")):
        if any(math.isclose(score, float(v), rel_tol=1e-6) for v in previous.mean(dim=axis).flatten()):
            return (f"wrong axis: your score is an average over {what}; average each head's "
                    "weights on the previous token over the QUERIES (the last axis of the "
                    "(n_layer, n_head, T-1) diagonal), one score per (layer, head)")
    if not (0 <= layer < n_layer and 0 <= head < n_head):
        return (f"(layer, head) = ({layer}, {head}) is outside the weights' shape "
                f"{tuple(weights.shape)}: one score per head, shape (n_layer, n_head), taken "
                "from the last two axes (query t, key t-1)")
    if (head, layer) == want[:2]:
        return "layer and head are swapped: weights has shape (n_layer, n_head, T, T)"
    diagonal = flat.diagonal(dim1=-2, dim2=-1).mean(dim=-1).flatten()
    if layer * n_head + head == int(diagonal.argmax()):
        return ("you picked the head with the most weight on the CURRENT token (the diagonal): "
                "the previous token of query t is key t-1, one below the diagonal")
    above = flat.diagonal(offset=1, dim1=-2, dim2=-1).mean(dim=-1).flatten()
    if (layer, head) == (0, 0) and score == 0.0 and float(above.max()) == 0.0:
        return ("(0, 0) with score 0: every head scores 0 when you read the entries above the "
                "diagonal (key t+1, the NEXT token), which a causal model sets to 0; the previous "
                "token of query t is key t-1, just below the diagonal")
    maxima = flat.diagonal(offset=-1, dim1=-2, dim2=-1).amax(dim=-1).flatten()
    if layer * n_head + head == int(maxima.argmax()):
        return ("you ranked the heads by their LARGEST weight on the previous token: rank them by "
                "the average over all queries t = 1 .. T-1 (a head that looks back once is not a "
                "previous-token head)")
    if layer * n_head + head == int(scores.flatten().argmin()):
        return "you picked the head with the LEAST weight on the previous token: take the maximum"
    block = flat[..., 1:, :-1].mean(dim=(-2, -1)).flatten()
    if layer * n_head + head == int(block.argmax()):
        return ("you averaged a whole block of weights: the score uses only the entries "
                "(t, t-1), the diagonal just below the main one")
    return ("not the head with the highest mean weight on the previous token: for every head, "
            "average weights[layer, head, t, t-1] over t = 1 .. T-1, then take the best")


@register("ex-09-prev-token-head", "Find the previous-token head")
def previous_token_head(find_head):
    """Check ``previous_token_head(weights (n_layer, n_head, T, T)) -> (layer, head, score)``."""
    weights = _planted_weights(*_HEAD_SHAPE[:2], _HEAD_SHAPE[2], _HEAD_PLANT, seed=5)
    n_head = _HEAD_SHAPE[1]
    result = None

    def run():
        nonlocal result
        if result is None:
            result = _unpack(find_head(weights.clone()), n_head)
        return result

    def finds_head():
        layer, head, score = run()
        hint = _head_hint((layer, head, score), weights)
        if hint and not hint.startswith(("right head", "your score")):
            raise Hint(hint)

    def score():
        layer, head, value = run()
        hint = _head_hint((layer, head, value), weights)
        if hint.startswith(("right head", "your score")):
            raise Hint(hint)
        if hint:
            raise Hint("fix the head first (see the first check); the score is the chosen head's "
                       "mean weight on the previous token")

    def other_shape():
        # 2 layers, 3 heads, 5 tokens: head (0, 2) looks back
        other = _planted_weights(2, 3, 5, {(0, 2): "previous", (1, 1): "current"}, seed=8)
        try:
            got = _unpack(find_head(other.clone()), 3)
        except (IndexError, RuntimeError) as err:
            raise Hint(f"weights of shape (2, 3, 5, 5) made your code fail ({str(err).splitlines()[0]}): "
                       "read n_layer, n_head and T from weights.shape instead of fixed numbers") from None
        hint = _head_hint(got, other)
        if hint and _head_hint(run(), weights):
            raise Hint("wrong for weights of shape (2, 3, 5, 5) too: fix the checks above first")
        if hint:
            raise Hint("right for the first weights, but for weights of shape (2, 3, 5, 5): "
                       + hint + " (read every size from weights.shape)")

    def input_untouched():
        copy_in = weights.clone()
        find_head(copy_in)
        if not torch.equal(copy_in, weights):
            raise Hint("your function changed the weights passed in (an in-place operation): "
                       "compute the scores without writing into weights")

    return [
        ("finds the previous-token head", finds_head),
        ("its score: the mean weight on t-1 over t = 1..T-1", score),
        ("works for weights of another shape (2, 3, 5, 5)", other_shape),
        Guard("leaves the weights unchanged", input_untouched),
    ]


# ---------------------------------------------------------------- ex-09-conv1d

_ROLES = ("query", "key", "value")


def _c_attn(d: int, seed: int) -> Tuple[torch.Tensor, torch.Tensor]:
    return _randn(d, 3 * d, seed=seed), _randn(3 * d, seed=seed + 1)


def _pairs(result, d: int) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """The answer as three (weight, bias) pairs of tensors, or a Hint saying what it returned."""
    if isinstance(result, dict):
        raise Hint("return a list (or tuple) of three (weight, bias) pairs in the order query, "
                   "key, value, not a dict")
    if not isinstance(result, (tuple, list)):
        raise Hint(f"conv1d_to_linear should return three (weight, bias) pairs, got "
                   f"{type(result).__name__}; did you forget `return`?")
    if len(result) == 6 and all(isinstance(t, torch.Tensor) for t in result):
        raise Hint("return three PAIRS, [(W_q, b_q), (W_k, b_k), (W_v, b_v)], not six tensors")
    if len(result) != 3:
        raise Hint(f"return one (weight, bias) pair per projection, three in all (query, key, "
                   f"value), got {len(result)} item(s)")
    pairs = []
    for role, pair in zip(_ROLES, result):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise Hint(f"the {role} item must be a (weight, bias) pair, got {type(pair).__name__}")
        weight, bias = pair
        if not isinstance(weight, torch.Tensor) or not isinstance(bias, torch.Tensor):
            raise Hint(f"the {role} weight and bias must be tensors, got "
                       f"({type(weight).__name__}, {type(bias).__name__})")
        pairs.append((weight.detach(), bias.detach()))
    return pairs


def _conv1d_hint(role_index: int, weight: torch.Tensor, bias: torch.Tensor, c_weight: torch.Tensor,
                 c_bias: torch.Tensor) -> str:
    """What is wrong with the (weight, bias) returned for ``_ROLES[role_index]``; "" if right."""
    d = c_weight.shape[0]
    role = _ROLES[role_index]
    blocks = [c_weight[:, j * d:(j + 1) * d] for j in range(3)]  # Conv1D (in, out) blocks
    bias_blocks = [c_bias[j * d:(j + 1) * d] for j in range(3)]
    if tuple(weight.shape) in ((d, 3 * d), (3 * d, d)):
        return (f"the {role} weight has shape {tuple(weight.shape)}: the whole fused c_attn weight. "
                f"Split its 3d = {3 * d} output columns into three blocks of d = {d}")
    if tuple(weight.shape) != (d, d):
        return (f"the {role} weight should have shape (d, d) = ({d}, {d}), got {tuple(weight.shape)}: "
                f"split the 3d output columns (the LAST axis of the (d, 3d) Conv1D weight) into "
                "three blocks of d, then transpose each")
    if tuple(bias.shape) == (3 * d,):
        return (f"the {role} bias has all 3d = {3 * d} entries: split the bias like the weight's "
                f"columns, d = {d} entries per projection")
    if tuple(bias.shape) != (d,):
        return f"the {role} bias should have shape ({d},), got {tuple(bias.shape)}"
    weight, bias = weight.float(), bias.float()
    for j, block in enumerate(blocks):
        if close(weight, block.T):
            if j != role_index:
                return (f"the {role} layer got the {_ROLES[j]}'s block: c_attn's output columns "
                        "hold the queries, then the keys, then the values (d columns each)")
            break
        if close(weight, block):
            if j == role_index:
                return ("not transposed: Conv1D stores its weight as (in, out) and computes x @ W; "
                        "nn.Linear stores (out, in) and computes x @ W.T, so transpose each block")
            return (f"the {role} layer got the {_ROLES[j]}'s block, untransposed: the blocks come "
                    "in the order query, key, value, and each must be transposed")
    else:
        interleaved = c_weight.reshape(d, d, 3)[..., role_index]
        if close(weight, interleaved.T) or close(weight, interleaved):
            return ("you took every third column: the three projections are consecutive blocks "
                    "of d columns (columns 0 .. d-1 are the queries), not interleaved")
        rows = c_weight.reshape(3 * d, d)[role_index * d:(role_index + 1) * d]
        if close(weight, rows) or close(weight, c_weight.T.reshape(d, 3 * d)[:, role_index * d:(role_index + 1) * d]):
            return ("reshape/view is not a transpose: it keeps the numbers in memory order and "
                    "only changes the shape. Transpose (.T) the (in, out) blocks instead")
        return (f"the {role} weight is not the transposed {role} block of c_attn: nn.Linear's "
                f"weight[i, j] must equal the Conv1D weight[j, {role_index} * d + i]")
    if not close(bias, bias_blocks[role_index]):
        for j, block in enumerate(bias_blocks):
            if j != role_index and close(bias, block):
                return (f"the {role} bias is the {_ROLES[j]}'s third of c_attn's bias: split the "
                        "bias in the same order as the weight (query, key, value)")
        if close(bias, c_bias.reshape(d, 3)[:, role_index]):
            return ("you took every third bias entry: the bias is split into consecutive "
                    "blocks of d, like the weight's columns")
        return f"the {role} bias must be entries {role_index * d} .. {(role_index + 1) * d - 1} of c_attn's bias"
    return ""


@register("ex-09-conv1d", "From Conv1D to nn.Linear")
def conv1d_to_linear(split_c_attn):
    """Check ``conv1d_to_linear(weight (d, 3d), bias (3d,)) -> [(W_q, b_q), (W_k, b_k), (W_v, b_v)]``."""
    d = 6
    c_weight, c_bias = _c_attn(d, seed=31)
    result = None

    def run():
        nonlocal result
        if result is None:
            result = _pairs(split_c_attn(c_weight.clone(), c_bias.clone()), d)
        return result

    def role(index: int) -> Callable[[], None]:
        def test():
            weight, bias = run()[index]
            hint = _conv1d_hint(index, weight, bias, c_weight, c_bias)
            if hint:
                raise Hint(hint)
            x = _randn(2, 3, d, seed=40 + index)
            fused = x @ c_weight + c_bias  # what GPT-2's Conv1D computes, (2, 3, 3d)
            if not close(nn.functional.linear(x, weight.float(), bias.float()),
                         fused[..., index * d:(index + 1) * d], atol=1e-5):
                raise Hint(f"nn.Linear with your {_ROLES[index]} weight and bias does not "
                           "reproduce the matching third of the Conv1D's output")
        return test

    def other_width():
        small_weight, small_bias = _c_attn(4, seed=33)
        try:
            pairs = _pairs(split_c_attn(small_weight.clone(), small_bias.clone()), 4)
        except (RuntimeError, IndexError) as err:
            raise Hint(f"a (4, 12) weight made your code fail ({str(err).splitlines()[0]}): read d "
                       "from weight.shape instead of a fixed number (GPT-2 small has d = 768)") from None
        for index, (weight, bias) in enumerate(pairs):
            hint = _conv1d_hint(index, weight, bias, small_weight, small_bias)
            if hint and any(_conv1d_hint(i, *pair, c_weight, c_bias) for i, pair in enumerate(run())):
                raise Hint("wrong for a (4, 12) weight too: fix the checks above first")
            if hint:
                raise Hint("right for d = 6, but for a (4, 12) weight: " + hint
                           + " (read d from weight.shape)")

    def loads_into_linear():
        with torch.random.fork_rng(devices=[]):  # leave the reader's random state untouched
            layers = [nn.Linear(d, d) for _ in range(3)]
        for layer, (weight, bias) in zip(layers, run()):
            try:
                layer.load_state_dict({"weight": weight, "bias": bias})
            except RuntimeError as err:
                raise Hint(f"nn.Linear({d}, {d}) cannot load your tensors: "
                           f"{str(err).splitlines()[-1].strip()}") from None

    def inputs_untouched():
        weight_in, bias_in = c_weight.clone(), c_bias.clone()
        split_c_attn(weight_in, bias_in)
        if not (torch.equal(weight_in, c_weight) and torch.equal(bias_in, c_bias)):
            raise Hint("your function changed the c_attn weight or bias in place (e.g. .t_() or "
                       "an assignment into it): the state dict it came from must stay intact")

    return [
        ("query layer = first d output columns, transposed", role(0)),
        ("key layer = next d output columns, transposed", role(1)),
        ("value layer = last d output columns, transposed", role(2)),
        ("works for another width (d = 4)", other_width),
        Guard("nn.Linear(d, d) loads every pair", loads_into_linear),
        Guard("leaves the Conv1D weight and bias unchanged", inputs_untouched),
    ]
