"""Reading the reader's answer: its source, the names it calls, whether it is the package's code.

Self-checks use :func:`answer_source` and :func:`calls` (re-exported by
:mod:`attention_book.checks.core`) for rules such as "without torch.softmax";
:func:`~attention_book.checks.core.register` uses :func:`own_work` to refuse an answer that is,
or uses, the package's own finished code or the chapter body's ("write your own", 0 points).
:class:`StaticAnswer` applies the same rules to a submitted file's source (the autograder).

Everything works on code typed in a notebook cell (IPython keeps cell sources in
:mod:`linecache`), in a module file, and on answers run by ``tests.wrong_answers.load_answer``.
"""

from __future__ import annotations

import ast
import builtins
import dis
import functools
import importlib
import inspect
import linecache
import sys
import textwrap
import types
from typing import Iterable, List, Optional, Set, Tuple

__all__ = ["answer_source", "calls", "package_use", "own_work", "chapter_code_use", "dynamic_use", "digest_of",
           "definition_digest", "indexes_argument", "parse_cell", "StaticAnswer", "PACKAGE", "WRITE_YOUR_OWN"]

PACKAGE = "attention_book"
WRITE_YOUR_OWN = "write your own"


def _hint(message: str) -> Exception:
    from .core import Hint  # core imports this module: import Hint when it is needed

    return Hint(message)


# --------------------------------------------------------------------------------------------------
# Reading the answer's code
# --------------------------------------------------------------------------------------------------

_NO_SOURCE = (
    "could not read the source of {what}: define it with `def` (or `class`) in a notebook cell, "
    "run that cell, then run the self-check again"
)


def _unwrap(obj):
    """The function or class that holds the answer's code (methods, partials and wrappers peeled)."""
    for _ in range(20):
        if isinstance(obj, functools.partial):
            obj = obj.func
        elif isinstance(obj, (types.MethodType, staticmethod, classmethod)):
            obj = obj.__func__
        elif isinstance(obj, types.FunctionType) and hasattr(obj, "__wrapped__"):
            obj = obj.__wrapped__
        else:
            break
    if isinstance(obj, (types.FunctionType, type, types.BuiltinFunctionType, types.ModuleType)):
        return obj
    if callable(obj) and not isinstance(obj, (types.BuiltinMethodType,)):
        return type(obj)  # an object of the reader's class (e.g. an nn.Module): its class
    return obj


def _own_functions(cls: type) -> List[types.FunctionType]:
    """Functions defined in a class body (methods, static/class methods, properties)."""
    found = []
    for value in vars(cls).values():
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if isinstance(value, property):
            found += [f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType)]
        elif isinstance(value, types.FunctionType):
            found.append(value)
    return found


def _class_source(cls: type) -> Optional[str]:
    """A class's source from the file or notebook cell its methods were defined in.

    ``inspect.getsource`` looks classes up through their module's ``__file__``, which fails in
    a notebook (``__main__`` has no file) and finds the wrong file for exec'd code.
    """
    for function in _own_functions(cls):
        code = function.__code__
        lines = linecache.getlines(code.co_filename)
        if not lines:
            continue
        try:
            tree = ast.parse("".join(lines))
        except SyntaxError:
            continue
        best = None
        for node in ast.walk(tree):
            if (isinstance(node, ast.ClassDef) and node.name == cls.__name__
                    and node.lineno <= code.co_firstlineno <= (node.end_lineno or node.lineno)):
                if best is None or node.lineno > best.lineno:  # the innermost match
                    best = node
        if best is not None:
            start = min([best.lineno] + [d.lineno for d in best.decorator_list])
            return textwrap.dedent("".join(lines[start - 1 : best.end_lineno]))
    if cls.__module__ != "__main__":  # a class in a real module file
        try:
            return textwrap.dedent(inspect.getsource(cls))
        except (OSError, TypeError):
            return None
    return None


def _source_or_none(obj) -> Optional[str]:
    target = _unwrap(obj)
    if isinstance(target, type):
        return _class_source(target)
    if isinstance(target, types.FunctionType):
        try:
            return textwrap.dedent(inspect.getsource(target))
        except (OSError, TypeError):
            return None
    return None


def answer_source(obj) -> str:
    """The source code of the reader's function or class (or of an object's class).

    Works for code typed in a notebook cell, in a module file and for answers run by
    ``tests.wrong_answers.load_answer``. Raises :class:`~attention_book.checks.core.Hint` when there is no source to read
    (inside a self-check test that becomes a failed test with that hint).
    """
    source = _source_or_none(obj)
    if source is None:
        what = getattr(_unwrap(obj), "__qualname__", None) or type(obj).__name__
        raise _hint(_NO_SOURCE.format(what=f"`{what}`"))
    return source


def _parse(source: str) -> Optional[ast.AST]:
    try:
        return ast.parse(source)
    except SyntaxError:
        pass
    # a lambda in the middle of a larger expression: keep the longest parsable prefix of lines
    lines = source.splitlines()
    for end in range(len(lines), 0, -1):
        try:
            return ast.parse("\n".join(lines[:end]).rstrip(",( \t"))
        except SyntaxError:
            continue
    return None


def _dotted(node: ast.AST) -> Optional[str]:
    """``torch.nn.functional.softmax`` for an attribute chain on a name; ``?.sum`` after a call."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    elif parts:
        parts.append("?")  # e.g. x.exp().sum: the object is computed
    else:
        return None
    return ".".join(reversed(parts))


_ALIASES = {"F": "torch.nn.functional", "nn": "torch.nn", "np": "numpy", "tf": "tensorflow"}
_MISSING = object()


def _resolve(dotted: str, namespace: dict, import_missing: bool = False):
    """The object a dotted name refers to in ``namespace``.

    With ``import_missing`` (only for the names a check asks about, never for names taken from
    the reader's code) a missing head is imported: ``torch``, or ``F`` / ``nn`` / ``np`` aliases.
    """
    head, *rest = dotted.split(".")
    if head == "?":
        return _MISSING
    obj = namespace.get(head, _MISSING)
    if obj is _MISSING:
        obj = getattr(builtins, head, _MISSING)
    if obj is _MISSING and import_missing and (rest or head in _ALIASES):
        module = _ALIASES.get(head, head)
        try:
            obj = importlib.import_module(module)
        except Exception:
            return _MISSING
    for part in rest:
        obj = getattr(obj, part, _MISSING)
        if obj is _MISSING:
            return _MISSING
    return obj


def _imported_names(tree: ast.AST) -> dict:
    """Names the answer's own ``import`` lines bind -> the dotted path they stand for."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:  # import torch.nn.functional as F: F is torch.nn.functional
                    found[alias.asname] = alias.name
                else:  # import torch.nn: binds torch
                    head = alias.name.split(".")[0]
                    found[head] = head
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                found[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return found


def _resolve_loaded(dotted: str):
    """The object behind ``dotted`` among modules already imported (never imports anything)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is not None:
            obj = module
            for part in parts[cut:]:
                obj = getattr(obj, part, _MISSING)
                if obj is _MISSING:
                    return _MISSING
            return obj
    return _MISSING


def _bound_names(tree: ast.AST) -> Set[str]:
    """Names the answer itself defines (arguments, assignments, inner defs): not library calls."""
    bound: Set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
    return bound


def _same(value, wanted: str, resolved) -> bool:
    """``value`` is the object ``wanted`` names (a bare name: any function of that name)."""
    if value is _MISSING:
        return False
    if resolved is not _MISSING and value is resolved:
        return True
    return "." not in wanted and callable(value) and getattr(value, "__name__", None) == wanted


def _matches(found: str, wanted: str) -> bool:
    return found == wanted or found.endswith("." + wanted)


def calls(obj, names: Iterable[str]) -> List[str]:
    """Which of the dotted ``names`` the answer's code calls (or refers to), by its syntax tree.

    ``"torch.softmax"`` matches ``torch.softmax(...)``, ``softmax(...)`` after
    ``from torch import softmax`` and ``sm(...)`` after ``sm = torch.softmax`` at the top of the
    notebook; a bare ``"softmax"`` matches any call ending in ``.softmax`` (``scores.softmax(-1)``,
    ``torch.special.softmax``) and a call of a ``softmax`` the answer did not define itself.
    An answer that *is* one of the names (``my_softmax = torch.softmax``) matches too.
    Returns the matching names in the order given. Raises :class:`~attention_book.checks.core.Hint` when the source cannot be read.
    """
    names = list(names)
    target = _unwrap(obj)
    namespace = getattr(target, "__globals__", None)
    if namespace is None and isinstance(target, type):
        namespace = next((f.__globals__ for f in _own_functions(target)), {})
    namespace = namespace or {}
    resolved = {name: _resolve(name, namespace, import_missing=True) for name in names}
    # the answer is itself one of the named functions (my_softmax = torch.softmax)
    hits: Set[str] = {n for n in names if _same(target, n, resolved[n])}
    if not isinstance(target, (types.FunctionType, type)):
        return [n for n in names if n in hits]
    tree = _parse(answer_source(obj))
    if tree is None:
        raise _hint(_NO_SOURCE.format(what=f"`{getattr(target, '__qualname__', target)}`"))
    bound = _bound_names(tree)
    imported = _imported_names(tree)
    for node in ast.walk(tree):
        is_call = isinstance(node, ast.Call)
        expr = node.func if is_call else node
        if not isinstance(expr, (ast.Name, ast.Attribute)):
            continue
        if not is_call and not isinstance(getattr(expr, "ctx", None), ast.Load):
            continue
        dotted = _dotted(expr)
        if dotted is None:
            continue
        head, _, tail = dotted.partition(".")
        if head in imported:  # `from torch import softmax` inside the answer: torch.softmax
            dotted = imported[head] + ("." + tail if tail else "")
            value = _resolve_loaded(dotted)
        else:
            value = _resolve(dotted, namespace) if head not in bound else _MISSING
        for name in names:
            if _same(value, name, resolved[name]):
                hits.add(name)
            elif is_call and _matches(dotted, name) and not (
                "." not in dotted and dotted in bound
            ):
                hits.add(name)
    return [name for name in names if name in hits]


# --------------------------------------------------------------------------------------------------
# "Write your own": answers that are, or use, the package's finished code
# --------------------------------------------------------------------------------------------------


def _from_package(obj) -> Optional[str]:
    """``attention_book.x.y`` if ``obj`` is a module, function or class of the package."""
    if isinstance(obj, types.ModuleType):
        name = obj.__name__
        return name if name == PACKAGE or name.startswith(PACKAGE + ".") else None
    if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type, functools.partial)):
        target = obj.func if isinstance(obj, functools.partial) else obj
        module = getattr(target, "__module__", None) or ""
        if module == PACKAGE or module.startswith(PACKAGE + "."):
            return f"{module}.{getattr(target, '__qualname__', getattr(target, '__name__', '?'))}"
    return None


def _is_allowed(obj, allowed: Tuple) -> bool:
    for entry in allowed:
        if isinstance(entry, str):
            module, _, attr = entry.rpartition(".")
            try:
                entry = getattr(importlib.import_module(module), attr) if module else importlib.import_module(attr)
            except Exception:
                try:
                    entry = importlib.import_module(entry if not module else f"{module}.{attr}")
                except Exception:
                    continue
        if obj is entry:
            return True
    return False


def _global_loads(code: types.CodeType) -> Iterable[Tuple[str, str]]:
    """``(opname, name)`` of every global load and import in a code object and its nested code."""
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME", "IMPORT_NAME", "IMPORT_FROM"):
            yield instruction.opname, instruction.argval
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _global_loads(const)


def _message(what: str, how: str) -> str:
    return (
        f"your answer {how} `{what}`, the package's finished version; the exercise asks you to "
        "write the code yourself (torch is fine), so this earns 0 points"
    )


def package_use(obj, allowed: Iterable = (), _seen: Optional[Set[int]] = None) -> str:
    """Why ``obj`` counts as the package's own code (a "write your own" message), else ``""``.

    ``obj`` is refused when it is defined in ``attention_book`` (or is an object of, or a subclass
    of, a class defined there), or when its code imports ``attention_book`` or refers to a module,
    function or class of it: directly, through a default argument or closure, or through a helper
    function or class the reader defined. ``allowed`` lists package objects (or dotted names) an
    exercise may use. Tensors, numbers and other data are never refused.
    """
    allowed = tuple(allowed)
    seen = _seen if _seen is not None else set()
    target = _unwrap(obj)
    if id(target) in seen:
        return ""
    seen.add(id(target))
    if isinstance(target, types.ModuleType):
        where = _from_package(target)
        return _message(where, "is the module") if where and not _is_allowed(target, allowed) else ""
    if not isinstance(target, (types.FunctionType, type)):
        where = _from_package(target)
        return _message(where, "is") if where and not _is_allowed(target, allowed) else ""
    if isinstance(target, type):
        for base in target.__mro__:
            where = _from_package(base)
            if where and not _is_allowed(base, allowed):
                how = "is" if base is target else "subclasses"
                return _message(where, how)
        for function in _own_functions(target):
            found = package_use(function, allowed, seen)
            if found:
                return found
        return ""
    where = _from_package(target)
    if where and not _is_allowed(target, allowed):
        return _message(where, "is")
    namespace = target.__globals__
    for opname, name in _global_loads(target.__code__):
        if opname in ("IMPORT_NAME",) and (name == PACKAGE or name.startswith(PACKAGE + ".")):
            return _message(name, "imports")
        if opname not in ("LOAD_GLOBAL", "LOAD_NAME"):
            continue
        value = namespace.get(name, _MISSING)
        if value is _MISSING:
            continue
        found = _check_referenced(value, allowed, seen)
        if found:
            return found
    extras = list(target.__defaults__ or ()) + list((target.__kwdefaults__ or {}).values())
    for cell in target.__closure__ or ():
        try:
            extras.append(cell.cell_contents)
        except ValueError:  # an empty cell
            pass
    for value in extras:
        found = _check_referenced(value, allowed, seen)
        if found:
            return found
    return ""


def _contents(value, depth: int = 0, budget: Optional[List[int]] = None) -> Iterable:
    """The items of a dict, list, tuple or set a name holds (nested, bounded): code kept in a
    container (``helpers = {"softmax": stable_softmax}``) is still code the answer uses."""
    budget = budget if budget is not None else [2000]
    if depth > 4 or budget[0] <= 0:
        return
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
    else:
        return
    for item in items[:budget[0]]:
        budget[0] -= 1
        yield item
        yield from _contents(item, depth + 1, budget)


def _check_referenced(value, allowed: Tuple, seen: Set[int]) -> str:
    """A name the answer's code uses: refuse package objects, follow the reader's own helpers."""
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        for item in _contents(value):
            found = _check_referenced(item, allowed, seen) if not isinstance(
                item, (dict, list, tuple, set, frozenset)) else ""
            if found:
                return found
        return ""
    if isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type,
                          functools.partial)):
        where = _from_package(value)
        if where:
            return "" if _is_allowed(value, allowed) else _message(where, "uses")
    if isinstance(value, (types.FunctionType, type)) and _written_by_reader(value):
        return package_use(value, allowed, seen)  # a helper the reader wrote: look inside it too
    return ""


def _written_by_reader(obj) -> bool:
    """Defined in a notebook, a script or exec'd code, not in an installed library module."""
    module = getattr(obj, "__module__", None) or ""
    return not module or module == "__main__" or module.startswith("<") or module not in sys.modules


# --------------------------------------------------------------------------------------------------
# "Write your own": answers that are, call or wrap the chapter body's finished code
# --------------------------------------------------------------------------------------------------


def definition_digest(node: ast.AST) -> str:
    """A digest of a ``def``/``class`` that ignores where it stands and how it is laid out."""
    import hashlib

    return hashlib.sha256(ast.dump(node).encode("utf-8")).hexdigest()[:16]


def digest_of(obj) -> Optional[str]:
    """The :func:`definition_digest` of a live function or class (None without source)."""
    source = _source_or_none(obj)
    if source is None:
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return definition_digest(node)
    return None


def _chapter_message(name: str, how: str) -> str:
    return (
        f"your answer {how} `{name}`, which the chapter defines above; the exercise asks you to "
        "write the code yourself (torch is fine), so this earns 0 points"
    )


def chapter_code_use(obj, exercise: str, allowed: Iterable = (), _seen: Optional[Set[int]] = None) -> str:
    """Why ``obj`` counts as the chapter body's finished code for ``exercise``, else ``""``.

    ``obj`` is refused when it *is* a function or class the chapter body defines before the
    exercise (same definition, any name), or when its code, a default argument, a closure or a
    helper the reader wrote refers to one by name (:func:`attention_book.checks.rules.chapter_code`).
    A reader's own function that happens to share a name with the chapter's is not refused."""
    from .rules import chapter_code

    body = {name: value[4:] for name, value in chapter_code(exercise).items() if value.startswith("def:")}
    allowed_names = {a for a in allowed if isinstance(a, str)}
    if not body:
        return ""
    digests = {digest: name for name, digest in body.items() if name not in allowed_names}
    seen = _seen if _seen is not None else set()
    target = _unwrap(obj)
    if id(target) in seen or not isinstance(target, (types.FunctionType, type)):
        return ""
    seen.add(id(target))
    own = digest_of(target)
    if own in digests and _written_by_reader(target):
        return _chapter_message(digests[own], "is")
    functions = _own_functions(target) if isinstance(target, type) else [target]
    for function in functions:
        namespace = function.__globals__
        extras = list(function.__defaults__ or ()) + list((function.__kwdefaults__ or {}).values())
        for cell in function.__closure__ or ():
            try:
                extras.append(cell.cell_contents)
            except ValueError:
                pass
        referenced = [namespace.get(name, _MISSING) for opname, name in _global_loads(function.__code__)
                      if opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        referenced += [item for value in referenced for item in _contents(value)]
        for value in referenced + extras:
            if value is _MISSING or not isinstance(value, (types.FunctionType, type, functools.partial)):
                continue
            inner = value.func if isinstance(value, functools.partial) else value
            if not isinstance(inner, (types.FunctionType, type)) or not _written_by_reader(inner):
                continue
            if id(inner) in seen:
                continue
            digest = digest_of(inner)
            if digest in digests:
                return _chapter_message(digests[digest], "uses")
            found = chapter_code_use(inner, exercise, allowed, seen)  # a helper the reader wrote
            if found:
                return found
    return ""


DYNAMIC_MESSAGE = (
    "your answer looks code up at run time ({what}), so the exercise's rules cannot be checked: "
    "write it as plain code (the grader gives such an answer 0 points)"
)


def _reader_code(obj, seen: Optional[Set[int]] = None, budget: Optional[List[int]] = None) -> Iterable:
    """The answer's function (or its class's methods) and every function or class the reader
    wrote that it refers to (globals, defaults, closures, containers), transitively."""
    seen = seen if seen is not None else set()
    budget = budget if budget is not None else [200]
    target = _unwrap(obj)
    if id(target) in seen or budget[0] <= 0 or not isinstance(target, (types.FunctionType, type)):
        return
    seen.add(id(target))
    budget[0] -= 1
    yield target
    functions = _own_functions(target) if isinstance(target, type) else [target]
    for function in functions:
        namespace = function.__globals__
        values = [namespace.get(name, _MISSING) for opname, name in _global_loads(function.__code__)
                  if opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        values += list(function.__defaults__ or ()) + list((function.__kwdefaults__ or {}).values())
        for cell in function.__closure__ or ():
            try:
                values.append(cell.cell_contents)
            except ValueError:
                pass
        values += [item for value in values for item in _contents(value)]
        for value in values:
            inner = value.func if isinstance(value, functools.partial) else value
            if isinstance(inner, (types.FunctionType, type)) and _written_by_reader(inner):
                yield from _reader_code(inner, seen, budget)


def dynamic_use(obj) -> str:
    """Why the answer's code cannot be judged by its rules (it looks code up at run time:
    ``exec``, ``globals()``, ``__dict__``, ``sys.modules``, ``get_ipython()``, ``import __main__``),
    else ``""``: the same reading of the source as the grader's (:class:`StaticAnswer`)."""
    for code in _reader_code(obj):
        source = _source_or_none(code)
        if source is None:
            continue
        found = StaticAnswer([source], [source], []).dynamic
        if found:
            return DYNAMIC_MESSAGE.format(what=f"`{found[0]}`")
    return ""


def own_work(obj, exercise: str, allowed: Iterable = ()) -> str:
    """Why ``obj`` is not the reader's own work for ``exercise`` ("write your own"), else ``""``:
    it is or uses the package's code (:func:`package_use`) or the chapter body's finished code
    (:func:`chapter_code_use`), except what the exercise's rule or ``allowed`` permits, or it
    looks code up at run time (:func:`dynamic_use`), so no rule could be checked."""
    from .rules import rule

    allowed = tuple(allowed) + rule(exercise).allowed
    dotted = tuple(a for a in allowed if not isinstance(a, str) or "." in a)
    return package_use(obj, dotted) or chapter_code_use(obj, exercise, allowed) or dynamic_use(obj)


# --------------------------------------------------------------------------------------------------
# The same rules read from a submitted file's source (the autograder: no live objects)
# --------------------------------------------------------------------------------------------------


def indexes_argument(function: ast.AST, position: int) -> bool:
    """Whether ``function`` (a def or lambda node) indexes its ``position``-th argument
    (``weight[ids]``): the ``no_index`` rule of :mod:`.rules`, for the self-check and the grader."""
    args = function.args.args
    if len(args) <= position:
        return False
    name = args[position].arg
    return any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name
               for n in ast.walk(function))


def parse_cell(text: str) -> Optional[ast.Module]:
    lines = [line for line in text.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


_DYNAMIC = {"exec", "eval", "compile", "__import__", "globals", "vars", "locals", "builtins.exec",
            "builtins.eval", "builtins.__import__"}
#: attributes and names that reach code by a path no rule can read: a namespace's dict, a
#: function's globals, the notebook's namespace, the interpreter's modules and frames
_DYNAMIC_ATTRIBUTES = {"__dict__", "__globals__", "__builtins__", "__subclasses__", "__code__", "__closure__",
                       "__getattribute__", "__loader__", "__spec__", "__self__", "f_globals", "f_locals",
                       "f_back", "user_ns", "user_global_ns"}
_DYNAMIC_NAMES = {"get_ipython", "sys.modules", "sys._getframe", "inspect.currentframe", "inspect.stack",
                  "inspect.getmodule", "importlib.import_module", "builtins.globals"}


class StaticAnswer:
    """An exercise's answer as text, with the notebook around it (the grader's view).

    ``answer``: the exercise's answer cells; ``student``: every cell the student wrote (answers of
    all exercises and added cells); ``course``: the release's own cells. Names are resolved
    through the imports and simple aliases (``sm = torch.softmax``) of all cells; functions and
    classes the student wrote that the answer refers to are read too, transitively.
    """

    def __init__(self, answer: Iterable[str], student: Iterable[str], course: Iterable[str]):
        self.answer = [t for t in (parse_cell(text) for text in answer) if t is not None]
        student_trees = [t for t in (parse_cell(text) for text in student) if t is not None]
        course_trees = [t for t in (parse_cell(text) for text in course) if t is not None]
        self.aliases: dict = {}
        for tree in course_trees + student_trees + self.answer:
            self.aliases.update(_imported_names(tree))
            for node in tree.body:
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Name)
                        and isinstance(node.value, (ast.Name, ast.Attribute))):
                    dotted = _dotted(node.value)
                    if dotted and "?" not in dotted:
                        self.aliases[node.targets[0].id] = self.resolve(dotted)
        self.helpers: dict = {}  # names the student defines at the top of a cell -> their nodes
        self.student_names: Set[str] = set()
        for tree in student_trees + self.answer:
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.helpers[node.name] = node
                    self.student_names.add(node.name)
                elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        self.student_names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        self.dynamic: List[str] = []  # exec, eval, globals(), getattr(x, computed name), ...
        self.sites = self._sites()

    def _is_module(self, node: ast.AST, local: Set[str]) -> bool:
        """Whether ``node`` names a module (``torch``, ``F``, an imported name): a computed
        attribute of a module is a way to reach a forbidden function by a name no rule can read."""
        dotted = _dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if not dotted or dotted.split(".")[0] in local:
            return False
        head = dotted.split(".")[0]
        if head in self.helpers or (head in self.student_names and head not in self.aliases):
            return False
        resolved = self.resolve(dotted)
        root = resolved.split(".")[0]
        return head in self.aliases or root in ("torch", "numpy", "math", "builtins", "attention_book",
                                                "functools", "importlib", "sys", "os", "operator")

    def resolve(self, dotted: str) -> str:
        head, _, tail = dotted.partition(".")
        if head in self.aliases and self.aliases[head] != dotted:
            base = self.aliases[head]
            return base + ("." + tail if tail else "")
        return dotted

    def _sites(self) -> List[Tuple[str, str, bool, bool]]:
        """``(name as written, resolved, is a call, bound by the student)`` of every reference the
        answer makes, and of the student's helpers it refers to (transitively). Names local to a
        function (its arguments and assignments) are the function's own, never library calls."""
        sites: List[Tuple[str, str, bool, bool]] = []
        queue: List[Tuple[ast.AST, Set[str]]] = [(tree, set()) for tree in self.answer]
        done: Set[str] = set()
        budget = [200_000]  # nodes read at most: a huge answer cannot keep the grader busy

        def visit(node: ast.AST, local: Set[str]) -> None:
            budget[0] -= 1
            if budget[0] <= 0:
                return
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                for default in getattr(getattr(node, "args", None), "defaults", []) or []:
                    visit(default, local)
                for decorator in getattr(node, "decorator_list", []):
                    visit(decorator, local)
                inner = local | _bound_names(node)
                body = node.body if isinstance(node.body, list) else [node.body]
                for child in body:
                    visit(child, inner)
                return
            if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                local = local | _bound_names(node)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if "__main__" in modules:
                    self.dynamic.append("import __main__")
            elif isinstance(node, ast.Attribute) and node.attr in _DYNAMIC_ATTRIBUTES:
                self.dynamic.append(f".{node.attr}")
            elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
                dotted_name = _dotted(node) or ""
                head = dotted_name.split(".")[0]
                if head not in local and (dotted_name in _DYNAMIC_NAMES or head in ("__main__", "get_ipython")
                                          or self.resolve(dotted_name) in _DYNAMIC_NAMES):
                    self.dynamic.append(head if head in ("__main__", "get_ipython") else dotted_name)
            is_call = isinstance(node, ast.Call)
            expr = node.func if is_call else node
            if is_call:
                name = _dotted(expr) or ""
                if name in _DYNAMIC or name.endswith(".import_module") or (
                        name in ("getattr", "setattr", "delattr") and len(node.args) > 1
                        and not isinstance(node.args[1], ast.Constant) and self._is_module(node.args[0], local)):
                    self.dynamic.append(name)
            if isinstance(expr, (ast.Name, ast.Attribute)) and (
                    is_call or isinstance(getattr(expr, "ctx", None), ast.Load)):
                dotted = _dotted(expr)
                if dotted is not None:
                    head = dotted.split(".")[0]
                    if head in local:
                        sites.append((dotted, dotted, is_call, True))
                    else:
                        sites.append((dotted, self.resolve(dotted), is_call, head in self.student_names))
                        if head in self.helpers and head not in done:
                            done.add(head)
                            queue.append((self.helpers[head], set()))
            for child in ast.iter_child_nodes(node):
                if is_call and child is expr and isinstance(expr, ast.Attribute):
                    visit(expr.value, local) if not isinstance(expr.value, ast.Name) else None
                    continue
                if child is expr and isinstance(expr, ast.Attribute) and not is_call:
                    continue  # the chain itself was recorded above
                visit(child, local)

        while queue and budget[0] > 0:
            tree, local = queue.pop()
            if isinstance(tree, ast.Module):
                for child in tree.body:
                    visit(child, local)
            else:
                visit(tree, local)
        return sites

    def forbidden(self, names: Iterable[str]) -> List[str]:
        """Which of ``names`` the answer calls or refers to (the rules of :func:`calls`)."""
        names = list(names)
        hits: Set[str] = set()
        for written, resolved, is_call, bound in self.sites:
            for name in names:
                full = self.resolve(name) if "." in name else name
                if resolved == full or written == name:
                    if not (bound and "." not in written and written in self.helpers):
                        hits.add(name)
                elif is_call and (_matches(resolved, name) or _matches(written, name)):
                    if not ("." not in written and written in self.helpers):
                        hits.add(name)
        return [name for name in names if name in hits]

    def indexes_argument(self, function: str, position: int) -> bool:
        """Whether the student's ``function`` indexes its ``position``-th argument (``weight[ids]``)."""
        node = self.helpers.get(function)
        return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and indexes_argument(node, position)

    def chapter_names(self, body: Iterable[str], allowed: Iterable[str] = ()) -> List[str]:
        """Names of the chapter's finished code (``body``) the answer refers to, unless the
        student defines that name in their own cells or it is ``allowed``."""
        body = set(body) - set(allowed)
        found = []
        for written, _, _, bound in self.sites:
            head = written.split(".")[0]
            if head in body and not bound and head not in found:
                found.append(head)
        return found
