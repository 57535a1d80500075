"""Write the student notebooks behind the site's launch buttons and the exercise-number table.

    python tools/make_student_notebooks.py          # (re)write the generated files
    python tools/make_student_notebooks.py --check  # exit 1 and list what is stale

Generated from the chapter notebooks in ``_toc.yml`` (the same code as ``attention-book release``):

* ``student/notebooks/NN_*.ipynb``: each chapter without its solutions (book/_ext/student_links.py
  points the Colab, Binder and download buttons at them) and ``student/README.md``;
* the table in ``src/attention_book/checks/numbering.py``: exercise label -> "3.2", read by the
  self-check banners and the grader.

Run it after editing a chapter's exercises, answer cells or any text of a chapter notebook (the
student notebooks copy all of it); tests/test_student_notebooks.py fails while a file is stale.
Only files under ``student/`` and that one table are written; a student notebook whose chapter
left ``_toc.yml`` is deleted. Folders whose name starts with a dot (JupyterLab's
``.ipynb_checkpoints``) are not the generator's and are left alone.

Nothing anyone wrote is lost: each generated notebook carries the digest of its content, so a
student notebook changed after it was generated (a learner's answers, outputs, notes) is never
overwritten or deleted. It is moved to ``my-notebooks/`` (the learner's folder, which `make lab`
opens; tools/working_copy.py) under a free name, then the generated file is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from working_copy import LEARNER_DIR, free_name, move_new  # noqa: E402


def _student_notebooks_on_disk(root: Path):
    """Notebooks under student/, except in hidden folders such as JupyterLab's .ipynb_checkpoints."""
    from attention_book.instructor.release import STUDENT_DIR

    folder = root / STUDENT_DIR
    return sorted(p.relative_to(root).as_posix() for p in folder.rglob("*.ipynb")
                  if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def stale_files(root: Path = ROOT):
    """``(to_write, to_delete)``: generated files whose text differs, and orphaned student notebooks."""
    from attention_book.instructor.course import Course
    from attention_book.instructor.release import generated_files

    files = generated_files(Course.load(root))
    to_write = {
        rel: text for rel, text in files.items()
        if not (root / rel).is_file() or (root / rel).read_text(encoding="utf-8") != text
    }
    to_delete = [rel for rel in _student_notebooks_on_disk(root) if rel not in files]
    return to_write, to_delete


def edited_files(root: Path, paths) -> dict:
    """``{path: reason}`` for the student notebooks among ``paths`` that someone changed after they
    were generated (attention_book.instructor.release.edited_after_generation)."""
    from attention_book.instructor.release import edited_after_generation

    edited = {}
    for rel in paths:
        path = root / rel
        if rel.endswith(".ipynb") and path.is_file():
            reason = edited_after_generation(path.read_text(encoding="utf-8", errors="replace"))
            if reason:
                edited[rel] = reason
    return edited


def keep_edited(root: Path, rel: str) -> Path:
    """Move the edited student notebook ``rel`` into the learner's folder under a free name."""
    folder = root / LEARNER_DIR
    folder.mkdir(parents=True, exist_ok=True)
    while True:
        target = free_name(folder, Path(rel).name)
        if move_new(root / rel, target):
            return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report stale files (exit 1 if any)")
    args = parser.parse_args(argv)
    to_write, to_delete = stale_files()
    edited = edited_files(ROOT, [*to_write, *to_delete])
    if args.check:
        for rel in sorted(to_write):
            print(f"stale: {rel}")
        for rel in to_delete:
            print(f"orphaned: {rel}")
        for rel, reason in sorted(edited.items()):
            print(f"edited: {rel} ({reason}): the tool keeps it, moved to {LEARNER_DIR}/")
        if to_write or to_delete:
            print("run: python tools/make_student_notebooks.py")
            return 1
        print("student notebooks and exercise numbers are up to date")
        return 0
    for rel, reason in sorted(edited.items()):
        kept = keep_edited(ROOT, rel)
        print(f"kept {rel} ({reason}): moved to {kept.relative_to(ROOT)} (your folder: make lab opens it)")
    for rel, text in sorted(to_write.items()):
        target = ROOT / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {rel}")
    for rel in to_delete:
        if (ROOT / rel).exists():  # not moved away above
            (ROOT / rel).unlink()
            print(f"deleted {rel}")
    if not to_write and not to_delete:
        print("nothing to do: everything is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
