"""CUDA tests: the kernels run on Numba's CUDA simulator (the root conftest sets
NUMBA_ENABLE_CUDASIM=1 unless told otherwise), on small shapes so that the simulator, which
runs every thread as a Python thread, stays fast."""
import pytest


@pytest.fixture(scope="session")
def cuda():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed (the cuda extra)")
    from numba import cuda as nb_cuda
    from dynshape.cuda.arrays import simulating
    if not simulating() and not nb_cuda.is_available():
        pytest.skip("no CUDA device and the simulator is off")
    return nb_cuda

