"""Reductions on dask's tree reduction: every op, any axes, keepdims, uneven blocks, NaN
and ties for arg reductions, against NumPy."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from dynshape import testing

da = pytest.importorskip("dask.array")
import dynshape.dask as dd  # noqa: E402

FEW = settings(max_examples=6, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])


def _axes(ndim, arg):
    if arg:
        return [None] + list(range(ndim))
    return [None] + [c for k in range(1, ndim + 1) for c in itertools.combinations(range(ndim), k)]


@FEW
@given(data=st.data(), op=st.sampled_from(["sum", "mean", "max", "min", "argmax", "argmin"]),
       dtype=st.sampled_from(["float32", "float64", "int32", "int64"]))
def test_reductions_match_numpy_on_irregular_chunks(client, data, op, dtype):
    shape = data.draw(st.lists(st.integers(1, 25), min_size=1, max_size=3).map(tuple))
    chunks = data.draw(testing.chunk_layouts(shape))
    axis = data.draw(st.sampled_from(_axes(len(shape), op.startswith("arg"))))
    keepdims = data.draw(st.booleans())
    split_every = data.draw(st.sampled_from([None, 2]))
    rng = np.random.default_rng(sum(shape))
    xn = (rng.integers(-4, 5, shape) if dtype.startswith("int")      # many ties
          else rng.standard_normal(shape)).astype(dtype)
    y = dd.run(op, da.from_array(xn, chunks=chunks), axis=axis, keepdims=keepdims,
               split_every=split_every)
    ref = np.asarray(getattr(np, op)(xn, axis=axis, keepdims=keepdims))
    assert y.shape == ref.shape and y.dtype == ref.dtype
    r = y.compute()
    assert r.dtype == ref.dtype
    if op.startswith("arg") or dtype.startswith("int"):
        np.testing.assert_array_equal(r, ref)
    else:
        np.testing.assert_allclose(r, ref, rtol=1e-5 if dtype == "float32" else 1e-12,
                                   atol=1e-5)


def test_arg_reductions_take_the_first_occurrence_and_nan_across_blocks(client):
    xn = np.zeros((6, 8), np.float32)
    xn[4, 0] = xn[0, 7] = 5.0               # ties in different blocks: flat order wins
    x = da.from_array(xn, chunks=((3, 3), (4, 4)))
    assert dd.run("argmax", x).compute() == np.argmax(xn) == 7
    np.testing.assert_array_equal(dd.run("argmax", x, axis=0).compute(), np.argmax(xn, 0))
    xn[5, 1] = xn[2, 6] = np.nan
    x = da.from_array(xn, chunks=((3, 3), (4, 4)))
    for op in ("argmax", "argmin"):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(dd.run(op, x, axis=axis).compute(),
                                          getattr(np, op)(xn, axis=axis))
    assert np.isnan(dd.run("max", x).compute())


def test_mean_weighs_uneven_blocks_by_their_counts(client):
    xn = np.concatenate([np.zeros(1, np.float64), np.full(999, 2.0)])
    y = dd.run("mean", da.from_array(xn, chunks=((1, 999),)))
    assert y.compute() == pytest.approx(xn.mean(), rel=1e-14)


def test_reduction_graph_is_a_tree(client):
    x = da.ones((64, 8), chunks=(1, 8), dtype=np.float32)
    y = dd.run("sum", x, axis=0, split_every=4)
    layers = [k for k in y.dask.layers if "dynshape-sum" in k]
    assert len(layers) >= 3                  # chunk, at least one combine level, aggregate
    np.testing.assert_array_equal(y.compute(), np.full(8, 64, np.float32))


def test_empty_reductions_are_refused_before_any_task_runs():
    import dynshape
    x = da.ones((0, 5), chunks=(1, 2), dtype=np.float32)
    for op in ("max", "argmin"):
        with pytest.raises(dynshape.EmptyReductionError):
            dd.run(op, x, axis=0)
    assert dd.run("sum", x, axis=0).compute().tolist() == [0.0] * 5
    assert dd.run("max", x, axis=1).shape == (0,)
