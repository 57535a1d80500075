"""Titles with math read well everywhere: page heading, sidebar, browser tab, links to the page.

A chapter title such as "Softmax and the 1/√d_k scale" (or one written with ``$1/\\sqrt{d_k}$``)
showed ``d_k`` raw in the sidebar, "1/√d k" in links and ``\\(...\\)`` in the browser tab: those
places are plain text, where MathJax does not run. This extension

* turns ``x_k``-style subscripts in section titles into Unicode subscripts (``dₖ``) when every
  subscript character has one (in the page itself too, so all places agree), and
* replaces math in the copies of the titles Sphinx keeps for the sidebar, the tab, the "next /
  previous" links and ``{doc}`` links by the same Unicode text (``1/√dₖ``); the heading on the
  page keeps its math, rendered by MathJax.

``tex_to_text`` is the small TeX-to-Unicode converter (the subset used in titles).
"""

from __future__ import annotations

import re

from docutils import nodes

SUBSCRIPTS = dict(zip("0123456789+-=()aehijklmnoprstuvx",
                      "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))
SUPERSCRIPTS = dict(zip("0123456789+-=()inT", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁱⁿᵀ"))
SYMBOLS = {
    "sqrt": "√", "top": "ᵀ", "cdot": "·", "times": "×", "to": "→", "rightarrow": "→", "le": "≤", "ge": "≥",
    "approx": "≈", "infty": "∞", "alpha": "α", "beta": "β", "omega": "ω", "sigma": "σ", "tau": "τ",
    "theta": "θ", "lambda": "λ", "mu": "μ", "pi": "π", "ldots": "…", "dots": "…", "in": "∈",
    "sum": "Σ", "quad": " ", ",": " ", ";": " ", "!": "", "left": "", "right": "",
}
# a letter followed by _ and one subscript character, as in d_k or W_q (not snake_case words)
PLAIN_SUBSCRIPT = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z])_([0-9a-z])(?![A-Za-z0-9_])")


def _script(text: str, table: dict, marker: str) -> str:
    if text and all(ch in table for ch in text):
        return "".join(table[ch] for ch in text)
    if text and all(ch in table.values() for ch in text):  # already converted: ^\top -> ᵀ
        return text
    return marker + (text if len(text) == 1 or text.isalnum() else "(" + text + ")")


def _group(tex: str, i: int):
    """The argument starting at ``tex[i]``: a {braced group}, a \\command or one character."""
    while i < len(tex) and tex[i] == " ":
        i += 1
    if i >= len(tex):
        return "", i
    if tex[i] == "{":
        depth = 0
        for j in range(i, len(tex)):
            depth += {"{": 1, "}": -1}.get(tex[j], 0)
            if depth == 0:
                return tex[i + 1:j], j + 1
        return tex[i + 1:], len(tex)
    if tex[i] == "\\":
        match = re.match(r"\\([A-Za-z]+|.)", tex[i:])
        return match.group(0), i + match.end()
    return tex[i], i + 1


def tex_to_text(tex: str) -> str:
    """Plain Unicode for the small TeX of a title: ``1/\\sqrt{d_k}`` -> ``1/√dₖ``."""
    out, i = [], 0
    while i < len(tex):
        ch = tex[i]
        if ch == "\\":
            match = re.match(r"\\([A-Za-z]+|.)", tex[i:])
            name = match.group(1)
            i += match.end()
            if name in ("frac", "tfrac", "dfrac"):
                top, i = _group(tex, i)
                bottom, i = _group(tex, i)
                out.append(tex_to_text(top) + "/" + tex_to_text(bottom))
            elif name == "sqrt":
                inner, i = _group(tex, i)
                inner = tex_to_text(inner)
                out.append("√" + (inner if len(inner) <= 2 or inner.isalnum() else "(" + inner + ")"))
            elif name in ("text", "mathrm", "mathbf", "mathit", "operatorname", "textrm", "boldsymbol"):
                inner, i = _group(tex, i)
                out.append(tex_to_text(inner))
            else:
                out.append(SYMBOLS.get(name, name))
        elif ch in "_^":
            group, i = _group(tex, i + 1)
            text = tex_to_text(group)
            out.append(_script(text, SUBSCRIPTS if ch == "_" else SUPERSCRIPTS, ch))
        elif ch in "{}$":
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def plain_subscripts(text: str) -> str:
    """``d_k`` -> ``dₖ`` in plain text (only single-character subscripts that Unicode has)."""
    return PLAIN_SUBSCRIPT.sub(lambda m: m.group(1) + SUBSCRIPTS[m.group(2)] if m.group(2) in SUBSCRIPTS
                               else m.group(0), text)


def _plain_title_text(node: nodes.Node) -> None:
    """In place: subscripts in the Text nodes of ``node`` (code and math left alone)."""
    for text in list(node.findall(nodes.Text)):
        if isinstance(text.parent, (nodes.literal, nodes.math)):
            continue
        new = plain_subscripts(str(text))
        if new != str(text):
            text.parent.replace(text, nodes.Text(new))


def _math_to_text(node: nodes.Node) -> None:
    """In place: every math node inside ``node`` becomes its Unicode text."""
    for math in list(node.findall(nodes.math)):
        math.parent.replace(math, nodes.Text(tex_to_text(math.astext())))
    _plain_title_text(node)


def _fix_section_titles(app, doctree) -> None:
    # before the title and toc collectors (priority 500) copy the titles
    for title in doctree.findall(nodes.title):
        if isinstance(title.parent, nodes.section):
            _plain_title_text(title)


def _fix_title_copies(app, doctree) -> None:
    # after the collectors: the copies Sphinx uses for the tab, the sidebar and links
    env, docname = app.env, app.env.docname
    for store in (env.titles, env.longtitles):
        if docname in store:
            _math_to_text(store[docname])
    if docname in env.tocs:
        _math_to_text(env.tocs[docname])


def setup(app):
    app.connect("doctree-read", _fix_section_titles, priority=400)
    app.connect("doctree-read", _fix_title_copies, priority=600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
