"""The chapter body's finished code before each exercise: generates ``checks/chapter_code.json``.

"Own work only" (issues 19 and 21): an answer must not be, call or wrap code the chapter body
defines before its exercise. This module reads the chapter notebooks and lists, for each coding
exercise, the names the body has bound by the exercise's first answer cell:

* functions and classes the body defines (``def:<digest>``: a digest of the definition, so the
  self-check can tell the chapter's function from a student's own function of the same name);
* functions, classes and modules it imports from ``attention_book`` (``package:<dotted path>``;
  data such as tensors or tables is not code and is not listed; nor is the self-check module).

    python -m attention_book.instructor.own_work --write   # refresh the file after editing a chapter
    python -m attention_book.instructor.own_work --check   # exit 1 when the file is out of date

Self-checks (:func:`attention_book.checks.answers.own_work`) and the grader
(:mod:`.planning`) both read the file through :func:`attention_book.checks.rules.chapter_code`.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import sys
import types
from pathlib import Path
from typing import Dict

from ..checks.answers import parse_cell, definition_digest
from ..checks.rules import CHAPTER_CODE_FILE
from .course import Course, find_root
from .markup import cell_text

__all__ = ["chapter_definitions", "render", "main"]


def _package_object(module: str, name: str):
    try:
        return getattr(importlib.import_module(module), name)
    except Exception:
        try:
            return importlib.import_module(f"{module}.{name}")
        except Exception:
            return None


def _is_code(obj) -> bool:
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)) or (
        callable(obj) and not hasattr(obj, "shape"))


def _body_names(tree: ast.Module) -> Dict[str, str]:
    found: Dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[node.name] = "def:" + definition_digest(node)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module and (
                node.module == "attention_book" or node.module.startswith("attention_book.")):
            if node.module.startswith("attention_book.checks"):
                continue
            for alias in node.names:
                obj = _package_object(node.module, alias.name)
                if obj is not None and _is_code(obj):
                    found[alias.asname or alias.name] = f"package:{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "attention_book" and not alias.name.startswith("attention_book.checks"):
                    found[alias.asname or alias.name.split(".")[0]] = f"package:{alias.name}"
    return found


def chapter_definitions(course: Course) -> Dict[str, Dict[str, str]]:
    """exercise label -> {name: "def:<digest>" | "package:<path>"} for every coding exercise."""
    import nbformat

    out: Dict[str, Dict[str, str]] = {}
    for chapter in course.chapters:
        nb = nbformat.read(str(course.root / chapter.path), as_version=4)
        body: Dict[str, str] = {}
        for index, cell in enumerate(nb.cells):
            if cell.get("cell_type") != "code":
                continue
            role = chapter.roles.get(index, "course")
            if role == "answer":
                label = chapter.cell_exercise.get(index)
                if label and label not in out:
                    out[label] = dict(sorted(body.items()))
                continue
            if role == "check":
                continue
            tree = parse_cell(cell_text(cell))
            if tree is not None:
                body.update(_body_names(tree))
    return dict(sorted(out.items()))


def render(course: Course) -> str:
    return json.dumps(chapter_definitions(course), indent=1, sort_keys=True) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--write", action="store_true", help="write checks/chapter_code.json")
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is out of date")
    args = parser.parse_args(argv)
    course = Course.load(find_root(args.root))
    text = render(course)
    current = CHAPTER_CODE_FILE.read_text(encoding="utf-8") if CHAPTER_CODE_FILE.is_file() else ""
    if args.write:
        if text != current:
            CHAPTER_CODE_FILE.write_text(text, encoding="utf-8")
        print(f"{CHAPTER_CODE_FILE}: {len(json.loads(text))} exercises")
        return 0
    if args.check and text != current:
        print(f"{CHAPTER_CODE_FILE} is out of date: python -m attention_book.instructor.own_work --write",
              file=sys.stderr)
        return 1
    if not args.check:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
