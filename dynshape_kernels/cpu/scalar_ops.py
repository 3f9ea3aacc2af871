"""The elementwise ops on the CPU, each written once as a scalar expression, with NumPy's
special-value semantics.

``UNARY_SCALARS`` and ``BINARY_SCALARS`` hold one expression per op of the vocabulary
(``abi.vocabulary``), of the element ``v`` and the attributes ``a0``, ``a1`` (unary) or of
``a`` and ``b`` (binary), in the names of this module (``mathfuncs`` for the transcendental
functions). Every CPU op switch, scalar or vectorized loop, is generated from them
(``cpu.switches``). Op codes are part of the catalog (kernel id = family base + op index *
slots + slot): never renumber them, only append.
"""
from numba import types
from numba.extending import overload
from .callee import callee
from .half import is_half
from .powf import cube32, pow32

from ..abi.vocabulary import (ABS, ADD, BINARY_OPS, CLIP, DIV, EXP,  # noqa: F401
                              FLOAT_ONLY_UNARY, GELU, GELU_TANH, IDENTITY, LEAKY_RELU, LOG,
                              MAXIMUM, MINIMUM, MUL, NEG, POW, RECIPROCAL, RELU, SIGMOID,
                              SILU, SQRT, SUB, TANH, UNARY_OPS)

#: unary op -> expression of ``v`` (the element) and ``a0``, ``a1`` (its attributes)
UNARY_SCALARS = {
    "relu": "relu(v)",
    "abs": "abs(v)",
    "neg": "-v",
    "exp": "mathfuncs.exp(v)",
    "log": "mathfuncs.log(v)",
    # NaN below 0 as (v - v) / (v - v): 0/0 in v's own type under NumPy's error model
    "sqrt": "math.sqrt(v) if v >= 0 else (v - v) / (v - v)",
    "reciprocal": "1 / v",
    "sigmoid": "mathfuncs.sigmoid(v)",
    "tanh": "mathfuncs.tanh(v)",
    "gelu": "mathfuncs.gelu_erf(v)",
    "gelu_tanh": "mathfuncs.gelu_tanh(v)",
    "silu": "mathfuncs.silu(v)",
    "leaky_relu": "v if v >= 0 else v * a0",
    "clip": "vmin(vmax(v, a0), a1)",
    "copy": "v",
}

#: binary op -> expression of ``a`` and ``b``
BINARY_SCALARS = {
    "add": "a + b",
    "sub": "a - b",
    "mul": "a * b",
    "div": "a / b",
    "pow": "int_pow(a, b)",
    "maximum": "vmax(a, b)",
    "minimum": "vmin(a, b)",
}


def cast_like(arr, v):
    """Cast ``v`` to the type ``arr``'s elements are computed in (inside compiled code): the
    element type, or float32 for a half-precision carrier (``half.py``)."""


@overload(cast_like)
def _cast_like(arr, v):
    dt = types.float32 if is_half(arr.dtype) else arr.dtype

    def impl(arr, v):
        return dt(v)
    return impl


def zero_of(v):
    """Zero of v's type (inside compiled code)."""


@overload(zero_of)
def _zero_of(v):
    t = v

    def impl(v):
        return t(0)
    return impl


@callee(cache=True)
def relu(v):
    # np.maximum(v, 0): NaN propagates, -0.0 stays -0.0
    return v if (v >= 0 or v != v) else zero_of(v)


@callee(cache=True)
def vmax(a, b):
    # np.maximum: NaN from either side propagates
    return a if (a >= b or a != a) else b


@callee(cache=True)
def vmin(a, b):
    return a if (a <= b or a != a) else b


def int_pow(a, b):
    """a ** b: integers by squaring, wrapping like NumPy (negative exponents are refused
    earlier); float32 by :func:`powf.pow32` (vectorizable); float64 by libm's pow."""


@overload(int_pow, inline="always")
def _int_pow(a, b):
    if a == types.float32 and b == types.float32:
        return lambda a, b: pow32(a, b)         # vectorizable (powf.py)
    if isinstance(a, types.Float):
        def impl_f(a, b):
            return a ** b
        return impl_f

    def impl(a, b):
        r = a - a + 1
        base = a
        e = b
        while e > 0:
            if e & 1:
                r = r * base
            base = base * base
            e >>= 1
        return r
    return impl


def cube_pow(a, b):
    """``int_pow(a, b)`` for ``b == 3``: float32 by :func:`powf.cube32`, integers a * a * a
    (wrapping as int_pow's squaring does: the same product modulo 2^bits), float64 by libm's
    pow of ``b`` as int_pow (``a ** 3.0`` with a constant 3.0 would become a * a * a, two
    roundings)."""


@overload(cube_pow, inline="always")
def _cube_pow(a, b):
    if a == types.float32:
        return lambda a, b: cube32(a)
    if isinstance(a, types.Float):
        return lambda a, b: a ** b
    return lambda a, b: a * a * a
