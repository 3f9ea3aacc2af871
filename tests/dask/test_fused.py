"""Fused sequences over dask blocks: elementwise chains with side inputs, row-wise ends,
reduction ends on the tree reduction."""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dynshape
from dynshape import testing

da = pytest.importorskip("dask.array")
import dynshape.dask as dd  # noqa: E402

FEW = settings(max_examples=6, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@FEW
@given(data=st.data())
def test_fused_chain_with_side_inputs_and_a_rowwise_end(client, data):
    shape = data.draw(st.tuples(st.integers(1, 50), st.integers(2, 60)))
    rng = np.random.default_rng(shape[1])
    xn = rng.standard_normal(shape).astype(np.float64)
    bn = rng.standard_normal(shape[1])
    x = da.from_array(xn, chunks=data.draw(testing.chunk_layouts(shape)))
    b = da.from_array(bn, chunks=data.draw(testing.chunk_layouts(bn.shape)))
    f = dd.fuse([("add", "bias"), "tanh", ("mul", 0.5), "softmax"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dd.RechunkWarning)
        y = f(x, bias=b)
    assert y.dtype == np.float64 and y.chunks[1] == (shape[1],)
    np.testing.assert_allclose(y.compute(), _softmax(0.5 * np.tanh(xn + bn)), rtol=1e-12,
                               atol=1e-14)
    g = dd.fuse([("sub", "c", "_"), "relu"])(x, 2.0)           # numbers as side inputs
    np.testing.assert_allclose(g.compute(), np.maximum(2.0 - xn, 0))


@FEW
@given(data=st.data(), op=st.sampled_from(["sum", "mean", "max", "min"]),
       axis=st.sampled_from([None, -1]), keepdims=st.booleans())
def test_fused_reduction_end_on_the_tree(client, data, op, axis, keepdims):
    shape = data.draw(st.tuples(st.integers(1, 30), st.integers(1, 40)))
    xn = np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float32)
    x = da.from_array(xn, chunks=data.draw(testing.chunk_layouts(shape)))
    bn = np.linspace(-1, 1, shape[1]).astype(np.float32)
    f = dd.fuse([("mul", "w"), "abs", (op, {"axis": axis, "keepdims": keepdims})])
    y = f(x, w=bn)
    ref = getattr(np, op)(np.abs(xn * bn), axis=axis, keepdims=keepdims)
    assert y.shape == np.shape(ref) and y.dtype == np.float32
    np.testing.assert_allclose(y.compute(), ref, rtol=2e-5, atol=1e-5)


def test_fused_chains_refuse_what_they_cannot_split(client):
    with pytest.raises(dynshape.ArgumentError, match="dynshape.dask.run\\('matmul'"):
        dd.fuse(["matmul", "relu"])
    x = da.ones((8, 9), chunks=(4, 5), dtype=np.float32)
    with pytest.raises(dd.ChunkingError, match="axis 1"):
        dd.fuse(["exp", "softmax"])(x, rechunk=False)
    with pytest.raises(dynshape.ArgumentError, match="missing side input"):
        dd.fuse([("add", "b")])(x)
    with pytest.raises(dynshape.DtypeError):
        dd.fuse([("add", "b")])(x, b=np.ones(9, np.float64))
    # a fused sequence made with dynshape.fuse runs through dynshape.dask.run as well
    f = dynshape.fuse([("add", 1.0), "relu"])
    np.testing.assert_array_equal(dd.run(f, x).compute(), np.full((8, 9), 2, np.float32))
