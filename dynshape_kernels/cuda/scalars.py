"""The elementwise ops as CUDA device functions, generated from the op vocabulary.

Each op of ``abi.vocabulary`` has one scalar expression here (``UNARY_EXPR``,
``BINARY_EXPR``); :func:`unary_switch` and :func:`binary_switch` generate the op-code switch
a kernel calls, one per kind of dtype (integer kernels leave out the float-only ops, which
the op specs never send them). Adding a unary op is one vocabulary row plus one expression.
The expressions keep NumPy's special values (NaN propagates through relu/maximum/minimum,
exp overflows to inf) on the device and under the CUDA simulator alike.
"""
import math  # noqa: F401  (used by the generated source)

from ..abi.vocabulary import BINARY_OPS, UNARY, UNARY_OPS

#: unary op -> expression of ``v`` (the element) and ``a0``, ``a1`` (its attributes)
UNARY_EXPR = {
    "relu": "v if (v >= 0 or v != v) else v - v",
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


def _vmax(a, b):
    return a if (a >= b or a != a) else b


def _vmin(a, b):
    return a if (a <= b or a != a) else b


def _pow(a, b):
    return a ** b
'''

_INT_HELPERS = '''
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


def _source(name, args, cases):
    lines = [f"def {name}({args}):"]
    for i, (code, expr) in enumerate(cases):
        kw = "if" if i == 0 else "elif"
        lines.append(f"    {kw} code == {code}:")
        lines.append(f"        return {expr}")
    lines.append(f"    return {cases[-1][1]}")
    return "\n".join(lines) + "\n"


def unary_cases(integer):
    """(op code, expression) of every unary op a kernel of that kind of dtype runs."""
    missing = [u for u in UNARY_OPS if u not in UNARY_EXPR]
    if missing:
        raise KeyError(f"unary ops without a CUDA expression: {missing}")
    return [(UNARY_OPS.index(u.name), UNARY_EXPR[u.name]) for u in UNARY
            if not (integer and u.float_only)]


#: binary ops integer kernels never run (the op specs and fusion programs promote or refuse
#: them: true division of integers gives float64)
FLOAT_ONLY_BINARY = ("div",)


def binary_cases(integer=False):
    missing = [b for b in BINARY_OPS if b not in BINARY_EXPR]
    if missing:
        raise KeyError(f"binary ops without a CUDA expression: {missing}")
    return [(BINARY_OPS.index(b), BINARY_EXPR[b]) for b in BINARY_OPS
            if not (integer and b in FLOAT_ONLY_BINARY)]


def generated_source(integer):
    """The Python source of the switches for one kind of dtype (also shown by tests)."""
    helpers = _HELPERS + (_INT_HELPERS if integer else "")
    return (helpers + "\n\n" + _source("unary_op", "code, v, a0, a1", unary_cases(integer))
            + "\n\n" + _source("binary_op", "code, a, b", binary_cases(integer)))


_built = {}


def switches(integer):
    """``(unary_op, binary_op)`` device functions for integer or floating dtypes."""
    hit = _built.get(integer)
    if hit is None:
        from numba import cuda
        ns = {"math": math}
        exec(compile(generated_source(integer), f"<dynshape cuda switch int={integer}>",
                     "exec"), ns)
        for name in ("_exp", "_sigmoid", "_vmax", "_vmin", "_pow"):
            ns[name] = cuda.jit(device=True, inline=True)(ns[name])
        hit = _built[integer] = (cuda.jit(device=True, inline=True)(ns["unary_op"]),
                                 cuda.jit(device=True, inline=True)(ns["binary_op"]))
    return hit
