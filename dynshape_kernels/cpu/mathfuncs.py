"""Vectorizable scalar transcendental functions for Numba ``@njit`` code.

Why this module exists
----------------------
The llvmlite wheels are not SVML-patched, so inside Numba ``np.exp`` /
``math.exp`` (and log, tanh, erf, ...) lower to *scalar* libm calls and a loop
``for i in range(n): o[i] = np.exp(x[i])`` cannot be vectorized; it ends up
slower than NumPy's own SIMD ufuncs.  The functions below are written with
range reduction + polynomial approximations in plain arithmetic, integer bit
tricks done through small LLVM intrinsics (bitcasts, shifts) and selects
instead of branches.  Calling them in such a loop lets LLVM emit AVX2/AVX-512
code (``vfmadd...ps/pd`` on ``ymm``/``zmm`` registers).

Usage::

    from numba import njit
    from dynshape_kernels.cpu import mathfuncs as mf

    @njit
    def gelu_inplace(x):
        for i in range(x.size):
            x[i] = mf.gelu_erf(x[i])

Every public function takes one scalar: float32 is computed in float32 and
returns float32; float64 in float64; integers/bools are converted to float64
(like NumPy).  The implementations are compiled with ``error_model='numpy'``
and without fast-math, independently of the caller's options (they are
``numba.extending.overload`` implementations whose LLVM instructions carry
no fast-math flags even after inlining), so the special-value behaviour
below holds even if the *caller* is compiled with ``fastmath=True`` (tested
for exp/log/tanh) -- though the caller's own arithmetic then may not.
Called from plain Python (outside jit code) the functions accept a scalar and
run the same compiled code (slow per call; meant for debugging).

Public functions
----------------
``exp, expm1, log, log1p, tanh, sigmoid, silu, erf, erfc, gelu_erf,
gelu_tanh``

* ``sigmoid(x) = 1/(1+exp(-x))`` evaluated stably (``exp(x)/(1+exp(x))`` for
  x<0): no overflow, relative accuracy kept down to the denormal range.
* ``silu(x) = x*sigmoid(x)``.
* ``gelu_erf(x) = 0.5*x*(1+erf(x/sqrt(2)))``; for x<0 it is evaluated as
  ``0.5*x*erfc(|x|/sqrt(2))`` with x^2/2 carried as an exact double-word, so
  the left tail keeps *relative* accuracy (a naive formula loses everything
  below x ~ -5).
* ``gelu_tanh(x) = 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3)))``, evaluated
  as ``x*sigmoid(2*sqrt(2/pi)*(x+0.044715x^3))`` with the argument in
  double-word arithmetic (again for relative accuracy in the left tail).

Special values (all match NumPy; checked by the tests)
------------------------------------------------------
* NaN in -> NaN out for every function (the NaN's sign/payload is not
  specified).
* exp: exp(+inf)=inf, exp(-inf)=+0, overflow (x > 88.72 f32 / 709.78 f64)
  -> inf, results in the denormal range are produced as correctly scaled
  denormals (NumPy does the same) and deeper underflow gives +0. Speed: a
  lane whose result is exactly 0, -0.0 or x (exp, sigmoid, silu far below 0,
  gelu's and gelu_tanh's tails) skips the scaling by 2^k that would underflow,
  since an underflowing or denormal result costs a microcode assist on Intel
  cores (~10x the function: a softmax over rows half masked with -inf ran 5.7x
  slower). Genuine denormal results keep it (tested on the SSE status flags).
  expm1: expm1(+inf)=inf, expm1(-inf)=-1, expm1(-0.0)=-0.0.
* log: log(+-0)=-inf, log(x<0)=nan, log(-inf)=nan, log(+inf)=inf, denormal
  inputs are handled exactly (rescaled before the exponent is taken apart).
  log1p: log1p(-1)=-inf, log1p(x<-1)=nan, log1p(inf)=inf, log1p(-0.0)=-0.0.
* tanh(+-inf)=+-1, tanh(-0.0)=-0.0.
* sigmoid(+inf)=1, sigmoid(-inf)=0, sigmoid(-0.0)=0.5.
* erf(+-inf)=+-1, erf(-0.0)=-0.0, erfc(+inf)=0, erfc(-inf)=2.
* silu / gelu_erf / gelu_tanh: +inf -> +inf, -0.0 -> -0.0, and -inf -> nan,
  exactly as NumPy evaluating the defining formula (``-inf * 0``); the
  pointwise limit would be -0.0 (``torch`` also returns nan for silu(-inf)).

Accuracy ("documented tolerance")
---------------------------------
float32 results are compared with the float64 reference rounded to float32
and the error is counted in float32 ULPs (integer distance between the two
floats; denormals count in steps of 2^-149).  References: NumPy float64 for
exp/expm1/log/log1p/tanh, stable float64 formulas for sigmoid/silu/gelu_tanh,
``math.erf``/``math.erfc`` for erf/erfc/gelu_erf.

float64 results are compared with a higher-precision reference: NumPy
``longdouble`` (x87 80-bit) for exp/expm1/log/log1p/tanh/sigmoid/silu/
gelu_tanh, mpmath (40 digits) for erf/erfc/gelu_erf (on a 2e5-point random
subset of the sweep).  The relative error is reported for normal results;
denormal results are compared in units of the smallest denormal (2^-1074).

The sweeps (``python tests/kernels/test_mathfuncs.py`` reproduces the table)
have, per function and dtype, 3.4e6-5e6 points: a sweep over the bit patterns
of both signs (every binade from the smallest denormal to the largest finite,
so all overflow/underflow/saturation regions), a dense linear sweep and random
points over the core range, and every consecutive float in windows of 65536
(float32) / 16384 (float64) floats around 0, +-1 and each threshold
(exp overflow/underflow, switch points of the piecewise formulas, ...).
float32 ``gelu_erf`` was checked exhaustively too: max 3 ULP for x >= 0, 4 for
x < 0 (at x = -0.0642; its former single-erfc form: 3 and 4, at -6.93), so
its tolerance is 4 ULP.
float32 ``exp`` was also checked exhaustively (all 2^32 inputs): max 1 ULP,
99.6 % correctly rounded.

Measured on AMD Zen 5 (AVX-512, FMA).  "tol" is the documented tolerance,
asserted by ``tests/kernels/test_mathfuncs.py`` (sweeps + hypothesis):

==========  ==============  =========  ============================  ===========
function    f32 max ULP     f32 tol    f64 max rel. err (~ULP)       f64 tol
==========  ==============  =========  ============================  ===========
exp         1               1 ULP      1.6e-16 (1.0)                 1e-15 rel
expm1       2               3 ULP      2.6e-16 (2.0)                 1e-15 rel
log         1               2 ULP      1.5e-16 (0.7)                 1e-15 rel
log1p       1               2 ULP      1.5e-16 (0.7)                 1e-15 rel
tanh        2               3 ULP      3.6e-16 (2.3)                 1e-15 rel
sigmoid     2               3 ULP      3.3e-16 (1.5)                 1e-15 rel
silu        2               3 ULP      3.3e-16 (1.5)                 1e-15 rel
erf         1               2 ULP      1.6e-16 (1.2)                 1e-15 rel
erfc        2               3 ULP      2.6e-16 (1.2)                 1e-15 rel
gelu_erf    4 (exhaustive)  4 ULP      3.5e-16 (1.6)                 1e-15 rel
gelu_tanh   3               4 ULP      3.3e-16 (1.6)                 1e-15 rel
==========  ==============  =========  ============================  ===========

float64 denormal results: max 0.97 units of 2^-1074 (tolerance 2).  The
relative accuracy holds over the whole range, including the far tails that
naive formulas lose: erfc down to its underflow, gelu_erf / gelu_tanh /
silu / sigmoid for large negative x (results ~1e-30 ... 1e-300 keep full
relative accuracy because the exponent arguments are carried in double-word
arithmetic and the final power of two is applied after the last rounding).
The tolerances are a bit looser than the measured maxima because only exp is
exhaustively verified.

How it works
------------
* exp: k = rint(x/ln2) with the 1.5*2^p "shifter" trick, Cody-Waite
  r = x - k*ln2 (ln2 split in hi/lo so k*ln2_hi is exact), e^r = 1+r+r^2*Q(r)
  with a near-minimax Q (degree 4 f32 / 9 f64), then 2^k is built from the
  exponent bits.  2^k is applied with one rounding over the full range
  (overflow to inf, gradual underflow to denormals): with AVX-512F by
  ``llvm.ldexp``, one ``vscalef`` per vector (``HAS_SCALEF``; its integer k
  one truncating conversion of the integral float k); elsewhere
  (where that intrinsic is a scalar libm call) as two factors
  2^(k>>1)*2^(k-(k>>1)), the first multiply exact.  Both give the same bits
  (tested, denormal results included).
* expm1: same reduction; expm1 = 2^k*q + (2^k - 1), q = expm1(r).
* log/log1p: x = m*2^e with m in [sqrt(1/2), sqrt(2)) via integer bit
  arithmetic (denormals pre-scaled by 2^25 / 2^54); f32: log1p(f) =
  f - f^2/2 + f^3 P(f) (degree 8); f64: s = f/(2+f), log1p(f) = 2s + s^3 R(s^2)
  (degree 6), recombined with a hi/lo ln2.  log1p adds the rounding error of
  1+x as a first-order correction.
* tanh: expm1(2|x|) / (expm1(2|x|) + 2) with the sign copied back.
* sigmoid/silu: e = exp(-|x|) = (1+q)*2^k; x<0 uses e/(1+e) with 2^k
  applied last.
* erf/erfc: |x| < 1: erf = x*E(x^2) (degree 6 / 11).  Otherwise
  erfc(x) = t*exp(-x^2 + G(2t-1))/2, t = 2/(2+x), G of degree 10 / 26 (Estrin
  evaluation for the long one).  For erfc (and gelu_erf's left tail) the
  relative accuracy is kept by (a) x^2 split into an exact hi part (top half
  of the significand squared) + a small lo part, (b) the last two steps of G
  compensated (double-word), (c) the rounding error of t = 2/(2+x) corrected
  to first order including G's sensitivity to t.  erf itself uses the cheap
  uncompensated form (it only needs erfc <= 0.16 to absolute accuracy).
* gelu_erf, float32: a single erfc(a), a = |x|/sqrt(2), serves both signs
  (w = |x|*erfc(a)/2; gelu = x - w for x >= 0, -w below), as
  erfc(a)/2 = exp(-x^2/2) * R(|x|) with a rational R = p/((c|x| + b)p + n)
  (p of degree 4, n of degree 3, one division; a minimax fit by
  ``tools/fit_mathfuncs_coeffs.py``, 2.6e-8 relative, and 4.1e-8 with its
  float32 coefficients, refitted after rounding).  Written this way, the
  rounding of p's evaluation cancels to first order where the c|x|p term
  dominates the denominator.  -x^2/2 is carried exactly (FMA product), exp's
  k is taken from its high part, and the power of two is applied last (one
  vscalef with AVX-512F, else two scalings: the same bits).  About 28 vector
  instructions, against ~45 for the former
  form (erfc's t = 2/(2+a) with its rounding compensated and a degree-10
  exponent polynomial) and ~70 for float64's fully compensated form.
* gelu_tanh: z = 2*sqrt(2/pi)*(x + 0.044715x^3) computed as a double-word
  (error-free products with FMA, or Dekker's algorithm without hardware FMA),
  then x*sigmoid(z) as above.
* Coefficients are regenerated by ``tools/fit_mathfuncs_coeffs.py``
  (Chebyshev interpolants computed with mpmath).

Everything is branch free: all paths of a function are computed and combined
with ``select``; LLVM turns those into blends.  All internal helpers are
compiled with ``forceinline`` (LLVM ``alwaysinline``): erf & co. exceed the
default inlining threshold and a call left in the loop body would prevent
vectorization.

Performance
-----------
``bench/bench_mathfuncs.py`` (1e7 elements, one Zen 5 core, CPU time):
float32 exp 2.1 ms (NumPy 3.9), log 3.1 (NumPy 3.2), tanh 2.6 (NumPy 2.6),
sigmoid 3.2 / silu 3.3 / gelu_tanh 7.3 ms vs 9-15 ms for the equivalent NumPy
expressions; float64 exp 5.4 (NumPy 9.9), log 6.8 (9.3), tanh 6.8 (10.4).
erf/gelu_erf (no NumPy equivalent): float32 8 / 13 ms, float64 27 / 29 ms
(float32 gelu_erf since its single-erfc form: 9.1 ms where the previous form
took 16.6 on an EPYC Zen 4 core; PyTorch's own gelu 5.2 ms, at 1755 ulp for
x >= -3 and no relative accuracy below -5).  Its rational form: 0.519 ns/element
in L1 on one EPYC core where the single-erfc form took 0.904 (exp: 0.252).
The same loop calling ``np.exp`` / ``math.erf`` in Numba (scalar libm) takes
20-200 ms.  At 1e7 float32 elements exp/log/tanh are close to the memory
bandwidth of one core; in cache (1e6 elements) float32 exp runs at ~0.16
ns/element vs NumPy's ~0.35, while NumPy's hand-written AVX-512 float32
log/tanh are ~10-30 % faster than these.  With ``vscalef`` (one instruction
where the two scalings take nine) float32 exp takes 0.12 ns/element
(L2-resident, one Zen 5 core; 0.15 with the scalings), sigmoid 0.195 (0.225),
silu 0.214 (0.244); erf, erfc and gelu_tanh over [-12, 12] 0.54 / 0.83 / 0.51
(1.5 / 2.5 / 2.1: the scalings' denormal intermediates take microcode assists).
Taking vscalef's k by one conversion instead of from the shifter sum's bits
(19 -> 18 vector instructions in exp's loop) gained 2-4 %: exp 0.113 -> 0.110,
sigmoid 0.185 -> 0.178, erf 0.523 -> 0.505 (two rounds each way, alternating).

Caveats
-------
* The accuracy numbers were measured with hardware FMA.  Without it,
  ``llvm.fmuladd`` becomes a separate multiply and add (checked with
  ``DYNSHAPE_MATHFUNCS_NO_FMA=1``, which also forces the Dekker products: same
  maxima on the quick sweep) -- but the non-FMA *polynomial* path has not been
  run on real non-FMA hardware.
* Results are bitwise identical between the vectorized loop body and the
  scalar remainder iterations (asserted by the tests), but are *not* bitwise
  identical to NumPy (typically 0-1 ULP apart), nor to other CPUs where LLVM
  may not fuse the same multiply-adds.
* Inputs or results in the denormal range are slow on x86 (microcode assists),
  as for every implementation (less so with ``vscalef``).
* ``DYNSHAPE_MATHFUNCS_NO_FMA`` / ``_NO_SCALEF`` change the generated code but not
  Numba's cache key: use them with a Numba cache of their own.
* A caller compiled with ``cache=True`` caches the inlined code: after
  changing this module, clear the caller's Numba cache.
* float16 is not supported (pass float32).
"""

import os
import platform

import numpy as np
from llvmlite import ir
import llvmlite.binding as _llvm
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, overload
from .callee import callee
from .vector_width import target_has_avx512f

__all__ = [
    "exp", "expm1", "log", "log1p", "tanh", "sigmoid", "silu", "erf", "erfc",
    "gelu_erf", "gelu_tanh", "FUNCTIONS", "HAS_HW_FMA", "HAS_SCALEF",
]

# Options for every internal jitted helper.  error_model='numpy' removes the
# ZeroDivisionError branch on float division (which would block vectorization);
# fastmath stays off so that inf/nan/signed-zero semantics are IEEE;
# forceinline marks the LLVM functions alwaysinline: the bigger ones (erf...)
# exceed LLVM's inlining threshold, and a call left in the loop body would
# prevent vectorization.  Compiled as callees (``callee``): no Python wrappers.
_JIT = dict(error_model="numpy", fastmath=False, nogil=True, forceinline=True)


def _host_has_fma():
    try:
        feats = _llvm.get_host_cpu_features()
        if "fma" in feats:
            return bool(feats["fma"])
    except Exception:  # pragma: no cover - feature query not available
        pass
    return platform.machine().lower() in ("aarch64", "arm64", "ppc64le", "s390x")


#: True if ``llvm.ldexp`` is one instruction per vector (AVX-512F's ``vscalef``), which
#: exp and the functions built on it then use to apply 2^k (elsewhere the intrinsic is a
#: scalar library call, which would stop the loop from vectorizing: two exact scalings
#: by bit-built powers of two instead). ``DYNSHAPE_MATHFUNCS_NO_SCALEF=1`` forces the
#: scalings (testing).
HAS_SCALEF = target_has_avx512f() and os.environ.get(
    "DYNSHAPE_MATHFUNCS_NO_SCALEF", "0") in ("", "0")


#: True if exact FMA is a single instruction on this host.  Picks the
#: error-free product (``llvm.fma``) vs Dekker's algorithm (erf family,
#: gelu_tanh).  ``DYNSHAPE_MATHFUNCS_NO_FMA=1`` forces the Dekker path (testing).
HAS_HW_FMA = _host_has_fma() and os.environ.get("DYNSHAPE_MATHFUNCS_NO_FMA", "0") in ("", "0")


# ---------------------------------------------------------------------------
# LLVM intrinsics (all branch free, all vectorizable)
# ---------------------------------------------------------------------------

def _lty(fty):
    return ir.FloatType() if fty.bitwidth == 32 else ir.DoubleType()


def _call_intrinsic(builder, name, fty, args):
    lt = _lty(fty)
    fnty = ir.FunctionType(lt, [lt] * len(args))
    fn = builder.module.declare_intrinsic(name, [lt], fnty)
    return builder.call(fn, args)


def _is_float(t):
    return isinstance(t, types.Float) and t.bitwidth in (32, 64)


@intrinsic
def _fmuladd(typingctx, a, b, c):
    """a*b+c, fused if the target has FMA (llvm.fmuladd)."""
    if _is_float(a) and a == b == c:
        def codegen(context, builder, sig, args):
            return _call_intrinsic(builder, "llvm.fmuladd", sig.return_type, args)
        return a(a, b, c), codegen


@intrinsic
def _fma_exact(typingctx, a, b, c):
    """a*b+c with a single rounding (llvm.fma); only used when HAS_HW_FMA."""
    if _is_float(a) and a == b == c:
        def codegen(context, builder, sig, args):
            return _call_intrinsic(builder, "llvm.fma", sig.return_type, args)
        return a(a, b, c), codegen


@intrinsic
def _fabs(typingctx, a):
    if _is_float(a):
        def codegen(context, builder, sig, args):
            return _call_intrinsic(builder, "llvm.fabs", sig.return_type, args)
        return a(a), codegen


@intrinsic
def _copysign(typingctx, mag, sgn):
    if _is_float(mag) and mag == sgn:
        def codegen(context, builder, sig, args):
            return _call_intrinsic(builder, "llvm.copysign", sig.return_type, args)
        return mag(mag, sgn), codegen


@intrinsic
def _select(typingctx, cond, a, b):
    """``a if cond else b`` as an LLVM ``select`` (a blend when vectorized)."""
    if isinstance(cond, types.Boolean) and a == b:
        def codegen(context, builder, sig, args):
            return builder.select(args[0], args[1], args[2])
        return a(cond, a, b), codegen


def _fmt(fty):
    """(int type, mantissa bits, exponent bias, shifter 1.5*2^p) for a float type."""
    if fty.bitwidth == 32:
        return ir.IntType(32), 23, 127, 12582912.0
    return ir.IntType(64), 52, 1023, 6755399441055744.0


def _emit_int_k(builder, fty, kf):
    """Integer k from an integral-valued float kf (|kf| < 2^22), without fptosi.

    (kf + 1.5*2^p) is exact and its low significand bits hold k in two's
    complement; subtracting the shifter's bit pattern yields k.  Unlike fptosi
    this never produces poison (NaN just gives garbage bits).
    """
    ity, mant, bias, shifter = _fmt(fty)
    lt = _lty(fty)
    t = builder.fadd(kf, ir.Constant(lt, shifter))
    ti = builder.bitcast(t, ity)
    if fty.bitwidth == 32:
        sbits = int(np.array(shifter, dtype=np.float32).view(np.int32))
    else:
        sbits = int(np.array(shifter, dtype=np.float64).view(np.int64))
    return builder.sub(ti, ir.Constant(ity, sbits))


def _freeze(builder, value):
    """LLVM's ``freeze value`` (llvmlite's builder has no method for it): a poison value
    (fptosi of NaN or of an out-of-range float) becomes some fixed value of its type."""
    instr = ir.instructions.Instruction(builder.block, value.type, "freeze", [value])
    builder._insert(instr)
    return instr


def _emit_pow2(builder, fty, k):
    ity, mant, bias, _ = _fmt(fty)
    e = builder.add(k, ir.Constant(ity, bias))
    return builder.bitcast(builder.shl(e, ir.Constant(ity, mant)), _lty(fty))


@intrinsic
def _ldexp2(typingctx, p, kf):
    """p * 2^kf for integral kf, |kf| <= 2*(max exponent), rounded once.

    With ``HAS_SCALEF`` one ``llvm.ldexp`` (a vscalef). Otherwise two exact
    scalings: the first multiply (by 2^(k>>1)) is exact for p in [0.5, 2), the
    second rounds once, so gradual underflow to denormals and overflow to inf
    come out correctly rounded.
    """
    if _is_float(p) and p == kf:
        def codegen(context, builder, sig, args):
            fty = sig.return_type
            ity = _fmt(fty)[0]
            if HAS_SCALEF:
                i32 = ir.IntType(32)
                lt = _lty(fty)
                fn = cgutils.get_or_insert_function(
                    builder.module, ir.FunctionType(lt, [lt, i32]),
                    f"llvm.ldexp.f{fty.bitwidth}.i32")
                # kf is integral: one conversion (vcvttps2dq), which vscalef's lowering
                # converts back; freeze: a NaN kf gives some integer (p is NaN then), not
                # poison
                k32 = _freeze(builder, builder.fptosi(args[1], i32))
                return builder.call(fn, [args[0], k32])
            k = _emit_int_k(builder, fty, args[1])
            k1 = builder.ashr(k, ir.Constant(ity, 1))
            k2 = builder.sub(k, k1)
            s1 = _emit_pow2(builder, fty, k1)
            s2 = _emit_pow2(builder, fty, k2)
            return builder.fmul(builder.fmul(args[0], s1), s2)
        return p(p, kf), codegen


@intrinsic
def _pow2(typingctx, kf):
    """2^kf for integral kf inside the normal exponent range."""
    if _is_float(kf):
        def codegen(context, builder, sig, args):
            fty = sig.return_type
            return _emit_pow2(builder, fty, _emit_int_k(builder, fty, args[0]))
        return kf(kf), codegen


@intrinsic
def _pow2_shifted(typingctx, y, off):
    """2^(k + off) from y = k + 1.5*2^p, the rounded "shifter" sum whose low
    significand bits hold the integer k (exp's range reduction computes it
    anyway): one integer add and one shift, no float round trip.  ``off`` is a
    literal; k + off must stay inside the normal exponent range."""
    if _is_float(y) and isinstance(off, types.IntegerLiteral):
        o = off.literal_value

        def codegen(context, builder, sig, args):
            fty = sig.return_type
            ity, mant, bias, shifter = _fmt(fty)
            fdt = np.float32 if fty.bitwidth == 32 else np.float64
            idt = np.int32 if fty.bitwidth == 32 else np.int64
            sbits = int(np.array(shifter, dtype=fdt).view(idt))
            e = builder.add(builder.bitcast(args[0], ity), ir.Constant(ity, bias + o - sbits))
            return builder.bitcast(builder.shl(e, ir.Constant(ity, mant)), _lty(fty))
        return y(y, off), codegen


@intrinsic
def _log_split(typingctx, x):
    """For positive normal finite x return (m, e) with x = m*2^e, m in [sqrt(.5), sqrt(2))."""
    if _is_float(x):
        tup = types.UniTuple(x, 2)

        def codegen(context, builder, sig, args):
            fty = sig.args[0]
            ity, mant, bias, _ = _fmt(fty)
            lt = _lty(fty)
            if fty.bitwidth == 32:
                off, sqh = 0x004AFB0D, 0x3F3504F3
            else:
                off, sqh = 0x00095F619980C433, 0x3FE6A09E667F3BCD
            ix = builder.add(builder.bitcast(args[0], ity), ir.Constant(ity, off))
            e = builder.sub(builder.ashr(ix, ir.Constant(ity, mant)), ir.Constant(ity, bias))
            mbits = builder.add(builder.and_(ix, ir.Constant(ity, (1 << mant) - 1)),
                                ir.Constant(ity, sqh))
            m = builder.bitcast(mbits, lt)
            ef = builder.sitofp(e, lt)
            return context.make_tuple(builder, tup, [m, ef])
        return tup(x), codegen


@intrinsic
def _mask_hi(typingctx, x):
    """Clear the low half of the significand: the result squared is exact."""
    if _is_float(x):
        def codegen(context, builder, sig, args):
            fty = sig.return_type
            ity = _fmt(fty)[0]
            nclear = 12 if fty.bitwidth == 32 else 27
            mask = ((1 << fty.bitwidth) - 1) ^ ((1 << nclear) - 1)
            xi = builder.bitcast(args[0], ity)
            xi = builder.and_(xi, ir.Constant(ity, mask))
            return builder.bitcast(xi, _lty(fty))
        return x(x), codegen


# ---------------------------------------------------------------------------
# Coefficients (tools/fit_mathfuncs_coeffs.py), lowest degree first
# ---------------------------------------------------------------------------

# exp(r) = 1 + r + r^2 Q(r), |r| <= 0.3467
_EXP_Q_F32 = (0.5, 0.166665768946066, 0.0416665544984137, 0.008363194882419041,
              0.0013926203361634337)
_EXP_Q_F64 = (0.5000000000000001, 0.16666666666666669, 0.04166666666662404,
              0.008333333333330055, 0.0013888888917258759, 0.00019841269863088255,
              2.4801521225986432e-05, 2.7557268406190795e-06, 2.7620121717381933e-07,
              2.51004110820149e-08)
# log1p(f) = f - f^2/2 + f^3 P(f), f in [sqrt(.5)-1, sqrt(2)-1]
_LOG32_P = (0.33333331180030046, -0.24999996957950882, 0.200007157488921,
            -0.16667802319501254, 0.1424905764569748, -0.12425687331451106,
            0.1168541992348674, -0.11479733846637635, 0.06971611471451178)
# s = f/(2+f), z = s^2: log1p(f) = 2s + s*z*R(z)
_LOG64_R = (0.666666666666667, 0.39999999999899444, 0.2857142862600327,
            0.22222211130259878, 0.18182889455674947, 0.15331710618210773,
            0.14616585424888623)
# erf(x) = x*E(x^2), |x| < 1
_ERF_SMALL_F32 = (
    1.1283791658483509, -0.37612626666720334, 0.11283594715160218, -0.026854212010626412,
    0.005189087423433974, -0.000801686428716587, 7.875875062685488e-05)
_ERF_SMALL_F64 = (
    1.1283791670955126, -0.37612638903183543, 0.11283791670945006, -0.02686617064323777,
    0.0052239776071164225, -0.0008548325975389692, 0.00012055294904839707,
    -1.492473690741966e-05, 1.6447424703317362e-06, -1.6208483801871705e-07,
    1.3720064546777686e-08, -7.795898827002142e-10)
_ERF_E0_LO_F64 = 7.975362179473361e-18   # c0 - float64(c0) of the fitted c0
# t = 2/(2+x), v = 2t - 1: erfc(x) = t*exp(-x^2 + G(v))/2, 0 <= x <= XMAX
_ERFC_G_F32 = (
    0.02135310187492296, 0.6726432624988611, 0.04734276947239437, -0.04689624872892998,
    -0.009863925999211234, 0.008823721596439677, 0.0017091838166548611,
    -0.002305905068631942, -3.762829765062708e-05, 0.0005249872481727447,
    -0.00014613752623989117)
_ERFC_G_F64 = (
    0.021353096503253045, 0.6726432239776569, 0.04734330684190298, -0.04689561023118759,
    -0.009872689366284854, 0.008824938557538268, 0.0017589335547982619,
    -0.002345812508954057, -0.0001462468187649676, 0.0006736788779170403,
    -9.373542679983656e-05, -0.00017430342636317575, 7.140327105728566e-05,
    3.1746906224038875e-05, -3.0196529572618498e-05, 1.3397141799562535e-07,
    8.585331260861877e-06, -2.94388872472149e-06, -1.3133314833679538e-06,
    1.2508329815861864e-06, -1.1839360179803458e-07, -2.5862154266234647e-07,
    1.1380355882156319e-07, 1.375955642880817e-08, -2.0975366741289525e-08,
    3.5378791234272905e-09, 3.515891390100447e-10)
_ERFC_G1_LO_F64 = -3.666826582791907e-17   # c1 - float64(c1)
# float32 gelu: erfc(x/sqrt2)*exp(x^2/2)/2 = P(x) / ((C*x + B)*P(x) + N(x)), 0 <= x <= 14.71,
# max relative error 4.1e-8 with these float32 coefficients (N refitted after rounding)
_GELU32_C, _GELU32_B = 2.5065596103668213, 0.004173336550593376
_GELU32_P = (1.899999976158142, 1.5881633758544922, 0.637734591960907, 0.13433663547039032,
             0.012587172910571098)
_GELU32_N = (3.7920706272125244, 1.4391964673995972, 0.34548017382621765, 0.030110184103250504)


def _horner(name, coeffs, ft, scheme=None):
    """A jitted evaluator of p(x) = sum c_i x^i with ``ft``-typed constants.

    scheme "horner": c0 + x*(c1 + x*(...)) (fewest operations, longest
    dependency chain); "estrin": pairwise in powers x^2, x^4, ... (a few more
    multiplies, a chain of ~log2(n) FMAs, which matters for the long erfc
    polynomials where the out-of-order window can't hide a 27-deep FMA chain).
    Default: Estrin from 12 coefficients on.
    """
    if scheme is None:
        scheme = "estrin" if len(coeffs) >= 12 else "horner"
    names = [f"c{i}" for i in range(len(coeffs))]
    lines = []
    if scheme == "horner":
        expr = names[-1]
        for n in reversed(names[:-1]):
            expr = f"_fmuladd({expr}, x, {n})"
        lines.append(f"return {expr}")
    else:
        terms, power, level = names, "x", 0
        while len(terms) > 1:
            nxt = []
            for i in range(0, len(terms) - 1, 2):
                nxt.append(f"_fmuladd({terms[i + 1]}, {power}, {terms[i]})")
            if len(terms) % 2:
                nxt.append(terms[-1])
            tnames = []
            for j, e in enumerate(nxt):
                v = f"t{level}_{j}"
                lines.append(f"{v} = {e}")
                tnames.append(v)
            terms = tnames
            if len(terms) > 1:
                lines.append(f"p{level + 1} = {power} * {power}")
                power = f"p{level + 1}"
            level += 1
        lines.append(f"return {terms[0]}")
    src = f"def {name}(x):\n" + "".join(f"    {l}\n" for l in lines)
    ns = {"_fmuladd": _fmuladd}
    ns.update({n: ft(c) for n, c in zip(names, coeffs)})
    exec(compile(src, f"<mathfuncs:{name}>", "exec"), ns)
    return callee(**_JIT)(ns[name])


# ---------------------------------------------------------------------------
# Per-dtype implementations
# ---------------------------------------------------------------------------

def _build(ft):
    f32 = ft is np.float32
    tag = "f32" if f32 else "f64"

    ZERO, ONE, TWO, HALF = ft(0.0), ft(1.0), ft(2.0), ft(0.5)
    INF, NAN = ft(np.inf), ft(np.nan)
    NEG_ONE, NEG_INF = ft(-1.0), ft(-np.inf)
    LOG2E = ft(1.4426950408889634)
    SHIFTER = ft(12582912.0) if f32 else ft(6755399441055744.0)
    if f32:
        LN2_HI, LN2_LO = ft(0.693359375), ft(-0.00021219444170128554)
    else:
        LN2_HI, LN2_LO = ft(0.6931471803691238), ft(1.9082149292705877e-10)
    # exp: clamp so |k| stays within the two-factor scaling range
    EXP_LO, EXP_HI = (ft(-110.0), ft(90.0)) if f32 else (ft(-760.0), ft(720.0))
    # below EXP_ZERO exp(x) < 2^-(emin + mant + 1), half the least denormal: it rounds to 0.
    # Lanes past such a threshold scale by 2^0 and select their result: a scaling that
    # underflows costs a microcode assist on Intel cores (exp of 1e6 values under -110: 2.5
    # ms against 0.23; a softmax over rows half masked with -inf: 5.3 ms against 0.9)
    EXP_ZERO = ft(-104.0) if f32 else ft(-746.0)
    NEG_ZERO = ft(-0.0)
    # expm1 saturates at -1 below -17.3 (f32) / -37.5 (f64)
    EM1_LO, EM1_HI = (ft(-30.0), ft(89.0)) if f32 else (ft(-60.0), ft(710.0))
    EM1_KBIG = ft(100.0) if f32 else ft(1000.0)
    TANH_CLAMP = ft(10.0) if f32 else ft(20.0)
    TINY = ft(np.finfo(ft).tiny)
    KMIN = ft(np.log2(np.finfo(ft).tiny))         # least normal exponent
    # a floor for the exponent of an e = p * 2^k (p = 1 + q >= 2^-0.5) that only enters
    # 1 + e: e stays normal (a denormal product costs an assist, see EXP_ZERO) and, below
    # 2^(KMIN + 1), still rounds away in 1 + e
    KFLOOR = KMIN + ONE
    SUB_SCALE, SUB_E = (ft(2.0**25), ft(25.0)) if f32 else (ft(2.0**54), ft(54.0))
    ERF_THR = ft(1.0)
    ERFC_THR = ft(0.25)           # erf(0.25) ~ 0.28: 1 - erf loses < 1 bit below
    ERFC_XMAX = ft(10.4) if f32 else ft(27.3)   # erfc(XMAX)*XMAX underflows to 0
    # gelu constants: A = 2*sqrt(2/pi), B = A*0.044715 as hi+lo pairs
    if f32:
        A_HI, A_LO = ft(1.5957691669464111), ft(-4.534068054340423e-08)
        B_HI, B_LO = ft(0.07135481387376785), ft(2.3988324659995897e-09)
        INV_SQRT2, INV_SQRT2_LO = ft(0.7071067690849304), ft(1.2101617485882343e-08)
        SPLITTER = ft(4097.0)
    else:
        A_HI, A_LO = ft(1.5957691216057308), ft(-9.96930880911092e-17)
        B_HI, B_LO = ft(0.07135481627260025), ft(-6.175149918155315e-19)
        INV_SQRT2, INV_SQRT2_LO = ft(0.7071067811865476), ft(-4.833646656726457e-17)
        SPLITTER = ft(134217729.0)
    GT_CLAMP = ft(100.0)
    C1 = ft(1.2567583341910251)   # 4/sqrt(pi) - 1
    ERFC_XMAX_X = ft(float(ERFC_XMAX) * 1.4142135623730951)

    exp_q = _horner(f"exp_q_{tag}", _EXP_Q_F32 if f32 else _EXP_Q_F64, ft)
    erf_small = _ERF_SMALL_F32 if f32 else _ERF_SMALL_F64
    erf_e1 = _horner(f"erf_e1_{tag}", erf_small[1:], ft)    # E(z) = e0 + z*E1(z)
    E0 = ft(erf_small[0])
    E0_LO = ft(erf_small[0] - float(E0)) if f32 else ft(_ERF_E0_LO_F64)
    erfc_gc = _ERFC_G_F32 if f32 else _ERFC_G_F64
    erfc_g = _horner(f"erfc_g_{tag}", erfc_gc, ft)
    erfc_g2 = _horner(f"erfc_g2_{tag}", erfc_gc[2:], ft)   # G = c0 + v*(c1 + v*G2)
    G0, G1 = ft(erfc_gc[0]), ft(erfc_gc[1])
    # low part of c1 (its rounding error times v matters at this accuracy)
    G1_LO = ft(erfc_gc[1] - float(G1)) if f32 else ft(_ERFC_G1_LO_F64)
    if f32:
        gelu_p = _horner("gelu_p_f32", _GELU32_P, ft)
        gelu_n = _horner("gelu_n_f32", _GELU32_N, ft)
        GELU_C, GELU_B = ft(_GELU32_C), ft(_GELU32_B)
        log_p = _horner("log_p_f32", _LOG32_P, ft)
    else:
        log_r = _horner("log_r_f64", _LOG64_R, ft)

    jit = callee(**_JIT)

    @jit
    def clamp(x, lo, hi):
        # NaN-preserving: comparisons with NaN are false, so x passes through.
        x = _select(x > hi, hi, x)
        return _select(x < lo, lo, x)

    @jit
    def exp_qk(x):
        # exp(x) = (1 + q) * 2^kf, |q| < 0.42, kf integral (x clamped so that
        # _ldexp2 still produces the correct inf / denormal / 0).  Returning q
        # instead of 1+q lets callers fold the "1 +" into an FMA (one rounding).
        return exp_qk_clamped(clamp(x, EXP_LO, EXP_HI))

    @jit
    def exp_qk_neg(x):
        # exp_qk for x <= 0 (or NaN): only the low clamp can bind
        return exp_qk_clamped(_select(x < EXP_LO, EXP_LO, x))

    @jit
    def exp_qk_clamped(xc):
        kf = _fmuladd(xc, LOG2E, SHIFTER) - SHIFTER
        r = _fmuladd(kf, -LN2_HI, xc)           # exact
        r = _fmuladd(kf, -LN2_LO, r)
        return _fmuladd(r * r, exp_q(r), r), kf

    @jit
    def exp_qk3(h, l1, l2):
        # exp(h + l1 + l2) = (1 + q) * 2^kf for an argument carried in three
        # parts (|l1| <= ~2, |l2| <= ~0.1).  The Cody-Waite step on h is exact
        # and k is chosen from the whole sum, so (h - k*ln2_hi) + l1 is small
        # and rounds with a tiny absolute error.
        hc = clamp(h, EXP_LO, EXP_HI)
        kf = _fmuladd(hc + (l1 + l2), LOG2E, SHIFTER) - SHIFTER
        r = _fmuladd(kf, -LN2_HI, hc)
        r = (r + l1) + l2
        r = _fmuladd(kf, -LN2_LO, r)
        return _fmuladd(r * r, exp_q(r), r), kf

    @jit
    def exp_(x):
        q, kf = exp_qk(x)
        zero = x < EXP_ZERO
        return _select(zero, ZERO, _ldexp2(ONE + q, _select(zero, ZERO, kf)))

    @jit
    def expm1_(x):
        xc = clamp(x, EM1_LO, EM1_HI)
        kf = _fmuladd(xc, LOG2E, SHIFTER) - SHIFTER
        r = _fmuladd(kf, -LN2_HI, xc)
        r = _fmuladd(kf, -LN2_LO, r)
        q = _fmuladd(r * r, exp_q(r), r)          # expm1(r)
        big = kf > EM1_KBIG                       # 2^k could overflow: use 2^(k-1) * 2
        s = _pow2(_select(big, kf - ONE, kf))
        c = _select(big, ZERO, ONE)
        m = _select(big, TWO, ONE)
        res = _fmuladd(s, q, s - c) * m
        return _copysign(res, x)                  # expm1 has the sign of x (keeps -0.0)

    if f32:
        @jit
        def log_core(m, e, c):
            # log(m * 2^e) + c, m in [sqrt(.5), sqrt(2)), |c| tiny
            f = m - ONE
            z = f * f
            y = f * z * log_p(f)
            y = _fmuladd(e, LN2_LO, y) + c
            y = _fmuladd(-HALF, z, y)
            r = f + y
            return _fmuladd(e, LN2_HI, r)
    else:
        @jit
        def log_core(m, e, c):
            f = m - ONE
            hfsq = HALF * f * f
            s = f / (TWO + f)
            z = s * s
            R = z * log_r(z)
            return e * LN2_HI - ((hfsq - (s * (hfsq + R) + _fmuladd(e, LN2_LO, c))) - f)

    @jit
    def log_(x):
        sub = x < TINY
        xs = _select(sub, x * SUB_SCALE, x)
        m, e = _log_split(xs)
        e = _select(sub, e - SUB_E, e)
        r = log_core(m, e, ZERO)
        r = _select(x < INF, r, x)          # +inf -> inf, nan -> nan
        r = _select(x == ZERO, NEG_INF, r)
        return _select(x < ZERO, NAN, r)

    @jit
    def log1p_(x):
        u = ONE + x
        # rounding error of u, relative to u (exact by Sterbenz in each branch)
        c = _select(u < TWO, x - (u - ONE), ONE - (u - x)) / u
        sub = u < TINY
        us = _select(sub, u * SUB_SCALE, u)
        m, e = _log_split(us)
        e = _select(sub, e - SUB_E, e)
        r = log_core(m, e, c)
        r = _copysign(r, x)                 # log1p(-0.0) = -0.0
        r = _select(x < INF, r, x)
        r = _select(x == NEG_ONE, NEG_INF, r)
        return _select(x < NEG_ONE, NAN, r)

    @jit
    def tanh_(x):
        ax = _select(_fabs(x) > TANH_CLAMP, TANH_CLAMP, _fabs(x))
        em = expm1_(ax + ax)
        return _copysign(em / (em + TWO), x)

    @jit
    def sigmoid_(x):
        # x >= 0: 1/(1+e); x < 0: e/(1+e) with e = exp(-|x|) = p*2^k, the
        # 2^k applied last so tiny results round once (denormal range).
        q, kf = exp_qk_neg(-_fabs(x))
        p = ONE + q
        # e only enters 1 + e: below 2^KFLOOR it rounds away whatever its value, so one
        # scaling with k held in the normal range is enough
        e = p * _pow2(_select(kf < KFLOOR, KFLOOR, kf))
        pos = x >= ZERO
        num = _select(pos, ONE, p)
        zero = x < EXP_ZERO                                   # sigmoid(x) < exp(x): 0
        r = _ldexp2(num / (ONE + e), _select(pos, ZERO, _select(zero, ZERO, kf)))
        return _select(zero, ZERO, r)

    @jit
    def silu_(x):
        q, kf = exp_qk_neg(-_fabs(x))
        e = (ONE + q) * _pow2(_select(kf < KFLOOR, KFLOOR, kf))    # as in sigmoid
        pos = x >= ZERO
        xn = _select(x < EXP_LO, EXP_LO, x)                 # no overflow in xn*(1+q)
        num = _select(pos, x, _fmuladd(xn, q, xn))
        zero = x < EXP_LO                           # |x| exp(x) < 2^-151: -0.0
        r = _ldexp2(num / (ONE + e), _select(pos, ZERO, _select(zero, ZERO, kf)))
        r = _select(zero, NEG_ZERO, r)
        return _select(x == NEG_INF, NAN, r)        # -inf * sigmoid(-inf) = nan

    if HAS_HW_FMA:
        @jit
        def two_prod(a, b):
            p = a * b
            return p, _fma_exact(a, b, -p)
    else:
        @jit
        def split(a):
            c = SPLITTER * a
            ah = c - (c - a)
            return ah, a - ah

        @jit
        def two_prod(a, b):
            p = a * b
            ah, al = split(a)
            bh, bl = split(b)
            return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl

    @jit
    def erf_small_(a):
        # erf(a) = a*E(a^2) for a < 1, with the dominant a*e0 term rounded
        # only once (e0 = 2/sqrt(pi) carried as hi + lo)
        z = a * a
        return _fmuladd(a, E0, a * _fmuladd(z, erf_e1(z), E0_LO))

    @jit
    def erf_parts(a, al, hi, lo):
        # a = |x| clamped to [0, XMAX] (plus a tiny correction al: the true
        # argument is a + al); a^2 == hi + lo (hi exact, |lo| << hi).
        # returns (es, m, kf): es = erf(a) from the small-argument polynomial,
        # erfc(a) = m * 2^kf from the large-argument formula; the caller
        # selects by a < ERF_THR.
        es = erf_small_(a)
        d = TWO + a
        dl = _select(a > TWO, (a - d) + TWO, (TWO - d) + a) + al   # d + dl == 2 + a + al
        t = TWO / d
        ph, pl = two_prod(t, d)
        tc = ((TWO - ph) - pl - t * dl) * (HALF * t)          # 2/(2+a) - t
        # The formula is exact only for the exact t; its sensitivity to an
        # error in t is ~(1 + C1*t) (G' included), so correct for it:
        T = _fmuladd(_fmuladd(C1, t, ONE), tc, t)
        # G(v), |G| < 0.7, with the last two Horner steps compensated: its
        # absolute error is a relative error of the result.  g = gs + gl.
        v = (t + t) - ONE                                     # exact for t >= 1/8
        p2 = erfc_g2(v)
        p1 = _fmuladd(v, p2, G1)
        e1 = _fmuladd(v, p2, G1 - p1)                        # (G1 + v*p2) - p1
        gh, gl = two_prod(v, p1)
        gs = G0 + gh                                          # two_sum(G0, gh)
        bb = gs - G0
        gl = (((G0 - (gs - bb)) + (gh - bb)) + gl) + v * (e1 + G1_LO)
        q, kf = exp_qk3(-hi, gs, gl - lo)
        return es, _fmuladd(T, q, T), kf - ONE

    @jit
    def square_split(a):
        ah = _mask_hi(a)
        return ah * ah, (a - ah) * (a + ah)

    @jit
    def erf_(x):
        # erf only needs erfc(a) (a >= 1, erfc <= 0.16) to ~1 ulp *absolute*
        # accuracy, so the cheap form of the erfc formula is enough here:
        # no t correction, plain Horner, and a rounded a*a in the exponent.
        a = clamp(_fabs(x), ZERO, ERFC_XMAX)
        es = erf_small_(a)
        t = TWO / (TWO + a)
        q, kf = exp_qk(erfc_g((t + t) - ONE) - a * a)
        ec = _ldexp2(_fmuladd(t, q, t), kf - ONE)
        r = _select(a < ERF_THR, es, ONE - ec)
        return _copysign(r, x)

    @jit
    def erfc_(x):
        a = clamp(_fabs(x), ZERO, ERFC_XMAX)
        hi, lo = square_split(a)
        es, m, kf = erf_parts(a, ZERO, hi, lo)
        ec = _ldexp2(m, kf)
        small = a < ERF_THR
        pos = x >= ZERO
        # x >= 0: 1 - erf only while erf <= 1/2 (no cancellation), the erfc
        # formula (valid on all of [0, XMAX]) beyond.
        r_pos = _select(a < ERFC_THR, ONE - es, ec)
        r_neg = _select(small, ONE + es, TWO - ec)
        return _select(pos, r_pos, r_neg)

    TWO_M64 = ft(2.0 ** -64)
    # gelu's w = |x| erfc(|x|/sqrt(2))/2 rounds to 0 beyond GELU_ZERO (float32: w < 2^-152;
    # float64: < 2^-1076) and is under half an ulp of x beyond GELU_POS_BIG (float32: w <
    # 2^-123; float64: erfc < 2^-654), so those lanes skip the scaling (see EXP_ZERO)
    GELU_ZERO, GELU_POS_BIG = (ft(14.5), ft(13.0)) if f32 else (ft(38.61), ft(30.0))

    @jit
    def gelu_erf32_(x):
        # float32: w = |x|*erfc(a)/2, a = |x|/sqrt(2), serves both signs (gelu = x - w
        # for x >= 0, -w below), with erfc(a)/2 = exp(-x^2/2) * R(|x|) and the rational
        # R = p/((c*|x| + b)*p + n) (one division; p's rounding cancels to first order
        # where the c*|x|*p term dominates).  -x^2/2 is carried exactly as h + l, the
        # power of two is applied last so results in the denormal range (x < -13.2)
        # are rounded once.
        xa = _fabs(x)
        # w is 0 for the result (scaled by 2^0, then selected): it rounds to 0 (x < 0), or
        # is under half an ulp of x (x > 0: from 13, where w < 2^-123)
        big = xa > _select(x >= ZERO, GELU_POS_BIG, GELU_ZERO)
        xa = _select(xa > ERFC_XMAX_X, ERFC_XMAX_X, xa)
        h, l = two_prod(xa, -HALF * xa)                        # h + l = -x^2/2
        y = _fmuladd(h, LOG2E, SHIFTER)                        # k from h: |l| < 7e-6
        kf = y - SHIFTER
        r = _fmuladd(kf, -LN2_HI, h)                           # exact
        r = _fmuladd(kf, -LN2_LO, r + l)
        q = _fmuladd(r * r, exp_q(r), r)                       # e^r - 1
        p = gelu_p(xa)
        rr = p / _fmuladd(_fmuladd(xa, GELU_C, GELU_B), p, gelu_n(xa))
        m = _fmuladd(rr, q, rr)
        # w = xa*m*2^k rounded once (results in the denormal range too): one vscalef, or
        # an exact scaling by 2^(k+64) and a rounding one by 2^-64 (the same bits; _ldexp2's
        # own fallback is exact only for a first factor in [0.5, 2))
        if HAS_SCALEF:
            w = _ldexp2(xa * m, _select(big, ZERO, kf))
        else:   # the lanes selected away scale by 2^0 too: theirs would underflow (a flag,
            # and on Intel a microcode assist), x clamped at ERFC_XMAX_X giving k near -73
            w = ((xa * m) * _pow2_shifted(_select(big, SHIFTER, y), 64)) * TWO_M64
        w = _select(big, ZERO, w)
        res = _select(x >= ZERO, x - w, -w)            # keeps -0.0; nan stays nan
        return _select(x == NEG_INF, NAN, res)        # -inf * 0 = nan

    @jit
    def gelu_erf_(x):
        # u = x/sqrt(2); u^2 = x^2/2 exactly as hi + lo
        xa = clamp(_fabs(x), ZERO, ERFC_XMAX_X)
        a, al = two_prod(xa, INV_SQRT2)          # |x|/sqrt(2) = a + al
        al = _fmuladd(xa, INV_SQRT2_LO, al)
        xh = _mask_hi(xa)
        hi = HALF * (xh * xh)
        lo = HALF * ((xa - xh) * (xa + xh))
        es, m, kf = erf_parts(a, al, hi, lo)
        pos = x >= ZERO
        big = _fabs(x) > _select(pos, GELU_POS_BIG, GELU_ZERO)    # x, or -0.0
        kf = _select(big, ZERO, kf)
        ec = _select(big, ZERO, _ldexp2(m, kf))
        small = a < ERF_THR
        # 1 + erf(u) for x >= 0, erfc(|u|) for x < 0
        r_pos = x * (HALF * _select(small, ONE + es, TWO - ec))
        # x < 0: erfc(|u|) = m*2^kf on the whole range (1 - erf would cancel);
        # the 2^kf is applied last so tiny results are rounded only once.
        r_neg = _ldexp2(_select(x < -ERFC_XMAX_X, -ERFC_XMAX_X, x) * (HALF * m), kf)
        r_neg = _select(big, NEG_ZERO, r_neg)
        r_neg = _select(a < ERFC_THR, x * (HALF * (ONE - es)), r_neg)
        r = _select(pos, r_pos, r_neg)
        return _select(x == NEG_INF, NAN, r)        # -inf * 0 = nan

    @jit
    def gelu_tanh_(x):
        xc = clamp(x, -GT_CLAMP, GT_CLAMP)
        # z = x*(A + B*x^2) in double-word arithmetic
        x2h, x2l = two_prod(xc, xc)
        bh, bl = two_prod(B_HI, x2h)
        bl = bl + (B_HI * x2l + B_LO * x2h)
        sh = A_HI + bh                          # two_sum(A_HI, bh)
        bb = sh - A_HI
        sl = ((A_HI - (sh - bb)) + (bh - bb)) + (bl + A_LO)
        zh, zl = two_prod(xc, sh)
        zl = zl + xc * sl
        # sigmoid(z) = 1/(1+e) (z>=0) or e/(1+e) (z<0), e = exp(-|z|)
        neg = zh < ZERO
        q, kf = exp_qk3(_select(neg, zh, -zh), _select(neg, zl, -zl), ZERO)
        # no scaling underflows (see EXP_ZERO): e only enters 1 + e, where below 2^KFLOOR
        # it rounds away; below EXP_LO the result |x| e^z / (1 + e^z) < 2^-151 is -0.0
        e = _ldexp2(ONE + q, _select(kf < KFLOOR, KFLOOR, kf))
        num = _select(neg, _fmuladd(xc, q, xc), x)
        zero = zh < EXP_LO
        r = _ldexp2(num / (ONE + e), _select(neg, _select(zero, ZERO, kf), ZERO))
        r = _select(zero, NEG_ZERO, r)
        return _select(x == NEG_INF, NAN, r)        # -inf * 0 = nan

    return dict(exp=exp_, expm1=expm1_, log=log_, log1p=log1p_, tanh=tanh_,
                sigmoid=sigmoid_, silu=silu_, erf=erf_, erfc=erfc_,
                gelu_erf=gelu_erf32_ if f32 else gelu_erf_, gelu_tanh=gelu_tanh_)


_IMPL32 = _build(np.float32)
_IMPL64 = _build(np.float64)


# ---------------------------------------------------------------------------
# Public generic functions
# ---------------------------------------------------------------------------

def _make_public(name, doc):
    impl32 = _IMPL32[name]
    impl64 = _IMPL64[name]

    def stub(x):
        if isinstance(x, np.float32):
            return np.float32(impl32(x))
        if isinstance(x, (float, int, bool, np.floating, np.integer, np.bool_)):
            return np.float64(impl64(np.float64(x)))
        raise TypeError(
            f"mathfuncs.{name} takes a scalar; use it inside an @njit loop for arrays")

    stub.__name__ = stub.__qualname__ = name
    stub.__module__ = __name__
    stub.__doc__ = doc

    @overload(stub, jit_options=_JIT)
    def _ol(x):
        if isinstance(x, types.Float):
            if x.bitwidth == 32:
                return lambda x: impl32(x)
            if x.bitwidth == 64:
                return lambda x: impl64(x)
        if isinstance(x, (types.Integer, types.Boolean)):
            return lambda x: impl64(np.float64(x))
        return None

    return stub


exp = _make_public("exp", "exp(x). Overflow -> inf, underflow -> denormal / +0.")
expm1 = _make_public("expm1", "exp(x) - 1, accurate near 0; expm1(-0.0) = -0.0.")
log = _make_public("log", "Natural log. log(0) = -inf, log(x<0) = nan, log(inf) = inf.")
log1p = _make_public("log1p", "log(1+x), accurate near 0; log1p(-1) = -inf, x < -1 -> nan.")
tanh = _make_public("tanh", "Hyperbolic tangent; tanh(+-inf) = +-1, keeps -0.0.")
sigmoid = _make_public("sigmoid", "1/(1+exp(-x)), evaluated without overflow; (+-inf) -> 1, 0.")
silu = _make_public("silu", "x*sigmoid(x) (a.k.a. swish); silu(-inf) = nan like NumPy.")
erf = _make_public("erf", "Error function; erf(+-inf) = +-1, keeps -0.0.")
erfc = _make_public("erfc", "1 - erf(x) with relative accuracy down to underflow.")
gelu_erf = _make_public("gelu_erf", "0.5*x*(1+erf(x/sqrt(2))) (exact GELU), accurate left tail.")
gelu_tanh = _make_public(
    "gelu_tanh", "0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715x^3))) (tanh-approximate GELU).")

#: name -> public function, in a stable order (used by tests and benchmarks)
FUNCTIONS = {f.__name__: f for f in (exp, expm1, log, log1p, tanh, sigmoid, silu,
                                     erf, erfc, gelu_erf, gelu_tanh)}
