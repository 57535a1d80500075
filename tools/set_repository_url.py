"""Point a copy of the course at its own GitHub repository (run once after forking).

    python tools/set_repository_url.py https://github.com/you/attention-book

The repository URL lives in `repository.url` of _config.yml (launch buttons, the repository
button, the student release). The same URL is repeated where a reader sees or runs it: the setup
cell of every notebook (``REPO_URL``, which installs the companion package in Colab; a test
compares it with _config.yml) and the clone/Colab lines of the docs. This script replaces the
current URL (read from _config.yml) by the new one in all of them, and prints what it changed.
The generated student notebooks (``student/``) are not edited in place: they are generated again
from the changed chapters (tools/make_student_notebooks.py, which keeps a copy someone edited).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
# Every file that names the repository URL (globs relative to the repository root).
FILES = ["_config.yml", "notebooks/*.ipynb", "book/*.ipynb", "book/*.md", "README.md", "CONTRIBUTING.md",
         "pyproject.toml"]
URL = re.compile(r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def current_url(root: Path) -> str:
    import yaml

    return yaml.safe_load((root / "_config.yml").read_text())["repository"]["url"]


def set_repository_url(new_url: str, root: Path = ROOT) -> List[Path]:
    """Replace the current URL by ``new_url`` in every file of FILES; return the files changed."""
    if not isinstance(new_url, str):
        raise TypeError(f"new_url must be a string, got {type(new_url).__name__}")
    new_url = new_url.rstrip("/").removesuffix(".git")
    if not URL.match(new_url):
        raise ValueError(f"new_url={new_url!r} is not a GitHub repository URL: pass https://github.com/OWNER/NAME")
    old_url = current_url(root)
    changed = []
    for pattern in FILES:
        for path in sorted(root.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            if old_url in text and old_url != new_url:
                path.write_text(text.replace(old_url, new_url), encoding="utf-8")
                changed.append(path)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="https://github.com/OWNER/NAME of your copy")
    args = parser.parse_args(argv)
    old = current_url(ROOT)
    try:
        changed = set_repository_url(args.url)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    for path in changed:
        print(f"{path.relative_to(ROOT)}: {old} -> {args.url}")
    print(f"{len(changed)} files changed; the student notebooks follow the chapters:")
    sys.path.insert(0, str(ROOT / "tools"))
    from make_student_notebooks import main as make_student_notebooks

    return make_student_notebooks([])


if __name__ == "__main__":
    sys.exit(main())
