"""grades.csv and summary.md from the records, with every name and message escaped.

CSV cells that a spreadsheet would read as a formula (starting with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return) get a leading ``'``; Markdown cells have ``|``, backticks, brackets,
``<`` and line breaks escaped, so a student's file name cannot add rows or links to the summary.
Every file is written atomically with mode 0644 (readable by the instructor's group; the
temporary file ``mkstemp`` makes is 0600). :func:`plain_title` turns a chapter title with math
("Softmax and the $1/\\sqrt{d_k}$ scale", "1/√d_k") into plain text ("1/√dₖ").
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

__all__ = ["CSV_COLUMNS", "csv_cell", "md_cell", "printable", "atomic_write", "write_if_changed", "write_outputs",
           "read_grades", "plain_title", "plural"]

CSV_COLUMNS = ["student", "exercise", "number", "points", "max", "message", "flags"]


def printable(text: str) -> str:
    """``text`` with control and format characters (CR, LF, ESC, ...) escaped as ``\\xNN``/``\\uNNNN``:
    no cell can end a CSV row, a Markdown table row or move a terminal's cursor."""
    import unicodedata

    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() and unicodedata.category(ch) not in ("Cf", "Zl", "Zp")
                   else (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}" if ord(ch) < 0x10000
                         else f"\\U{ord(ch):08x}") for ch in text)


def csv_cell(value) -> str:
    text = printable(str(value))
    if text and text[0] in "=+-@\t\r" and not _is_number(text):
        return "'" + text
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def md_cell(value, limit: int = 300) -> str:
    text = printable(" ".join(str(value).split()))[:limit]
    for char in "\\`|[]<>*_#":
        text = text.replace(char, "\\" + char)
    return text


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
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
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
        if path.is_file() and not path.is_symlink() and path.read_text(encoding="utf-8") == text:
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
        student = row[0][1:] if row[0].startswith("'") and row[0][1:2] in ("=", "+", "-", "@", "\t", "\r") else row[0]
        out[(student, row[1])] = (float(row[3]), float(row[4]), row[5])
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
        lines.append(f"| {md_cell(entry['student'])} | {entry['points']:g} | {top:g} | {percent} | "
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
            lines.append(f"- {md_cell(entry['student'])}: {md_cell('; '.join(entry['flags']), 800)}")
    if skipped:
        lines += ["", "## Files not graded", ""]
        lines += [f"- {md_cell(name)}: {md_cell(why)}" for name, why in skipped]
    if not_graded:
        lines += ["", "## Not graded in this run", "",
                  f"{plural(len(not_graded), 'file has', 'files have')} no up-to-date record and this run "
                  "graded one student only (--student): grade the folder without --student.", ""]
        lines += [f"- {md_cell(name)}" for name in not_graded]
    atomic_write(summary_path, "\n".join(lines) + "\n")
    return csv_path, summary_path
