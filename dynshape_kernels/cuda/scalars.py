"""The elementwise ops as CUDA device functions, generated from the op vocabulary.

Each op of ``abi.vocabulary`` has one scalar expression here (``UNARY_EXPR``,
``BINARY_EXPR``); :func:`switches` generates the op-code switches
a kernel calls, one per kind of dtype (``abi.switch_source.KINDS``): integer kernels leave
out the float-only ops, which the op specs never send them; the half-precision kinds take
and return carriers, widening the operands to float32 first and rounding the result to the
format (``cuda.half``), as the CPU's switches of those kinds do. Adding a unary op is one
vocabulary row plus one expression.
The expressions keep NumPy's special values (NaN propagates through relu/maximum/minimum,
exp overflows to inf) on the device and under the CUDA simulator alike.
"""
import math  # noqa: F401  (used by the generated source)

from ..abi.switch_source import KINDS, binary_cases, renamed, switch_source, unary_cases

#: unary op -> expression of ``v`` (the element) and ``a0``, ``a1`` (its attributes)
UNARY_EXPR = {
    "relu": "_relu(v)",
    "abs": "abs(v)",
    "neg": "-v",
    "exp": "_exp(v)",
    "log": "math.log(v) if v > 0 else (-math.inf if v == 0 else math.nan)",
    "sqrt": "math.sqrt(v) if v >= 0 else math.nan",
    "reciprocal": "1 / v if v != 0 else math.copysign(math.inf, v)",
    "sigmoid": "_sigmoid(v)",
    "tanh": "math.tanh(v)",
    "gelu": "0.5 * v * (1.0 + math.erf(v * 0.7071067811865476))",
    "gelu_tanh": "0.5 * v * (1.0 + math.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))",
    "silu": "v * _sigmoid(v)",
    "leaky_relu": "v if v >= 0 else v * a0",
    "clip": "_vmin(_vmax(v, a0), a1)",
    "copy": "v",
}

#: binary op -> expression of ``a`` and ``b``
BINARY_EXPR = {
    "add": "a + b",
    "sub": "a - b",
    "mul": "a * b",
    "div": "a / b",
    "pow": "_pow(a, b)",
    "maximum": "_vmax(a, b)",
    "minimum": "_vmin(a, b)",
}

_HELPERS = '''
def _exp(v):
    # exp of anything above log(max float64) is inf (the simulator's math.exp would raise)
    return math.exp(v) if not v > 709.0 else math.inf


def _sigmoid(v):
    # the argument of exp is never positive: no overflow on either side
    if v >= 0:
        return 1.0 / (1.0 + math.exp(-v))
    e = math.exp(v)
    return e / (1.0 + e)


def _relu(v):
    # np.maximum(v, 0): NaN propagates, -0.0 stays -0.0, -inf gives 0 (v - v would be NaN)
    return v if (v >= 0 or v != v) else 0.0


def _vmax(a, b):
    return a if (a >= b or a != a) else b


def _vmin(a, b):
    return a if (a <= b or a != a) else b


def _pow(a, b):
    return a ** b
'''

_INT_HELPERS = '''
def _relu(v):
    return v if v >= 0 else 0


def _pow(a, b):
    # integer power by squaring, wrapping like NumPy (negative exponents refused earlier)
    r = a - a + 1
    base = a
    e = b
    while e > 0:
        if e & 1:
            r = r * base
        base = base * base
        e >>= 1
    return r
'''


def _returns(expr):
    return [f"return {expr}"]


def _assigns(expr):
    return [f"r = {renamed(expr)}"]


def _switch(name, params, cases, load, narrow, operands):
    """One switch: returning each op's value, or, for a half-precision kind, computing it
    from the loaded operands and rounding it once after the switch (one inlined rounding
    per switch, not one per op: less PTX, and a fifth of its compile time)."""
    if not load:
        return switch_source(name, params, cases, _returns)
    pre = [f"{o}_ = {load}({o})" for o in operands]
    return switch_source(name, params, cases, _assigns, pre) + f"    return {narrow}(r)\n"


def generated_source(kind):
    """The Python source of the switches for one kind of dtype (``KINDS``; also shown by
    tests)."""
    integer = kind == "integer"
    load, narrow = KINDS[kind]
    helpers = _HELPERS + (_INT_HELPERS if integer else "")
    unary = unary_cases(UNARY_EXPR, integer, "CUDA")
    binary = binary_cases(BINARY_EXPR, integer, "CUDA")
    return (helpers + "\n\n"
            + _switch("unary_op", "code, v, a0, a1", unary, load, narrow, "v") + "\n\n"
            + _switch("binary_op", "code, a, b", binary, load, narrow, "ab"))


_built = {}


def switches(kind):
    """``(unary_op, binary_op)`` device functions for one kind of dtype (``KINDS``)."""
    hit = _built.get(kind)
    if hit is None:
        from numba import cuda

        from . import half
        ns = {"math": math, "widen16": half.widen16, "narrow16": half.narrow16,
              "widenbf": half.widenbf, "narrowbf": half.narrowbf}
        exec(compile(generated_source(kind), f"<dynshape cuda switch {kind}>", "exec"), ns)
        for name in ("_exp", "_sigmoid", "_relu", "_vmax", "_vmin", "_pow"):
            ns[name] = cuda.jit(device=True, inline=True)(ns[name])
        hit = _built[kind] = (cuda.jit(device=True, inline=True)(ns["unary_op"]),
                              cuda.jit(device=True, inline=True)(ns["binary_op"]))
    return hit
