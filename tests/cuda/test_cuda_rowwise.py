"""Row-wise ops on the CUDA target (simulator) against NumPy references written here:
softmax, log_softmax, layer_norm (with and without weight and bias), rms_norm, over random
axes of strided and negative-stride device views."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from cudasim import cuda_settings
from dynshape.errors import DeviceError

TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-13)}


def softmax(x, a):
    e = np.exp(x - x.max(a, keepdims=True))
    return e / e.sum(a, keepdims=True)


def reference(op, x, axis, w=None, b=None, eps=1e-5):
    x64 = x.astype(np.float64)
    if op == "softmax":
        return softmax(x64, axis)
    if op == "log_softmax":
        m = x64.max(axis, keepdims=True)
        return x64 - m - np.log(np.exp(x64 - m).sum(axis, keepdims=True))
    axes = tuple(range(axis % x.ndim, x.ndim))
    if op == "layer_norm":
        y = (x64 - x64.mean(axes, keepdims=True)) / np.sqrt(x64.var(axes, keepdims=True) + eps)
    else:
        y = x64 / np.sqrt((x64 * x64).mean(axes, keepdims=True) + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y


@cuda_settings
@given(st.sampled_from(["softmax", "log_softmax", "layer_norm", "rms_norm"]),
       st.sampled_from([np.float32, np.float64]),
       st.lists(st.integers(1, 9), min_size=1, max_size=3), st.data())
def test_rowwise_ops_match_numpy(cuda, op, dtype, shape, data):
    shape = tuple(shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    steps = tuple(data.draw(st.sampled_from([1, 2, -1])) for _ in shape)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    base = (rng.standard_normal(tuple(2 * n for n in shape)) * 3).astype(dtype)
    sl = tuple(slice(None, None, s) for s in steps)
    cut = tuple(slice(0, n) for n in shape)
    x, d = base[sl][cut], cuda.to_device(base)[sl][cut]
    args, w, b = [], None, None
    if op in ("layer_norm", "rms_norm") and data.draw(st.booleans()):
        norm = shape[axis % len(shape):]
        w = rng.standard_normal(norm).astype(dtype)
        args.append(cuda.to_device(w))
        if op == "layer_norm" and data.draw(st.booleans()):
            b = rng.standard_normal(norm).astype(dtype)
            args.append(cuda.to_device(b))
    got = dynshape.run(op, d, *args, axis=axis).copy_to_host()
    np.testing.assert_allclose(got, reference(op, x, axis, w, b), **TOL[dtype])
    assert dynshape.last_table().target == "cuda"


def test_weights_needing_a_host_conversion_are_refused(cuda):
    x = cuda.to_device(np.ones((3, 4), np.float32))
    with pytest.raises(DeviceError, match="weight on the device must have the normalized "
                                          "shape"):
        dynshape.run("layer_norm", x, cuda.to_device(np.ones(4, np.float64)))
