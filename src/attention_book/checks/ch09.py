"""Self-checks for chapter 9 (a GPT that writes).

* :func:`transformer_block` - ``ex-09-block``: the forward of a transformer block from its parts
  in both orders, ``transformer_block(x, ln_1, attn, ln_2, mlp, pre_norm=True)``: GPT-2's
  pre-norm and the original transformer's post-norm. The parts the check passes record what they
  receive, so a hint can say which sub-layer read the wrong tensor (a missing residual, the same
  layer norm twice, the MLP reading the block's input, the flag ignored, ...).
* :func:`top_p` - ``ex-09-top-p``: nucleus filtering, ``top_p_filter(logits, p)``: every token
  outside the smallest set of most likely tokens whose probability reaches ``p`` gets ``-inf``.
* :func:`induction_head` - ``ex-09-induction-head``: from attention weights ``(n_layer,
  n_head, T, T)`` on a block of ``period`` tokens repeated, each head's mean weight on the token
  after the previous occurrence of the current one (key ``t - period + 1``, queries of a repeat).
* :func:`attention_scale` - ``ex-09-find-the-bug-scale``: find the bug: GPT attention scaled by
  ``sqrt(C)`` (the model width) instead of ``sqrt(C // n_head)`` (one head's width).
* :func:`parameters` - ``ex-09-parameters``: the parameters of chapter 9's GPT as a formula,
  against PyTorch's count on real models and GPT-2 small's 124,439,808.

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

__all__ = ["transformer_block", "top_p", "induction_head", "parameters", "attention_scale"]


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
        output_hint = (f"transformer_block should return a tensor, got {type(out).__name__}; did you "
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


def _post_norm_diagnosis(x, parts, spies, out) -> str:
    """The hint for a wrong post-norm block (pre_norm=False), else ``""``."""
    ln_1, attn, ln_2, mlp = parts
    spy_ln_1, spy_attn, _, spy_mlp = spies
    with torch.no_grad():
        stream = ln_1(x + attn(x))  # normalised after the residual sum
        expected = ln_2(stream + mlp(stream))
        pre_stream = x + attn(ln_1(x))
        pre = pre_stream + mlp(ln_2(pre_stream))
    if not isinstance(out, torch.Tensor):
        return f"transformer_block should return a tensor, got {type(out).__name__}"
    if tuple(out.shape) != tuple(x.shape):
        return f"the block must keep the shape (B, T, C) = {tuple(x.shape)}, got {tuple(out.shape)}"
    if _same(out, expected, 1e-4):
        return ""
    if _same(out, pre, 1e-4):
        return ("with pre_norm=False your block still computes the pre-norm order: the flag must switch "
                "to the original transformer's post-norm, where each sub-layer reads the stream itself "
                "and the layer norm acts on the stream after each residual sum")
    seen_attn = spy_attn.inputs[0] if spy_attn.inputs else None
    if seen_attn is not None and not _same(seen_attn, x):
        return ("post-norm: the attention reads the stream x itself, not a normalised copy; the layer norm "
                "comes after the residual sum, ln_1(x + attn(x))")
    seen_mlp = spy_mlp.inputs[0] if spy_mlp.inputs else None
    with torch.no_grad():
        if seen_mlp is not None and _same(seen_mlp, x + attn(x), 1e-4):
            return ("post-norm: normalise the stream after the attention's residual sum, ln_1(x + attn(x)), "
                    "before the MLP reads it")
        if seen_mlp is not None and _same(seen_mlp, ln_2(stream), 1e-4):
            return ("post-norm: the MLP reads the stream itself (already normalised by ln_1); ln_2 comes after "
                    "the MLP's residual sum")
        if _same(out, stream + mlp(stream), 1e-4):
            return ("post-norm normalises after each residual sum, the MLP's too: return "
                    "ln_2(stream + mlp(stream))")
        if _same(out, ln_1(stream + mlp(stream)), 1e-4):
            return "the second sum is normalised with ln_1 again: each sub-layer has its own layer norm (ln_2)"
        if _same(out, ln_2(mlp(stream)), 1e-4):
            return "the MLP's residual connection is missing: ln_2(stream + mlp(stream))"
    return ("with pre_norm=False the output must be the original transformer's block: the stream after "
            "the attention, ln_1(x + attn(x)), then ln_2 of it plus the MLP's output on it")


@register("ex-09-block", "Pre-norm and post-norm in one block")
def transformer_block(block_forward):
    """Check ``transformer_block(x, ln_1, attn, ln_2, mlp, pre_norm=True) -> (B, T, C)``."""
    parts = _block_parts()
    x = _stream_input()

    def run(parts_to_use, x_in, pre_norm):
        spies = [_Spy(part, name) for part, name in zip(parts_to_use, ("ln_1", "attn", "ln_2", "mlp"))]
        with torch.no_grad():
            out = block_forward(x_in, *spies, pre_norm=pre_norm)
        return spies, out

    def pre_norm():
        spies, out = run(parts, x.clone(), True)
        attention_hint, mlp_hint, output_hint = _block_diagnosis(x, parts, spies, out)
        if not isinstance(out, torch.Tensor):  # nothing returned: say that first
            raise Hint(output_hint)
        hints = [hint for hint in (attention_hint, mlp_hint, output_hint) if hint]
        if hints:
            raise Hint(hints[0])

    def post_norm():
        spies, out = run(parts, x.clone(), False)
        hint = _post_norm_diagnosis(x, parts, spies, out)
        if hint:
            raise Hint(hint)

    def default_is_pre_norm():
        with torch.no_grad():
            out = block_forward(x.clone(), *parts)
            _, want = run(parts, x.clone(), True)
        if not isinstance(out, torch.Tensor) or not isinstance(want, torch.Tensor) or not _same(out, want, 1e-5):
            raise Hint("without the pre_norm argument the block must be GPT-2's pre-norm block (pre_norm=True "
                       "by default)")

    def other_input():
        other = _randn(_B, 3, _C, seed=11, scale=0.5) - 2.0  # a shorter sequence, other values
        for flag in (True, False):
            spies, out = run(parts, other.clone(), flag)
            hint = ([h for h in _block_diagnosis(other, parts, spies, out) if h] or [""])[0] if flag else \
                _post_norm_diagnosis(other, parts, spies, out)
            if hint:
                raise Hint(f"for a (2, 3, 8) input with pre_norm={flag}: {hint}")

    def zero_updates():
        zero_parts = _block_parts(zero_updates=True)
        ln_1, _, ln_2, _ = zero_parts
        _, out_pre = run(zero_parts, x.clone(), True)
        _, out_post = run(zero_parts, x.clone(), False)
        with torch.no_grad():
            post = ln_2(ln_1(x))
        if not isinstance(out_pre, torch.Tensor) or not _same(out_pre, x, 1e-5):
            raise Hint("when the attention and the MLP both output 0 a pre-norm block must return x unchanged "
                       "(the residual connections); yours does not")
        if not isinstance(out_post, torch.Tensor) or not _same(out_post, post, 1e-5):
            raise Hint("when the attention and the MLP both output 0 a post-norm block returns ln_2(ln_1(x)): the "
                       "stream normalised twice; yours does not")

    def input_untouched():
        x_in = x.clone()
        run(parts, x_in, True)
        run(parts, x_in, False)
        if not torch.equal(x_in, x):
            raise Hint("your function changed the caller's x in place (x += ... or an in-place method): write "
                       "x = x + ..., which makes a new tensor; the caller may still need its x")

    return [
        ("pre_norm=True: GPT-2's block", pre_norm),
        ("pre_norm=False: the original transformer's block", post_norm),
        Guard("pre-norm is the default", default_is_pre_norm),
        ("both orders on another input (2, 3, 8)", other_input),
        Guard("zero sub-layer outputs: x (pre-norm), ln_2(ln_1(x)) (post-norm)", zero_updates),
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


# ---------------------------------------------------------------- ex-09-induction-head
# An induction head (Olsson et al. 2022): on a text that repeats, the query at token t attends to
# the token right AFTER the previous occurrence of token t, and so predicts what came next last
# time. On a random block of `period` tokens repeated, that key is t - period + 1, for every query
# of a repeat (t >= period): the first copy has no earlier occurrence to look back at.


def induction_reference(weights: torch.Tensor, period: int) -> torch.Tensor:
    """(n_layer, n_head): the mean weight of queries t = period .. T-1 on key t - period + 1."""
    T = weights.shape[-1]
    queries = torch.arange(period, T)
    return weights[..., queries, queries - period + 1].mean(dim=-1)


def _induction_weights(n_layer: int, n_head: int, period: int, repeats: int, plant: dict, seed: int):
    """Causal weights ``(n_layer, n_head, T, T)``, T = period * repeats, some heads given a pattern:
    "induction" (key t - period + 1), "duplicate" (key t - period), "previous" (key t - 1),
    "current" (the diagonal)."""
    T = period * repeats
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(n_layer, n_head, T, T, generator=generator)
    rows, cols = torch.arange(T)[:, None], torch.arange(T)[None, :]
    later = rows >= period
    for (layer, head), kind in plant.items():
        if kind == "induction":
            scores[layer, head] += 4.0 * ((cols == rows - period + 1) & later)
        elif kind == "duplicate":
            scores[layer, head] += 4.0 * ((cols == rows - period) & later)
        elif kind == "previous":
            scores[layer, head] += 4.0 * (cols == rows - 1)
        elif kind == "current":
            scores[layer, head] += 5.0 * (cols == rows)
    future = torch.ones(T, T, dtype=torch.bool).triu(1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


def _induction_diagnosis(got: torch.Tensor, weights: torch.Tensor, period: int) -> str:
    n_layer, n_head, T, _ = weights.shape
    queries = torch.arange(period, T)
    candidates = [
        (weights[..., queries, queries - period].mean(dim=-1),
         "you scored the weight on the previous occurrence of the token itself (key t - period, a "
         "duplicate-token head): an induction head attends to the token AFTER it, key t - period + 1"),
        (weights.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=-1),
         "these are previous-token scores (key t - 1): an induction head looks back a whole period, to "
         "the token after the previous occurrence of the current one, key t - period + 1"),
        (weights.diagonal(offset=-(period - 1), dim1=-2, dim2=-1).mean(dim=-1),
         "you also averaged query period - 1, which is still in the first copy: there the current token "
         "has not occurred before; average only over the queries t = period .. T-1"),
        (weights[..., queries, queries - period + 1].sum(dim=-1),
         "your scores are sums over the queries: average them (a mean weight, between 0 and 1)"),
        (weights[..., queries, queries - period + 1].mean(dim=-1).T,
         "layers and heads are swapped: weights has shape (n_layer, n_head, T, T)"),
    ]
    for candidate, hint in candidates:
        if candidate.shape == got.shape and close(got, candidate, atol=1e-6):
            return hint
    if got.shape != (n_layer, n_head):
        if got.numel() in (2, 3) and got.ndim == 1:
            return ("return one score per head, a tensor of shape (n_layer, n_head), not the best head: "
                    "the exercise's second part compares the heads")
        return f"expected scores of shape (n_layer, n_head) = {(n_layer, n_head)}, got {tuple(got.shape)}"
    return ""


#: 3 layers of 4 heads, a block of 5 tokens repeated 3 times; layer 2 head 1 is the induction head
_INDUCTION_PLANT = {(2, 1): "induction", (1, 2): "duplicate", (0, 3): "previous", (0, 0): "current"}


@register("ex-09-induction-head", "Find the induction heads")
def induction_head(induction_scores):
    """Check ``induction_scores(weights (n_layer, n_head, T, T), period) -> (n_layer, n_head)``."""

    def case(n_layer, n_head, period, repeats, plant, seed, what):
        weights = _induction_weights(n_layer, n_head, period, repeats, plant, seed)
        got = induction_scores(weights.clone(), period)
        if not isinstance(got, torch.Tensor):
            raise Hint(f"induction_scores should return a tensor, got {type(got).__name__}; did you "
                       "forget `return`?")
        got = got.detach().double()
        want = induction_reference(weights.double(), period)
        if got.shape == want.shape and close(got, want, atol=1e-6):
            return
        raise Hint(_induction_diagnosis(got, weights.double(), period) or (
            f"{what}: every head's score is its mean weight on key t - period + 1 over the queries "
            "t = period .. T-1"))

    def picks_the_planted_head():
        weights = _induction_weights(3, 4, 5, 3, _INDUCTION_PLANT, seed=1)
        got = induction_scores(weights.clone(), 5)
        if isinstance(got, torch.Tensor) and got.shape == (3, 4) and int(got.flatten().argmax()) != 2 * 4 + 1:
            raise Hint("the head that attends to the token after the previous occurrence (layer 2, head 1) "
                       "must score highest")

    def unchanged():
        weights = _induction_weights(2, 2, 4, 2, {(1, 0): "induction"}, seed=2)
        mine = weights.clone()
        induction_scores(mine, 4)
        if not torch.equal(mine, weights):
            raise Hint("your function changed the weights passed in: compute the scores without writing "
                       "into weights")

    return [
        ("3 layers x 4 heads, a block of 5 repeated 3 times",
         lambda: case(3, 4, 5, 3, _INDUCTION_PLANT, 1, "3 layers x 4 heads, period 5")),
        ("2 layers x 3 heads, a block of 8 repeated twice",
         lambda: case(2, 3, 8, 2, {(1, 0): "induction", (0, 2): "previous"}, 3, "2 x 3 heads, period 8")),
        ("a period of 2 (every other token)",
         lambda: case(1, 2, 2, 4, {(0, 1): "induction", (0, 0): "duplicate"}, 4, "period 2")),
        Guard("the planted induction head scores highest", picks_the_planted_head),
        Guard("leaves the weights unchanged", unchanged),
    ]


# ---------------------------------------------------------------- ex-09-parameters
# The parameters of chapter 9's GPT counted by the learner as a formula, and by PyTorch on real
# models (sum of numel over model.parameters(), where the tied output layer appears once).


def gpt_parameters_reference(vocab_size, context_length, d_model, n_layer):
    """Embeddings V d + T d; per block 12 d^2 + 13 d; the final layer norm 2 d; lm_head tied."""
    d = d_model
    return vocab_size * d + context_length * d + n_layer * (12 * d * d + 13 * d) + 2 * d


def measured_gpt_parameters(vocab_size, context_length, d_model, n_layer, n_head):
    from ..gpt import GPT, GPTConfig

    with torch.random.fork_rng(devices=[]):
        model = GPT(GPTConfig(vocab_size=vocab_size, context_length=context_length, d_model=d_model,
                              n_layer=n_layer, n_head=n_head))
    return sum(p.numel() for p in model.parameters())


def _parameters_diagnosis(answer, V, T, d, L, H) -> str:
    right = gpt_parameters_reference(V, T, d, L)
    blocks = L * (12 * d * d + 13 * d)
    wrong = [
        (right + V * d, "the output layer is tied to the token embedding (lm_head.weight is "
         "token_embedding.weight): one (V, d) matrix, counted once"),
        (right - T * d, "the position embeddings are missing: one d-vector per position, T * d"),
        (V * d + T * d + L * 12 * d * d, "the biases and layer norms are missing: each block has 13 d of them "
         "(q, k, v, out_proj and the MLP's biases, two layer norms of 2 d), plus 2 d for ln_f"),
        (right - 2 * d, "the final layer norm ln_f is missing: 2 d (its gain and its bias)"),
        (right - L * 4 * d - 2 * d, "the layer norms are missing: each has a gain and a bias of d numbers, two "
         "per block and ln_f"),
        (V * d + T * d + L * (6 * d * d + 10 * d) + 2 * d, "the MLP is d -> 4d -> d: its two layers hold "
         "4 d^2 + 4 d and 4 d^2 + d parameters"),
        (V * d + T * d + L * (4 * d * d + 13 * d) + 2 * d, "the MLP is missing from the blocks: d -> 4d -> d, "
         "8 d^2 + 5 d parameters per block"),
        (V * d + T * d + L * (3 * d * d + 7 * d + 8 * d * d + 5 * d) + 2 * d, "attention has four projections: "
         "W_query, W_key, W_value and out_proj, d^2 + d each"),
        (V * d + T * d + H * blocks + 2 * d, "the heads do not multiply the parameters: the projections are d x d "
         "whatever the number of heads (each head reads d / H of their columns)"),
    ]
    for value, hint in wrong:
        if math.isclose(float(answer), float(value), rel_tol=1e-12):
            return hint
    return ""


_PARAMETER_CASES = [(40, 16, 32, 2, 4), (100, 8, 24, 3, 6), (7, 1, 8, 1, 1), (65, 64, 128, 2, 4)]


@register("ex-09-parameters", "GPT-2's parameters, counted")
def parameters(gpt_parameters):
    """Check ``gpt_parameters(vocab_size, context_length, d_model, n_layer, n_head)`` against the
    parameters of chapter 9's GPT."""

    def number(*sizes):
        answer = gpt_parameters(*sizes)
        if isinstance(answer, torch.Tensor) and answer.numel() == 1:
            answer = answer.item()
        if not isinstance(answer, numbers.Real) or isinstance(answer, bool):
            raise Hint(f"gpt_parameters should return a number, got {type(answer).__name__}; did you forget "
                       "`return`?")
        return answer

    def case(V, T, d, L, H):
        def test():
            answer = number(V, T, d, L, H)
            measured = measured_gpt_parameters(V, T, d, L, H)
            if answer == measured:
                return
            raise Hint(_parameters_diagnosis(answer, V, T, d, L, H) or (
                f"vocab_size={V}, context_length={T}, d_model={d}, n_layer={L}: the model holds {measured:,} "
                f"parameters, you count {answer:,}; count the embeddings, every layer of a block (attention, "
                "MLP, two layer norms) and the final layer norm, as a formula"))
        return test

    def gpt2_small():
        answer = number(50_257, 1024, 768, 12, 12)
        if answer != 124_439_808:
            raise Hint(_parameters_diagnosis(answer, 50_257, 1024, 768, 12, 12) or (
                "right for the small GPTs but not for GPT-2 small (124,439,808 parameters): write the count "
                "as a formula in vocab_size, context_length, d_model and n_layer"))

    def heads_do_not_matter():
        if len({number(40, 16, 24, 2, H) for H in (1, 2, 3, 4, 6)}) != 1:
            raise Hint("your count changes with the number of heads; the projections are d x d whatever the "
                       "number of heads")

    tests = [(f"V={V}, T={T}, d={d}, L={L} (counted by PyTorch)", case(V, T, d, L, H))
             for V, T, d, L, H in _PARAMETER_CASES]
    return tests + [("GPT-2 small: 124,439,808", gpt2_small),
                    Guard("the count does not depend on the number of heads", heads_do_not_matter)]


# ---------------------------------------------------------------- ex-09-find-the-bug-scale
# Find the bug: a GPT-2-style attention that divides the scores by sqrt(C), the model's width,
# instead of sqrt(C // n_head), the width of one head. With one head the two agree; with many
# heads the weights come out flatter than the model was trained with (or initialised for).


def gpt_attention_reference(x, c_attn, n_head, scale="head", mask="causal", order=("q", "k", "v")):
    """Causal multi-head attention of GPT-2's layout (x @ c_attn, no output projection); the
    keywords make one classic mistake (for the hints)."""
    B, T, C = x.shape
    hd = C // n_head
    parts = dict(zip(order, (x @ c_attn).split(C, dim=-1)))
    q, k, v = (parts[name].view(B, T, n_head, hd).transpose(1, 2) for name in ("q", "k", "v"))
    divisor = {"head": hd ** 0.5, "model": C ** 0.5, "none": 1.0, "head-no-sqrt": float(hd),
               "heads": n_head ** 0.5}[scale]
    scores = q @ k.transpose(-2, -1) / divisor
    if mask == "causal":
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T, C)


_SCALE_MISTAKES = (
    (dict(scale="model"), "the scores are divided by sqrt(C), the width of the whole model: each head's "
     "dot products have only C // n_head terms, so divide by sqrt(C // n_head) (sqrt(q.shape[-1]))"),
    (dict(scale="none"), "the scores are not scaled at all: divide by sqrt(head_dim), head_dim = C // n_head"),
    (dict(scale="head-no-sqrt"), "you divided by head_dim; the scale is 1 / sqrt(head_dim)"),
    (dict(scale="heads"), "you divided by sqrt(n_head); the scale is 1 / sqrt(head_dim), head_dim = C // n_head"),
    (dict(mask="none"), "the causal mask is gone: keep hiding key j > query i"),
    (dict(order=("k", "q", "v")), "c_attn holds the queries, then the keys, then the values: take the "
     "three C-column blocks of x @ c_attn in that order"),
)


@register("ex-09-find-the-bug-scale", "Find the bug: a scale that grows with the model")
def attention_scale(gpt_attention):
    """Check the fixed ``gpt_attention(x, c_attn, n_head)`` -> ``(B, T, C)``."""

    def case(B, T, C, n_head, seed):
        generator = torch.Generator().manual_seed(seed)
        x = torch.randn(B, T, C, generator=generator)
        c_attn = torch.randn(C, 3 * C, generator=generator) / C ** 0.5 * 2.0  # sharp enough to tell
        got = gpt_attention(x.clone(), c_attn.clone(), n_head)
        if not isinstance(got, torch.Tensor):
            raise Hint(f"gpt_attention should return a tensor, got {type(got).__name__}")
        want = gpt_attention_reference(x, c_attn, n_head)
        if got.shape != want.shape:
            raise Hint(f"expected an output of shape {tuple(want.shape)} (B, T, C), got {tuple(got.shape)}")
        if close(got, want, atol=1e-5):
            return
        for keywords, hint in _SCALE_MISTAKES:
            if close(got, gpt_attention_reference(x, c_attn, n_head, **keywords), atol=1e-5):
                raise Hint(hint)
        raise Hint(f"with n_head={n_head} the output differs from causal multi-head attention scaled by "
                   "1 / sqrt(C // n_head)")

    def unchanged():
        generator = torch.Generator().manual_seed(20)
        x, c_attn = torch.randn(1, 3, 8, generator=generator), torch.randn(8, 24, generator=generator)
        mine_x, mine_c = x.clone(), c_attn.clone()
        gpt_attention(mine_x, mine_c, 2)
        if not (torch.equal(mine_x, x) and torch.equal(mine_c, c_attn)):
            raise Hint("your function changed its inputs in place; compute new tensors instead")

    return [
        ("12 heads of 4 (C = 48)", lambda: case(2, 6, 48, 12, 0)),
        ("4 heads of 16 (C = 64)", lambda: case(1, 9, 64, 4, 1)),
        ("one head: the scale was right there", lambda: case(2, 5, 16, 1, 2)),
        Guard("leaves the inputs unchanged", unchanged),
    ]
