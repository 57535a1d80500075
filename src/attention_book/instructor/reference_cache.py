"""Reference values kept between grading runs (a rerun with nothing changed skips the reference run).

Before grading, :func:`~attention_book.instructor.references.compute_references` runs the
chapter's own notebook and every hidden test against it (about 10-30 s per chapter). Its values
depend only on the grader's code, the chapter notebook, the hidden tests, the points and the
versions of Python and torch, so they are saved in the assignment's output folder
(``.cache/reference-<key>.bin``) under a key that hashes all of those:

* every ``.py`` file of the installed ``attention_book`` package (the grader version: any change
  of the grader, the checks or the chapter code the notebook imports);
* the chapter notebook, its hidden-test file;
* ``sys.version``, ``torch.__version__``, the labels that are graded.

The points per exercise are not part of the key: they change no value and no test result (a
label whose points go from 0 to more changes the labels, and so the key). The same key decides
whether a student's record can be reused, so a change of ``points.toml`` only recomputes totals.

An edit to any of them changes the key, and the reference run happens again. The file holds data
only, in the grader's bounded wire format (:mod:`.wire`: tensors, numbers, strings, tuples, lists,
dicts; no pickle); a file that does not load is ignored (the values are computed again). The
output folder is never visible inside a sandbox.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Iterable, Optional

__all__ = ["cache_key", "load_reference_cache", "save_reference_cache", "CACHE_DIR"]

CACHE_DIR = ".cache"
FORMAT = "attention-book reference cache 3"


def _package_files() -> Iterable[Path]:
    import attention_book

    root = Path(attention_book.__file__).resolve().parent
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def cache_key(course, chapter, hidden_file: Optional[Path], labels: Iterable[str]) -> str:
    """Hash of everything the reference values depend on (see the module's docstring)."""
    import torch

    import attention_book

    digest = hashlib.sha256(FORMAT.encode())
    package = Path(attention_book.__file__).resolve().parent
    for path in _package_files():
        digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for path in (course.root / chapter.path, hidden_file):
        digest.update(str(path.name if path else "-").encode() + b"\0")
        if path is not None and Path(path).is_file():
            digest.update(Path(path).read_bytes())
        digest.update(b"\0")
    digest.update(f"{sys.version}|{torch.__version__}|{chapter.path}|{','.join(labels)}".encode())
    return digest.hexdigest()


def _path(out: Path, key: str) -> Path:
    return Path(out) / CACHE_DIR / f"reference-{key[:32]}.bin"


def load_reference_cache(out: Path, key: str):
    """The saved :class:`ReferenceCache` for ``key``, or None (missing, another key, unreadable)."""
    from .references import ReferenceCache

    path = _path(out, key)
    header = f"{FORMAT}\n{key}\n".encode()
    if not path.is_file() or path.is_symlink():
        return None
    try:
        data = path.read_bytes()
        if not data.startswith(header):
            return None
        return ReferenceCache.from_bytes(data[len(header):])
    except Exception:  # noqa: BLE001 - a damaged or foreign file: compute the values again
        return None


def save_reference_cache(out: Path, key: str, cache) -> Optional[Path]:
    """Save ``cache`` (replacing older keys of this folder); None if it cannot be saved."""
    folder = Path(out) / CACHE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = _path(out, key)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(f"{FORMAT}\n{key}\n".encode() + cache.to_bytes())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except Exception:  # noqa: BLE001 - a value the format cannot hold: grading goes on without a cache
        if tmp.exists():
            tmp.unlink()
        return None
    for old in folder.glob("reference-*"):  # one cache per folder: the current key's
        if old != path:
            old.unlink()
    return path
