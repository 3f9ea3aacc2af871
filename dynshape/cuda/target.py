"""The registered "cuda" target: the CUDA kernel directory behind one adapter.

Importing this module registers the target and its cost model; ``dynshape`` imports it on
the first call that names the target or passes a device array. It imports Numba's CUDA
support only when a kernel is first needed.
"""
from dynshape_kernels.cuda.drivers import CudaDrivers

from dynshape.cuda.bridge import Bridge
from dynshape.planning import cost_model
from dynshape.planning.gpu_cost import GpuCostModel
from dynshape.runtime.targets import Target, register_target


def _threads():
    # the simulator runs every thread as a Python thread: small blocks keep tests fast (the
    # kernels stride by blockDim, so any block size computes the same result)
    from dynshape.cuda.arrays import simulating
    from dynshape_kernels.abi.cuda_tiles import CUDA_THREADS
    return 32 if simulating() else CUDA_THREADS


BRIDGE = Bridge()
DRIVERS = CudaDrivers(BRIDGE, _threads())
CUDA = register_target(Target("cuda", DRIVERS, (),
                              "Numba CUDA kernels, one launch per table (block per entry "
                              "and outer index)"))
MODEL = GpuCostModel()
cost_model.register("cuda", MODEL)


def warm(families=None, dtypes=None):
    """Make the CUDA kernels of ``families`` (default: every one, fused included) for
    their dtypes (or only ``dtypes``) now instead of at their first use; returns the
    (family, dtype) pairs loaded. On a device this runs NVVM once per kernel, unless a CUDA
    kernel package is installed (``dynshape.cuda.package.load``): its kernels come from the
    packaged PTX or cubin, and one it lacks raises PackageError naming it."""
    from dynshape.cuda.package import pairs
    done = []
    for fam, dt in pairs(families, dtypes):
        DRIVERS.get(fam, dt)
        done.append((fam, dt))
    return done
