"""Your own copies of the student notebooks: the folder `make lab` opens (created once, never overwritten).

    python tools/working_copy.py                  # my-notebooks/
    python tools/working_copy.py path/to/folder   # another folder (LAB_DIR=... in `make lab`)

``student/notebooks/`` holds the generated student edition of each chapter (answer cells stubbed,
self-checks kept). Those files belong to the course: tools/make_student_notebooks.py rewrites them
when a chapter changes, and `git pull` updates them. A learner works on copies instead: this script
copies each chapter into ``my-notebooks/`` (ignored by git) the first time only. A file that is
already there is never replaced, not even by a newer edition: then a line says so and how to take
the new one (rename your copy, run `make lab` again). Only the standard library is used, so any
Python runs it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
#: the learner's folder (make lab opens it; .gitignore lists it; make_student_notebooks.py moves a
#: student notebook someone edited here instead of overwriting it)
LEARNER_DIR = "my-notebooks"
STUDENT_NOTEBOOKS = "student/notebooks"
#: chapter file -> SHA-256 of the student edition it was copied from (to notice newer editions)
MANIFEST = ".copied-from.json"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def copy_new(source: Path, target: Path) -> bool:
    """Copy ``source`` to ``target`` unless ``target`` exists (checked atomically); True if copied."""
    try:
        with open(target, "xb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out)
    except FileExistsError:
        return False
    shutil.copymode(source, target)
    return True


def move_new(source: Path, target: Path) -> bool:
    """Move ``source`` to ``target`` unless ``target`` exists; True if moved (never overwrites)."""
    try:
        os.link(source, target)  # fails if target exists: no window in which it could be replaced
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links
        if not copy_new(source, target):
            return False
    source.unlink()
    return True


def free_name(folder: Path, name: str, suffix: str = "from-student") -> Path:
    """``folder/name`` if free, else ``folder/<stem>.<suffix>.ipynb``, ``.<suffix>-2``, ..."""
    candidate = folder / name
    stem, ext = os.path.splitext(name)
    number = 1
    while candidate.exists():
        candidate = folder / f"{stem}.{suffix}{'' if number == 1 else f'-{number}'}{ext}"
        number += 1
    return candidate


def make_working_copy(folder: Path, root: Path = ROOT) -> List[str]:
    """Copy every student notebook missing from ``folder``; return what happened, one line each."""
    folder = folder if folder.is_absolute() else root / folder
    source_dir = root / STUDENT_NOTEBOOKS
    sources = sorted(p for p in source_dir.glob("*.ipynb") if p.is_file())
    if not sources:
        raise SystemExit(f"{source_dir} holds no notebooks: run this from a copy of the course repository")
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path = folder / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    shown = folder.relative_to(root) if root in folder.parents else folder
    copied, lines = [], []
    for source in sources:
        digest = _sha256(source)
        if copy_new(source, folder / source.name):
            manifest[source.name] = digest
            copied.append(source.name)
        elif manifest.get(source.name, digest) != digest:
            lines.append(
                f"{shown}/{source.name}: the course has a newer student edition "
                f"({STUDENT_NOTEBOOKS}/{source.name}); your copy is kept. To start that chapter "
                "afresh, rename your copy and run `make lab` again.")
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    if copied:
        lines.insert(0, f"{shown}/: copied {len(copied)} student notebooks from {STUDENT_NOTEBOOKS}/ "
                        "(your copies: make lab opens them and never overwrites them)")
    else:
        lines.insert(0, f"{shown}/: your copies of the chapters (none replaced)")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", nargs="?", default=LEARNER_DIR, help=f"default: {LEARNER_DIR}")
    args = parser.parse_args(argv)
    for line in make_working_copy(Path(args.folder)):
        print(f"[lab] {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
