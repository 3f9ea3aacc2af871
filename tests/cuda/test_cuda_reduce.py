"""Reductions on the CUDA target (simulator) against NumPy: every op, random axes and
keepdims, strided and negative-stride device views, every dtype, NaN rules, empty sums."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from cudasim import cuda_settings
from dynshape.errors import DeviceError

OPS = ("sum", "mean", "max", "min", "argmax", "argmin")


def host(y):
    return y.copy_to_host() if hasattr(y, "copy_to_host") else np.asarray(y)


@cuda_settings
@given(st.sampled_from(OPS), st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
       st.lists(st.integers(1, 7), min_size=1, max_size=3), st.data())
def test_reductions_match_numpy(cuda, op, dtype, shape, data):
    shape = tuple(shape)
    nd = len(shape)
    if op.startswith("arg"):
        axis = data.draw(st.integers(-nd, nd - 1))
    else:
        axis = data.draw(st.one_of(st.none(), st.integers(-nd, nd - 1),
                                   st.sets(st.integers(0, nd - 1), min_size=1).map(tuple)))
    keepdims = data.draw(st.booleans()) and not op.startswith("arg")
    steps = tuple(data.draw(st.sampled_from([1, 2, -1])) for _ in shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    base = rng.standard_normal(tuple(2 * n for n in shape)) * 5
    base = base.astype(dtype) if np.dtype(dtype).kind == "f" else \
        np.round(base).astype(dtype)
    sl = tuple(slice(None, None, s) for s in steps)
    cut = tuple(slice(0, n) for n in shape)
    x = base[sl][cut]
    d = cuda.to_device(base)[sl][cut]
    kw = {"axis": axis} if op.startswith("arg") else {"axis": axis, "keepdims": keepdims}
    got = host(dynshape.run(op, d, **kw))
    want = getattr(np, op)(x, **kw)
    if op in ("sum", "mean") and np.dtype(dtype).kind == "i":
        want = getattr(np, op)(x, dtype=np.int64 if op == "sum" else np.float64, **kw)
    assert got.shape == np.shape(want) and got.dtype == np.asarray(want).dtype
    if op in ("sum", "mean") and np.dtype(dtype).kind == "f":
        eps = np.finfo(dtype).eps
        scale = np.sum(np.abs(x), axis=axis, keepdims=keepdims) * 8 * eps + eps
        assert (np.abs(got - want) <= scale).all()
    else:
        np.testing.assert_array_equal(got, want)


def test_nan_rules_and_empty_sums(cuda):
    x = np.arange(24, dtype=np.float64).reshape(4, 6)
    x[1, 2] = x[1, 4] = np.nan
    d = cuda.to_device(x)
    np.testing.assert_array_equal(host(dynshape.run("argmax", d, axis=1)), np.argmax(x, 1))
    np.testing.assert_array_equal(host(dynshape.run("argmin", d, axis=1)), np.argmin(x, 1))
    np.testing.assert_array_equal(host(dynshape.run("max", d, axis=0)), np.max(x, 0))
    e = cuda.to_device(np.zeros((3, 0), np.float32))
    np.testing.assert_array_equal(host(dynshape.run("sum", e, axis=1)), np.zeros(3))
    assert np.isnan(host(dynshape.run("mean", e, axis=1))).all()


def test_whole_reduction_stays_on_the_device(cuda):
    x = np.linspace(-1, 2, 300).astype(np.float32)
    y = dynshape.run("sum", cuda.to_device(x))
    assert hasattr(y, "copy_to_host") and y.shape == ()          # a 0-d device array
    np.testing.assert_allclose(y.copy_to_host(), x.sum(dtype=np.float64), rtol=1e-6)
    t = dynshape.last_table()
    from dynshape_kernels.catalog import CATALOG
    assert t.target == "cuda" and CATALOG[int(t.entries[0, 0])].family == "reduce"


def test_broadcast_reduced_axis_is_refused_on_the_device(cuda):
    from dynshape.cuda.arrays import simulating
    if not simulating():
        pytest.skip("builds a stride-0 device array the simulator's way")
    d = cuda.to_device(np.ones((1, 5), np.float32))
    with pytest.raises(DeviceError, match="broadcast"):
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        b = FakeCUDAArray(np.broadcast_to(d.copy_to_host(), (4, 5)))
        dynshape.run("sum", b, axis=0)
