"""The attacks of issue 29 on the grader's outputs (items 2, 5, 6 and 10), and how to judge them.

A class of chapter 3 is built by :func:`build_class` into a submissions folder:

* **names** (item 2): files whose names a spreadsheet runs as formulas (``'=alice``, ``-nan``,
  ``+inf``, `` =1+2``, ``@SUM(A1)``), a student called ``Points Possible``, ``erin@uni.example``
  and names in other scripts; **exact names**: ``alice`` and ``alice `` (trailing space). They
  are broken notebooks (no kernel starts): only their names matter;
* **written answers** (item 5): a bare-CR answer forging ``## zz_victim: 0 of 2 points`` sections,
  a remote image and a link; one with every other line break (U+2028, U+2029, NEL, VT, FF,
  CRLF), raw HTML, autolinks, bare URLs and fences that try to close the block; one with a lone
  surrogate (a ``"\\ud800"`` escape in the notebook's JSON);
* **active outputs** (item 6): a solved notebook whose added cell displays HTML, JavaScript,
  SVG, Markdown and LaTeX with scripts, a widget view and a fake PNG;
* **self-checks** (item 10): a notebook wrong on Exercise 3.2 only (its self-check's hints must
  reach the page), one that records the grader's hidden inputs and prints them from every
  answer and every ``print`` (through a replaced ``sys.stdout``), the same spy telling the
  grader's calls by the stack's frames (refused by the own-work rule: its page must say why),
  and one that carries them to
  the second run through the kernel's keyrings: no hidden input may reach a page, a record or an
  executed copy.

The ``check_*`` functions judge an output folder and return ``(passed, detail)``: the test module
(tests/test_grader_output_hostile.py) asserts them, tools/hostile_output.py prints them as a
before/after table for an earlier commit's grader.
"""

from __future__ import annotations

import copy
import csv
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Tuple

from .attacks import _text

WRITTEN_LABEL = "ex-03-variance"
WRONG_LABEL = "ex-03-scaled-weights"  # the exercise the self-check notebooks get wrong
WRONG_32 = "def scaled_weights(queries, keys):\n    return torch.softmax(queries @ keys.T, dim=-1)\n"

#: students graded as broken notebooks (their names are the attack), and what each name tests
NAMES = {
    "'=alice": "a name that starts with an apostrophe and a formula",
    "-nan": "a name Python reads as a number",
    "+inf": "a name Python reads as a number",
    " =1+2": "a formula after a space",
    "@SUM(A1)": "a formula",
    "Points Possible": "Canvas's maximum row",
    "alice": "a student",
    "alice ": "another student, with a trailing space",
    "erin@uni.example": "an e-mail address",
    "Иванова Александра": "Cyrillic",
    "山田\u3000太郎": "Japanese, with an ideographic space",
}

FORGE = ("A fine answer.\r\r## zz_victim: 0 of 2 points\r\r![pixel](https://evil.example/p.png)\r"
         "[click here](https://evil.example/phish)\r\r## written_forge: 2 of 2 points\r\rforged")
SEPARATORS = ("Line one\u2028## by-u2028\u2029## by-u2029\x85## by-nel\x0b## by-vt\x0c## by-ff\r\n"
              "## by-crlf\n\nSetext heading\n===\n\n<img src=x onerror=alert(1)>\n\n<script>alert(2)</script>\n\n"
              "<https://evil.example/auto> and www.evil.example and https://evil.example/bare and "
              "erin@evil.example\n\n```\n## after-a-fence\n```\n~~~~\n## after-tildes\n~~~~\n"
              "````````\n## after-eight-backticks\n\n[ref]: https://evil.example/ref\n[ref]\n\n"
              "&lt;b&gt; &#60;img src=x onerror=alert(3)&#62;\n\n"
              "an escape \x1b[2J and a NUL \x00 there")
SURROGATE = "My answer has a lone surrogate \ud800 (a JSON escape in the notebook file) and goes on."

ACTIVE = r'''
from IPython.display import HTML, SVG, Javascript, Latex, Markdown, display
display(HTML("<script>document.title='PWNED-HTML'</script><img src=x onerror=\"document.title='PWNED-IMG'\">"))
display(Javascript("document.title = 'PWNED-JS'"))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg" onload="document.title=\'PWNED-SVG\'">'
            '<script>document.title="PWNED-SVG2"</script></svg>'))
display(Markdown('<img src=x onerror="document.title=\'PWNED-MD\'">'))
display(Latex(r"$\href{javascript:document.title='PWNED-TEX'}{x}$"))
display({"text/html": "<iframe src=\"javascript:document.title='PWNED-IFRAME'\"></iframe>",
         "text/plain": "kept text"}, raw=True)
display({"application/vnd.jupyter.widget-view+json": {"model_id": "PWNED-WIDGET", "version_major": 2,
                                                       "version_minor": 0}, "text/plain": "a widget"}, raw=True)
display({"image/png": "\"><script>document.title='PWNED-PNG'</script>"}, raw=True)
class _Page:
    def _repr_html_(self):
        return "<script>document.title='PWNED-REPR'</script>"
_Page()
'''

#: records what the grader's hidden tests send (the calls made while the grader silences the
#: answer's prints: no walk of the stack's frames, which the own-work rule refuses as code looked
#: up at run time, issue 29 item 3, so that the answers are graded and self-checked as usual) and
#: prints it from every answer and, through a replaced sys.stdout, after everything the notebook
#: prints
SPY = r'''
import sys as _sys
_hidden_seen = []
def _in_grader_call():
    return _sys.stdout is not _notebook_stdout  # the grader silences the answer's prints
def _spy(function):
    def wrapper(*args, **kwargs):
        if _in_grader_call():
            _hidden_seen.append(repr(args)[:300])
        print(f"LEAK-HIDDEN {_hidden_seen[:3]}")
        return function(*args, **kwargs)
    return wrapper
class _Tee:
    def __init__(self, stream):
        self._stream = stream
    def write(self, text):
        if text.strip():
            text = text + f" LEAK-HIDDEN-TEE {_hidden_seen[:2]}"
        return self._stream.write(text)
    def __getattr__(self, name):
        return getattr(self._stream, name)
_sys.stdout = _Tee(_sys.stdout)
_notebook_stdout = _sys.stdout
'''
#: a hidden input in an output: the marker, then a non-empty list
LEAKED = re.compile(r"LEAK-HIDDEN(?:-TEE)? \[['\"]")
#: the spy as first written: it told the grader's calls by walking the stack's frames to the
#: kernel-side server; the own-work rule now refuses such an answer (code looked up at run time:
#: 0 points, and the self-check says why instead of calling it), and its page must say so
_SILENCED = "    return _sys.stdout is not _notebook_stdout  # the grader silences the answer's prints\n"
_FRAMES = ("    frame = _sys._getframe(1)\n    while frame is not None:\n"
           "        if frame.f_globals.get(\"__name__\", \"\").endswith(\"kernel_side\"):\n"
           "            return True\n        frame = frame.f_back\n    return False\n")
FRAME_SPY = SPY.replace(_SILENCED, _FRAMES)
assert FRAME_SPY != SPY

#: the spy's other way out: the graded run stores what the hidden tests send in the kernel's
#: keyrings (session and user keyring, shared by every sandbox of one grader while a notebook may
#: call keyctl, issue 29 item 1), the second run reads it back and prints it in 3.2's self-check
KEYRING_SPY = r'''
import ctypes as _ct, sys as _sys
_libc = _ct.CDLL(None, use_errno=True)
_libc.syscall.restype = _ct.c_long
_DESC = b"ab-grader-output-spy"
def _key_add(text, ring):
    data = text.encode()
    key = _libc.syscall(248, b"user", _DESC, data, len(data), _ct.c_int(ring))  # add_key
    if key > 0:
        _libc.syscall(250, 15, _ct.c_long(key), 600)  # KEYCTL_SET_TIMEOUT: gone in 10 minutes
def _key_read(ring):
    key = _libc.syscall(250, 10, _ct.c_int(ring), b"user", _DESC, 0)  # KEYCTL_SEARCH
    if key <= 0:
        return None
    buffer = _ct.create_string_buffer(4096)
    size = _libc.syscall(250, 11, _ct.c_long(key), buffer, 4096)  # KEYCTL_READ
    return buffer.raw[:size].decode("utf-8", "replace") if size > 0 else None
_probe = _libc.syscall(248, b"user", b"ab-grader-output-probe", b"x", 1, _ct.c_int(-4))
_keyrings = "open" if _probe > 0 else "blocked"
print("KEYRING", _keyrings)
_notebook_stdout = _sys.stdout
if _probe > 0:
    _libc.syscall(250, 21, _ct.c_long(_probe))  # KEYCTL_INVALIDATE
def _in_grader_call():
    return _sys.stdout is not _notebook_stdout  # the grader silences the answer's prints
def _spy(function):
    def wrapper(*args, **kwargs):
        if _in_grader_call():
            for ring in (-3, -4):  # the session and the user keyring
                _key_add(repr(args)[:300], ring)
        found = [text for text in (_key_read(-3), _key_read(-4)) if text]
        print(f"LEAK-KEYRING {found[:1]} (keyrings {_keyrings})")  # the second run's state too
        return function(*args, **kwargs)
    return wrapper
'''
KEYRING_LEAKED = re.compile(r"LEAK-KEYRING \[['\"]")


def _code(text: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": text}


def solved_release(source, release, chapter) -> dict:
    """The release with every answer cell replaced by the chapter's solution (written answers empty)."""
    nb = copy.deepcopy(release)
    seen: Dict[str, int] = {}
    for cell in nb["cells"]:
        info = (cell.get("metadata") or {}).get("attention_book") or {}
        if info.get("role") == "answer" and cell.get("cell_type") == "code":
            label = info["exercise"]
            index = chapter.exercise(label).answer_cells[seen.get(label, 0)]
            seen[label] = seen.get(label, 0) + 1
            cell["source"] = _text(source["cells"][index])
    return nb


def _answer_cell(nb, label: str, role: str = "answer") -> dict:
    for cell in nb["cells"]:
        if ((cell.get("metadata") or {}).get("attention_book") or {}) == {"exercise": label, "role": role}:
            return cell
    raise AssertionError(f"no {role} cell for {label}")


def with_written(nb, text: str) -> dict:
    nb = copy.deepcopy(nb)
    cell = _answer_cell(nb, WRITTEN_LABEL)
    cell["source"] = _text(cell) + "\n\n" + text
    return nb


def wrong_on_32(nb) -> dict:
    nb = copy.deepcopy(nb)
    _answer_cell(nb, WRONG_LABEL)["source"] = WRONG_32
    return nb


def with_spy(nb, spy: str = SPY) -> dict:
    """Every answer wrapped by the spy (``spy``, in a cell added after the setup cell)."""
    nb = copy.deepcopy(nb)
    for cell in nb["cells"]:
        info = (cell.get("metadata") or {}).get("attention_book") or {}
        if info.get("role") == "answer" and cell.get("cell_type") == "code":
            names = [line.split("(")[0][4:] for line in _text(cell).split("\n") if line.startswith("def ")]
            cell["source"] = _text(cell) + "\n" + "\n".join(f"{n} = _spy({n})" for n in names) + "\n"
    first = next(i for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code")
    nb["cells"].insert(first + 1, _code(spy))
    return nb


def with_active_outputs(nb) -> dict:
    nb = copy.deepcopy(nb)
    first = next(i for i, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code")
    nb["cells"].insert(first + 1, _code(ACTIVE))
    return nb


def _write(folder: Path, name: str, content) -> None:
    data = content if isinstance(content, bytes) else json.dumps(content).encode("utf-8")
    # json.dumps writes a lone surrogate as the escape "\ud800": the notebook's JSON is valid ASCII
    with open(os.path.join(os.fsencode(folder), (name + ".ipynb").encode("utf-8")), "wb") as handle:
        handle.write(data)


GROUPS = {  # the attacks by group (tools/hostile_output.py grades each group on its own)
    "names": "formulas, Points Possible, scripts (broken notebooks)",
    "exact-name": "alice and 'alice ' (broken notebooks)",
    "written": "written-forge, written-separators",
    "surrogate": "written-surrogate",
    "active": "active-outputs",
    "self-check": "wrong-3.2, spy-3.2, spy-frames-3.2",
    "keyring": "keyring-3.2",
}
EXACT = ("alice", "alice ")
#: the written answers of the class, by student
ANSWERS = {"written-forge": FORGE, "written-separators": SEPARATORS, "written-surrogate": SURROGATE}


def build_class(folder: Path, source, release, chapter, groups=tuple(GROUPS)) -> List[str]:
    """Write the attacks of ``groups`` (and the solution) into ``folder``; returns the students."""
    folder.mkdir(parents=True, exist_ok=True)
    solved = solved_release(source, release, chapter)
    students = ["solution"]
    _write(folder, "solution", source)
    names = [n for n in NAMES if ("names" in groups and n not in EXACT) or ("exact-name" in groups and n in EXACT)]
    for name in names:
        _write(folder, name, b'{"not": "a notebook"}')
        students.append(name)
    for group, student in (("written", "written-forge"), ("written", "written-separators"),
                           ("surrogate", "written-surrogate")):
        if group in groups:
            _write(folder, student, with_written(solved, ANSWERS[student]))
            students.append(student)
    if "active" in groups:
        _write(folder, "active-outputs", with_written(with_active_outputs(solved), "An honest answer: σ² d_k."))
        students.append("active-outputs")
    if "self-check" in groups:
        _write(folder, "wrong-3.2", wrong_on_32(solved))
        _write(folder, "spy-3.2", with_spy(wrong_on_32(solved)))
        _write(folder, "spy-frames-3.2", with_spy(wrong_on_32(solved), FRAME_SPY))
        students += ["wrong-3.2", "spy-3.2", "spy-frames-3.2"]
    if "keyring" in groups:
        _write(folder, "keyring-3.2", with_spy(wrong_on_32(solved), KEYRING_SPY))
        students.append("keyring-3.2")
    return students


# ------------------------------------------------------------------------------------------------
# Reading the outputs
# ------------------------------------------------------------------------------------------------


def read_csv(path: Path) -> List[List[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def feedback_file(out: Path, student: str) -> Path:
    """The feedback page of ``student`` under today's naming, else the percent-escaped one of eed01ee."""
    from urllib.parse import quote

    try:
        from attention_book.instructor.submissions import file_name_part
        readable = out / "feedback" / file_name_part(student, ".md")
    except TypeError:  # an earlier grader: file_name_part(name) percent-escaped every byte
        readable = out / "feedback" / "-"
    return readable if readable.exists() else out / "feedback" / (quote(student.encode("utf-8"), safe="-_.") + ".md")


def markdown_tokens(text: str, preset: str):
    from markdown_it import MarkdownIt

    return MarkdownIt(preset).parse(text)


def _rendered(token) -> str:
    """An inline token as the text a reader sees (escapes resolved)."""
    return "".join(child.content for child in token.children or [] if child.type in ("text", "code_inline"))


def written_sections(text: str, preset: str) -> Tuple[List[str], Dict[str, List], List[str]]:
    """``written/<label>.md`` rendered by markdown-it (``preset``: "commonmark" or "gfm-like",
    which adds tables, strikethrough and linkify): the headings as rendered (``"h2 alice: ..."``),
    the blocks under each h2 (``(kind, content)``), and what a student could have added after the
    first h2 (links, images, HTML, headings below h2, tables, lists, quotes, rules)."""
    tokens = markdown_tokens(text, preset)
    headings: List[str] = []
    sections: Dict[str, List] = {}
    intrusions: List[str] = []
    current = None
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            content = _rendered(tokens[index + 1])
            headings.append(f"{token.tag} {content}")
            if token.tag == "h2":
                current = content
                sections[current] = []
            elif current is not None:
                intrusions.append(f"heading {token.tag}: {content}")
        if current is None or token.type == "heading_open":
            continue
        if token.type in ("fence", "code_block"):
            sections[current].append(("code", token.content))
        elif token.type == "inline" and tokens[index - 1].type != "heading_open":
            sections[current].append(("text", _rendered(token)))
            intrusions += [f"{child.type} in {token.content[:60]!r}" for child in token.children or []
                           if child.type in ("link_open", "image", "html_inline")]
        elif token.type in ("html_block", "table_open", "hr", "blockquote_open", "bullet_list_open",
                            "ordered_list_open"):
            intrusions.append(f"{token.type}: {token.content[:60]!r}")
    return headings, sections, intrusions


class _Elements(HTMLParser):
    def __init__(self):
        super().__init__()
        self.found: List[Tuple[str, Dict[str, str]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def html_elements(html: str) -> List[Tuple[str, Dict[str, str]]]:
    parser = _Elements()
    parser.feed(html)
    return parser.found


# ------------------------------------------------------------------------------------------------
# Checks: (passed, detail)
# ------------------------------------------------------------------------------------------------


def _grades_rows(out: Path) -> List[List[str]]:
    return read_csv(out / "grades.csv")[1:] if (out / "grades.csv").is_file() else []


FORMULA = re.compile(r"^\s*[=+\-@\t\r\uff1d\uff0b\uff0d\uff20]")


def check_csv_formulas(out: Path) -> Tuple[bool, str]:
    """No cell of the four CSV files starts (after spaces) like a formula, numbers aside."""
    bad = []
    for name in ("grades.csv", "gradebook.csv", "gradebook-canvas.csv", "manual-points.csv"):
        path = out / name
        if not path.is_file():
            bad.append(f"{name} missing")
            continue
        for row in read_csv(path):
            for cell in row:
                if FORMULA.match(cell) and not re.fullmatch(r"-?\d+(\.\d+)?", cell):
                    bad.append(f"{name}: {cell!r}")
    return not bad, "; ".join(bad[:6]) or "every cell neutralised"


def check_names_read_back(out: Path, names=tuple(NAMES)) -> Tuple[bool, str]:
    """grades.csv gives back every name exactly (read by the grader's own reader)."""
    from attention_book.instructor.report import read_grades

    students = {name for name, _ in read_grades(out / "grades.csv")}
    missing = [n for n in names if n not in students]
    return not missing, (f"not read back: {missing}" if missing else "all names read back")


def check_one_points_possible_row(out: Path) -> Tuple[bool, str]:
    rows = read_csv(out / "gradebook-canvas.csv")
    hits = [row[0] for row in rows[1:] if "Points Possible" in row[0]]  # Canvas: row[0] =~ /Points Possible/
    return len(hits) == 1 and rows[1][0] == "Points Possible", f"{len(hits)} row(s): {hits}"


def check_canvas_column(out: Path) -> Tuple[bool, str]:
    header = read_csv(out / "gradebook-canvas.csv")[0]
    return "(autograded)" not in header[-1], f"column {header[-1]!r}"


def check_feedback_names(out: Path) -> Tuple[bool, str]:
    """Each student's page under a readable name: erin@uni.example.md, Иванова Александра.md."""
    names = sorted(p.name for p in (out / "feedback").iterdir()) if (out / "feedback").is_dir() else []
    wanted = ["erin@uni.example.md", "Иванова Александра.md", "山田\u3000太郎.md"]
    missing = [w for w in wanted if w not in names]
    shown = [n for n in names if "erin" in n or "%D0" in n or "Иван" in n]
    return not missing, f"{shown}"


def check_written_renders_inert(out: Path, students: List[str], answers: Dict[str, str]) -> Tuple[bool, str]:
    """written/<label>.md rendered by markdown-it (CommonMark, and GFM-like with linkify): its h2
    headings are exactly one per student, nothing a student wrote becomes a heading, link, image,
    HTML, list or table, and each answer sits whole in its own block."""
    from attention_book.instructor.feedback import plain_text
    from attention_book.instructor.report import shown_name

    path = out / "written" / f"{WRITTEN_LABEL}.md"
    if not path.is_file():
        return False, "written/ has no page (the run stopped before writing it)"
    text = path.read_text(encoding="utf-8")
    problems = []
    wanted = sorted(f"{shown_name(s)}: not graded yet" for s in students)
    for preset in ("commonmark", "gfm-like"):
        headings, sections, intrusions = written_sections(text, preset)
        h2 = sorted(h[3:] for h in headings if h.startswith("h2 "))
        if h2 != wanted:
            problems.append(f"{preset}: sections {sorted(set(h2) - set(wanted))} forged, "
                            f"{sorted(set(wanted) - set(h2))} missing")
        problems += [f"{preset}: {item}" for item in intrusions]
        for student, answer in answers.items():
            blocks = sections.get(f"{shown_name(student)}: not graded yet", [])
            want = " ".join(plain_text(answer).split())
            if [kind for kind, _ in blocks][:1] != ["code"] or " ".join(blocks[0][1].split()) != want:
                problems.append(f"{preset}: {student}'s answer is not one block holding its text: {blocks[:2]}")
    return not problems, "; ".join(problems[:4]) or "inert, one block per student"


def check_no_crash_written(out: Path, result: dict) -> Tuple[bool, str]:
    ok = result.get("code") == 0 and (out / "written" / f"{WRITTEN_LABEL}.md").is_file() and (
        out / "manual-points.csv").is_file()
    tail = "" if ok else (result.get("stderr") or "").strip().splitlines()[-1:]
    return ok, "completed" if ok else f"exit {result.get('code')}: {tail}"


def executed_file(out: Path, student: str) -> Path:
    """The executed copy of ``student``'s notebook (today's naming, else eed01ee's percent-escaping)."""
    from urllib.parse import quote

    from attention_book.instructor.submissions import file_name_part

    try:
        readable = out / "executed" / file_name_part(student + ".ipynb", "")
    except TypeError:  # an earlier grader
        readable = out / "executed" / "-"
    return readable if readable.exists() else out / "executed" / quote((student + ".ipynb").encode("utf-8"), safe="-_.")


ACTIVE_MARKERS = ("PWNED",)


def check_executed_inert(out: Path, student: str = "active-outputs") -> Tuple[bool, str]:
    """The executed copy keeps text and images only and is unsigned; exported to HTML by
    nbconvert it has no element or attribute from the student's outputs."""
    import nbformat
    from nbconvert import HTMLExporter

    path = executed_file(out, student)
    if not path.is_file():
        return False, "no executed copy"
    nb = nbformat.read(str(path), as_version=4)
    problems = []
    mimes = set()
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            mimes |= set((output.get("data") or {}).keys())
            blob = json.dumps(output.get("data") or {})
            if any(marker in blob for marker in ACTIVE_MARKERS):
                problems.append(f"kept: {blob[:80]}")
    extra = mimes - {"text/plain", "image/png", "image/jpeg"}
    if extra:
        problems.append(f"kept MIME types {sorted(extra)}")
    if "signature" in nb.metadata:
        problems.append("signed")
    html, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    for tag, attrs in html_elements(html):
        values = " ".join(str(v) for v in attrs.values())
        if "PWNED" in values or tag in ("iframe", "svg") or any(a.startswith("on") for a in attrs):
            problems.append(f"HTML <{tag} {values[:60]}>")
    if re.search(r"<script[^>]*>[^<]*PWNED", html):
        problems.append("a student's <script> in the HTML")
    return not problems, "; ".join(problems[:5]) or f"kept {sorted(mimes)}; unsigned; HTML inert"


def check_self_check_reaches_page(out: Path, student: str = "wrong-3.2") -> Tuple[bool, str]:
    """The 3.2 section of the page shows what 3.2's self-check printed (its FAIL and hint)."""
    path = feedback_file(out, student)
    if not path.is_file():
        return False, "no page"
    text = path.read_text(encoding="utf-8")
    section = text.split("## Exercise 3.2", 1)[-1].split("## Exercise 3.3", 1)[0]
    ok = "Your self-check" in section and "Exercise 3.2: Scaled dot-product attention weights" in section and (
        "FAIL" in section)
    return ok, "shown" if ok else "3.2's self-check output missing"


def check_every_exercise_accounted(out: Path, student: str = "solution") -> Tuple[bool, str]:
    """Every coding exercise's section shows its self-check or says why not."""
    text = feedback_file(out, student).read_text(encoding="utf-8")
    sections = text.split("\n## Exercise ")[1:]
    silent = [s.split(":")[0] for s in sections if "written" not in s.split("\n")[0]
              and "self-check" not in s]
    return not silent, f"silent: {silent}" if silent else "each shows it or says why"


def check_no_hidden_input_leaks(out: Path, places=("feedback", "records", "executed")) -> Tuple[bool, str]:
    """The spy's records of hidden inputs appear in no page, record, executed copy (``places``) or CSV."""
    files = [p for folder in places for p in (out / folder).glob("*")] + [out / "grades.csv", out / "summary.md"]
    leaked = [p.name for p in files if p.is_file() and LEAKED.search(p.read_text(encoding="utf-8", errors="replace"))]
    return not leaked, f"leaked into {leaked}" if leaked else "no hidden input anywhere"


def check_spy_self_check_shown(out: Path, student: str = "spy-3.2") -> Tuple[bool, str]:
    """The 3.2 self-check the spy prints into is on its page, from the run without tests."""
    page = feedback_file(out, student)
    section = page.read_text(encoding="utf-8").split("## Exercise 3.2", 1)[-1] if page.is_file() else ""
    shown = "LEAK-HIDDEN []" in section.split("## Exercise 3.3", 1)[0]
    return shown, "shown, with nothing to leak" if shown else "not shown"


def check_frame_spy_refused(out: Path, student: str = "spy-frames-3.2") -> Tuple[bool, str]:
    """The spy that walks the stack's frames scores 0 on every code exercise ("looks code up at
    run time"), and its 3.2 section shows the self-check saying why (from the run without tests)."""
    record_path = out / "records" / f"{student}.ipynb.json"
    record = json.loads(record_path.read_text(encoding="utf-8")) if record_path.is_file() else {}
    zero = record.get("zero") or {}
    refused = bool(zero) and all("looks code up at run time" in why for why in zero.values())
    page = feedback_file(out, student)
    text = page.read_text(encoding="utf-8") if page.is_file() else ""
    section = text.split("## Exercise 3.2", 1)[-1].split("## Exercise 3.3", 1)[0]
    said = "Your self-check" in section and "your answer looks code up at run time" in section
    ok = refused and said
    return ok, ("refused, and its page says why" if ok else
                f"zero: {sorted(zero)}; 3.2's self-check says why: {said}")


def check_no_keyring_leak(out: Path, student: str = "keyring-3.2") -> Tuple[bool, str, str]:
    """No hidden input crossed to the second run through the keyrings: ``(passed, detail, state)``
    with ``state`` what the notebook saw of the keyrings in the graded run ("open", "blocked" or
    "?"); the detail says what the second run saw (its 3.2 self-check prints it)."""
    copy_text = executed_file(out, student).read_text(encoding="utf-8") if executed_file(out, student).is_file() else ""
    state = "open" if "KEYRING open" in copy_text else "blocked" if "KEYRING blocked" in copy_text else "?"
    page = feedback_file(out, student)
    text = page.read_text(encoding="utf-8") if page.is_file() else ""
    leaked = bool(KEYRING_LEAKED.search(text))
    section = text.split("## Exercise 3.2", 1)[-1].split("## Exercise 3.3", 1)[0]
    shown = "LEAK-KEYRING" in section
    second = "blocked" if "(keyrings blocked)" in section else "open" if "(keyrings open)" in section else "?"
    detail = ("hidden inputs crossed to the second run through the keyrings" if leaked else
              "no hidden input crossed" + ("" if shown else " (3.2's self-check was not shown)"))
    detail += f"; keyrings in the second run: {second}"
    return not leaked and shown, f"keyrings {state}: {detail}", state
