"""A tap or a click anywhere on a solution's title opens the solution.

sphinx-exercise titles a solution "Solution to Exercise 3.1 (Title)", where "Exercise 3.1 (Title)",
most of the title, is a link back to the exercise. sphinx-togglebutton listens for clicks on the
whole title, but toggles only when the click's target is the title element itself or its chevron
button: a tap on the link (on a phone, most of what a thumb can hit) followed the link, the page
jumped to the exercise and the solution stayed closed; only "Solution to" and the chevron opened
it. Two changes:

* the links inside solution titles become plain text (same words, same math; the exercise is the
  box right above its solution, so the link added nothing), in a ``solution-target`` span;
* ``static/solution_titles.css`` lets clicks on the title's children fall through to the title
  (``pointer-events: none``), so the words and any math in them toggle it too.

tests/test_solution_tap.py taps the words at 390 px and clicks them at 1280 px, in both themes.
"""

from __future__ import annotations

from pathlib import Path

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform


class SolutionTitlesWithoutLinks(SphinxPostTransform):
    # after sphinx-exercise's ResolveTitlesInSolutions (21) has built "Solution to <link>"
    default_priority = 30

    def run(self, **kwargs):
        from sphinx_exercise.nodes import solution_node

        for solution in self.document.findall(solution_node):
            if not solution.children or not isinstance(solution.children[0], nodes.title):
                continue
            for link in list(solution.children[0].findall(nodes.reference)):
                text = nodes.inline(classes=["solution-target"])
                text.extend(link.children)
                link.replace_self(text)


def _add_static(app, config):
    static = str(Path(__file__).parent / "static")
    if static not in config.html_static_path:  # site_fixes adds the same folder
        config.html_static_path.append(static)


def setup(app):
    app.add_post_transform(SolutionTitlesWithoutLinks)
    app.connect("config-inited", _add_static)
    app.add_css_file("solution_titles.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
