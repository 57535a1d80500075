"""Self-checks for chapter 8 (training the Hello-World model).

* :func:`training_step` - ``ex-08-training-step``: one complete optimisation step
  ``training_step(model, optimizer, inputs, targets) -> float``.
* :func:`accuracy` - ``ex-08-accuracy``: ``last_token_accuracy(logits, targets) -> float``, the
  fraction of sequences whose last next-token prediction is right.
* :func:`override` - ``ex-08-override``: ``predict_with_last_row(model, inputs, last_row) -> (B,)``,
  the model's last-position predictions when the last query's attention weights are replaced
  by ``last_row`` (an ablation: it needs to know how the output depends on the weights).

Every check runs the answer on small problems whose typical mistakes give different numbers, so
each mistake gets its own hint; properties a non-attempt also has are :class:`Guard` s.
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F

from ..hello_world import HelloWorldModel
from .core import Guard, Hint, register

__all__ = ["training_step", "accuracy", "override"]

_VOCAB, _EMBD, _T, _B = 23, 4, 4, 3
_LR = 0.5


def _tiny_problem(seed: int = 8):
    """A small model (23-token vocabulary) and a (3, 4) batch: fast and deterministic."""
    with torch.random.fork_rng(devices=[]):  # leave the reader's random state alone
        torch.manual_seed(seed)
        model = HelloWorldModel(n_embd=_EMBD, context_length=_T + 1, vocab_size=_VOCAB)
    generator = torch.Generator().manual_seed(seed)
    token_ids = torch.randint(0, _VOCAB, (_B, _T + 1), generator=generator)
    return model, token_ids[:, :-1], token_ids[:, 1:]


def _loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _reference_steps(model, inputs, targets, steps: int):
    """Parameters after ``steps`` correct SGD steps, and the loss of each step."""
    model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=_LR)
    losses = []
    for _ in range(steps):
        loss = _loss(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return [p.detach().clone() for p in model.parameters()], losses


def _accumulated_steps(model, inputs, targets, steps: int):
    """What you get without zero_grad: every step adds its gradient to all the earlier ones."""
    model = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=_LR)
    for _ in range(steps):
        _loss(model(inputs), targets).backward()
        optimizer.step()
    return [p.detach().clone() for p in model.parameters()]


def _same(params_a, params_b, atol=1e-5) -> bool:
    return all(torch.allclose(a, b, atol=atol) for a, b in zip(params_a, params_b))


def _as_number(value, what: str) -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise Hint(f"{what} should be one number (the mean loss), got a tensor of shape {tuple(value.shape)}")
        return float(value.detach())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Hint(f"{what} should return a number, got {type(value).__name__}; did you forget `return`?")


def _diagnose_crash(err: Exception) -> None:
    """Turn the errors typical training steps raise into hints (re-raise anything else)."""
    text = str(err)
    if "does not require grad" in text or "does not have a grad_fn" in text:
        raise Hint(
            "loss.backward() found no graph: the loss was computed from detached numbers "
            "(.detach(), .item(), .data or torch.no_grad()), so no gradient can reach the "
            f"parameters; compute it from model(inputs) directly (your code raised: {text})"
        ) from None
    if "50257" in text or "50_257" in text:
        raise Hint(
            "do not hard-code the vocabulary size (50257): this check uses a model with "
            f"{_VOCAB} tokens; flatten with logits.view(-1, logits.size(-1)) (your code raised: {text})"
        ) from None
    if "target size" in text.lower() or "expected target size" in text.lower():
        raise Hint(
            "F.cross_entropy wants scores of shape (N, vocab_size) and targets of shape (N,): "
            "flatten both first, logits.view(-1, logits.size(-1)) and targets.reshape(-1) "
            f"(your code raised: {text})"
        ) from None
    if "view size is not compatible" in text:
        raise Hint(
            "targets sliced from a bigger tensor are not contiguous, so targets.view(-1) fails: "
            f"use targets.reshape(-1) (your code raised: {text})"
        ) from None
    raise err


def _adamw_problem():
    """The same tiny problem, for a check with AdamW: an update by hand cannot imitate it."""
    model, inputs, targets = _tiny_problem(seed=9)
    reference = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(reference.parameters(), lr=0.05)
    loss = _loss(reference(inputs), targets)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return model, inputs, targets, [p.detach().clone() for p in reference.parameters()]


@register("ex-08-training-step", "Write the training step")
def training_step(step_function):
    """Check ``training_step(model, optimizer, inputs, targets) -> float`` on a tiny model (SGD, AdamW)."""
    model, inputs, targets = _tiny_problem()
    expected_params, expected_losses = _reference_steps(model, inputs, targets, steps=2)
    with torch.no_grad():
        logits = model(inputs)
        flat = logits.reshape(-1, logits.shape[-1])
        last_only = F.cross_entropy(logits[:, -1], targets[:, -1]).item()
        against_inputs = _loss(logits, inputs).item()
        summed = F.cross_entropy(flat, targets.reshape(-1), reduction="sum").item()
        shifted_again = _loss(logits[:, :-1], targets[:, 1:]).item()
        first_only = F.cross_entropy(logits[:, 0], targets[:, 0]).item()

    student = copy.deepcopy(model)
    optimizer = torch.optim.SGD(student.parameters(), lr=_LR)
    try:
        returned = step_function(student, optimizer, inputs.clone(), targets.clone())
    except RuntimeError as err:
        _diagnose_crash(err)
    first_params = [p.detach().clone() for p in student.parameters()]
    first_grads = [None if p.grad is None else p.grad.detach().clone() for p in student.parameters()]
    original = [p.detach().clone() for p in model.parameters()]
    second_returned = step_function(student, optimizer, inputs.clone(), targets.clone())
    second_params = [p.detach().clone() for p in student.parameters()]

    def returns_the_loss():
        if isinstance(returned, torch.Tensor) and returned.requires_grad:
            raise Hint(
                "return the loss as a Python float (its .item()), not the loss tensor: a list of loss "
                "tensors keeps every step's computation graph alive and the memory grows with each step"
            )
        value = _as_number(returned, "training_step(...)")
        if math.isclose(value, expected_losses[0], rel_tol=1e-4, abs_tol=1e-5):
            return
        mistakes = [
            (last_only, "the loss covers only the last position: every position predicts its next "
                        "token, so compute the loss over all B*T positions: "
                        "F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))"),
            (first_only, "the loss covers only the first position: compute it over all B*T "
                         "positions (flatten logits to (B*T, V) and targets to (B*T,))"),
            (against_inputs, "the loss compares the predictions with the inputs; compare them with "
                             "the targets (the inputs shifted by one token): position t must predict "
                             "token t + 1"),
            (shifted_again, "you shifted the targets a second time (logits[:, :-1] against "
                            "targets[:, 1:]): next_token_pairs already shifted them, so position t "
                            "of the logits goes with position t of the targets"),
            (summed, "the loss is summed over the positions (reduction='sum'), not averaged: use "
                     "the mean, F.cross_entropy's default, so the step size does not grow with "
                     "the batch"),
        ]
        for wrong, hint in mistakes:
            if math.isclose(value, wrong, rel_tol=1e-4, abs_tol=1e-5):
                raise Hint(hint)
        raise Hint(
            f"the returned loss {value:.4f} is not the next-token cross-entropy of the batch "
            f"before the update ({expected_losses[0]:.4f}): compute logits = model(inputs), then "
            "the loss over all positions, and return its value (a Python float) from before or "
            "after the update"
        )

    def updates_the_parameters():
        if _same(first_params, original, atol=0.0):
            if all(g is None or not bool(g.abs().sum()) for g in first_grads):
                raise Hint(
                    "the parameters did not change and no gradients were computed: call "
                    "loss.backward() after optimizer.zero_grad(), then optimizer.step()"
                )
            raise Hint(
                "the gradients were computed but the parameters did not change: call "
                "optimizer.step() after loss.backward()"
            )
        reference_one = _reference_steps(model, inputs, targets, steps=1)[0]
        if not _same(first_params, reference_one):
            raise Hint(
                "after one step the parameters differ from one plain optimizer step on the "
                "next-token loss over all positions: did you step twice, update the weights by "
                "hand, or build the loss on other positions or targets?"
            )

    def gradients_do_not_accumulate():
        _as_number(second_returned, "the second call of training_step(...)")
        if _same(second_params, expected_params):
            return
        if _same(second_params, _accumulated_steps(model, inputs, targets, steps=2)):
            raise Hint(
                "missing optimizer.zero_grad(): PyTorch adds each backward() to the gradients "
                "already stored, so the second step used the sum of both steps' gradients; call "
                "optimizer.zero_grad() before loss.backward()"
            )
        raise Hint(
            "the second step does not match two clean optimisation steps: zero the gradients, "
            "backward, step - once per call"
        )

    def uses_the_optimizer_it_is_given():
        adam_model, adam_inputs, adam_targets, adam_expected = _adamw_problem()
        adam_optimizer = torch.optim.AdamW(adam_model.parameters(), lr=0.05)
        step_function(adam_model, adam_optimizer, adam_inputs, adam_targets)
        if not _same([p.detach() for p in adam_model.parameters()], adam_expected):
            raise Hint(
                "with an AdamW optimizer the parameters did not move as one AdamW step moves them: "
                "update through the optimizer passed in (optimizer.step()), not by hand with a "
                "fixed learning rate, and do not create an optimizer of your own"
            )

    return [
        ("returns the loss over all positions as a float", returns_the_loss),
        ("one call makes one optimizer step", updates_the_parameters),
        ("gradients do not pile up from call to call", gradients_do_not_accumulate),
        ("uses the optimizer it is given (AdamW)", uses_the_optimizer_it_is_given),
    ]


def _accuracy_case():
    """Logits (4, 3, 6) and targets (4, 3) where every typical mistake gives a different number."""
    B, T, V = 4, 3, 6
    logits = torch.full((B, T, V), -1.0)
    # Last position: sequences 0, 1, 2 right (target 2, 3, 4), sequence 3 wrong (predicts 0).
    targets = torch.tensor([[1, 0, 2], [1, 5, 3], [1, 0, 4], [1, 0, 5]])
    for b, winner in enumerate([2, 3, 4, 0]):
        logits[b, -1, winner] = 3.0
    # Earlier positions: position 0 right everywhere, position 1 right for sequence 0 only.
    logits[:, 0, 1] = 2.0
    logits[0, 1, 0] = 2.0
    logits[1:, 1, 1] = 2.0
    return logits, targets


def _variants(logits, targets):
    B = logits.shape[0]
    return {
        "correct": (logits[:, -1].argmax(-1) == targets[:, -1]).float().mean().item(),
        "count": float((logits[:, -1].argmax(-1) == targets[:, -1]).sum()),
        "all positions": (logits.argmax(-1) == targets).float().mean().item(),
        "first position": (logits[:, 0].argmax(-1) == targets[:, 0]).float().mean().item(),
        "batch": B,
    }


@register("ex-08-accuracy", "Next-token accuracy")
def accuracy(last_token_accuracy):
    """Check ``last_token_accuracy(logits, targets) -> float`` on crafted logits."""
    logits, targets = _accuracy_case()
    expected = _variants(logits, targets)
    result = last_token_accuracy(logits.clone(), targets.clone())
    generator = torch.Generator().manual_seed(3)
    random_logits = torch.randn(5, 6, 9, generator=generator)
    random_targets = torch.randint(0, 9, (5, 6), generator=generator)
    random_targets[:2, -1] = random_logits[:2, -1].argmax(-1)  # at least two right

    def is_a_fraction():
        value = _as_number(result, "last_token_accuracy(...)")
        if math.isclose(value, expected["count"]) and value > 1:
            raise Hint(
                f"you returned {value:g}, the number of right predictions; return the fraction "
                "(divide by the number of sequences, or use .float().mean())"
            )
        if math.isclose(value, 100 * expected["correct"]):
            raise Hint(
                f"you returned {value:g}, a percentage; return a fraction between 0 and 1 "
                "(do not multiply by 100)"
            )
        if not 0.0 <= value <= 1.0:
            raise Hint(f"an accuracy is a fraction between 0 and 1, got {value:g}")

    def uses_the_last_position():
        is_a_fraction()
        value = _as_number(result, "last_token_accuracy(...)")
        if math.isclose(value, expected["correct"], abs_tol=1e-6):
            return
        if math.isclose(value, expected["all positions"], abs_tol=1e-6):
            raise Hint(
                "you scored every position; the task is the last word: compare "
                "logits[:, -1, :].argmax(dim=-1) with targets[:, -1]"
            )
        if math.isclose(value, expected["first position"], abs_tol=1e-6):
            raise Hint("you scored the first position; the last one is index -1: logits[:, -1, :]")
        raise Hint(
            f"expected {expected['correct']:.2f} for 3 right out of 4, got {value:g}: take the "
            "argmax over the vocabulary (dim=-1) of the last position's scores and compare it with "
            "targets[:, -1]; an argmax over dim=1 picks a position, not a token"
        )

    def works_on_other_shapes():
        value = _as_number(last_token_accuracy(random_logits, random_targets), "last_token_accuracy(...)")
        want = _variants(random_logits, random_targets)["correct"]
        if not math.isclose(value, want, abs_tol=1e-6):
            raise Hint(
                f"on logits of shape (5, 6, 9) expected {want:.2f}, got {value:g}: do not hard-code "
                "the batch size, the sequence length (use index -1 for the last position) or the "
                "vocabulary size"
            )

    def inputs_unchanged():
        before_logits, before_targets = random_logits.clone(), random_targets.clone()
        last_token_accuracy(random_logits, random_targets)
        if not (torch.equal(random_logits, before_logits) and torch.equal(random_targets, before_targets)):
            raise Hint("your function changed the logits or targets it was given (an in-place "
                       "operation): compute the accuracy without writing into its inputs")

    return [
        Guard("returns a fraction between 0 and 1", is_a_fraction),
        ("scores the argmax of the last position", uses_the_last_position),
        ("works for any (B, T, vocab) shape", works_on_other_shapes),
        Guard("leaves logits and targets unchanged", inputs_unchanged),
    ]


# ---------------------------------------------------------------------------------------------
# ex-08-override: overrule the last attention row
# ---------------------------------------------------------------------------------------------


def _override_problem(seed: int = 11, n_embd: int = 5, T: int = 4, B: int = 6, vocab: int = 29):
    """A random model with random queries (so its own weights are not uniform) and a batch."""
    with torch.random.fork_rng(devices=[]):  # leave the reader's random state alone
        torch.manual_seed(seed)
        model = HelloWorldModel(n_embd=n_embd, context_length=T, vocab_size=vocab, zero_queries=False)
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, vocab, (B, T), generator=generator)
    inputs[:, 2] = 7  # a token shared by every sequence, like " is"
    return model, inputs


def _predict(model, inputs, last_row, via="values", out=True, softmax_row=False):
    """What a right answer returns, and what typical mistakes return instead."""
    with torch.no_grad():
        _, seen = model(inputs, return_intermediates=True)
        row = last_row.softmax(-1) if softmax_row else last_row
        context = row @ seen[via]  # (T,) @ (B, T, C) -> (B, C)
        if not out:
            return context.argmax(dim=-1)
        return model.out(context).argmax(dim=-1)


def _rows(T: int):
    generator = torch.Generator().manual_seed(5)
    rows = [torch.eye(T)[j] for j in range(T)]  # all weight on one position
    rows.append(torch.full((T,), 1.0 / T))  # uniform
    for _ in range(3):
        weights = torch.rand(T, generator=generator) ** 3
        rows.append(weights / weights.sum())
    return rows


@register("ex-08-override", "Overrule the attention")
def override(predict_with_last_row):
    """Check ``predict_with_last_row(model, inputs, last_row) -> (B,)`` on random small models."""
    model, inputs = _override_problem()
    state = {name: t.clone() for name, t in model.state_dict().items()}
    rows = _rows(inputs.shape[1])
    with torch.no_grad():
        own = model(inputs)[:, -1].argmax(dim=-1)

    def as_ids(result, what, model=model, inputs=inputs):
        if not isinstance(result, torch.Tensor):
            raise Hint(f"{what} should return a tensor of token ids of shape (B,), got "
                       f"{type(result).__name__}; did you forget `return`?")
        if result.shape == (inputs.shape[0], model.vocab_size):
            raise Hint("you returned the scores (B, vocab_size): return the predicted token ids, "
                       "their argmax over the vocabulary (dim=-1)")
        if result.shape == inputs.shape:
            raise Hint("you returned a prediction for every position (B, T): the task is the last "
                       "position only, one token id per sequence (B,)")
        if result.shape != (inputs.shape[0],):
            raise Hint(f"expected token ids of shape ({inputs.shape[0]},), one per sequence, got shape "
                       f"{tuple(result.shape)}; take the argmax over the vocabulary (dim=-1), not "
                       "over the batch")
        if result.is_floating_point():
            raise Hint("return token ids (integers from argmax), not scores or probabilities")
        return result

    def call(model_, inputs_, row):
        try:
            return predict_with_last_row(model_, inputs_.clone(), row.clone())
        except RuntimeError as err:
            text = str(err)
            shape_errors = ("shapes cannot be multiplied", "size mismatch", "mat1 and mat2",
                            "dimensions of batch2")
            if any(error in text for error in shape_errors):
                raise Hint("the weights go on the left of the values: last_row @ values, "
                           f"(T,) @ (B, T, C) -> (B, C) (your code raised: {text})") from None
            raise

    def diagnose(row, got):
        alternatives = [
            (_predict(model, inputs, row, softmax_row=True),
             "last_row is already a set of weights (it sums to 1): do not put it through a "
             "softmax again, use it as it is"),
            (_predict(model, inputs, row, via="inputs"),
             "you weighted the inputs (embeddings); attention mixes the value vectors: "
             "last_row @ intermediates['values']"),
            (_predict(model, inputs, row, via="queries"),
             "you weighted the queries; attention mixes the value vectors: "
             "last_row @ intermediates['values']"),
            (_predict(model, inputs, row, via="keys"),
             "you weighted the keys; attention mixes the value vectors: "
             "last_row @ intermediates['values']"),
            (_predict(model, inputs, row, out=False),
             "you took the argmax of the context vector itself; the prediction comes from the "
             "output layer: model.out(context).argmax(dim=-1)"),
        ]
        for wrong, hint in alternatives:
            if torch.equal(got, wrong):
                raise Hint(hint)

    def follows_the_row():
        changed = False
        for index, row in enumerate(rows):
            got = as_ids(call(model, inputs, row), "predict_with_last_row(...)")
            want = _predict(model, inputs, row)
            if torch.equal(got, want):
                changed = changed or not torch.equal(got, own)
                continue
            if torch.equal(got, own):
                raise Hint("your predictions are the model's own, whatever last_row says: replace the "
                           "last query's weights by last_row and recompute the context vector "
                           "(last_row @ values) before the output layer")
            diagnose(row, got)
            raise Hint(f"with last_row = {[round(w, 3) for w in row.tolist()]} expected "
                       f"{want.tolist()}, got {got.tolist()}: the context is last_row @ values "
                       "(the values from model(inputs, return_intermediates=True)) and the "
                       "prediction is model.out(context).argmax(dim=-1)")

    def shared_token_gives_one_answer():
        # all weight on position 2, a token every sequence shares: one value, one answer
        row = torch.eye(inputs.shape[1])[2]
        got = as_ids(call(model, inputs, row), "predict_with_last_row(...)")
        if len(set(got.tolist())) != 1:
            raise Hint(f"with all the weight on position 2, which holds the same token in every "
                       f"sequence, every sequence must get the same prediction; got {got.tolist()}")

    def other_sizes():
        other, other_inputs = _override_problem(seed=12, n_embd=6, T=3, B=4, vocab=17)
        row = torch.tensor([0.2, 0.7, 0.1])
        got = as_ids(call(other, other_inputs, row), "predict_with_last_row(...) on another model",
                     other, other_inputs)
        want = _predict(other, other_inputs, row)
        if not torch.equal(got, want):
            raise Hint("on a model with n_embd=6, 3 tokens and 17 words the predictions are wrong: "
                       "do not hard-code sizes or positions (the last position is index -1)")

    def model_unchanged():
        call(model, inputs, rows[0])
        for name, tensor in model.state_dict().items():
            if not torch.equal(tensor, state[name]):
                raise Hint(f"your function changed the model ({name}): overrule the attention in your "
                           "own computation, never by writing into the model's weights")

    return [
        ("predictions follow last_row (values, output layer)", follows_the_row),
        Guard("a shared token gives every sequence the same answer", shared_token_gives_one_answer),
        ("works for other model sizes", other_sizes),
        Guard("leaves the model unchanged", model_unchanged),
    ]
