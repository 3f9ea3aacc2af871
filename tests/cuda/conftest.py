"""CUDA tests: the kernels run on Numba's CUDA simulator (the root conftest sets
NUMBA_ENABLE_CUDASIM=1 unless told otherwise), on small shapes so that the simulator, which
runs every thread as a Python thread, stays fast."""
import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def cuda():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed (the cuda extra)")
    from numba import cuda as nb_cuda

    from dynshape.cuda.arrays import simulating
    if not simulating() and not nb_cuda.is_available():
        pytest.skip("no CUDA device and the simulator is off")
    return nb_cuda



@pytest.fixture(scope="session")
def ptx_package(tmp_path_factory, cuda):
    """Every CUDA kernel of the catalog compiled to PTX (and cubin) for cc 8.0 and 9.0, once
    per session, by ``dynshape pregenerate`` in a child process with the real compiler."""
    out = tmp_path_factory.mktemp("cuda-pkg") / "pkg"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    r = subprocess.run([sys.executable, "-m", "dynshape", "pregenerate", "--target", "cuda",
                        "--cc", "80,90", "--out", str(out)], env=env, check=False,
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stdout + r.stderr
    return out
