"""The prose never contradicts the output printed above it, on any machine (CONTRIBUTING.md "Numbers").

Each check reads the chapter as *this* machine executed it (the run of ``tests/test_notebooks.py``
in the same session, or one made here): what a reader's machine, the build machine or a GPU
prints may differ in the last digits, in a count of bit-for-bit equal entries or in a timing,
and the prose must hold for all of them. Per notebook:

1. **Typed numbers.** A number the prose types from a computation is listed in the notebook's
   metadata, ``"attention_book": {"quoted_numbers": [...]}``, and a code cell above the first
   markdown cell quoting it printed it, written the same way ("0.89" does not match "0.890"). Only
   numbers that are the same on every machine may be listed: exact facts (counts, shapes, token
   ids, FLOPs, parameter counts) and values of the small seeded CPU examples.
2. **Untyped numbers.** A decimal number (or a percentage) in the prose that a code cell above
   printed must be listed, glued or part of a reference quote: a number copied from this run's
   output without a decision fails here.
3. **Glue.** Every ``{glue:text}`name``` is recorded (``attention_book.glue.glue``) by a code cell
   above it in the same run; names are words (``heldout_loss``); only ``{glue:text}`` is used
   (``{glue}`` would paste the quoted string literal).
4. **Machine-dependent words.** A sentence saying that results are identical, equal, bit for bit
   the same, how many of them match ("two of the 21"), "faster"/"slower", or giving a time, states
   a fact of one machine unless it (a) pastes the value with glue, (b) names the printed line that
   says it on this machine, as inline code whose text a code cell above printed on a line holding
   a boolean or a number (```identical:``` above), (c) quotes a dated reference table that a code
   cell above printed ("Measured 2026-11-25 ...") and says "reference", or (d) is listed with the
   reason it holds on every machine in ``"attention_book": {"exact_claims": {"phrase": "why"}}``
   (e.g. "exactly 0": exp(-inf) is 0 in IEEE arithmetic).

Figure captions and alt texts (a code cell's ``mystnb`` metadata) are prose of that cell: its own
output counts as "above". The book pages (``book/*.md``) print nothing, so a machine-dependent word there
must be in :data:`PAGE_CLAIMS`.

Executing a chapter is the slow part, so the executed copy is kept in ``_build/executed`` with the
fingerprint of the run (:func:`run_fingerprint`: the notebook, the package source, the PyTorch
version, the CPU capability, the thread settings and the device): a copy made under another
configuration (say ``ATEN_CPU_CAPABILITY=default``) is never reused.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import nbformat
import pytest

from helpers import (EXECUTED, ROOT, book_notebooks, execute_notebook, keep_executed, numbers_rule_params,
                     run_fingerprint)

NOTEBOOKS = book_notebooks()
IDS = [p.stem for p in NOTEBOOKS]
PAGES = sorted((ROOT / "book").glob("*.md"))

# --- reading prose -----------------------------------------------------------------------------------

GLUE_ROLE = re.compile(r"\{glue(?::(?P<kind>[a-z]+))?\}`(?P<body>[^`]*)`")
GLUE_DIRECTIVE = re.compile(r"^(`{3,}|:{3,})\{glue(?::(?P<kind>[a-z]+))?\}\s+(?P<body>\S+)", re.M)
NAME = re.compile(r"[a-z][a-z0-9]*(?:_[a-z0-9]+)*")  # attention_book.glue.NAME_PATTERN
CODE_SPAN = re.compile(r"(`+)(?P<code>.+?)\1", re.S)
MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
NUMBER = re.compile(r"(?<![\w.])[-+−]?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?%?(?![\w])")
NUMBER_WORDS = "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty"
COUNT_WORDS = NUMBER_WORDS + "|all|none|both"
MACHINE_WORDS = re.compile(
    r"\bidentical(?:ly)?\b|\bbit[- ]for[- ]bit\b|\bbitwise\b|\bexactly the same\b"
    # "equal" as a verdict on results ("are equal", "came out equal"), not "equal length"
    r"|\b(?:are|is|were|was|be|been|come out|came out|comes out|stays?|remains?)\s+"
    r"(?:(?:even|exactly|also|all|still|not|both)\s+)*equal\b(?!\s+(?:up to|to within|within))"
    r"|\bfaster\b|\bslower\b|\bquicker\b|\bspeed-?ups?\b|\btimes as (?:fast|slow)\b"
    # counts of results: "two of the 21", "7 of 8", "6/6" (not a fraction in a formula, "1/8 = 0.125")
    rf"|\b(?:\d[\d,]*|{COUNT_WORDS}) (?:out )?of (?:the |its |these |those |our )?(?:\d[\d,]*|{NUMBER_WORDS})\b"
    r"|(?<![\w.=/-])(?!1/)\d+/\d+(?![\w/])(?!\s*=)"  # 1/8: a fraction (uniform weights), not a count
    # a time: "75 s", "5.90 ms" (not "GPT-2s")
    r"|(?<![\w.-])\d[\d,]*(?:\.\d+)?(?: ?(?:ms|µs|ns)| (?:s|seconds?|minutes?))\b",
    re.I)
REFERENCE_TABLE = re.compile(r"^Measured \d{4}-\d{2}-\d{2}\b", re.M)
ABBREVIATIONS = ("al.", "e.g.", "i.e.", "Fig.", "cf.", "vs.", "Eq.", "approx.")

#: machine-dependent words on the book pages (they print nothing): phrase -> why it holds anywhere
PAGE_CLAIMS = {
    "Faster Attention with Better Parallelism": "the title of the FlashAttention-2 paper",
    "a GPU only makes the bigger experiments faster": "no number: true of any GPU against a CPU",
}


def occurs(entry: str, text: str) -> bool:
    """``entry`` appears in ``text`` as a whole number (no digit or decimal point glued to it)."""
    return re.search(r"(?<![\d.])" + re.escape(entry) + r"(?![\d])", text) is not None


def _without_code_blocks(markdown: str) -> str:
    """The Markdown without fenced code blocks and directive options (directive bodies stay:
    an admonition, an exercise or a solution is prose)."""
    lines, fence = [], None
    for line in markdown.splitlines():
        stripped = line.strip()
        if fence:
            if stripped.startswith(fence) and stripped.strip("`~") == "":
                fence = None
            continue
        match = re.match(r"(`{3,}|~{3,})(.*)", stripped)
        if match and not match.group(2).strip().startswith("{"):
            fence = match.group(1)
            continue
        if re.match(r"(`{3,}|:{3,})(\{[^}]*\})?", stripped) or re.match(r":[\w-]+:", stripped):
            lines.append("")  # a directive's fence or option line ends the sentence before it
            continue
        lines.append(line)
    return "\n".join(lines)


def sentences(markdown: str) -> List[str]:
    """The prose of ``markdown`` cut into sentences (list items and table rows are their own)."""
    text = _without_code_blocks(markdown)
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    blocks: List[str] = []
    for paragraph in re.split(r"\n\s*\n", text):
        item: List[str] = []
        for line in paragraph.splitlines():
            if re.match(r"\s*([-*+]|\d+\.)\s|\s*\||\s*#", line) and item:
                blocks.append(" ".join(item))
                item = []
            item.append(line.strip())
        if item:
            blocks.append(" ".join(item))
    found = []
    for block in blocks:
        protected = block
        for short in ABBREVIATIONS:
            protected = protected.replace(short, short.replace(".", "\0"))
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z(\"“*_`{$])", protected):
            sentence = sentence.replace("\0", ".").strip()
            if sentence:
                found.append(sentence)
    return found


def plain(sentence: str) -> str:
    """A sentence without code, math, glue/cross-reference roles and link targets: its words."""
    text = re.sub(r"\{[\w:-]+\}`[^`]*`", " ", sentence)
    text = CODE_SPAN.sub(" ", text)
    text = MATH.sub(" ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return text


def code_spans(sentence: str) -> List[str]:
    without_roles = re.sub(r"\{[\w:-]+\}`[^`]*`", " ", sentence)
    return [m.group("code").strip() for m in CODE_SPAN.finditer(without_roles)]


def glue_uses(markdown: str) -> List[Tuple[str, str]]:
    """``(kind, name)`` of every glue role and directive (kind "" for plain ``{glue}``)."""
    uses = []
    for pattern in (GLUE_ROLE, GLUE_DIRECTIVE):
        for match in pattern.finditer(markdown):
            name = match.group("body").split("::")[-1].rsplit(":", 1)[0]
            uses.append((match.group("kind") or "", name))
    return uses


# --- reading outputs ---------------------------------------------------------------------------------


def printed(cell) -> str:
    """What a code cell printed: stdout and the text/plain of its results (not its glue records)."""
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream" and output.get("name") == "stdout":
            parts.append(output.get("text", ""))
        elif output.get("output_type") in ("execute_result", "display_data"):
            parts.append(output.get("data", {}).get("text/plain", ""))
    return "".join(parts)


def glued(cell) -> List[str]:
    """The names a code cell recorded with ``attention_book.glue.glue`` (or myst-nb's glue)."""
    return [output.get("metadata", {}).get("scrapbook", {}).get("name")
            for output in cell.get("outputs", [])
            if output.get("output_type") == "display_data" and "scrapbook" in output.get("metadata", {})]


def figure_texts(cell) -> List[Tuple[str, str]]:
    """``(what, text)`` of a drawing cell's figure caption and alt text (both read by readers)."""
    mystnb = cell.get("metadata", {}).get("mystnb", {})
    texts = [("caption", (mystnb.get("figure") or {}).get("caption")), ("alt text", (mystnb.get("image") or {}).get("alt"))]
    return [(what, text) for what, text in texts if text]


def prose_cells(notebook) -> Iterator[Tuple[int, str, str, list]]:
    """``(index, where, markdown, code cells above)`` for every markdown cell, figure caption and
    alt text (a figure's texts see the output of their own cell too)."""
    code_above: list = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "markdown":
            yield index, f"markdown cell {index}", cell.source, list(code_above)
        elif cell.cell_type == "code":
            code_above.append(cell)
            for what, text in figure_texts(cell):
                yield index, f"the {what} of cell {index}", text, list(code_above)


def settings(notebook) -> dict:
    return notebook.metadata.get("attention_book", {})


def quoted_numbers(notebook) -> List[str]:
    return list(settings(notebook).get("quoted_numbers", []))


def exact_claims(notebook) -> Dict[str, str]:
    return dict(settings(notebook).get("exact_claims", {}))


# --- the rules -----------------------------------------------------------------------------------------


def typed_number_problems(notebook) -> List[str]:
    """Rule 1: each listed number is quoted, and printed above its first quote."""
    found = []
    entries = quoted_numbers(notebook)
    for entry in sorted(set(e for e in entries if entries.count(e) > 1)):
        found.append(f"{entry!r} is listed twice")
    # a figure's alt text describes what the figure shows, which no stdout prints: not a first quote
    prose = [item for item in prose_cells(notebook) if not item[1].startswith("the alt text")]
    for entry in entries:
        if not isinstance(entry, str) or not entry.strip():
            found.append(f"{entry!r}: entries must be non-empty strings, as the prose writes them")
            continue
        first = next(((index, where, above) for index, where, text, above in prose
                      if occurs(entry, text)), None)
        if first is None:
            found.append(f"{entry!r} is listed but no markdown cell quotes it")
            continue
        index, where, above = first
        if not any(occurs(entry, printed(cell)) for cell in above):
            later = [i for i, cell in enumerate(notebook.cells)
                     if cell.cell_type == "code" and occurs(entry, printed(cell))]
            where_printed = f" (printed only later, by cell {later[0]})" if later else ""
            found.append(f"{entry!r} is quoted by {where} but no code cell above it prints it"
                         f"{where_printed}: on this machine the run printed something else, so the "
                         "number depends on the machine (glue it or refer to it without its value)"
                         if not later else
                         f"{entry!r} is quoted by {where} but no code cell above it prints it{where_printed}")
    return found


def _is_decimal(number: str) -> bool:
    return "." in number or number.endswith("%") or "e" in number.lower()


def _quotes_reference(sentence: str, above: list) -> bool:
    return "reference" in sentence.lower() and any(REFERENCE_TABLE.search(printed(c)) for c in above)


def untyped_number_problems(notebook) -> List[str]:
    """Rule 2: a decimal the run printed above, typed into the prose, is listed, glued or a
    reference quote."""
    found = []
    listed = quoted_numbers(notebook)
    for index, where, text, above in prose_cells(notebook):
        output = "\n".join(printed(cell) for cell in above)
        code = "\n".join(cell.source for cell in above)
        for sentence in sentences(text):
            if _quotes_reference(sentence, above):
                continue
            for signed in NUMBER.findall(plain(sentence)):
                number = signed.lstrip("+-−")
                if (_is_decimal(number) and not any(occurs(signed, e) or occurs(number, e) for e in listed)
                        and occurs(number, output) and not occurs(number, code)):  # a code literal: an input
                    found.append(f"{where} types {number!r}, a number the run printed above: glue it "
                                 "(attention_book.glue), refer to it without its value, or, if it is "
                                 "the same on every machine, list it in quoted_numbers")
    return found


def glue_problems(notebook) -> List[str]:
    """Rule 3: every glue role names a value a code cell above recorded in this run."""
    found = []
    recorded: Dict[str, int] = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":
            for name in glued(cell):
                if name in recorded:
                    found.append(f"glue name {name!r} is recorded twice (cells {recorded[name]} and {index})")
                recorded.setdefault(name, index)
    for index, where, text, above in prose_cells(notebook):
        above_names = {name for cell in above for name in glued(cell)}
        for kind, name in glue_uses(text):
            if kind != "text":
                found.append(f"{where} uses {{glue{':' + kind if kind else ''}}} for {name!r}: use "
                             "{glue:text} (it pastes the text the code printed)")
            if NAME.fullmatch(name) is None:
                found.append(f"{where}: glue name {name!r} is not lower-case words joined by "
                             "underscores (readers of JupyterLab and Colab see the name)")
            if name not in above_names:
                later = f" (recorded only later, by cell {recorded[name]})" if name in recorded else ""
                found.append(f"{where} pastes {name!r}, which no code cell above it recorded in this "
                             f"run{later}")
    return found


def names_printed_line(label: str, lines: List[str]) -> bool:
    """``label`` (inline code of a sentence) names a printed line that holds a boolean or a number:
    a label of a few characters with a letter, not a bare value (`True`, `0.5`)."""
    if len(label) < 4 or not re.search(r"[A-Za-z]", label) or label in ("True", "False", "None"):
        return False
    return any(label in line and re.search(r"\b(True|False)\b|\d", line.replace(label, "")) for line in lines)


def machine_word_problems(notebook) -> List[str]:
    """Rule 4: a sentence stating a machine-dependent fact is glued, linked to its printed line,
    a reference quote, or an exact claim."""
    found = []
    claims = exact_claims(notebook)
    used = set()
    for index, where, text, above in prose_cells(notebook):
        lines = [line for cell in above for line in printed(cell).splitlines()]
        for sentence in sentences(text):
            words = MACHINE_WORDS.findall(plain(sentence))
            if not words:
                continue
            claim = next((phrase for phrase in claims if phrase in sentence), None)
            if claim is not None:
                used.add(claim)
                continue
            if GLUE_ROLE.search(sentence) or _quotes_reference(sentence, above):
                continue
            if any(names_printed_line(label, lines) for label in code_spans(sentence)):
                continue
            found.append(f"{where}: {', '.join(repr(w) for w in words)} in {sentence!r} states what one "
                         "machine printed: glue the value, name the printed line in inline code, quote "
                         "the reference table, or list the phrase in exact_claims with why it holds on "
                         "every machine")
    for phrase, why in claims.items():
        if not isinstance(why, str) or not why.strip():
            found.append(f"exact_claims[{phrase!r}] needs the reason it holds on every machine")
        if phrase not in used:
            found.append(f"exact_claims lists {phrase!r}, but no sentence with a machine-dependent word "
                         "contains it")
    return found


def problems(notebook) -> List[str]:
    """Everything in ``notebook`` (executed) that could contradict its own output on another machine."""
    if "typed_numbers" in settings(notebook):
        return ["metadata 'typed_numbers' is not read: the list is 'quoted_numbers'"]
    return (typed_number_problems(notebook) + untyped_number_problems(notebook)
            + glue_problems(notebook) + machine_word_problems(notebook))


# --- the run of this machine ---------------------------------------------------------------------------


def _read(path: Path):
    return nbformat.read(str(path), as_version=4)


@lru_cache(maxsize=None)
def executed(path: Path):
    """The notebook as this machine runs it now: the kept run if it has the same fingerprint."""
    cached = EXECUTED / path.name
    if cached.is_file():
        notebook = _read(cached)
        if notebook.metadata.get("attention_book_run") == run_fingerprint(path):
            return notebook
    notebook, _ = execute_notebook(path)
    keep_executed(path, notebook)
    return notebook


@pytest.mark.slow
@pytest.mark.parametrize("path", numbers_rule_params(NOTEBOOKS))
def test_prose_holds_for_the_output_of_this_run(path):
    found = problems(executed(path))
    assert not found, f"{path.name}, as run on this machine:\n  " + "\n  ".join(found)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_prose_rules_that_need_no_run(path):
    """The fast half (no execution): listed numbers are quoted, machine-dependent sentences are
    glued, linked, reference quotes or listed claims as far as the source alone can tell."""
    notebook = _read(path)
    entries = quoted_numbers(notebook)
    assert all(isinstance(e, str) and e.strip() for e in entries), entries
    assert len(set(entries)) == len(entries), "an entry is listed twice"
    prose = [text for _, _, text, _ in prose_cells(notebook)]
    missing = [e for e in entries if not any(occurs(e, text) for text in prose)]
    assert not missing, f"{path.name}: listed but quoted nowhere: {missing}"
    names = [name for text in prose for _, name in glue_uses(text)]
    sources = "\n".join(cell.source for cell in notebook.cells if cell.cell_type == "code")
    unglued = [name for name in names if not re.search(r"""glue\(\s*["']""" + re.escape(name) + "[\"']", sources)]
    assert not unglued, f"{path.name}: glue names no code cell records: {unglued}"
    claims = exact_claims(notebook)
    flat = [" ".join(text.split()) for text in prose]  # a phrase may span a line break
    stale = [phrase for phrase in claims if not any(phrase in text for text in flat)]
    assert not stale, f"{path.name}: exact_claims phrases found in no prose: {stale}"


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_book_pages_state_no_machine_dependent_fact(page):
    found = []
    for sentence in sentences(page.read_text(encoding="utf-8")):
        words = MACHINE_WORDS.findall(plain(sentence))
        if words and not any(phrase in sentence for phrase in PAGE_CLAIMS):
            found.append(f"{words} in {sentence!r}")
    assert not found, (f"{page.name} prints nothing, so these depend on a machine the reader cannot see "
                       "(reword, or add the phrase to PAGE_CLAIMS with why it holds anywhere):\n  "
                       + "\n  ".join(found))
    assert not glue_uses(page.read_text(encoding="utf-8")), f"{page.name}: a page without code has nothing to glue"


def test_no_chapter_uses_the_old_quoted_numbers_of_another_name():
    for path in NOTEBOOKS:
        assert set(settings(_read(path))) <= {"quoted_numbers", "exact_claims", "grading_seconds"}, (
            f"{path.name}: unknown attention_book metadata {sorted(settings(_read(path)))}")


def test_metadata_survives_json_round_trip():
    """The lists live in notebook metadata that tools/strip_outputs.py must keep."""
    for path in NOTEBOOKS:
        raw = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("attention_book", {})
        assert raw.get("quoted_numbers", []) == quoted_numbers(_read(path))
        assert raw.get("exact_claims", {}) == exact_claims(_read(path))


# --- the checker itself, on small made-up notebooks ------------------------------------------------


def _notebook(*cells, numbers=(), claims=None):
    notebook = nbformat.v4.new_notebook()
    for kind, text, output in cells:
        if kind == "code":
            cell = nbformat.v4.new_code_cell(text or "pass")
            for item in ([output] if isinstance(output, (str, dict)) else output or []):
                if isinstance(item, dict):  # a glue record
                    cell.outputs.append(nbformat.v4.new_output(
                        "display_data", data={"application/papermill.record/text/plain": repr(item["text"])},
                        metadata={"scrapbook": {"name": item["name"], "mime_prefix": "application/papermill.record/"}}))
                else:
                    cell.outputs.append(nbformat.v4.new_output("stream", name="stdout", text=item))
        else:
            cell = nbformat.v4.new_markdown_cell(text)
        notebook.cells.append(cell)
    notebook.metadata["attention_book"] = {"quoted_numbers": list(numbers)}
    if claims is not None:
        notebook.metadata["attention_book"]["exact_claims"] = claims
    return notebook


def test_a_number_printed_above_its_quote_passes():
    notebook = _notebook(("code", "", "weight 0.8862\nrounded 0.89\n"),
                         ("markdown", "'one' gets 0.89 of the weight.", None), numbers=["0.89"])
    assert problems(notebook) == []


def test_a_number_printed_only_below_its_quote_fails():
    notebook = _notebook(("markdown", "the gradient is 7.5 times smaller", None),
                         ("code", "", "7.5\n"), numbers=["7.5"])
    assert problems(notebook) == ["'7.5' is quoted by markdown cell 0 but no code cell above it prints it "
                                  "(printed only later, by cell 1)"]


def test_a_listed_number_this_machine_printed_differently_fails():
    notebook = _notebook(("code", "", "pre-norm : 2.69\n"), ("markdown", "Pre-norm learns (2.71", None),
                         numbers=["2.71", "3.14"])
    found = problems(notebook)
    assert found[0].startswith("'2.71' is quoted by markdown cell 1 but no code cell above it prints it: "
                               "on this machine the run printed something else")
    assert found[1] == "'3.14' is listed but no markdown cell quotes it"


def test_a_decimal_copied_from_the_output_must_be_decided():
    notebook = _notebook(("code", "", "loss 1.80 after 300 steps\n"),
                         ("markdown", "The loss falls to 1.80 in 300 steps.", None))
    assert problems(notebook) == [
        "markdown cell 1 types '1.80', a number the run printed above: glue it (attention_book.glue), refer "
        "to it without its value, or, if it is the same on every machine, list it in quoted_numbers"]
    assert problems(_notebook(("code", "", "loss 1.80\n"), ("markdown", "The loss printed above.", None))) == []
    # a decimal nobody printed (an input, a definition) is free; so is code and math
    assert problems(_notebook(("code", "", "loss 1.80\n"),
                              ("markdown", "Dropout $p = 1.80$ and `lr=1.80`; a threshold of 0.8.", None))) == []


def test_glue_must_be_recorded_above_in_the_same_run():
    record = {"name": "heldout_loss", "text": "1.80"}
    good = _notebook(("code", "", ["loss 1.80\n", record]),
                     ("markdown", "It reaches {glue:text}`heldout_loss` nats per character.", None))
    assert problems(good) == []
    late = _notebook(("markdown", "It reaches {glue:text}`heldout_loss` nats.", None),
                     ("code", "", [record]))
    assert problems(late) == ["markdown cell 0 pastes 'heldout_loss', which no code cell above it recorded in "
                              "this run (recorded only later, by cell 1)"]
    unnamed = _notebook(("code", "", [record]), ("markdown", "It reaches {glue}`Loss2:.2f` nats.", None))
    assert problems(unnamed) == [
        "markdown cell 1 uses {glue} for 'Loss2': use {glue:text} (it pastes the text the code printed)",
        "markdown cell 1: glue name 'Loss2' is not lower-case words joined by underscores (readers of "
        "JupyterLab and Colab see the name)",
        "markdown cell 1 pastes 'Loss2', which no code cell above it recorded in this run"]
    twice = _notebook(("code", "", [record]), ("code", "", [record]))
    assert problems(twice) == ["glue name 'heldout_loss' is recorded twice (cells 0 and 1)"]


def test_the_seven_contradictions_of_issue_28_fail():
    """The sentences a machine of the CI kind contradicted, under what it printed."""
    cases = [
        ("bit for bit equal (torch.equal): False\n",
         "Here, on this CPU, the results are even bit for bit equal."),
        ("identical: 5\n", "Only two of the 21 visible weights came out identical."),
        ("pre-norm : 2.69\n", "Pre-norm learns (2.71 nats per character)"),
        ("keeps 10 characters holding 0.90\n", "It keeps 11 characters holding 0.92 of the weight."),
        ("MLP writes 44.53\n", "The MLP writes 44.80 into the stream."),
        ("held-out loss 1.79\n", "The GPT reaches 1.80 nats per character."),
        ("torch.equal: False (2.98e-08 apart)\n", "Both paths get identical outputs."),
    ]
    numbers = {2: ["2.71"], 3: ["11", "0.92"], 4: ["44.80"], 5: ["1.80"]}
    for number, (output, prose) in enumerate(cases):
        notebook = _notebook(("code", "", output), ("markdown", prose, None), numbers=numbers.get(number, []))
        assert problems(notebook), f"case {number} passes: {prose!r}"


def test_machine_dependent_words_need_a_link_a_reference_or_a_reason():
    output = "bit for bit equal (torch.equal): False\nidentical: 5\n"
    for prose in ["Here the results are even bit for bit equal.",
                  "Only two of the 21 visible weights came out identical.",
                  "The fused kernel is faster.",
                  "It took 75 s on this machine.",
                  "7 of 8 runs specialise."]:
        found = problems(_notebook(("code", "", output), ("markdown", prose, None)))
        assert len(found) == 1 and "states what one machine printed" in found[0], (prose, found)
    for prose in ["Whether they are also bit for bit equal depends on the machine: "
                  "`bit for bit equal (torch.equal)` above says it for this one.",
                  "The line `identical:` above counts the weights that came out identical here.",
                  "This run found {glue:text}`matching_weights` identical weights."]:
        notebook = _notebook(("code", "", [output, {"name": "matching_weights", "text": "5"}]),
                             ("markdown", prose, None))
        assert problems(notebook) == [], prose
    # a label must be printed with a value: code that merely names a function is no link
    assert problems(_notebook(("code", "", "close: True\n"),
                              ("markdown", "`torch.equal` says they are identical.", None)))
    reference = "Measured 2026-11-25 with python tools/bench_scale.py on a 2-core CPU\nfused  2.20\n"
    quoted = "On the reference machine the fused kernel is faster (the table above)."
    assert problems(_notebook(("code", "", reference), ("markdown", quoted, None))) == []
    assert problems(_notebook(("code", "", "fused 2.20\n"), ("markdown", quoted, None)))
    claim = {"exactly 0": "exp(-inf) is 0 in IEEE arithmetic"}
    masked = "Masked weights are exactly 0, so both rows are identical."
    assert problems(_notebook(("code", "", "x\n"), ("markdown", masked, None), claims=claim)) == []
    assert problems(_notebook(("code", "", "x\n"), ("markdown", "Nothing here.", None), claims=claim)) == [
        "exact_claims lists 'exactly 0', but no sentence with a machine-dependent word contains it"]


def test_captions_are_prose_of_their_cell():
    notebook = _notebook(("code", "", "identical: 5\n"))
    notebook.cells[0].metadata["mystnb"] = {"figure": {"caption": "Five weights came out identical."}}
    assert problems(notebook) and "the caption of cell 0" in problems(notebook)[0]
    notebook.cells[0].metadata["mystnb"]["figure"]["caption"] = "The weights counted by `identical:`, identical here."
    assert problems(notebook) == []


def test_sentences_keep_abbreviations_and_split_items():
    text = ("Vaswani et al. (2017) chose it. It is faster.\n\n- one item\n- two items\n\n"
            "```python\nx = 1.80  # identical\n```\n\n```{note}\nA note, e.g. this one.\n```")
    assert sentences(text) == ["Vaswani et al. (2017) chose it.", "It is faster.", "- one item", "- two items",
                               "A note, e.g. this one."]


def test_numbers_match_whole_only():
    assert occurs("0.89", "weights [0.89, 0.11]")
    assert occurs("50,257", "vocabulary size: 50,257")
    assert not occurs("0.89", "0.890")
    assert not occurs("0.89", "10.89")
    assert not occurs("7", "17.1")
    assert occurs("[15496, 2159]", "[15496, 2159]\n")


def test_fingerprint_names_the_configuration(monkeypatch):
    path = NOTEBOOKS[0]
    before = run_fingerprint(path)
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert run_fingerprint(path) != before, "a run under another CPU capability must not be reused"
