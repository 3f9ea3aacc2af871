"""Tests of the vectorizable scalar math functions (dynshape_kernels/cpu/mathfuncs.py).

All array evaluations go through ONE jitted harness per dtype (``_apply``)
that contains a simple ``for i in range(n): o[i] = f(x[i])`` loop per
function, i.e. exactly the loop shape that LLVM vectorizes, so the tests
exercise the vectorized code (and, for the last few elements, the scalar
remainder loop).

References: NumPy float64 (rounded to float32) for the float32 kernels;
NumPy ``longdouble`` or mpmath for the float64 kernels (where float64 is not
precise enough to judge a float64 result).  NumPy has no erf, so erf/erfc use
``math.erf``/``math.erfc`` (float32 checks) and mpmath (float64 checks).

Run ``python tests/kernels/test_mathfuncs.py`` for the full accuracy table
(larger sweeps, slower) that is quoted in the module docstring.
"""
import math
import os
import platform
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
try:
    from dynshape_kernels.cpu import mathfuncs as mf  # installed package
except ImportError:  # pragma: no cover - running from the source tree
    from kernels.cpu import mathfuncs as mf

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

NAMES = list(mf.FUNCTIONS)

# Documented tolerances (see the table in the mathfuncs module docstring):
# float32: max ULP distance to the float64 reference rounded to float32;
# float64: max relative error for normal results (denormal results: ULP of
# the smallest denormal, checked with TOL64_DENORMAL_ULP).
TOL32_ULP = {
    "exp": 1, "expm1": 3, "log": 2, "log1p": 2, "tanh": 3, "sigmoid": 3,
    "silu": 3, "erf": 2, "erfc": 3, "gelu_erf": 4, "gelu_tanh": 4,
}
TOL64_REL = {n: 1e-15 for n in NAMES}
TOL64_DENORMAL_ULP = 2


# ---------------------------------------------------------------------------
# the single jitted harness (one compile per dtype)
# ---------------------------------------------------------------------------

def _make_apply():
    F = [mf.FUNCTIONS[n] for n in NAMES]
    f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10 = F
    assert len(F) == 11

    @njit(error_model="numpy")
    def apply(fid, x, o):
        n = x.size
        if fid == 0:
            for i in range(n):
                o[i] = f0(x[i])
        elif fid == 1:
            for i in range(n):
                o[i] = f1(x[i])
        elif fid == 2:
            for i in range(n):
                o[i] = f2(x[i])
        elif fid == 3:
            for i in range(n):
                o[i] = f3(x[i])
        elif fid == 4:
            for i in range(n):
                o[i] = f4(x[i])
        elif fid == 5:
            for i in range(n):
                o[i] = f5(x[i])
        elif fid == 6:
            for i in range(n):
                o[i] = f6(x[i])
        elif fid == 7:
            for i in range(n):
                o[i] = f7(x[i])
        elif fid == 8:
            for i in range(n):
                o[i] = f8(x[i])
        elif fid == 9:
            for i in range(n):
                o[i] = f9(x[i])
        else:
            for i in range(n):
                o[i] = f10(x[i])

    return apply


_apply = _make_apply()


def run(name, x):
    """Evaluate mathfuncs.<name> elementwise on a 1-D array through the harness."""
    x = np.ascontiguousarray(x)
    out = np.empty_like(x)
    _apply(NAMES.index(name), x, out)
    return out


# ---------------------------------------------------------------------------
# references
# ---------------------------------------------------------------------------

_verf = np.frompyfunc(math.erf, 1, 1)
_verfc = np.frompyfunc(math.erfc, 1, 1)


def _sigmoid_ref(x):
    with np.errstate(over="ignore", under="ignore"):
        e = np.exp(-np.abs(x))
        return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _gelu_tanh_ref(x):
    pi = np.longdouble("3.141592653589793238462643383279502884") if x.dtype == np.longdouble else np.pi
    c = np.sqrt(x.dtype.type(2) / x.dtype.type(pi))
    k = x.dtype.type("0.044715") if x.dtype == np.longdouble else x.dtype.type(0.044715)
    with np.errstate(over="ignore", invalid="ignore"):
        xc = np.clip(x, -100, 100)
        z = 2 * c * (xc + k * xc ** 3)
        return x * _sigmoid_ref(z)


def ref64(name, x):
    """float64 reference (used for float32 results) computed from float64 x."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        if name in ("exp", "expm1", "log", "log1p", "tanh"):
            return getattr(np, name)(x)
        if name == "sigmoid":
            return _sigmoid_ref(x)
        if name == "silu":
            return x * _sigmoid_ref(x)
        if name == "gelu_tanh":
            return _gelu_tanh_ref(x)
        if name == "erf":
            return _verf(x).astype(np.float64)
        if name == "erfc":
            return _verfc(x).astype(np.float64)
        if name == "gelu_erf":
            u = x / np.sqrt(2.0)
            pos = 0.5 * x * (1 + _verf(u).astype(np.float64))
            neg = 0.5 * x * _verfc(-u).astype(np.float64)
            return np.where(x >= 0, pos, neg)
    raise KeyError(name)


def ref_hp(name, x):
    """High precision reference for float64 inputs, as np.longdouble.

    longdouble (x87 80-bit) for the functions NumPy has, mpmath for erf-based
    ones (slow: use on subsets)."""
    x = np.asarray(x, dtype=np.float64)
    if name in ("erf", "erfc", "gelu_erf"):
        import mpmath as mp
        mp.mp.dps = 40

        def one(v):
            if math.isnan(v):
                return float("nan")
            if math.isinf(v):
                return {"erf": math.copysign(1.0, v), "erfc": 0.0 if v > 0 else 2.0,
                        "gelu_erf": v if v > 0 else float("nan")}[name]
            if abs(v) > 60:  # far beyond the float64 underflow/saturation points
                return np.longdouble({"erf": math.copysign(1.0, v), "erfc": 0.0 if v > 0 else 2.0,
                                      "gelu_erf": v if v > 0 else -0.0}[name])
            m = mp.mpf(v)
            if name == "erf":
                r = mp.erf(m)
            elif name == "erfc":
                r = mp.erfc(m)
            else:
                r = m / 2 * mp.erfc(-m / mp.sqrt(2))
            return np.longdouble(mp.nstr(r, 25))
        return np.array([one(float(v)) for v in x], dtype=np.longdouble)
    xl = x.astype(np.longdouble)
    with np.errstate(all="ignore"):
        if name in ("exp", "expm1", "log", "log1p", "tanh"):
            return getattr(np, name)(xl)
        if name == "sigmoid":
            return _sigmoid_ref(xl)
        if name == "silu":
            return xl * _sigmoid_ref(xl)
        if name == "gelu_tanh":
            return _gelu_tanh_ref(xl)
    raise KeyError(name)


# ---------------------------------------------------------------------------
# error metrics
# ---------------------------------------------------------------------------

def _ordered(a):
    """Map floats to integers monotonically (so ULP distance = difference)."""
    if a.dtype == np.float32:
        i = a.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    i = a.view(np.int64)
    # avoid int64 overflow in the subtraction: use python ints via object for safety
    return np.where(i < 0, -(i & 0x7FFFFFFFFFFFFFFF), i).astype(object)


def ulp_dist(got, want):
    """Integer ULP distance between two arrays of the same float dtype.

    NaN vs NaN = 0, NaN vs number = inf; +-0 are 0 apart."""
    got = np.asarray(got)
    want = np.asarray(want).astype(got.dtype)
    d = np.abs(_ordered(got) - _ordered(want)).astype(np.float64)
    gn, wn = np.isnan(got), np.isnan(want)
    d[gn & wn] = 0
    d[gn ^ wn] = np.inf
    return d


def rel_err64(got, ref):
    """Relative error of float64 results vs a longdouble reference.

    Returns (rel, denormal_ulp): rel for normal references (0 elsewhere),
    denormal_ulp = |got-ref| / 2^-1074 where the reference is denormal/zero."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.longdouble)
    tiny = np.finfo(np.float64).tiny
    with np.errstate(all="ignore"):
        diff = np.abs(got.astype(np.longdouble) - ref)
        both_inf = np.isinf(got) & np.isinf(ref) & (np.sign(got) == np.sign(ref))
        both_nan = np.isnan(got) & np.isnan(ref)
        diff[both_inf | both_nan] = 0
        diff[np.isnan(got) ^ np.isnan(ref)] = np.inf
        # a finite reference beyond float64 range: compare against inf
        big = np.abs(ref) > np.finfo(np.float64).max
        diff[big & np.isinf(got) & (np.sign(got) == np.sign(ref))] = 0
        normal = np.abs(ref) >= tiny
        rel = np.where(normal, diff / np.where(normal, np.abs(ref), 1), 0).astype(np.float64)
        rel[big & ~np.isinf(got)] = np.inf
        den = np.where(~normal, diff / np.longdouble(2.0) ** -1074, 0).astype(np.float64)
    return rel, den


# ---------------------------------------------------------------------------
# sweeps
# ---------------------------------------------------------------------------

_KEY_POINTS = {
    "exp": [0.0, 1.0, -1.0, 0.34657359, 88.72283935546875, 88.7228, -87.33654, -103.972, -103.28,
            709.782712893384, -708.396, -745.1332191019411, -744.44,
            -104.0, -746.0],                # where the underflowing lanes skip the scaling
    "expm1": [0.0, 0.34657359, -0.34657359, 1.0, -1.0, 88.72, 709.78, -17.0, -37.0],
    "log": [1.0, 0.70710678, 1.41421356, 2.0, 0.5, 1.1754943508222875e-38, 2.2250738585072014e-308],
    "log1p": [0.0, -0.29289322, 0.41421356, 1.0, -0.5, 1e-8, -1e-8],
    "tanh": [0.0, 0.55, 1.0, 9.0, 19.06, 0.34657359],
    "sigmoid": [0.0, 1.0, -1.0, -87.0, -103.0, -745.0, -708.0, 17.0, 37.0, -104.0, -746.0],
    "silu": [0.0, 1.0, -1.0, -87.0, -103.0, -745.0, -708.0, 17.0, 37.0, -110.0, -760.0],
    "erf": [0.0, 0.75, 1.0, 3.92, 5.92, 0.5],
    "erfc": [0.0, 0.75, -0.75, 1.0, 9.19, 10.0, 26.5, 27.2, -1.0],
    # (then the float32 form's worst inputs of an exhaustive check: 4 ULP at -0.06415147,
    # 3 at 0.00042481; its former form's 4 at -6.931566)
    "gelu_erf": [0.0, 1.06066017, -1.06066017, -13.0, -14.1, -37.0, -38.5, 5.0, 14.5, 38.61,
                 30.0, 0.06415146589279175, 0.000424810714321211, 6.93156623840332],
    "gelu_tanh": [0.0, 1.0, -1.0, -5.0, -10.0, -11.0, -20.0, 10.0, -10.90737855, -21.66327712],
}
_CORE = {
    "exp": 120.0, "expm1": 40.0, "log": 100.0, "log1p": 10.0, "tanh": 12.0,
    "sigmoid": 120.0, "silu": 120.0, "erf": 7.0, "erfc": 30.0, "gelu_erf": 40.0,
    "gelu_tanh": 25.0,
}


def _float_window(dt, v, window):
    """``window`` consecutive floats of dtype dt centred on v (crossing 0 fine)."""
    ity = np.int32 if dt == np.float32 else np.int64
    b = int(np.array(v, dtype=dt).view(ity))
    sign = 1 << (8 * dt.itemsize - 1)
    o = b if b >= 0 else -(b & (sign - 1))          # ordered integer
    lo, hi = o - window // 2, o + window // 2
    maxo = int(np.array(np.inf, dtype=dt).view(ity))
    lo, hi = max(lo, -maxo), min(hi, maxo + 1)
    ords = np.arange(lo, hi, dtype=np.int64)
    signbit = np.int64(-sign) if dt.itemsize == 8 else np.int64(sign)
    bits = np.where(ords >= 0, ords, (-ords) | signbit)
    return bits.astype(ity).view(dt)


def sweep(name, dtype, n_bits=200_000, n_lin=200_000, window=2048, seed=0):
    """Test points: a sweep over all bit patterns (all binades incl. denormals,
    both signs), a dense linear sweep over the core range, random points, and
    every float in a window around the key points."""
    dt = np.dtype(dtype)
    ity = np.int32 if dt == np.float32 else np.int64
    top = int(np.array(np.inf, dtype=dt).view(ity))
    bits = np.linspace(0, top, n_bits, dtype=np.float64).astype(ity)
    pos = bits.view(dt)
    parts = [pos, -pos]
    c = _CORE[name]
    parts.append(np.linspace(-c, c, n_lin).astype(dt))
    rng = np.random.default_rng(seed)
    parts.append(rng.uniform(-c, c, n_lin // 4).astype(dt))
    for k in _KEY_POINTS[name]:
        for s in (1.0, -1.0):
            parts.append(_float_window(dt, s * k, window))
    parts.append(np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype=dt))
    tiny = np.finfo(dt).tiny
    parts.append(np.array([tiny, -tiny, np.finfo(dt).smallest_subnormal,
                           -np.finfo(dt).smallest_subnormal, np.finfo(dt).max,
                           -np.finfo(dt).max], dtype=dt))
    return np.concatenate(parts)


# ---------------------------------------------------------------------------
# accuracy measurement (also the body of the sweep tests)
# ---------------------------------------------------------------------------

def err32(name, x):
    x = np.asarray(x, dtype=np.float32)
    got = run(name, x)
    want = ref64(name, x.astype(np.float64))
    with np.errstate(over="ignore"):
        want32 = want.astype(np.float32)
    return ulp_dist(got, want32), got, want32


def err64(name, x):
    x = np.asarray(x, dtype=np.float64)
    got = run(name, x)
    rel, den = rel_err64(got, ref_hp(name, x))
    return rel, den, got


def measure_accuracy(big=True):
    """Print the accuracy table (max f32 ULP, max f64 relative error)."""
    import time
    rows = []
    for name in NAMES:
        t0 = time.time()
        s = 10 if big else 1
        x32 = sweep(name, np.float32, n_bits=200_000 * s // 2, n_lin=200_000 * s // 2,
                    window=2 ** 16 if big else 4096)
        u, _, _ = err32(name, x32)
        i32 = int(np.argmax(u))
        x64 = sweep(name, np.float64, n_bits=200_000 * s // 2, n_lin=200_000 * s // 2,
                    window=2 ** 14 if big else 1024)
        if name in ("erf", "erfc", "gelu_erf"):
            rng = np.random.default_rng(1)
            x64 = rng.choice(x64, size=min(x64.size, 200_000 if big else 20_000), replace=False)
        rel, den, got = err64(name, x64)
        i64 = int(np.argmax(rel))
        xl = x64.astype(np.float64)
        with np.errstate(all="ignore"):
            ref = ref_hp(name, xl[i64:i64 + 1]).astype(np.float64)[0]
        ulp64 = rel[i64] * abs(ref) / np.spacing(abs(ref)) if np.isfinite(ref) and ref != 0 else 0
        rows.append((name, u.max(), x32[i32], x32.size, rel.max(), ulp64, x64[i64], den.max(),
                     x64.size, time.time() - t0))
    print(f"{'function':10s} {'f32 ULP':>8s} {'(worst x)':>14s} {'n32':>9s} "
          f"{'f64 rel':>10s} {'~ULP':>6s} {'(worst x)':>14s} {'den.ULP':>7s} {'n64':>9s}")
    for r in rows:
        print(f"{r[0]:10s} {r[1]:8.0f} {r[2]:14.7g} {r[3]:9d} {r[4]:10.3g} {r[5]:6.2f} "
              f"{r[6]:14.7g} {r[7]:7.2f} {r[8]:9d}  ({r[9]:.1f}s)")
    return rows



# ---------------------------------------------------------------------------
# tests
# ---------------------------------------------------------------------------

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
ERF_FAMILY = ("erf", "erfc", "gelu_erf")


def _naive_f64(name, x):
    """The defining formula evaluated naively by NumPy in float64: the
    special-value semantics the kernels must reproduce."""
    x = np.asarray(x, dtype=np.float64)
    verf = lambda v: _verf(v).astype(np.float64)  # noqa: E731
    with np.errstate(all="ignore"):
        if name in ("exp", "expm1", "log", "log1p", "tanh"):
            return getattr(np, name)(x)
        if name == "sigmoid":
            return 1 / (1 + np.exp(-x))
        if name == "silu":
            return x * (1 / (1 + np.exp(-x)))
        if name == "erf":
            return verf(x)
        if name == "erfc":
            return _verfc(x).astype(np.float64)
        if name == "gelu_erf":
            return 0.5 * x * (1 + verf(x / np.sqrt(2.0)))
        if name == "gelu_tanh":
            return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    raise KeyError(name)


SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e300, -1e300, 1e30, -1e30, 1000.0,
            -1000.0, 200.0, -200.0, 100.0, -100.0, 50.0, -50.0, 30.0, -30.0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_special_values(name, dtype):
    """NaN/inf/signed zero/overflow/underflow/saturation match NumPy exactly:
    wherever the correctly rounded result is 0, +-0.5, +-1, 2, +-inf or nan,
    the kernel returns exactly that (with the same sign of zero)."""
    with np.errstate(over="ignore"):
        x = np.array(SPECIALS, dtype=np.float64).astype(dtype)
        x = np.concatenate([x, [np.finfo(dtype).max, -np.finfo(dtype).max]]).astype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype == np.float32:
            want = ref64(name, x.astype(np.float64)).astype(dtype)
        else:
            want = ref_hp(name, x).astype(dtype)
        # signs of zero / nan semantics of the defining formula (NumPy, naive)
        naive = _naive_f64(name, x.astype(np.float64)).astype(dtype)
    want = np.where((want == 0) & (naive == 0), naive, want)
    got = run(name, x)
    exact = np.isnan(want) | np.isinf(want) | np.isin(np.abs(want), [0.0, 0.5, 1.0, 2.0])
    assert exact.sum() >= 5
    for xi, g, w in zip(x[exact], got[exact], want[exact]):
        if np.isnan(w):
            assert np.isnan(g), (name, xi, g, w)
        else:
            assert g == w and np.signbit(g) == np.signbit(w), (name, xi, g, w)
    assert got.dtype == dtype


def test_documented_special_cases():
    """The cases listed in the module docstring, for both dtypes."""
    for dt in (np.float32, np.float64):
        def f(name, v):
            return run(name, np.array([v], dtype=dt))[0]
        inf, nan = np.inf, np.nan
        assert f("exp", inf) == inf and f("exp", -inf) == 0 and f("exp", 1e4) == inf
        assert f("exp", -1e4) == 0 and not np.signbit(f("exp", -1e4))
        assert f("log", 0.0) == -inf and f("log", -0.0) == -inf and f("log", inf) == inf
        assert np.isnan(f("log", -1.0)) and np.isnan(f("log", -inf)) and np.isnan(f("log", nan))
        tiny = np.finfo(dt).smallest_subnormal
        assert f("log", tiny) == dt(np.log(np.float64(tiny)))
        assert f("tanh", inf) == 1 and f("tanh", -inf) == -1
        assert f("tanh", -0.0) == 0 and np.signbit(f("tanh", -0.0))
        assert f("sigmoid", inf) == 1 and f("sigmoid", -inf) == 0 and f("sigmoid", -0.0) == 0.5
        assert f("erf", inf) == 1 and f("erf", -inf) == -1
        assert f("erf", -0.0) == 0 and np.signbit(f("erf", -0.0))
        assert f("erfc", inf) == 0 and f("erfc", -inf) == 2
        assert f("expm1", -inf) == -1 and np.signbit(f("expm1", -0.0))
        assert f("log1p", -1.0) == -inf and np.isnan(f("log1p", -2.0)) and np.signbit(f("log1p", -0.0))
        for g in ("silu", "gelu_erf", "gelu_tanh"):
            assert f(g, inf) == inf and np.isnan(f(g, -inf)) and np.isnan(f(g, nan))
            assert f(g, -0.0) == 0 and np.signbit(f(g, -0.0))
            assert f(g, -1e30) == 0
        for name in NAMES:
            assert np.isnan(f(name, nan)), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lanes_past_underflow_give_their_exact_results_beside_others(dtype):
    """The lanes whose scaling would underflow (exp, sigmoid and silu far below 0, gelu's
    tails, gelu_tanh's left tail) take their result without it (an underflowing scaling
    costs a microcode assist on Intel cores): +0.0, -0.0 or x exactly, in vectors mixed with
    ordinary lanes, which keep their own results."""
    far = {np.float32: [-111.0, -120.0, -1e4, -3e38], np.float64: [-761.0, -800.0, -1e5, -1e300]}
    mid = np.array([0.5, -1.0, 2.0, -0.25], dtype=dtype)
    x = np.empty(64, dtype)
    x[0::2] = np.resize(np.array(far[dtype], dtype), 32)
    x[1::2] = np.resize(mid, 32)
    alone = {name: run(name, np.resize(mid, 32)) for name in ("exp", "sigmoid", "silu",
                                                                "gelu_erf", "gelu_tanh")}
    for name, want, sign in (("exp", 0.0, False), ("sigmoid", 0.0, False), ("silu", 0.0, True),
                             ("gelu_erf", 0.0, True), ("gelu_tanh", 0.0, True)):
        got = run(name, x)
        assert (got[0::2] == want).all() and (np.signbit(got[0::2]) == sign).all(), name
        np.testing.assert_array_equal(got[1::2], alone[name])
    big = np.array([15.0, 40.0, 1e4, 3e38], dtype=dtype)
    for name in ("gelu_erf", "gelu_tanh"):
        np.testing.assert_array_equal(run(name, big), big)


@intrinsic
def _mxcsr(typingctx, value):
    """Write ``value`` to the SSE control/status register (when >= 0) and return the
    register as it was: its sticky flags say which exceptions the thread's SSE/AVX
    arithmetic raised since they were last cleared."""
    if not isinstance(value, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        i8p = ir.IntType(8).as_pointer()
        slot = cgutils.alloca_once(builder, i32)
        fty = ir.FunctionType(ir.VoidType(), [i8p])
        st = cgutils.get_or_insert_function(builder.module, fty, "llvm.x86.sse.stmxcsr")
        ld = cgutils.get_or_insert_function(builder.module, fty, "llvm.x86.sse.ldmxcsr")
        builder.call(st, [builder.bitcast(slot, i8p)])
        old = builder.load(slot)
        new = builder.trunc(args[0], i32)
        with builder.if_then(builder.icmp_signed(">=", args[0], ir.Constant(args[0].type, 0))):
            builder.store(new, slot)
            builder.call(ld, [builder.bitcast(slot, i8p)])
        return builder.sext(old, ir.IntType(64))
    return types.int64(value), codegen


#: MXCSR's sticky exception flags: underflow, denormal operand
MXCSR_UNDERFLOW, MXCSR_DENORMAL = 0x10, 0x02


@njit(error_model="numpy")
def _flags_of(code, x, out):
    """The underflow / denormal flags raised while ``_apply`` ran (cleared first)."""
    saved = _mxcsr(np.int64(-1))
    _mxcsr(saved & ~np.int64(0x3F))
    _apply(code, x, out)
    after = _mxcsr(saved)
    return after & (MXCSR_UNDERFLOW | MXCSR_DENORMAL)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                    reason="reads the x86 SSE status register")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_no_scaling_underflows_where_the_result_is_zero_or_x(dtype):
    """Counted, not timed: an underflowing (or denormal) scaling costs a microcode assist
    on Intel cores, ~10x the whole function (a causal softmax's -inf lanes made it 5.7x
    slower). Inputs whose results are exactly 0, -0.0 or x raise neither flag; a genuine
    denormal result still does (the flag is read right)."""
    far = {np.float32: [-111.0, -1e4, -3e38, 15.0, 40.0, 3e38],
           np.float64: [-761.0, -1e5, -1e300, 39.0, 1e4, 1e300]}[dtype]
    x = np.resize(np.array(far, dtype), 256)
    for name in ("exp", "sigmoid", "silu", "gelu_erf", "gelu_tanh"):
        xs = x[x < 0] if name in ("exp", "sigmoid", "silu") else x
        assert _flags_of(NAMES.index(name), xs, np.empty_like(xs)) == 0, name
    tiny = np.array([-100.0 if dtype == np.float32 else -740.0] * 64, dtype)
    assert _flags_of(NAMES.index("exp"), tiny, np.empty_like(tiny)) & MXCSR_UNDERFLOW


@pytest.mark.parametrize("name", NAMES)
def test_sweep_float32(name):
    """Dense sweep (all binades incl. denormals, core range, windows of
    consecutive floats around thresholds) within the documented ULP bound."""
    x = sweep(name, np.float32, n_bits=40_000, n_lin=60_000, window=1024)
    u, got, want = err32(name, x)
    i = int(np.argmax(u))
    assert u.max() <= TOL32_ULP[name], (name, x[i], got[i], want[i], u[i])


@pytest.mark.parametrize("name", NAMES)
def test_sweep_float64(name):
    x = sweep(name, np.float64, n_bits=40_000, n_lin=60_000, window=512)
    if name in ERF_FAMILY:  # mpmath reference: use a subset
        x = np.random.default_rng(2).choice(x, 2500, replace=False)
    rel, den, got = err64(name, x)
    i = int(np.argmax(rel))
    assert rel.max() <= TOL64_REL[name], (name, x[i], got[i], rel[i])
    assert den.max() <= TOL64_DENORMAL_ULP, (name, x[int(np.argmax(den))])


_F32 = st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)
_F64 = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
_F32_CORE = st.floats(-30, 30, width=32)
_F64_CORE = st.floats(-30, 30)


@SETTINGS
@given(name=st.sampled_from(NAMES),
       x=hnp.arrays(np.float32, st.integers(1, 40), elements=st.one_of(_F32, _F32_CORE)))
def test_hypothesis_float32(name, x):
    u, got, want = err32(name, x)
    assert u.max() <= TOL32_ULP[name], (name, x[np.argmax(u)], got[np.argmax(u)])


@SETTINGS
@given(name=st.sampled_from(NAMES),
       x=hnp.arrays(np.float64, st.integers(1, 40), elements=st.one_of(_F64, _F64_CORE)))
def test_hypothesis_float64(name, x):
    rel, den, got = err64(name, x)
    assert rel.max() <= TOL64_REL[name], (name, x[np.argmax(rel)], got[np.argmax(rel)])
    assert den.max() <= TOL64_DENORMAL_ULP


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vector_body_equals_scalar_remainder(dtype):
    """Length-1 calls run the scalar loop; long arrays the vector body: the
    results must be bitwise identical (no fast-math / contraction drift)."""
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-30, 30, 96), np.exp(rng.uniform(-80, 80, 96)),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-310]]).astype(dtype)
    for name in NAMES:
        full = run(name, x)
        single = np.array([run(name, x[i:i + 1])[0] for i in range(x.size)], dtype=dtype)
        same = (full.view(np.uint8).reshape(x.size, -1) == single.view(np.uint8)
                .reshape(x.size, -1)).all(axis=1) | (np.isnan(full) & np.isnan(single))
        assert same.all(), (name, x[~same], full[~same], single[~same])


def test_types_and_python_call():
    """float32 -> float32, float64 -> float64, int -> float64 inside jit code;
    the stubs also run from plain Python on scalars."""
    from numba import types as nbt

    @njit
    def g(a):
        return mf.exp(a)

    assert g(np.float32(1.0)).__class__ is float  # numba boxes to Python float
    for arg, ret in ((np.float32(1), nbt.float32), (1.0, nbt.float64), (3, nbt.float64)):
        g(arg)
    rets = {sig: g.overloads[sig].signature.return_type for sig in g.signatures}
    assert rets[(nbt.float32,)] == nbt.float32
    assert rets[(nbt.float64,)] == nbt.float64
    assert rets[(nbt.int64,)] == nbt.float64
    r = mf.exp(np.float32(1.0))
    assert isinstance(r, np.float32) and r == run("exp", np.array([1.0], np.float32))[0]
    assert isinstance(mf.exp(2), np.float64)
    with pytest.raises(TypeError):
        mf.exp(np.ones(3))


def _has_avx2_fma():
    try:
        import llvmlite.binding as llvm
        feats = llvm.get_host_cpu_features()
        return bool(feats.get("avx2", False)) and bool(feats.get("fma", False))
    except Exception:
        return False


@pytest.mark.skipif(not _has_avx2_fma(), reason="host CPU lacks AVX2/FMA")
def test_loops_are_vectorized():
    """A plain loop over float32 exp / log compiles to packed FMA on ymm/zmm
    registers and contains no call to a libm function."""
    import re

    @njit
    def loop_exp(x, o):
        for i in range(x.size):
            o[i] = mf.exp(x[i])

    @njit
    def loop_log(x, o):
        for i in range(x.size):
            o[i] = mf.log(x[i])

    x = np.ones(64, np.float32)
    for fn in (loop_exp, loop_log):
        fn(x, np.empty_like(x))
        asm = fn.inspect_asm(fn.signatures[0])
        assert re.search(r"\bvfn?m(add|sub)\w*ps\s+[^\n]*%[yz]mm", asm), fn.__name__
        assert not re.search(r"call\w*\s+[^\n]*\b(exp|expf|log|logf)\b", asm), fn.__name__


def test_fastmath_caller_keeps_special_values():
    """The kernels' arithmetic has no fast-math flags even when inlined into a
    caller compiled with fastmath=True."""
    @njit(fastmath=True)
    def h(x, o1, o2, o3):
        for i in range(x.size):
            o1[i] = mf.exp(x[i])
            o2[i] = mf.log(x[i])
            o3[i] = mf.tanh(x[i])

    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 1e-40, 100.0] * 8, np.float32)
    o = [np.empty_like(x) for _ in range(3)]
    h(x, *o)
    for name, got in zip(("exp", "log", "tanh"), o):
        want = run(name, x)
        assert np.array_equal(got, want, equal_nan=True), name
        assert np.array_equal(np.signbit(got), np.signbit(want)) or name == "log", name

if __name__ == "__main__":
    measure_accuracy(big="--quick" not in sys.argv)


# ---------------------------------------------------------------------------
# the non-FMA path (Dekker products), in a process of its own
# ---------------------------------------------------------------------------

_NO_FMA_PROBE = r"""
import json, math
import numpy as np, mpmath
from numba import njit
from dynshape_kernels.cpu import mathfuncs as mf
assert not mf.HAS_HW_FMA
erf, erfc, gelu_tanh = mf.FUNCTIONS["erf"], mf.FUNCTIONS["erfc"], mf.FUNCTIONS["gelu_tanh"]

@njit(error_model="numpy")
def apply(fid, x, o):
    for i in range(x.size):
        if fid == 0:
            o[i] = erf(x[i])
        elif fid == 1:
            o[i] = erfc(x[i])
        else:
            o[i] = gelu_tanh(x[i])

mpmath.mp.prec = 120
C = mpmath.sqrt(2 / mpmath.pi)
REF = [mpmath.erf, mpmath.erfc,
       lambda v: v / 2 * (1 + mpmath.tanh(C * (v + mpmath.mpf("0.044715") * v ** 3)))]
rng = np.random.default_rng(5)
res = {}
for fid, name in enumerate(["erf", "erfc", "gelu_tanh"]):
    hi = 9.0 if name == "erfc" else 4.0
    x64 = np.concatenate([rng.uniform(-4, hi, 400), rng.uniform(-0.5, 0.5, 100)])
    x32 = x64.astype(np.float32)
    for dt, x in (("float32", x32), ("float64", x64)):
        o = np.empty_like(x)
        apply(fid, x, o)
        ref = np.array([float(REF[fid](mpmath.mpf(float(v)))) for v in x])
        if dt == "float32":
            r32 = ref.astype(np.float32)
            err = np.abs(o.astype(np.float64) - ref) / np.spacing(np.abs(r32)).astype(np.float64)
            res[name + "/float32"] = float(err.max())        # ULP of the float32 result
        else:
            res[name + "/float64"] = float((np.abs(o - ref) / np.abs(ref)).max())
print("RESULT", json.dumps(res))
"""


def test_no_fma_path_keeps_the_documented_accuracy(tmp_path):
    """``DYNSHAPE_MATHFUNCS_NO_FMA=1`` forces Dekker's products (erf family, gelu_tanh): in a
    fresh process with its own Numba cache, a few hundred points per function and dtype stay
    within the documented bounds (float32 ULP, float64 relative error)."""
    import json
    import subprocess
    env = dict(os.environ, DYNSHAPE_MATHFUNCS_NO_FMA="1", NUMBA_CACHE_DIR=str(tmp_path))
    r = subprocess.run([sys.executable, "-c", _NO_FMA_PROBE], capture_output=True, text=True,
                       env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.split("RESULT", 1)[1])
    for key, err in res.items():
        name, dt = key.split("/")
        bound = TOL32_ULP[name] + 0.5 if dt == "float32" else TOL64_REL[name]
        assert err <= bound, (key, err, bound)


# ---------------------------------------------------------------------------
# 2^k: AVX-512's vscalef (llvm.ldexp) or two exact scalings by bit-built powers of two
# ---------------------------------------------------------------------------

#: the functions that apply 2^k to a result with ``_ldexp2``
_LDEXP_NAMES = ["exp", "sigmoid", "silu", "erf", "erfc", "gelu_erf", "gelu_tanh"]


def _ldexp_inputs(dtype):
    """Inputs whose results cover the normal range, gradual underflow to denormals and to
    zero, overflow, and the special values."""
    rng = np.random.default_rng(11)
    lo, hi = (-110.0, 92.0) if dtype == np.float32 else (-760.0, 712.0)
    under = (-104.0, -86.0) if dtype == np.float32 else (-746.0, -707.0)
    x = np.concatenate([rng.uniform(lo, hi, 3000), rng.uniform(*under, 3000),
                        rng.uniform(-12.0, 12.0, 3000),
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30]])
    return x.astype(dtype)


_SCALINGS_PROBE = r"""
import re, sys
import numpy as np
sys.path.insert(0, {tests!r})
from test_mathfuncs import _LDEXP_NAMES, _apply, _ldexp_inputs, mf, run
assert not mf.HAS_SCALEF
out = {{}}
for dt in (np.float32, np.float64):
    x = _ldexp_inputs(dt)
    for name in _LDEXP_NAMES:
        out[f"{{name}}/{{np.dtype(dt).name}}"] = run(name, x)
    asm = _apply.inspect_asm(_apply.signatures[-1])
    assert "vscalef" not in asm, "the scalings path used vscalef"
    assert not re.search(r"call\w*\s+[^\n]*ldexp", asm), "ldexp became a library call"
np.savez({path!r}, **out)
"""


@pytest.mark.skipif(not mf.HAS_SCALEF, reason="code is not generated for AVX-512F")
def test_power_of_two_is_one_vscalef_per_vector():
    """With AVX-512F, exp's loop applies 2^k with one vscalef per vector (float32 and
    float64), takes the integer k from the integral float k with one truncating conversion
    (not from the shifter sum's bits, which costs an add more) and calls no library
    function."""
    import re

    from dynshape_kernels.cpu.vector_width import wide_vectors

    @njit
    def loop(x, o):
        wide_vectors()        # zmm also where LLVM's tuning prefers 256 bits (Intel)
        for i in range(x.size):
            o[i] = mf.exp(x[i])

    for dt, insn, cvt in ((np.float32, "vscalefps", "vcvttps2dq"),
                          (np.float64, "vscalefpd", "vcvttpd2dq")):
        x = np.ones(64, dt)
        loop(x, np.empty_like(x))
        asm = loop.inspect_asm(loop.signatures[-1])
        assert re.search(insn + r"\s+[^\n]*%zmm", asm), insn
        assert re.search(cvt + r"\s+[^\n]*%zmm", asm), cvt
        assert not re.search(r"call\w*\s+[^\n]*\b(ldexp|ldexpf|exp|expf)\b", asm)


def test_scalings_path_gives_the_same_results(tmp_path):
    """``DYNSHAPE_MATHFUNCS_NO_SCALEF=1`` (what a CPU without AVX-512F compiles): in a fresh
    process with its own Numba cache, every function that applies 2^k stays vectorized
    (no ldexp call) and gives this process's results bit for bit, denormal and zero
    results of gradual underflow included, for float32 and float64."""
    import subprocess
    path = str(tmp_path / "scalings.npz")
    tests = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, DYNSHAPE_MATHFUNCS_NO_SCALEF="1",
               NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-c", _SCALINGS_PROBE.format(tests=tests, path=path)],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    theirs = np.load(path)
    for dt in (np.float32, np.float64):
        x = _ldexp_inputs(dt)
        for name in _LDEXP_NAMES:
            ours, key = run(name, x), f"{name}/{np.dtype(dt).name}"
            assert ours.tobytes() == theirs[key].tobytes(), key
            if name == "exp":   # the inputs do reach denormal and zero results
                tiny = np.finfo(dt).tiny
                assert np.any((ours > 0) & (ours < tiny)) and np.any(ours == 0), key
