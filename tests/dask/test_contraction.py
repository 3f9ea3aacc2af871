"""matmul of dask arrays as a blockwise contraction, against NumPy."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from dynshape import testing

da = pytest.importorskip("dask.array")
import dynshape.dask as dd  # noqa: E402

FEW = settings(max_examples=6, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])


def _tol(k, a, b):
    return 4 * np.sqrt(k) * np.finfo(a.dtype).eps * (np.abs(a) @ np.abs(b)) + 1e-30


@FEW
@given(data=st.data(), dtype=st.sampled_from(["float32", "float64"]))
def test_matmul_sums_over_differently_chunked_k(client, data, dtype):
    m, k, n = data.draw(st.tuples(st.integers(1, 40), st.integers(1, 70), st.integers(1, 30)))
    rng = np.random.default_rng(m * k * n)
    an, bn = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((k, n)).astype(dtype)
    a = da.from_array(an, chunks=data.draw(testing.chunk_layouts(an.shape)))
    b = da.from_array(bn, chunks=data.draw(testing.chunk_layouts(bn.shape)))
    c = dd.run("matmul", a, b)
    assert c.dtype == np.dtype(dtype) and c.shape == (m, n)
    r = c.compute()
    assert np.all(np.abs(r - an @ bn) <= _tol(k, an, bn))


def test_matmul_batches_vectors_bias_and_activation(client):
    rng = np.random.default_rng(0)
    an = rng.standard_normal((3, 17, 29)).astype(np.float64)
    bn = rng.standard_normal((29, 13)).astype(np.float64)
    bias = rng.standard_normal(13)
    a = da.from_array(an, chunks=((2, 1), (9, 8), (10, 19)))
    b = da.from_array(bn, chunks=((5, 24), (6, 7)))
    r = dd.run("matmul", a, b, bias=bias, activation="relu").compute()
    np.testing.assert_allclose(r, np.maximum(an @ bn + bias, 0), rtol=1e-12, atol=1e-12)
    v = da.from_array(bn[:, 0], chunks=((11, 18),))
    np.testing.assert_allclose(dd.run("matmul", a, v).compute(), an @ bn[:, 0], rtol=1e-12)
    np.testing.assert_allclose(dd.run("matmul", v, b).compute(), bn[:, 0] @ bn, rtol=1e-12)
    with pytest.raises(Exception, match="29|13|shape"):
        dd.run("matmul", a, a)
