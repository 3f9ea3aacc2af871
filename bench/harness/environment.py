"""The benchmark process's environment, fixed before NumPy, Numba or PyTorch load.

Contract: :func:`prepare` runs first thing in a benchmark's ``__main__`` and never in tests
or CI. It

- unsets ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` together (they pin OpenBLAS to a
  kernel older than the CPU, e.g. Haswell on an AVX-512 machine: half its matmul speed); the
  kernel OpenBLAS then picks is read back with threadpoolctl and printed in the header;
- binds OpenMP threads (Numba's omp layer, PyTorch) one per core unless ``bind=False``: on a
  loaded 2-core machine an unbound worker can land on the core where the spinning master
  waits, and each parallel region then waits for a scheduler tick;
- sets Numba's thread count to :data:`THREADS` (at most the CPU count) unless the caller
  set it.

It never sets ``NUMBA_CACHE_DIR``: benchmarks use the user's Numba cache. Refuses to run
once NumPy (or another runtime) is loaded, since OpenBLAS reads its variables at load time.
"""
import os
import sys

THREADS = 2                                   # every runtime's thread count
OPENBLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
OMP_BINDING = {"OMP_PROC_BIND": "true", "OMP_PLACES": "cores"}
_RUNTIMES = ("numpy", "numba", "torch", "onnxruntime")

#: what prepare() changed: {"unset": {name: old value}, "bound": bool} (None before it ran)
state = None


class EnvironmentTooLate(RuntimeError):
    """prepare() was called after a runtime that reads the environment was imported."""


def prepare(bind=True, environ=None, modules=None):
    """Fix the environment (see the module docstring); returns :data:`state`.

    ``environ`` and ``modules`` default to ``os.environ`` and ``sys.modules`` (tests pass
    their own)."""
    global state
    environ = os.environ if environ is None else environ
    modules = sys.modules if modules is None else modules
    early = [m for m in _RUNTIMES if m in modules]
    if early:
        raise EnvironmentTooLate(
            f"environment.prepare() must run before {', '.join(early)} is imported "
            "(OpenBLAS and OpenMP read their variables when they load)")
    unset = {k: environ.pop(k) for k in OPENBLAS_VARS if k in environ}
    if bind:
        for k, v in OMP_BINDING.items():
            environ.setdefault(k, v)
    environ.setdefault("NUMBA_NUM_THREADS", str(min(THREADS, os.cpu_count() or 1)))
    state = {"unset": unset, "bound": bool(bind)}
    return state


def wants_bind(argv=None):
    """False when the command line says ``--no-bind`` (read before argparse runs)."""
    return "--no-bind" not in (sys.argv if argv is None else argv)
