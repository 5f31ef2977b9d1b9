"""C code as data: what an op's step declares and calls, and the one place that writes it as C.

An op's ``OpDef.emit`` returns an ``Emission``: the constant declarations the step needs (``Array``,
``Struct``), the kernel calls it makes (``Call``) and, for a kernel whose scratch size it can ask,
the query expression (``buffer_query``). Arguments are data, not text:

- ``Ptr(tensor)``: the C array holding a tensor (arena pointer, flash array or trainable RAM copy);
- ``Local(name)``: ``&<step>_<name>``, a declaration of this step (``owner=`` another op's name for
  a declaration it shares, ``address=False`` for an array passed as a pointer);
- ``SCRATCH``: the step's planned scratch context (``&<step>_ctx``, or the empty one when the plan
  gives it none);
- ``int``, ``float`` (written as exact float32 literals) and ``str`` (a C expression, verbatim).

``render_call`` / ``render_decl`` turn them into C as clang-format (the repo's .clang-format, a
120-column limit, one argument per line when a call does not fit) would lay it out; codegen resolves
the names. Reports and plan.json read the same data: which functions a step calls, which tensors it
touches. Ops import this module; it imports nothing of pockmcu.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

import numpy as np

#: the column limit of the repo's .clang-format
COLUMNS = 120


@dataclass(frozen=True)
class Ptr:
    """The C array of ``tensor``, plus ``offset`` elements (an int, or a C expression)."""

    tensor: str
    offset: int | str = 0


@dataclass(frozen=True)
class Local:
    """A declaration of a step, named ``<owner>_<name>`` in C (owner: this op unless given)."""

    name: str
    owner: str | None = None
    address: bool = True          # pass &name (a struct); False: the name itself (an array)
    cast: str = ""                # a C cast written before it, e.g. "int32_t *" (CMSIS-NN takes non-const)


@dataclass(frozen=True)
class Scratch:
    """The step's scratch context (resolved by codegen from the plan)."""


SCRATCH = Scratch()

Arg = Union[str, int, float, Ptr, Local, Scratch]


@dataclass(frozen=True)
class Call:
    """One C call: ``[status = ]function(args...);``."""

    function: str
    args: tuple = ()
    status: bool = False          # it returns an arm_cmsis_nn_status, checked after the call
    #: an lvalue the result is stored in (e.g. "result->loss"), for a call without a status
    assign: str = ""
    #: (variable, count): the call runs in ``for (int32_t variable = 0; variable < count; variable++)``
    #: (stopping at the first failure when it returns a status); arguments may use the variable
    repeat: tuple[str, int] | None = None


@dataclass(frozen=True)
class Array:
    """``static const <ctype> <owner>_<name>[<len>] = {values};``"""

    name: str
    ctype: str
    values: tuple
    owner: str | None = None
    comment: str = ""


@dataclass(frozen=True)
class Struct:
    """``static const <ctype> <owner>_<name> = <init>;``: ``init`` a tuple (positional) or a dict
    (designated fields); values may nest."""

    name: str
    ctype: str
    init: tuple | dict
    owner: str | None = None
    comment: str = ""


Decl = Union[Array, Struct]


@dataclass(frozen=True)
class Emission:
    """Everything one step puts into the generated C."""

    calls: tuple = ()
    decls: tuple = ()
    #: an expression (a Call rendered without ';') giving the scratch bytes the kernel asks for;
    #: pockmcu_init compares it with the planned buffer
    buffer_query: Call | None = None
    #: tensors read or written through pointers that are not call arguments (rare; for reports)
    extra_tensors: tuple = field(default=())

    def tensors(self) -> list[str]:
        """The tensors the step's calls name, in order of first use."""
        seen: dict[str, None] = {}
        for c in self.calls:
            for a in c.args:
                if isinstance(a, Ptr):
                    seen.setdefault(a.tensor)
        for t in self.extra_tensors:
            seen.setdefault(t)
        return list(seen)

    def uses_scratch(self) -> bool:
        return any(a is SCRATCH or isinstance(a, Scratch) for c in self.calls for a in c.args)


def dims4(shape) -> tuple[int, ...]:
    """A shape as cmsis_nn_dims {n, h, w, c}: padded with leading 1s to four."""
    s = [int(d) for d in shape]
    return tuple([1] * (4 - len(s)) + s) if len(s) < 4 else tuple(s)


def float_lit(x: float) -> str:
    """A C float literal that reads back as exactly the same float32 (infinities and NaN as the
    compiler builtins: C99 has no literal for them, and INFINITY needs math.h)."""
    with np.errstate(over="ignore"):
        v = float(np.float32(x))
    if v != v:
        return '__builtin_nanf("")'
    if v in (float("inf"), float("-inf")):
        return ("-" if v < 0 else "") + "__builtin_inff()"
    return f"{v!r}f"


# -- rendering ---------------------------------------------------------------------------------------

class Names:
    """How a step's data becomes C names (given by codegen)."""

    def __init__(self, step: str, ptr: Callable[[str], str], scratch: str, ident: Callable[[str], str]):
        self.step = step              # the C identifier prefix of this step's declarations
        self.ptr = ptr                # tensor name -> C array
        self.scratch = scratch        # the C expression of the scratch context
        self.ident = ident            # op name -> C identifier

    def local(self, name: str, owner: str | None) -> str:
        return f"{self.ident(owner) if owner else self.step}_{name}"


def value(v, names: Names) -> str:
    """One argument or initializer value as C."""
    if isinstance(v, (bool, np.bool_)):
        return "1" if v else "0"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return float_lit(v)
    if isinstance(v, str):
        return v
    if isinstance(v, Ptr):
        base = names.ptr(v.tensor)
        return base if v.offset in (0, "") else f"{base} + {v.offset}"
    if isinstance(v, Local):
        return (f"({v.cast})" if v.cast else "") + ("&" if v.address else "") + names.local(v.name, v.owner)
    if isinstance(v, Scratch):
        return names.scratch
    if isinstance(v, dict):
        return "{" + ", ".join(f".{k} = {value(x, names)}" for k, x in v.items()) + "}"
    if isinstance(v, (tuple, list)):
        return "{" + ", ".join(value(x, names) for x in v) + "}"
    raise TypeError(f"cannot write {v!r} as C")


def render_call(call: Call, names: Names, indent: int = 4, expression: bool = False) -> str:
    """``call`` as a C statement (or, ``expression``, a bare expression) at ``indent`` columns: on
    one line when it fits, else its arguments packed into lines of COLUMNS aligned after the
    parenthesis."""
    if call.repeat and not expression:
        var, count = call.repeat
        cond = f"{var} < {count}" + (" && status == ARM_CMSIS_NN_SUCCESS" if call.status else "")
        body = render_call(Call(call.function, call.args, call.status), names, indent + 4)
        return (f"for (int32_t {var} = 0; {cond}; {var}++) {{\n"
                + "\n".join("    " + line for line in body.split("\n")) + "\n}")
    target = "status" if call.status else call.assign
    head = (f"{target} = " if target and not expression else "") + call.function + "("
    tail = ")" if expression else ");"
    args = [value(a, names) for a in call.args]
    one = head + ", ".join(args) + tail
    if indent + len(one) <= COLUMNS or not args:
        return one
    return _wrap(head, args, tail, indent, len(head))


def _wrap(prefix: str, items: list[str], suffix: str, indent: int = 0, hang: int = 4) -> str:
    """``prefix item, item, ... suffix`` packed into lines of COLUMNS (the first at ``indent``),
    continuation lines ``hang`` columns in."""
    line, lines = prefix, []
    for k, it in enumerate(items):
        piece = it + ("," if k < len(items) - 1 else suffix)
        if line != prefix and line.strip() and indent + len(line) + 1 + len(piece) > COLUMNS:
            lines.append(line.rstrip())
            line = " " * hang + piece
        else:
            line += ("" if line == prefix or not line.strip() else " ") + piece
    lines.append(line)
    return "\n".join(lines)


def render_decl(d: Decl, names: Names) -> str:
    """A declaration at file scope."""
    name = names.local(d.name, d.owner)
    comment = f" /* {d.comment} */" if d.comment else ""
    if isinstance(d, Array):
        items = [value(x, names) for x in d.values]
        text = _wrap(f"static const {d.ctype} {name}[{len(items)}] = {{", items, "};")
        return text + comment
    if isinstance(d, Struct):
        if isinstance(d.init, dict):
            items = [f".{k} = {value(x, names)}" for k, x in d.init.items()]
        else:
            items = [value(x, names) for x in d.init]
        return _wrap(f"static const {d.ctype} {name} = {{", items, "};") + comment
    raise TypeError(f"not a declaration: {d!r}")


# -- the checked build (make host-check) ---------------------------------------------------------------

def check_lines(emission: Emission, names: Names, nbytes: Callable[[str], int], elem_bytes: Callable[[str], int],
                base: Callable[[str], tuple[str, str]], scratch: str = "") -> list[str]:
    """C statements (for 8 columns in) of the checked build (``POCKMCU_CHECKED``, ``make host-check``):
    every pointer the step's calls pass, with the bytes its tensor holds from there on, lies inside the
    array it belongs to (``base(tensor)``: the arena, its constant array or a trainable tensor's RAM
    copy, as a C expression and its size); the scratch context (``scratch``: the step's context
    variable) lies in the arena. A pointer offset given as a C expression is checked as the tensor's
    start."""
    lines, seen = [], set()
    for c in emission.calls:
        for a in c.args:
            if not isinstance(a, Ptr):
                continue
            off = a.offset if isinstance(a.offset, (int, np.integer)) else 0
            key = (a.tensor, int(off))
            if key in seen:
                continue
            seen.add(key)
            arr, size = base(a.tensor)
            ptr = value(Ptr(a.tensor, int(off)), names)
            left = nbytes(a.tensor) - int(off) * elem_bytes(a.tensor)
            lines.append(render_call(Call("pockmcu_check_in", ("step", f'"{c.function}: {names.ptr(a.tensor)}"', ptr,
                                                               left, arr, size)), names, indent=8))
    if scratch and emission.uses_scratch():
        lines.append(f"pockmcu_check_scratch(step, &{scratch});")
    return lines
