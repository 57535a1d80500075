"""The four functions a chapter calls to make an explorer; each checks its arguments first."""

from __future__ import annotations

import math
from typing import Iterable, List, Optional, Sequence, Tuple

import torch

from ._inputs import ExplorerInputError, boolean, check_heads, check_int, check_projection, to_matrix, to_tokens
from ._inputs import to_vector
from ._widgets import DkExplorer, HeadsExplorer, MaskExplorer, TrainingPlayback
from ._widgets import SamplingExplorer, check_temperature, check_top_p

__all__ = ["dk_explorer", "heads_explorer", "mask_explorer", "training_playback", "sampling_explorer"]


def _projection_data(tokens, inputs, W_query, W_key):
    data = dict(
        tokens=to_tokens(tokens),
        inputs=to_matrix("inputs", inputs),
        w_query=to_matrix("W_query", W_query, allow_linear=True),
        w_key=to_matrix("W_key", W_key, allow_linear=True),
    )
    check_projection(data["tokens"], data["inputs"], data["w_query"], data["w_key"])
    return data


def dk_explorer(tokens, inputs, W_query, W_key, d_k: Optional[int] = None, scaled: bool = True,
                title: str = "") -> DkExplorer:
    """Chapter 3: a d_k slider and a scaling switch over the attention weights of ``inputs``.

    The projections use the first ``d_k`` columns of ``W_query`` / ``W_key`` (shape
    ``(d_in, d_out)``), so the slider runs from 1 to ``d_out``; ``d_k=None`` starts at ``d_out``.
    With ``scaled=True`` the scores are divided by ``sqrt(d_k)`` before the softmax. Beside each
    row the explorer shows its largest weight and its entropy (how spread out it is).
    """
    data = _projection_data(tokens, inputs, W_query, W_key)
    d_out = len(data["w_query"][0])
    d_k = d_out if d_k is None else check_int("d_k", d_k, 1, d_out, " (the number of projection columns used)")
    return DkExplorer(**data, d_k=d_k, scaled=boolean("scaled", scaled), title=title)


def heads_explorer(tokens, inputs, W_query, W_key, num_heads: int = 2, causal: bool = False,
                   title: str = "") -> HeadsExplorer:
    """Chapter 5: split the ``d_out`` projection columns into heads, one heatmap per head.

    Head ``h`` uses columns ``h*head_dim:(h+1)*head_dim`` with ``head_dim = d_out // num_heads``
    and scales its scores by ``1/sqrt(head_dim)``. The slider offers every divisor of ``d_out``;
    with more than four heads the maps switch to a compact grid (colour only, the weight in each
    cell's tooltip) so that 12 heads still fit on a screen.
    """
    data = _projection_data(tokens, inputs, W_query, W_key)
    num_heads = check_heads(num_heads, len(data["w_query"][0]))
    return HeadsExplorer(**data, num_heads=num_heads, causal=boolean("causal", causal), title=title)


def mask_explorer(tokens, inputs, W_query, W_key, causal: bool = True, query_index: Optional[int] = None,
                  title: str = "") -> MaskExplorer:
    """Chapter 7: switch the causal mask on and off and follow one query row.

    Scores are scaled by ``1/sqrt(d_out)``; masked positions get ``-inf`` before the softmax, so
    their weights are exactly 0 and every row still sums to 1. ``query_index`` (default: the middle
    token) selects the highlighted row; negative values count from the end.
    """
    data = _projection_data(tokens, inputs, W_query, W_key)
    num_tokens = len(data["tokens"])
    if query_index is None:
        query_index = (num_tokens - 1) // 2
    query_index = check_int("query_index", query_index, -num_tokens, num_tokens - 1, " (a row of the weights)")
    return MaskExplorer(**data, causal=boolean("causal", causal), query_index=query_index % num_tokens,
                        title=title)


def _compact(value: float) -> float:
    # 7 significant digits: float32 precision, about half the bytes of a full float64 repr.
    return float(f"{value:.7g}")


def _sentences(tokens) -> Tuple[List[List[str]], bool]:
    """``(token lists, several)``: one list of strings, or a list of S lists of the same length."""
    if isinstance(tokens, Sequence) and not isinstance(tokens, str) and len(tokens) \
            and all(isinstance(t, Sequence) and not isinstance(t, str) for t in tokens):
        sentences = [to_tokens(t, f"tokens[{s}]") for s, t in enumerate(tokens)]
        lengths = sorted({len(t) for t in sentences})
        if len(lengths) > 1:
            raise ExplorerInputError(
                f"the sentences in tokens have different lengths {lengths}: pass sentences of one length "
                "(the rows of one training batch), or one playback per length"
            )
        return sentences, True
    return [to_tokens(tokens)], False


def training_playback(tokens, snapshots: Iterable[Tuple[int, object]], losses: Optional[Sequence[float]] = None,
                      title: str = "", causal: Optional[bool] = None) -> TrainingPlayback:
    """Chapter 8: a slider that scrubs through attention weights saved during training.

    One sentence: ``tokens`` is a list of ``T`` strings and ``snapshots`` a list of
    ``(step, weights)`` with ``weights`` of shape ``(T, T)``, or ``(H, T, T)`` for one heatmap per
    head.

    Several sentences (a training batch): ``tokens`` is a list of ``S`` token lists, all of length
    ``T``, and each snapshot's ``weights`` has shape ``(S, T, T)`` or ``(S, H, T, T)``. The explorer
    then adds a sentence selector (a drop-down list, operable with the keyboard); the reader picks a
    sentence and scrubs through the steps. For example, with ``result.snapshots`` holding
    ``(step, (6, T, T))`` pairs for six sentences::

        training_playback([encode(s) for s in sentences], result.snapshots, losses=result.losses)

    Steps must increase. ``losses`` (optional) is either one loss per snapshot, or one loss per
    training step (``losses[i]`` at step ``i``); the explorer draws the curve and marks the current
    step. ``causal=None`` (default) hatches the cells above the diagonal when every snapshot is
    exactly 0 there (a causal model); pass True or False to decide yourself. The playback replays
    the saved weights: it computes nothing. Weights are stored to 7 significant digits.
    """
    sentences, several = _sentences(tokens)
    try:
        snapshots = list(snapshots)
    except TypeError:
        raise TypeError("snapshots must be a list of (step, weights) pairs") from None
    if not snapshots:
        raise ExplorerInputError("snapshots is empty: save at least one (step, weights) pair during training")
    num_sentences, num_tokens = len(sentences), len(sentences[0])
    sentence_dims = f"{num_sentences}, " if several else ""
    steps, stacks, first_shape, upper_zero = [], [], None, True
    for position, item in enumerate(snapshots):
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise TypeError(f"snapshots[{position}] must be a (step, weights) pair, got {type(item).__name__}")
        step, weights = item
        if isinstance(step, torch.Tensor) and step.numel() == 1 and not step.is_floating_point():
            step = int(step)
        step = check_int(f"the step of snapshots[{position}]", step, 0, 10**12)
        if steps and step <= steps[-1]:
            raise ExplorerInputError(
                f"snapshot steps must increase: step {step} comes after step {steps[-1]}; sort the snapshots by step"
            )
        tensor = torch.as_tensor(weights.detach() if isinstance(weights, torch.Tensor) else weights)
        if not several:
            tensor = tensor.unsqueeze(0)  # (1, T, T) or (1, H, T, T)
        if tensor.ndim == 3:
            tensor = tensor.unsqueeze(1)  # (S, 1, T, T): one head
        if tensor.ndim != 4 or tensor.shape[0] != num_sentences or tuple(tensor.shape[2:]) != (num_tokens, num_tokens):
            got = tuple(tensor.shape if several else tensor.shape[1:])
            raise ExplorerInputError(
                f"the weights at step {step} have shape {got}: expected ({sentence_dims}{num_tokens}, {num_tokens}) "
                f"or ({sentence_dims}num_heads, {num_tokens}, {num_tokens}) for "
                + (f"{num_sentences} sentences of " if several else "") + f"{num_tokens} tokens"
            )
        if first_shape is None:
            first_shape = tuple(tensor.shape)
        elif tuple(tensor.shape) != first_shape:
            raise ExplorerInputError(
                f"the weights at step {step} have shape {tuple(tensor.shape)} but the first snapshot has {first_shape}"
            )
        stack = [[to_matrix(f"the weights at step {step}", head) for head in sentence] for sentence in tensor]
        upper_zero = upper_zero and all(
            head[i][j] == 0 for sentence in stack for head in sentence
            for i in range(num_tokens) for j in range(i + 1, num_tokens))
        steps.append(step)
        stacks.append([[[[_compact(w) for w in row] for row in head] for head in sentence] for sentence in stack])
    causal = (upper_zero and num_tokens > 1) if causal is None else boolean("causal", causal)
    loss_values, loss_steps = _align_losses(losses, steps)
    return TrainingPlayback(tokens=sentences, steps=steps, snapshots=stacks, losses=loss_values,
                            loss_steps=loss_steps, causal=causal, snapshot_index=0, sentence_index=0,
                            title=title)


def _align_losses(losses, steps: List[int]) -> Tuple[List[float], List[int]]:
    if losses is None:
        return [], []
    values = [float(v) for v in torch.as_tensor(losses, dtype=torch.float64).reshape(-1).tolist()]
    if not all(math.isfinite(v) for v in values):
        raise ExplorerInputError("losses contains NaN or inf: pass finite loss values")
    if len(values) == len(steps):
        loss_steps = list(steps)
    elif len(values) > steps[-1]:
        loss_steps = list(range(len(values)))
    else:
        raise ExplorerInputError(
            f"got {len(values)} losses for {len(steps)} snapshots up to step {steps[-1]}: pass one loss "
            f"per snapshot ({len(steps)} values) or one per training step (at least {steps[-1] + 1} values)"
        )
    return [_compact(v) for v in values], loss_steps


def sampling_explorer(tokens, logits, temperature: float = 1.0, top_k: Optional[int] = None,
                      top_p: Optional[float] = None, title: str = "") -> SamplingExplorer:
    """Chapter 9: sliders for temperature, top-k and top-p over a next-token distribution.

    ``tokens`` is a list of ``n`` strings (2 to 200, e.g. the decoded top 30 candidates) and
    ``logits`` their ``n`` scores (a 1-D tensor or list). The bars show the probabilities after
    the temperature (the softmax of ``logits / temperature``), greyed and hatched where top-k
    (keep the ``k`` highest scores) or top-p (then keep the smallest set of most likely tokens
    whose renormalised probability reaches ``p``) cut the token, and the probability each kept
    token is sampled with once the kept ones are renormalised to sum to 1. ``top_k=None`` and
    ``top_p=None`` start without a cut; ``temperature`` goes from 0.1 to 2.0. The scores are
    those of the shown tokens only: the rest of the vocabulary is left out of the softmax.
    """
    tokens = to_tokens(tokens)
    values = to_vector("logits", logits)
    if len(tokens) != len(values):
        raise ExplorerInputError(f"there are {len(tokens)} tokens but {len(values)} logits: pass one token label "
                                 "per logit")
    n = len(values)
    top_k = n if top_k is None else check_int("top_k", top_k, 1, n, f" ({n} keeps every token)")
    top_p = 1.0 if top_p is None else check_top_p(top_p)
    return SamplingExplorer(tokens=tokens, logits=values, temperature=check_temperature(temperature),
                            top_k=top_k, top_p=top_p, title=title)
