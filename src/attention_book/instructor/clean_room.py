"""The own-work run: each answer once more in a fresh sandbox that holds only the student's code.

"Write your own" (an exercise's rules and "own work only") is decided by what the answer does,
where the student's code cannot interfere with the decision:

1. **A fresh kernel with the student's own cells only.** Beside the notebook's normal run, the
   grader starts a second sandbox (:class:`OwnWorkRun`: it imports what it needs, then waits for
   the normal run's results) and runs a trusted preamble (the chapter's imports of
   third-party modules, the package objects the exercise allows, the grader's request handler)
   followed by the cells the student wrote (answers and added cells), and none of the chapter's
   cells: the chapter's worked functions and classes do not exist there, and the package's
   finished modules are hidden from it (empty files), except the ones the chapter's allowed
   objects and probes need (:func:`visible_modules`). An answer that reaches the chapter's code
   through a dict, ``__main__``, ``globals()`` or the notebook's namespace finds nothing there.
2. **The same hidden tests run on that kernel.** An exercise keeps the smaller of its two scores
   (the normal run's, this run's); when this run's is smaller the exercise's results are this
   run's, each hint saying so, and the submission is flagged.
3. **Rules on operations are judged on operations the grader replays** (:class:`CleanSession`):
   for an exercise with an ``ops`` rule (:mod:`attention_book.checks.rules`), each call is a
   ``trace`` request: the kernel sends the tensor operations the call ran
   (:mod:`attention_book.checks.opgraph`) and the grader runs them itself, bounded, on its own
   copies of the inputs: the values the tests compare are the grader's, so a notebook that
   patches its own process gains nothing. A forbidden operation (``_softmax``, ``logsumexp``, a
   lookup of the weight, a kernel that groups heads) scores the exercise 0 and is flagged. Each
   graph is also replayed on fresh inputs drawn from a secret seed and compared with a graph
   recorded on those inputs: numbers computed outside the recorded operations (NumPy, Python
   lists, values read with ``.item()``, a forged reply) do not carry over, and the submission is
   flagged for the instructor (not the calls whose output depends on a random draw: a dropout
   mask differs from draw to draw). A rule may also require a call (ex-10-sdpa: each call must
   reach ``F.scaled_dot_product_attention``). A module's answer (ex-07-from-memory) is run by the
   hidden tests' procedures (``probe``): those the rule lists (``probes``) are traced, construction
   and forward, and judged on the operations and torch calls they recorded, not replayed.
4. **A stub is a stub.** An answer whose functions still start with the release's ``raise
   NotImplementedError`` scores 0 ("not implemented"), whatever its kernel replies.

Only exercises that scored something in the normal run are checked (none: the kernel is stopped
unused). Its time counts in the worker's hard deadline (:func:`extra_seconds`). Without the
sandbox (``--unsafe``) nothing is hidden.
"""

from __future__ import annotations

import ast
import dataclasses
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

from ..checks.answers import parse_cell
from ..checks.rules import Rule, chapter_code, rule
from .hidden import AnswerError, HiddenTest, Session
from .planning import Plan

__all__ = ["check_own_work", "OwnWorkRun", "decide", "Findings", "chapter_names_missing", "CleanSession", "clean_cells",
           "visible_modules", "hidden_files", "extra_seconds", "still_stub", "CLEAN_CELLS_SECONDS", "OWN_CELLS"]

#: the least time the student's own cells get in the fresh kernel; they get the notebook's own
#: limit when it is longer (a student's cell may train a model: an honest notebook that ran in
#: time must not lose its own-work decision to a shorter limit)
CLEAN_CELLS_SECONDS = 60.0
OWN_CELLS = "in a fresh kernel holding only your own cells"
#: package files the fresh kernel always sees: the request handler and what it imports, the
#: operation recorder and the self-check machinery (no finished attention code)
ALWAYS_VISIBLE = {"__init__.py", "utils.py", "instructor/__init__.py", "instructor/kernel_side.py",
                  "instructor/wire.py", "instructor/sandbox_init.py", "instructor/probes.py",
                  "checks/__init__.py", "checks/core.py", "checks/answers.py", "checks/numbering.py",
                  "checks/rules.py", "checks/opgraph.py", "checks/modules.py"}
#: imports of the chapter's cells left out of the preamble (slow, and no answer needs them)
SKIPPED_IMPORTS = ("matplotlib", "IPython", "ipywidgets", "anywidget", "attention_book")
#: calls whose graphs are also replayed on fresh inputs (each costs one more request)
MAX_FRESH_CHECKS = 4


def extra_seconds(options) -> float:
    """The most time the own-work run adds to a submission (for the worker's hard deadline)."""
    from .runner import START_SECONDS

    return START_SECONDS + max(float(options.timeout), CLEAN_CELLS_SECONDS) + float(options.tests_timeout)


# ------------------------------------------------------------------------------------------------
# What the fresh kernel sees
# ------------------------------------------------------------------------------------------------


def package_dir() -> Path:
    import attention_book

    return Path(attention_book.__file__).resolve().parent


def _imported_modules(path: Path, module: str, within: Optional[ast.AST] = None) -> Set[str]:
    """Package modules a file (or one function of it) imports, absolute or relative."""
    found: Set[str] = set()
    try:
        tree = within if within is not None else ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return found
    package = module.rsplit(".", 1)[0] if not path.name == "__init__.py" else module
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "attention_book"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "attention_book":
                continue
            found.add(target)
            found |= {f"{target}.{a.name}" for a in node.names}  # submodules imported by name
    return found


def _module_file(module: str) -> Optional[Path]:
    root = package_dir()
    parts = module.split(".")[1:]
    candidate = root.joinpath(*parts)
    if candidate.is_dir() and (candidate / "__init__.py").is_file():
        return candidate / "__init__.py"
    file = candidate.with_suffix(".py") if parts else root / "__init__.py"
    return file if file.is_file() else None


def _closure(modules: Set[str]) -> Set[str]:
    """``modules`` and every package module they import, transitively (with parent packages)."""
    done: Set[str] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        if module in done:
            continue
        path = _module_file(module)
        if path is None:
            continue
        done.add(module)
        parts = module.split(".")
        todo += [".".join(parts[:n]) for n in range(1, len(parts))]
        todo += list(_imported_modules(path, module))
    return done


def visible_modules(chapter_number: Optional[int], labels: List[str]) -> Set[str]:
    """Package modules the fresh kernel needs beyond :data:`ALWAYS_VISIBLE`: those of the objects
    the chapter's exercises may use (``allowed`` in :mod:`attention_book.checks.rules`) and those
    the chapter's probes (:mod:`.probes`, ``chNN.*``) import, with what they import."""
    wanted: Set[str] = set()
    for label in labels:
        for entry in rule(label).allowed:
            if "." in entry:
                wanted.add(entry.rsplit(".", 1)[0])
    probes = package_dir() / "instructor" / "probes.py"
    prefix = f"ch{chapter_number:02d}." if chapter_number is not None else "\0"
    try:
        tree = ast.parse(probes.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        tree = ast.Module(body=[], type_ignores=[])
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        names = [d.args[0].value for d in node.decorator_list if isinstance(d, ast.Call) and d.args
                 and isinstance(d.args[0], ast.Constant) and isinstance(d.args[0].value, str)]
        if any(name.startswith(prefix) or name.startswith("module.") for name in names):
            wanted |= _imported_modules(probes, "attention_book.instructor.probes", node)
    return _closure(wanted)


def hidden_files(chapter_number: Optional[int], labels: List[str]) -> List[Path]:
    """The package's files the fresh kernel must not read (replaced by empty ones in its sandbox),
    and its byte-code caches."""
    root = package_dir()
    visible = set(ALWAYS_VISIBLE)
    for module in visible_modules(chapter_number, labels):
        path = _module_file(module)
        if path is not None:
            visible.add(path.relative_to(root).as_posix())
    found: List[Path] = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_dir() and path.name == "__pycache__":
            found.append(path)
        elif path.is_file() and path.suffix in (".py", ".pyc") and "__pycache__" not in relative \
                and relative not in visible:
            found.append(path)
    return found


def _preamble(course_texts: List[str], labels: List[str]) -> str:
    """The fresh kernel's first cell (trusted): the grader's request handler, the chapter's
    third-party imports, the objects the exercises allow."""
    lines = ["import attention_book.instructor.kernel_side  # the grader's requests, before any student code",
             "import attention_book.checks.opgraph"]
    seen: Set[str] = set()
    for text in course_texts:
        tree = parse_cell(text)
        for node in tree.body if tree is not None else []:
            if not isinstance(node, (ast.Import, ast.ImportFrom)) or getattr(node, "level", 0):
                continue
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.split(".")[0] in SKIPPED_IMPORTS for m in modules):
                continue
            statement = ast.unparse(node)
            if statement not in seen:
                seen.add(statement)
                lines.append(f"try:\n    {statement}\nexcept Exception:\n    pass")
    for label in labels:
        for entry in rule(label).allowed:
            if "." in entry:
                module, name = entry.rsplit(".", 1)
                statement = f"from {module} import {name}"
                if statement not in seen:
                    seen.add(statement)
                    lines.append(statement)
    return "\n".join(lines) + "\n"


def clean_cells(plan: Plan, labels: List[str], course_texts: List[str]) -> Tuple[List[dict], Dict[int, List[str]]]:
    """The fresh kernel's cells (the preamble, then the student's answer and added cells in their
    order) and where each exercise's hidden tests run: after the last student cell that came
    before the place its tests ran in the normal run."""
    from nbformat.v4 import new_code_cell

    cells = [new_code_cell(_preamble(course_texts, labels))]
    cells[0].metadata["attention_book_grader"] = {"role": "preamble", "exercise": ""}
    where: Dict[int, int] = {}  # index in plan.cells -> index in cells of the last student cell so far
    for index, cell in enumerate(plan.cells):
        info = cell.metadata.get("attention_book_grader") or {}
        if info.get("role") in ("answer", "added"):
            copy = new_code_cell(cell.get("source", ""))
            copy.metadata["attention_book_grader"] = dict(info)
            cells.append(copy)
        where[index] = len(cells) - 1
    points: Dict[int, List[str]] = {}
    for index, point_labels in plan.points.items():
        for label in point_labels:
            if label in labels:
                points.setdefault(-1 if index == -1 else where.get(index, 0), []).append(label)
    return cells, points


# ------------------------------------------------------------------------------------------------
# A stub is a stub
# ------------------------------------------------------------------------------------------------


def _raises_not_implemented(node: ast.AST) -> bool:
    if not isinstance(node, ast.Raise) or node.exc is None:
        return False
    target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(target, ast.Name) and target.id == "NotImplementedError"


def _trivial(node: ast.AST) -> bool:
    """A statement a stub holds before its ``raise``: a docstring, ``pass``, ``super().__init__()``."""
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return True
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        return (isinstance(func, ast.Attribute) and func.attr == "__init__" and isinstance(func.value, ast.Call)
                and isinstance(func.value.func, ast.Name) and func.value.func.id == "super")
    return False


def _is_stub_function(node: ast.AST) -> bool:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    for statement in node.body:
        if _raises_not_implemented(statement):
            return True
        if not _trivial(statement):
            return False
    return False


def _is_stub(node: ast.AST) -> bool:
    if isinstance(node, ast.ClassDef):  # every method still the release's stub
        methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return bool(methods) and all(_is_stub_function(m) for m in methods)
    return _is_stub_function(node)


def still_stub(plan: Plan, label: str) -> bool:
    """Whether every function or class the exercise's answer cells define is, as the student's
    cells last define it, still the release's stub (it starts with ``raise NotImplementedError``)."""
    answer = parse_cell(plan.sources.get(label, "") or "")
    if answer is None:
        return False
    names = [n.name for n in answer.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    if not names:
        return False
    last: Dict[str, ast.AST] = {}
    for cell in plan.cells:
        info = cell.metadata.get("attention_book_grader") or {}
        if info.get("role") not in ("answer", "added"):
            continue
        tree = parse_cell(cell.get("source", ""))
        for node in tree.body if tree is not None else []:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in names:
                last[node.name] = node
    return all(name in last and _is_stub(last[name]) for name in names)


# ------------------------------------------------------------------------------------------------
# Calls judged on the operations the grader replays
# ------------------------------------------------------------------------------------------------


@dataclass
class Findings:
    violations: List[str] = field(default_factory=list)  # forbidden operations reached
    not_general: List[str] = field(default_factory=list)  # functions whose graphs did not carry over
    refused: List[str] = field(default_factory=list)  # graphs the grader would not replay
    misreported: List[str] = field(default_factory=list)  # values the kernel reported differently


def _copy(value, depth=0):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list) and depth < 8:
        return [_copy(v, depth + 1) for v in value]
    if isinstance(value, tuple) and depth < 8:
        return tuple(_copy(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 8:
        return {k: _copy(v, depth + 1) for k, v in value.items()}
    return value


class CleanSession(Session):
    """The fresh kernel's session for one exercise: requests pass through, except calls of the
    function an ``ops`` rule governs, which are traced there and replayed here
    (:mod:`attention_book.checks.opgraph`); what the replay shows is kept in :attr:`findings`."""

    def __init__(self, inner: Session, own: Rule):
        self.inner, self.rule = inner, own
        self.source = getattr(inner, "source", "")
        self.findings = Findings()
        self.kept: Dict[str, Tuple[Any, List[Any]]] = {}  # autograd graphs of "grad" requests
        self.fresh_checks = 0

    def note_mutation(self, name: str) -> None:
        self.inner.note_mutation(name)

    def _governed(self, op: str, payload: Dict[str, Any]) -> bool:
        if self.rule.ops is None:
            return False
        if op == "backward":
            return str(payload.get("graph")) in self.kept
        if op == "probe":
            return payload.get("name") in self.rule.probes
        return op in ("call", "grad") and (not self.rule.function or payload.get("name") == self.rule.function)

    def request(self, op: str, /, **payload: Any) -> dict:
        if not self._governed(op, payload):
            return self.inner.request(op, **payload)
        if op == "backward":
            return self._backward(payload)
        if op == "probe":
            return self._probe(payload)
        import torch

        from .kernel_side import plain

        name = payload.get("name")
        args, kwargs = list(payload.get("args") or []), dict(payload.get("kwargs") or {})
        graph, reported = self._trace(name, args, kwargs)
        mine_args, mine_kwargs = _copy(args), _copy(kwargs)
        leaves = []
        if op == "grad":
            for position in payload.get("positions") or []:
                if 0 <= position < len(mine_args) and isinstance(mine_args[position], torch.Tensor):
                    mine_args[position] = mine_args[position].requires_grad_(True)
                    leaves.append(mine_args[position])
            for key in payload.get("names") or []:
                if isinstance(mine_kwargs.get(key), torch.Tensor):
                    mine_kwargs[key] = mine_kwargs[key].requires_grad_(True)
                    leaves.append(mine_kwargs[key])
        value = self._replay(graph, mine_args, mine_kwargs)
        self._judge(graph, name, args, kwargs)
        from ..checks.opgraph import is_random, same_values

        if not is_random(graph) and not same_values(plain(value), reported):
            if name not in self.findings.misreported:
                self.findings.misreported.append(str(name))
        if op == "grad":
            self.kept[str(payload.get("graph"))] = (value, leaves)
            return {"ok": True, "value": plain(value)}
        after = {"args": [plain(a) if isinstance(a, torch.Tensor) else None for a in mine_args],
                 "kwargs": {k: plain(v) for k, v in mine_kwargs.items() if isinstance(v, torch.Tensor)}}
        return {"ok": True, "value": plain(value), "after": after}

    def _probe(self, payload) -> dict:
        """A hidden-test procedure that runs a module's answer (its construction and forward):
        traced in the kernel and judged on what it recorded. Not replayed: a module's state
        changes in ways no operation records (``param.data = ...`` in ``.double()``), so the
        values the tests compare are the kernel's, as for every probe."""
        name, inputs = payload.get("name"), dict(payload.get("inputs") or {})
        graph, value = self._recorded(self.inner.request("probe", name=name, inputs=inputs, trace=True), name)
        return {"ok": True, "value": value}

    def _trace(self, name, args, kwargs):
        return self._recorded(self.inner.request("trace", name=name, args=args, kwargs=kwargs), name, args, kwargs)

    def _recorded(self, reply, name, args=(), kwargs=None):
        """``(graph, reported value)`` of a trace reply; a call that failed in the kernel is judged
        on what it reached (a fused kernel the recorder cannot run) and fails here too."""
        from ..checks.opgraph import Graph, GraphError, flatten_tensors, violations

        try:
            graph = Graph.from_data(reply.get("graph"))
        except GraphError as err:
            self._refuse(str(err))
        failed = reply.get("failed")
        if failed is not None or self.rule.probes and name in self.rule.probes:
            arguments = flatten_tensors(args, kwargs) if failed is None else None
            for found in violations(graph, self.rule.ops, arguments, complete=failed is None):
                if found not in self.findings.violations:
                    self.findings.violations.append(found)
        if failed is not None:
            failed = list(failed) if isinstance(failed, (list, tuple)) else []
            raise AnswerError(str(failed[0] if failed else "Error")[:100], str(failed[1] if len(failed) > 1 else "")[:500])
        return graph, reply.get("value")

    def _replay(self, graph, args, kwargs):
        from ..checks.opgraph import GraphError, replay

        try:
            return replay(graph, tuple(args), kwargs)
        except GraphError as err:
            self._refuse(str(err))
        except Exception as err:  # an operation that fails on these inputs: the answer's error
            raise AnswerError(type(err).__name__, str(err)[:500]) from None

    def _refuse(self, text: str):
        text = f"the grader would not replay the operations it sent ({text[:200]})"
        if text not in self.findings.refused:
            self.findings.refused.append(text)
        raise AnswerError("GraphRefused", text, from_grader=True)

    def _judge(self, graph, name, args, kwargs) -> None:
        from ..checks.opgraph import (GraphError, flatten_tensors, generalizes, has_float_inputs, is_random, perturb,
                                      violations)

        for found in violations(graph, self.rule.ops, flatten_tensors(args, kwargs)):
            if found not in self.findings.violations:
                self.findings.violations.append(found)
        if self.fresh_checks >= MAX_FRESH_CHECKS or not has_float_inputs(args, kwargs) or is_random(graph):
            return  # (a dropout mask: values differ from draw to draw)
        self.fresh_checks += 1
        fresh_args, fresh_kwargs = perturb(tuple(args), kwargs)
        try:
            fresh, _ = self._trace(name, list(fresh_args), fresh_kwargs)
            ok = generalizes(graph, fresh, tuple(_copy(list(fresh_args))), _copy(fresh_kwargs))
        except (AnswerError, GraphError, RuntimeError, ValueError, TypeError, IndexError):
            ok = False
        if not ok and str(name) not in self.findings.not_general:
            self.findings.not_general.append(str(name))

    def _backward(self, payload) -> dict:
        import torch

        from .kernel_side import plain

        out, leaves = self.kept.pop(str(payload.get("graph")))
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        pairs = [(o, g) for o, g in zip(outs, payload.get("upstream") or [])
                 if g is not None and isinstance(o, torch.Tensor) and o.requires_grad
                 and isinstance(g, torch.Tensor) and g.shape == o.shape]
        grads = (torch.autograd.grad([o for o, _ in pairs], leaves, [g.to(o.dtype) for o, g in pairs],
                                     allow_unused=True) if pairs and leaves else tuple(None for _ in leaves))
        return {"ok": True, "value": plain(tuple(grads))}


# ------------------------------------------------------------------------------------------------
# The run and the decision
# ------------------------------------------------------------------------------------------------


def _fraction(results, tests: List[HiddenTest]) -> float:
    from .scoring import score_exercise

    return score_exercise(results, tests, 1.0)[0] if results is not None else 0.0


def _flag(record: dict, label: str, text: str) -> None:
    flags = record.setdefault("answer_flags", {}).setdefault(label, [])
    if text not in flags:
        flags.append(text)


_MISSING_NAME = r"name '([A-Za-z_][A-Za-z0-9_]*)' is not defined"


def chapter_names_missing(errors: List[dict], label: str) -> List[str]:
    """Names of the chapter's (or the package's) code that the student's cells asked for in the
    fresh kernel (from its cells' ``NameError`` s)."""
    import re

    body = chapter_code(label)
    found: List[str] = []
    for error in errors:
        match = re.search(_MISSING_NAME, str(error.get("evalue", "")))
        if error.get("ename") == "NameError" and match and match.group(1) in body and match.group(1) not in found:
            found.append(match.group(1))
    return found


def _explained(hint: str, label: str, missing: List[str] = ()) -> str:
    """A clean-room hint, with the chapter's name it missed said plainly."""
    import re

    match = re.search(_MISSING_NAME, hint)
    names = ([match.group(1)] if match and match.group(1) in chapter_code(label) else []) + list(missing)
    if names:
        return (f"{OWN_CELLS} `{names[0]}` does not exist: your answer uses the chapter's code "
                "(or the package's) instead of its own; write your own (0 points)")
    return f"{OWN_CELLS}: {hint}"


class OwnWorkRun:
    """The own-work run of one submission, started beside the notebook's normal run.

    :meth:`start` (before the normal run) starts the fresh kernel in a thread: it runs the
    preamble (imports: the slow part) and then waits. :meth:`finish` (after the normal run) says
    which exercises to check (those that scored something), lets the kernel run the student's
    cells and the hidden tests, waits for it and writes the verdicts into the record
    (:func:`decide`). :meth:`cancel` ends it unused."""

    def __init__(self, plan: Plan, labels: List[str], tests: Dict[str, List[HiddenTest]], cache, options,
                 course_root: Path, chapter_number: Optional[int], course_texts: List[str]):
        self.plan, self.tests, self.cache, self.course_root = plan, tests, cache, course_root
        self.labels = [label for label in labels if tests.get(label)]
        self.stubs = [label for label in self.labels if still_stub(plan, label)]
        self.runnable = [label for label in self.labels if label not in self.stubs]
        self.cells, self.points = clean_cells(plan, self.runnable, course_texts)
        hidden = list(options.hidden_paths) + hidden_files(chapter_number, self.runnable)
        self.options = dataclasses.replace(options, hidden_paths=hidden, slot=f"{options.slot}-own",
                                           timeout=max(float(options.timeout), CLEAN_CELLS_SECONDS),
                                           keep_all_outputs=False)
        self.wait_limit = float(options.timeout) + float(options.tests_timeout) + 2 * 90.0
        self.candidates: List[str] = []
        self.found: Dict[str, Tuple[List[dict], Findings]] = {}
        self.go = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.run = None
        self.failed = ""

    def start(self) -> "OwnWorkRun":
        if self.runnable:
            self.thread = threading.Thread(target=self._run, name="own-work run", daemon=True)
            self.thread.start()
        return self

    def _run(self) -> None:
        from .references import ReferenceCache, run_tests
        from .runner import run_notebook

        def wait() -> bool:
            self.go.wait(self.wait_limit)
            return bool(self.candidates)

        def on_point(point_labels, session) -> None:
            for label in point_labels:
                if label not in self.candidates:
                    continue
                session.source = self.plan.sources.get(label, "")
                clean = CleanSession(session, rule(label))
                results = run_tests(self.tests.get(label, []), clean, ReferenceCache.Lookup(self.cache, ""))
                self.found[label] = (results, clean.findings)

        try:
            self.run = run_notebook(self.cells, self.points, on_point, self.options, self.course_root, pause=(0, wait))
        except Exception as err:  # noqa: BLE001 - a grader problem: reported in finish()
            self.failed = f"{type(err).__name__}: {err}"[:300]

    def cancel(self) -> None:
        self.candidates = []
        self.go.set()

    def finish(self, record: dict) -> None:
        """Check the exercises that scored something (see the module's docstring); updates
        ``record``: ``results``, ``zero`` (rules broken, stubs) and ``answer_flags``."""
        from .runner import PAUSE_STOP

        results = record.setdefault("results", {})
        zero = record.setdefault("zero", {})
        scored = [label for label in self.labels
                  if label not in zero and _fraction(results.get(label), self.tests[label]) > 0]
        for label in scored:
            if label in self.stubs:
                zero[label] = ("not implemented: your answer still starts with `raise NotImplementedError` (the "
                               "values came from somewhere else)")
                _flag(record, label, "a stub answer that got values: the kernel's replies were not the answer's")
        self.candidates = [label for label in scored if label not in self.stubs]
        self.go.set()
        if self.thread is None:
            return
        self.thread.join(extra_seconds(self.options) + 30.0)
        run = self.run
        if self.thread.is_alive() or run is None or self.failed:
            why = self.failed or "it did not finish"
            for label in self.candidates:
                _flag(record, label, f"the own-work run could not run ({why}); the answer was not checked there")
            record["retry"] = True
            return
        for label in self.candidates:
            if label not in self.found:
                stop = run.stop or "the fresh kernel did not reach the exercise"
                if stop.startswith("the autograder could not run"):
                    _flag(record, label, f"the own-work run could not run ({stop}); the answer was not checked there")
                    record["retry"] = True
                    continue
                zero[label] = f"{OWN_CELLS} the answer was not reached ({stop[:200]}): 0 points"
                _flag(record, label, f"own-work run stopped before the exercise: {stop[:200]}")
                continue
            decide(record, label, self.tests[label], *self.found[label],
                   missing=chapter_names_missing(run.cell_errors, label))
        if run.stop and run.stop != PAUSE_STOP and not run.stop.startswith("the autograder could not run"):
            text = f"the own-work run stopped: {run.stop[:200]}"
            if text not in record.setdefault("flags", []):
                record["flags"].append(text)


def check_own_work(plan: Plan, labels: List[str], tests: Dict[str, List[HiddenTest]], cache, options,
                   course_root: Path, record: dict, chapter_number: Optional[int], course_texts: List[str]) -> None:
    """The own-work run for one submission after its normal run, in one go (see :class:`OwnWorkRun`
    to start it beside the normal run); updates ``record``."""
    OwnWorkRun(plan, labels, tests, cache, options, course_root, chapter_number, course_texts).start().finish(record)


def decide(record: dict, label: str, tests: List[HiddenTest], clean_results: List[dict], findings: Findings,
           missing: List[str] = ()) -> None:
    """The own-work run's verdict on one exercise, written into ``record`` (see the module's
    docstring): a rule broken on replayed operations scores 0; a smaller score there replaces the
    normal run's results; values that did not come from the answer's operations are flagged."""
    results = record.setdefault("results", {})
    zero = record.setdefault("zero", {})
    own = rule(label)
    if findings.violations:
        from ..checks.opgraph import rule_hint

        names = ", ".join(findings.violations)
        message = rule_hint(own.ops, findings.violations) if own.ops is not None else names
        zero[label] = f"breaks the exercise's rule: {message} (0 points)"
        _flag(record, label, f"breaks the exercise's rule ({names}), seen in the operations the grader replayed")
    if _fraction(clean_results, tests) < _fraction(results.get(label), tests):
        results[label] = [dict(entry, hint=_explained(entry.get("hint") or "failed", label, missing))
                          if not entry.get("passed") else entry for entry in clean_results]
        failed = next((e for e in clean_results if not e.get("passed")), {})
        why = (f"uses {', '.join(f'`{name}`' for name in missing)}, the chapter's code" if missing
               else str(failed.get("hint") or "failed")[:160])
        _flag(record, label, f"works only with code it did not write ({OWN_CELLS}: {why})")
    if findings.not_general:
        _flag(record, label, f"values of {', '.join(findings.not_general)} did not come from its tensor operations "
                             "(they did not carry over to fresh inputs: NumPy, Python numbers or a forged reply?): "
                             "look at the answer")
    if findings.misreported:
        _flag(record, label, "its kernel reported values its own operations do not give (a forged reply?)")
    for text in findings.refused:
        _flag(record, label, text)
