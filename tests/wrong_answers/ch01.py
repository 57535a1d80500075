"""Plausible wrong answers to chapter 1's coding exercises (see ``__init__.py`` for the rules)."""

from __future__ import annotations

from dataclasses import replace

from . import WrongAnswer

ONE_HOT = [
    WrongAnswer("num-classes-from-the-ids", '''
def embed_by_matrix_product(token_ids, weight):
    one_hot = torch.nn.functional.one_hot(token_ids)
    return one_hot.to(weight.dtype) @ weight
''', "num_classes=weight.shape[0]"),
    WrongAnswer("transposed-product", '''
def embed_by_matrix_product(token_ids, weight):
    one_hot = torch.nn.functional.one_hot(token_ids, num_classes=weight.shape[0])
    return weight.T @ one_hot.to(weight.dtype).T
''', "transposed"),
    WrongAnswer("float-instead-of-weight-dtype", '''
def embed_by_matrix_product(token_ids, weight):
    one_hot = torch.nn.functional.one_hot(token_ids, num_classes=weight.shape[0])
    return one_hot.float() @ weight.float()
''', ".to(weight.dtype)"),
    WrongAnswer("hard-coded-vocabulary", '''
def embed_by_matrix_product(token_ids, weight):
    one_hot = torch.nn.functional.one_hot(token_ids, num_classes=11)
    return one_hot.to(weight.dtype) @ weight
''', "do not hard-code the vocabulary size"),
    WrongAnswer("num-classes-from-the-width", '''
def embed_by_matrix_product(token_ids, weight):
    one_hot = torch.nn.functional.one_hot(token_ids, num_classes=weight.shape[1])
    return one_hot.to(weight.dtype) @ weight
''', "num_classes=weight.shape[0]"),
    WrongAnswer("indexes-the-weight", '''
def embed_by_matrix_product(token_ids, weight):
    return weight[token_ids]
''', "by a matrix product"),
    WrongAnswer("functional-embedding", '''
def embed_by_matrix_product(token_ids, weight):
    return torch.nn.functional.embedding(token_ids, weight)
''', "by a matrix product"),
    WrongAnswer("index-select", '''
def embed_by_matrix_product(token_ids, weight):
    return weight.index_select(0, token_ids)
''', "by a matrix product"),
    WrongAnswer("zeros", '''
def embed_by_matrix_product(token_ids, weight):
    return torch.zeros(token_ids.shape[0], weight.shape[1], dtype=weight.dtype)
''', "every entry is 0", non_attempt=True),
]

POSITIONS = [
    WrongAnswer("concatenates", '''
def add_positions(token_embeddings, position_embedding):
    positions = position_embedding(torch.arange(token_embeddings.shape[1]))
    return torch.cat([token_embeddings, positions.expand_as(token_embeddings)], dim=-1)
''', "concatenated"),
    WrongAnswer("counts-along-the-batch", '''
def add_positions(token_embeddings, position_embedding):
    positions = position_embedding(torch.arange(token_embeddings.shape[0]))
    return token_embeddings + positions.unsqueeze(1)
''', "batch axis"),
    WrongAnswer("positions-from-one", '''
def add_positions(token_embeddings, position_embedding):
    positions = torch.arange(1, token_embeddings.shape[1] + 1)
    return token_embeddings + position_embedding(positions)
''', "start at 1"),
    WrongAnswer("only-positions", '''
def add_positions(token_embeddings, position_embedding):
    positions = position_embedding(torch.arange(token_embeddings.shape[1]))
    return positions.expand_as(token_embeddings)
''', "add the token embeddings too"),
    WrongAnswer("hard-coded-length", '''
def add_positions(token_embeddings, position_embedding):
    return token_embeddings + position_embedding(torch.arange(5))
''', "read T from the input shape"),
    WrongAnswer("whole-position-table", '''
def add_positions(token_embeddings, position_embedding):
    return token_embeddings + position_embedding.weight
''', "whole position table"),
    WrongAnswer("in-place", '''
def add_positions(token_embeddings, position_embedding):
    token_embeddings += position_embedding(torch.arange(token_embeddings.shape[1]))
    return token_embeddings
''', "in place"),
    WrongAnswer("input-unchanged", '''
def add_positions(token_embeddings, position_embedding):
    return token_embeddings
''', "were not added", non_attempt=True),
    WrongAnswer("zeros", '''
def add_positions(token_embeddings, position_embedding):
    return torch.zeros_like(token_embeddings)
''', "every entry is 0", non_attempt=True),
]

WHICH_TOKEN = [
    WrongAnswer("position-not-subtracted", '''
def which_token(input_vector, position, token_embedding, position_embedding):
    distances = (token_embedding.weight - input_vector).norm(dim=-1)
    return int(distances.argmin())
''', "subtract the position vector first"),
    WrongAnswer("position-added-again", '''
def which_token(input_vector, position, token_embedding, position_embedding):
    token_vector = input_vector + position_embedding.weight[position]
    return int((token_embedding.weight - token_vector).norm(dim=-1).argmin())
''', "added the position vector again"),
    WrongAnswer("position-off-by-one", '''
def which_token(input_vector, position, token_embedding, position_embedding):
    token_vector = input_vector - position_embedding.weight[position + 1]
    return int((token_embedding.weight - token_vector).norm(dim=-1).argmin())
''', "positions count from 0"),
    WrongAnswer("largest-dot-product", '''
def which_token(input_vector, position, token_embedding, position_embedding):
    token_vector = input_vector - position_embedding.weight[position]
    return int((token_embedding.weight @ token_vector).argmax())
''', "largest dot product picks long vectors"),
    WrongAnswer("largest-distance", '''
def which_token(input_vector, position, token_embedding, position_embedding):
    token_vector = input_vector - position_embedding.weight[position]
    return int((token_embedding.weight - token_vector).norm(dim=-1).argmax())
''', "smallest (argmin)"),
    WrongAnswer("hard-coded-vocabulary", '''
def which_token(input_vector, position, token_embedding, position_embedding):
    token_vector = input_vector - position_embedding.weight[position]
    distances = [float((token_embedding.weight[i] - token_vector).norm()) for i in range(50)]
    return distances.index(min(distances))
''', "token_embedding.weight.shape[0]"),
    WrongAnswer("returns-the-vector", '''
def which_token(input_vector, position, token_embedding, position_embedding):
    return input_vector - position_embedding.weight[position]
''', "return the token id"),
    WrongAnswer("returns-zero", '''
def which_token(input_vector, position, token_embedding, position_embedding):
    return 0
''', "for token", non_attempt=True),
]

BPE_DECODE = [
    WrongAnswer("decodes-each-token-alone", '''
def decode_tokens(ids, merges):
    token_bytes = {byte: bytes([byte]) for byte in range(256)}
    for (first, second), new_id in merges.items():
        token_bytes[new_id] = token_bytes[first] + token_bytes[second]
    return "".join(token_bytes[i].decode("utf-8", errors="replace") for i in ids)
''', "decoded each token on its own"),
    WrongAnswer("decodes-each-token-strictly", '''
def decode_tokens(ids, merges):
    token_bytes = {byte: bytes([byte]) for byte in range(256)}
    for (first, second), new_id in merges.items():
        token_bytes[new_id] = token_bytes[first] + token_bytes[second]
    return "".join(token_bytes[i].decode("utf-8") for i in ids)
''', "decoded each token on its own"),
    WrongAnswer("chr-of-each-byte", '''
def decode_tokens(ids, merges):
    token_bytes = {byte: bytes([byte]) for byte in range(256)}
    for (first, second), new_id in merges.items():
        token_bytes[new_id] = token_bytes[first] + token_bytes[second]
    return "".join(chr(byte) for i in ids for byte in token_bytes[i])
''', "Latin-1"),
    WrongAnswer("one-level-of-merges", '''
def decode_tokens(ids, merges):
    token_bytes = {byte: bytes([byte]) for byte in range(256)}
    for (first, second), new_id in merges.items():
        token_bytes[new_id] = bytes([first, second])
    return b"".join(token_bytes[i] for i in ids).decode("utf-8", errors="replace")
''', "made of merged tokens"),
    WrongAnswer("newest-merges-first", '''
def decode_tokens(ids, merges):
    token_bytes = {byte: bytes([byte]) for byte in range(256)}
    for (first, second), new_id in reversed(list(merges.items())):
        token_bytes[new_id] = token_bytes[first] + token_bytes[second]
    return b"".join(token_bytes[i] for i in ids).decode("utf-8", errors="replace")
''', "in the order they were learned"),
    WrongAnswer("halves-swapped", '''
def decode_tokens(ids, merges):
    token_bytes = {byte: bytes([byte]) for byte in range(256)}
    for (first, second), new_id in merges.items():
        token_bytes[new_id] = token_bytes[second] + token_bytes[first]
    return b"".join(token_bytes[i] for i in ids).decode("utf-8", errors="replace")
''', "first half followed by its second"),
    WrongAnswer("strict-utf8", '''
def decode_tokens(ids, merges):
    token_bytes = {byte: bytes([byte]) for byte in range(256)}
    for (first, second), new_id in merges.items():
        token_bytes[new_id] = token_bytes[first] + token_bytes[second]
    return b"".join(token_bytes[i] for i in ids).decode("utf-8")
''', "errors='replace'"),
    WrongAnswer("returns-bytes", '''
def decode_tokens(ids, merges):
    token_bytes = {byte: bytes([byte]) for byte in range(256)}
    for (first, second), new_id in merges.items():
        token_bytes[new_id] = token_bytes[first] + token_bytes[second]
    return b"".join(token_bytes[i] for i in ids)
''', "you returned bytes"),
    WrongAnswer("merges-read-backwards", '''
def decode_tokens(ids, merges):
    token_bytes = {byte: bytes([byte]) for byte in range(256)}
    for new_id, (first, second) in merges.items():
        token_bytes[new_id] = token_bytes[first] + token_bytes[second]
    return b"".join(token_bytes[i] for i in ids).decode("utf-8", errors="replace")
''', "maps a pair to its new id"),
    WrongAnswer("the-package", '''
from attention_book.embedding import bpe_decode

def decode_tokens(ids, merges):
    return bpe_decode(ids, merges)
''', "write your own", non_attempt=True),
    WrongAnswer("empty-string", '''
def decode_tokens(ids, merges):
    return ""
''', "empty string", non_attempt=True),
]

WRONG_ANSWERS = {"ex-01-one-hot": ONE_HOT, "ex-01-positions": POSITIONS, "ex-01-which-token": WHICH_TOKEN,
                 "ex-01-bpe-decode": BPE_DECODE}


def _with_torch(answers):
    # an answer cell runs after the chapter's setup cell, which imports torch
    return [replace(answer, code="import torch\n" + answer.code.lstrip("\n")) for answer in answers]


WRONG_ANSWERS = {label: _with_torch(answers) for label, answers in WRONG_ANSWERS.items()}
