"""conv2d on the CUDA target (simulator) against PyTorch's conv2d (an independent oracle):
groups (depthwise included), strides, pads, dilations, bias, residual, activations, strided
device views; tables of CUDA conv kernels."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dynshape
from cudasim import cuda_settings
from dynshape.errors import DeviceError

torch = pytest.importorskip("torch")
F = torch.nn.functional


@cuda_settings
@given(st.sampled_from([1, 2, 4]), st.integers(1, 3), st.integers(1, 2), st.integers(1, 2),
       st.integers(0, 1), st.booleans(), st.sampled_from([np.float32, np.float64]),
       st.integers(0, 99))
def test_conv2d_matches_torch(cuda, group, k, stride, dil, pad, with_bias, dtype, seed):
    rng = np.random.default_rng(seed)
    C, M = 4, 4 * (1 if group == 4 else 2)
    x = rng.standard_normal((2, C, 8, 9)).astype(dtype)
    w = rng.standard_normal((M, C // group, k, k)).astype(dtype)
    b = rng.standard_normal(M).astype(dtype) if with_bias else None
    args = [cuda.to_device(x), cuda.to_device(w)] + ([cuda.to_device(b)] if with_bias else [])
    got = dynshape.run("conv2d", *args, group=group, strides=(stride, stride),
                       dilations=(dil, dil), pads=(pad,) * 4).copy_to_host()
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(w),
                    torch.from_numpy(b) if with_bias else None, stride, pad, dil, group).numpy()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    t = dynshape.last_table()
    from dynshape_kernels.catalog import CATALOG
    assert t.target == "cuda" and CATALOG[int(t.entries[0, 0])].target == "cuda"


def test_residual_activation_and_strided_input(cuda):
    rng = np.random.default_rng(5)
    base = rng.standard_normal((1, 3, 14, 10))
    x = base[:, :, ::-2]
    w = rng.standard_normal((5, 3, 3, 3))
    res = rng.standard_normal((1, 5, 5, 8))
    got = dynshape.run("conv2d", cuda.to_device(base)[:, :, ::-2], cuda.to_device(w),
                       residual=cuda.to_device(res), activation="tanh").copy_to_host()
    want = np.tanh(F.conv2d(torch.from_numpy(x.copy()), torch.from_numpy(w)).numpy() + res)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_non_contiguous_device_weights_are_refused(cuda):
    x = cuda.to_device(np.ones((1, 2, 5, 5), np.float32))
    w = cuda.to_device(np.ones((3, 2, 3, 6), np.float32))[..., ::2]
    with pytest.raises(DeviceError, match="C-contiguous"):
        dynshape.run("conv2d", x, w)
