"""CUDA tests: the kernels run on Numba's CUDA simulator (the root conftest sets
NUMBA_ENABLE_CUDASIM=1 unless told otherwise), on small shapes so that the simulator, which
runs every thread as a Python thread, stays fast."""
import numpy as np
import pytest


@pytest.fixture(scope="session")
def cuda():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed (the cuda extra)")
    from numba import cuda as nb_cuda
    from dynshape.cuda.arrays import simulating
    if not simulating() and not nb_cuda.is_available():
        pytest.skip("no CUDA device and the simulator is off")
    return nb_cuda


@pytest.fixture
def to_device(cuda):
    """A NumPy array (any view) as a device array with the same layout (views keep theirs:
    the base goes to the device and the same slicing is applied there)."""
    def put(x):
        x = np.asarray(x)
        return cuda.to_device(x)
    return put
