"""Reading a submissions folder: which files are graded, their names, records and chapters.

* Only regular ``*.ipynb`` files are graded. Dot-files, other files, folders, links and files over
  ``MAX_BYTES`` are listed as skipped, with the reason.
* A student is the exact file name (``a b.ipynb`` and ``a_b.ipynb`` are two students, ``alice
  .ipynb`` is not ``alice``: nothing is stripped); every file name a file system holds is graded.
* The names the grader writes (``records/``, ``executed/``, ``feedback/``) are derived from the
  file name by :func:`file_name_part`: readable (letters of any script stay as they are), one-to-one
  (only ``%``, path separators, control characters and what Windows refuses are ``%XX``-escaped:
  ``urllib.parse.unquote`` gives the name back) and within file-system limits (a name whose
  escaped form passes :data:`NAME_BYTES` bytes keeps a readable head and a digest of the whole
  name, and its record holds the exact name); of two names whose records would collide on a
  case-insensitive disk, the second is listed as skipped with the reason.
* Names are shown escaped everywhere (:func:`display_name`: CSV, Markdown, terminal): a byte that
  is not UTF-8 becomes ``\\xNN``, a control character (CR, LF, ESC, ...) ``\\xNN`` or
  ``\\uNNNN``, a backslash two backslashes; so a name cannot add a row to ``grades.csv``, move
  the terminal's cursor or abort the run. One odd file never stops the others from being graded.
* The chapter of a submission is recognised from the release metadata or its exercise labels; a
  notebook of another chapter than the assignment's is flagged and scores 0.
"""

from __future__ import annotations

import hashlib
import os
import stat
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

from .course import Course, natural_key
from .markup import LABEL_RE, Chapter, cell_text

__all__ = ["Submission", "list_submissions", "read_notebook", "recognise_chapter", "pick_chapter",
           "record_name", "file_name_part", "display_name", "redact_paths", "MAX_BYTES", "NAME_BYTES",
           "notebook_text", "matches_student"]

MAX_BYTES = 20 * 1024 * 1024
#: longest name the grader writes, in bytes (a file system allows 255; temporary files add a prefix)
NAME_BYTES = 200
#: characters escaped in the names the grader writes: the escape itself, path separators and
#: what Windows refuses (results are often copied there); control characters are escaped too
UNSAFE_CHARS = set('%/\\:*?"<>|')


@dataclass
class Submission:
    name: str  # the exact file name
    path: Path
    digest: str
    data: bytes = b""
    nb: Optional[object] = None
    error: str = ""

    @property
    def student(self) -> str:
        """The student as shown everywhere: the file name without ``.ipynb``, escaped."""
        return display_name(self.name[:-6] if self.name.endswith(".ipynb") else self.name)


def display_name(name: str) -> str:
    """``name`` with every character a terminal, a CSV reader or Markdown could act on escaped
    (one-to-one): undecodable bytes (``os.fsdecode``'s surrogates) -> ``\\xNN``, control and format
    characters and line or paragraph separators -> ``\\xNN``/``\\uNNNN``, ``\\`` -> ``\\\\``."""
    out = []
    for char in name:
        code = ord(char)
        if char == "\\":
            out.append("\\\\")
        elif 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8
            out.append(f"\\x{code - 0xDC00:02x}")
        elif unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
        else:
            out.append(char)
    return "".join(out)


def redact_paths(text: str, paths) -> str:
    """``text`` with the grader's own folders replaced by placeholders (``paths``: name -> path)."""
    for name, path in sorted(paths.items(), key=lambda item: -len(str(item[1]))):
        if path and str(path) not in ("/", "."):
            text = text.replace(str(path), f"<{name}>")
    return text


def _escaped(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in os.fsencode(char))


def file_name_part(name: str, suffix: str = "") -> str:
    """A file name the grader may write for ``name`` (+ ``suffix``): ``name`` with ``%``, path
    separators, control and format characters, undecodable bytes and Windows' reserved characters
    percent-escaped (so ``unquote`` gives ``name`` back), a leading dot and trailing dots and spaces
    too; at most :data:`NAME_BYTES` bytes with the suffix: a longer one keeps its head (whole
    characters) and ends in ``~`` and 16 hex digits of the name's SHA-256, so two names never share
    one (``alice.ipynb`` -> ``alice.ipynb``, ``erin@uni.example`` -> ``erin@uni.example``)."""
    out = []
    for index, char in enumerate(name):
        if (char in UNSAFE_CHARS or unicodedata.category(char) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
                or (index == 0 and char == ".")):
            out.append(_escaped(char))
        else:
            out.append(char)
    end = len(out)
    while end > 0 and out[end - 1] in (".", " "):  # Windows drops trailing dots and spaces
        end -= 1
        out[end] = _escaped(out[end])
    text = "".join(out)
    if len(text.encode("utf-8")) + len(suffix.encode("utf-8")) <= NAME_BYTES:
        return text + suffix
    digest = "~" + hashlib.sha256(os.fsencode(name)).hexdigest()[:16]
    room = NAME_BYTES - len(digest) - len(suffix.encode("utf-8"))
    head, used = [], 0
    for piece in out:  # whole characters (and whole escapes) only
        size = len(piece.encode("utf-8"))
        if used + size > room:
            break
        head.append(piece)
        used += size
    return "".join(head) + digest + suffix


def record_name(file_name: str) -> str:
    return file_name_part(file_name, ".json")


def list_submissions(folder: Path) -> Tuple[List[Submission], List[Tuple[str, str]]]:
    """The graded submissions and the skipped files ``(name, why)``, in natural order."""
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder} is not a folder: pass the folder holding the submissions")
    subs, skipped = [], []
    for entry in sorted(os.scandir(folder), key=lambda e: natural_key(e.name)):
        name = entry.name
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError as err:
            skipped.append((name, f"could not be read ({err.strerror})"))
            continue
        if stat.S_ISLNK(info.st_mode):
            skipped.append((name, "a link, not a file (links are never followed)"))
        elif stat.S_ISDIR(info.st_mode):
            skipped.append((name, "a folder"))
        elif not stat.S_ISREG(info.st_mode):
            skipped.append((name, "not a regular file"))
        elif name.startswith("."):
            skipped.append((name, "a hidden file (name starts with a dot)"))
        elif not name.endswith(".ipynb"):
            skipped.append((name, "not a notebook (.ipynb)"))
        elif info.st_size > MAX_BYTES:
            skipped.append((name, f"larger than {MAX_BYTES // 2**20} MB"))
        else:
            try:
                subs.append(_read(folder / name, name))
            except OSError as err:
                skipped.append((name, f"could not be read ({err.strerror})"))
    seen = {}
    kept = []
    for sub in subs:
        key = record_name(sub.name).lower()
        if key in seen:
            skipped.append((sub.name, f"differs from {display_name(seen[key])} only in upper/lower case (their "
                                      "records would collide on some disks): rename one and grade again"))
            continue
        seen[key] = sub.name
        kept.append(sub)
    return kept, skipped


def _read(path: Path, name: str) -> Submission:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_BYTES + 1)
    return Submission(name, path, hashlib.sha256(data).hexdigest(), data)


def notebook_text(data: bytes) -> str:
    """A notebook file's text: UTF-8, with or without a byte-order mark (Windows editors add one)."""
    return data.decode("utf-8-sig")


def read_notebook(sub: Submission) -> None:
    import nbformat

    try:
        nb = nbformat.reads(notebook_text(sub.data), as_version=4)
        if not isinstance(nb.get("cells"), list):
            raise ValueError("no list of cells")
        for cell in nb.cells:
            if not isinstance(cell, dict) or "cell_type" not in cell:
                raise ValueError("a cell without cell_type")
            cell.setdefault("metadata", {})
            cell["source"] = cell_text(cell)
        sub.nb = nb
    except UnicodeDecodeError:
        sub.error = "not a notebook: the file is not UTF-8 text"
    except Exception as err:  # JSON errors, nbformat errors, ...
        sub.error = f"not a notebook: {type(err).__name__}: {str(err)[:200]}"


def recognise_chapter(nb, course: Course) -> Optional[Chapter]:
    meta = (nb.get("metadata", {}).get("attention_book") or {})
    meta_source = meta.get("source") if isinstance(meta, dict) else None
    for chapter in course.chapters:
        if meta_source == chapter.path:
            return chapter
    text = "\n".join(cell_text(c) for c in nb.get("cells", []))
    found = set(LABEL_RE.findall(text))
    best, best_hits = None, 0
    for chapter in course.chapters:
        hits = len(found & {ex.label for ex in chapter.exercises})
        if hits > best_hits:
            best, best_hits = chapter, hits
    return best


def matches_student(sub: Submission, wanted: str) -> bool:
    """Whether ``--student wanted`` names ``sub``: its exact file name, with or without ``.ipynb``,
    or the name as the grader shows it (escaped, e.g. copied from grades.csv)."""
    stem = sub.name[:-6] if sub.name.endswith(".ipynb") else sub.name
    return wanted in (sub.name, stem, sub.student, display_name(sub.name))


def pick_chapter(course: Course, wanted: str) -> Chapter:
    for chapter in course.chapters:
        if wanted in (chapter.path, chapter.stem) or chapter.stem.startswith(wanted) or (
            chapter.number is not None and wanted.isdigit() and int(wanted) == chapter.number
        ):
            return chapter
    names = ", ".join(c.stem for c in course.chapters)
    raise ValueError(f"--chapter {wanted!r} matches no chapter; choose one of: {names}")
