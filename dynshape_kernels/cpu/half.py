"""Loads and stores of the half-precision storage formats (see ``abi.storage``).

``widen16`` / ``widenbf`` turn a carrier element (uint16 holding float16, int16 holding
bfloat16) into float32; ``narrow16`` / ``narrowbf`` round a float32 or float64 value to the
format, to nearest even, and give its carrier. float16 uses LLVM's ``fpext``/``fptrunc`` on
``half`` (F16C instructions on x86, vectorized: LLVM would call its runtime library,
which is not linked, for a conversion the CPU lacks); bfloat16 is the top half of a float32, so
widening is a shift and narrowing adds the rounding bias (NaN stays a quiet NaN). All are exact where the format can be exact and vectorize in the op loops.
"""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload


@intrinsic
def _f16_to_f32(typingctx, h):
    def codegen(context, builder, sig, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
    return types.float32(types.uint16), codegen


@intrinsic
def _to_f16(typingctx, f):
    if not isinstance(f, types.Float):
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
    return types.uint16(f), codegen


@intrinsic
def _bits_to_f32(typingctx, u):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.uint32), codegen


@intrinsic
def _f32_to_bits(typingctx, f):
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))
    return types.uint32(types.float32), codegen


@njit(inline="always")
def widen16(h):
    """float16 bits (uint16) -> float32."""
    return _f16_to_f32(h)


@njit(inline="always")
def narrow16(f):
    """float32 (or float64, through float32) -> float16 bits (uint16), rounded to nearest
    even. F16C converts from float32 only (float64 would need a runtime-library call), and
    through float32 the result is the same: a quotient or square root rounded to float32
    first rounds to float16 as it would directly (24 >= 2 * 11 + 2 bits)."""
    return _to_f16(np.float32(f))


@njit(inline="always")
def widenbf(h):
    """bfloat16 bits (int16) -> float32."""
    return _bits_to_f32(np.uint32(np.int32(h) << np.int32(16)))


@njit(inline="always")
def narrowbf(f):
    """float32 (or float64, through float32) -> bfloat16 bits (int16), rounded to nearest
    even; NaN gives the quiet NaN (its sign is not kept). The NaN is replaced in the float
    domain, where the select vectorizes (an integer test of the bits kept the loop scalar:
    2.2x slower, measured)."""
    g = np.float32(f)
    g = g if g == g else np.float32(np.nan)
    b = np.int32(_f32_to_bits(g))
    return np.int16((b + np.int32(0x7FFF) + ((b >> np.int32(16)) & np.int32(1)))
                    >> np.int32(16))


# ---- generic loads and stores for the families written once for every dtype ----------------
# A kernel reads ``load(x[i])`` and writes ``o[i] = store(o, v)``; scratch of computed values
# is ``compute_empty(x, n)``. For the carriers these widen, round and give float32 scratch; for
# every other dtype they are the identity (the store's cast stays the array's own), so the
# compiled float32/float64/integer kernels are unchanged.
def load(v):
    """An element as computed: a carrier element widened to float32, any other unchanged."""


def store(arr, v):
    """``v`` ready to store into ``arr``: rounded to the storage format for a carrier (a
    float64 value once, correctly: through float32 rounded to odd)."""


def compute_empty(arr, n):
    """Uninitialized scratch of n computed values of ``arr``'s elements (float32 for a
    carrier, else arr's dtype)."""


def compute_zero(arr):
    """Zero of the computed type of ``arr``'s elements (float32 for a carrier)."""


def is_half(dtype):
    """Whether a Numba dtype is a half-precision carrier (at typing time)."""
    return dtype in (types.uint16, types.int16)


@overload(load)
def _load(v):
    if v == types.uint16:
        return lambda v: widen16(v)
    if v == types.int16:
        return lambda v: widenbf(v)
    return lambda v: v


@njit(inline="always")
def _f64_to_f32_odd(d):
    """float64 -> float32 rounded to odd (toward zero, then the last bit set if inexact): a
    second rounding to a format of at most 22 bits then gives the correctly rounded result
    of d, which rounding through float32 to nearest would not always (double rounding)."""
    r = np.float32(d)
    if np.float64(r) == d or d != d:
        return r
    b = _f32_to_bits(r)
    if abs(np.float64(r)) > abs(d):          # rounded away from zero (or to inf): step back
        b = b - np.uint32(1)
    return _bits_to_f32(b | np.uint32(1))


@overload(store)
def _store(arr, v):
    wide = v == types.float64         # sums and means accumulated in float64: round once
    if arr.dtype == types.uint16:
        if wide:
            return lambda arr, v: narrow16(_f64_to_f32_odd(v))
        return lambda arr, v: narrow16(v)
    if arr.dtype == types.int16:
        if wide:
            return lambda arr, v: narrowbf(_f64_to_f32_odd(v))
        return lambda arr, v: narrowbf(v)
    return lambda arr, v: v


@overload(compute_empty)
def _compute_empty(arr, n):
    if is_half(arr.dtype):
        return lambda arr, n: np.empty(n, np.float32)
    dt = arr.dtype
    return lambda arr, n: np.empty(n, dt)


@overload(compute_zero)
def _compute_zero(arr):
    if is_half(arr.dtype):
        return lambda arr: np.float32(0)
    dt = arr.dtype
    return lambda arr: dt(0)
