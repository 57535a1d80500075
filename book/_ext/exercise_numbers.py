"""Chapter-numbered exercises and figures: "Exercise 3.2" and "Fig. 3.2" belong to chapter 3.

sphinx-exercise numbers exercises with Sphinx's numfig counter, which runs through the whole book
("Exercise 9" in chapter 3) unless the table of contents is numbered (and then every chapter title
gets a "3. " prefix in front of its own "Chapter 3: ..."). The student release, the self-check
banners and the grader number exercises per chapter, from the order of the ``{exercise}``
directives in a chapter notebook (``attention_book.checks.numbering``).

After Sphinx assigns its figure numbers (``env-get-updated``), this extension rewrites the
exercise numbers of every chapter page to ``(chapter, n)``: the chapter is the leading number of
the notebook's file name (``notebooks/03_softmax_and_scaling`` -> 3) and ``n`` counts the page's
exercises in document order. Titles ("Exercise 3.2 (Title)") and ``{ref}`` / ``{numref}`` links
read these numbers, so all of them agree. Pages whose name starts with no number keep Sphinx's
numbers. tests/test_exercise_numbering.py checks the built site against the release.

Figures get the same treatment (``NUMBERED_KINDS``): Sphinx numbered them through the whole book
("Fig. 44" in chapter 8); now the captions and ``{numref}`` links read "Fig. 8.3", the third
figure of chapter 8 (tests/test_figures.py). The landing page and the other pages without a
chapter number keep Sphinx's numbers.
"""

from __future__ import annotations

import re

CHAPTER_RE = re.compile(r"^(\d+)[_-]")
NUMBERED_KINDS = ("exercise", "figure")  # Sphinx's numfig kinds renumbered per chapter


def chapter_number(docname: str):
    """3 for ``notebooks/03_softmax_and_scaling``; None for a page that is not a chapter."""
    match = CHAPTER_RE.match(docname.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else None


def renumber_exercises(app, env):
    """Give each chapter page's exercises and figures the numbers (chapter, 1), (chapter, 2), ..."""
    changed = []
    for docname, fignumbers in env.toc_fignumbers.items():
        chapter = chapter_number(docname)
        if chapter is None:
            continue
        for kind in NUMBERED_KINDS:
            numbered = fignumbers.get(kind)
            if not numbered:
                continue
            in_page_order = sorted(numbered, key=numbered.get)  # Sphinx counted in document order
            numbers = {node_id: (chapter, index + 1) for index, node_id in enumerate(in_page_order)}
            if numbers != numbered:
                fignumbers[kind] = numbers
                if docname not in changed:
                    changed.append(docname)
    return changed


def setup(app):
    # after Sphinx's TocTreeCollector (priority 500) has assigned the book-wide numbers
    app.connect("env-get-updated", renumber_exercises, priority=800)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
