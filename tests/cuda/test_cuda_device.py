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
