"""What only a real CUDA device can show: CuPy and torch interop, streams, no
synchronisation on the run path, zero compilations for never-seen shapes. Marked ``gpu``:
run them on a GPU host with ``NUMBA_ENABLE_CUDASIM=0 pytest -m gpu tests/cuda``; elsewhere
they skip, saying why."""
import numpy as np
import pytest

import dynshape

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def device():
    from numba import cuda
    from dynshape.cuda.arrays import simulating
    if simulating() or not cuda.is_available():
        pytest.skip("needs a real CUDA device (this run uses the simulator or has no GPU)")
    return cuda


@pytest.fixture(scope="module")
def cp(device):
    return pytest.importorskip("cupy")


def test_cupy_in_cupy_out_on_the_current_stream(cp):
    x = cp.random.standard_normal((37, 1999), dtype=cp.float32)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        y = dynshape.run("gelu", x)
    s.synchronize()
    assert isinstance(y, cp.ndarray)
    from math import erf
    h = cp.asnumpy(x).astype(np.float64)
    want = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    np.testing.assert_allclose(cp.asnumpy(y), want, rtol=2e-6, atol=1e-6)


def test_torch_cuda_tensors(device):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("this torch build has no CUDA")
    x = torch.randn(64, 33, device="cuda")
    y = dynshape.run("relu", x)
    assert isinstance(y, torch.Tensor) and y.is_cuda
    assert torch.equal(y, torch.relu(x))


def test_never_seen_shapes_compile_nothing_and_upload_no_table_twice(cp, device):
    from dynshape.cuda.target import BRIDGE, DRIVERS
    dynshape.run("tanh", cp.ones((8, 300), cp.float32))
    loaded, uploads = DRIVERS.loaded(), BRIDGE.uploads
    for n in (301, 302, 303):                          # same bucket
        dynshape.run("tanh", cp.ones((8, n), cp.float32))
    assert DRIVERS.loaded() == loaded
    assert BRIDGE.uploads - uploads <= 3               # one common area per new layout


def test_half_precision_bit_for_bit_on_the_device(device):
    """The device's conversions (bitcasts in PTX, not the simulator's views) on every
    float16/bfloat16 carrier and on float32 bit patterns, and a few ops, against NumPy."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from dynshape_kernels.cuda import half
    bf16 = np.dtype(ml_dtypes.bfloat16)

    @device.jit
    def convert(h16, hbf, f, w16, wbf, n16, nbf):
        i = device.grid(1)
        if i < h16.size:
            w16[i] = half.widen16(h16[i])
            wbf[i] = half.widenbf(hbf[i])
        if i < f.size:
            n16[i] = half.narrow16(f[i])
            nbf[i] = half.narrowbf(f[i])
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    f = np.random.default_rng(0).integers(0, 1 << 32, 1 << 16, dtype=np.uint64)
    f = f.astype(np.uint32).view(np.float32)
    out = [np.empty(1 << 16, t) for t in (np.float32, np.float32, np.uint16, np.int16)]
    dev = [device.to_device(a) for a in out]
    convert[256, 256](device.to_device(every), device.to_device(every.view(np.int16)),
                      device.to_device(f), *dev)
    w16, wbf, n16, nbf = (d.copy_to_host() for d in dev)
    np.testing.assert_array_equal(w16.view(np.uint32), every.view(np.float16).astype(
        np.float32).view(np.uint32))
    np.testing.assert_array_equal(wbf.view(np.uint32), every.view(bf16).astype(
        np.float32).view(np.uint32))
    ok = ~np.isnan(f)
    np.testing.assert_array_equal(n16[ok], f[ok].astype(np.float16).view(np.uint16))
    np.testing.assert_array_equal(nbf[ok], f[ok].astype(bf16).view(np.int16))
    x = np.random.default_rng(1).standard_normal((37, 199)).astype(np.float16)
    got = dynshape.run("add", device.to_device(x), device.to_device(x)).copy_to_host()
    np.testing.assert_array_equal(got, (x.astype(np.float32) * 2).astype(np.float16))
