"""Loads and stores of the half-precision storage formats in CUDA device code (see
``abi.storage``; the CPU's are ``cpu.half``: same names, same results, bit for bit).

``widen16`` / ``widenbf`` turn a carrier element (uint16 holding float16, int16 holding
bfloat16) into float32, exactly (NaN payloads and signs, infinities, subnormals kept);
``narrow16`` / ``narrowbf`` round a float32 (or float64, through float32) value to the
format, to nearest even, and give its carrier: float16 keeps a NaN's sign and top payload
bits as a quiet NaN and overflows to inf from 65520 on; bfloat16 gives the positive quiet
NaN for any NaN. ``f64_to_f32_odd`` rounds a float64 to float32 to odd, so that a value
accumulated in float64 is rounded once, correctly, to either format.

Everything is integer arithmetic on the carriers and on a float32's bits (int64 throughout,
so no intermediate overflows or changes type). The only other steps are the two
reinterpretations float32 <-> uint32 bits: an LLVM bitcast in device code, NumPy's ``view``
under the CUDA simulator (which runs device functions as Python).

:func:`access` gives a kernel factory the loads and stores of its kind of dtype; for the
other kinds they are the identity, so the float32/float64/integer kernels are unchanged.
"""
import numpy as np
from numba import cuda, float32, float64, int16, int64, uint16, uint32



def _bitcasts():
    """(float32 -> uint32 bits, uint32 bits -> float32) for device code or the simulator."""
    from numba.cuda.core import config
    if config.ENABLE_CUDASIM:
        def f32_bits(f):
            return np.float32(f).view(np.uint32)

        def bits_f32(u):
            return np.uint32(u).view(np.float32)
        return f32_bits, bits_f32
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def f32_bits(typingctx, f):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir.IntType(32))
        return types.uint32(types.float32), codegen

    @intrinsic
    def bits_f32(typingctx, u):
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], ir.FloatType())
        return types.float32(types.uint32), codegen
    return f32_bits, bits_f32


f32_bits, bits_f32 = _bitcasts()
#: 2**-24, the unit of float16's subnormals (exact in float32)
_F16_TINY = 5.960464477539063e-08


@cuda.jit(device=True, inline=True)
def widen16(h):
    """float16 bits (uint16) -> float32."""
    b = int64(h) & 0xFFFF
    e = (b >> 10) & 0x1F
    m = b & 0x3FF
    if e == 0:                                   # zero or subnormal: m * 2**-24, exact
        f = float32(m) * float32(_F16_TINY)
        return -f if b >= 0x8000 else f
    r = ((b & 0x8000) << 16) | (m << 13)
    if e == 0x1F:                                # inf or NaN (payload kept)
        r = r | 0x7F800000
    else:
        r = r | ((e + 112) << 23)
    return bits_f32(uint32(r))


@cuda.jit(device=True, inline=True)
def narrow16(f):
    """float32 (or float64, through float32) -> float16 bits (uint16), rounded to nearest
    even (through float32 the result is the same: 24 >= 2 * 11 + 2 bits)."""
    b = int64(f32_bits(float32(f)))
    s = (b >> 16) & 0x8000
    a = b & 0x7FFFFFFF
    if a > 0x7F800000:                           # NaN: quiet, sign and top payload kept
        r = 0x7E00 | ((a >> 13) & 0x3FF)
    elif a >= 0x477FF000:                        # 65520 and above (and inf) round to inf
        r = 0x7C00
    elif a >= 0x38800000:                        # normal: rebias, round 13 bits to even
        r = (a - 0x38000000 + 0xFFF + ((a >> 13) & 1)) >> 13
    elif a > 0x33000000:                         # subnormal: |f| * 2**24 rounded to even
        m = (a & 0x7FFFFF) | 0x800000
        sh = 126 - (a >> 23)
        r = m >> sh
        rem = m & ((1 << sh) - 1)
        half = 1 << (sh - 1)
        if rem > half or (rem == half and (r & 1) == 1):
            r += 1
    else:                                        # at most 2**-25 (a tie): zero
        r = a - a
    return uint16(s | r)


@cuda.jit(device=True, inline=True)
def widenbf(h):
    """bfloat16 bits (int16) -> float32."""
    return bits_f32(uint32((int64(h) & 0xFFFF) << 16))


@cuda.jit(device=True, inline=True)
def narrowbf(f):
    """float32 (or float64, through float32) -> bfloat16 bits (int16), rounded to nearest
    even; NaN gives the quiet NaN (its sign is not kept), as on the CPU."""
    b = int64(f32_bits(float32(f)))
    if (b & 0x7FFFFFFF) > 0x7F800000:
        r = b - b + 0x7FC0
    else:
        r = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return int16(r - ((r & 0x8000) << 1))       # the carrier's signed value of the bits


@cuda.jit(device=True, inline=True)
def f64_to_f32_odd(d):
    """float64 -> float32 rounded to odd (toward zero, then the last bit set if inexact): a
    second rounding to a format of at most 22 bits then gives the correctly rounded result
    of d, which rounding through float32 to nearest would not always (double rounding)."""
    r = float32(d)
    if float64(r) == d or d != d:
        return r
    b = int64(f32_bits(r))
    if abs(float64(r)) > abs(d):                 # rounded away from zero (or to inf)
        b = b - 1
    return bits_f32(uint32(b | 1))


@cuda.jit(device=True, inline=True)
def _same(v):
    return v


@cuda.jit(device=True, inline=True)
def _narrow16_wide(d):
    return narrow16(f64_to_f32_odd(float64(d)))


@cuda.jit(device=True, inline=True)
def _narrowbf_wide(d):
    return narrowbf(f64_to_f32_odd(float64(d)))


class Access:
    """How a kernel of one kind of dtype reads and writes its arrays' elements.

    ``load(v)``: an element as computed (a carrier widened to float32, else unchanged);
    ``store(v)``: a float32 value ready to store (rounded to the format for a carrier, else
    unchanged: the array's store casts); ``store_wide(d)``: the same for a value accumulated
    in float64 (rounded once, correctly: through float32 rounded to odd); ``compute``: the
    Numba type computed in (float32 for a carrier, else the element type); ``half``: whether
    the kind is a storage format."""

    def __init__(self, load, store, store_wide, compute, half):
        self.load, self.store, self.store_wide = load, store, store_wide
        self.compute, self.half = compute, half


def access(kind, nbtype):
    """The :class:`Access` of kind ``kind`` (``abi.switch_source.KINDS``) whose elements
    have Numba type ``nbtype`` (the carrier for a half-precision kind)."""
    if kind == "float16":
        return Access(widen16, narrow16, _narrow16_wide, float32, True)
    if kind == "bfloat16":
        return Access(widenbf, narrowbf, _narrowbf_wide, float32, True)
    return Access(_same, _same, _same, nbtype, False)


__all__ = ["Access", "access", "bits_f32", "f32_bits", "f64_to_f32_odd", "narrow16",
           "narrowbf", "widen16", "widenbf"]
