"""The core benchmark's NumPy side: the peers' formulations (``out=`` and preallocated
scratch where NumPy allows), float64 references and the tolerances results are checked with."""
import math

import numpy as np

EPS = 1e-5


# ---- NumPy formulations (the peers, with out= and preallocated scratch where NumPy allows) ---
_AS = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429, 0.3275911)


def np_erf(z, out, t):
    """Abramowitz-Stegun 7.1.26 erf (|error| < 1.5e-7), in place; NumPy has no erf ufunc."""
    a1, a2, a3, a4, a5, p = _AS
    np.abs(z, out=t)
    np.multiply(t, p, out=out)
    out += 1
    np.reciprocal(out, out=out)                       # out = 1 / (1 + p|z|)
    poly = t                                          # reuse t for the polynomial
    np.multiply(out, a5, out=poly)
    for a in (a4, a3, a2, a1):
        poly += a
        poly *= out                                   # Horner: poly = t*(a1 + t*(...))
    np.square(z, out=out)
    np.negative(out, out=out)
    np.exp(out, out=out)
    out *= poly
    np.subtract(1, out, out=out)                      # erf(|z|)
    np.copysign(out, z, out=out)
    return out


def np_gelu(x, o, scratch):
    np.multiply(x, 1 / math.sqrt(2), out=scratch[0])
    np_erf(scratch[0], o, scratch[1])
    o += 1
    o *= x
    o *= 0.5
    return o


def np_sigmoid(x, o):
    np.negative(x, out=o)
    np.exp(o, out=o)
    o += 1
    np.reciprocal(o, out=o)
    return o


def np_softmax(x, o, m, s):
    np.max(x, axis=1, keepdims=True, out=m)
    np.subtract(x, m, out=o)
    np.exp(o, out=o)
    np.sum(o, axis=1, keepdims=True, out=s)
    o /= s
    return o


def np_layer_norm(x, w, b, o, mu, var, tmp):
    np.mean(x, axis=1, keepdims=True, out=mu)
    np.subtract(x, mu, out=o)
    np.multiply(o, o, out=tmp)
    np.mean(tmp, axis=1, keepdims=True, out=var)
    var += EPS
    np.sqrt(var, out=var)
    o /= var
    o *= w
    o += b
    return o


# float64 references
def ref_gelu(x):
    x = x.astype(np.float64)
    z = x / math.sqrt(2)
    return 0.5 * x * (1 + np_erf(z, np.empty_like(z), np.empty_like(z)))


def ref_softmax(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def ref_layer_norm(x, w, b):
    x = x.astype(np.float64)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    return (x - mu) / np.sqrt(var + EPS) * w + b


REF_UNARY = {
    "relu": lambda x: np.maximum(x.astype(np.float64), 0),
    "exp": lambda x: np.exp(x.astype(np.float64)),
    "tanh": lambda x: np.tanh(x.astype(np.float64)),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x.astype(np.float64))),
    "gelu": ref_gelu,
}
# (rtol, atol) for float32 results against float64 references
TOL = {"relu": (0, 0), "add": (1e-6, 0), "mul": (1e-6, 0), "copy": (0, 0),
       "exp": (2e-5, 1e-6), "tanh": (2e-5, 1e-6), "sigmoid": (2e-5, 1e-6),
       "gelu": (2e-5, 5e-6), "sum": (1e-4, 1e-4), "softmax": (1e-4, 1e-9),
       "layer_norm": (1e-4, 1e-4), "pow": (2e-7, 0)}
