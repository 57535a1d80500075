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
left ``_toc.yml`` is deleted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def stale_files(root: Path = ROOT):
    """``(to_write, to_delete)``: generated files whose text differs, and orphaned student notebooks."""
    from attention_book.instructor.course import Course
    from attention_book.instructor.release import STUDENT_DIR, generated_files

    files = generated_files(Course.load(root))
    to_write = {
        rel: text for rel, text in files.items()
        if not (root / rel).is_file() or (root / rel).read_text(encoding="utf-8") != text
    }
    to_delete = sorted(
        p.relative_to(root).as_posix() for p in (root / STUDENT_DIR).rglob("*.ipynb")
        if p.relative_to(root).as_posix() not in files
    )
    return to_write, to_delete


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only report stale files (exit 1 if any)")
    args = parser.parse_args(argv)
    to_write, to_delete = stale_files()
    if args.check:
        for rel in sorted(to_write):
            print(f"stale: {rel}")
        for rel in to_delete:
            print(f"orphaned: {rel}")
        if to_write or to_delete:
            print("run: python tools/make_student_notebooks.py")
            return 1
        print("student notebooks and exercise numbers are up to date")
        return 0
    for rel, text in sorted(to_write.items()):
        target = ROOT / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {rel}")
    for rel in to_delete:
        (ROOT / rel).unlink()
        print(f"deleted {rel}")
    if not to_write and not to_delete:
        print("nothing to do: everything is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
