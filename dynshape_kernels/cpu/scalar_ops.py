"""Scalar definitions of the elementwise ops, with NumPy's special-value semantics.

Op codes are part of the catalog (kernel id = family base + op index * slots + slot):
never renumber them, only append.
"""
import math

from numba import njit, types
from numba.extending import overload

from . import mathfuncs

from ..abi.vocabulary import (ABS, ADD, BINARY_OPS, CLIP, DIV, EXP,  # noqa: F401
                              FLOAT_ONLY_UNARY, GELU, GELU_TANH, IDENTITY, LEAKY_RELU, LOG,
                              MAXIMUM, MINIMUM, MUL, NEG, POW, RECIPROCAL, RELU, SIGMOID,
                              SILU, SQRT, SUB, TANH, UNARY_OPS)


def cast_like(arr, v):
    """Cast ``v`` to ``arr``'s element type (inside compiled code)."""


@overload(cast_like)
def _cast_like(arr, v):
    dt = arr.dtype

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


def float_unary(code, v):
    """Transcendental unary ops; the identity for integer types (never dispatched there)."""


@overload(float_unary)
def _float_unary(code, v):
    if not isinstance(v, types.Float):
        def impl_int(code, v):
            return v
        return impl_int

    def impl(code, v):
        if code == EXP:
            return mathfuncs.exp(v)
        elif code == LOG:
            return mathfuncs.log(v)
        elif code == SQRT:
            return math.sqrt(v) if v >= 0 else (v - v) / (v - v)
        elif code == RECIPROCAL:
            return 1 / v
        elif code == SIGMOID:
            return mathfuncs.sigmoid(v)
        elif code == TANH:
            return mathfuncs.tanh(v)
        elif code == GELU:
            return mathfuncs.gelu_erf(v)
        elif code == GELU_TANH:
            return mathfuncs.gelu_tanh(v)
        else:
            return mathfuncs.silu(v)
    return impl


@njit(cache=True)
def relu(v):
    # np.maximum(v, 0): NaN propagates, -0.0 stays -0.0
    return v if (v >= 0 or v != v) else zero_of(v)


@njit(cache=True)
def vmax(a, b):
    # np.maximum: NaN from either side propagates
    return a if (a >= b or a != a) else b


@njit(cache=True)
def vmin(a, b):
    return a if (a <= b or a != a) else b


@njit(cache=True)
def unary_scalar(code, v, a0, a1):
    """One element of unary op ``code``; ``a0``/``a1`` are its attributes in v's type."""
    if code == RELU:
        return relu(v)
    elif code == ABS:
        return abs(v)
    elif code == NEG:
        return -v
    elif code == LEAKY_RELU:
        return v if v >= 0 else v * a0
    elif code == CLIP:
        return vmin(vmax(v, a0), a1)
    elif code == IDENTITY:
        return v
    return float_unary(code, v)


def int_pow(a, b):
    """Integer power by squaring, wrapping like NumPy (negative exponents are refused earlier)."""


@overload(int_pow)
def _int_pow(a, b):
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


@njit(cache=True)
def binary_scalar(code, a, b):
    if code == ADD:
        return a + b
    elif code == SUB:
        return a - b
    elif code == MUL:
        return a * b
    elif code == DIV:
        return a / b
    elif code == POW:
        return int_pow(a, b)
    elif code == MAXIMUM:
        return vmax(a, b)
    return vmin(a, b)
