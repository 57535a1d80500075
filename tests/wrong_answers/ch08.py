"""Plausible wrong answers to the coding exercises of chapter 8 (training the Hello-World model)."""

from . import WrongAnswer

_IMPORTS = "import torch\nimport torch.nn.functional as F\n"


def _step(body: str) -> str:
    return _IMPORTS + "\n\ndef training_step(model, optimizer, inputs, targets):\n" + body


_FLAT = "    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))\n"
_UPDATE = "    optimizer.zero_grad()\n    loss.backward()\n    optimizer.step()\n"

TRAINING_STEP = [
    WrongAnswer(
        "missing-zero-grad",
        _step("    logits = model(inputs)\n" + _FLAT
              + "    loss.backward()\n    optimizer.step()\n    return loss.item()\n"),
        "missing optimizer.zero_grad()",
    ),
    WrongAnswer(
        "targets-shifted-again",
        _step("    logits = model(inputs)[:, :-1]\n"
              "    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)),\n"
              "                           targets[:, 1:].reshape(-1))\n"
              + _UPDATE + "    return loss.item()\n"),
        "you shifted the targets a second time",
    ),
    WrongAnswer(
        "optimizer-not-used",
        _step("    logits = model(inputs)\n" + _FLAT
              + "    model.zero_grad()\n    loss.backward()\n"
              "    with torch.no_grad():\n"
              "        for p in model.parameters():\n"
              "            p -= 0.5 * p.grad\n"
              "    return loss.item()\n"),
        "not by hand with a fixed learning rate",
    ),
    WrongAnswer(
        "loss-against-inputs",
        _step("    logits = model(inputs)\n"
              "    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), inputs.reshape(-1))\n"
              + _UPDATE + "    return loss.item()\n"),
        "compares the predictions with the inputs",
    ),
    WrongAnswer(
        "last-position-only",
        _step("    logits = model(inputs)\n"
              "    loss = F.cross_entropy(logits[:, -1], targets[:, -1])\n"
              + _UPDATE + "    return loss.item()\n"),
        "covers only the last position",
    ),
    WrongAnswer(
        "detached-loss",
        _step("    logits = model(inputs).detach()\n" + _FLAT + _UPDATE + "    return loss.item()\n"),
        "loss.backward() found no graph",
    ),
    WrongAnswer(
        "hard-coded-vocab-size",
        _step("    logits = model(inputs)\n"
              "    loss = F.cross_entropy(logits.view(-1, 50257), targets.reshape(-1))\n"
              + _UPDATE + "    return loss.item()\n"),
        "do not hard-code the vocabulary size",
    ),
    WrongAnswer(
        "summed-loss",
        _step("    logits = model(inputs)\n"
              "    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),\n"
              "                           reduction='sum')\n"
              + _UPDATE + "    return loss.item()\n"),
        "not averaged",
    ),
    WrongAnswer(
        "step-before-backward",
        _step("    logits = model(inputs)\n" + _FLAT
              + "    optimizer.zero_grad()\n    optimizer.step()\n    loss.backward()\n"
              "    return loss.item()\n"),
        "call optimizer.step() after loss.backward()",
    ),
    WrongAnswer(
        "no-backward",
        _step("    logits = model(inputs)\n" + _FLAT
              + "    optimizer.zero_grad()\n    optimizer.step()\n    return loss.item()\n"),
        "no gradients were computed",
    ),
    WrongAnswer(
        "returns-the-tensor",
        _step("    logits = model(inputs)\n" + _FLAT + _UPDATE + "    return loss\n"),
        "return the loss as a Python float",
    ),
    WrongAnswer(
        "nothing-done",
        _step("    return 0.0\n"),
        "not the next-token cross-entropy",
        non_attempt=True,
    ),
]


def _accuracy(body: str) -> str:
    return _IMPORTS + "\n\ndef last_token_accuracy(logits, targets):\n" + body


LAST_TOKEN_ACCURACY = [
    WrongAnswer(
        "count-not-fraction",
        _accuracy("    return (logits[:, -1].argmax(-1) == targets[:, -1]).sum().item()\n"),
        "the number of right predictions",
    ),
    WrongAnswer(
        "every-position",
        _accuracy("    return (logits.argmax(-1) == targets).float().mean().item()\n"),
        "you scored every position",
    ),
    WrongAnswer(
        "first-position",
        _accuracy("    return (logits[:, 0].argmax(-1) == targets[:, 0]).float().mean().item()\n"),
        "you scored the first position",
    ),
    WrongAnswer(
        "argmax-over-positions",
        _accuracy("    return (logits.argmax(dim=1)[:, -1] == targets[:, -1]).float().mean().item()\n"),
        "argmax over dim=1 picks a position",
    ),
    WrongAnswer(
        "hard-coded-batch",
        _accuracy("    return (logits[:, -1].argmax(-1) == targets[:, -1]).sum().item() / 4\n"),
        "do not hard-code",
    ),
    WrongAnswer(
        "hard-coded-last-index",
        _accuracy("    return (logits[:, 2].argmax(-1) == targets[:, 2]).float().mean().item()\n"),
        "use index -1 for the last position",
    ),
    WrongAnswer(
        "percentage",
        _accuracy("    right = (logits[:, -1].argmax(-1) == targets[:, -1]).float()\n"
                  "    return 100 * right.mean().item()\n"),
        "a percentage",
    ),
    WrongAnswer(
        "zero",
        _accuracy("    return 0.0\n"),
        "expected 0.75 for 3 right out of 4",
        non_attempt=True,
    ),
]


def _override(body: str) -> str:
    return _IMPORTS + "\n\ndef predict_with_last_row(model, inputs, last_row):\n" + body


_SEEN = "    _, seen = model(inputs, return_intermediates=True)\n"

OVERRIDE = [
    WrongAnswer(
        "ignores-last-row",
        _override("    return model(inputs)[:, -1].argmax(dim=-1)\n"),
        "your predictions are the model's own",
    ),
    WrongAnswer(
        "softmax-of-the-row",
        _override(_SEEN + "    context = last_row.softmax(-1) @ seen['values']\n"
                  "    return model.out(context).argmax(dim=-1)\n"),
        "do not put it through a softmax again",
    ),
    WrongAnswer(
        "weights-the-inputs",
        _override(_SEEN + "    context = last_row @ seen['inputs']\n"
                  "    return model.out(context).argmax(dim=-1)\n"),
        "you weighted the inputs",
    ),
    WrongAnswer(
        "weights-the-keys",
        _override(_SEEN + "    context = last_row @ seen['keys']\n"
                  "    return model.out(context).argmax(dim=-1)\n"),
        "you weighted the keys",
    ),
    WrongAnswer(
        "no-output-layer",
        _override(_SEEN + "    context = last_row @ seen['values']\n"
                  "    return context.argmax(dim=-1)\n"),
        "the prediction comes from the output layer",
    ),
    WrongAnswer(
        "returns-scores",
        _override(_SEEN + "    return model.out(last_row @ seen['values'])\n"),
        "you returned the scores",
    ),
    WrongAnswer(
        "values-on-the-left",
        _override(_SEEN + "    context = seen['values'].transpose(1, 2) @ last_row.unsqueeze(0)\n"
                  "    return model.out(context).argmax(dim=-1)\n"),
        "the weights go on the left of the values",
    ),
    WrongAnswer(
        "every-position",
        _override(_SEEN + "    weights = seen['weights'].clone()\n"
                  "    weights[:, -1] = last_row\n"
                  "    return model.out(weights @ seen['values']).argmax(dim=-1)\n"),
        "a prediction for every position",
    ),
    WrongAnswer(
        "writes-into-the-model",
        _override("    with torch.no_grad():\n"
                  "        model.W_query.weight.zero_()\n"
                  "        _, seen = model(inputs, return_intermediates=True)\n"
                  "        context = last_row @ seen['values']\n"
                  "        return model.out(context).argmax(dim=-1)\n"),
        "your function changed the model",
    ),
    WrongAnswer(
        "zeros",
        _override("    return torch.zeros(inputs.shape[0], dtype=torch.long)\n"),
        "the prediction is model.out(context).argmax(dim=-1)",
        non_attempt=True,
    ),
]

WRONG_ANSWERS = {
    "ex-08-training-step": TRAINING_STEP,
    "ex-08-accuracy": LAST_TOKEN_ACCURACY,
    "ex-08-override": OVERRIDE,
}
