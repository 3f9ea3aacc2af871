"""Fused chains ending in a row-wise op or a reduction on the CUDA target (simulator): one
launch per call, against NumPy (float64 references within the CUDA row-wise and reduce
tests' tolerances), integer sums and means in int64 / float64 as on the CPU, NaN through
max, strided device views and broadcast side inputs; half precision within 1 ulp of the ops
one by one on the device and of the CPU's fused result."""
import numpy as np
import pytest

import dynshape
from halfcases import FORMATS, sample, to_format, wide
from oracles import ulps

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def softmax(v):
    e = np.exp(v - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layer_norm(v, w=1.0, b=0.0, eps=1e-5):
    c = v - v.mean(-1, keepdims=True)
    return c / np.sqrt((c * c).mean(-1, keepdims=True) + eps) * w + b


def rms_norm(v, eps=1e-5):
    return v / np.sqrt((v * v).mean(-1, keepdims=True) + eps)


ROWWISE = {
    "softmax": (["exp", ("mul", "b"), "softmax", ("add", 1.0)],
                lambda x, b: softmax(np.exp(x) * b) + 1.0),
    "log_softmax": ([("sub", "b"), "log_softmax"],
                    lambda x, b: np.log(softmax(x - b))),
    "layer_norm": (["tanh", ("layer_norm", {"weight": "b", "bias": "b"}), "relu"],
                   lambda x, b: np.maximum(layer_norm(np.tanh(x), b, b), 0)),
    "rms_norm": ([("rms_norm", {"epsilon": 1e-3}), ("mul", 2.0, "_")],
                 lambda x, b: 2.0 * rms_norm(x, 1e-3)),
}


@pytest.mark.parametrize("op", sorted(ROWWISE))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rowwise_tails_match_numpy(cuda, op, dtype):
    steps, ref = ROWWISE[op]
    rng = np.random.default_rng(len(op))
    base = rng.standard_normal((3, 10, 14)).astype(dtype)
    x = base[:, ::-2, 1::2]                              # (3, 5, 7), strided, reversed rows
    b = (rng.random(7) + 0.5).astype(dtype)
    d = cuda.to_device(base)[:, ::-2, 1::2]
    f = dynshape.fuse(steps)
    kw = {"b": cuda.to_device(b)} if "b" in f.side_names else {}
    got = f(d, **kw).copy_to_host()
    assert got.dtype == dtype and got.shape == x.shape
    assert dynshape.last_table().target == "cuda"
    np.testing.assert_allclose(got, ref(x.astype(np.float64), b.astype(np.float64)),
                               **TOL[dtype])


def test_rowwise_tail_of_long_rows_into_an_out_view(cuda):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 300)).astype(np.float32)
    out = cuda.to_device(np.full((2, 600), 7, np.float32))
    dynshape.fuse([("mul", 0.5), "softmax"])(cuda.to_device(x), out=out[:, ::2])
    host = out.copy_to_host()
    np.testing.assert_allclose(host[:, ::2], softmax(0.5 * x.astype(np.float64)),
                               **TOL[np.float32])
    np.testing.assert_array_equal(host[:, 1::2], 7)


REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


@pytest.mark.parametrize("op", sorted(REDUCTIONS))
@pytest.mark.parametrize("axis,keepdims", [(-1, False), (-1, True), (None, False),
                                           (None, True)])
def test_float_reductions_match_numpy(cuda, op, axis, keepdims):
    rng = np.random.default_rng(7)
    for dtype in (np.float32, np.float64):
        base = rng.standard_normal((4, 6, 18)).astype(dtype)
        x = base[:, 1::2, ::3]                          # (4, 3, 6)
        b = rng.standard_normal((3, 1)).astype(dtype)   # broadcast along the rows' columns
        f = dynshape.fuse(["abs", ("sub", "b"), (op, {"axis": axis, "keepdims": keepdims})])
        got = f(cuda.to_device(base)[:, 1::2, ::3], b=cuda.to_device(b)).copy_to_host()
        want = REDUCTIONS[op](np.abs(x.astype(np.float64)) - b, axis=axis, keepdims=keepdims)
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, **TOL[dtype])
        assert dynshape.last_table().target == "cuda"


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_reductions_give_the_cpu_dtypes(cuda, dtype):
    x = (np.arange(5 * 9, dtype=np.int64).reshape(5, 9) * 7919 % 201 - 100).astype(dtype)
    b = np.arange(9, dtype=dtype)
    d, db = cuda.to_device(x), cuda.to_device(b)
    for op, axis in (("sum", -1), ("mean", -1), ("max", None), ("min", -1), ("sum", None),
                     ("mean", None)):
        f = dynshape.fuse([("mul", 3), ("add", "b"), (op, {"axis": axis})])
        got = f(d, b=db).copy_to_host()
        want = REDUCTIONS[op](x.astype(np.int64) * 3 + b, axis=axis)
        host = f(x, b=b)                                  # the CPU's result and dtype
        assert got.dtype == host.dtype, op
        np.testing.assert_array_equal(got, want)


def test_max_propagates_nan_and_sums_accumulate_in_float64(cuda):
    x = np.ones((3, 40), np.float32)
    x[1, 17] = np.nan
    got = dynshape.fuse(["relu", ("max", {"axis": -1})])(cuda.to_device(x)).copy_to_host()
    np.testing.assert_array_equal(np.isnan(got), [False, True, False])
    y = np.full((2, 3000), 1e-4, np.float32)
    y[:, 0] = 1e4
    got = dynshape.fuse([("sum", {"axis": None})])(cuda.to_device(y)).copy_to_host()
    assert got == np.float32(2e4 + 5998 * np.float64(np.float32(1e-4)))


@pytest.mark.parametrize("fmt", FORMATS, ids=[str(f) for f in FORMATS])
def test_half_tails_within_one_ulp_of_the_ops_one_by_one(cuda, fmt):
    x = sample(fmt, (4, 9), seed=3, with_specials=False)
    w = sample(fmt, (9,), seed=4, with_specials=False)
    dx, dw = cuda.to_device(x), cuda.to_device(w)
    f = dynshape.fuse(["tanh", ("mul", "w"), "softmax", ("mul", 3.0)])
    got = f(dx, w=dw).copy_to_host()
    assert got.dtype == fmt
    one = dynshape.run("softmax", dynshape.run("mul", dynshape.run("tanh", dx), dw))
    one = dynshape.run("mul", one, 3.0).copy_to_host()
    assert ulps(got, one) <= 1
    assert ulps(got, f(x, w=w)) <= 2          # the CPU's fused softmax: 2 ulps (README)
    g = dynshape.fuse([("add", "w"), ("layer_norm", {"epsilon": 1e-3})])
    got = g(dx, w=dw).copy_to_host()
    v = wide(to_format(wide(x) + wide(w), fmt))
    assert ulps(got, to_format(layer_norm(v, eps=1e-3), fmt), atol=1e-2) <= 1
    for op in ("sum", "max", "mean"):
        h = dynshape.fuse([("mul", "w"), (op, {"axis": -1, "keepdims": True})])
        got = h(dx, w=dw).copy_to_host()
        v = wide(to_format(wide(x) * wide(w), fmt))
        assert got.shape == (4, 1)
        assert ulps(got, to_format(REDUCTIONS[op](v, axis=-1, keepdims=True), fmt)) == 0
