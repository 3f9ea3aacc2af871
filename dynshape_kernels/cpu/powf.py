"""float32 power, vectorizable: ``pow32(x, y)``, the pow op on float32 (and half-precision,
computed in float32) elements.

Inside Numba ``x ** y`` lowers to a scalar libm ``powf`` call per element (the wheels have no
vector math library), which kept pow 20-30x behind PyTorch (1e6 float32 elements, 2 threads:
1.65 ms for ``x ** 2.0`` against 0.05 ms). Here the power is computed in float64 as
``exp(y * log|x|)`` with the vectorizable exp and log of :mod:`mathfuncs`, then rounded once
to float32. The float64 value is within a few float64 ulp of the exact power, far inside a
float32 half-ulp, so the float32 result is the correctly rounded power unless the exact power
lies that close to a float32 rounding tie, which needs an integer exponent; exponents 2, 1
and -1 (squares, where exact ties are common) are computed as ``x * x``, ``x`` and ``1 / x``
(correctly rounded).

Signs and special values follow C99 Annex F, as NumPy's ``power`` (libm ``powf``) does:

* ``pow(x, +-0) = 1`` and ``pow(1, y) = 1`` for every x and y, NaN included, and
  ``pow(-1, +-inf) = 1``; otherwise a NaN operand gives NaN;
* a negative finite x with a finite non-integer y gives NaN;
* a negative x (-0 and -inf included) with an odd integer y gives a result of x's sign
  (``pow(-0, -3) = -inf``, ``pow(-inf, 3) = -inf``, ``pow(-2, 3) = -8``); any other y gives
  the power of |x|;
* zeros, infinities and infinite exponents come out of ``exp(y * log|x|)`` itself
  (``log(0) = -inf``, ``log(inf) = inf``, ``exp(-inf) = 0``): ``pow(0, -1) = inf``,
  ``pow(0.5, inf) = 0``, ``pow(-inf, 0.5) = inf``.

Overflow gives inf and underflow correctly rounded subnormals or zero (the float64 value is
rounded once, into float32's range).

A loop whose exponent is one value for every element (``pow(x, 2.0)``: squares in variances
and RMS norms, cubes in the tanh form of GELU, as exported models write them) need not pay
for ``exp`` and ``log`` (``cpu.switches`` runs :func:`cube32` or ``x * x`` instead). x * x is
the path above; :func:`cube32` computes x^3 in float64, where x^2 is exact and x^3 rounds
once (half a float64 ulp, closer than ``exp(y * log|x|)``), then rounds it to float32, with
the same special values (NaN, signed zeros and infinities, overflow to inf). float32, 1e6
elements and 1000 x 1003, 2 threads, into ``out=``: ``pow(x, 2.0)`` 1.27-1.29 ms -> 153-157
us, ``pow(x, 3.0)`` 1.26-1.33 ms -> 157-160 us (torch 145-153 us); ``pow(x, 2.5)`` 1.2 ms as
before (torch 1.17).
"""
import math

import numpy as np
from numba import njit

from . import mathfuncs


@njit(inline="always", error_model="numpy")
def pow32(x, y):
    """x ** y for float32 x and y (see the module docstring), as float32."""
    xd = np.float64(x)
    yd = np.float64(y)
    ax = abs(xd)
    r = mathfuncs.exp(yd * mathfuncs.log(ax))
    whole = np.floor(yd) == yd                       # an integer, or an infinity
    odd = whole & (yd - 2.0 * np.floor(0.5 * yd) == 1.0)
    r = -r if odd & (math.copysign(1.0, xd) < 0.0) else r
    r = np.nan if (xd < 0.0) & (xd > -np.inf) & (not whole) else r
    r = 1.0 if (yd == 0.0) | (xd == 1.0) | ((ax == 1.0) & (abs(yd) == np.inf)) else r
    # exact exponents: one correctly rounded operation (NaN, zeros and infinities included);
    # selects, not branches: with branches the loops of array exponents stayed scalar
    f = np.float32(r)
    f = x * x if y == 2.0 else f
    f = x if y == 1.0 else f
    return np.float32(1.0) / x if y == -1.0 else f


@njit(inline="always", error_model="numpy")
def cube32(x):
    """x ** 3 for float32 x, as float32 (see the module docstring)."""
    xd = np.float64(x)
    return np.float32(xd * xd * xd)
