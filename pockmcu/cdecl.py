"""cffi declarations read from the real C headers, so Python never holds a copy of a prototype.

    ffi.cdef(c_declarations(OUT / "model.h", include_dirs=[OUT, OUT / "kernels"]))
    ffi.cdef(code_declarations(SHIM_C, include_dirs=[KERNELS]))   # C text: its includes + its functions

The file is run through the host C preprocessor (``gcc -E``, following every ``#include``), and
the text that comes from system headers (the preprocessor marks it, flag 3 of its line markers)
is dropped: cffi knows ``int32_t`` and friends already. What remains is split into top-level
declarations, and what cffi cannot take is removed:

* ``static`` (and ``static inline``) functions and data: there is no symbol to call;
* ``__attribute__((...))``, ``__extension__``, ``__inline__``-style spellings;
* a function *definition* becomes its prototype (so a test shim written as C code declares itself),
  and a function declared twice (a header's prototype, then its definition) is declared once.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from .build import require_tool
from .errors import PockError

_LINEMARKER = re.compile(r'^#\s*\d+\s+"((?:[^"\\]|\\.)*)"((?:\s+\d+)*)\s*$')
_DROP_WORDS = re.compile(r"\b(__extension__|__inline__|__inline|__restrict__|__restrict)\b")
# string and character literals, emptied before braces are counted (a "{" in a string is no block)
_LITERAL = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'')


def preprocess(source: str | Path | None, include_dirs=(), defines=(), *, code: str | None = None) -> str:
    """The preprocessed text of the file `source` (or of the C text `code`) without the lines that
    come from system headers."""

    cc = require_tool("gcc")
    cmd = [cc, "-E", "-std=c99", "-x", "c", *(f"-I{d}" for d in include_dirs), *(f"-D{d}" for d in defines),
           "-" if code is not None else str(source)]
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # e.g. libasan, meant for Python only
    p = subprocess.run(cmd, input=code, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        first = next((ln for ln in p.stderr.splitlines() if "error" in ln), p.stderr.strip()[:200])
        raise PockError(f"{source or 'C code'}: the C preprocessor failed: {first}")
    keep, lines = True, []
    for ln in p.stdout.splitlines():
        m = _LINEMARKER.match(ln)
        if m:
            keep = "3" not in m.group(2).split()  # flag 3: the text comes from a system header
            continue
        if keep and not ln.lstrip().startswith("#"):  # #pragma and other directives gcc leaves in place
            lines.append(ln)
    return "\n".join(lines) + "\n"


def _strip_attributes(text: str) -> str:
    out, i = [], 0
    while True:
        j = text.find("__attribute__", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        k = text.index("(", j)
        depth = 0
        while True:
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        i = k


def _top_level(text: str) -> list[tuple[str, bool]]:
    """Split C text into top-level items: (text without its terminator, is_function_definition)."""
    items, start, i, n = [], 0, 0, len(text)
    while i < n:
        ch = text[i]
        if ch == ";":
            items.append((text[start:i], False))
            start = i + 1
        elif ch == "{":
            body = text[start:i].rstrip().endswith(")")  # `) {` opens a function body, not a struct
            depth = 0
            while True:
                depth += {"{": 1, "}": -1}.get(text[i], 0)
                i += 1
                if depth == 0:
                    break
            if body:
                items.append((text[start:text.index("{", start)], True))
                start = i
            continue
        i += 1
    if text[start:].strip():
        raise PockError(f"unterminated C declaration: {text[start:].strip()[:80]}")
    return items


def declarations_from_text(text: str) -> str:
    """cffi cdef text from preprocessed C (see the module docstring for what is kept)."""
    text = _LITERAL.sub(lambda m: m.group(0)[0] * 2 if m.group(0)[0] == '"' else "0", text)
    text = _DROP_WORDS.sub("", _strip_attributes(text))
    decls, functions = [], set()
    for item, is_function in _top_level(text):
        item = " ".join(item.split())
        if not item or re.match(r"(static|inline)\b", item) or re.search(r"\bstatic\s+inline\b", item):
            continue
        if is_function and re.search(r"\binline\b", item):
            continue
        m = re.match(r"[^(]*?\b(\w+)\s*\((?!\s*\*)", item)
        if m and "typedef" not in item and "=" not in item.split("(", 1)[0]:  # a function: declare it once
            if m.group(1) in functions:  # (a C file defines what its header declared; cffi wants one)
                continue
            functions.add(m.group(1))
        decls.append(item + ";")
    return "\n".join(decls) + "\n"


def c_declarations(source: str | Path, include_dirs=(), defines=()) -> str:
    """cffi cdef text declaring what the file `source` (a header, or a C file) and the headers it
    includes declare."""
    return declarations_from_text(preprocess(source, include_dirs, defines))


def code_declarations(code: str, include_dirs=(), defines=()) -> str:
    """cffi cdef text for the C text `code`: what its includes declare, and its own functions."""
    return declarations_from_text(preprocess(None, include_dirs, defines, code=code))
