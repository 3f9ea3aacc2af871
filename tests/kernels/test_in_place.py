"""Ops whose output is their input (``out=x``) run the drivers' in-place paths.

A loop that reads one array and writes another checks at run time that they do not overlap
and falls back to its scalar loop when they do, so the drivers detect an output that is the
input itself (``elementwise.same_element``) and call loops that read and write one array:
the switches' in-place loop (unary), a scratch copy of the rows (binary, the output being
either input; a short row with a repeating input; one value per row), the row-wise loops on
the output row. Each path must give exactly what the same call gives into a separate
output (row-wise: within the float64 row sum's rounding), and must write nothing else.
"""
import numpy as np
import pytest

import dynshape


VIEWS = {
    "whole": lambda x: x,
    "short rows": lambda x: x[:, :40],          # rows of 40 of a wider array
    "long rows": lambda x: x[:, 3:],
    "reversed": lambda x: x[::-1],
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("op", ["exp", "tanh", "relu", "neg", "sigmoid"])
def test_unary_in_place_equals_out(op, view, dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((300, 1031)) * 2).astype(dtype)
    y = x.copy()
    v = VIEWS[view](y)
    want = dynshape.run(op, VIEWS[view](x))
    got = dynshape.run(op, v, out=v)
    assert got is v
    np.testing.assert_array_equal(v, want)
    inside = np.zeros(x.shape, bool)
    VIEWS[view](inside)[...] = True
    np.testing.assert_array_equal(y[~inside], x[~inside])     # nothing written outside


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("case", [
    "row bias", "short rows, row bias", "short rows, column value", "column value",
    "same shape", "output is the right input, column value", "output is the right input"])
def test_binary_in_place_equals_out(case, dtype):
    rng = np.random.default_rng(2)
    if case.startswith("short rows"):
        shape, cols = (2000, 100), slice(0, 48)     # x[:, :48]: short strided rows
    else:
        shape, cols = (700, 1500), slice(None)
    x = (rng.standard_normal(shape) * 50).astype(dtype)
    m = x[:, cols].shape[1]
    other = {
        "row bias": rng.standard_normal(m),
        "short rows, row bias": rng.standard_normal(m),
        "short rows, column value": rng.standard_normal((shape[0], 1)),
        "column value": rng.standard_normal((shape[0], 1)),
        "same shape": rng.standard_normal((shape[0], m)),
        "output is the right input, column value": rng.standard_normal((shape[0], 1)),
        "output is the right input": rng.standard_normal((shape[0], m)),
    }[case]
    other = (other * 50).astype(dtype)
    for op in ("add", "sub", "mul", "maximum"):
        y = x.copy()
        v = y[:, cols]
        if case.startswith("output is the right input"):
            want = dynshape.run(op, other, x[:, cols])
            got = dynshape.run(op, other, v, out=v)
        else:
            want = dynshape.run(op, x[:, cols], other)
            got = dynshape.run(op, v, other, out=v)
        assert got is v
        np.testing.assert_array_equal(v, want, err_msg=f"{op} {case}")
        rest = np.ones(shape, bool)
        rest[:, cols] = False
        np.testing.assert_array_equal(y[rest], x[rest])      # nothing written outside


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
@pytest.mark.parametrize("shape", [(7, 30522), (300, 768), (64, 8)])
def test_rowwise_in_place_equals_out(op, shape, dtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    args = ()
    if op in ("layer_norm", "rms_norm"):
        args = (rng.standard_normal(shape[-1]).astype(dtype),)
        if op == "layer_norm":
            args += (rng.standard_normal(shape[-1]).astype(dtype),)
    want = dynshape.run(op, x, *args)
    y = x.copy()
    got = dynshape.run(op, y, *args, out=y)
    assert got is y
    tol = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-13}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_in_place_with_a_transposed_input(dtype):
    """x += y.T (and y.T - x into x): the tile's other operand is gathered, and the one that
    is the output is copied into its scratch tile too."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((581, 1723)).astype(dtype)
    y = rng.standard_normal((1723, 581)).astype(dtype)
    for op in ("add", "sub"):
        for left in (True, False):
            v = x.copy()
            want = dynshape.run(op, x, y.T) if left else dynshape.run(op, y.T, x)
            got = dynshape.run(op, v, y.T, out=v) if left else dynshape.run(op, y.T, v, out=v)
            assert got is v
            np.testing.assert_array_equal(v, want, err_msg=f"{op} left={left}")


@pytest.mark.parametrize("steps", [
    ["exp", ("mul", 0.5)], [("add", "bias"), "tanh"], [("sub", "bias"), "relu", ("mul", 3.0)]])
@pytest.mark.parametrize("view", ["whole", "short rows", "long rows"])
def test_fused_chain_in_place_equals_out(steps, view):
    """A fused elementwise chain whose output is its input runs every step on the output."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 1031)).astype(np.float32)
    f = dynshape.fuse(steps)
    v = VIEWS[view]
    bias = rng.standard_normal(v(x).shape[1]).astype(np.float32)
    kw = {"bias": bias} if any(isinstance(s, tuple) and s[1] == "bias" for s in steps) else {}
    want = f(v(x), **kw)
    y = x.copy()
    got = f(v(y), out=v(y), **kw)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(v(y), want)
    inside = np.zeros(x.shape, bool)
    v(inside)[...] = True
    np.testing.assert_array_equal(y[~inside], x[~inside])
