"""Numbers that depend on the machine, taken from the run into the prose (myst-nb's ``glue``).

A value that depends on the machine (floating-point rounding, thread count, CPU instruction set,
device, load, a timing, a training result) is never typed into a chapter's prose. Where the prose
needs the value itself, the code cell that computes it records it here, and the Markdown pastes
it with the ``{glue:text}`` role, so the built page shows what the build's own run printed::

    glue("heldout_loss", loss, ".2f")   # in a code cell: prints nothing, records "1.80"

    The model reaches {glue:text}`heldout_loss` nats per character.   (Markdown)

This writes the same display data as ``myst_nb.glue(name, text, display=False)`` without making
myst-nb a requirement of readers: in JupyterLab or Colab nothing is shown (the cell's own print
says the value), and outside IPython the call only returns the text.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["glue", "GLUE_PREFIX"]

#: the MIME-type prefix myst-nb reads glued values from (hidden by every notebook front end)
GLUE_PREFIX = "application/papermill.record/"


def glue(name: str, value: Any, fmt: Optional[str] = None) -> str:
    """Record ``value`` (formatted with ``fmt``, e.g. ``".2f"``) under ``name``; return the text.

    Raises ``ValueError`` for a name that the ``{glue:text}`` role cannot read (empty, or holding
    whitespace, a colon or a backtick).
    """
    if not isinstance(name, str) or not name or any(c in name for c in " \t\n:`"):
        raise ValueError(f"glue name {name!r} must be a non-empty string without spaces, ':' or "
                         "'`' (the {glue:text} role reads it): use e.g. 'heldout_loss'")
    text = format(value, fmt) if fmt else str(value)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python: nothing to record into
        return text
    if get_ipython() is not None:
        display({GLUE_PREFIX + "text/plain": text}, raw=True,
                metadata={"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}})
    return text
