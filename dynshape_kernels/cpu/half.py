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
from numba.extending import intrinsic


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
