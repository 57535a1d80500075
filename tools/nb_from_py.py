"""Write a chapter notebook from a percent-format script (an authoring convenience).

    python tools/nb_from_py.py chapter.py notebooks/02_attention_scores.ipynb

Cells start with ``# %%`` (code) or ``# %% [markdown]`` (markdown, every line prefixed ``# ``);
tags go in brackets after it: ``# %% tags=["solution"]`` or ``# %% [markdown] tags=["solution"]``.
The notebook itself is the source of truth once written; this just saves typing JSON.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from strip_outputs import dumps, normalise  # noqa: E402

HEADER = re.compile(r"^# %%(?P<md> \[markdown\])?(?: tags=(?P<tags>\[.*\]))?\s*$")


def convert(text: str) -> dict:
    cells = []
    current = None
    for line in text.splitlines():
        match = HEADER.match(line)
        if match:
            current = {
                "cell_type": "markdown" if match.group("md") else "code",
                "metadata": {"tags": json.loads(match.group("tags"))} if match.group("tags") else {},
                "lines": [],
            }
            cells.append(current)
            continue
        if current is None:
            continue
        if current["cell_type"] == "markdown":
            line = line[2:] if line.startswith("# ") else line.lstrip("#")
        current["lines"].append(line)
    nb_cells = []
    for cell in cells:
        while cell["lines"] and not cell["lines"][-1].strip():
            cell["lines"].pop()
        while cell["lines"] and not cell["lines"][0].strip():
            cell["lines"].pop(0)
        source = "\n".join(cell["lines"])
        new = {"cell_type": cell["cell_type"], "metadata": cell["metadata"], "source": source}
        if cell["cell_type"] == "code":
            new.update(outputs=[], execution_count=None)
        nb_cells.append(new)
    return {"cells": nb_cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def main() -> None:
    src, dst = Path(sys.argv[1]), Path(sys.argv[2])
    nb = normalise(convert(src.read_text(encoding="utf-8")), dst.stem)
    dst.write_text(dumps(nb), encoding="utf-8")
    print(f"wrote {dst} ({len(nb['cells'])} cells)")


if __name__ == "__main__":
    main()
