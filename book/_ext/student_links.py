"""Launch and download buttons of a chapter page open the student notebook, not the solutions.

sphinx-book-theme builds the Colab and Binder buttons from the page's path in the repository
(``notebooks/03_softmax_and_scaling.ipynb``) and its download button from the page's source in
``_sources/``: all three would hand the reader the worked solutions. The student edition of each
chapter (answer cells stubbed with ``raise NotImplementedError(...)``, self-check cells kept,
written exercises with an empty answer cell) is generated into ``student/notebooks/`` by
``tools/make_student_notebooks.py`` and committed (tests/test_student_notebooks.py fails when it
is stale). For a page that has a student edition this extension

* points every launch button (Colab, Binder, JupyterHub, ...) at ``student/<page>.ipynb`` in the
  repository, on the branch the book is configured with;
* points the ``.ipynb`` download button at a copy of that file in the site
  (``<site>/student/<page>.ipynb``, copied when the build finishes).

The book page itself keeps the worked solution in its dropdown. tests/test_launch_links.py opens
every chapter page in Chromium and follows the links.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from urllib.parse import quote

STUDENT_DIR = "student"  # attention_book.instructor.release.STUDENT_DIR (a test keeps them equal)


def student_notebook(app, pagename: str):
    """``student/<page>.ipynb`` (relative to the book root) if it exists, else None."""
    relative = f"{STUDENT_DIR}/{pagename}.ipynb"
    return relative if (Path(app.srcdir) / relative).is_file() else None


def _repo_path(app, relative: str) -> str:
    book = str(app.config.html_theme_options.get("path_to_docs", "") or "").strip("/")
    return f"{book}/{relative}" if book else relative


def point_buttons_at_student_notebooks(app, pagename, templatename, context, doctree):
    student = student_notebook(app, pagename)
    if student is None:
        return
    original = _repo_path(app, f"{pagename}.ipynb")
    replacement = _repo_path(app, student)
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []):
            label, url = button.get("label", ""), button.get("url")
            if not url:
                continue
            if group.get("label") == "launch-buttons":
                for old, new in ((original, replacement), (quote(original, safe=""), quote(replacement, safe=""))):
                    if url.endswith(old) or f"{old}&" in url or f"{old}%26" in url:
                        url = url.replace(old, new)
                        break
                else:
                    raise RuntimeError(
                        f"student_links: the launch button {label!r} of {pagename} does not name "
                        f"{original} ({url}): sphinx-book-theme changed how it builds launch URLs"
                    )
                button["url"] = url
                button["tooltip"] = f"{button.get('tooltip', '')} (student notebook: exercises unsolved)".strip()
            elif label == "download-source-button":
                button["url"] = context["pathto"](student, 1)
                button["tooltip"] = "Download the student notebook (exercises unsolved)"


def copy_student_notebooks(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    for docname in sorted(app.env.found_docs):
        student = student_notebook(app, docname)
        if student:
            target = Path(app.outdir) / student
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(app.srcdir) / student, target)


def setup(app):
    # after sphinx-book-theme's add_launch_buttons / add_header_buttons (priority 501)
    app.connect("html-page-context", point_buttons_at_student_notebooks, priority=600)
    app.connect("build-finished", copy_student_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
