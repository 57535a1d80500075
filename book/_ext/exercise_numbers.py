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

Each exercise's body starts with its info line, "Difficulty ★★☆ · 15 min · practises: ..."
(:mod:`attention_book.instructor.exercise_info`, the one source that the release and the
instructor's table read too). ``style_exercise_info`` gives that paragraph the class
``exercise-info`` (styled by static/exercise_info.css) and lets screen readers say "difficulty 2
of 3 (core)" instead of reading out the stars.
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


def _exercise_nodes(doctree):
    try:
        from sphinx_exercise.nodes import exercise_enumerable_node, exercise_node
    except ImportError:  # pragma: no cover - the book always has sphinx-exercise
        return []
    return [node for node in doctree.findall() if isinstance(node, (exercise_enumerable_node, exercise_node))]


def style_exercise_info(app, doctree):
    """Mark each exercise's info line (its first paragraph) and describe its stars in words."""
    from docutils import nodes

    from attention_book.instructor.exercise_info import parse_info_line

    for exercise in _exercise_nodes(doctree):
        paragraph = next(iter(exercise.findall(nodes.paragraph)), None)
        if paragraph is None or not paragraph.children or not isinstance(paragraph.children[0], nodes.Text):
            continue
        info = parse_info_line(paragraph.astext().replace("\n", " "))
        first = str(paragraph.children[0])
        if info is None or not first.startswith(f"Difficulty {info.stars}"):
            continue
        words = f"difficulty {info.difficulty} of 3 ({info.level})"
        stars = nodes.raw("", f'<span class="exercise-difficulty" role="img" aria-label="{words}" '
                              f'title="{words}">{info.stars}</span>', format="html")
        rest = first[len(f"Difficulty {info.stars}"):]
        paragraph.replace(paragraph.children[0], nodes.Text(rest))
        paragraph.insert(0, stars)
        paragraph["classes"].append("exercise-info")


def setup(app):
    # after Sphinx's TocTreeCollector (priority 500) has assigned the book-wide numbers
    app.connect("env-get-updated", renumber_exercises, priority=800)
    app.connect("doctree-read", style_exercise_info)
    app.add_css_file("exercise_info.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
