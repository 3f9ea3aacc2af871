"""Elementwise ops and broadcasting over irregularly chunked dask arrays, on the cluster."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from dynshape import testing

da = pytest.importorskip("dask.array")
import dynshape.dask as dd  # noqa: E402

FEW = settings(max_examples=6, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])

UNARY = {"relu": lambda x: np.maximum(x, 0), "exp": np.exp, "tanh": np.tanh, "abs": np.abs,
         "neg": np.negative}


@FEW
@given(data=st.data(), op=st.sampled_from(sorted(UNARY)),
       dtype=st.sampled_from(["float32", "float64"]))
def test_unary_matches_numpy_on_any_chunk_layout(client, data, op, dtype):
    shape = data.draw(st.tuples(st.integers(1, 70), st.integers(1, 90)))
    chunks = data.draw(testing.chunk_layouts(shape))
    xn = np.random.default_rng(len(chunks[0])).standard_normal(shape).astype(dtype)
    y = dd.run(op, da.from_array(xn, chunks=chunks))
    assert y.dtype == np.dtype(dtype) and y.chunks == chunks
    r = y.compute()
    assert r.dtype == y.dtype
    np.testing.assert_allclose(r, UNARY[op](xn), rtol=2e-6, atol=1e-6)


@FEW
@given(data=st.data(), op=st.sampled_from(["add", "sub", "mul", "maximum"]))
def test_binary_broadcasts_differently_chunked_operands(client, data, op):
    shape = data.draw(st.tuples(st.integers(1, 40), st.integers(2, 60)))
    rng = np.random.default_rng(shape[0])
    xn = rng.standard_normal(shape).astype(np.float32)
    bn = rng.standard_normal(shape[1]).astype(np.float32)
    x = da.from_array(xn, chunks=data.draw(testing.chunk_layouts(shape)))
    b = da.from_array(bn, chunks=data.draw(testing.chunk_layouts(bn.shape)))
    col = rng.standard_normal((shape[0], 1)).astype(np.float32)
    y = dd.run(op, x, b)
    z = dd.run(op, col, y)             # NumPy column (one chunk) broadcast along axis 1
    ref = getattr(np, {"sub": "subtract", "mul": "multiply"}.get(op, op))
    np.testing.assert_allclose(y.compute(), ref(xn, bn), rtol=1e-6)
    np.testing.assert_allclose(z.compute(), ref(col, ref(xn, bn)), rtol=1e-6)
    assert z.shape == shape


def test_python_scalars_are_weak_and_int_promotion_follows_numpy(client):
    xn = np.arange(-50, 50, dtype=np.int32).reshape(10, 10)
    x = da.from_array(xn, chunks=((3, 7), (6, 4)))
    y = dd.run("mul", x, 3)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y.compute(), xn * 3)
    e = dd.run("exp", x.astype(np.float64) / 50)
    np.testing.assert_allclose(e.compute(), np.exp(xn / 50), rtol=1e-13)
    # the results compose with dask's own code
    s = (dd.run("relu", x) + 1).sum().compute()
    assert s == (np.maximum(xn, 0) + 1).sum()


def test_meta_and_chunks_metadata_without_computing():
    x = da.zeros((100_003, 4_099), chunks=((30_000, 25_001, 45_002), (1_000, 3_099)),
                 dtype=np.float32)
    y = dd.run("gelu", x)
    assert y.chunks == x.chunks and y.dtype == np.float32
    assert isinstance(y._meta, np.ndarray) and y._meta.dtype == np.float32
