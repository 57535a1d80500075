"""Hidden tests of chapter 1 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test


@hidden_test("ex-01-one-hot", "other vocabulary and embedding sizes")
def one_hot_other_sizes(ns):
    embed_by_matrix_product = answer(ns, "embed_by_matrix_product")
    generator = torch.Generator().manual_seed(7)
    weight = torch.randn(7, 2, generator=generator)
    token_ids = torch.tensor([6, 6, 0])
    result = embed_by_matrix_product(token_ids, weight)
    if not isinstance(result, torch.Tensor) or result.shape != (3, 2):
        shape = tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
        raise Hint(f"for a (7, 2) weight and 3 ids expected shape (3, 2), got {shape}: "
                   "read the sizes from the arguments, do not hard-code them")
    if not torch.allclose(result, weight[token_ids], atol=1e-6):
        raise Hint("values differ from weight[token_ids] for a (7, 2) weight")


@hidden_test("ex-01-one-hot", "gradients reach the weight")
def one_hot_gradients(ns):
    embed_by_matrix_product = answer(ns, "embed_by_matrix_product")
    weight = torch.randn(5, 3, generator=torch.Generator().manual_seed(1)).requires_grad_()
    embed_by_matrix_product(torch.tensor([1, 1, 4]), weight).sum().backward()
    expected = torch.tensor([0.0, 2.0, 0.0, 0.0, 1.0]).unsqueeze(1).expand(5, 3)
    if weight.grad is None or not torch.allclose(weight.grad, expected):
        raise Hint("the result is not differentiable with respect to the weight: keep it a torch "
                   "computation (no .detach(), .numpy() or .item())")


@hidden_test("ex-01-positions", "a single sequence of one token")
def positions_single_token(ns):
    add_positions = answer(ns, "add_positions")
    with torch.random.fork_rng(devices=[]):  # leave the student's random state untouched
        torch.manual_seed(3)
        tokens = torch.randn(1, 1, 4)
        table = torch.nn.Embedding(6, 4)
    result = add_positions(tokens, table)
    if not isinstance(result, torch.Tensor) or result.shape != (1, 1, 4):
        raise Hint("for input of shape (1, 1, 4) the output must have shape (1, 1, 4)")
    if not torch.allclose(result, tokens + table.weight[:1], atol=1e-6):
        raise Hint("with one token only position 0 is added")


@hidden_test("ex-01-positions", "the whole context length and gradients")
def positions_full_context(ns):
    add_positions = answer(ns, "add_positions")
    with torch.random.fork_rng(devices=[]):  # leave the student's random state untouched
        torch.manual_seed(4)
        tokens = torch.randn(3, 6, 2)
        table = torch.nn.Embedding(6, 2)
    result = add_positions(tokens, table)
    if not torch.allclose(result, tokens + table.weight, atol=1e-6):
        raise Hint("with T equal to the context length every position row is used once, in order")
    result.sum().backward()
    if table.weight.grad is None or not torch.allclose(table.weight.grad, torch.full((6, 2), 3.0)):
        raise Hint("the position embedding gets no gradient: use the module (or its weight) "
                   "inside the computation, without .detach()")
