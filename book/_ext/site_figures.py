"""Sharp figures on the site: every matplotlib figure the book build draws is an SVG.

The chapters' figures reach the site as whatever the notebook kernel's inline backend emits: by
default a PNG at the figure's own resolution (1x), soft on high-density screens, with its text
baked into pixels. For the book build only, this extension points the kernels at a small IPython
profile of its own (``IPYTHONDIR``, written into the build folder; the executing kernels inherit
the build's environment as they inherit ``ATTENTION_BOOK_STATIC``) whose kernel configuration
asks the inline backend for SVG: sharp at every zoom. Text stays matplotlib's glyph outlines
(``svg.fonttype: path``, the default): the page needs none of matplotlib's fonts (with
``svg.fonttype: none`` a browser without the STIX fonts drew the radical of $\sqrt{d_k}$ as a
stray small glyph), and each glyph is a ``<use>`` of an outline drawn on a 100-unit em, so
the browser tests read every glyph's rendered font size from its transform.
Readers' own Jupyter, Colab and the notebook tests keep matplotlib's defaults.

``svg.hashsalt`` and no ``Date`` in the metadata make the SVG files the same on every build, so
unchanged figures give unchanged files. tests/test_figures.py checks the result on the built site.

Phone versions: on screens narrower than ``PHONE_MAX_WIDTH`` a figure is shown as a ``<picture>``
whose phone drawing replaces the wide one (``NAME-phone.svg`` next to ``NAME.svg`` in
``_images/``). The chapters' figures get theirs from the kernels: the profile also loads
phone_figures.py, which draws every SVG figure a second time, re-laid out for a 390 px phone, and
carries it inside the wide SVG; this extension takes it out again when it copies the figures
(a figure whose phone drawing failed is a build warning). An image ``book/images/NAME.svg``
with a sibling ``NAME-phone.svg`` (the landing page's diagram, drawn by tools/landing.py) gets
the same ``<picture>``.

The execution cache (``execute_notebooks: cache``) keys on the notebooks' code, not on this
profile, and Sphinx keeps the outputs of unchanged pages in its environment: a build whose cache
was filled with other figure settings (PNG figures, say) would keep serving them. So the kernel
configuration is also a Sphinx config value (``site_figures_kernel_config``, rebuild "env": when
it changes, every page is read again) and the cache folder carries a stamp of it; a cache without
the current stamp is emptied before the build executes anything.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from sphinx.util import logging

import phone_figures  # book/_ext, on the path as a local extension's folder

logger = logging.getLogger(__name__)

# matplotlib settings of the book build's kernels (InlineBackend.rc is applied when the inline
# backend is activated, before the first figure is drawn)
FIGURE_RC = {
    "svg.fonttype": "path",  # glyph outlines: no font needed in the browser (the default)
    "svg.hashsalt": "attention-book",  # stable ids: the file only changes with the drawing
}

PHONE_FIGURES = Path(__file__).with_name("phone_figures.py")
# runs in the kernel's namespace at start: load phone_figures.py by path, leave no names behind
_INSTALL_PHONE_DRAWINGS = (
    "import importlib.util as _u; "
    f"_s = _u.spec_from_file_location('attention_book_phone_figures', {str(PHONE_FIGURES)!r}); "
    "_m = _u.module_from_spec(_s); _s.loader.exec_module(_m); _m.install(get_ipython()); "
    "del _u, _s, _m"
)

KERNEL_CONFIG = f"""\
# Written by book/_ext/site_figures.py for the book build's kernels only.
c.InlineBackend.figure_formats = {{"svg"}}
c.InlineBackend.rc = {FIGURE_RC!r}
c.InlineBackend.print_figure_kwargs = {{"bbox_inches": "tight", "metadata": {{"Date": None}}}}
# every SVG figure carries a phone drawing (phone_figures.py, sha256 {
    hashlib.sha256(PHONE_FIGURES.read_bytes()).hexdigest()[:16]}: a change draws every figure again)
c.InteractiveShellApp.exec_lines = [{_INSTALL_PHONE_DRAWINGS!r}]
"""


def kernel_profile_dir(outdir) -> Path:
    """The IPython directory of the book build's kernels (next to the HTML output)."""
    return Path(outdir).parent / ".ipython-book"


STAMP = "site_figures_kernel_config.txt"


def _execution_cache_dir(app, config) -> Path:
    # myst-nb: nb_execution_cache_path, else <outdir>/../.jupyter_cache (myst_nb/sphinx_ext.py)
    configured = getattr(config, "nb_execution_cache_path", "") or ""
    return Path(configured) if configured else Path(app.outdir).parent / ".jupyter_cache"


def _use_svg_kernels(app, config):
    cache = _execution_cache_dir(app, config)
    stamp = cache / STAMP
    if cache.is_dir() and (not stamp.is_file() or stamp.read_text() != KERNEL_CONFIG):
        shutil.rmtree(cache)  # outputs drawn with other figure settings
    cache.mkdir(parents=True, exist_ok=True)
    stamp.write_text(KERNEL_CONFIG)
    profile = kernel_profile_dir(app.outdir) / "profile_default"
    profile.mkdir(parents=True, exist_ok=True)
    path = profile / "ipython_kernel_config.py"
    if not path.is_file() or path.read_text() != KERNEL_CONFIG:
        path.write_text(KERNEL_CONFIG)
    os.environ["IPYTHONDIR"] = str(profile.parent)


PHONE_MAX_WIDTH = 599.98  # px: phones; tablets and wider get the wide drawing
_IMG = re.compile(r'<img\b[^>]*\bsrc="(?P<folder>[^"]*_images/)(?P<name>[\w.-]+)\.svg"[^>]*>')


def phone_versions(srcdir) -> dict:
    """``{NAME: path of NAME-phone.svg}`` for the images in book/images that have one."""
    folder = Path(srcdir) / "book" / "images"
    return {p.name[: -len("-phone.svg")]: p for p in sorted(folder.glob("*-phone.svg"))}


def with_phone_sources(html: str, names) -> str:
    """Wrap each ``<img src=".../_images/NAME.svg">`` whose NAME has a phone drawing in a picture."""
    def wrap(match):
        if match.group("name") not in names:
            return match.group(0)
        phone = f'{match.group("folder")}{match.group("name")}-phone.svg'
        return (f'<picture><source media="(max-width: {PHONE_MAX_WIDTH}px)" srcset="{phone}">'
                f"{match.group(0)}</picture>")

    return _IMG.sub(wrap, html)


def _drawn_phone_versions(app) -> dict:
    """``{NAME: phone SVG text}`` of the figures in ``_images`` whose kernel drew a phone version
    (read from the cell outputs the builder copies; cached per build)."""
    cache = app.__dict__.setdefault("_site_figures_phone", {})
    for source, name in app.builder.images.items():
        stem = Path(name).stem
        if name.endswith(".svg") and stem not in cache:
            text = (Path(app.srcdir) / source).read_text(encoding="utf-8")
            _, phone, failure = phone_figures.split(text)
            cache[stem] = phone
            if failure:
                logger.warning(f"no phone drawing of the figure {source}: {failure}", type="site_figures")
    return {stem: phone for stem, phone in cache.items() if phone}


def _phone_pictures(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if not isinstance(body, str) or "_images/" not in body:
        return
    names = set(phone_versions(app.srcdir)) | set(_drawn_phone_versions(app))
    if names:
        context["body"] = with_phone_sources(body, names)


def _copy_phone_versions(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    images = Path(app.outdir) / "_images"
    for name, path in phone_versions(app.srcdir).items():
        if (images / f"{name}.svg").is_file():
            shutil.copyfile(path, images / path.name)
    # the chapters' figures: the phone drawing out of the wide file, into a file of its own
    for name in _drawn_phone_versions(app):
        wide = images / f"{name}.svg"
        if wide.is_file():
            text, phone, _ = phone_figures.split(wide.read_text(encoding="utf-8"))
            if phone is not None:
                wide.write_text(text, encoding="utf-8")
                (images / f"{name}-phone.svg").write_text(phone, encoding="utf-8")


def setup(app):
    # a change of the kernels' figure settings re-reads (and so re-executes) every page
    app.add_config_value("site_figures_kernel_config", KERNEL_CONFIG, "env")
    app.connect("config-inited", _use_svg_kernels)
    app.connect("html-page-context", _phone_pictures)
    app.connect("build-finished", _copy_phone_versions)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
