"""A tap or a click anywhere on a solution's title opens the solution.

sphinx-exercise titles a solution "Solution to Exercise 3.1 (Title)", where "Exercise 3.1 (Title)",
most of the title, is a link back to the exercise; sphinx-togglebutton makes the whole title the
dropdown's switch. A tap on the link (on a phone, where the link is most of what a thumb can hit)
followed the link instead: the page jumped to the exercise and the solution stayed closed; only
"Solution to" and the chevron opened it. The exercise is the box right above its solution, so the
link adds nothing there: this post-transform turns the links inside solution titles into plain
text (same words, same math), and the whole title is the switch at every width.
tests/test_solution_tap.py taps it at 390 px and clicks it at 1280 px, in both colour themes.
"""

from __future__ import annotations

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


def setup(app):
    app.add_post_transform(SolutionTitlesWithoutLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
