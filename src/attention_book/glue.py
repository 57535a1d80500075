"""Numbers that depend on the machine, taken from the run into the prose (myst-nb's ``glue``).

A value that depends on the machine (floating-point rounding, thread count, CPU instruction set,
device, load, a timing, a training result) is never typed into a chapter's prose
(CONTRIBUTING.md, "Numbers"). Usually the prose refers to it without its value ("the loss
printed above"). Where a sentence needs the value itself, the code cell that computes it records
it with :func:`glue`, and the Markdown pastes it with myst-nb's ``{glue:text}`` role, so the
built page shows what the build's own run printed::

    print("held-out loss:", glue("heldout_loss", loss, ".2f"))   # code cell: prints 1.80

    The model reaches {glue:text}`heldout_loss` nats per character.   (Markdown)

:func:`glue` returns the formatted text, so the cell prints exactly what the page will paste.
It writes the display data ``myst_nb.glue(name, text, display=False)`` writes, without making
myst-nb a requirement of readers: JupyterLab and Colab show nothing for it (the record's MIME
type has no renderer there), and outside IPython the call only returns the text.

The recorded ``text/plain`` is the text as a Python string literal (``"'1.80'"``), as IPython
formats a string: myst-nb's ``{glue:text}`` reads it back with ``ast.literal_eval``, so "1.80"
stays "1.80" (a bare ``1.80`` would be read as the float 1.8 and pasted as "1.8"). A format
spec in the role (``{glue:text}`heldout_loss:.1f```) still works on numeric text, but the rule
is to format once, in the code, so that the printed line and the page agree.

JupyterLab (jupyterlab-myst) and Colab do not paste glue: they show the role's name in code
font. Names are therefore words a reader can read (``heldout_loss``, ``matching_weights``):
lower-case words of letters and digits joined by underscores.

A timing a chapter measures while it runs belongs to the machine that ran it. On the site that is
the machine that built the book, which a reader would otherwise take for their own:
:func:`machine_label` names it ("this build's machine" in the book build, "this machine" in a
notebook), and the chapter prints it next to the dated reference table the prose discusses.
"""

from __future__ import annotations

import os
import re
from typing import Any, Optional

__all__ = ["glue", "machine_label", "GLUE_PREFIX", "NAME_PATTERN", "BUILD_LABEL"]

#: the MIME-type prefix myst-nb reads glued values from (hidden by every notebook front end)
GLUE_PREFIX = "application/papermill.record/"

#: a glue name: lower-case words of letters and digits joined by single underscores
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")

#: what a timing measured during the book build is called on the site (tests/test_site_numbers.py)
BUILD_LABEL = "this build's machine"


def glue(name: str, value: Any, fmt: Optional[str] = None) -> str:
    """Record ``value`` (formatted with ``fmt``, e.g. ``".2f"``) under ``name``; return the text.

    The text is ``format(value, fmt)``, or ``str(value)`` without ``fmt``. In a notebook it is
    recorded as hidden display data that the book build pastes into ``{glue:text}`name```;
    elsewhere nothing is recorded.

    Raises ``TypeError`` for a name that is not a string or a format that is not a string, and
    ``ValueError`` for a name that is not lower-case words joined by underscores, or a format
    the value does not accept.
    """
    if not isinstance(name, str):
        raise TypeError(f"glue name must be a string, got {type(name).__name__} {name!r}: "
                        "use e.g. 'heldout_loss'")
    if NAME_PATTERN.fullmatch(name) is None:
        words = "_".join(re.findall(r"[a-z0-9]+", name.lower())) or "heldout_loss"
        raise ValueError(f"glue name {name!r} must be lower-case words of letters and digits "
                         f"joined by underscores, readable where the role is not pasted "
                         f"(JupyterLab, Colab): use e.g. {words!r}")
    if fmt is not None and not isinstance(fmt, str):
        raise TypeError(f"fmt must be a format spec string such as '.2f', got "
                        f"{type(fmt).__name__} {fmt!r}")
    try:
        text = format(value, fmt) if fmt else str(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"fmt={fmt!r} does not format value {value!r} of type "
                         f"{type(value).__name__} ({error}): use a spec for its type, e.g. "
                         "'.2f' for a float, 'd' or ',' for an int, or no fmt") from None
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python: nothing to record into
        return text
    if get_ipython() is not None:
        display({GLUE_PREFIX + "text/plain": repr(text)}, raw=True,
                metadata={"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX}})
    return text


def machine_label() -> str:
    """Who measured a timing printed now: :data:`BUILD_LABEL` in the book build
    (``ATTENTION_BOOK_STATIC=1``, set by ``make book``), "this machine" in a notebook."""
    return BUILD_LABEL if os.environ.get("ATTENTION_BOOK_STATIC") == "1" else "this machine"
