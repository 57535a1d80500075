"""The site's own fixes: console errors, readable code and outputs, titles with math.

Registered in _config.yml (``sphinx.local_extensions``); it also loads ``site_titles`` (titles with
math in the sidebar and the browser tab) and adds ``static/site.css`` (code cells that fit the
column at 1280 px, outputs and inline code that wrap on a phone, outputs and figures readable in
dark mode, see the comments there), ``static/site.js`` (a sidebar dialog closes when a link in it
is followed) and ``templates/`` (the search and colour-mode buttons, with accessible names).

Two fixes for console errors that a default Jupyter Book 1.x site shows on every page:

1. ``Identifier 'THEBE_JS_URL' has already been declared``: sphinx-thebe adds its inline config
   script once per ``env-before-read-docs`` event, which fires more than once in a Jupyter Book
   build, so the ``const`` is declared twice. We drop repeated identical scripts per page.
2. ``Got invalid theme mode: . Resetting to auto.``: pydata-sphinx-theme's layout reads a
   ``default_mode`` template variable that nothing sets in a Jupyter Book build, so it is empty.
   We set it per page to ``auto`` (the page follows the reader's system light/dark setting until
   the reader picks a mode with the colour-mode button); setting ``html_theme_options`` in
   _config.yml instead would replace Jupyter Book's theme options and remove the launch buttons.

And one fix for navigation that did nothing (tests/test_navigation.py clicks it):

3. The sidebar and page-contents toggles: pydata-sphinx-theme 0.17 moved the default of its
   ``navbar_persistent`` option (the search field in the top navbar) from its theme.conf into
   Python (``update_config``), which applies it unless ``html_theme_options`` names the option.
   sphinx-book-theme 1.3.0 empties every navbar slot in *its* theme.conf, which pydata no longer
   reads for this option, so pydata renders its top navbar again: hidden by sphinx-book-theme's
   CSS, but with its own ``.primary-toggle`` / ``.secondary-toggle`` buttons placed before the
   visible ones in the article header. Both themes' scripts bind ``querySelector(".primary-toggle")``,
   the first (hidden) button, so clicking the visible buttons did nothing at any width
   (pydata-sphinx-theme issue 2451, sphinx-book-theme PR 991/1000). Setting
   ``navbar_persistent`` to an empty list, as sphinx-book-theme meant to, removes the hidden
   navbar and its buttons: the scripts bind the visible ones again.

The browser tests fail on console errors, so a regression here is caught.
"""

from pathlib import Path

HERE = Path(__file__).parent


def _add_paths(app, config):
    # static/site.css, and templates/ that override two pydata-sphinx-theme buttons whose
    # accessible names did not match their text (axe-core, serious)
    config.html_static_path.append(str(HERE / "static"))
    config.templates_path.insert(0, str(HERE / "templates"))
    # fix 3 above: no hidden top navbar whose toggle buttons would capture the theme's scripts
    config.html_theme_options.setdefault("navbar_persistent", [])


# myst-nb's "Show code cell source" toggles: their aria-label does not contain their visible text
# (axe-core: label-content-name-mismatch); without it the name is the visible text.
_TOGGLE_SUMMARY = '<summary aria-label="Toggle hidden content">'


def _fix_page(app, pagename, templatename, context, doctree):
    context.setdefault("default_mode", "auto")  # read by pydata-sphinx-theme's layout.html
    if isinstance(context.get("body"), str) and _TOGGLE_SUMMARY in context["body"]:
        context["body"] = context["body"].replace(_TOGGLE_SUMMARY, "<summary>")
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        # same file or same inline body = same script, whatever priority it was added with
        attributes = getattr(script, "attributes", {})
        key = (getattr(script, "filename", script) or "", tuple(sorted((k, str(v)) for k, v in attributes.items())))
        if key in seen:
            continue
        seen.add(key)
        unique.append(script)
    scripts[:] = unique


def setup(app):
    app.setup_extension("site_titles")
    app.connect("config-inited", _add_paths)
    app.add_css_file("site.css")
    app.add_js_file("site.js", loading_method="defer")  # closes a sidebar dialog on following a link
    # run late, after the themes and sphinx-thebe have added their scripts
    app.connect("html-page-context", _fix_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
