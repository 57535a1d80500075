"""Each exercise's rules, in one place: read by its self-check and by the autograder.

Two kinds of rule:

* **The task's own rules** (:data:`RULES`): "without torch.softmax" (``forbidden``: calls the
  answer must not make, matched as :func:`~attention_book.checks.answers.calls` does), "by a
  matrix product, not a lookup" (``no_index``: an argument the answer must not index), and what
  the exercise lets the answer use (``allowed``: package objects or chapter names, e.g. the
  decoder block is built from the chapter's ``MultiHeadAttention``).
* **Own work only**: an answer must not be, call or wrap code the chapter body defines before
  the exercise (its worked functions and classes, and what it imports from ``attention_book``)
  unless ``allowed`` lists it. The names (with a digest of each definition) are generated from
  the chapter notebooks into ``chapter_code.json`` (``python -m attention_book.instructor.own_work
  --write``; ``test_chapter_code_list_is_up_to_date`` in ``tests/test_grader_bounds.py`` fails
  when it is out of date).

The self-check applies both in the student's kernel (on the live function, see
:func:`attention_book.checks.answers.own_work`); the grader applies both on the submitted file's
source (see :mod:`attention_book.instructor.planning`): an answer that breaks one scores 0 there
and is flagged, whatever its kernel reports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

__all__ = ["Rule", "RULES", "rule", "chapter_code", "SOFTMAX_NAMES", "LOOKUP_NAMES", "READY_MADE",
           "LOOKUP_MESSAGE", "CHAPTER_CODE_FILE", "FUSED_NAMES", "FUSED_MESSAGE"]

CHAPTER_CODE_FILE = Path(__file__).with_name("chapter_code.json")

#: every way to call a finished softmax (ex-03-stable-softmax is "without torch.softmax")
SOFTMAX_NAMES = (
    "torch.softmax", "torch.nn.functional.softmax", "F.softmax", "torch.special.softmax",
    "softmax", "log_softmax", "torch.log_softmax", "softmin", "Softmax", "LogSoftmax",
    "logsumexp", "torch.logsumexp",
)
READY_MADE = (
    "build it from torch.exp, .amax and .sum: a ready-made softmax ({names}) is not allowed "
    "in this exercise"
)
#: every way to look embedding rows up directly (ex-01-one-hot asks for a matrix product)
LOOKUP_NAMES = (
    "torch.nn.Embedding", "nn.Embedding", "Embedding", "torch.nn.functional.embedding",
    "F.embedding", "embedding", "index_select", "torch.index_select", "gather", "take", "torch.take",
)
LOOKUP_MESSAGE = (
    "your code looks the rows up directly ({names}); the exercise is to get them by a matrix "
    "product: one-hot rows of the ids times the weight"
)

#: every ready-made attention (ex-07-from-memory writes the computation itself); dotted names
#: only, so a helper of the reader's own called ``scaled_dot_product_attention`` is not one
FUSED_NAMES = (
    "torch.nn.functional.scaled_dot_product_attention", "F.scaled_dot_product_attention",
    "torch.nn.MultiheadAttention", "nn.MultiheadAttention",
    "torch.nn.functional.multi_head_attention_forward", "F.multi_head_attention_forward",
    "torch.nn.attention.flex_attention.flex_attention",
)
FUSED_MESSAGE = (
    "a fused kernel used ({names}): this capstone asks for the computation itself, the scores, "
    "the mask, the softmax and the weighted sum written with torch operations (chapter 10 "
    "replaces them by F.scaled_dot_product_attention)"
)


@dataclass(frozen=True)
class Rule:
    forbidden: Tuple[str, ...] = ()  # calls the answer must not make
    message: str = ""  # the hint when it does; {names} = the calls found
    no_index: Optional[Tuple[str, int]] = None  # (function, argument position) the answer must not index
    allowed: Tuple[str, ...] = ()  # package objects (dotted) or chapter names the answer may use


RULES: Dict[str, Rule] = {
    "ex-01-one-hot": Rule(forbidden=LOOKUP_NAMES, message=LOOKUP_MESSAGE,
                          no_index=("embed_by_matrix_product", 1)),
    "ex-03-stable-softmax": Rule(forbidden=SOFTMAX_NAMES, message=READY_MADE),
    "ex-07-from-memory": Rule(forbidden=FUSED_NAMES, message=FUSED_MESSAGE),
    "ex-07-decoder-block": Rule(allowed=("attention_book.multihead.MultiHeadAttention", "MultiHeadAttention")),
}

_NO_RULE = Rule()
_CODE: Optional[Dict[str, Dict[str, str]]] = None


def rule(exercise: str) -> Rule:
    """The rules of ``exercise`` (no special rule: an empty one)."""
    return RULES.get(exercise, _NO_RULE)


def chapter_code(exercise: str) -> Dict[str, str]:
    """Names the chapter body defines before ``exercise`` -> ``"def:<digest>"`` for its own
    functions and classes, ``"package:<dotted path>"`` for what it imports from the package."""
    global _CODE
    if _CODE is None:
        try:
            _CODE = json.loads(CHAPTER_CODE_FILE.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            _CODE = {}
    return dict(_CODE.get(exercise, {}))
