"""Read the exercise markup of a chapter notebook and turn book-only MyST into plain Markdown.

The markup (see CONTRIBUTING.md) is the single source of truth for the book, the student release
and the autograder:

* an ``{exercise}`` directive with ``:label: ex-NN-slug`` opens an exercise;
* code cells tagged ``solution`` hold the solution between ``# BEGIN SOLUTION`` and
  ``# END SOLUTION`` lines (only those lines are solution code);
* ``{solution-start}`` / ``{solution-end}`` / ``{solution}`` Markdown cells (tagged ``solution``)
  are the book's dropdowns; the release drops them;
* the first untagged code cell after the solution that mentions ``check`` or calls ``chNN.name(``
  is the self-check cell.

:func:`analyse_notebook` returns a :class:`Chapter` with its :class:`Exercise` list;
:func:`strip_solution` and :func:`convert_markdown` are what the release applies to each cell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

__all__ = [
    "MarkupError",
    "Exercise",
    "Chapter",
    "LABEL_RE",
    "cell_text",
    "iter_directives",
    "analyse_notebook",
    "strip_solution",
    "convert_markdown",
    "ConvertContext",
]

LABEL_RE = re.compile(r"\bex-\d{2}-[a-z0-9]+(?:-[a-z0-9]+)*\b")
BEGIN_RE = re.compile(r"^(?P<indent>[ \t]*)#\s*BEGIN SOLUTION\b")
END_RE = re.compile(r"^[ \t]*#\s*END SOLUTION\b")
HEADING_RE = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE_RE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
DIRECTIVE_INFO_RE = re.compile(r"^\{(?P<name>[\w:.+-]+)\}\s*(?P<arg>.*?)\s*$")
OPTION_RE = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*?)\s*$")
TARGET_RE = re.compile(r"^\s*\((?P<label>[^()\s]+)\)=\s*$")
ROLE_RE = re.compile(r"\{(?P<name>[\w:.+-]+)\}`(?P<content>[^`]*)`")
CHECK_RE = re.compile(r"check|\bch\d{2}\.\w+\(", re.IGNORECASE)  # a self-check cell
EQ_LABEL_RE = re.compile(r"(\$\$)[ \t]*\([\w:.-]+\)[ \t]*$")

NOT_IMPLEMENTED = 'raise NotImplementedError("{label}: replace this line with your code")'
SOLUTION_TAG = "solution"
DROP_TAG = "book-only"  # cells the release leaves out (e.g. a static-site-only explanation)


class MarkupError(ValueError):
    """The exercise markup of a notebook is inconsistent (the message says where and how to fix it)."""


def cell_text(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def cell_tags(cell) -> List[str]:
    return list(cell.get("metadata", {}).get("tags", []) or [])


# --------------------------------------------------------------------------------------------------
# MyST blocks
# --------------------------------------------------------------------------------------------------


@dataclass
class Block:
    """A piece of Markdown: plain ``text`` lines, a ``code`` fence or a ``directive``."""

    kind: str
    lines: List[str]  # the raw lines (text, or the whole fence for code/directive)
    name: str = ""
    arg: str = ""
    options: Dict[str, str] = field(default_factory=dict)
    body: List[str] = field(default_factory=list)


def _split_options(body: List[str]) -> Tuple[Dict[str, str], List[str]]:
    options: Dict[str, str] = {}
    i = 0
    if body and body[0].strip() == "---":  # YAML-style option block
        end = next((j for j in range(1, len(body)) if body[j].strip() == "---"), None)
        if end is not None:
            for line in body[1:end]:
                key, _, value = line.partition(":")
                if key.strip():
                    options[key.strip()] = value.strip()
            i = end + 1
    else:
        while i < len(body):
            match = OPTION_RE.match(body[i])
            if not match:
                break
            options[match.group("key")] = match.group("value")
            i += 1
    while i < len(body) and not body[i].strip():
        i += 1
    return options, body[i:]


def split_blocks(text: str) -> List[Block]:
    """Split Markdown into text runs, code fences and (possibly nested) MyST directives."""
    lines = text.split("\n")
    blocks: List[Block] = []
    run: List[str] = []
    i = 0
    while i < len(lines):
        match = FENCE_RE.match(lines[i])
        if not match:
            run.append(lines[i])
            i += 1
            continue
        fence = match.group("fence")
        char, length = fence[0], len(fence)
        close = re.compile(r"^ {0,3}" + re.escape(char) + "{" + str(length) + r",}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        raw = lines[i : j + 1]
        inner = lines[i + 1 : j]
        if run:
            blocks.append(Block("text", run))
            run = []
        info = DIRECTIVE_INFO_RE.match(match.group("info").strip())
        if info:
            options, body = _split_options(inner)
            blocks.append(
                Block("directive", raw, info.group("name"), info.group("arg"), options, body)
            )
        else:
            blocks.append(Block("code", raw))
        i = j + 1
    if run:
        blocks.append(Block("text", run))
    return blocks


def iter_directives(text: str) -> Iterator[Block]:
    """Every MyST directive in ``text``, outer ones first, nested ones too."""
    for block in split_blocks(text):
        if block.kind == "directive":
            yield block
            yield from iter_directives("\n".join(block.body))


# --------------------------------------------------------------------------------------------------
# Exercises
# --------------------------------------------------------------------------------------------------


@dataclass
class Exercise:
    label: str
    title: str
    number: str  # "1.2": chapter 1, second exercise
    notebook: str  # path relative to the book root
    cell: int  # index of the {exercise} cell in the source notebook
    answer_cells: List[int] = field(default_factory=list)  # source cells with solution code
    check_cells: List[int] = field(default_factory=list)  # self-check cells (kept in the release)
    solution_lines: List[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return "code" if self.answer_cells else "written"

    def display(self) -> str:
        return f"Exercise {self.number}"


@dataclass
class Chapter:
    path: str  # relative to the book root, e.g. notebooks/01_words_to_vectors.ipynb
    number: Optional[int]
    title: str
    exercises: List[Exercise]
    roles: Dict[int, str]  # cell index -> "exercise" | "answer" | "check" | "drop"
    cell_exercise: Dict[int, str]  # cell index -> exercise label, for answer/check cells
    labels: Dict[str, str] = field(default_factory=dict)  # section target -> heading text

    @property
    def stem(self) -> str:
        return self.path.rsplit("/", 1)[-1].rsplit(".", 1)[0]

    def exercise(self, label: str) -> Exercise:
        for ex in self.exercises:
            if ex.label == label:
                return ex
        raise KeyError(label)


def _chapter_number(stem: str) -> Optional[int]:
    match = re.match(r"^(\d+)", stem)
    return int(match.group(1)) if match else None


def solution_blocks(source: str, where: str) -> List[Tuple[int, int, str]]:
    """``(begin line, end line, indent)`` of every ``# BEGIN SOLUTION`` ... ``# END SOLUTION``."""
    blocks = []
    begin: Optional[Tuple[int, str]] = None
    for number, line in enumerate(source.split("\n")):
        if BEGIN_RE.match(line):
            if begin is not None:
                raise MarkupError(f"{where}: a second `# BEGIN SOLUTION` before `# END SOLUTION`")
            begin = (number, BEGIN_RE.match(line).group("indent"))
        elif END_RE.match(line):
            if begin is None:
                raise MarkupError(f"{where}: `# END SOLUTION` without `# BEGIN SOLUTION` above it")
            blocks.append((begin[0], number, begin[1]))
            begin = None
    if begin is not None:
        raise MarkupError(f"{where}: `# BEGIN SOLUTION` is never closed: add `# END SOLUTION`")
    return blocks


def strip_solution(source: str, label: str, where: str = "cell") -> str:
    """Replace every solution block by ``raise NotImplementedError("<label>: ...")``.

    The raise keeps the indentation of its ``# BEGIN SOLUTION`` line, so it sits inside the
    function body exactly where the solution was.
    """
    lines = source.split("\n")
    out: List[str] = []
    previous = 0
    for begin, end, indent in solution_blocks(source, where):
        out += lines[previous:begin]
        out.append(indent + NOT_IMPLEMENTED.format(label=label))
        previous = end + 1
    out += lines[previous:]
    return "\n".join(out)


def analyse_notebook(nb, path: str) -> Chapter:
    """Find the exercises of a notebook and the role of every cell (raises MarkupError)."""
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    number = _chapter_number(stem)
    title = ""
    exercises: List[Exercise] = []
    roles: Dict[int, str] = {}
    cell_exercise: Dict[int, str] = {}
    labels: Dict[str, str] = {}
    current: Optional[Exercise] = None  # the exercise whose span we are in
    gate: Optional[str] = None  # inside {solution-start} ... {solution-end}
    awaiting_check: Optional[Exercise] = None
    for index, cell in enumerate(nb["cells"]):
        text = cell_text(cell)
        tags = cell_tags(cell)
        where = f"{path}, cell {index + 1}"
        if cell.get("cell_type") == "markdown":
            pending_target = None
            for line in text.split("\n"):
                target = TARGET_RE.match(line)
                if target:
                    pending_target = target.group("label")
                    continue
                heading = HEADING_RE.match(line)
                if heading:
                    if not title and heading.group(1) == "#":
                        title = heading.group(2)
                    if pending_target:
                        labels[pending_target] = heading.group(2)
                    pending_target = None
                    awaiting_check = None
                    if len(heading.group(1)) <= 2 and gate is None:
                        current = None
            drop = SOLUTION_TAG in tags or gate is not None
            for block in iter_directives(text):
                name = block.name
                if name in ("exercise", "exercise-start"):
                    label = block.options.get("label", "").strip()
                    if not label:
                        raise MarkupError(f"{where}: `{{{name}}}` has no `:label: ex-NN-slug` line")
                    if not LABEL_RE.fullmatch(label):
                        raise MarkupError(
                            f"{where}: exercise label {label!r} should look like ex-NN-slug "
                            "(NN = chapter, slug = lowercase words joined by '-')"
                        )
                    if gate is not None:
                        raise MarkupError(
                            f"{where}: `{{solution-start}} {gate}` is never closed before this "
                            "exercise: add a `{solution-end}` cell after the solution"
                        )
                    if any(ex.label == label for ex in exercises):
                        raise MarkupError(f"{where}: exercise label {label!r} is used twice")
                    if number is None:
                        number = int(label[3:5])
                    current = Exercise(
                        label=label,
                        title=block.arg,
                        number=f"{number}.{len(exercises) + 1}",
                        notebook=path,
                        cell=index,
                    )
                    exercises.append(current)
                    roles[index] = "exercise"
                    awaiting_check = None
                elif name == "solution-start":
                    drop = True
                    gate = block.arg.strip() or (current.label if current else None)
                    if gate is None:
                        raise MarkupError(f"{where}: `{{solution-start}}` names no exercise label")
                elif name == "solution-end":
                    drop = True
                    gate = None
                elif name == "solution":
                    drop = True
            if drop:
                roles[index] = "drop"
            continue
        if cell.get("cell_type") != "code":
            continue
        has_markers = bool(re.search(r"(?m)^[ \t]*#\s*(BEGIN|END) SOLUTION", text))
        if SOLUTION_TAG in tags or gate is not None or has_markers:
            label = gate or (current.label if current else None)
            if label is None:
                raise MarkupError(
                    f"{where}: solution code outside any exercise: put it after an "
                    "`{exercise}` cell or name the exercise in `{solution-start} ex-NN-slug`"
                )
            blocks = solution_blocks(text, where)
            if not blocks and gate is not None and SOLUTION_TAG not in tags:
                raise MarkupError(
                    f"{where}: an untagged code cell inside `{{solution-start}} {gate}`: is the "
                    "`{solution-end}` cell missing above it? (or tag the cell `solution` and mark "
                    "its solution lines)"
                )
            if not blocks:
                raise MarkupError(
                    f"{where}: this code cell is a solution (tagged `solution` or inside "
                    "{solution-start}...{solution-end}) but has no `# BEGIN SOLUTION` / "
                    "`# END SOLUTION` lines: mark the lines the release must remove"
                )
            exercise = next((ex for ex in exercises if ex.label == label), None)
            if exercise is None:
                raise MarkupError(f"{where}: solution for {label!r}, which no `{{exercise}}` defines")
            src_lines = text.split("\n")
            for begin, end, _ in blocks:
                exercise.solution_lines += src_lines[begin + 1 : end]
            exercise.answer_cells.append(index)
            roles[index] = "answer"
            cell_exercise[index] = label
            awaiting_check = exercise
            continue
        if awaiting_check is not None and CHECK_RE.search(text):
            awaiting_check.check_cells.append(index)
            roles[index] = "check"
            cell_exercise[index] = awaiting_check.label
            awaiting_check = None
    if gate is not None:
        raise MarkupError(f"{path}: `{{solution-start}} {gate}` is never closed by `{{solution-end}}`")
    return Chapter(path, number, title, exercises, roles, cell_exercise, labels)


# --------------------------------------------------------------------------------------------------
# MyST -> plain Markdown (what Jupyter and Colab render)
# --------------------------------------------------------------------------------------------------

ADMONITIONS = {
    "note": "Note",
    "tip": "Tip",
    "hint": "Hint",
    "important": "Important",
    "warning": "Warning",
    "caution": "Caution",
    "attention": "Attention",
    "danger": "Danger",
    "error": "Error",
    "seealso": "See also",
    "margin": "Aside",
    "sidebar": "Aside",
    "topic": "",
    "epigraph": "",
    "pull-quote": "",
    "highlights": "",
    "admonition": "",
}
DROPPED = {
    "solution",
    "solution-start",
    "solution-end",
    "exercise-end",
    "toctree",
    "tableofcontents",
    "bibliography",
    "glue:figure",
    "glue",
}


@dataclass
class ConvertContext:
    """What the converter needs to know about the whole course (exercise numbers, headings)."""

    exercises: Dict[str, str] = field(default_factory=dict)  # label -> "Exercise 1.2"
    titles: Dict[str, str] = field(default_factory=dict)  # label/doc -> text
    images: List[str] = field(default_factory=list)  # local image paths met while converting


def _quote(lines: List[str]) -> List[str]:
    return [("> " + line).rstrip() for line in lines]


def _trim(lines: List[str]) -> List[str]:
    while lines and not lines[0].strip():
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def convert_role(name: str, content: str, ctx: ConvertContext) -> str:
    explicit = re.match(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", content, re.DOTALL)
    text, target = (explicit.group("text"), explicit.group("target")) if explicit else (None, content)
    short = name.split(":")[-1]
    if short in ("ref", "numref", "any", "doc", "term", "prf:ref"):
        known = ctx.exercises.get(target) or ctx.titles.get(target) or ctx.titles.get(target.lstrip("/"))
        if text:
            if known and ("%s" in text or "{number}" in text):
                number = known.split(" ", 1)[-1]
                return text.replace("%s", number).replace("{number}", number)
            return text
        return known or target
    if short == "eq":
        return f"({target})"
    if short == "math":
        return f"${content}$"
    if short in ("code", "literal", "samp", "file", "command", "kbd", "program", "envvar"):
        return f"`{content}`"
    if short in ("sub", "subscript"):
        return f"<sub>{content}</sub>"
    if short in ("sup", "superscript"):
        return f"<sup>{content}</sup>"
    if short in ("cite", "cite:p", "cite:t", "footcite"):
        return f"[{content}]"
    if short == "abbr":
        return re.sub(r"\s*\(.*\)$", "", content)
    if short == "download":
        return text or target
    return text if text is not None else content


def convert_text(lines: List[str], ctx: ConvertContext) -> List[str]:
    out = []
    for line in lines:
        if TARGET_RE.match(line):
            continue
        if line.startswith("%") and not line.startswith("%%"):
            continue  # MyST comment
        line = ROLE_RE.sub(lambda m: convert_role(m.group("name"), m.group("content"), ctx), line)
        line = EQ_LABEL_RE.sub(r"\1", line)
        for image in re.findall(r"!\[[^\]]*\]\(([^)\s]+)", line):
            ctx.images.append(image)
        out.append(line)
    return out


def convert_markdown(text: str, ctx: Optional[ConvertContext] = None) -> str:
    """Turn MyST-only syntax into Markdown that plain Jupyter and Colab render.

    Exercises become a bold heading with the body as a blockquote, admonitions become quotes,
    solutions disappear, cross-reference roles become their text.
    """
    ctx = ctx or ConvertContext()
    out = _convert_lines(text.split("\n"), ctx)
    return "\n".join(_collapse_blank(out)).strip("\n")


def _collapse_blank(lines: List[str]) -> List[str]:
    out: List[str] = []
    for line in lines:
        if not line.strip() and out and not out[-1].strip():
            continue
        out.append(line)
    return out


def _convert_lines(lines: List[str], ctx: ConvertContext) -> List[str]:
    out: List[str] = []
    for block in split_blocks("\n".join(lines)):
        if block.kind == "text":
            out += convert_text(block.lines, ctx)
        elif block.kind == "code":
            out += block.lines
        else:
            converted = _convert_directive(block, ctx)
            if converted is None:
                # drop the directive and the blank line after it
                continue
            if out and out[-1].strip():
                out.append("")
            out += converted
    return out


def _convert_directive(block: Block, ctx: ConvertContext) -> Optional[List[str]]:
    name, arg = block.name, block.arg
    body = _trim(_convert_lines(block.body, ctx))
    if name in DROPPED:
        return None
    if name in ("exercise", "exercise-start"):
        label = block.options.get("label", "").strip()
        number = ctx.exercises.get(label, "Exercise")
        title = convert_text([arg], ctx)[0] if arg else ""
        head = f"**{number} ({label}): {title}**" if title else f"**{number} ({label})**"
        return [head, ""] + _quote(body)
    if name in ADMONITIONS:
        title = convert_text([arg], ctx)[0] if arg else ADMONITIONS[name]
        head = [f"> **{title}**", ">"] if title else []
        return head + _quote(body)
    if name == "dropdown":
        return [f"<details><summary>{arg or 'Details'}</summary>", ""] + body + ["", "</details>"]
    if name == "math":
        return ["$$"] + [line for line in block.body] + ["$$"]
    if name in ("code-block", "code", "sourcecode", "code-cell", "literalinclude"):
        language = arg.split()[0] if arg else ""
        return ["```" + language] + block.body + ["```"]
    if name in ("figure", "image"):
        ctx.images.append(arg)
        caption = " ".join(line.strip() for line in body if line.strip())
        alt = block.options.get("alt", caption or "figure")
        lines = [f"![{alt}]({arg})"]
        if caption and name == "figure":
            lines += ["", f"*{caption}*"]
        return lines
    if name == "raw":
        return block.body if arg.strip().lower() == "html" else None
    if name in ("tab-item", "card", "grid-item-card"):
        return ([f"**{arg}**", ""] if arg else []) + body
    # Unknown directive: keep its title and content as plain text.
    return ([f"**{arg}**", ""] if arg else []) + body
