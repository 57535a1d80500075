"""The course as the instructor tools see it: chapter notebooks from ``_toc.yml``, points, hidden tests.

Everything is found from the book root (the folder holding ``_toc.yml``):

* chapters: every ``file:`` entry of ``_toc.yml`` that is a notebook, in table-of-contents order;
* points: ``instructor/points.toml`` (``[points]`` table, ``ex-NN-slug = 2``);
* hidden tests: ``instructor/hidden_tests/*.py`` (see :mod:`attention_book.instructor.hidden`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from .markup import LABEL_RE, Chapter, ConvertContext, analyse_notebook

__all__ = ["find_root", "toc_notebooks", "Course", "load_points", "collect_hidden_tests"]

DEFAULT_POINTS = 1.0


def find_root(start: Optional[os.PathLike] = None) -> Path:
    """The book root: ``start`` (default: the working directory) or a parent holding ``_toc.yml``."""
    here = Path(start or os.getcwd()).resolve()
    for folder in [here, *here.parents]:
        if (folder / "_toc.yml").is_file():
            return folder
    package_root = Path(__file__).resolve().parents[3]  # src/attention_book/instructor -> repo
    if (package_root / "_toc.yml").is_file():
        return package_root
    raise FileNotFoundError(
        f"no _toc.yml in {here} or its parents: run the command from the book's folder "
        "or pass --root path/to/attention-book"
    )


def _toc_files(node) -> List[str]:
    files: List[str] = []
    if isinstance(node, dict):
        for key in ("root", "file"):
            if isinstance(node.get(key), str):
                files.append(node[key])
        for key in ("parts", "chapters", "sections"):
            for child in node.get(key, []) or []:
                files += _toc_files(child)
    elif isinstance(node, list):
        for child in node:
            files += _toc_files(child)
    return files


def toc_notebooks(root: Path) -> List[str]:
    """Notebook paths (relative to ``root``, with ``.ipynb``) listed in ``_toc.yml``, in order."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text(encoding="utf-8"))
    found = []
    for entry in _toc_files(toc):
        entry = entry[:-6] if entry.endswith(".ipynb") else entry
        if (root / f"{entry}.ipynb").is_file():
            found.append(f"{entry}.ipynb")
    return found


def load_points(path: Path) -> Dict[str, float]:
    """``instructor/points.toml``: a ``[points]`` table mapping exercise labels to points."""
    if not path.is_file():
        return {}
    try:
        import tomllib  # Python 3.11+
    except ModuleNotFoundError:  # pragma: no cover - older Pythons
        import tomli as tomllib  # type: ignore[no-redef]
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    table = data.get("points", {})
    points = {}
    for label, value in table.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{path}: points for {label!r} must be a number >= 0, got {value!r}")
        points[label] = float(value)
    return points


def collect_hidden_tests(folder: Path) -> Dict[str, List[dict]]:
    """Load every ``*.py`` in ``folder`` (not ``_*``) and return label -> [{name, weight}, ...]."""
    from .hidden import load_hidden_tests

    found: Dict[str, List[dict]] = {}
    for path in hidden_test_files(folder):
        for label, tests in load_hidden_tests(path).items():
            found.setdefault(label, []).extend({"name": t.name, "weight": t.weight} for t in tests)
    return found


def hidden_test_files(folder: Path) -> List[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))


@dataclass
class Course:
    root: Path
    chapters: List[Chapter]
    points_file: Path
    hidden_dir: Path
    points: Dict[str, float] = field(default_factory=dict)

    @classmethod
    def load(
        cls,
        root: Optional[os.PathLike] = None,
        points_file: Optional[os.PathLike] = None,
        hidden_dir: Optional[os.PathLike] = None,
    ) -> "Course":
        import nbformat

        root = find_root(root)
        chapters = []
        for rel in toc_notebooks(root):
            nb = nbformat.read(str(root / rel), as_version=4)
            chapters.append(analyse_notebook(nb, rel))
        points_path = Path(points_file) if points_file else root / "instructor" / "points.toml"
        hidden_path = Path(hidden_dir) if hidden_dir else root / "instructor" / "hidden_tests"
        return cls(root, chapters, points_path, hidden_path, load_points(points_path))

    def exercises(self):
        for chapter in self.chapters:
            yield from chapter.exercises

    def points_for(self, label: str) -> float:
        return self.points.get(label, DEFAULT_POINTS)

    def hidden_file(self, chapter: Chapter) -> Optional[Path]:
        """The chapter's hidden tests, ``hidden_dir/chNN.py`` (it may not exist); None for a
        chapter without a number."""
        return self.hidden_dir / f"ch{chapter.number:02d}.py" if chapter.number is not None else None

    def context(self) -> ConvertContext:
        ctx = ConvertContext()
        for chapter in self.chapters:
            for ex in chapter.exercises:
                ctx.exercises[ex.label] = ex.display()
            ctx.titles.update(chapter.labels)
            doc = chapter.path[:-6]
            ctx.titles[doc] = chapter.title
            ctx.titles[doc.rsplit("/", 1)[-1]] = chapter.title
        return ctx

    def repository_url(self) -> str:
        import yaml

        config = yaml.safe_load((self.root / "_config.yml").read_text(encoding="utf-8")) or {}
        return str((config.get("repository") or {}).get("url", "")).rstrip("/")

    def problems(self, hidden: Optional[Dict[str, List[dict]]] = None) -> List[str]:
        """What would stop an exercise from being graded correctly (empty list = all good)."""
        hidden = collect_hidden_tests(self.hidden_dir) if hidden is None else hidden
        labels = {ex.label for ex in self.exercises()}
        problems = []
        for ex in self.exercises():
            if ex.label not in self.points:
                problems.append(
                    f"{ex.label} ({ex.notebook}) has no entry in {self.points_file.name}: "
                    f"add `{ex.label} = 1` under [points] (0 for a written exercise graded by hand)"
                )
                continue
            if self.points[ex.label] > 0 and ex.kind == "code" and ex.label not in hidden:
                problems.append(
                    f"{ex.label} is worth {self.points[ex.label]:g} points but has no hidden test (the "
                    f"grader's points come only from instructor/hidden_tests/ch{ex.label[3:5]}.py): add "
                    "one (format: instructor/README.md), or give it 0 points"
                )
        # Entries may come before a chapter joins _toc.yml: look for their labels in every notebook.
        drafted = set(labels)
        for path in sorted(self.root.glob("notebooks/*.ipynb")):
            drafted |= set(LABEL_RE.findall(path.read_text(encoding="utf-8")))
        for label in sorted(set(self.points) - drafted):
            problems.append(f"{self.points_file.name} lists {label}, which no notebook defines (a typo?)")
        for label in sorted(set(hidden) - drafted):
            problems.append(f"hidden tests for {label}, which no notebook defines (a typo?)")
        return problems


def dumps_notebook(nb) -> str:
    """The repository's storage format (tools/strip_outputs.py): stable, diff-friendly JSON."""
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def natural_key(text: str):
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]
