"""Regenerate the polynomial coefficients used by ``dynshape_kernels/cpu/mathfuncs.py``.

The approximations are near-minimax Chebyshev interpolants computed with
mpmath (40 significant digits) and printed lowest-degree-first, as float64
``repr`` strings.  The float32 kernels use the same fits with a lower degree,
rounded to float32 at import time.

float32 gelu's rational (``_GELU32_*``) is a minimax fit instead (differential correction,
linear programs solved by SciPy, which this tool then needs), its float32-rounded
coefficients refitted so that rounding costs as little as it can.

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
    gelu32_rational()


# ---- float32 gelu: erfc(x/sqrt2)*exp(x^2/2)/2 = P(x) / ((C*x + B)*P(x) + N(x)) ---------------
GELU32_XMAX = float(XMAX["f32"] * mp.sqrt(2))


def _lp(c, a_ub, b_ub, a_eq=None, b_eq=None):
    from scipy.optimize import linprog        # the rational fits need SciPy (tool only)
    r = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=b_eq,
                bounds=[(None, None)] * len(c), method="highs",
                options={"primal_feasibility_tolerance": 1e-10,
                         "dual_feasibility_tolerance": 1e-10})
    return r.x if r.status == 0 else None


def _gelu32_points(pts=3000):
    import numpy as np
    x = np.unique(np.concatenate([np.linspace(0, GELU32_XMAX, pts),
                                  GELU32_XMAX * np.linspace(0, 1, pts) ** 2]))
    f = np.array([float(mp.erfc(v / mp.sqrt(2)) * mp.exp(mp.mpf(v) ** 2 / 2) / 2) for v in x])
    return x, f


def _rational_minimax(x, f, m, n, iters=12):
    """P/Q of degrees m and n, Q(0) = 1, with the least max relative error on the points:
    linear least squares to start, then the differential correction algorithm (LPs)."""
    import numpy as np
    u = x / 4.0                                   # scaled variable: better conditioned
    V = np.vander(u, max(m, n) + 1, increasing=True)
    M = np.hstack([V[:, :m + 1], -f[:, None] * V[:, 1:n + 1]]) / f[:, None]
    sol = np.linalg.lstsq(M, np.ones_like(f), rcond=None)[0]
    p, q = sol[:m + 1], np.concatenate([[1.0], sol[m + 1:]])
    best = None
    for _ in range(iters):
        q0 = V[:, :n + 1] @ q
        err = np.abs((V[:, :m + 1] @ p) / q0 / f - 1).max()
        if best is None or err < best[0]:
            best = (err, p.copy(), q.copy())
        pm, qm = V[:, :m + 1], V[:, :n + 1]
        z = -(q0 * f)[:, None]
        a_ub = np.vstack([np.hstack([pm, -(f * (1 + err))[:, None] * qm, z]),
                          np.hstack([-pm, (f * (1 - err))[:, None] * qm, z])])
        a_eq = np.zeros((1, m + n + 3))
        a_eq[0, m + 1] = 1
        c = np.zeros(m + n + 3)
        c[-1] = 1
        r = _lp(c, a_ub, np.zeros(len(a_ub)), a_eq, [1.0])
        if r is None:
            break
        p, q = r[:m + 1], r[m + 1:m + n + 2]
    err, p, q = best
    return err, p / 4.0 ** np.arange(m + 1), q / 4.0 ** np.arange(n + 1)


def _refit_n(x, f, C, B, P, fixed):
    """N's free coefficients (the others fixed) for the least max relative error of
    P/((C*x + B)*P + N) with P, C, B given (linearized: that error is (N - T)*f/P)."""
    import numpy as np
    pv = np.polyval(P[::-1], x)
    w = f / pv
    rhs = pv / f - (C * x + B) * pv - sum(c * x ** i for i, c in fixed.items())
    free = [i for i in range(len(P) - 1) if i not in fixed]
    A = np.vander(x, len(P) - 1, increasing=True)[:, free] * w[:, None]
    one = np.ones((len(x), 1))
    c = np.zeros(len(free) + 1)
    c[-1] = 1
    r = _lp(c, np.vstack([np.hstack([A, -one]), np.hstack([-A, -one])]),
            np.concatenate([rhs * w, -rhs * w]))
    return dict(zip(free, r[:-1]))


def gelu32_rational(scale=1.9):
    """P (degree 4) scaled so P(0) = ``scale`` (just below 2: least relative rounding of
    P near x = 0), C and B from dividing Q by P, all rounded to float32; then N's
    coefficients rounded top-down, each rounding compensated by refitting the lower ones."""
    import numpy as np
    x, f = _gelu32_points()
    err, p, q = _rational_minimax(x, f, 4, 5)
    (C, B), rem = np.polydiv(q[::-1], p[::-1])
    f32 = lambda v: np.asarray(v, np.float32).astype(np.float64)  # noqa: E731
    s = scale / p[0]
    P, N = f32(p * s), rem[::-1] * s
    C, B = float(np.float32(C)), float(np.float32(B))
    fixed = {}
    for i in range(3, -1, -1):
        fixed[i] = float(np.float32(_refit_n(x, f, C, B, P, fixed)[i]))
    N = np.array([fixed[i] for i in range(4)])
    pv = np.polyval(P[::-1], x)
    rel = np.abs(pv / ((C * x + B) * pv + np.polyval(N[::-1], x)) / f - 1).max()
    print(f"# GELU32: rational (4, 5) on [0, {GELU32_XMAX:.4g}], fit err {err:.3g}, "
          f"with float32 coefficients {rel:.3g}")
    print(f"_GELU32_C, _GELU32_B = {C!r}, {B!r}")
    print("_GELU32_P = (" + ", ".join(repr(float(v)) for v in P) + ")")
    print("_GELU32_N = (" + ", ".join(repr(float(v)) for v in N) + ")")


if __name__ == "__main__":
    main()
