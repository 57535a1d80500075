"""Exercise numbers: ``"ex-03-scaled-weights"`` -> ``"3.2"`` (chapter 3, second exercise).

The site, the student release, the self-check banners, the grader's CSV and the For instructors
page all use these numbers. The table is generated from the chapter notebooks (the order of the
``{exercise}`` directives in each chapter) so that a self-check never parses a notebook:
regenerate it with ``.venv/bin/python tools/make_student_notebooks.py`` after adding, removing or
moving an exercise (tests/test_student_notebooks.py fails while it is stale).
"""

from __future__ import annotations

from typing import Dict

__all__ = ["NUMBERS", "exercise_number", "exercise_name"]

# BEGIN GENERATED TABLE (tools/make_student_notebooks.py)
NUMBERS: Dict[str, str] = {
    "ex-01-one-hot": "1.1",
    "ex-01-positions": "1.2",
    "ex-01-which-token": "1.3",
    "ex-01-bpe": "1.4",
    "ex-01-parameters": "1.5",
    "ex-01-bpe-decode": "1.6",
    "ex-02-score-loop": "2.1",
    "ex-02-projected-scores": "2.2",
    "ex-02-point-at": "2.3",
    "ex-02-symmetry": "2.4",
    "ex-02-own-match": "2.5",
    "ex-02-additive-scores": "2.6",
    "ex-02-find-the-bug-batch": "2.7",
    "ex-03-stable-softmax": "3.1",
    "ex-03-scaled-weights": "3.2",
    "ex-03-temperature": "3.3",
    "ex-03-attend": "3.4",
    "ex-03-variance": "3.5",
    "ex-03-soft-cap": "3.6",
    "ex-03-find-the-bug-axis": "3.7",
    "ex-04-context-vectors": "4.1",
    "ex-04-copy-weights": "4.2",
    "ex-04-permutation": "4.3",
    "ex-04-zero-queries": "4.4",
    "ex-04-bias": "4.5",
    "ex-05-split-heads": "5.1",
    "ex-05-torch-twin": "5.2",
    "ex-05-parameters": "5.3",
    "ex-05-wide-head": "5.4",
    "ex-05-head-contributions": "5.5",
    "ex-05-find-the-bug-heads": "5.6",
    "ex-06-cross": "6.1",
    "ex-06-padding": "6.2",
    "ex-06-sizes": "6.3",
    "ex-06-causal": "6.4",
    "ex-06-cost": "6.5",
    "ex-06-find-the-bug-half": "6.6",
    "ex-07-causal-softmax": "7.1",
    "ex-07-decoder-mask": "7.2",
    "ex-07-dropout-rows": "7.3",
    "ex-07-lessons": "7.4",
    "ex-07-decoder-block": "7.5",
    "ex-07-find-the-bug-buffer": "7.6",
    "ex-07-from-memory": "7.7",
    "ex-08-training-step": "8.1",
    "ex-08-accuracy": "8.2",
    "ex-08-learning-rate": "8.3",
    "ex-08-other-rows": "8.4",
    "ex-08-override": "8.5",
    "ex-09-block": "9.1",
    "ex-09-find-the-bug-scale": "9.2",
    "ex-09-residual": "9.3",
    "ex-09-warmup": "9.4",
    "ex-09-top-p": "9.5",
    "ex-09-induction-head": "9.6",
    "ex-09-parameters": "9.7",
    "ex-10-flops": "10.1",
    "ex-10-kv-step": "10.2",
    "ex-10-sdpa": "10.3",
    "ex-10-memory-wall": "10.4",
    "ex-10-cache-size": "10.5",
    "ex-10-chunk-mask": "10.6",
    "ex-10-rope": "10.7",
    "ex-10-gqa": "10.8",
    "ex-10-cached-generation": "10.9",
}
# END GENERATED TABLE


def exercise_number(label: str) -> str:
    """``"3.2"`` for an exercise label of the book; the label itself for one the table lacks."""
    if not isinstance(label, str):
        raise TypeError(f"label must be a str such as 'ex-03-scaled-weights', got {type(label).__name__}")
    return NUMBERS.get(label, label)


def exercise_name(label: str) -> str:
    """``"Exercise 3.2"``: how the book, the release, the banners and the grader name an exercise."""
    number = exercise_number(label)
    return f"Exercise {number}" if number != label else f"Exercise {label}"
