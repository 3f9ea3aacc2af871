"""Pooling on the CUDA target (simulator) against PyTorch's pooling (an independent oracle):
kernels, strides, pads, dilations, count_include_pad, strided and reversed device views."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from cudasim import cuda_settings

torch = pytest.importorskip("torch")


@cuda_settings
@given(st.sampled_from(["max_pool2d", "avg_pool2d"]), st.integers(1, 3), st.integers(1, 3),
       st.integers(1, 2), st.integers(0, 1), st.booleans(), st.booleans(), st.integers(0, 99))
def test_pooling_matches_torch(cuda, op, kh, kw, stride, pad, flip, cip, seed):
    pad = min(pad, kh // 2, kw // 2)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, 9, 12)).astype(np.float32)
    d = cuda.to_device(x)
    if flip:
        x, d = x[:, :, ::-1], d[:, :, ::-1]
    attrs = dict(kernel_shape=(kh, kw), strides=(stride, stride), pads=(pad,) * 4)
    t = torch.from_numpy(np.ascontiguousarray(x))
    if op == "max_pool2d":
        want = torch.nn.functional.max_pool2d(t, (kh, kw), stride, pad).numpy()
    else:
        attrs["count_include_pad"] = cip
        want = torch.nn.functional.avg_pool2d(t, (kh, kw), stride, pad,
                                              count_include_pad=cip).numpy()
    got = dynshape.run(op, d, **attrs).copy_to_host()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    assert dynshape.last_table().target == "cuda"


def test_dilated_max_pool(cuda):
    x = np.random.default_rng(1).standard_normal((1, 2, 10, 10))
    got = dynshape.run("max_pool2d", cuda.to_device(x), kernel_shape=(3, 3),
                       dilations=(2, 2), pads=(1, 1, 1, 1)).copy_to_host()
    want = torch.nn.functional.max_pool2d(torch.from_numpy(x), 3, 1, 1, dilation=2).numpy()
    np.testing.assert_array_equal(got, want)
