"""grades.csv and summary.md from the records, with every name and message escaped, and the
helpers every output of the grader shares (CSV cells, Markdown cells, file names, executed copies).

* **CSV cells** (:func:`csv_cell`, OWASP's rule against formula injection): a cell that starts
  with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return (also after leading spaces, or as
  their full-width forms) gets a leading apostrophe, which spreadsheets show and never run; so
  does a cell that already starts with an apostrophe, so that :func:`csv_value` (what the
  grader's own readers apply) gives back exactly the text written, whatever a student is called.
  Numbers the grader writes (``2``, ``0.67``) stay numbers. Control characters are escaped
  (:func:`printable`): no cell can end a row.
* **Markdown cells** (:func:`md_cell`): ``|``, backticks, brackets, ``<`` and the other
  characters that start Markdown syntax are escaped, and so are the dots, ``@`` and ``://`` a
  renderer's autolinker would turn into a link: a name or message shows as text and nothing else.
* **File names** are not made here: every name the grader writes for a student comes from
  :func:`.submissions.file_name_part` (readable, reversible, within file-system limits).
* **Executed copies** (:func:`executed_notebook`): student outputs kept as text and images only.

Every file is written atomically with mode 0644 (readable by the instructor's group; the
temporary file ``mkstemp`` makes is 0600), as UTF-8 in which a lone surrogate a notebook smuggled
in (``"\\ud800"`` in its JSON) becomes U+FFFD instead of stopping the run. :func:`plain_title`
turns a chapter title with math ("Softmax and the $1/\\sqrt{d_k}$ scale", "1/√d_k") into plain
text ("1/√dₖ").
"""

from __future__ import annotations

import csv
import io
import os
import re
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

__all__ = ["CSV_COLUMNS", "csv_cell", "csv_value", "md_cell", "md_name", "shown_name", "printable", "scrub",
           "atomic_write", "write_if_changed", "write_outputs", "read_grades", "plain_title", "plural",
           "executed_notebook", "inert_outputs", "KEPT_MIME_TYPES"]

CSV_COLUMNS = ["student", "exercise", "number", "points", "max", "message", "flags"]

#: what a spreadsheet reads as the start of a formula (OWASP, "CSV injection"), and their
#: full-width forms (some spreadsheet locales take those for the ASCII ones)
FORMULA_START = "=+-@\t\r\uff1d\uff0b\uff0d\uff20"
_GRADER_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")  # how the grader writes points: 2, 0.67
_SURROGATE = re.compile("[\ud800-\udfff]")
_ESCAPED = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def scrub(text: str) -> str:
    """``text`` with every lone surrogate (a JSON ``"\\ud800"``, bytes that were not UTF-8)
    replaced by U+FFFD: such a string cannot be written as UTF-8 and used to stop the run."""
    return _SURROGATE.sub("\ufffd", text)


def printable(text: str) -> str:
    """``text`` with control and format characters (CR, LF, ESC, bidi overrides, ...), line and
    paragraph separators and lone surrogates escaped as ``\\xNN``/``\\uNNNN``: no cell can end a CSV
    row, a Markdown table row or move a terminal's cursor. Letters of every script and every kind
    of space (a Japanese name's U+3000) stay as they are."""
    import unicodedata

    if text.isprintable():
        return text
    return "".join(ch if unicodedata.category(ch) not in _ESCAPED
                   else (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}" if ord(ch) < 0x10000
                         else f"\\U{ord(ch):08x}") for ch in text)


def _needs_apostrophe(text: str) -> bool:
    first = text.lstrip()[:1]  # also after spaces of any kind
    return text.startswith("'") or (first != "" and first in FORMULA_START and not _GRADER_NUMBER.fullmatch(text))


def csv_cell(value) -> str:
    """One CSV cell, safe to open in a spreadsheet: see the module's docstring. ``csv_value``
    reads it back exactly."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    text = printable(str(value))
    return "'" + text if _needs_apostrophe(text) else text


def csv_value(cell: str) -> str:
    """The text :func:`csv_cell` wrote: one leading apostrophe removed where it added one."""
    return cell[1:] if cell.startswith("'") and _needs_apostrophe(cell[1:]) else cell


def md_cell(value, limit: int = 300) -> str:
    """``value`` as one line of Markdown text that renders as exactly that text: no heading,
    list, table cell, emphasis, link, image, autolink or HTML can come out of it."""
    return _md_escape(printable(" ".join(scrub(str(value)).split()))[:limit])


def shown_name(name: str) -> str:
    """A student's name as pages show it: escaped like :func:`printable`, and a leading, trailing
    or repeated space as ``␣`` (``alice `` and ``alice`` are two students; HTML would hide it)."""
    return re.sub(r"^ +| +$| {2,}", lambda m: "\u2423" * len(m.group(0)), printable(scrub(name)))


def md_name(name: str) -> str:
    """:func:`shown_name` as Markdown text (escaped as :func:`md_cell` escapes)."""
    return _md_escape(shown_name(name))


#: a dot before a top-level domain that linkify-it (markdown-it, VS Code's preview) links without
#: a scheme (every two-letter one and its default list), the dot after "www", "@" and "://"; the
#: dots of "notes.txt" or "3.1" stay as they are
_LINKABLE = re.compile(r"(?<=www)\.|\.(?=(?:[a-z]{2}|biz|com|edu|gov|net|org|pro|web|xxx|aero|asia|coop|info|"
                       r"museum|name|shop|рф|xn--[\w-]+)(?![\w-]))|@|:(?=/)", re.IGNORECASE)


def _md_escape(text: str) -> str:
    text = re.sub(r"[\\`|\[\]<>*_#~!&$]", lambda m: "\\" + m.group(0), text)
    # what an autolinker (GFM, linkify) would make a link of: www.x, x@y.org, https://..., x.com
    text = _LINKABLE.sub(lambda m: "\\" + m.group(0), text)
    # a list marker where the text starts a line ("- x", "1. x")
    return re.sub(r"^(?:[-+](?=\s|$)|\d+(?=[.)](?:\s|$)))", lambda m: "\\" + m.group(0)
                  if not m.group(0)[0].isdigit() else m.group(0) + "\\", text)


# ------------------------------------------------------------------------------------------------
# Executed copies
# ------------------------------------------------------------------------------------------------

#: what an executed copy keeps of a student's rich outputs: text and raster images, which no
#: notebook viewer runs (HTML, JavaScript, SVG, Markdown, LaTeX and widgets could)
KEPT_MIME_TYPES = ("text/plain", "image/png", "image/jpeg")
_BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")
REMOVED_NOTE = ("[autograder: {types} removed from this copy: outputs of the student's code are kept as "
                "text and images only, so that opening this notebook cannot run the student's script]\n")


def inert_outputs(outputs: Sequence[dict]) -> List[dict]:
    """``outputs`` (one cell's) with every rich output reduced to text and raster images, and a
    note naming what was removed: opening the copy in Jupyter, VS Code, a browser (nbconvert,
    nbviewer) runs nothing of the student's, whether or not that viewer trusts the notebook."""
    kept: List[dict] = []
    removed: List[str] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            kept.append({"output_type": "stream", "name": "stderr" if output.get("name") == "stderr" else "stdout",
                         "text": _joined(output.get("text", ""))})
        elif kind == "error":
            kept.append({"output_type": "error", "ename": _joined(output.get("ename", "")),
                         "evalue": _joined(output.get("evalue", "")),
                         "traceback": [_joined(line) for line in output.get("traceback") or [] if
                                       isinstance(line, (str, list))]})
        elif kind in ("display_data", "execute_result"):
            data = output.get("data") if isinstance(output.get("data"), dict) else {}
            safe = {}
            for mime, value in data.items():
                text = _joined(value) if isinstance(value, (str, list)) else None
                if mime in KEPT_MIME_TYPES and text is not None and (
                        mime == "text/plain" or _BASE64.fullmatch(text)):
                    safe[mime] = text
                else:
                    removed.append(str(mime)[:80])
            if not safe:
                continue
            item = {"output_type": kind, "data": safe, "metadata": {}}
            if kind == "execute_result":
                count = output.get("execution_count")
                item["execution_count"] = count if isinstance(count, int) and not isinstance(count, bool) else None
            kept.append(item)
        elif kind is not None:
            removed.append(f"an output of type {str(kind)[:40]}")
    if removed:
        types = ", ".join(printable(t) for t in dict.fromkeys(removed))
        kept.append({"output_type": "stream", "name": "stderr", "text": REMOVED_NOTE.format(types=types)})
    return kept


def _joined(value) -> str:
    return scrub("".join(str(v) for v in value) if isinstance(value, list) else str(value))


def executed_notebook(cells: Sequence[dict]) -> str:
    """The executed copy of a graded notebook (``executed/``): its code cells with
    :func:`inert_outputs`, unsigned (Jupyter treats it as untrusted too)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    for cell in cells:
        code = nbformat.v4.new_code_cell(_joined(cell.get("source", "")))
        meta = cell.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("attention_book_grader"), dict):
            code.metadata["attention_book_grader"] = meta["attention_book_grader"]
        count = cell.get("execution_count")
        code.execution_count = count if isinstance(count, int) and not isinstance(count, bool) else None
        code.outputs = [nbformat.from_dict(o) for o in inert_outputs(cell.get("outputs") or [])]
        nb.cells.append(code)
    return nbformat.writes(nb)


SUBSCRIPTS = dict(zip("0123456789aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))
_SUBSCRIPT = re.compile(r"(?<![A-Za-z0-9_])([A-Za-z])_\{?([0-9a-z])\}?(?![A-Za-z0-9_])")


def plain_title(title: str) -> str:
    """A chapter title as plain text: ``$1/\\sqrt{d_k}$`` and ``d_k`` become ``1/√dₖ``."""
    text = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"√\1", title)
    text = text.replace("\\sqrt", "√").replace("$", "")
    text = _SUBSCRIPT.sub(lambda m: m.group(1) + SUBSCRIPTS.get(m.group(2), "_" + m.group(2)), text)
    return " ".join(text.replace("\\", "").split())


def plural(n: int, noun: str, nouns: str = "") -> str:
    """``"1 submission"``, ``"3 submissions"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {nouns or noun + 's'}"


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # a short temporary name: the final one may take all of NAME_BYTES (eCryptfs allows 143 bytes)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:24]}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(scrub(text))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600: the instructor's group must read the results
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_if_changed(path: Path, text: str) -> bool:
    """:func:`atomic_write` unless ``path`` already holds ``text`` (its time stamp then stays)."""
    try:
        if path.is_file() and not path.is_symlink() and path.read_text(encoding="utf-8") == scrub(text):
            return False
    except (OSError, UnicodeDecodeError):
        pass
    atomic_write(path, text)
    return True


def read_grades(csv_path: Path) -> Dict[Tuple[str, str], Tuple[float, float, str]]:
    """``grades.csv`` as ``{(student, exercise label): (points, max, message)}``."""
    with open(csv_path, newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows or rows[0] != CSV_COLUMNS:
        raise ValueError(f"{csv_path} does not start with the header {','.join(CSV_COLUMNS)}")
    out = {}
    for row in rows[1:]:
        out[(csv_value(row[0]), csv_value(row[1]))] = (float(row[3]), float(row[4]), csv_value(row[5]))
    return out


def write_outputs(out: Path, title: str, rows: Sequence[List[str]], students: Sequence[dict],
                  skipped: Sequence[Tuple[str, str]], points_file: str,
                  not_graded: Sequence[str] = ()) -> Tuple[Path, Path]:
    """``rows``: [student, label, number, points, max, message, flags] (raw, unescaped);
    ``students``: [{"student", "points", "max", "note", "flags"}]; ``skipped``: [(name, why)];
    ``not_graded``: files without an up-to-date record that this run did not grade (--student)."""
    table = io.StringIO()
    writer = csv.writer(table, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([csv_cell(v) for v in row])
    csv_path, summary_path = out / "grades.csv", out / "summary.md"
    atomic_write(csv_path, table.getvalue())
    lines = [f"# Grades: {md_cell(title)}", "",
             f"{plural(len(students), 'submission')} graded. Points per exercise: `{points_file}`; details "
             "per exercise in `grades.csv`, per student in `feedback/`; `gradebook.csv` has one row per "
             "student.", "", "| student | points | max | % | note | flags |", "|---|---:|---:|---:|---|---|"]
    for entry in students:
        top = entry["max"]
        percent = f"{100 * entry['points'] / top:.0f}" if top else "-"
        lines.append(f"| {md_name(entry['student'])} | {entry['points']:g} | {top:g} | {percent} | "
                     f"{md_cell(entry['note'], 160)} | {md_cell('; '.join(entry['flags']), 400)} |")
    per_exercise: Dict[Tuple[str, str], List[Tuple[float, float, str]]] = defaultdict(list)
    for row in rows:
        if row[1] != "-":
            per_exercise[(row[1], row[2])].append((float(row[3]), float(row[4]), row[5]))
    lines += ["", "| exercise | mean points | max | full marks | not implemented |", "|---|---:|---:|---:|---:|"]
    for (label, number), entries in per_exercise.items():
        mean = sum(e[0] for e in entries) / len(entries)
        full = sum(1 for e in entries if e[0] >= e[1] > 0)
        missing = sum(1 for e in entries if e[2].startswith("not implemented"))
        lines.append(f"| {md_cell(number)} ({md_cell(label)}) | {mean:.2f} | {entries[0][1]:g} | "
                     f"{full}/{len(entries)} | {missing} |")
    flagged = [e for e in students if e["flags"]]
    if flagged:
        lines += ["", "## Flagged submissions", ""]
        for entry in flagged:
            lines.append(f"- {md_name(entry['student'])}: {md_cell('; '.join(entry['flags']), 800)}")
    if skipped:
        lines += ["", "## Files not graded", ""]
        lines += [f"- {md_name(name)}: {md_cell(why)}" for name, why in skipped]
    if not_graded:
        lines += ["", "## Not graded in this run", "",
                  f"{plural(len(not_graded), 'file has', 'files have')} no up-to-date record and this run "
                  "graded one student only (--student): grade the folder without --student.", ""]
        lines += [f"- {md_name(name)}" for name in not_graded]
    atomic_write(summary_path, "\n".join(lines) + "\n")
    return csv_path, summary_path
