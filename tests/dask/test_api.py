"""dynshape.dask.run: row-wise ops along whole axes (rechunking or refusing), dispatch by
family, bad input, and the optional import."""
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dynshape
from dynshape import testing

da = pytest.importorskip("dask.array")
import dynshape.dask as dd  # noqa: E402

FEW = settings(max_examples=5, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])


def _softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _layer_norm(x, axis, w, b, eps=1e-5):
    axes = tuple(range(axis, x.ndim))
    m = x.mean(axes, keepdims=True)
    v = ((x - m) ** 2).mean(axes, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


@FEW
@given(data=st.data(), axis=st.sampled_from([0, 1, -1]))
def test_softmax_over_a_chunked_axis_rechunks_with_a_warning(client, data, axis):
    shape = data.draw(st.tuples(st.integers(2, 30), st.integers(2, 40), st.integers(1, 9)))
    chunks = data.draw(testing.chunk_layouts(shape))
    xn = np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float64)
    x = da.from_array(xn, chunks=chunks)
    a = axis % 3
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = dd.run("log_softmax", x, axis=axis)
    split = len(chunks[a]) > 1
    assert any(issubclass(m.category, dd.RechunkWarning) for m in w) == split
    assert y.chunks[a] == (shape[a],)
    np.testing.assert_allclose(y.compute(), np.log(_softmax(xn, a)), rtol=1e-12, atol=1e-12)
    if split:
        with pytest.raises(dd.ChunkingError, match=rf"axis {a} whole.*x.rechunk"):
            dd.run("softmax", x, axis=axis, rechunk=False)


def test_layer_norm_and_rms_norm_over_trailing_axes(client):
    rng = np.random.default_rng(3)
    xn = rng.standard_normal((37, 6, 11)).astype(np.float32)
    w, b = rng.standard_normal((6, 11)).astype(np.float32), rng.standard_normal((6, 11)).astype(np.float32)
    x = da.from_array(xn, chunks=((5, 20, 12), (6,), (11,)))
    y = dd.run("layer_norm", x, w, b, axis=1)
    assert y.chunks == x.chunks
    np.testing.assert_allclose(y.compute(), _layer_norm(xn, 1, w, b), rtol=2e-5, atol=2e-5)
    r = dd.run("rms_norm", x, w[0], axis=-1).compute()
    ref = xn / np.sqrt((xn ** 2).mean(-1, keepdims=True) + 1e-5) * w[0]
    np.testing.assert_allclose(r, ref, rtol=2e-5, atol=2e-5)
    with pytest.raises(dd.ChunkingError, match="axis 1, 2"):
        dd.run("layer_norm", x.rechunk((5, 3, 4)), axis=1, rechunk=False)


def test_bad_input_is_named_before_any_task_runs():
    x = da.ones((10, 10), chunks=5, dtype=np.float32)
    with pytest.raises(dynshape.UnknownOpError):
        dd.run("nope", x)
    with pytest.raises(dynshape.DtypeError, match="accepted"):
        dd.run("softmax", x.astype(np.int32))
    with pytest.raises(dynshape.DtypeError):
        dd.run("sum", x.astype(bool))
    with pytest.raises(dynshape.OpAttributeError, match="out of range"):
        dd.run("sum", x, axis=2)
    with pytest.raises(dynshape.OpAttributeError, match="single integer"):
        dd.run("argmax", x, axis=(0, 1))
    with pytest.raises(dynshape.ArgumentError, match="out="):
        dd.run("relu", x, out=np.empty((10, 10), np.float32))
    with pytest.raises(dynshape.ArgumentError, match="transpose"):
        dd.run("transpose", x, axes=(1, 0))
    with pytest.raises(dynshape.ArgumentError, match="gemm"):
        dd.run("gemm", x, x)
    with pytest.raises(dynshape.ShapeError):
        dd.run("add", x, da.ones((3,), chunks=3, dtype=np.float32))
    with pytest.raises(dynshape.ArgumentError, match="dask array, a NumPy array"):
        dd.run("relu", object())


def test_import_dynshape_never_imports_dask_and_a_missing_dask_is_named():
    code = textwrap.dedent("""
        import importlib.abc, sys
        class B(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("dask", "distributed"):
                    raise ImportError(f"No module named {name!r}")
        sys.meta_path.insert(0, B())
        import dynshape
        assert not [m for m in sys.modules if m.split(".")[0] in ("dask", "distributed")]
        try:
            import dynshape.dask
        except dynshape.MissingExtraError as e:
            print("MISSING", e)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "MISSING" in r.stdout and "dynshape[dask]" in r.stdout
