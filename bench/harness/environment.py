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
  set it;
- records the CPUs the process may run on, for :func:`threads_unbound`: with the binding,
  the first OpenMP parallel region pins the main thread to one core, and a thread pool
  created later (ONNX Runtime's intra-op threads, made with each session) inherits that
  one core. Peers that create threads after the runtimes load do it inside
  :func:`threads_unbound`.

It never sets ``NUMBA_CACHE_DIR``: benchmarks use the user's Numba cache. Refuses to run
once NumPy (or another runtime) is loaded, since OpenBLAS reads its variables at load time.
"""
import contextlib
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
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    state = {"unset": unset, "bound": bool(bind), "cpus": cpus}
    return state


@contextlib.contextmanager
def threads_unbound():
    """Threads created inside this block may run on every CPU the process could use when
    :func:`prepare` ran. With OpenMP binding the main thread is pinned to one core after the
    first parallel region, and threads it creates inherit that: ONNX Runtime's two intra-op
    threads then shared core 0 (depthwise conv2d over 128 x 113 x 115: 5.7 GFLOP/s, 33 on
    both cores; a 64 -> 64 3x3 conv 172 against 355). The calling thread's own binding is
    restored on exit."""
    cpus = (state or {}).get("cpus")
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, old)


def wants_bind(argv=None):
    """False when the command line says ``--no-bind`` (read before argparse runs)."""
    return "--no-bind" not in (sys.argv if argv is None else argv)
