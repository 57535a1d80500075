"""Each exercise's rules, in one place: read by its self-check and by the autograder.

Two kinds of rule:

* **The task's own rules** (:data:`RULES`), decided on what the answer *does*, never on how its
  source spells it: ``ops`` (an :class:`~attention_book.checks.opgraph.OpRule`) lists the tensor
  operations the answer must not reach ("without a ready-made softmax": ``_softmax``,
  ``logsumexp``, the scaled-dot-product kernels, however they are reached), an argument it must
  not look up by index ("by a matrix product, not a lookup") or a kernel that must not group the
  heads itself (``enable_gqa``); it may also *require* a call (ex-10-sdpa: each call must reach
  ``F.scaled_dot_product_attention``, however it is spelled) and forbid ``torch`` functions by
  the name the recorder saw called (ex-07-from-memory: no ``F.scaled_dot_product_attention``,
  ``nn.MultiheadAttention`` or FlexAttention, reached by an alias, ``getattr`` or
  ``torch._C._nn`` alike; a helper of the student's own called ``scaled_dot_product_attention``
  is not one). The self-check records the answer's calls in the student's kernel; the grader
  records them in a fresh sandbox (:mod:`attention_book.instructor.clean_room`): the calls of a
  function (``function``), which it also replays itself, and the runs of a module's answer by the
  hidden tests' procedures (``probes``: construction and ``forward``). No rule reads the answer's
  source text. ``allowed`` lists what the exercise lets the answer use (package objects or
  chapter names, e.g. the decoder block is built from the chapter's ``MultiHeadAttention``); the
  own-work run makes exactly these importable.
* **Own work only**: an answer must not be, call or wrap code the chapter body defines before
  the exercise (its worked functions and classes, and what it imports from ``attention_book``)
  unless ``allowed`` lists it. The names (with a digest of each definition) are generated from
  the chapter notebooks into ``chapter_code.json`` (``python -m attention_book.instructor.own_work
  --write``; ``test_chapter_code_list_is_up_to_date`` in ``tests/test_grader_bounds.py`` fails
  when it is out of date).

The self-check applies both in the student's kernel (on the live function, see
:func:`attention_book.checks.answers.own_work`); the grader reads the submitted file's source for
the names it uses (:mod:`attention_book.instructor.planning`) and then runs each answer again in
a fresh sandbox that holds only the student's own cells, without the chapter's code and without
the package's finished modules (:mod:`attention_book.instructor.clean_room`): an answer that
needs anything else, or reaches a forbidden operation, scores 0 there and is flagged, whatever
its kernel reports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Tuple

from .opgraph import OpRule

__all__ = ["Rule", "RULES", "rule", "chapter_code", "SOFTMAX_NAMES", "LOOKUP_NAMES", "READY_MADE",
           "LOOKUP_MESSAGE", "CHAPTER_CODE_FILE", "OpRule", "SOFTMAX_OPS", "READY_MADE_OPS", "GROUPING_MESSAGE",
           "MATRIX_PRODUCT_OPS", "MATRIX_PRODUCT_MESSAGE", "FUSED_OPS", "FUSED_MESSAGE", "SDPA_CALL",
           "SDPA_MESSAGE"]

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
#: the operations every ready-made softmax ends in (torch.softmax, F.softmax, Tensor.softmax,
#: torch.special.softmax, softmin, log_softmax, Categorical(logits=...).probs, logsumexp, SDPA,
#: nn.MultiheadAttention), however it is reached
SOFTMAX_OPS = ("softmax", "softmin", "logsumexp", "scaled_dot_product", "multi_head_attention")
READY_MADE_OPS = (
    "a ready-made softmax is not allowed in this exercise: your function reaches PyTorch's own "
    "({names}, where torch.softmax, F.softmax, .softmax(), log_softmax, logsumexp, "
    "Categorical(logits=...).probs and the like all end); build it from torch.exp, .amax and .sum"
)
#: every way to look embedding rows up directly (ex-01-one-hot asks for a matrix product)
LOOKUP_NAMES = (
    "torch.nn.Embedding", "nn.Embedding", "Embedding", "torch.nn.functional.embedding",
    "F.embedding", "embedding", "index_select", "torch.index_select", "gather", "take", "torch.take",
)
LOOKUP_MESSAGE = (
    "your code looks the rows up directly ({names}); the exercise is to get them by a matrix "
    "product: one_hot(token_ids, num_classes=weight.shape[0]) @ weight"
)
#: products of whole matrices (ex-02-score-loop asks for one dot product per entry)
MATRIX_PRODUCT_OPS = ("=mm", "=bmm", "=addmm", "=baddbmm", "=addbmm", "=matmul", "=einsum", "=tensordot",
                      "=linear", "=mv", "=addmv", "=chain_matmul", "=linalg_multi_dot")
MATRIX_PRODUCT_MESSAGE = (
    "the exercise asks for one dot product per entry, torch.dot(queries[i], keys[j]) inside two "
    "loops; your function computes a product of whole matrices ({names}: queries @ keys.T, "
    "torch.matmul, torch.mm, torch.einsum), which skips the point of it"
)
GROUPING_MESSAGE = (
    "write the grouping yourself: scaled_dot_product_attention(..., enable_gqa=True) groups the "
    "heads for you ({names}); repeat the key/value heads first (repeat_interleave or indexing)"
)

#: every ready-made attention (ex-07-from-memory writes the computation itself), as ATen operations
#: and as torch functions called: F.scaled_dot_product_attention (however it is reached; on the
#: CPU with dropout or need_weights it runs as plain operations, so its call is what counts),
#: nn.MultiheadAttention (F.multi_head_attention_forward, its fast path
#: torch._native_multi_head_attention) and FlexAttention
FUSED_OPS = ("scaled_dot_product", "multi_head_attention", "flex_attention")
FUSED_MESSAGE = (
    "a fused kernel used ({names}): this capstone asks for the computation itself, the scores, "
    "the mask, the softmax and the weighted sum written with torch operations (chapter 10 "
    "replaces them by F.scaled_dot_product_attention)"
)
#: ex-10-sdpa: the core must be PyTorch's (its name as the recorder sees it called)
SDPA_CALL = ("scaled_dot_product_attention",)
SDPA_MESSAGE = (
    "your function never calls F.scaled_dot_product_attention (torch.nn.functional): write it "
    "with F.scaled_dot_product_attention instead of by hand, that is the exercise"
)


@dataclass(frozen=True)
class Rule:
    allowed: Tuple[str, ...] = ()  # package objects (dotted) or chapter names the answer may use
    ops: Optional[OpRule] = None  # what the answer must (not) do, as tensor operations and torch calls
    function: str = ""  # the function the ops rule applies to (the exercise's answer)
    probes: Tuple[str, ...] = ()  # hidden-test procedures that run the answer (a module), judged too


RULES: Dict[str, Rule] = {
    "ex-01-one-hot": Rule(ops=OpRule(lookup_of=1, message=LOOKUP_MESSAGE), function="embed_by_matrix_product"),
    "ex-02-score-loop": Rule(ops=OpRule(ops=MATRIX_PRODUCT_OPS, message=MATRIX_PRODUCT_MESSAGE),
                             function="scores_by_loop"),
    "ex-03-stable-softmax": Rule(ops=OpRule(ops=SOFTMAX_OPS, message=READY_MADE_OPS), function="my_softmax"),
    "ex-07-from-memory": Rule(ops=OpRule(ops=FUSED_OPS, api=FUSED_OPS, message=FUSED_MESSAGE),
                              function="CausalMultiHeadAttention", probes=("ch07.from-memory",)),
    "ex-07-decoder-block": Rule(allowed=("attention_book.multihead.MultiHeadAttention", "MultiHeadAttention")),
    "ex-10-gqa": Rule(ops=OpRule(grouped_kernel=True, message=GROUPING_MESSAGE), function="grouped_attention"),
    "ex-10-sdpa": Rule(ops=OpRule(requires=SDPA_CALL, missing_message=SDPA_MESSAGE), function="fused_attention"),
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
