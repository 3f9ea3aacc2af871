"""Shared inputs and references of the CUDA half-precision tests (imported as ``halfcases``,
like ``cudasim``): the two formats, arrays with every kind of special value, and a float64
reference rounded once, correctly, to a format."""
import ml_dtypes
import numpy as np

F16 = np.dtype(np.float16)
BF16 = np.dtype(ml_dtypes.bfloat16)
FORMATS = [F16, BF16]
#: unit roundoff of each format
UNIT = {F16: 2.0 ** -11, BF16: 2.0 ** -8}


def to_format(d, fmt):
    """float64 values rounded once to ``fmt``, to nearest even: through float32 rounded to
    odd (float64 -> bfloat16 through float32 to nearest would round twice)."""
    d = np.asarray(d, np.float64)
    with np.errstate(all="ignore"):
        r = d.astype(np.float32)
        inexact = (r.astype(np.float64) != d) & ~np.isnan(d)
        bits = r.view(np.uint32).copy()
        away = inexact & (np.abs(r.astype(np.float64)) > np.abs(d))
        bits[away] -= np.uint32(1)
        bits[inexact] |= np.uint32(1)
    return bits.view(np.float32).astype(fmt)


def wide(x):
    return np.asarray(x).astype(np.float64)


def specials(fmt):
    """The format's special values: NaN, infinities, signed zeros, the smallest subnormals,
    the largest finite values (far apart: no sum of a test adds both, which would make its
    result depend on the order of accumulation), and a few ordinary ones."""
    fi = ml_dtypes.finfo(fmt)
    big, tiny = float(fi.max), float(fi.smallest_subnormal)
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, tiny, -tiny, 3 * tiny, big,
                     2.0 ** -14, 1.0, -2.5, 11.0, 0.5, -7.0, -big], np.float64).astype(fmt)


def sample(fmt, shape, seed=0, scale=3.0, with_specials=True):
    """Random values of ``fmt`` of ``shape``, the first ones the special values."""
    x = (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)
    x = x.astype(fmt)
    if with_specials:
        s = specials(fmt)
        flat = x.reshape(-1)
        n = min(len(s), flat.size)
        flat[:n] = s[:n]
    return x


def bits(a):
    return np.ascontiguousarray(a).view(np.uint16)
