"""Notebooks for the "write your own" cases of issue 29 (items 3-4) and issue 30 (item 7).

:func:`build` turns a :class:`own_work_cases.Case` into a submitted notebook: the chapter's
student release with every answer solved (the chapter's own solution), except the case's
exercise, whose answer cell holds the case's text, and the cells the case adds, right before that
answer cell. A case with ``stub_all`` leaves every answer the release's stub. The grader
(tests/test_grader_own_work.py, tools/own_work_before.py) grades the class.
"""

from __future__ import annotations

import copy
from typing import Dict, List

from .attacks import _answer_indexes, _code, _text


def _answers_by_label(nb, chapter) -> Dict[str, List[int]]:
    found: Dict[str, List[int]] = {}
    for index in _answer_indexes(nb, chapter):
        info = (nb["cells"][index].get("metadata") or {}).get("attention_book") or {}
        label = info.get("exercise") or next((ex.label for ex in chapter.exercises if index in ex.answer_cells), None)
        if label:
            found.setdefault(label, []).append(index)
    return found


def build(case, source, release, chapter) -> dict:
    """The submitted notebook of ``case`` (a dict; ``source``/``release`` are not changed)."""
    nb = copy.deepcopy(release)
    solutions = {ex.label: [_text(source["cells"][i]) for i in ex.answer_cells] for ex in chapter.exercises}
    released = _answers_by_label(nb, chapter)
    for label, indexes in released.items():
        if case.stub_all:
            continue
        if label == case.label:
            nb["cells"][indexes[0]]["source"] = case.text
            for index in indexes[1:]:
                nb["cells"][index]["source"] = ""
        elif label in solutions:
            for index, text in zip(indexes, solutions[label]):
                nb["cells"][index]["source"] = text
    target = released.get(case.label) or sorted(i for indexes in released.values() for i in indexes)
    where = target[0]
    for text in reversed(case.added):
        nb["cells"].insert(where, _code(text))
    return nb
