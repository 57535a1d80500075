"""Hidden tests of chapter 1 (instructor only: never copied to the book or the student release).

Format: see attention_book.instructor.hidden (and instructor/README.md). Each test gets the
student's namespace ``ns`` and raises Hint("what is wrong and how to fix it") when it fails.
"""

import torch

from attention_book.instructor.hidden import Hint, answer, hidden_test, same


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


VALUES_FIRST = ("not checked until the values are right: {what} differ from the right answer's, "
                "so their gradients cannot match yet (the other tests say what is wrong)")


@hidden_test("ex-01-one-hot", "gradients reach the weight")
def one_hot_gradients(ns):
    embed_by_matrix_product = answer(ns, "embed_by_matrix_product")
    weight = torch.randn(5, 3, generator=torch.Generator().manual_seed(1)).requires_grad_()
    result = embed_by_matrix_product(torch.tensor([1, 1, 4]), weight)
    if not (isinstance(result, torch.Tensor) and result.shape == (3, 3)
            and torch.allclose(result.detach(), weight.detach()[[1, 1, 4]], atol=1e-6)):
        raise Hint(VALUES_FIRST.format(what="the embeddings"))
    result.sum().backward()
    expected = torch.tensor([0.0, 2.0, 0.0, 0.0, 1.0]).unsqueeze(1).expand(5, 3)
    if weight.grad is None or not torch.allclose(weight.grad, expected):
        raise Hint("the result is not differentiable with respect to the weight: keep it a torch "
                   "computation (no .detach(), .numpy() or .item())")


def _positions(session, **sizes):
    return session.probe("ch01.positions", **sizes)  # attention_book.instructor.probes


@hidden_test("ex-01-positions", "main values: a batch of sequences shorter than the context")
def positions_main(student, reference):
    sizes = dict(seed=5, B=2, T=5, C=3, context_length=8)
    got, _, _ = _positions(student, **sizes)
    want, _, _ = _positions(reference, **sizes)
    same(got, want, "add_positions on a (2, 5, 3) batch with 8 positions",
         hint="add position t's row to token t of every sequence (rows 0 .. T - 1, broadcast over the batch)")


@hidden_test("ex-01-positions", "a single sequence of one token")
def positions_single_token(student, reference):
    result, _, expected = _positions(student, seed=3, B=1, T=1, C=4, context_length=6)
    if not isinstance(result, torch.Tensor) or result.shape != (1, 1, 4):
        raise Hint("for input of shape (1, 1, 4) the output must have shape (1, 1, 4)")
    want, _, _ = _positions(reference, seed=3, B=1, T=1, C=4, context_length=6)
    if not torch.allclose(result, want, atol=1e-6):
        raise Hint("with one token only position 0 is added")

@hidden_test("ex-01-positions", "the whole context length and gradients")
def positions_full_context(student, reference):
    result, grad, _ = _positions(student, seed=4, B=3, T=6, C=2, context_length=6)
    want, want_grad, _ = _positions(reference, seed=4, B=3, T=6, C=2, context_length=6)
    if not isinstance(result, torch.Tensor) or result.shape != want.shape or not torch.allclose(result, want, atol=1e-6):
        raise Hint("with T equal to the context length every position row is used once, in order")
    if not isinstance(grad, torch.Tensor) or not torch.allclose(grad, want_grad):
        raise Hint("the position embedding gets no gradient: use the module (or its weight) "
                   "inside the computation, without .detach()")



# ---------------------------------------------------------------- ex-01-which-token

def _which(student, seed, vocab_size, C, context_length, long_rows, cases):
    found = student.probe("ch01.which-token", seed=seed, vocab_size=vocab_size, C=C, context_length=context_length,
                        long_rows=long_rows, cases=cases)
    for (token, position), value in zip(cases, found):
        if isinstance(value, tuple) and value[0] == "tensor":
            raise Hint("return the id as an int (int(...)), not a tensor")
        if isinstance(value, tuple):
            raise Hint(f"which_token should return an int, got {value[1]}")
        if value != token:
            raise Hint(f"token {token} at position {position} came back as {value}: subtract the position "
                       "vector, then take the nearest row (smallest distance), not the largest dot product")


@hidden_test("ex-01-which-token", "other table sizes, long rows, the last position")
def which_other_sizes(student, reference):
    _which(student, seed=5, vocab_size=9, C=4, context_length=7, long_rows=[1, 6],
           cases=[(0, 0), (3, 6), (8, 2), (1, 5), (6, 1)])


@hidden_test("ex-01-which-token", "a single position and two-dimensional vectors")
def which_tiny(student, reference):
    _which(student, seed=6, vocab_size=5, C=2, context_length=1, long_rows=[4], cases=[(t, 0) for t in range(5)])


# ---------------------------------------------------------------- ex-01-bpe-decode

def _decode(session, pairs, ids):
    return session.probe("ch01.bpe-decode", pairs=pairs, ids=ids)


@hidden_test("ex-01-bpe-decode", "a chain of six merges")
def decode_long_chain(student, reference):
    # 'a', 'aa', 'aaa', ... each new token is the previous one plus 'a'
    pairs = [(97, 97)] + [(256 + rank, 97) for rank in range(5)]
    ids = [261, 32, 258, 97]
    got, want = _decode(student, pairs, ids), _decode(reference, pairs, ids)
    if got != want:
        raise Hint(f"with merges 'aa', 'aaa', ... the ids {ids} should decode to {want!r}, got {got!r}: "
                   "build each new token's bytes from the bytes of its two halves, in merge order")


@hidden_test("ex-01-bpe-decode", "an emoji (4 bytes) split over three tokens")
def decode_emoji(student, reference):
    emoji = list("🙂".encode("utf-8"))  # 4 bytes
    pairs = [(emoji[1], emoji[2]), (104, 105)]  # the middle two bytes become token 256
    ids = [105, emoji[0], 256, emoji[3], 257]
    got, want = _decode(student, pairs, ids), _decode(reference, pairs, ids)
    if got != want:
        raise Hint(f"expected {want!r}, got {got!r}: join the bytes of all tokens before decoding as "
                   "UTF-8 (a character's bytes may be spread over several tokens)")


@hidden_test("ex-01-bpe-decode", "no merges at all: plain bytes")
def decode_no_merges(student, reference):
    ids = list("Größe".encode("utf-8"))
    got, want = _decode(student, [], ids), _decode(reference, [], ids)
    if got != want:
        raise Hint(f"without merges every id is one byte: {ids} should decode to {want!r}, got {got!r}")
