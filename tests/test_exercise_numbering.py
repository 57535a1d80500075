"""One numbering everywhere: "Exercise 3.2" on the site, in the release, in the banners.

The site's numbers come from book/_ext/exercise_numbers.py (chapter-numbered instead of
sphinx-exercise's book-wide count); the release, the self-check banners and the grader read the
exercise order of each chapter notebook (attention_book.checks.numbering). These tests read the
built site's HTML (no browser needed) and compare.
"""

from __future__ import annotations

import importlib.util
import re

import pytest

from helpers import ROOT

from attention_book.checks.numbering import NUMBERS, exercise_name
from attention_book.instructor.course import Course

COURSE = Course.load(ROOT)
CHAPTERS = [chapter for chapter in COURSE.chapters if chapter.exercises]


def load_extension():
    spec = importlib.util.spec_from_file_location("exercise_numbers", ROOT / "book" / "_ext" / "exercise_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_release_numbers_are_the_table_numbers():
    assert NUMBERS == {ex.label: ex.number for ex in COURSE.exercises()}, (
        "checks/numbering.py is stale: run .venv/bin/python tools/make_student_notebooks.py"
    )


def test_the_site_extension_numbers_chapters_like_the_release():
    chapter_number = load_extension().chapter_number
    for chapter in CHAPTERS:
        assert chapter_number(chapter.path[: -len(".ipynb")]) == chapter.number
        assert all(ex.number.startswith(f"{chapter.number}.") for ex in chapter.exercises)
    assert chapter_number("book/for_instructors") is None


def test_renumbering_follows_page_order():
    class Env:
        toc_fignumbers = {
            "notebooks/03_x": {"exercise": {"ex-03-b": (12,), "ex-03-a": (11,)}, "figure": {"f": (4,)}},
            "book/index": {"exercise": {"ex-99": (1,)}},
        }

    env = Env()
    assert load_extension().renumber_exercises(None, env) == ["notebooks/03_x"]
    # figures are numbered per chapter too ("Fig. 3.1"; tests/test_figures.py checks the site)
    assert env.toc_fignumbers["notebooks/03_x"] == {"exercise": {"ex-03-a": (3, 1), "ex-03-b": (3, 2)},
                                                    "figure": {"f": (3, 1)}}
    assert env.toc_fignumbers["book/index"] == {"exercise": {"ex-99": (1,)}}  # not a chapter: untouched


def page_soup(site_dir, chapter):
    from bs4 import BeautifulSoup

    page = site_dir / chapter.path.replace(".ipynb", ".html")
    assert page.is_file(), f"{page} was not built"
    return BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS, ids=[c.stem for c in CHAPTERS])
def test_site_titles_use_the_release_numbers(chapter, site_dir):
    soup = page_soup(site_dir, chapter)
    shown = []
    for box in soup.select("div.exercise"):
        label = next((i for i in box.get("id", "").split() if i.startswith("ex-")), None) or box.get("id")
        title = box.select_one(".admonition-title").get_text(" ", strip=True)
        shown.append((label, re.match(r"Exercise (\d+\.\d+)", title).group(1) if title.startswith("Exercise ") else title))
    assert shown == [(ex.label, ex.number) for ex in chapter.exercises]
    for ex in chapter.exercises:
        assert exercise_name(ex.label) == f"Exercise {ex.number}"  # the banner's name


@pytest.mark.slow
def test_site_references_to_exercises_say_the_release_number(site_dir):
    """Every link to an exercise (from ``{ref}``) reads "Exercise N.M" with the target's number."""
    from bs4 import BeautifulSoup

    refs = 0
    for page in sorted(site_dir.rglob("*.html")):
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for link in soup.select("article a.reference.internal[href*='#ex-']"):
            label = link["href"].rsplit("#", 1)[1]
            if label not in NUMBERS:
                continue
            text = link.get_text(" ", strip=True)
            expected = f"Exercise {NUMBERS[label]}"
            if link.select_one(".std-numref"):  # a {ref} in the prose: the number alone
                refs += 1
                assert text == expected, f"{page.name}: a reference to {label} reads {text!r}"
            else:  # a solution's title links back to its exercise: "Exercise 3.2 (Title)"
                assert text == expected or text.startswith(expected + " ("), f"{page.name}: {label}: {text!r}"
    assert refs > 0, "no {ref} to an exercise on any page: the test would check nothing"


# The info line of each exercise (attention_book.instructor.exercise_info), styled by the same
# extension; tests/test_exercise_info.py checks the notebooks, the release and the table.
@pytest.mark.slow
def test_the_site_shows_every_info_line(site_dir):
    from bs4 import BeautifulSoup

    from attention_book.instructor.exercise_info import course_infos

    infos = course_infos(COURSE)
    for chapter in COURSE.chapters:
        if not chapter.exercises:
            continue
        page = site_dir / chapter.path.replace(".ipynb", ".html")
        soup = BeautifulSoup(page.read_text(encoding="utf-8"), "html.parser")
        for ex in chapter.exercises:
            box = soup.find(id=ex.label) or soup.select_one(f'div.exercise[id~="{ex.label}"]')
            assert box is not None, ex.label
            line = box.select_one("p.exercise-info")
            assert line is not None, f"{ex.label}: no styled info line on the site"
            stars = line.select_one(".exercise-difficulty")
            assert stars.get_text() == infos[ex.label].stars
            assert f"{infos[ex.label].minutes} min" in line.get_text()
