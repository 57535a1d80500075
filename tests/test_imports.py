"""Imports in the package go one way, and no private name crosses a module boundary.

Read from the sources with ``ast`` (nothing is imported or run):

* a chapter's module imports only from earlier chapters (or its own chapter) and from the shared
  helpers, and a shared helper imports only shared helpers;
* no module imports a private name (``_name``) from another module, or reaches one through an
  imported module (``validation._describe``); importing a package's own private *submodule*
  (``from ._widgets import ...`` inside ``explorers``) is fine, its private *names* are not.

A new top-level module must be placed in ``CHAPTER`` below (the test says so), so the order
cannot be skipped by accident.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "attention_book"

SHARED = 0  # shared helpers: no chapter of their own
#: chapter of each top-level module; None = outside the chapter order (tools around the book)
CHAPTER: Dict[str, Optional[int]] = {
    "utils": SHARED, "validation": SHARED, "functional": SHARED, "data": SHARED,
    "plotting": SHARED, "masks": SHARED, "glue": SHARED, "diagram": SHARED, "training": SHARED,
    "embedding": 1,
    "scores": 3,  # chapters 2 and 3
    "attention": 4,
    "multihead": 5,
    "cross": 6,
    "causal": 7,
    "hello_world": 8,
    "gpt": 9, "gpt2_weights": 9, "gpt_training": 9, "gpt_accounting": 9, "sampling": 9, "corpus": 9,
    "scale": 10, "fused": 10, "kv_cache": 10, "cost": 10, "measure": 10, "benchmark": 10,
    "positions": 10, "gqa": 10, "reference": SHARED,
    # around the book: may import any chapter
    "__init__": None, "__main__": None, "cli": None, "explorers": None, "checks": None, "instructor": None,
}


def _sources() -> List[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _dotted(path: Path) -> str:
    """src/attention_book/checks/ch05.py -> attention_book.checks.ch05 (a package -> its name)."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[Tuple[int, str, List[str]]]:
    """(line, absolute module, imported names) of every import in ``path`` (lazy ones included)."""
    package = _dotted(path) if path.name == "__init__.py" else _dotted(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            yield node.lineno, module, [alias.name for alias in node.names]


def _top_level(module: str) -> Optional[str]:
    """attention_book.multihead.x -> multihead; None outside the package."""
    parts = module.split(".")
    if parts[0] != "attention_book":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_every_top_level_module_has_a_place_in_the_chapter_order():
    names = {path.stem if path.parent == PACKAGE else path.relative_to(PACKAGE).parts[0]
             for path in _sources()}
    missing = sorted(names - set(CHAPTER))
    assert not missing, (f"new modules {missing}: add them to CHAPTER in tests/test_imports.py "
                         "(their chapter number, 0 for a shared helper, None for a tool around the book)")


def _order_violations() -> List[str]:
    problems = []
    for path in _sources():
        if path.parent != PACKAGE:
            continue  # subpackages (explorers, checks, instructor) are around the book
        importer = path.stem
        rank = CHAPTER.get(importer)
        if rank is None:
            continue
        for line, module, names in _imports(path):
            targets = [_top_level(module)]
            if module == "attention_book":  # from . import validation
                targets = names
            for target in targets:
                if target is None or target == importer or target == "__init__":
                    continue
                target_rank = CHAPTER.get(target)
                if target_rank is None:
                    problems.append(f"{path.name}:{line} imports {target}, a tool around the book")
                elif rank == SHARED and target_rank != SHARED:
                    problems.append(f"{path.name}:{line}: shared helper {importer} imports chapter-{target_rank} "
                                    f"module {target}")
                elif target_rank > rank:
                    problems.append(f"{path.name}:{line}: chapter-{rank} module {importer} imports {target} "
                                    f"from the later chapter {target_rank}")
    return problems


def test_chapter_modules_import_only_earlier_chapters_and_shared_helpers():
    problems = _order_violations()
    assert not problems, "imports against the chapter order:\n" + "\n".join(problems)


def _private_violations() -> List[str]:
    problems = []
    for path in _sources():
        tree = ast.parse(path.read_text(), str(path))
        own = _dotted(path)
        package = own if path.name == "__init__.py" else own.rpartition(".")[0]
        module_aliases = {}  # local name -> imported attention_book module
        for line, module, names in _imports(path):
            if not module.startswith("attention_book"):
                continue
            for name in names:
                if name == "*":
                    problems.append(f"{path.relative_to(PACKAGE)}:{line}: `from {module} import *`")
                    continue
                submodule = PACKAGE.parent.joinpath(*f"{module}.{name}".split("."))
                is_module = submodule.with_suffix(".py").is_file() or submodule.is_dir()
                if is_module:
                    module_aliases[name] = f"{module}.{name}"
                    # a private submodule may be imported by its own package only
                    if _is_private(name) and module != package:
                        problems.append(f"{path.relative_to(PACKAGE)}:{line}: imports private module {module}.{name}")
                elif _is_private(name):
                    problems.append(f"{path.relative_to(PACKAGE)}:{line}: imports private name {name} from {module}")
            if not names:  # import attention_book.x as y
                parts = module.split(".")
                if any(_is_private(part) for part in parts[1:]) and not module.startswith(package + "."):
                    problems.append(f"{path.relative_to(PACKAGE)}:{line}: imports private module {module}")
        for node in ast.walk(tree):  # validation._describe(...)
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in module_aliases and _is_private(node.attr)):
                problems.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: uses private "
                                f"{module_aliases[node.value.id]}.{node.attr}")
    return problems


def test_no_private_name_crosses_a_module_boundary():
    problems = _private_violations()
    assert not problems, "private names used across modules:\n" + "\n".join(problems)


# ----------------------------------------------------------------- the checker itself can fail
@pytest.mark.parametrize(
    "source, expected",
    [
        ("from .causal import CausalAttention\n", "imports causal from the later chapter 7"),
        ("from . import hello_world\n", "imports hello_world from the later chapter 8"),
        ("from .attention import SelfAttention\n", None),
        ("from . import validation\n", None),
    ],
)
def test_order_check_catches_a_later_chapter(tmp_path, monkeypatch, source, expected):
    fake = tmp_path / "attention_book"
    fake.mkdir()
    (fake / "multihead.py").write_text(source)
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    problems = _order_violations()
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and expected in problems[0]


@pytest.mark.parametrize(
    "source, expected",
    [
        ("from .multihead import _check_input\n", "private name _check_input"),
        ("from . import validation\nvalidation._describe(1)\n", "uses private attention_book.validation._describe"),
        ("from .explorers import _widgets\n", "private module attention_book.explorers._widgets"),
        ("from .multihead import MultiHeadAttention\n", None),
        ("from . import validation\nvalidation.__all__\n", None),
    ],
)
def test_private_check_catches_private_names(tmp_path, monkeypatch, source, expected):
    fake = tmp_path / "attention_book"
    (fake / "explorers").mkdir(parents=True)
    (fake / "explorers" / "__init__.py").write_text("from ._widgets import Widget\n")  # allowed: own package
    (fake / "explorers" / "_widgets.py").write_text("Widget = 1\n")
    (fake / "validation.py").write_text("def _describe(x): return x\n")
    (fake / "multihead.py").write_text("MultiHeadAttention = 1\ndef _check_input(): pass\n")
    (fake / "scale.py").write_text(source)
    monkeypatch.setitem(globals(), "PACKAGE", fake)
    problems = _private_violations()
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and expected in problems[0], problems
