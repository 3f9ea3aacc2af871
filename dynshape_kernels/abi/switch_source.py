"""The source of an op-code switch, generated from the op vocabulary (no Numba import).

Every target writes each elementwise op once, as a scalar expression of its operands (``v``,
``a0``, ``a1`` for a unary op; ``a``, ``b`` for a binary op). The switches the kernels call,
scalar ones and vectorized loops alike, are generated here from those expressions in op-code
order: one ``if code == K`` branch per op, the last op as the ``else``. An op missing its
expression is refused by name when the switch is generated, so a new vocabulary row without
its scalar function fails at import, never at run time.
"""
import re

from .vocabulary import BINARY_OPS, FLOAT_ONLY_BINARY, UNARY, UNARY_OPS

#: kinds of element type -> (load conversion, store conversion), by the names every target's
#: half-precision helpers share (``cpu.half``, ``cuda.half``): the storage formats compute
#: in float32 (``abi.storage``); the other kinds convert nothing
KINDS = {"float": ("", ""), "integer": ("", ""), "float16": ("widen16", "narrow16"),
         "bfloat16": ("widenbf", "narrowbf")}

_OPERAND = re.compile(r"\b(v|a|b)\b")


def renamed(expr):
    """``expr`` with its operands ``v``, ``a``, ``b`` renamed ``v_``, ``a_``, ``b_`` (the
    loaded values, when a switch converts its parameters first)."""
    return _OPERAND.sub(r"\1_", expr)


def unary_cases(exprs, integer, target):
    """``[(op code, expression)]`` of every unary op a kernel of that kind of dtype runs
    (integer kernels leave out the float-only ops, which the op specs never send them)."""
    missing = [u for u in UNARY_OPS if u not in exprs]
    if missing:
        raise KeyError(f"unary ops without a {target} scalar expression: {missing}")
    return [(UNARY_OPS.index(u.name), exprs[u.name]) for u in UNARY
            if not (integer and u.float_only)]


def binary_cases(exprs, integer, target):
    """``[(op code, expression)]`` of every binary op (integer kernels leave out ``div``)."""
    missing = [b for b in BINARY_OPS if b not in exprs]
    if missing:
        raise KeyError(f"binary ops without a {target} scalar expression: {missing}")
    return [(BINARY_OPS.index(b), exprs[b]) for b in BINARY_OPS
            if not (integer and b in FLOAT_ONLY_BINARY)]


def switch_source(name, params, cases, body, preamble=()):
    """Source of ``def name(params)`` switching on ``code`` over ``cases`` (after the lines
    ``preamble``).

    ``body(expr)`` gives the lines (unindented) that compute one op whose scalar
    expression is ``expr``; the last case is the ``else`` (an op code a kernel is never sent
    runs the last op), so every path returns or assigns.
    """
    lines = [f"def {name}({params}):", *("    " + ln for ln in preamble)]
    for i, (code, expr) in enumerate(cases[:-1]):
        lines.append(f"    {'if' if i == 0 else 'elif'} code == {code}:")
        lines.extend("        " + ln for ln in body(expr))
    indent = "        " if len(cases) > 1 else "    "
    if len(cases) > 1:
        lines.append("    else:")
    lines.extend(indent + ln for ln in body(cases[-1][1]))
    return "\n".join(lines) + "\n"
