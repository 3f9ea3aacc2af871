"""Fused chains led by matmul, gemm or conv2d on the CUDA target (simulator): the chain runs
as the epilogue of the op's kernel (one launch), against NumPy; side inputs broadcast per
column / channel, of the full shape, strided and reversed device views, constants on either
side; half precision bit for bit the CPU's chain for exact steps; what would need host work
is refused by name."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import dynshape
from dynshape.errors import DeviceError

TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-12, atol=1e-12)}


def gelu(v):
    from math import erf
    return 0.5 * v * (1 + np.vectorize(erf)(v / 2 ** .5))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_led_chain_with_broadcast_full_and_strided_sides(cuda, dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((2, 9, 6)).astype(dtype)
    b = rng.standard_normal((6, 35)).astype(dtype)
    bias = rng.standard_normal(35).astype(dtype)                 # per column
    rows = rng.standard_normal((2, 9, 1)).astype(dtype)          # per batch and row
    full = rng.standard_normal((2, 18, 35)).astype(dtype)        # read as a strided view
    f = dynshape.fuse(["matmul", ("add", "bias"), "gelu", ("mul", "rows"),
                       ("sub", "full", "_"), ("maximum", -0.5), ("div", 2.0, "_")])
    got = f(cuda.to_device(a), cuda.to_device(b), bias=cuda.to_device(bias),
            rows=cuda.to_device(rows), full=cuda.to_device(full)[:, ::-2]).copy_to_host()
    v = a.astype(np.float64) @ b
    want = 2.0 / np.maximum(full[:, ::-2] - gelu(v + bias) * rows, -0.5)
    assert got.dtype == dtype and got.shape == (2, 9, 35)
    np.testing.assert_allclose(got, want, **TOL[dtype])
    assert dynshape.last_table().target == "cuda"


def test_gemm_led_chain_and_out_view(cuda):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((7, 5)), rng.standard_normal((12, 5))
    c, s = rng.standard_normal((7, 12)), rng.standard_normal((7, 1))
    f = dynshape.fuse([("gemm", {"transB": 1, "alpha": 0.5, "beta": 2.0, "C": "c"}),
                       ("mul", "s"), "tanh"])
    out = cuda.to_device(np.full((7, 24), 3.0))
    f(cuda.to_device(a), cuda.to_device(b), c=cuda.to_device(c), s=cuda.to_device(s),
      out=out[:, 1::2])
    host = out.copy_to_host()
    np.testing.assert_allclose(host[:, 1::2], np.tanh((0.5 * a @ b.T + 2.0 * c) * s),
                               **TOL[np.float64])
    np.testing.assert_array_equal(host[:, ::2], 3.0)


def conv2d(x, w, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = sliding_window_view(x, w.shape[2:], axis=(2, 3))      # N, C, OH, OW, KH, KW
    return np.einsum("nchwij,mcij->nmhw", win, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_led_chain_with_channel_full_and_strided_sides(cuda, dtype):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 6, 7)).astype(dtype)
    w = rng.standard_normal((4, 3, 3, 3)).astype(dtype)
    bias = rng.standard_normal(4).astype(dtype)
    scale = rng.standard_normal((1, 4, 1, 1)).astype(dtype)      # per channel
    res_base = rng.standard_normal((2, 4, 12, 7)).astype(dtype)  # full shape, strided rows
    pos = rng.standard_normal((6, 7)).astype(dtype)              # per position
    f = dynshape.fuse([("conv2d", {"pads": (1, 1, 1, 1), "bias": "bias"}), ("mul", "scale"),
                       ("add", "res"), "relu", ("sub", "pos"), ("minimum", 1.5, "_")])
    got = f(cuda.to_device(x), cuda.to_device(w), bias=cuda.to_device(bias),
            scale=cuda.to_device(scale), res=cuda.to_device(res_base)[:, :, ::2],
            pos=cuda.to_device(pos)).copy_to_host()
    v = conv2d(x.astype(np.float64), w, 1) + bias[:, None, None]
    want = np.minimum(1.5, np.maximum(v * scale + res_base[:, :, ::2], 0) - pos)
    assert got.dtype == dtype and got.shape == (2, 4, 6, 7)
    np.testing.assert_allclose(got, want, **TOL[dtype])
    assert dynshape.last_table().target == "cuda"


def test_grouped_conv_led_chain_with_a_reversed_channel_side(cuda):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 4, 5, 5))
    w = rng.standard_normal((4, 1, 3, 3))
    sh = rng.standard_normal(8)
    f = dynshape.fuse([("conv2d", {"group": 4}), ("add", "shift"), "exp"])
    got = f(cuda.to_device(x), cuda.to_device(w),
            shift=cuda.to_device(sh.reshape(8, 1, 1))[::-2]).copy_to_host()
    v = np.concatenate([conv2d(x[:, i:i + 1], w[i:i + 1], 0) for i in range(4)], axis=1)
    np.testing.assert_allclose(got, np.exp(v + sh[::-2].reshape(4, 1, 1)), **TOL[np.float64])


def test_what_needs_host_work_is_refused(cuda):
    a = cuda.to_device(np.ones((2, 3, 4, 5), np.float32))
    b = cuda.to_device(np.ones((5, 6), np.float32))
    f = dynshape.fuse(["matmul", ("add", "s")])
    with pytest.raises(DeviceError, match="batch dimensions must broadcast as one"):
        f(a, b, s=cuda.to_device(np.ones((2, 1, 1, 6), np.float32)))
    with pytest.raises(DeviceError, match="host array"):
        f(a, b, s=np.ones(6, np.float32))


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
def test_half_precision_lead_chains_round_every_step_like_the_cpu(cuda, fmt):
    """The stored (rounded) result of matmul/conv2d, then every step rounding to the format:
    with exact steps (add, mul, relu, maximum, constants) the device's chain is bit for bit
    the CPU's."""
    from dynshape.ops import as_dtype
    dt = as_dtype(fmt)
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 7, 5)).astype(dt)
    b = rng.standard_normal((5, 19)).astype(dt)
    bias = rng.standard_normal(19).astype(dt)
    full = rng.standard_normal((2, 14, 19)).astype(dt)
    f = dynshape.fuse(["matmul", ("add", "bias"), "relu", ("mul", "full"), ("maximum", -0.5),
                       ("sub", 0.25, "_")])
    got = f(cuda.to_device(a), cuda.to_device(b), bias=cuda.to_device(bias),
            full=cuda.to_device(full)[:, ::2]).copy_to_host()
    want = f(a, b, bias=bias, full=full[:, ::2])
    assert got.dtype == dt
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
    x = rng.standard_normal((1, 4, 6, 7)).astype(dt)
    w = rng.standard_normal((6, 2, 3, 3)).astype(dt)
    ch = rng.standard_normal((6, 1, 1)).astype(dt)
    g = dynshape.fuse([("conv2d", {"group": 2, "pads": (1, 1, 1, 1)}), ("add", "ch"), "relu",
                       ("mul", 3.0)])
    got = g(cuda.to_device(x), cuda.to_device(w), ch=cuda.to_device(ch)).copy_to_host()
    want = g(x, w, ch=ch)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))
