"""Every chapter page's Colab, Binder and download buttons open the student notebook.

Each chapter page is opened in headless Chromium; its launch links are followed to the repository
path they name (on the branch _config.yml sets) and its download link to the file the site
serves. All three must be student/<chapter>.ipynb, a student edition with no solution code
(tests/test_student_notebooks.py checks that the same file runs top to bottom and that every
self-check says "not implemented yet").
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from helpers import ROOT
from test_student_notebooks import CHAPTERS, check_student_notebook

from attention_book.instructor.release import STUDENT_DIR

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
REPO = CONFIG["repository"]["url"].rstrip("/").split("github.com/")[1]  # org/name
BRANCH = CONFIG["repository"].get("branch", "main")
COLAB = CONFIG["launch_buttons"]["colab_url"].rstrip("/") + "/github/"
BINDER = CONFIG["launch_buttons"]["binderhub_url"].rstrip("/") + "/v2/gh/"


def colab_path(url: str) -> str:
    """``.../github/org/repo/blob/branch/path`` -> path (checking repo and branch)."""
    rest = url[len(COLAB):]
    repo, _, after = rest.partition("/blob/")
    branch, _, path = after.partition("/")
    assert (repo, branch) == (REPO, BRANCH), f"Colab link to {repo}@{branch}, expected {REPO}@{BRANCH}: {url}"
    return path


def binder_path(url: str) -> str:
    """``.../v2/gh/org/repo/branch?urlpath=lab/tree/path`` -> path (checking repo and branch)."""
    parsed = urlparse(url)
    org, repo, branch = parsed.path.split("/v2/gh/", 1)[1].split("/", 2)
    assert (f"{org}/{repo}", branch) == (REPO, BRANCH), f"Binder link to {org}/{repo}@{branch}: {url}"
    urlpath = parse_qs(parsed.query)["urlpath"][0]
    for prefix in ("lab/tree/", "tree/"):
        if urlpath.startswith(prefix):
            return urlpath[len(prefix):]
    raise AssertionError(f"Binder link opens {urlpath!r}, not a notebook: {url}")


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_launch_and_download_buttons_open_the_student_notebook(chapter, open_page):
    name = chapter.path[: -len(".ipynb")]
    expected = f"{STUDENT_DIR}/{chapter.path}"
    page = open_page(f"{name}.html", wait_for_math=False)
    links = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    colab = [h for h in links if h.startswith(COLAB)]
    binder = [h for h in links if h.startswith(BINDER)]
    downloads = [h for h in links if urlparse(h).path.endswith(".ipynb") and not h.startswith(("https://", "http://github"))
                 and urlparse(h).hostname in ("127.0.0.1", "localhost")]
    assert len(colab) == 1 and len(binder) == 1, f"Colab links {colab}, Binder links {binder}"
    assert len(downloads) == 1, f"download links to a notebook: {downloads}"
    assert not any("/_sources/" in h and h.endswith(chapter.path) for h in links), "a link still serves the solutions"

    for kind, path in (("Colab", colab_path(colab[0])), ("Binder", binder_path(binder[0]))):
        assert path == expected, f"the {kind} button opens {path}, not {expected}"
        assert (ROOT / path).is_file(), f"the {kind} button names {path}, which is not in the repository"
    served = page.request.get(downloads[0])
    assert served.ok, f"{downloads[0]}: HTTP {served.status}"
    assert urlparse(downloads[0]).path.endswith(f"/{expected}")
    assert served.body() == (ROOT / expected).read_bytes(), "the site serves another file than the repository's"
    check_student_notebook(chapter, (ROOT / expected).read_text(encoding="utf-8"))
    assert page.console_errors == [], page.console_errors
