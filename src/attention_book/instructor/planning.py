"""What runs for a submission: the release's own cells, the student's answers, and the flags.

The grader never runs the submission as handed in. It rebuilds the notebook from the chapter's
student release (what ``attention_book.instructor.release`` generates: trusted) and takes from the
submission only

* the **answer cells** of each exercise (found by the release's cell metadata, the
  ``NotImplementedError`` marker, or the lines of the release's answer cell), and
* the **cells the student added** (kept where they were, e.g. a helper function);

every other code cell of the release (setup, demos, self-checks) runs as released: a changed or
deleted course cell is restored from the release and, when changed, flagged with its role
(``setup cell 1 changed``). Answer and added cells are read with :mod:`ast` for things a solution
does not need (importing the course package, assigning to ``torch.*`` or another module's
attributes, reading ``/proc``, dynamic imports, starting processes): those are flagged. An answer
scores 0 and is flagged, whatever its kernel reports, when it breaks its exercise's rules
(:mod:`attention_book.checks.rules`, read from the source: "without torch.softmax"), uses the
chapter's finished code (a function or class the chapter body defines before the exercise, or
the course package) or does not define what the exercise asks for ("write your own").

Every step is bounded before it starts (issue 19): at most ``MAX_CODE_CELLS`` code cells of at
most ``MAX_CELL_CHARS`` characters (``MAX_CODE_CHARS`` in all), and the pairing of edited course
cells compares at most ``MAX_PAIRINGS`` pairs by their sets of lines (linear in their length, at
most ``PAIR_LINES`` lines each; a character-level diff of two large cells can take hours). A
notebook over a cap is not graded (0 points, flagged).

The hidden tests of an exercise run right after its self-check cell (or its last answer cell).

The kernel runs each cell as written (IPython: magics and ``!`` commands included); what is read
for flags and rules is its Python (:func:`python_text`): a first line ``%%time``, ``%%capture``,
``%%timeit`` ... (magics whose body is Python) is left out, other line magics and ``!`` commands
become ``pass``, and a cell whose magic runs another language (``%%bash``) holds no Python.
"""

from __future__ import annotations

import ast
import difflib
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Set

from .markup import NOT_IMPLEMENTED, Chapter, cell_text

__all__ = ["Plan", "plan_submission", "plan_reference", "scan_code", "cell_hash", "PlanRefused", "rule_violations",
           "MAX_CODE_CELLS", "MAX_CELL_CHARS", "MAX_CODE_CHARS", "python_text", "PYTHON_CELL_MAGICS"]

MAX_CODE_CELLS = 600
MAX_CELL_CHARS = 200_000
MAX_CODE_CHARS = 2_000_000
MAX_PAIRINGS = 20_000  # (course cell, student cell) pairs compared when pairing edited course cells
PAIR_LINES = 500  # lines of each cell compared when pairing


class PlanRefused(ValueError):
    """A submission over one of the planning step's size caps."""


#: cell magics whose body IPython runs as Python in the notebook's namespace
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug", "memit", "snakeviz", "tracemalloc"}


def python_text(text: str) -> str:
    """The Python of a cell as IPython runs it (see the module's docstring); line numbers kept."""
    lines = text.replace("\r\n", "\n").split("\n")
    start = 0
    while start < len(lines) and not lines[start].strip():
        start += 1
    while start < len(lines) and lines[start].lstrip().startswith("%%"):
        magic = lines[start].lstrip()[2:].split(maxsplit=1)
        if not magic or magic[0] not in PYTHON_CELL_MAGICS:
            return ""  # %%bash, %%writefile, %%html ...: not Python
        lines[start] = ""
        start += 1
    for index in range(start, len(lines)):
        stripped = lines[index].lstrip()
        if stripped.startswith(("%", "!")) and not stripped.startswith("%%"):
            lines[index] = lines[index][: len(lines[index]) - len(stripped)] + "pass"
    return "\n".join(lines)


def _norm(line: str) -> str:
    return "".join(line.split())


def _lines(text: str) -> Counter:
    """The cell's non-empty lines, whitespace removed (a multiset), for pairing edited cells."""
    return Counter(_norm(line) for line in text.split("\n", PAIR_LINES)[:PAIR_LINES] if _norm(line))


def _similarity(a: Counter, b: Counter) -> float:
    """Shared lines / all lines (0..1): linear in the cells' length, whatever their content."""
    union = sum((a | b).values())
    return sum((a & b).values()) / union if union else 0.0


def cell_hash(text: str) -> str:
    """Hash of a cell's code, blind to whitespace-only differences and trailing blank lines."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").strip("\n").split("\n")]
    return hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()


@dataclass
class Plan:
    cells: List[dict]  # code cells to run, in order
    points: Dict[int, List[str]]  # index in cells -> labels whose hidden tests run after it
    sources: Dict[str, str]  # label -> the answer cells' text (student's or solution's)
    flags: List[str] = field(default_factory=list)  # tampering, for the whole submission
    answer_flags: Dict[str, List[str]] = field(default_factory=dict)  # label -> flags of its answer
    notes: Dict[str, str] = field(default_factory=dict)  # label -> remark (answer cell not found)
    package_import: Set[str] = field(default_factory=set)  # labels whose answer imports the package
    zero: Dict[str, str] = field(default_factory=dict)  # label -> why it scores 0 (rules, own work)


def _code_cell(text: str, role: str, label: str = "") -> dict:
    from nbformat.v4 import new_code_cell

    cell = new_code_cell(text)
    cell.metadata["attention_book_grader"] = {"role": role, "exercise": label}
    return cell


# ------------------------------------------------------------------------------------------------
# Reading answers: what a solution does not need
# ------------------------------------------------------------------------------------------------

MODULE_ROOTS = {"torch", "F", "nn", "np", "numpy", "math", "sys", "os", "builtins", "random", "functools",
                "attention_book", "matplotlib", "plt", "importlib", "inspect", "types", "gc"}
PROCESS_CALLS = {"os.system", "os.fork", "os.popen", "os.kill", "os.execv", "os.execve", "os.setsid",
                 "os.spawnv", "pty.spawn", "ctypes.CDLL"}
PROCESS_MODULES = {"subprocess", "multiprocessing", "ctypes", "socket", "pty", "signal", "threading"}


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):
        return _dotted(node.func) + "()"
    if isinstance(node, ast.Subscript):
        return _dotted(node.value) + "[]"
    return ""


def _parse(text: str) -> Optional[ast.Module]:
    """The cell's syntax tree, or None for code that does not parse (it will fail when it runs)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def scan_code(text: str, modules: Set[str]) -> List[str]:
    """Flags for code in an answer or added cell (``modules``: names bound by imports anywhere)."""
    tree = _parse(text)
    if tree is None:
        return []  # it will fail when it runs; not tampering
    roots = MODULE_ROOTS | modules
    flags: List[str] = []

    def flag(text: str) -> None:
        if text not in flags:
            flags.append(text)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                if top == "attention_book":
                    flag("imports the course package (attention_book): write your own")
                elif top in ("importlib",):
                    flag("imports modules dynamically (importlib)")
                elif top in PROCESS_MODULES:
                    flag(f"imports {top} (processes, native code or network: not needed here)")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                for item in ast.walk(target):
                    if isinstance(item, ast.Attribute):
                        dotted = _dotted(item)
                        if dotted.split(".")[0] in roots:
                            flag(f"assigns to {dotted} (changes a module for everyone)")
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in ("setattr", "delattr") and node.args:
                root = _dotted(node.args[0]).split(".")[0]
                if root in roots:
                    flag(f"{name}() on the module {root}")
            elif name in ("__import__", "importlib.import_module"):
                flag("imports modules dynamically (__import__)")
            elif name in PROCESS_CALLS or name.startswith("os.exec") or name.startswith("os.spawn"):
                flag(f"calls {name} (starts or signals processes)")
            elif name in ("eval", "exec", "compile"):
                flag(f"calls {name}() on text")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "/proc" in node.value:
            flag("reads /proc")
        elif isinstance(node, ast.Attribute) and _dotted(node) in ("sys.modules", "os.environ", "gc.get_objects",
                                                                     "sys._getframe", "builtins.__dict__"):
            flag(f"uses {_dotted(node)}")
    return flags


def imported_names(texts: List[str]) -> Set[str]:
    names: Set[str] = set()
    for tree in filter(None, map(_parse, texts)):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names |= {a.asname or a.name for a in node.names}
    return names


# ------------------------------------------------------------------------------------------------
# Finding the answer cells of a submission
# ------------------------------------------------------------------------------------------------


def _answer_label(cell, release_answers: Dict[str, List[str]], other_lines: Counter) -> Optional[str]:
    info = (cell.get("metadata") or {}).get("attention_book") or {}
    if isinstance(info, dict) and info.get("role") == "answer" and info.get("exercise") in release_answers:
        return info["exercise"]
    text = cell_text(cell)
    for label in release_answers:
        marker = NOT_IMPLEMENTED.format(label=label).split("(", 1)[1][:20]
        if marker in text:
            return label
    best, best_score = None, 0.0
    have = {_norm(line) for line in text.split("\n")}
    for label, released in release_answers.items():
        wanted = {_norm(line) for text in released for line in text.split("\n")
                  if _norm(line) and "NotImplementedError" not in line} - set(other_lines)
        score = len(wanted & have) / len(wanted) if wanted else 0.0
        if score > best_score:
            best, best_score = label, score
    return best if best_score >= 0.5 else None


def plan_submission(nb, release_nb, chapter: Chapter, labels: List[str]) -> Plan:
    """The cells to run for a submission, rebuilt on the release (see the module's docstring)."""
    release_cells = [c for c in release_nb["cells"] if c.get("cell_type") == "code"]
    roles = [((c.get("metadata") or {}).get("attention_book") or {}) for c in release_cells]
    release_answers: Dict[str, List[str]] = {}
    for cell, info in zip(release_cells, roles):
        if info.get("role") == "answer":
            release_answers.setdefault(info["exercise"], []).append(cell_text(cell))
    other_lines = Counter()
    for cell, info in zip(release_cells, roles):
        if info.get("role") != "answer":
            other_lines.update({_norm(l) for l in cell_text(cell).split("\n") if _norm(l)})
    sub_cells = [c for c in nb["cells"] if c.get("cell_type") == "code"]
    if len(sub_cells) > MAX_CODE_CELLS:
        raise PlanRefused(f"{len(sub_cells)} code cells (at most {MAX_CODE_CELLS})")
    sub_texts = [cell_text(c) for c in sub_cells]
    longest = max((len(t) for t in sub_texts), default=0)
    if longest > MAX_CELL_CHARS:
        raise PlanRefused(f"a code cell of {longest} characters (at most {MAX_CELL_CHARS})")
    if sum(len(t) for t in sub_texts) > MAX_CODE_CHARS:
        raise PlanRefused(f"more than {MAX_CODE_CHARS} characters of code")
    modules = imported_names([cell_text(c) for c in release_cells])
    release_hashes = [cell_hash(cell_text(c)) for c in release_cells]
    sub_hashes = [cell_hash(t) for t in sub_texts]
    matcher = difflib.SequenceMatcher(a=release_hashes, b=sub_hashes, autojunk=False)
    plan = Plan([], {}, {label: "" for label in labels})
    answers_seen: Dict[str, int] = {}
    pairings = 0
    student_texts: List[str] = []

    def role_name(index: int) -> str:
        info = roles[index]
        if info.get("role") == "check":
            return f"self-check cell of {info.get('exercise')}"
        return "setup cell" if index == 0 else "course cell"

    def add_student(j: int, label: Optional[str]) -> None:
        text = sub_texts[j]
        code = python_text(text)  # what is read; the cell runs as written
        student_texts.append(code)
        flags = scan_code(code, modules)
        if label:
            plan.cells.append(_code_cell(text, "answer", label))
            plan.sources[label] = (plan.sources.get(label, "") + "\n" + code).strip("\n")
            answers_seen[label] = len(plan.cells) - 1
            if flags:
                plan.answer_flags.setdefault(label, []).extend(f for f in flags if f not in plan.answer_flags[label])
            if any("course package" in f for f in flags):
                plan.package_import.add(label)
        else:
            plan.cells.append(_code_cell(text, "added"))
            for f in flags:
                text_flag = f"an added cell {f}"
                if text_flag not in plan.flags:
                    plan.flags.append(text_flag)

    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for i in range(i1, i2):
                label = roles[i].get("exercise") if roles[i].get("role") == "answer" else None
                if label:  # an unchanged answer cell: still the stub
                    add_student(j1 + i - i1, label)
                else:
                    plan.cells.append(_code_cell(cell_text(release_cells[i]), roles[i].get("role") or "course",
                                                 roles[i].get("exercise", "")))
            continue
        # a changed stretch: the student's answers and added cells, then the course cells restored
        students = []
        for j in range(j1, j2):
            label = _answer_label(sub_cells[j], release_answers, other_lines)
            students.append((j, label))
        unmatched_release = [i for i in range(i1, i2) if roles[i].get("role") != "answer"]
        others = [j for j, label in students if label is None]
        taken = set()
        if len(others) == len(unmatched_release):  # one edited copy per course cell, in order
            pairs = list(zip(unmatched_release, others))
        else:  # cells added and edited: pair an edited copy with the course cell it resembles
            pairs = []
            paired: Set[int] = set()
            student_lines = {j: _lines(sub_texts[j]) for j in others}
            for i in unmatched_release:
                release_lines = _lines(cell_text(release_cells[i]))
                scored = []
                for j in others:
                    if j in paired or pairings >= MAX_PAIRINGS:
                        continue
                    pairings += 1
                    scored.append((_similarity(release_lines, student_lines[j]), j))
                best = max(scored, default=(0.0, None))
                if best[1] is not None and best[0] >= 0.6:
                    pairs.append((i, best[1]))
                    paired.add(best[1])
        for i, j in pairs:  # the student's edited copy is replaced by the release's cell
            taken.add(j)
            plan.flags.append(f"{role_name(i)} {i + 1} changed: restored from the release")
        for j, label in students:
            if j not in taken:
                add_student(j, label)
        for i in range(i1, i2):
            if roles[i].get("role") != "answer":
                plan.cells.append(_code_cell(cell_text(release_cells[i]), roles[i].get("role") or "course",
                                             roles[i].get("exercise", "")))
    _apply_rules(plan, labels, release_answers, student_texts,
                 [cell_text(c) for c, info in zip(release_cells, roles) if info.get("role") != "answer"])
    # where the hidden tests run: after the exercise's self-check cell, else after its answer
    for label in labels:
        check = [k for k, c in enumerate(plan.cells)
                 if c.metadata["attention_book_grader"] == {"role": "check", "exercise": label}]
        if check:
            plan.points.setdefault(check[-1], []).append(label)
        elif label in answers_seen:
            plan.points.setdefault(answers_seen[label], []).append(label)
        else:
            plan.points.setdefault(-1, []).append(label)
            if label in release_answers:
                plan.notes[label] = "answer cell not found (deleted or renamed?): tested at the end"
    return plan


def _defined_names(texts: List[str]) -> Set[str]:
    names: Set[str] = set()
    for tree in filter(None, map(_parse, texts)):
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Assign):
                names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def rule_violations(label: str, answer: str, student_texts: List[str], course_texts: List[str],
                    wanted: Optional[List[str]] = None) -> List[tuple]:
    """``(message, flag)`` for each rule the answer of ``label`` breaks, read from the source:
    names the stub defines that no student cell defines (``wanted``), the chapter's finished code
    or the course package used, the exercise's own rules (:mod:`attention_book.checks.rules`)."""
    from ..checks.answers import StaticAnswer
    from ..checks.rules import chapter_code, rule

    rules = rule(label)
    reasons = []
    defined = _defined_names(student_texts) if wanted else set()
    missing = [name for name in (wanted or []) if name not in defined]
    if missing:
        reasons.append((f"your answer does not define `{missing[0]}` (the exercise asks you to write it)",
                        f"does not define {missing[0]}"))
    # the answer as it runs: its cells, and any cell of the student's that (re)defines its names
    answers = [answer] + [text for text in student_texts if text != answer
                          and _defined_names([text]) & set(wanted or [])]
    static = StaticAnswer(answers, student_texts, course_texts)
    if static.dynamic:  # names looked up or code made at run time: no rule could be checked
        reasons.append((f"looks code up at run time ({static.dynamic[0]}), so the exercise's rules cannot be "
                        "checked: write the answer as plain code (0 points)",
                        f"looks code up at run time ({static.dynamic[0]})"))
    body = chapter_code(label)
    used = static.chapter_names(body, rules.allowed)
    if used:
        what = "the course package" if body.get(used[0], "").startswith("package:") else "the chapter's finished code"
        reasons.append((f"uses `{used[0]}`, {what}: write your own (0 points)",
                        f"uses {used[0]} ({what}): write your own"))
    # the exercise's own rules are judged on what the answer does, never here on its text: the
    # own-work run records its operations (clean_room)
    return reasons


def _apply_rules(plan: Plan, labels: List[str], release_answers: Dict[str, List[str]], student_texts: List[str],
                 course_texts: List[str]) -> None:
    """The exercise's rules and "own work only", read from the source: 0 points and a flag."""
    for label in labels:
        wanted = sorted(_defined_names(release_answers.get(label, []))) if label in release_answers else []
        reasons = rule_violations(label, plan.sources.get(label, ""), student_texts, course_texts, wanted)
        if reasons:
            plan.zero[label] = reasons[0][0]
            flags = plan.answer_flags.setdefault(label, [])
            for _, flag in reasons:
                if flag not in flags:
                    flags.append(flag)


def plan_reference(source_nb, chapter: Chapter, labels: List[str]) -> Plan:
    """The chapter's own notebook (the solution): every code cell, tests after each check cell."""
    cells, points, sources = [], {}, {label: "" for label in labels}
    index_map = {}
    for index, cell in enumerate(source_nb["cells"]):
        if cell.get("cell_type") != "code":
            continue
        label = chapter.cell_exercise.get(index, "")
        role = chapter.roles.get(index, "course")
        cells.append(_code_cell(cell_text(cell), role, label))
        index_map[index] = len(cells) - 1
        if role == "answer" and label in sources:
            sources[label] = (sources[label] + "\n" + cell_text(cell)).strip("\n")
    for label in labels:
        ex = chapter.exercise(label)
        where = [index_map[i] for i in (ex.check_cells or ex.answer_cells) if i in index_map]
        points.setdefault(where[-1] if where else -1, []).append(label)
    return Plan(cells, points, sources)
