"""MyST Markdown for plain Jupyter: split MyST into blocks and turn book-only syntax into Markdown.

The book's Markdown cells use MyST (``{exercise}``, ``{note}``, ``{ref}`` ...), which Jupyter,
JupyterLab and Colab do not render. :func:`convert_markdown` turns it into plain Markdown for the
student notebooks: exercises become a bold "**Exercise 1.2 (ex-01-slug): Title**" heading followed
by a blockquote, admonitions become quotes, solutions disappear, cross-reference roles become their
text ("Exercise 3.2", a section title). :func:`split_blocks` / :func:`iter_directives` are the
small MyST reader it shares with :mod:`attention_book.instructor.markup` (exercise parsing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Tuple

__all__ = [
    "Block",
    "split_blocks",
    "iter_directives",
    "ConvertContext",
    "convert_markdown",
    "convert_role",
    "convert_text",
    "TARGET_RE",
]

FENCE_RE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,}|:{3,})(?P<info>.*)$")
DIRECTIVE_INFO_RE = re.compile(r"^\{(?P<name>[\w:.+-]+)\}\s*(?P<arg>.*?)\s*$")
OPTION_RE = re.compile(r"^\s*:(?P<key>[\w-]+):\s*(?P<value>.*?)\s*$")
TARGET_RE = re.compile(r"^\s*\((?P<label>[^()\s]+)\)=\s*$")
ROLE_RE = re.compile(r"\{(?P<name>[\w:.+-]+)\}`(?P<content>[^`]*)`")
EQ_LABEL_RE = re.compile(r"(\$\$)[ \t]*\([\w:.-]+\)[ \t]*$")


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
