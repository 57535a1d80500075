"""Self-checks of chapter 1 (From words to vectors)."""

from __future__ import annotations

import torch

from .core import Hint, close, register


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
                    "num_classes=weight.shape[0] (the vocabulary size), not the largest id + 1"
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
        weight64 = weight.double()
        result = call(token_ids, weight64)
        if result.dtype != torch.float64:
            raise Hint(
                f"with a float64 weight the result is {result.dtype}: convert the one-hot rows "
                "with .to(weight.dtype) rather than .float()"
            )
        if not close(result, expected.double()):
            raise Hint("wrong values with a float64 weight")

    return [
        ("same result as nn.Embedding", matches_lookup),
        ("vocabulary size taken from the weight", unused_ids_do_not_matter),
        ("keeps the weight's dtype", keeps_weight_dtype),
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
        result = add_positions(token_embeddings, position_embedding)
        if not isinstance(result, torch.Tensor):
            raise Hint(f"return a tensor, got {type(result).__name__}")
        if result.shape[-1] == 2 * channels:
            raise Hint("the embeddings are concatenated; add them instead (token + position)")
        if result.shape != expected.shape:
            raise Hint(f"expected shape (B, T, C) = {tuple(expected.shape)}, got {tuple(result.shape)}")

    def values():
        result = add_positions(token_embeddings, position_embedding)
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
        short = token_embeddings[:, :2]
        try:
            result = add_positions(short, position_embedding)
        except RuntimeError as error:
            raise Hint(f"a 2-token input failed ({error}): read T from the input shape") from None
        if not close(result, short + position_embedding.weight[:2]):
            raise Hint("for a sequence of 2 tokens use positions 0 and 1: read T from the input shape")

    return [
        ("keeps the (B, T, C) shape", shape),
        ("token + position for every sequence", values),
        ("T read from the input", other_length),
    ]
