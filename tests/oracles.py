"""Independent NumPy oracles of the elementwise ops, shared by the CPU and CUDA tests (the
tests directory is on sys.path: ``from oracles import UNARY_REF``), the ULP distance of
the half-precision formats, and a float64 conv2d."""
import math

import numpy as np

erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu_ref(x):
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1 + erf(x64 / math.sqrt(2)))).astype(x.dtype)


def gelu_tanh_ref(x):
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1 + np.tanh(math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)))
            ).astype(x.dtype)


def _sig(x):
    x64 = x.astype(np.float64)
    return (1 / (1 + np.exp(-x64))).astype(x.dtype)


UNARY_REF = {
    "relu": lambda x: np.maximum(x, 0),
    "abs": np.abs,
    "neg": np.negative,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "reciprocal": np.reciprocal,
    "sigmoid": _sig,
    "tanh": np.tanh,
    "gelu": gelu_ref,
    "silu": lambda x: (x.astype(np.float64) * _sig(x.astype(np.float64))).astype(x.dtype),
}
EXACT = {"relu", "abs", "neg", "sqrt", "reciprocal"}
# documented float32 tolerances of the transcendental kernels (see dynshape_kernels/cpu/mathfuncs.py)
RTOL = {np.dtype("float32"): 2e-6, np.dtype("float64"): 1e-13}
ATOL = {np.dtype("float32"): 1e-6, np.dtype("float64"): 1e-14}


def check(op, got, want):
    """``got`` equals ``want`` exactly for exact ops and integers, else within the documented
    tolerances (the same for the CPU kernels and the CUDA kernels: CUDA's float32 math
    functions are within 2 ulp, float64 within 1-2 ulp)."""
    assert got.shape == want.shape and got.dtype == want.dtype, (got.dtype, want.dtype)
    if op in EXACT or got.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=RTOL[got.dtype], atol=ATOL[got.dtype],
                                   equal_nan=True)

BINARY_REF = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
              "pow": np.power, "maximum": np.maximum, "minimum": np.minimum}


def ulps(got, want, atol=0.0):
    """Largest distance in units in the last place of the 2-byte format (NaN against NaN
    is 0), over the elements that differ by more than ``atol`` (a number or an array that
    broadcasts)."""
    got, want = np.atleast_1d(np.asarray(got)), np.atleast_1d(np.asarray(want))
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)

    def ordered(a):
        u = np.ascontiguousarray(a).view(np.uint16).astype(np.int64)
        return np.where(u & 0x8000, 0x8000 - u, u)
    gn = np.isnan(got.astype(np.float32))
    wn = np.isnan(want.astype(np.float32))
    assert np.array_equal(gn, wn), "NaN in different places"
    d = np.abs(ordered(got) - ordered(want))
    with np.errstate(invalid="ignore"):
        close = np.abs(got.astype(np.float64) - want.astype(np.float64)) <= atol
    far = ~gn & ~close
    return int(d[far].max()) if far.any() else 0


# ---- conv2d ------------------------------------------------------------------------------------
def out_size(size, p0, p1, k, s, d):
    """Output length of a conv2d axis: input size, pads, kernel, stride, dilation."""
    return (size + p0 + p1 - ((k - 1) * d + 1)) // s + 1


def ref_conv(x, w, b=None, strides=(1, 1), pads=(0, 0, 0, 0), dilations=(1, 1), group=1):
    """float64 conv by explicit loops over the kernel taps (einsum over channels per tap)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    N, C, H, W = x.shape
    M, Cg, KH, KW = w.shape
    pt, pl, pb, pr = pads
    (sh, sw), (dh, dw) = strides, dilations
    OH, OW = out_size(H, pt, pb, KH, sh, dh), out_size(W, pl, pr, KW, sw, dw)
    xp = np.zeros((N, C, H + pt + pb, W + pl + pr))
    xp[:, :, pt:pt + H, pl:pl + W] = x
    y = np.zeros((N, M, OH, OW))
    Mg = M // group
    for g in range(group):
        xg, wg = xp[:, g * Cg:(g + 1) * Cg], w[g * Mg:(g + 1) * Mg]
        for kh in range(KH):
            for kw in range(KW):
                win = xg[:, :, kh * dh:kh * dh + (OH - 1) * sh + 1:sh,
                         kw * dw:kw * dw + (OW - 1) * sw + 1:sw]
                y[:, g * Mg:(g + 1) * Mg] += np.einsum("nchw,mc->nmhw", win, wg[:, :, kh, kw])
    if b is not None:
        y += np.asarray(b, np.float64)[None, :, None, None]
    return y
