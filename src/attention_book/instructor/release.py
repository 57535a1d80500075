"""``attention-book release``: the student edition of every chapter notebook.

For each notebook in ``_toc.yml``:

* solution code (between ``# BEGIN SOLUTION`` and ``# END SOLUTION``) becomes
  ``raise NotImplementedError("<label>: replace this line with your code")`` at the same indent;
* solution dropdowns (``{solution}``, ``{solution-start}`` ... ``{solution-end}``) and cells tagged
  ``book-only`` are dropped; outputs and execution counts are cleared;
* book-only MyST becomes plain Markdown (exercises read "**Exercise 1.2 (ex-01-positions): Title**"
  followed by a blockquote; admonitions become quotes; ``{ref}`` roles become text);
* the self-check cells stay, and a short "student edition" note follows the setup cell.

The release folder gets a ``README.md`` (notebooks, exercises, Colab links) and a zip of it all.
The output is deterministic: the same sources give the same bytes.
"""

from __future__ import annotations

import copy
import io
import re
import shutil
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Dict, List, Optional

from .course import Course, dumps_notebook
from .markup import Chapter, ConvertContext, cell_tags, cell_text, convert_markdown, strip_solution

__all__ = [
    "build_release",
    "release_notebook",
    "ReleaseReport",
    "ZIP_NAME",
    "MARKER",
    "STUDENT_DIR",
    "student_notebooks",
    "numbering_table",
    "generated_files",
    "GENERATED_KEY",
    "stamp_generated",
    "edited_after_generation",
]

ZIP_NAME = "attention-book-student-release.zip"
MARKER = ".attention-book-release"
ZIP_DATE = (2020, 1, 1, 0, 0, 0)
#: where the student notebooks behind the site's launch and download buttons live (book root)
STUDENT_DIR = "student"
NUMBERING_MODULE = "src/attention_book/checks/numbering.py"
TABLE_BEGIN = "# BEGIN GENERATED TABLE (tools/make_student_notebooks.py)"
TABLE_END = "# END GENERATED TABLE"

NOTICE = (
    "> **Student edition.** The solutions are removed. In each exercise, replace the line "
    "`raise NotImplementedError(...)` with your code, run the cell, then run the self-check cell "
    "below it: it tells you what passed and gives a hint for what did not. Run the setup cell "
    "above first (in Colab it installs the course package)."
)


@dataclass
class ReleaseReport:
    out: Path
    notebooks: List[str] = field(default_factory=list)
    exercises: int = 0
    seconds: float = 0.0
    zip_path: Optional[Path] = None


def _set_source(cell, text: str) -> None:
    cell["source"] = text.splitlines(keepends=True)


#: the empty answer cell of a written exercise
ANSWER_STUB = "**Your answer:** (double-click to write here)"
#: what the student edition says instead of a sentence about the site's solution dropdowns
NO_SOLUTIONS = "This student edition has no solutions: write your own answer, then run its self-check."
_DROPDOWN = re.compile(r"\bdrop-?downs?\b", re.IGNORECASE)
_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,}).*?^[ ]{0,3}\1[ \t]*$", re.MULTILINE | re.DOTALL)
_SENTENCE = re.compile(r"[^.!?]*?[.!?](?=\s|$)|[^.!?]+$", re.DOTALL)


def _replace_sentences(text: str) -> str:
    out = []
    for paragraph in re.split(r"(\n[ \t]*\n)", text):  # a sentence never crosses a blank line
        if not _DROPDOWN.search(paragraph):
            out.append(paragraph)
            continue
        said = False
        pieces = []
        for match in _SENTENCE.finditer(paragraph):
            sentence = match.group(0)
            if _DROPDOWN.search(sentence):
                lead = sentence[: len(sentence) - len(sentence.lstrip())]
                sentence = "" if said else lead + NO_SOLUTIONS
                said = True
            pieces.append(sentence)
        out.append("".join(pieces))
    return "".join(out)


def student_text(markdown: str) -> str:
    """``markdown`` (already plain Markdown) with each sentence that promises a dropdown, such as
    "The solutions are hidden behind a dropdown: try first.", replaced by :data:`NO_SOLUTIONS`:
    the student edition has neither dropdowns nor solutions. Code blocks are left alone; a
    sentence may run over several lines of its paragraph."""
    out, position = [], 0
    for fence in _FENCE.finditer(markdown):
        out.append(_replace_sentences(markdown[position:fence.start()]))
        out.append(fence.group(0))
        position = fence.end()
    out.append(_replace_sentences(markdown[position:]))
    return "".join(out)


def release_notebook(nb, chapter: Chapter, ctx: ConvertContext, version: str = ""):
    """Return the student edition of a (source) notebook."""
    nb = copy.deepcopy(nb)
    cells = []
    notice_added = False
    for index, cell in enumerate(nb["cells"]):
        role = chapter.roles.get(index)
        tags = cell_tags(cell)
        if role == "drop" or "book-only" in tags:
            continue
        new = {"cell_type": cell["cell_type"], "id": cell.get("id") or f"{chapter.stem[:2]}-{index:03d}",
               "metadata": {}, "source": []}
        keep_tags = [t for t in tags if t != "solution"]
        if keep_tags:
            new["metadata"]["tags"] = keep_tags
        label = chapter.cell_exercise.get(index)
        if role in ("answer", "check") and label:
            new["metadata"]["attention_book"] = {"exercise": label, "role": role}
        elif role == "exercise":
            exercise = next(ex for ex in chapter.exercises if ex.cell == index)
            new["metadata"]["attention_book"] = {"exercise": exercise.label, "role": "exercise"}
        text = cell_text(cell)
        if cell["cell_type"] == "markdown":
            _set_source(new, student_text(convert_markdown(text, ctx)))
        elif cell["cell_type"] == "code":
            if role == "answer":
                text = strip_solution(text, label, f"{chapter.path}, cell {index + 1}")
            _set_source(new, text)
            new["outputs"] = []
            new["execution_count"] = None
        else:
            _set_source(new, text)
        cells.append(new)
        if role == "exercise" and exercise.kind == "written":
            cells.append({"cell_type": "markdown", "id": f"{new['id']}-answer",
                          "metadata": {"attention_book": {"exercise": exercise.label, "role": "answer"}},
                          "source": [ANSWER_STUB]})
        if cell["cell_type"] == "code" and not notice_added:
            cells.append({"cell_type": "markdown", "id": f"{chapter.stem[:2]}-release",
                          "metadata": {}, "source": NOTICE.splitlines(keepends=True)})
            notice_added = True
    meta = {key: nb["metadata"][key] for key in ("kernelspec", "language_info") if key in nb["metadata"]}
    meta["attention_book"] = {
        "edition": "student",
        "source": chapter.path,
        "exercises": [ex.label for ex in chapter.exercises],
    }
    if version:
        meta["attention_book"]["version"] = version
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def _readme(course: Course, chapters: List[Chapter], branch: str) -> str:
    url = course.repository_url()
    colab = ""
    if url.startswith("https://github.com/"):
        colab = "https://colab.research.google.com/github/" + url[len("https://github.com/"):]
    lines = [
        "# Self-attention from scratch: student notebooks",
        "",
        "These are the chapters of the course with the exercise solutions removed.",
        "",
        "**How to work on a chapter**",
        "",
        "1. Open the notebook in Colab (links below) or in Jupyter (`pip install jupyterlab`, then "
        "`jupyter lab`).",
        "2. Run the first cell: it installs the course package when it is missing and picks the device.",
        "3. In each exercise, replace `raise NotImplementedError(...)` with your code and run the "
        "self-check cell below it. It tells you what passed and gives hints for what did not.",
        "4. Save the notebook (in Colab: File > Download > Download .ipynb) and hand it in "
        "as your instructor asks.",
        "",
        "| chapter | notebook | exercises | open |",
        "|---|---|---|---|",
    ]
    for chapter in chapters:
        labels = ", ".join(f"{ex.number} `{ex.label}`" for ex in chapter.exercises) or "-"
        link = f"[Colab]({colab}/blob/{branch}/{chapter.path})" if colab else "-"
        lines.append(f"| {chapter.title or chapter.stem} | [{chapter.path}]({chapter.path}) | {labels} | {link} |")
    lines += [
        "",
        f"The Colab links work once this folder is published as the `{branch}` branch of "
        f"{url or 'the course repository'} (see the book's page *For instructors*).",
        "",
    ]
    return "\n".join(lines)


def _write_zip(folder: Path, files: List[str], target: Path) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for rel in sorted(files):
            info = zipfile.ZipInfo(f"attention-book-release/{rel}", date_time=ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, (folder / rel).read_bytes(), compresslevel=9)
    target.write_bytes(buffer.getvalue())


def _prepare_out(out: Path) -> None:
    if out.exists():
        if not out.is_dir():
            raise FileExistsError(f"{out} exists and is not a folder: choose another --out")
        if any(out.iterdir()) and not (out / MARKER).exists():
            raise FileExistsError(
                f"{out} is not empty and was not written by `attention-book release`: "
                "choose an empty or new folder for --out"
            )


def build_release(course: Course, out: Path, branch: str = "release") -> ReleaseReport:
    """Write the student release of ``course`` to ``out`` (replacing an earlier release there)."""
    import nbformat

    from .. import __version__

    started = time.perf_counter()
    out = Path(out).resolve()
    _prepare_out(out)
    ctx = course.context()
    report = ReleaseReport(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".release-", dir=out.parent))
    try:
        written: List[str] = []
        for chapter in course.chapters:
            nb = nbformat.read(str(course.root / chapter.path), as_version=4)
            ctx.images.clear()
            student = release_notebook(nb, chapter, ctx, __version__)
            target = staging / chapter.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(dumps_notebook(student), encoding="utf-8")
            written.append(chapter.path)
            report.notebooks.append(chapter.path)
            report.exercises += len(chapter.exercises)
            for image in sorted(set(ctx.images)):  # local figures the Markdown points at
                if "://" in image or image.startswith("data:"):
                    continue
                rel = PurePosixPath(chapter.path).parent / image
                source = (course.root / rel).resolve()
                if source.is_file() and course.root in source.parents:
                    rel_path = source.relative_to(course.root).as_posix()
                    (staging / rel_path).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, staging / rel_path)
                    written.append(rel_path)
        (staging / "README.md").write_text(_readme(course, course.chapters, branch), encoding="utf-8")
        written.append("README.md")
        _write_zip(staging, sorted(set(written)), staging / ZIP_NAME)
        (staging / MARKER).write_text("written by `attention-book release`; safe to delete\n")
        if out.exists():
            shutil.rmtree(out)
        staging.chmod(0o755)
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    report.zip_path = out / ZIP_NAME
    report.seconds = time.perf_counter() - started
    return report


# --------------------------------------------------------------------------------------------------
# Files generated into the repository (tools/make_student_notebooks.py writes them, a test checks)
# --------------------------------------------------------------------------------------------------


#: key of a generated student notebook's ``metadata.attention_book``: the SHA-256 of the notebook as
#: generated (without this key), so that a copy someone edited afterwards is recognised and kept
GENERATED_KEY = "generated_sha256"


def _digest(nb: dict) -> str:
    import hashlib

    meta = dict(nb.get("metadata", {}).get("attention_book") or {})
    meta.pop(GENERATED_KEY, None)
    unstamped = dict(nb, metadata=dict(nb.get("metadata", {}), attention_book=meta))
    return hashlib.sha256(dumps_notebook(unstamped).encode("utf-8")).hexdigest()


def stamp_generated(nb: dict) -> str:
    """``nb`` in the storage format, stamped with the digest of its own content (GENERATED_KEY)."""
    nb = copy.deepcopy(nb)
    nb["metadata"].setdefault("attention_book", {})[GENERATED_KEY] = _digest(nb)
    return dumps_notebook(nb)


def edited_after_generation(text: str) -> Optional[str]:
    """Why the student notebook ``text`` holds someone's work (None for an untouched generated file).

    A generated notebook carries the digest of its content: any change made afterwards (answers,
    outputs, notes, even a save by Jupyter) makes it differ. A notebook without the digest (written
    before it existed) counts as edited when it holds outputs or an answer cell that is not the
    generated stub. Unreadable JSON counts as edited: it is never the generator's output.
    """
    import json

    try:
        nb = json.loads(text)
        stamp = (nb.get("metadata", {}).get("attention_book") or {}).get(GENERATED_KEY)
    except (ValueError, AttributeError):
        return "it is not the notebook JSON the generator writes"
    if stamp is not None:
        return None if stamp == _digest(nb) else "it changed after it was generated"
    for cell in nb.get("cells", []):
        if cell.get("outputs") or cell.get("execution_count") is not None:
            return "it holds outputs"
        if (cell.get("metadata", {}).get("attention_book") or {}).get("role") == "answer":
            text = cell_text(cell)
            stub = "raise NotImplementedError(" in text if cell.get("cell_type") == "code" else (
                text.strip() == ANSWER_STUB)
            if not stub:
                return "an answer cell holds more than the generated stub"
    return None


def student_notebooks(course: Course) -> Dict[str, str]:
    """``{"student/notebooks/03_....ipynb": text}``: the student edition of every chapter.

    The same notebooks as :func:`build_release` writes, without the package version in their
    metadata (so a version bump does not make them stale), each stamped with the digest of its
    content (:func:`stamp_generated`: tools/make_student_notebooks.py never overwrites a copy that
    changed since); the site's Colab, Binder and download buttons open them
    (book/_ext/student_links.py).
    """
    import nbformat

    ctx = course.context()
    files: Dict[str, str] = {}
    for chapter in course.chapters:
        if not chapter.exercises:
            continue
        nb = nbformat.read(str(course.root / chapter.path), as_version=4)
        ctx.images.clear()
        student = release_notebook(nb, chapter, ctx)
        files[f"{STUDENT_DIR}/{chapter.path}"] = stamp_generated(student)
    return files


def numbering_table(course: Course, current: str) -> str:
    """``current`` (the text of checks/numbering.py) with its table of exercise numbers renewed."""
    begin, end = current.find(TABLE_BEGIN), current.find(TABLE_END)
    if begin < 0 or end < begin:
        raise ValueError(
            f"{NUMBERING_MODULE} lacks the lines {TABLE_BEGIN!r} ... {TABLE_END!r} around its "
            "table: restore them (see git) before regenerating"
        )
    rows = [f'    "{ex.label}": "{ex.number}",' for ex in course.exercises()]
    table = "NUMBERS: Dict[str, str] = {\n" + "\n".join(rows) + "\n}\n"
    return current[: begin + len(TABLE_BEGIN)] + "\n" + table + current[end:]


STUDENT_README = """# Student notebooks (generated: do not edit)

The chapters of the course with the exercise solutions removed: each answer cell holds
`raise NotImplementedError(...)` for you to replace, the self-check cells stay, and each written
exercise has an empty answer cell. The book's Colab, Binder and download buttons open these files.

They are generated from `notebooks/` by `python tools/make_student_notebooks.py` (the same code as
`attention-book release`); edit the chapter notebooks, never these copies.
"""


def generated_files(course: Course) -> Dict[str, str]:
    """Every file tools/make_student_notebooks.py writes, relative to the book root -> text."""
    files = student_notebooks(course)
    files[f"{STUDENT_DIR}/README.md"] = STUDENT_README
    numbering = course.root / NUMBERING_MODULE
    if numbering.is_file():
        files[NUMBERING_MODULE] = numbering_table(course, numbering.read_text(encoding="utf-8"))
    return files
