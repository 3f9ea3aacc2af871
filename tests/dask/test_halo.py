"""conv2d and pooling over NCHW dask arrays split along H and W (halos through dask's
overlap): against a NumPy reference, for random chunk layouts, pads, strides, dilations."""
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from numpy.lib.stride_tricks import sliding_window_view

import dynshape
from dynshape import testing

da = pytest.importorskip("dask.array")
import dynshape.dask as dd  # noqa: E402

FEW = settings(max_examples=8, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture,
                                      HealthCheck.too_slow])


def _windows(x, k, s, d, pads, fill):
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                constant_values=fill)
    dk = [(k[i] - 1) * d[i] + 1 for i in range(2)]
    w = sliding_window_view(xp, dk, axis=(2, 3))
    return w[:, :, ::s[0], ::s[1], ::d[0], ::d[1]]          # N, C, OH, OW, KH, KW


def conv_reference(x, w, s, d, pads):
    return np.einsum("nchwij,mcij->nmhw", _windows(x, w.shape[2:], s, d, pads, 0.0), w)


def maxpool_reference(x, k, s, d, pads):
    return _windows(x, k, s, d, pads, -np.inf).max(axis=(4, 5))


@FEW
@given(data=st.data())
def test_conv2d_across_chunk_boundaries(client, data):
    kh, kw = data.draw(st.tuples(st.integers(1, 4), st.integers(1, 4)))
    s = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
    d = data.draw(st.tuples(st.integers(1, 2), st.integers(1, 2)))
    pads = data.draw(st.tuples(*[st.integers(0, 3)] * 4))
    H = data.draw(st.integers((kh - 1) * d[0] + 1, 40))
    W = data.draw(st.integers((kw - 1) * d[1] + 1, 40))
    rng = np.random.default_rng(H * W)
    xn = rng.standard_normal((2, 3, H, W)).astype(np.float64)
    wn = rng.standard_normal((4, 3, kh, kw))
    chunks = data.draw(testing.chunk_layouts(xn.shape, whole=(1,)))
    y = dd.run("conv2d", da.from_array(xn, chunks=chunks), wn, strides=s, dilations=d,
               pads=pads)
    ref = conv_reference(xn, wn, s, d, pads)
    assert y.shape == ref.shape and sum(y.chunks[2]) == ref.shape[2]
    np.testing.assert_allclose(y.compute(), ref, rtol=1e-11, atol=1e-11)


@FEW
@given(data=st.data(), op=st.sampled_from(["max_pool2d", "avg_pool2d"]))
def test_pooling_across_chunk_boundaries(client, data, op):
    k = data.draw(st.tuples(st.integers(1, 4), st.integers(1, 4)))
    s = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
    pads = data.draw(st.tuples(*[st.integers(0, 3)] * 4).filter(
        lambda p: all(v < kk for v, kk in zip(p, k + k))))
    ceil_mode = data.draw(st.booleans())
    H, W = data.draw(st.tuples(st.integers(k[0], 35), st.integers(k[1], 35)))
    xn = np.random.default_rng(H + W).standard_normal((2, 3, H, W)).astype(np.float32)
    attrs = dict(kernel_shape=k, strides=s, pads=pads, ceil_mode=ceil_mode)
    if op == "avg_pool2d":
        attrs["count_include_pad"] = data.draw(st.booleans())
    chunks = data.draw(testing.chunk_layouts(xn.shape))
    y = dd.run(op, da.from_array(xn, chunks=chunks), **attrs)
    whole = dynshape.run(op, xn, **attrs)            # the unsplit op (tested against ORT)
    assert y.shape == whole.shape
    r = y.compute()
    np.testing.assert_allclose(r, whole, rtol=2e-6, atol=2e-6)
    if op == "max_pool2d" and not ceil_mode:
        np.testing.assert_array_equal(r, maxpool_reference(xn, k, s, (1, 1), pads))


def test_conv2d_needs_all_input_channels_in_one_block(client):
    xn = np.random.default_rng(1).standard_normal((1, 6, 12, 12)).astype(np.float32)
    wn = np.random.default_rng(2).standard_normal((2, 6, 3, 3)).astype(np.float32)
    x = da.from_array(xn, chunks=(1, 3, 5, 7))
    with pytest.raises(dd.ChunkingError, match="input channels.*axis 1"):
        dd.run("conv2d", x, wn, rechunk=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = dd.run("conv2d", x, wn, np.ones(2, np.float32), auto_pad="SAME_UPPER",
                   activation="relu")
    assert any(issubclass(m.category, dd.RechunkWarning) for m in w)
    ref = dynshape.run("conv2d", xn, wn, np.ones(2, np.float32), auto_pad="SAME_UPPER",
                       activation="relu")
    np.testing.assert_allclose(y.compute(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(dynshape.OpAttributeError, match="residual"):
        dd.run("conv2d", x, wn, residual=xn)
    with pytest.raises(dynshape.ShapeError, match="rank 4"):
        dd.run("max_pool2d", x[0], kernel_shape=(2, 2))
