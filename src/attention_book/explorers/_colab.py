"""Colab's custom widget manager, and a readable line where no widget can be shown.

Colab's front end renders its built-in widgets only until a notebook calls
``google.colab.output.enable_custom_widget_manager()``; before that, an explorer (an anywidget)
would show as its text fallback. The explorers call :func:`enable_colab_widgets` before they are
displayed: in Colab (``google.colab`` is imported by its kernel) it turns the manager on, once.
anywidget does the same only when ``google.colab.output`` is already imported, so the course does
not rely on that.

Wherever widgets still cannot render (a front end without widget support, anywidget missing from
the kernel's environment, an old Colab), the reader sees :func:`no_widget_text`, which says what
to do, instead of ``<...DkExplorer object at 0x...>``.
"""

from __future__ import annotations

import sys
import warnings

__all__ = ["enable_colab_widgets", "in_colab", "no_widget_text"]

_enabled = False


def in_colab() -> bool:
    """True in a Colab kernel (it imports ``google.colab`` at start)."""
    return "google.colab" in sys.modules


def enable_colab_widgets() -> bool:
    """In Colab, turn on its custom widget manager (once per kernel); True if it is on."""
    global _enabled
    if _enabled or not in_colab():
        return _enabled
    try:
        from google.colab import output

        output.enable_custom_widget_manager()
    except Exception as error:  # an older or changed Colab: the text fallback tells the reader
        warnings.warn(f"could not turn on Colab's custom widget manager ({error!r}); the explorers "
                      "may show as text", RuntimeWarning, stacklevel=2)
        return False
    _enabled = True
    return True


def no_widget_text(name: str, tokens: int) -> str:
    """What a front end that cannot render the widget shows instead (its text/plain)."""
    return (
        f"[Interactive explorer {name}, {tokens} tokens: this line shows where the notebook cannot "
        "display widgets. In Colab, run `from google.colab import output; "
        "output.enable_custom_widget_manager()` and then this cell again; in Jupyter, install "
        "anywidget and ipywidgets>=8 in the kernel's environment and reload the page. The book's "
        "website shows every explorer without a kernel.]"
    )
