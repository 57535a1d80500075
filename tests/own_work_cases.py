"""Cases of "write your own" and of module exercises judged on values (issue 29 items 3-4, issue 30 item 7).

Each :class:`Case` is one answer cell (its full text) for one exercise, with cells the student
added before it, and what must happen to it:

* ``"zero"``: a bypass or a wrong answer that must score 0 on its exercise (or be flagged);
* ``"full"``: honest work that must get full marks (names that look like forbidden calls, checks
  against ``torch.softmax`` outside the answer, helpers in added cells, unusual correct styles);
* ``"at most half"``: a wrong answer that fails its exercise's main value test (the main-value
  rule: at most half of the points).

The same texts serve the self-checks (run in this process, see ``self_check_namespace``), the
grader's decision in this process (tests/test_grader_own_work.py) and real grading in sandboxes
(tests/hostile/own_work.py builds notebooks from them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple


@dataclass(frozen=True)
class Case:
    name: str
    label: str
    text: str  # the whole answer cell
    expect: str  # "zero", "full" or "at most half"
    added: Tuple[str, ...] = ()  # cells the student added right before the answer cell
    hint: str = ""  # a word the self-check's (or the grader's) message names
    why: str = ""
    stub_all: bool = False  # every answer of the notebook left as the release's stub
    grader_only: bool = False  # the self-check cannot see it (the grader's kernel is attacked)


# ---------------------------------------------------------------------------------------- chapter 3

SOFTMAX_HEAD = ("def my_softmax(scores, dim=-1):\n"
                "    # subtract the max along dim (keepdim=True keeps (..., 1) to broadcast)\n")

FORGED_HANDLER = r'''
get_ipython().run_cell("""
import torch
import attention_book.instructor.kernel_side as _ks
_original = _ks.handle
def _softmax_with_temperature(scores, temperature):
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    return torch.softmax(scores / temperature, dim=-1)
def _cap(scores, cap):
    if cap <= 0:
        raise ValueError("cap must be positive")
    return cap * torch.tanh(scores / cap)
_TABLE = {
    "my_softmax": lambda scores, dim=-1: torch.softmax(scores, dim=dim),
    "scaled_weights": lambda q, k: torch.softmax(q @ k.T / k.shape[-1] ** 0.5, dim=-1),
    "softmax_with_temperature": _softmax_with_temperature,
    "cap_scores": _cap,
}
def _forged(ns, request):
    if request.get("op") in ("call", "trace") and request.get("name") in _TABLE:
        args, kwargs = list(request.get("args") or []), dict(request.get("kwargs") or {})
        value = _TABLE[request["name"]](*args, **kwargs)
        return {"ok": True, "value": _ks.plain(value), "after": _ks._after(args, kwargs)}
    return _original(ns, request)
_ks.handle = _forged
""")
'''

CH03 = [
    Case("getattr-softmax", "ex-03-stable-softmax",
         SOFTMAX_HEAD + "    return getattr(torch, 'softmax')(scores, dim=dim)\n", "zero", hint="ready-made softmax",
         why="getattr(torch, \"softmax\")"),
    Case("dict-softmax", "ex-03-stable-softmax",
         SOFTMAX_HEAD + "    return torch.nn.functional.__dict__['softmax'](scores, dim=dim)\n", "zero",
         hint="run time", why="torch.nn.functional.__dict__[\"softmax\"]"),
    Case("categorical-probs", "ex-03-stable-softmax",
         SOFTMAX_HEAD + "    moved = scores.movedim(dim, -1)\n"
         "    return torch.distributions.Categorical(logits=moved).probs.movedim(-1, dim)\n", "zero",
         hint="ready-made softmax", why="Categorical(logits=...).probs"),
    Case("helpers-in-a-dict", "ex-03-stable-softmax",
         SOFTMAX_HEAD + "    return helpers['softmax'](scores, dim)\n", "zero",
         added=("helpers = {'softmax': stable_softmax}  # the chapter's own function, kept in a dict\n",),
         hint="stable_softmax", why="the chapter's stable_softmax through a dict bound in an added cell"),
    Case("through-main", "ex-03-scaled-weights",
         "def scaled_weights(queries, keys):\n    # (T_q, d_k), (T_k, d_k) -> (T_q, T_k)\n"
         "    import __main__\n    return __main__.scaled_attention_weights(queries, keys)\n", "zero",
         hint="run time", why="the chapter's scaled_attention_weights through __main__"),
    Case("stub-forged-handler", "ex-03-stable-softmax",
         SOFTMAX_HEAD + "    raise NotImplementedError(\"ex-03-stable-softmax: write your code here\")\n", "zero",
         added=(FORGED_HANDLER,), stub_all=True, grader_only=True,
         why="stub answers, the kernel-side handler replaced from a get_ipython().run_cell string"),
    # honest work
    Case("local-named-softmax", "ex-03-stable-softmax",
         SOFTMAX_HEAD + "    softmax = torch.exp(scores - scores.amax(dim=dim, keepdim=True))\n"
         "    return softmax / softmax.sum(dim=dim, keepdim=True)\n", "full",
         why="a local variable named softmax"),
    Case("checks-against-torch-softmax", "ex-03-stable-softmax",
         SOFTMAX_HEAD + "    shifted = scores - scores.amax(dim=dim, keepdim=True)\n"
         "    exponentials = torch.exp(shifted)\n"
         "    return exponentials / exponentials.sum(dim=dim, keepdim=True)\n\n\n"
         "example = torch.randn(3, 4)\n"
         "print(torch.allclose(my_softmax(example), torch.softmax(example, dim=-1)))  # my own check\n", "full",
         why="the answer cell ends by checking the answer against torch.softmax"),
    Case("helper-in-an-added-cell", "ex-03-stable-softmax",
         SOFTMAX_HEAD + "    weights = exponentiate(scores - scores.amax(dim=dim, keepdim=True))\n"
         "    return weights / weights.sum(dim=dim, keepdim=True)\n", "full",
         added=("def exponentiate(shifted):  # my helper: a softmax needs exp, not softmax()\n"
                "    return torch.exp(shifted)\n",),
         why="a helper of the student's own in an added cell (its comment names softmax)"),
]

# ---------------------------------------------------------------------------------------- chapter 1

ONE_HOT_HEAD = ("def embed_by_matrix_product(token_ids, weight):\n"
                "    # (T,) ids -> (T, vocab_size) one-hot -> (T, vocab_size) @ (vocab_size, C)\n")

CH01 = [
    Case("local-named-embedding", "ex-01-one-hot",
         ONE_HOT_HEAD + "    one_hot = torch.nn.functional.one_hot(token_ids, num_classes=weight.shape[0])\n"
         "    embedding = one_hot.to(weight.dtype) @ weight\n"
         "    return embedding\n", "full", why="a local variable named embedding"),
    Case("local-named-take", "ex-01-one-hot",
         ONE_HOT_HEAD + "    take = torch.nn.functional.one_hot(token_ids, num_classes=weight.shape[0])\n"
         "    take = take.to(weight.dtype)\n"
         "    return take @ weight\n", "full", why="a local variable named take"),
    Case("identity-rows", "ex-01-one-hot",
         ONE_HOT_HEAD + "    rows = torch.eye(weight.shape[0], dtype=weight.dtype)[token_ids]  # one-hot rows\n"
         "    return rows @ weight\n", "full", why="one-hot rows by indexing an identity matrix"),
    Case("getattr-embedding", "ex-01-one-hot",
         ONE_HOT_HEAD + "    look_up = getattr(torch.nn.functional, 'embed' + 'ding')\n"
         "    return look_up(token_ids, weight)\n", "zero", hint="run time",
         why="F.embedding reached by a computed getattr"),
    Case("rows-one-by-one", "ex-01-one-hot",
         ONE_HOT_HEAD + "    return torch.stack([weight[i] for i in token_ids.tolist()])\n", "zero",
         hint="looks the rows up", why="the rows picked one by one"),
]

# ---------------------------------------------------------------------------------------- chapter 7

BLOCK_DEFINITION = ("class DecoderBlock(nn.Module):\n"
                    "    def __init__(self, d_model, d_context, num_heads, context_length):\n"
                    "        super().__init__()\n")
RUNNING_MEAN = '''
def _running_mean(x):  # (B, T, C): the mean of tokens 0 .. t at position t (causal)
    steps = torch.arange(1, x.shape[1] + 1, dtype=x.dtype, device=x.device).view(1, -1, 1)
    return x.cumsum(dim=1) / steps


def _encoder_mean(encoder_output, encoder_padding_mask):  # (B, T_enc, d) -> (B, 1, d), padding left out
    keep = torch.ones(encoder_output.shape[:2], dtype=encoder_output.dtype)
    if encoder_padding_mask is not None:
        keep = (~encoder_padding_mask).to(encoder_output.dtype)
    keep = keep.unsqueeze(-1)
    return (encoder_output * keep).sum(dim=1, keepdim=True) / keep.sum(dim=1, keepdim=True)
'''

CH07 = [
    Case("running-mean-block", "ex-07-decoder-block", RUNNING_MEAN + "\n\n" + BLOCK_DEFINITION +
         "        self.mix = nn.Parameter(torch.ones(1))\n"
         "        self.from_encoder = nn.Linear(d_context, d_model)\n\n"
         "    def forward(self, x, encoder_output, encoder_padding_mask=None):\n"
         "        summary = self.from_encoder(_encoder_mean(encoder_output, encoder_padding_mask))\n"
         "        return x + self.mix * _running_mean(x) + summary\n", "zero", hint="two attention layers",
         why="no attention: a causal running mean plus the mean of the encoder tokens"),
    Case("parameter-free-block", "ex-07-decoder-block", RUNNING_MEAN + "\n\n" + BLOCK_DEFINITION +
         "        self.d_model = d_model\n\n"
         "    def forward(self, x, encoder_output, encoder_padding_mask=None):\n"
         "        summary = _encoder_mean(encoder_output, encoder_padding_mask).mean(dim=-1, keepdim=True)\n"
         "        return x + _running_mean(x) + summary\n", "zero", hint="two attention layers",
         why="no parameters at all"),
    Case("self-attention-not-causal", "ex-07-decoder-block", BLOCK_DEFINITION +
         "        self.self_attention = MultiHeadAttention(d_model, d_model, context_length, 0.0, num_heads,\n"
         "                                                 causal=False)\n"
         "        self.cross_attention = MultiHeadAttention(d_model, d_model, context_length, 0.0, num_heads,\n"
         "                                                  causal=False, kdim=d_context)\n\n"
         "    def forward(self, x, encoder_output, encoder_padding_mask=None):\n"
         "        x = x + self.self_attention(x)\n"
         "        return x + self.cross_attention(x, context=encoder_output, key_padding_mask=encoder_padding_mask)\n",
         "at most half", hint="not causal", why="a wrong block with a real attention layer"),
    # honest variants: other names, containers, order of registration, masks written another way
    Case("layers-in-a-list", "ex-07-decoder-block", BLOCK_DEFINITION +
         "        # a ModuleList; the cross-attention registered first\n"
         "        self.layers = nn.ModuleList([\n"
         "            MultiHeadAttention(d_model, d_model, context_length, 0.0, num_heads, causal=False,\n"
         "                               kdim=d_context),\n"
         "            MultiHeadAttention(d_model, d_model, context_length, 0.0, num_heads, causal=True),\n"
         "        ])\n\n"
         "    def forward(self, x, encoder_output, encoder_padding_mask=None):\n"
         "        cross, masked = self.layers\n"
         "        x = masked(x) + x\n"
         "        return x + cross(x, context=encoder_output, key_padding_mask=encoder_padding_mask)\n",
         "full", why="the two layers in an nn.ModuleList, cross-attention first"),
    Case("mask-as-attn-mask", "ex-07-decoder-block", BLOCK_DEFINITION +
         "        self.masked = MultiHeadAttention(d_model, d_model, context_length, 0.0, num_heads, causal=False)\n"
         "        self.reads_source = MultiHeadAttention(d_model, d_model, context_length, 0.0, num_heads,\n"
         "                                               causal=False, kdim=d_context)\n\n"
         "    def forward(self, x, encoder_output, encoder_padding_mask=None):\n"
         "        T = x.shape[1]\n"
         "        future = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)\n"
         "        x = x + self.masked(x, attn_mask=future.expand(x.shape[0], self.masked.num_heads, T, T))\n"
         "        return x + self.reads_source(x, context=encoder_output, key_padding_mask=encoder_padding_mask)\n",
         "full", why="other attribute names, the causal mask passed as attn_mask"),
]

# ---------------------------------------------------------------------------------------- chapter 10

GQA_HEAD = ("def grouped_attention(queries, keys, values):\n"
            "    # queries (B, H, T, hd); keys, values (B, H_kv, T, hd) -> (B, H, T, hd)\n")
GQA_CORE = ("    num_tokens = queries.shape[-2]\n"
            "    future = torch.triu(torch.ones(num_tokens, num_tokens, dtype=torch.bool,\n"
            "                                   device=queries.device), diagonal=1)\n"
            "    scores = queries @ keys.transpose(-2, -1) / queries.shape[-1] ** 0.5\n"
            "    weights = torch.softmax(scores.masked_fill(future, float('-inf')), dim=-1)\n"
            "    return weights @ values\n")
ROPE_HEAD = "def rotate(x, positions):\n    # x (..., T, head_dim), positions (T,) -> (..., T, head_dim)\n"
STEP_HEAD = ("def decode_step(query, new_key, new_value, cache_keys, cache_values):\n"
             "    # query, new_key, new_value: (B, H, 1, hd); the cache: (B, H, t, hd)\n")

CH10 = [
    Case("enable-gqa", "ex-10-gqa", GQA_HEAD +
         "    return torch.nn.functional.scaled_dot_product_attention(queries, keys, values, is_causal=True,\n"
         "                                                            enable_gqa=True)\n", "zero",
         hint="grouping yourself", why="SDPA's enable_gqa does the grouping"),
    Case("own-helper-named-repeat-kv", "ex-10-gqa",
         "def repeat_kv(tensor, groups):  # my own helper, Hugging Face's name (not attention_book's)\n"
         "    return tensor.repeat_interleave(groups, dim=1)\n\n\n" + GQA_HEAD +
         "    groups = queries.shape[1] // keys.shape[1]\n"
         "    keys, values = repeat_kv(keys, groups), repeat_kv(values, groups)\n" + GQA_CORE, "full",
         why="a helper of the student's own named repeat_kv"),
    Case("tiled-heads", "ex-10-gqa", GQA_HEAD +
         "    groups = queries.shape[1] // keys.shape[1]\n"
         "    keys, values = keys.repeat(1, groups, 1, 1), values.repeat(1, groups, 1, 1)  # tiles: h % H_kv\n"
         + GQA_CORE, "at most half", hint="tiled", why="GQA with tiled heads (0.86 before)"),
    Case("rope-ignores-positions", "ex-10-rope", ROPE_HEAD +
         "    head_dim = x.shape[-1]\n"
         "    pair_index = torch.arange(0, head_dim, 2, dtype=torch.float32)\n"
         "    theta = 10000.0 ** (-pair_index / head_dim)\n"
         "    angles = torch.arange(x.shape[-2]).float()[:, None] * theta  # 0 .. T - 1, not positions\n"
         "    cos, sin = torch.cos(angles), torch.sin(angles)\n"
         "    a, b = x[..., 0::2].float(), x[..., 1::2].float()\n"
         "    turned = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)\n"
         "    return turned.flatten(-2).to(x.dtype)\n", "at most half", hint="positions",
         why="RoPE that ignores positions (0.88 before)"),
    Case("decode-is-causal", "ex-10-kv-step", STEP_HEAD +
         "    keys = torch.cat([cache_keys, new_key], dim=-2)\n"
         "    values = torch.cat([cache_values, new_value], dim=-2)\n"
         "    context = torch.nn.functional.scaled_dot_product_attention(query, keys, values, is_causal=True)\n"
         "    return context, keys, values\n", "at most half", hint="",
         why="is_causal=True in the decode step (0.71 before)"),
]

# ------------------------------------------- fused kernels (ex-07-from-memory) and SDPA (ex-10-sdpa)
# Issue 30: "no fused kernel" and "calls SDPA" decided on what the answer calls, whatever names it
# uses (the texts are the wrong-answer fixtures of tests/wrong_answers, shared with the self-checks)


def _fixture(chapter: str, label: str, name: str) -> str:
    import importlib

    module = importlib.import_module(f"wrong_answers.ch{chapter}")
    found = [w.code for w in module.WRONG_ANSWERS[label] if w.name == name]
    return found[0] if found else module.CORRECT_ANSWERS[label][name]


_MEMORY, _SDPA = "ex-07-from-memory", "ex-10-sdpa"
FUSED = [
    # (the grader's planning already gives 0 to a name computed at run time, "looks code up at run
    # time", before the own-work run; the self-check names the fused kernel)
    Case("fused-sdpa-getattr", _MEMORY, _fixture("07", _MEMORY, "fused-sdpa-getattr"), "zero",
         why="SDPA through getattr(F, computed name)"),
] + [
    Case(name, _MEMORY, _fixture("07", _MEMORY, name), "zero", hint="a fused kernel used", why=why)
    for name, why in (("fused-sdpa-module-alias", "SDPA through a module-level alias"),
                      ("fused-sdpa-imported-as", "from torch.nn.functional import ... as s"),
                      ("fused-sdpa-torch-C", "torch._C._nn.scaled_dot_product_attention"),
                      ("fused-torch-module-renamed", "nn.MultiheadAttention imported under another name"))
] + [
    Case("own-method-named-sdpa", _MEMORY, _fixture("07", _MEMORY, "method-named-like-pytorchs-kernel"), "full",
         why="a method of its own called scaled_dot_product_attention, by hand"),
    Case("own-helper-named-sdpa", _MEMORY, _fixture("07", _MEMORY, "stacked-qkv-and-where"), "full",
         why="a function of its own called scaled_dot_product_attention, by hand"),
] + [
    Case("hand-written-core", _SDPA, _fixture("10", _SDPA, "hand-written-core"), "zero",
         hint="instead of by hand", why="numerically right, without SDPA"),
    Case("hand-written-core-named-sdpa", _SDPA, _fixture("10", _SDPA, "hand-written-core-named-sdpa"), "zero",
         hint="instead of by hand", why="by hand in a helper named scaled_dot_product_attention"),
    Case("sdpa-module-level-alias", _SDPA, _fixture("10", _SDPA, "module-level-alias"), "full",
         why="SDPA through a module-level alias"),
    Case("sdpa-imported-under-other-names", _SDPA, _fixture("10", _SDPA, "imported-under-other-names"), "full",
         why="torch.nn.functional as nnf, SDPA imported as fused"),
]

CASES: Dict[str, List[Case]] = {"03": CH03, "01": CH01, "07": CH07 + FUSED[:7], "10": CH10 + FUSED[7:]}
ALL = [case for cases in CASES.values() for case in cases]

#: the self-check of each exercise (module, function) and the name its answer defines
CHECKS = {
    "ex-03-stable-softmax": ("ch03", "stable_softmax", "my_softmax"),
    "ex-03-scaled-weights": ("ch03", "scaled_weights", "scaled_weights"),
    "ex-01-one-hot": ("ch01", "one_hot_embedding", "embed_by_matrix_product"),
    "ex-07-decoder-block": ("ch07", "decoder_block", "DecoderBlock"),
    "ex-07-from-memory": ("ch07", "from_memory", "CausalMultiHeadAttention"),
    "ex-10-sdpa": ("ch10", "sdpa", "fused_attention"),
    "ex-10-gqa": ("ch10", "gqa", "grouped_attention"),
    "ex-10-rope": ("ch10", "rope", "rotate"),
    "ex-10-kv-step": ("ch10", "kv_step", "decode_step"),
}


def chapter_of(case: Case) -> str:
    return case.label[3:5]


# ------------------------------------------------------------------------------------------------
# The grader's decision, in this process (no sandbox): what tests/test_grader_own_work.py checks
# quickly; the slow suite grades the same cases in real sandboxes (tests/hostile/own_work.py)
# ------------------------------------------------------------------------------------------------


def course_texts(chapter_path: str) -> List[str]:
    """The chapter's cells that are not answer cells (what the release runs around the answers)."""
    import nbformat

    from attention_book.instructor.course import Course, find_root
    from attention_book.instructor.markup import cell_text

    course = Course.load(find_root(None))
    chapter = next(c for c in course.chapters if c.path == chapter_path)
    nb = nbformat.read(str(course.root / chapter.path), as_version=4)
    return [cell_text(cell) for index, cell in enumerate(nb.cells)
            if cell.cell_type == "code" and chapter.roles.get(index) != "answer"]


def run_cells(texts, namespace: dict, errors: Optional[list] = None) -> dict:
    """Run cells like a kernel: each cell's statements in order, an error ends that cell only
    (and is appended to ``errors`` as the grader records it: ``{"ename", "evalue"}``)."""
    import contextlib
    import io

    import linecache

    from attention_book.checks.answers import parse_cell

    for number, text in enumerate(texts):
        filename = f"<own-work cell {number} {abs(hash(text)):x}>"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        tree = parse_cell(text)
        if tree is None:
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(tree, filename, "exec"), namespace)  # noqa: S102 - test fixtures
        except Exception as err:  # noqa: BLE001 - a cell that fails, as in a notebook
            if errors is not None:
                errors.append({"ename": type(err).__name__, "evalue": str(err)})
    return namespace


def definitions(chapter_path: str) -> dict:
    """The chapter notebook's imports, functions and classes, run top to bottom as in a kernel:
    each cell's source is registered like IPython does (the self-checks read sources)."""
    import ast

    import nbformat

    from attention_book.instructor.course import find_root
    from attention_book.instructor.markup import cell_text

    nb = nbformat.read(str(find_root(None) / chapter_path), as_version=4)
    texts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse("".join(line for line in cell_text(cell).splitlines(True)
                                 if not line.lstrip().startswith(("%", "!"))))
        tree.body = [node for node in tree.body
                     if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef))]
        texts.append(ast.unparse(tree))
    return run_cells(texts, {"__name__": "__main__"})


def clean_namespace(texts_of_course, labels, student_cells, errors: Optional[list] = None) -> dict:
    """The own-work run's kernel, in this process: the preamble's imports, then the student's cells."""
    from attention_book.instructor.clean_room import _preamble

    preamble = "\n".join(line for line in _preamble(texts_of_course, labels).split("\n")
                         if not line.startswith("import attention_book.instructor")
                         and not line.startswith("import attention_book.checks"))
    return run_cells([preamble] + list(student_cells), {"__name__": "__main__"}, errors)
