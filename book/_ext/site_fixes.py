"""Two small fixes for console errors that a default Jupyter Book 1.x site shows on every page.

1. ``Identifier 'THEBE_JS_URL' has already been declared``: sphinx-thebe adds its inline config
   script once per ``env-before-read-docs`` event, which fires more than once in a Jupyter Book
   build, so the ``const`` is declared twice. We drop repeated identical scripts per page.
2. ``Got invalid theme mode: . Resetting to auto.``: pydata-sphinx-theme's layout reads a
   ``default_mode`` template variable that nothing sets in a Jupyter Book build, so it is empty.
   We set it per page (setting ``html_theme_options`` in _config.yml instead would replace
   Jupyter Book's theme options and remove the launch buttons).

The browser tests fail on console errors, so a regression here is caught.
"""


def _fix_page(app, pagename, templatename, context, doctree):
    context.setdefault("default_mode", "light")  # read by pydata-sphinx-theme's layout.html
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
    # run late, after the themes and sphinx-thebe have added their scripts
    app.connect("html-page-context", _fix_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
