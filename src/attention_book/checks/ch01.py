"""Self-checks of chapter 1 (From words to vectors)."""

from __future__ import annotations

import torch

from .core import Guard, Hint, check_operations, close, register
from .rules import LOOKUP_NAMES, rule  # noqa: F401 - the rule's one table (grader too)


@register("ex-01-one-hot", "Embedding as a matrix product")
def one_hot_embedding(embed_by_matrix_product):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(11, 4, generator=generator)
    token_ids = torch.tensor([3, 0, 10])
    expected = weight[token_ids]  # (3, 4): what nn.Embedding returns

    def call(ids, weight_matrix):
        try:
            return embed_by_matrix_product(ids, weight_matrix)
        except RuntimeError as error:
            if "cannot be multiplied" in str(error):
                raise Hint(
                    f"shapes do not fit for the product ({error}); one-hot rows need "
                    "num_classes=weight.shape[0] (the vocabulary size): not the largest id + 1, "
                    "not weight.shape[1], and do not hard-code the vocabulary size"
                ) from None
            if "same dtype" in str(error):
                raise Hint(
                    "the one-hot rows and the weight have different dtypes: convert the one-hot "
                    "rows with .to(weight.dtype) (one_hot returns integers)"
                ) from None
            raise

    def matches_lookup():
        result = call(token_ids, weight)
        if not isinstance(result, torch.Tensor):
            raise Hint(f"return a tensor, got {type(result).__name__}")
        if result.shape == (weight.shape[1], token_ids.shape[0]) and result.shape != expected.shape:
            raise Hint("the result is transposed: multiply one_hot @ weight, not weight.T @ one_hot.T")
        if result.shape != expected.shape:
            raise Hint(
                f"expected shape {tuple(expected.shape)} (T, C), got {tuple(result.shape)}; "
                "one-hot rows need num_classes=weight.shape[0] (the vocabulary size)"
            )
        if not close(result, expected):
            if bool((result == 0).all()):
                raise Hint("every entry is 0: multiply one-hot rows of the ids with the weight")
            raise Hint("the shape is right but the values differ from weight[token_ids]: "
                       "is each one-hot row 1 at the token's id?")

    def unused_ids_do_not_matter():
        # The largest id is smaller than vocab_size: num_classes must not be inferred from the ids.
        small_ids = torch.tensor([0, 1])
        result = call(small_ids, weight)
        if result.shape != (2, weight.shape[1]):
            raise Hint(
                "with ids [0, 1] the result must still be (2, C): pass "
                "num_classes=weight.shape[0] to one_hot instead of letting it guess from the ids"
            )
        if not close(result, weight[small_ids]):
            raise Hint("wrong values for ids [0, 1]")

    def keeps_weight_dtype():
        # another vocabulary size too: catches a hard-coded num_classes
        weight64 = torch.randn(7, 5, generator=torch.Generator().manual_seed(1)).double()
        ids = torch.tensor([6, 2, 2, 0])
        result = call(ids, weight64)
        if result.shape != (4, 5):
            raise Hint(
                f"with a (7, 5) weight and 4 ids the result must be (4, 5), got "
                f"{tuple(result.shape)}: do not hard-code the vocabulary size, use weight.shape[0]"
            )
        if result.dtype != torch.float64:
            raise Hint(
                f"with a float64 weight the result is {result.dtype}: convert the one-hot rows "
                "with .to(weight.dtype) rather than .float()"
            )
        if not close(result, weight64[ids]):
            raise Hint("wrong values with a (7, 5) float64 weight")

    def by_matrix_product():
        # what the code does with the weight, recorded (the grader decides the same way): a
        # lookup (weight[ids], F.embedding, index_select, gather, ...) is not a matrix product
        check_operations("ex-01-one-hot", embed_by_matrix_product, token_ids.clone(), weight.clone())

    return [
        ("same result as nn.Embedding", matches_lookup),
        ("vocabulary size taken from the weight", unused_ids_do_not_matter),
        ("another vocabulary size and the weight's dtype", keeps_weight_dtype),
        Guard("a matrix product, not a lookup", by_matrix_product),
    ]


@register("ex-01-positions", "Add position embeddings to a batch")
def positions(add_positions):
    batch, num_tokens, channels = 2, 5, 3
    with torch.random.fork_rng(devices=[]):  # leave the reader's random state untouched
        torch.manual_seed(0)
        token_embeddings = torch.randn(batch, num_tokens, channels)
        position_embedding = torch.nn.Embedding(8, channels)
    expected = token_embeddings + position_embedding.weight[:num_tokens]

    def shape():
        result = add_positions(token_embeddings.clone(), position_embedding)
        if not isinstance(result, torch.Tensor):
            raise Hint(f"return a tensor, got {type(result).__name__}")
        if result.shape[-1] == 2 * channels:
            raise Hint("the embeddings are concatenated; add them instead (token + position)")
        if result.shape != expected.shape:
            raise Hint(f"expected shape (B, T, C) = {tuple(expected.shape)}, got {tuple(result.shape)}")

    def values():
        try:
            result = add_positions(token_embeddings.clone(), position_embedding)
        except RuntimeError as error:
            if "must match the size" in str(error):
                raise Hint(
                    "you added the whole position table (context_length = 8 rows) to 5 tokens: "
                    "take the vectors of positions 0 .. T-1 only, position_embedding(torch.arange(T))"
                ) from None
            raise
        if not isinstance(result, torch.Tensor):
            raise Hint(f"return a tensor, got {type(result).__name__}")
        if result.shape == expected.shape and bool((result == 0).all()):
            raise Hint("every entry is 0: return token_embeddings + the position vectors")
        if close(result, position_embedding.weight[:num_tokens].expand_as(result)):
            raise Hint("only the position vectors are returned; add the token embeddings too")
        if close(result, token_embeddings):
            raise Hint("the position embeddings were not added")
        wrong_axis = token_embeddings + position_embedding.weight[:batch].unsqueeze(1)
        if close(result, wrong_axis):
            raise Hint("positions were counted along the batch axis; use token_embeddings.shape[1] (T)")
        shifted = token_embeddings + position_embedding.weight[1 : num_tokens + 1]
        if close(result, shifted):
            raise Hint("positions start at 1; they must start at 0 (torch.arange(T))")
        if not close(result, expected):
            raise Hint("values differ from token_embeddings + position_embedding(torch.arange(T))")

    def other_length():
        short = token_embeddings[:, :2].clone()
        try:
            result = add_positions(short, position_embedding)
        except RuntimeError as error:
            raise Hint(f"a 2-token input failed ({error}): read T from the input shape") from None
        if not close(result, short + position_embedding.weight[:2]):
            raise Hint("for a sequence of 2 tokens use positions 0 and 1: read T from the input shape")

    def input_unchanged():
        mine = token_embeddings.clone()
        add_positions(mine, position_embedding)
        if not torch.equal(mine, token_embeddings):
            raise Hint(
                "your function changed token_embeddings in place (e.g. `token_embeddings += ...`): "
                "the caller's tensor is overwritten; return token_embeddings + positions instead"
            )

    return [
        Guard("keeps the (B, T, C) shape", shape),
        ("token + position for every sequence", values),
        ("T read from the input", other_length),
        Guard("token_embeddings left unchanged", input_unchanged),
    ]


# --------------------------------------------------------------------------------------------------
# ex-01-which-token: undo token + position
# --------------------------------------------------------------------------------------------------


def _tables(vocab_size: int, width: int, context_length: int, seed: int):
    """A token and a position table; one token row is much longer than the rest."""
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # nn.Embedding draws from the reader's RNG
        tokens = torch.nn.Embedding(vocab_size, width)
        positions = torch.nn.Embedding(context_length, width)
    with torch.no_grad():
        tokens.weight.copy_(torch.randn(vocab_size, width, generator=generator))
        tokens.weight[7] *= 6.0  # a long vector: wins many dot products, few distances
        positions.weight.copy_(3.0 * torch.randn(context_length, width, generator=generator))
    return tokens, positions


def _as_id(result) -> int:
    if isinstance(result, torch.Tensor):
        if result.numel() != 1:
            raise Hint(
                f"return the token id (one integer), not a tensor of shape {tuple(result.shape)}"
            )
        result = result.item()
    if isinstance(result, bool) or not isinstance(result, int):
        raise Hint(f"return the token id as an int, got {type(result).__name__} {result!r}")
    return result


def _which_token_test(which_token, vocab_size: int, width: int, seed: int):
    def test():
        tokens, positions = _tables(vocab_size, width, 10, seed)
        generator = torch.Generator().manual_seed(seed + 1)
        ids = torch.randint(0, vocab_size, (12,), generator=generator)
        places = torch.randint(0, 9, (12,), generator=generator)  # position + 1 exists
        with torch.no_grad():
            table, where = tokens.weight.clone(), positions.weight.clone()
        cases = list(zip(ids.tolist(), places.tolist()))
        inputs = [(table[token_id] + where[place]).clone() for token_id, place in cases]
        got = [_as_id(which_token(x.clone(), place, tokens, positions))
               for x, (_, place) in zip(inputs, cases)]
        if got == ids.tolist():
            return

        def nearest(vector):
            return int((table - vector).norm(dim=-1).argmin())

        shifted = [place + 1 for _, place in cases]
        mistakes = [
            ([nearest(x) for x in inputs],
             "subtract the position vector first: x = token vector + position vector"),
            ([nearest(x + where[p]) for x, (_, p) in zip(inputs, cases)],
             "you added the position vector again; subtract it: x - position vector"),
            ([nearest(x - where[q]) for x, q in zip(inputs, shifted)],
             "you used the vector of position + 1: positions count from 0"),
            ([int((table @ (x - where[p])).argmax()) for x, (_, p) in zip(inputs, cases)],
             "the largest dot product picks long vectors, not the matching one (chapter 2): "
             "find the token row closest to x - position vector (smallest distance)"),
            ([int((table - (x - where[p])).norm(dim=-1).argmax()) for x, (_, p) in zip(inputs, cases)],
             "you took the largest distance; the matching token has the smallest (argmin)"),
        ]
        for predicted, hint in mistakes:
            if got == predicted:
                raise Hint(hint)
        wrong = next(i for i in range(len(cases)) if got[i] != cases[i][0])
        raise Hint(
            f"for token {cases[wrong][0]} at position {cases[wrong][1]} you returned {got[wrong]}: "
            "subtract the position's vector and find the token row at the smallest distance"
        )

    return test


@register("ex-01-which-token", "Which token is this?")
def which_token(which_token_fn):
    """Check ``which_token_fn(input_vector, position, token_embedding, position_embedding)`` -> id."""

    def returns_an_int():
        tokens, positions = _tables(20, 4, 10, seed=5)
        with torch.no_grad():
            x = tokens.weight[3] + positions.weight[2]
        _as_id(which_token_fn(x.clone(), 2, tokens, positions))

    def tables_unchanged():
        tokens, positions = _tables(20, 4, 10, seed=6)
        before = (tokens.weight.detach().clone(), positions.weight.detach().clone())
        with torch.no_grad():
            x = tokens.weight[3] + positions.weight[2]
        which_token_fn(x.clone(), 2, tokens, positions)
        if not (torch.equal(tokens.weight, before[0]) and torch.equal(positions.weight, before[1])):
            raise Hint("your function changed an embedding table; read the tables, do not write them")

    def other_sizes():
        try:
            _which_token_test(which_token_fn, 37, 6, seed=12)()
        except IndexError as error:
            raise Hint(
                f"an index ran past the end ({error}): read the vocabulary size from "
                "token_embedding.weight.shape[0] instead of a fixed number, and use the "
                "position as given (positions count from 0)"
            ) from None

    return [
        Guard("returns one token id (an int)", returns_an_int),
        ("recovers the id of 12 tokens at random positions", _which_token_test(which_token_fn, 50, 8, seed=10)),
        ("another vocabulary size and width", other_sizes),
        Guard("the embedding tables stay unchanged", tables_unchanged),
    ]


# --------------------------------------------------------------------------------------------------
# ex-01-bpe-decode: token ids -> bytes -> text
# --------------------------------------------------------------------------------------------------

# Written out here, independently of attention_book.embedding: ids below 256 are bytes, each merge
# (first, second) -> new id joins the bytes of two earlier tokens.
HELLO_MERGES = {(104, 101): 256, (256, 108): 257, (257, 108): 258, (258, 111): 259, (32, 259): 260}
HELLO_IDS, HELLO_TEXT = [259, 260, 32, 257, 112], "hello hello help"  # 'hello', ' hello', ' ', 'hel', 'p'
# "é" is two bytes, 0xC3 0xA9: token 258 ends after the first, token 259 starts with the second
CAFE_MERGES = {(99, 97): 256, (256, 102): 257, (257, 0xC3): 258, (0xA9, 32): 259}
CAFE_IDS, CAFE_TEXT = [258, 259, 258, 0xA9], "café café"
NOT_UTF8_IDS, NOT_UTF8_TEXT = [0xFF, 104, 105], "\ufffdhi"  # 0xFF never occurs in UTF-8

NESTED = (
    "a merged token can be made of merged tokens ('hel' = 'he' + 'l'): build the bytes of every "
    "new id from the bytes of its two halves, token_bytes[first] + token_bytes[second], going "
    "through the merges in the order they were learned"
)
PER_TOKEN = (
    "you decoded each token on its own: one character can be split over two tokens ('é' is the "
    "two bytes 0xC3 0xA9), so join the bytes of all tokens first and decode once"
)
LATIN1 = (
    "chr(byte) reads every byte as a character of its own (Latin-1): 'é' came out as 'Ã©'. Join "
    "the bytes and decode them as UTF-8: .decode('utf-8', errors='replace')"
)


def _bytes_of(merges, swap=False):
    table = {byte: bytes([byte]) for byte in range(256)}
    for (first, second), new_id in merges.items():
        table[new_id] = table[second] + table[first] if swap else table[first] + table[second]
    return table


def _decode_case(decode_tokens, ids, merges, expected):
    def call():
        try:
            return decode_tokens(list(ids), dict(merges))
        except UnicodeDecodeError:
            joined = b"".join(_bytes_of(merges)[i] for i in ids)
            try:
                joined.decode("utf-8")  # valid as a whole: the tokens were decoded one by one
            except UnicodeDecodeError:
                raise Hint(
                    "a byte that is not valid UTF-8 stopped your decoding: decode with "
                    ".decode('utf-8', errors='replace'), which turns it into '\\ufffd'"
                ) from None
            raise Hint(PER_TOKEN) from None
        except (KeyError, ValueError) as error:  # a new id missing, or bytes([300])
            if "range(0, 256)" in str(error) or isinstance(error, KeyError):
                raise Hint(f"{NESTED} ({type(error).__name__}: {error})") from None
            raise
        except TypeError as error:
            if "unpack" in str(error):
                raise Hint(
                    "merges maps a pair to its new id, {(first, second): new_id}: loop over it with "
                    "`for (first, second), new_id in merges.items()`"
                ) from None
            raise

    def test():
        result = call()
        if isinstance(result, (bytes, bytearray)):
            raise Hint("you returned bytes; return a str: decode the joined bytes as UTF-8")
        if not isinstance(result, str):
            raise Hint(f"return the text as a str, got {type(result).__name__}")
        if result == expected:
            return
        if result == "":
            raise Hint("you returned an empty string: look up the bytes of every id and join them")
        table = _bytes_of(merges)
        per_token = "".join(table[i].decode("utf-8", errors="replace") for i in ids)
        latin1 = b"".join(table[i] for i in ids).decode("latin-1")
        swapped = b"".join(_bytes_of(merges, swap=True)[i] for i in ids).decode("utf-8", "replace")
        if result == per_token:
            raise Hint(PER_TOKEN)
        if result == latin1:
            raise Hint(LATIN1)
        if result == swapped:
            raise Hint("a merged token is its first half followed by its second: "
                       "token_bytes[first] + token_bytes[second], not the other way round")
        raise Hint(f"ids {list(ids)} should decode to {expected!r}, got {result!r}")

    return test


@register("ex-01-bpe-decode", "Decode byte-pair tokens")
def bpe_decode(decode_tokens):
    """Check ``decode_tokens(ids, merges)`` -> the text of the ids (bytes joined, then UTF-8)."""

    def empty():
        result = decode_tokens([], dict(HELLO_MERGES))
        if result != "":
            raise Hint(f"no ids must give the empty string '', got {result!r}")

    def merges_unchanged():
        merges = dict(CAFE_MERGES)
        decode_tokens(list(CAFE_IDS), merges)
        if merges != CAFE_MERGES or list(merges) != list(CAFE_MERGES):
            raise Hint("your function changed the merges dict: read it, do not write it")

    return [
        ("merged tokens made of merged tokens", _decode_case(decode_tokens, HELLO_IDS, HELLO_MERGES, HELLO_TEXT)),
        ("a character split over two tokens", _decode_case(decode_tokens, CAFE_IDS, CAFE_MERGES, CAFE_TEXT)),
        ("bytes that are not UTF-8 become '\\ufffd'",
         _decode_case(decode_tokens, NOT_UTF8_IDS, {}, NOT_UTF8_TEXT)),
        Guard("no ids give ''", empty),
        Guard("the merges stay unchanged", merges_unchanged),
    ]
