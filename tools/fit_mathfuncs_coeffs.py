"""Regenerate the polynomial coefficients used by ``dynshape_kernels/cpu/mathfuncs.py``.

The approximations are near-minimax Chebyshev interpolants computed with
mpmath (40 significant digits) and printed lowest-degree-first, as float64
``repr`` strings.  The float32 kernels use the same fits with a lower degree,
rounded to float32 at import time.

Run:  python tools/fit_mathfuncs_coeffs.py
The printed "err" column is mpmath's estimate of the max abs error of the
interpolant of the *fitted* function (not of the final kernel; see the
accuracy table in the kernel module for the end-to-end numbers).
"""
import mpmath as mp

mp.mp.dps = 40

SQRT_HALF = mp.sqrt(mp.mpf(1) / 2)
LN2_HALF = mp.log(2) / 2


def _q_exp(r):
    # (e^r - 1 - r) / r^2 ; exp(r) = 1 + r + r^2 Q(r)
    if abs(r) < mp.mpf("1e-12"):
        return mp.mpf(1) / 2 + r / 6 + r * r / 24
    return (mp.exp(r) - 1 - r) / r**2


def _p_log32(f):
    # (log1p(f) - f + f^2/2) / f^3 ; log1p(f) = f - f^2/2 + f^3 P(f)
    if abs(f) < mp.mpf("1e-12"):
        return mp.mpf(1) / 3 - f / 4
    return (mp.log1p(f) - f + f * f / 2) / f**3


def _r_log64(z):
    # with s = f/(2+f), z = s^2: log1p(f) = 2s + s*z*R(z)
    if z < mp.mpf("1e-24"):
        return mp.mpf(2) / 3 + 2 * z / 5
    s = mp.sqrt(z)
    return (2 * mp.atanh(s) - 2 * s) / (s * z)


def _erf_small(z):
    # erf(x)/x as a function of z = x^2
    if z == 0:
        return 2 / mp.sqrt(mp.pi)
    x = mp.sqrt(z)
    return mp.erf(x) / x


def _erfc_big(t):
    # t = 2/(2+x): erfc(x) = t * exp(-x^2 + G(t)) / 2.  The 1/2 (exact, folded
    # into the power of two) centres G on [-0.58, 0.70], halving its rounding.
    x = 2 / t - 2
    return mp.log(2 * mp.erfc(x) / t) + x * x


def fit(f, a, b, deg):
    c, err = mp.chebyfit(f, [mp.mpf(a), mp.mpf(b)], deg + 1, error=True)
    return [c[i] for i in range(len(c) - 1, -1, -1)], err


ERF_THRESHOLD = mp.mpf("1.0")
XMAX = {"f32": mp.mpf("10.4"), "f64": mp.mpf("27.3")}

SPECS = [
    # name, function, interval, degree per dtype
    ("EXP_Q", _q_exp, (-0.3467, 0.3467), {"f32": 4, "f64": 9}),
    ("LOG32_P", _p_log32, (SQRT_HALF - 1, mp.sqrt(2) - 1), {"f32": 8}),
    ("LOG64_R", _r_log64, (0, ((mp.sqrt(2) - 1) / (mp.sqrt(2) + 1)) ** 2 * 1.0001), {"f64": 6}),
    ("ERF_SMALL", _erf_small, (0, ERF_THRESHOLD**2), {"f32": 6, "f64": 11}),
]


def main():
    for name, f, (a, b), degs in SPECS:
        for dt, d in degs.items():
            c, err = fit(f, a, b, d)
            print(f"# {name}_{dt.upper()}: deg {d} on [{mp.nstr(a, 6)}, {mp.nstr(b, 6)}], err {mp.nstr(err, 3)}")
            print(f"_{name}_{dt.upper()} = (" + ", ".join(repr(float(v)) for v in c) + ",)")
            if name == "ERF_SMALL" and dt == "f64":
                print(f"_ERF_E0_LO_F64 = {float(c[0] - mp.mpf(float(c[0])))!r}  # c0 - float64(c0)")
    for dt, d in (("f32", 10), ("f64", 26)):
        # G is evaluated in v = 2t - 1 (exact in floating point for t >= 1/8,
        # so no rounding of an affine map enters G's argument); monomials in
        # t itself would be badly conditioned (|coef| ~ 500 for f64).
        tmin = 2 / (2 + XMAX[dt])
        co, err = fit(lambda v: _erfc_big((v + 1) / 2), 2 * tmin - 1, 1, d)
        print(f"# ERFC_G_{dt.upper()}: deg {d} in v=2t-1, t=2/(2+x), x in [0, {XMAX[dt]}], "
              f"err {mp.nstr(err, 3)}, sum|c| {mp.nstr(sum(abs(c) for c in co), 3)}")
        print(f"_ERFC_G_{dt.upper()} = (" + ", ".join(repr(float(v)) for v in co) + ",)")
        print(f"_ERFC_G1_LO_{dt.upper()} = {float(co[1] - mp.mpf(float(co[1])))!r}  "
              "# c1 - float64(c1)")

if __name__ == "__main__":
    main()
