"""Half precision (float16, bfloat16) on the CUDA target, the other families: reductions,
row-wise ops, pooling, matmul/gemm and conv2d on the simulator against float64 references
rounded once to the format, special values included, with the bounds of the README
(max/min/argmax exact; sums and means accumulated in float64 and rounded once, bit for bit
here; row-wise ops and avg_pool2d within 1 ulp; matmul and conv2d the float32 accumulation
bound plus one rounding) and against the CPU's results."""
import numpy as np
import pytest

import dynshape
from halfcases import FORMATS, UNIT, bits, sample, specials, to_format, wide
from oracles import ulps

FMT_IDS = [str(f) for f in FORMATS]
pytestmark = pytest.mark.parametrize("fmt", FORMATS, ids=FMT_IDS)


def test_reductions(cuda, fmt):
    x = sample(fmt, (4, 5, 6), seed=11)
    x[3] = sample(fmt, (5, 6), seed=12, with_specials=False)       # one NaN-free block
    d = cuda.to_device(x)
    for op, fn in (("sum", np.sum), ("mean", np.mean), ("max", np.max), ("min", np.min)):
        for axis in (2, (0, 2), None):
            got = np.asarray(dynshape.run(op, d, axis=axis).copy_to_host())
            with np.errstate(all="ignore"):
                want = to_format(fn(wide(x), axis=axis), fmt)
            assert got.dtype == fmt, op
            assert ulps(got, want) == 0, (op, axis)                # exact, rounded once
            cpu = np.asarray(dynshape.run(op, x, axis=axis))
            np.testing.assert_array_equal(bits(got), bits(cpu), err_msg=f"{op} {axis}")
    for op, fn in (("argmax", np.argmax), ("argmin", np.argmin)):
        got = dynshape.run(op, d, axis=1).copy_to_host()
        np.testing.assert_array_equal(got, fn(wide(x), axis=1))   # the first NaN, or extreme
    # a sum just above a tie of the format, the excess lost in float32: rounded once from
    # float64 it rounds up; through float32 to nearest it would round twice, to even
    half_ulp = UNIT[fmt]
    y = np.array([1.0, half_ulp, 2.0 ** -24 if fmt == np.float16 else 2.0 ** -30] * 2)
    y = y.astype(fmt)
    exact = wide(y).sum()
    assert bits(to_format(exact, fmt)) != bits(np.float32(exact).astype(fmt))
    got = dynshape.run("sum", cuda.to_device(y)).copy_to_host()
    assert bits(got) == bits(to_format(exact, fmt))


def _rowwise_ref(op, x, w, b, eps=1e-5):
    x = wide(x)
    if op == "softmax":
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    if op == "log_softmax":
        m = x.max(-1, keepdims=True)
        return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))
    if op == "layer_norm":
        y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    else:
        y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)
    return y * wide(w) + wide(b)


def test_rowwise_ops(cuda, fmt):
    x = sample(fmt, (3, 4, 7), seed=13, with_specials=False)
    x[0, 0] = specials(fmt)[[8, 9, 10, 11, 12, 13, 14]]        # the largest finite value
    x[0, 1, 2] = np.nan
    x[0, 2, :2] = specials(fmt)[[5, 6]]                         # subnormals
    w = sample(fmt, (7,), seed=14, with_specials=False)
    b = sample(fmt, (7,), seed=15, with_specials=False)
    d, dw, db = cuda.to_device(x), cuda.to_device(w), cuda.to_device(b)
    for op in ("softmax", "log_softmax", "layer_norm", "rms_norm"):
        norm = op in ("layer_norm", "rms_norm")
        extra = ((dw, db) if op == "layer_norm" else (dw,)) if norm else ()
        got = dynshape.run(op, d, *extra).copy_to_host()
        assert got.dtype == fmt
        with np.errstate(all="ignore"):
            want = to_format(_rowwise_ref(op, x, w if norm else 1.0,
                                          b if op == "layer_norm" else 0.0), fmt)
        assert ulps(got, want) <= 1, op
        cpu = dynshape.run(op, x, *((w, b) if op == "layer_norm" else (w,)) if norm else ())
        assert ulps(got, cpu) <= 2, op                              # the CPU: within its bound


def _pool_ref(x, k, s, p, mode):
    n, c, h, w = x.shape
    xp = np.pad(wide(x), ((0, 0), (0, 0), (p, p), (p, p)), constant_values=np.nan)
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s:i * s + k, j * s:j * s + k].reshape(n, c, -1)
            pad = np.zeros(win.shape, bool)
            pad[...] = np.isnan(np.pad(np.zeros((h, w)), p, constant_values=np.nan)[
                i * s:i * s + k, j * s:j * s + k]).reshape(-1)
            if mode == "max":
                v = np.where(pad, -np.inf, win)
                out[:, :, i, j] = np.where(np.isnan(v).any(-1), np.nan, v.max(-1))
            else:
                out[:, :, i, j] = np.where(pad, 0, win).sum(-1) / (~pad).sum(-1)
    return out


def test_pooling(cuda, fmt):
    x = sample(fmt, (1, 2, 6, 7), seed=16)
    x[wide(x) == -wide(specials(fmt)[8])] = 1      # no window adds both largest values
    d = cuda.to_device(x)
    for op, mode in (("max_pool2d", "max"), ("avg_pool2d", "avg")):
        got = dynshape.run(op, d, kernel_shape=(3, 3), strides=(2, 2),
                           pads=(1, 1, 1, 1)).copy_to_host()
        with np.errstate(all="ignore"):
            want = to_format(_pool_ref(x, 3, 2, 1, mode), fmt)
        assert got.dtype == fmt
        assert ulps(got, want) <= (0 if mode == "max" else 1), op
        cpu = dynshape.run(op, x, kernel_shape=(3, 3), strides=(2, 2), pads=(1, 1, 1, 1))
        assert ulps(got, cpu) <= (0 if mode == "max" else 1), op


def _within_accumulation_bound(got, ref, absref, k, fmt, cpu=None):
    """float32 accumulation of k products (exact in float32), then one rounding; the CPU's
    result (another order of accumulation) within twice the bound."""
    acc = (k + 2) * 2.0 ** -24 * absref
    tol = acc + UNIT[fmt] * (np.abs(ref) + acc) + 2.0 ** -24
    err = np.abs(wide(got) - ref)
    assert (err <= tol).all(), f"max error {err.max()}"
    if cpu is not None:
        assert (np.abs(wide(got) - wide(cpu)) <= 2 * tol).all()


def test_matmul_and_gemm(cuda, fmt):
    a = sample(fmt, (2, 5, 19), seed=17, scale=1.0, with_specials=False)
    b = sample(fmt, (19, 6), seed=18, scale=1.0, with_specials=False)
    a[0, 0, 0] = specials(fmt)[5]                                # a subnormal
    got = dynshape.run("matmul", cuda.to_device(a), cuda.to_device(b)).copy_to_host()
    assert got.dtype == fmt
    _within_accumulation_bound(got, wide(a) @ wide(b), np.abs(wide(a)) @ np.abs(wide(b)), 19,
                               fmt, dynshape.run("matmul", a, b))
    c = sample(fmt, (5, 6), seed=19, with_specials=False)
    got = dynshape.run("gemm", cuda.to_device(a[1]), cuda.to_device(b), cuda.to_device(c),
                       alpha=0.5, beta=-2.0, activation="relu").copy_to_host()
    lin = 0.5 * wide(a[1]) @ wide(b) - 2.0 * wide(c)
    absref = 0.5 * np.abs(wide(a[1])) @ np.abs(wide(b)) + 2.0 * np.abs(wide(c))
    _within_accumulation_bound(got, np.maximum(lin, 0), absref, 21, fmt)
    # NaN and inf propagate; overflow rounds to inf
    s = specials(fmt)
    a2 = np.array([[s[0], 1.0], [s[1], 1.0], [s[8], s[8]]], np.float64).astype(fmt)
    b2 = np.array([[1.0], [1.0]], np.float64).astype(fmt)
    got = dynshape.run("matmul", cuda.to_device(a2), cuda.to_device(b2)).copy_to_host()
    np.testing.assert_array_equal(np.isnan(wide(got[:, 0])), [True, False, False])
    assert np.isposinf(wide(got[1:, 0])).all()


def test_conv2d(cuda, fmt):
    x = sample(fmt, (1, 2, 5, 6), seed=20, scale=1.0, with_specials=False)
    w = sample(fmt, (4, 1, 3, 3), seed=21, scale=1.0, with_specials=False)
    bias = sample(fmt, (4,), seed=22, with_specials=False)
    res = sample(fmt, (1, 4, 3, 6), seed=23, with_specials=False)
    got = dynshape.run("conv2d", cuda.to_device(x), cuda.to_device(w), cuda.to_device(bias),
                       group=2, pads=(0, 1, 0, 1), residual=cuda.to_device(res),
                       activation="relu").copy_to_host()
    assert got.dtype == fmt and got.shape == (1, 4, 3, 6)
    xp = np.pad(wide(x), ((0, 0), (0, 0), (0, 0), (1, 1)))
    lin = np.zeros(got.shape)
    scale = np.zeros(got.shape)
    for m in range(4):
        g = m // 2
        for i in range(3):
            for j in range(6):
                win = xp[0, g, i:i + 3, j:j + 3]
                lin[0, m, i, j] = (win * wide(w[m, 0])).sum() + wide(bias[m]) + wide(res[0, m, i, j])
                scale[0, m, i, j] = (np.abs(win * wide(w[m, 0]))).sum() + abs(wide(bias[m])) \
                    + abs(wide(res[0, m, i, j]))
    cpu = dynshape.run("conv2d", x, w, bias, group=2, pads=(0, 1, 0, 1), residual=res,
                       activation="relu")
    _within_accumulation_bound(got, np.maximum(lin, 0), scale, 11, fmt, cpu)
