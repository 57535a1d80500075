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


# `make test` runs on three workers (pytest-xdist, ``-n 3``; Makefile's TEST_WORKERS). Each worker
# builds its own session and module fixtures, so the tests that share an expensive one form one unit
# of work (a "scope"), given whole to one worker. The groups are named by file, since xdist's
# scheduler sees test ids only (its ``xdist_group`` marks have no effect with pytest 9, which keeps a
# node's id elsewhere).
GROUPS = {
    # the built site: one book build (the build itself is also locked, see book_build)
    "site": {"test_accessibility", "test_chapter_pages", "test_dark_mode", "test_exercise_numbering",
             "test_explorers_browser", "test_figures", "test_launch_links", "test_navigation", "test_site",
             "test_site_numbers", "test_solution_tap"},
    # graders: each grades a class or two; the hostile suite (its own unit, the longest) runs beside
    # them, since it counts only processes of sandbox user ids no grader holds (stray_processes)
    "grader": {"test_grade", "test_classroom", "test_gradescope", "test_grader_bounds"},
    # the chapters' executed copies: test_quoted_numbers reads what test_notebooks wrote
    "notebooks": {"test_notebooks", "test_quoted_numbers"},
}
SITE_FIXTURES = {"book_build", "site_dir", "site_url", "open_page", "browser"}
# the longest units first, so the workers finish together
FIRST = ["site", "grader", "test_fresh_colab", "test_grader_hostile", "notebooks", "test_student_notebooks"]


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its group, else its own file."""
    module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")
    return next((name for name, modules in GROUPS.items() if module in modules), module)


def pytest_collection_modifyitems(config, items):
    """Longest units first (a stable sort: order within a unit is kept); and a test that uses the
    built site must live in a "site" file, or a second worker would build the book again."""
    strays = sorted({item.nodeid.split("::", 1)[0] for item in items
                     if SITE_FIXTURES & set(getattr(item, "fixturenames", ()))
                     and scope_of(item.nodeid) != "site"})
    if strays:
        raise pytest.UsageError(f"tests using the built site outside GROUPS['site'] of tests/conftest.py: {strays}")
    rank = {name: index for index, name in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(scope_of(item.nodeid), len(FIRST)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Distribute whole units of work (:func:`scope_of`) to the workers, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    config.option.loadscopereorder = False  # keep FIRST's order (xdist would sort by test count)
    return UnitScheduling(config, log)


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
    import fcntl

    BUILD.mkdir(exist_ok=True)
    # One worker builds per run (every test of the site is in GROUPS["site"]); the lock keeps two
    # test runs in one checkout from building into the same folder at once.
    with open(BUILD / ".book-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        env = dict(os.environ, ATTENTION_BOOK_STATIC="1")
        command = [str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), "-W", "-n", "--keep-going"]
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        log = result.stdout + result.stderr
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
        # options: open_recorded_page's viewport, color_scheme and has_touch
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
