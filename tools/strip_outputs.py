"""Normalise notebooks for storage: no outputs, no execution counts, stable cell ids, fixed metadata.

    python tools/strip_outputs.py notebooks/*.ipynb          # rewrite in place
    python tools/strip_outputs.py --check notebooks/*.ipynb  # exit 1 if any file would change
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def normalise(nb: dict, stem: str) -> dict:
    for index, cell in enumerate(nb.get("cells", [])):
        cell["id"] = f"{stem[:2]}-{index:03d}"
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell.get("metadata", {}).pop("execution", None)
        if isinstance(cell.get("source"), str):
            cell["source"] = cell["source"].splitlines(keepends=True)
    meta = nb.setdefault("metadata", {})
    keep = {k: meta[k] for k in ("kernelspec", "language_info", "colab", "accelerator", "attention_book") if k in meta}
    keep["kernelspec"] = KERNELSPEC
    keep["language_info"] = {"name": "python"}
    nb["metadata"] = keep
    nb["nbformat"], nb["nbformat_minor"] = 4, 5
    return nb


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changed = []
    for name in [a for a in argv if not a.startswith("--")]:
        path = Path(name)
        text = path.read_text(encoding="utf-8")
        new = dumps(normalise(json.loads(text), path.stem))
        if new != text:
            changed.append(name)
            if not check:
                path.write_text(new, encoding="utf-8")
    if check and changed:
        print("not normalised (run `make strip`):", *changed, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
