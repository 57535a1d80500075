"""Shared fixtures: the notebooks in the book, the built site, headless Chromium.

In CI (``CI=true``) a missing dependency (Chromium, the tiktoken cache, the local MathJax copy) is
a test failure, never a skip.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))

from helpers import BUILD, book_notebooks, in_ci  # noqa: E402

try:  # Hypothesis runs derandomized in CI (same examples every run), randomized locally.
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("ci", derandomize=True, deadline=None)
    _hypothesis_settings.register_profile("dev", deadline=None)
    _hypothesis_settings.load_profile("ci" if in_ci() else "dev")
except ImportError:  # pragma: no cover - hypothesis is in requirements-dev.txt
    pass

SHARED_TIKTOKEN = ROOT.parent / "shared" / "tiktoken-cache"
if "TIKTOKEN_CACHE_DIR" not in os.environ and SHARED_TIKTOKEN.is_dir():
    os.environ["TIKTOKEN_CACHE_DIR"] = str(SHARED_TIKTOKEN)


# `make test` runs on two workers (pytest-xdist, ``-n 2 --dist loadgroup``). Each worker builds its
# own session and module fixtures, so tests that share an expensive one run on one worker:
SITE_FIXTURES = {"book_build", "site_dir", "site_url", "open_page", "browser"}  # one book build
GROUPS = {
    # graders: their sandboxes are watched for leftover processes, so two never grade at once
    "grader": {"test_grader_hostile", "test_grade", "test_classroom", "test_gradescope", "test_grader_bounds"},
    # the chapters' executed copies: test_quoted_numbers reads what test_notebooks wrote
    "notebooks": {"test_notebooks", "test_quoted_numbers"},
}


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks into the test ids
def pytest_collection_modifyitems(config, items):
    """Mark every test with the xdist group it belongs to (the site, the graders, the notebooks,
    else its own module, whose module-scoped fixtures then run once)."""
    for item in items:
        module = getattr(getattr(item, "module", None), "__name__", "").rsplit(".", 1)[-1]
        if SITE_FIXTURES & set(getattr(item, "fixturenames", ())):
            group = "site"
        else:
            group = next((name for name, modules in GROUPS.items() if module in modules), module)
        item.add_marker(pytest.mark.xdist_group(group))


def require(condition: bool, reason: str) -> None:
    """Skip locally when a dependency is missing; fail in CI."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"missing dependency in CI: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def gpt2_tokenizer():
    tiktoken = pytest.importorskip("tiktoken")
    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as error:  # offline without a cache
        require(False, f"tiktoken's gpt2 files could not be loaded ({error}); set TIKTOKEN_CACHE_DIR")


@pytest.fixture(scope="session")
def book_build():
    """Build the whole book once per session (``-W``: warnings are errors).

    ``ATTENTION_BOOK_SITE=/path/to/html`` reuses an existing build instead (for quick iteration).
    Returns ``(returncode, log_text, html_dir)``.
    """
    existing = os.environ.get("ATTENTION_BOOK_SITE")
    if existing:
        return 0, "(reused existing build)", Path(existing)
    env = dict(os.environ, ATTENTION_BOOK_STATIC="1")
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "-W", "-n", "--keep-going"]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    log = result.stdout + result.stderr
    BUILD.mkdir(exist_ok=True)
    (BUILD / "book-build.log").write_text(log)
    return result.returncode, log, BUILD / "html"


@pytest.fixture(scope="session")
def site_dir(book_build):
    html_dir = book_build[2]
    if not (html_dir / "index.html").is_file():
        pytest.fail(f"the book build produced no {html_dir / 'index.html'}; see _build/book-build.log")
    return html_dir


@pytest.fixture(scope="session")
def site_url(site_dir):
    from browser import serve

    with serve(site_dir) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    from browser import find_chromium, launch

    chromium = find_chromium()
    require(chromium is not None, "Chromium not found (apt-get install chromium, or set CHROMIUM)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        instance = launch(playwright, chromium)
        yield instance
        instance.close()


@pytest.fixture(scope="session")
def mathjax_dir():
    from browser import MATHJAX_DIR

    require((MATHJAX_DIR / "es5" / "tex-mml-chtml.js").is_file(),
            f"local MathJax copy missing at {MATHJAX_DIR} (run tools/setup.sh --browser)")
    return MATHJAX_DIR


@pytest.fixture
def open_page(browser, site_url, mathjax_dir):
    from browser import open_recorded_page

    pages = []

    def _open(path: str, wait_for_math: bool = True, **options):
        # options: open_recorded_page's viewport and color_scheme
        page = open_recorded_page(browser, f"{site_url}/{path}", mathjax_dir, wait_for_math, **options)
        pages.append(page)
        return page

    yield _open
    for page in pages:
        page.context.close()


@pytest.fixture
def screenshot():
    folder = BUILD / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)

    def _shot(page, name: str, full_page: bool = True) -> Path:
        path = folder / f"{name}.png"
        page.screenshot(path=str(path), full_page=full_page)
        return path

    return _shot


@pytest.fixture(scope="session")
def notebooks():
    return book_notebooks()
