"""Code on the site as a reader should see it: no solution markers, inline code that wraps well.

1. Solution markers. A solution cell of a chapter notebook marks the lines the student release
   replaces with ``# BEGIN SOLUTION`` / ``# END SOLUTION`` (CONTRIBUTING.md, "Exercises"). The
   notebooks keep them (the release and the grader read them); on the site they are noise in the
   middle of the worked answer. After myst-nb has parsed a notebook (``doctree-read``), every
   code cell's displayed source loses the lines that consist of a marker alone; nothing else in
   the cell changes. Only notebook code cells (``cell_input``) are touched, so a page that
   documents the markers in a code block keeps them.

2. Inline code that breaks only where a reader expects it. Sphinx writes inline code as
   ``<code class="literal"><span class="pre">torch.nn.functional.softmax</span></code>`` and
   site.css lets it wrap so that a phone needs no sideways scrolling; with ``overflow-wrap:
   anywhere`` the browser broke it anywhere, mid-word ("scal|ed_dot_product"), and in tables it
   shrank columns to a few letters; and a browser breaks after any hyphen ("--|dtype", "-|inf").
   Now every ``span.pre`` keeps Sphinx's ``white-space: nowrap`` (site.css), and a long one (at
   least ``WBR_MIN_LENGTH`` characters) is split into several ``span.pre`` after each ``.``,
   ``_``, ``(``, ``,`` and ``/`` and between the words of a CamelCase name, joined by ``<wbr>`` (a line-break opportunity, invisible and
   not copied): the only places inline code can wrap, besides its spaces.
   tests/test_chapter_pages.py checks both on the built site.
"""

from __future__ import annotations

import re

from docutils import nodes

MARKER_LINE = re.compile(r"^[ \t]*# (BEGIN|END) SOLUTION[ \t]*$")
WBR_MIN_LENGTH = 16
_PRE_SPAN = re.compile(r'(<span class="pre">)([^<]*)(</span>)')
# after . _ ( , / (when more follows), and inside CamelCase names: Multi|Head|Attention|Wrapper
_BREAK = re.compile(r"(?<=[._(,/])(?=\S)|(?<=[a-z])(?=[A-Z])")
_INLINE_CODE = re.compile(r'<code class="docutils literal[^"]*">.*?</code>', re.S)


def without_markers(source: str) -> str:
    """``source`` without the lines that are only ``# BEGIN SOLUTION`` or ``# END SOLUTION``."""
    return "\n".join(line for line in source.split("\n") if not MARKER_LINE.match(line))


def _is_cell_input(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.container) and "cell_input" in parent.get("classes", []):
            return True
        parent = parent.parent
    return False


def hide_solution_markers(app, doctree) -> None:
    for block in list(doctree.findall(nodes.literal_block)):
        text = block.astext()
        if "SOLUTION" not in text or not _is_cell_input(block):
            continue
        shown = without_markers(text)
        if shown == text:
            continue
        # Sphinx highlights ``rawsource`` when it equals the text: keep the two equal
        new = nodes.literal_block(shown, shown, **block.attributes)
        block.replace_self(new)


def break_points(html: str) -> str:
    """Split the long ``span.pre`` runs of inline code in ``html`` at ``. _ ( , /`` and CamelCase."""
    def span(match):
        text = match.group(2)
        if len(text) < WBR_MIN_LENGTH:
            return match.group(0)
        pieces = _BREAK.split(text)
        return "<wbr>".join(match.group(1) + piece + match.group(3) for piece in pieces)

    return _INLINE_CODE.sub(lambda code: _PRE_SPAN.sub(span, code.group(0)), html)


def _inline_code_breaks(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if isinstance(body, str) and '<span class="pre">' in body:
        context["body"] = break_points(body)


def setup(app):
    app.connect("doctree-read", hide_solution_markers)
    app.connect("html-page-context", _inline_code_breaks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
