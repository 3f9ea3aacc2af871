"""Zeroed scratch arrays for the body of a parallel driver.

Numba compiles the drivers with ``parallel=True``, which turns ``np.zeros`` (and any other
array expression) in the driver's own body into a parallel loop: every call then wakes the
thread pool and joins it just to zero a few words (~2 us, more than a small call's whole
work: a fused relu over 8 elements took 3.2 us, the unary driver 0.7). These functions are
compiled on their own, without ``parallel``, so a driver calling them zeroes on its own
thread.
"""
import numpy as np

from .callee import callee


@callee(cache=True)
def zeros(n, dtype):
    """``np.zeros(n, dtype)`` (``dtype`` a NumPy scalar type: ``np.int64``), zeroed by the
    calling thread."""
    a = np.empty(n, dtype)
    for i in range(n):
        a[i] = 0
    return a
