"""Hidden tests of chapter 8 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import math

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test


def _check_steps(student, reference, seed, batch_size, num_tokens, vocab_size, optimizer_name, steps,
                 contiguous, what):
    generator = torch.Generator().manual_seed(seed)
    token_ids = torch.randint(0, vocab_size, (batch_size, num_tokens + 1), generator=generator)
    case = dict(seed=seed, token_ids=token_ids, vocab_size=vocab_size, optimizer_name=optimizer_name,
                steps=steps, contiguous=contiguous)
    try:
        returned, parameters = student.probe("ch08.training-steps", **case)
    except RuntimeError as err:
        if "view size is not compatible" in str(err):
            raise Hint("the targets here are a slice token_ids[:, 1:], which is not contiguous in memory, "
                       "so targets.view(-1) fails: use targets.reshape(-1) (as in the chapter's batches)"
                       ) from None
        raise
    expected, want = reference.probe("ch08.training-steps", **case)
    for step, (value, loss) in enumerate(zip(returned, expected)):
        if isinstance(value, str):
            raise Hint(f"training_step should return the loss as a number, got {value}")
        if not math.isclose(value, loss, rel_tol=1e-4, abs_tol=1e-5):
            raise Hint(f"{what}: step {step + 1} returned {value:.4f}, expected the loss before the update "
                       f"{loss:.4f}")
    for name, tensor in want.items():
        if name not in parameters or not torch.allclose(parameters[name], tensor, atol=1e-5):
            raise Hint(f"{what}: after {steps} steps the parameter {name} differs from {steps} steps of the "
                       "optimizer that was passed in: call optimizer.zero_grad(), loss.backward() and "
                       "optimizer.step() (no update by hand, no fixed learning rate)")


@hidden_test("ex-08-training-step", "uses the optimizer passed in (AdamW, 3 steps)")
def step_with_adamw(student, reference):
    _check_steps(student, reference, seed=1, batch_size=2, num_tokens=3, vocab_size=17, optimizer_name="AdamW",
                 steps=3, contiguous=True, what="with AdamW")


@hidden_test("ex-08-training-step", "other sizes and non-contiguous target slices")
def step_other_sizes(student, reference):
    for seed, batch_size, num_tokens in ((2, 1, 1), (3, 5, 4)):
        _check_steps(student, reference, seed=seed, batch_size=batch_size, num_tokens=num_tokens, vocab_size=11,
                     optimizer_name="SGD", steps=2, contiguous=False,
                     what=f"for a batch of shape ({batch_size}, {num_tokens}) and 11 tokens in the vocabulary")


# ---------------------------------------------------------------- ex-08-accuracy


def _accuracy(last_token_accuracy, logits, targets):
    value = last_token_accuracy(logits.clone(), targets.clone())
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach())
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise Hint(f"last_token_accuracy should return a number, got {type(value).__name__}")


@hidden_test("ex-08-accuracy", "main values: an exact fraction (3 of 7), not rounded")
def accuracy_fraction(ns):
    last_token_accuracy = answer(ns, "last_token_accuracy")
    generator = torch.Generator().manual_seed(4)
    logits = torch.randn(7, 2, 30, generator=generator)  # (B=7, T=2, V=30)
    predicted = logits[:, -1].argmax(dim=-1)
    targets = torch.randint(0, 30, (7, 2), generator=generator)
    targets[:, -1] = (predicted + 1) % 30  # all wrong ...
    targets[[0, 3, 5], -1] = predicted[[0, 3, 5]]  # ... except 3 of the 7
    value = _accuracy(last_token_accuracy, logits, targets)
    if not math.isclose(value, 3 / 7, abs_tol=1e-6):
        raise Hint(f"3 right out of 7 sequences must give 3/7 = {3 / 7:.6f}, got {value:g}: divide by the "
                   "number of sequences and do not round")


@hidden_test("ex-08-accuracy", "one sequence of one token: 0 or 1")
def accuracy_single(ns):
    last_token_accuracy = answer(ns, "last_token_accuracy")
    logits = torch.tensor([[[0.1, 2.0, -1.0, 0.5]]])  # (1, 1, 4): predicts token 1
    for target, expected in ((1, 1.0), (3, 0.0)):
        value = _accuracy(last_token_accuracy, logits, torch.tensor([[target]]))
        if not math.isclose(value, expected, abs_tol=1e-9):
            raise Hint(f"for one sequence of one token whose best token is 1 and target {target} the accuracy is "
                       f"{expected:g}, got {value:g}: keep the batch and position axes (no .squeeze())")


# ---------------------------------------------------------------- ex-08-override

def _override(student, reference, seed, batch_size, num_tokens, vocab_size, n_embd, peaked):
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, vocab_size, (batch_size, num_tokens), generator=generator)
    if peaked is None:
        last_row = torch.softmax(torch.randn(num_tokens, generator=generator), dim=-1)
    else:
        last_row = torch.zeros(num_tokens)
        last_row[peaked] = 1.0
    case = dict(seed=seed, inputs=inputs, last_row=last_row, vocab_size=vocab_size, n_embd=n_embd)
    got, unchanged = student.probe("ch08.override", **case)
    want, _ = reference.probe("ch08.override", **case)
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != (batch_size,):
        found = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        raise Hint(f"for inputs of shape ({batch_size}, {num_tokens}) return ({batch_size},) token ids, got {found}")
    if not torch.equal(got.long(), want):
        raise Hint(f"with another model ({vocab_size} tokens, n_embd={n_embd}) and last_row={last_row.tolist()} the "
                   "predicted tokens differ: mix the values with last_row (last_row @ values) and apply "
                   "model.out, without the model's own last-row weights")
    return unchanged


@hidden_test("ex-08-override", "another (untrained) model, a spread-out row")
def override_spread(student, reference):
    _override(student, reference, seed=41, batch_size=3, num_tokens=4, vocab_size=13, n_embd=6, peaked=None)


@hidden_test("ex-08-override", "all weight on one position, one sequence")
def override_peaked(student, reference):
    _override(student, reference, seed=42, batch_size=1, num_tokens=5, vocab_size=9, n_embd=4, peaked=1)


@hidden_test("ex-08-override", "the model is left unchanged", guard=True)
def override_read_only(student, reference):
    if not _override(student, reference, seed=43, batch_size=2, num_tokens=3, vocab_size=7, n_embd=4, peaked=0):
        raise Hint("predict_with_last_row changed the model's parameters: only read them")
