"""Compiled drivers by (family, dtype), loaded once per process and never compiled afterwards.

``get(family, dtype)`` returns a Numba dispatcher compiled for exactly one signature with
further compilation disabled, so a call with unexpected argument types raises instead of
compiling on the run path. The first ``get`` of a pair loads the machine code from Numba's
on-disk cache or compiles it (this is "warming" the kernels). While a kernel package is in use
(:func:`use_package`), the package decides how a driver is obtained: loaded from the package,
or refused with an error naming the family and dtype, or compiled when the package allows it.
"""
import threading

from numba import njit, types
from numba.core import event

from .cpu import elementwise

_OPTS = dict(parallel=True, cache=True, nogil=True, error_model="numpy")

_i64_1d = types.Array(types.int64, 1, "C", readonly=True)
_i64_2d = types.Array(types.int64, 2, "C", readonly=True)


def _ro(dtype):
    return types.Array(getattr(types, dtype), 1, "C", readonly=True)


def _rw(dtype):
    return types.Array(getattr(types, dtype), 1, "C")


def _unary_sig(dtype):
    return (_ro(dtype), _rw(dtype), _i64_1d, _i64_2d, _ro(dtype))


def _binary_sig(dtype):
    return (_ro(dtype), _ro(dtype), _rw(dtype), _i64_1d, _i64_2d)


# family -> (python function of the driver, signature builder)
_DRIVERS = {
    "unary": (elementwise.unary_driver, _unary_sig),
    "copy": (elementwise.unary_driver, _unary_sig),
    "binary": (elementwise.binary_driver, _binary_sig),
}

_loaded = {}
_lock = threading.Lock()
_package = None     # the kernel package drivers come from (dynshape.package), or None


_DTYPES = {}        # family -> dtypes declared at registration (families outside the catalog)


def register(family, py_func, signature, dtypes=None):
    """Add a family's driver (used by the kernel modules of other families). ``dtypes``: the
    dtypes it is compiled for, needed only by a family without a catalog entry (packages)."""
    _DRIVERS[family] = (py_func, signature)
    if dtypes is not None:
        _DTYPES[family] = tuple(dtypes)


def registered():
    """The families that have a registered driver."""
    return sorted(_DRIVERS)


def declared_dtypes(family):
    """The dtypes declared with ``register``, or None."""
    return _DTYPES.get(family)


def function_name(family):
    """The qualified name of the Python function behind a family's driver (families that
    share one, like unary and copy, share Numba's cache index: compile them in one process)."""
    f = _DRIVERS[family][0]
    return f"{f.__module__}.{f.__qualname__}"


def signature(family, dtype):
    """The one argument signature the driver of ``(family, dtype)`` is compiled for."""
    return _DRIVERS[family][1](dtype)


def use_package(package):
    """Obtain drivers not yet in memory through ``package`` (None: Numba's on-disk cache).

    ``package.load_driver(family, dtype, py_func, signature, options)`` must return a
    dispatcher holding the compiled signature, or raise. Drivers already loaded stay in use.
    """
    global _package
    with _lock:
        _package = package


def get(family, dtype):
    key = (family, dtype)
    disp = _loaded.get(key)
    if disp is None:
        with _lock:
            disp = _loaded.get(key)
            if disp is None:
                py_func, sig = _DRIVERS[family]
                if _package is None:
                    disp = njit(**_OPTS)(py_func)
                    disp.compile(sig(dtype))
                else:
                    disp = _package.load_driver(family, dtype, py_func, sig(dtype), _OPTS)
                disp.disable_compile()
                _loaded[key] = disp
    return disp


class _NotCached(Exception):
    """Raised by :class:`_RefuseCompile` to stop a compilation before it starts."""


class _RefuseCompile(event.Listener):
    """Stops any compilation started by one thread (others are not affected)."""

    def __init__(self):
        self.thread = threading.get_ident()

    def on_start(self, ev):
        if threading.get_ident() == self.thread:
            raise _NotCached

    def on_end(self, ev):
        pass


def load_cached(family, dtype):
    """Bring the driver of ``(family, dtype)`` into memory if that needs no compilation (it
    is loaded already, the kernel package in use holds it, or Numba's on-disk cache does);
    return whether it is in memory now. Never compiles."""
    key = (family, dtype)
    if key in _loaded:
        return True
    if _package is not None:
        get(family, dtype)
        return True
    py_func, sig = _DRIVERS[family]
    disp = njit(**_OPTS)(py_func)
    try:
        with event.install_listener("numba:compile", _RefuseCompile()):
            disp.compile(sig(dtype))
    except _NotCached:
        return False
    disp.disable_compile()
    with _lock:
        _loaded.setdefault(key, disp)
    return True


def loaded():
    """The (family, dtype) pairs whose drivers are in memory."""
    return sorted(_loaded)
