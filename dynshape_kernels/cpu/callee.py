"""Callees: functions compiled only to be called from compiled code.

Numba gives every compiled function two entry points besides its native one: a CPython
wrapper (unboxing each argument from a Python object, boxing the result) and a C wrapper.
A driver calls its helpers through their native entry point only, so both wrappers of
every helper are generated, optimized and turned into machine code for nothing. Measured on
a fresh cache, the whole catalog (42 drivers) compiled by 2 processes: 4 min 1 s with the
wrappers, 3 min 38 s without (the drivers' compile times sum to 432.7 s, then 391.8 s;
rowwise float32 alone 13.8-14.2 -> 12.4-12.6 s, binary float32 14.3-14.7 -> 13.5 s), and
the cache holds 65 MB instead of 73. The C wrapper is about a fifth of that. The drivers'
own code is the same (their cached objects are within 1% in size; conv2d runs at the same
speed).

``callee(**options)`` is ``njit(**options)`` without the two wrappers. A function compiled
without the CPython wrapper must not be entered from Python (its entry point is null), so
a callee's Python call goes through a proxy instead: a one-line function compiled on the
first such call that calls the callee from compiled code. Its overloads, signatures and
``inspect_*`` are the callee's own, shared with the drivers that call it. Only tests and
tools call callees from Python; the run path never does.
"""
import inspect

from numba import njit
from numba.core.registry import CPUDispatcher


class CalleeDispatcher(CPUDispatcher):
    """A Numba dispatcher compiled without wrappers; see the module."""

    def __call__(self, *args, **kwargs):
        proxy = self.__dict__.get("_python_proxy")
        if proxy is None:
            target = self
            proxy = self._python_proxy = njit(lambda *a: target(*a))
        if kwargs:
            args = self._bound(args, kwargs)
        return proxy(*args)

    def _bound(self, args, kwargs):
        try:
            bound = inspect.signature(self.py_func).bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{self.py_func.__qualname__}: {e}") from None
        bound.apply_defaults()
        return bound.args


def callee(**options):
    """Decorator: ``njit(**options)`` compiled without the CPython and C wrappers, for a
    function that only compiled code calls (see the module)."""
    def wrap(fn):
        disp = njit(no_cpython_wrapper=True, no_cfunc_wrapper=True, **options)(fn)
        if isinstance(disp, CPUDispatcher):       # not under NUMBA_DISABLE_JIT
            disp.__class__ = CalleeDispatcher
        return disp
    return wrap
