"""Compiled drivers by (family, dtype), loaded once per process and never compiled afterwards.

``get(family, dtype)`` returns a Numba dispatcher compiled for exactly one signature with
further compilation disabled, so a call with unexpected argument types raises instead of
compiling on the run path. The first ``get`` of a pair loads the machine code from Numba's
on-disk cache or compiles it (this is "warming" the kernels). While a kernel package is in use
(:func:`use_package`), the package decides how a driver is obtained: loaded from the package,
or refused with an error naming the family and dtype, or compiled when the package allows it.
"""
import importlib
import threading

from numba import njit
from numba.core import event

from .abi.fused_table import FUSED_DTYPES
from .compile_gc import during_compile
from .cpu import address_link, step_link

_OPTS = dict(parallel=True, cache=True, nogil=True, error_model="numpy")

#: family -> (module, driver function, signature function, dtypes or None): the CPU target's
#: drivers, found by name and imported on first use (a family without a catalog entry, like
#: the fused-sequence driver, declares its dtypes here)
_DRIVERS = {
    "unary": ("dynshape_kernels.cpu.elementwise", "unary_driver", "unary_signature", None),
    "copy": ("dynshape_kernels.cpu.elementwise", "unary_driver", "unary_signature", None),
    "binary": ("dynshape_kernels.cpu.elementwise", "binary_driver", "binary_signature", None),
    "reduce": ("dynshape_kernels.cpu.reduce", "reduce_driver", "signature", None),
    "rowwise": ("dynshape_kernels.cpu.rowwise", "rowwise_driver", "signature", None),
    "matmul": ("dynshape_kernels.cpu.gemm", "matmul_driver", "matmul_signature", None),
    "pool": ("dynshape_kernels.cpu.pool", "pool_driver", "signature", None),
    "conv": ("dynshape_kernels.cpu.conv", "conv_driver", "signature", None),
    "fused": ("dynshape_kernels.cpu.fused", "fused_driver", "signature", FUSED_DTYPES),
}
_resolved = {}      # family -> (python function, signature function, links, on-demand links)


def _module_links(m, name, fn):
    links = getattr(m, name, ())
    if isinstance(links, dict):             # a module of several drivers: by function name
        links = links.get(fn, ())
    return tuple(links)


def _resolve(family):
    hit = _resolved.get(family)
    if hit is None:
        module, fn, sig, _ = _DRIVERS[family]
        m = importlib.import_module(module) if isinstance(module, str) else module
        hit = _resolved[family] = (getattr(m, fn), getattr(m, sig),
                                   _module_links(m, "LINKS", fn),
                                   _module_links(m, "ON_DEMAND", fn))
    return hit


def links_of(family):
    """The functions the family's driver reaches by address (``cpu.address_link``): its
    module's ``LINKS`` (filled before the driver loads) and ``ON_DEMAND`` (filled by
    :func:`fill_on_demand`), each a tuple, or a dict by driver function name."""
    hit = _resolve(family)
    return hit[2] + hit[3]


def on_demand_links(family):
    """The links the family's driver calls only for some launches (its module's
    ``ON_DEMAND``): it loads without them."""
    return _resolve(family)[3]


def fill_on_demand(family, dtype):
    """Load (or compile) what the driver of ``(family, dtype)`` calls on demand, before a
    launch that needs it (an epilogue program: the step interpreter). Cheap once filled."""
    for link in _resolve(family)[3]:
        link.ensure(dtype)


def runs_step_programs(family):
    """Whether the family's driver calls the step interpreter (``cpu.step_link``)."""
    return step_link.STEPS in links_of(family)


def _fill_links(family, dtype):
    """A callable that fills the slots of the links the driver of ``(family, dtype)`` needs
    before it loads (not its on-demand ones)."""
    def fill():
        for link in _resolve(family)[2]:
            link.ensure(dtype)
    return fill


def _check_links(family, dtype, disp):
    """A driver just compiled may call by address only the links its module lists, for its
    own dtype (``drivers.get`` fills those slots alone before loading it)."""
    for link in address_link.LINKS:
        allowed = {dtype} if link in links_of(family) else set()
        for cres in disp.overloads.values():
            extra = link.slots_in(cres.library) - allowed
            if extra:
                raise RuntimeError(
                    f"driver {family}/{dtype} calls {link.name} for {sorted(extra)} by "
                    f"address; its module's LINKS must list {link.name} and it may call it "
                    f"only for its own dtype")


_loaded = {}
_lock = threading.Lock()
_package = None     # the kernel package drivers come from (dynshape.packages.load), or None


def register(family, module, function, signature, dtypes=None):
    """Add (or replace) a family's driver: ``module`` (a dotted name, imported on first use,
    or a module object) defines ``function`` (the Python driver) and ``signature(dtype)``
    (its one argument signature). ``dtypes``: the dtypes it is built for, needed only by a
    family without a catalog entry."""
    _DRIVERS[family] = (module, function, signature,
                        tuple(dtypes) if dtypes is not None else None)
    _resolved.pop(family, None)


def registered():
    """The families that have a driver."""
    return sorted(_DRIVERS)


def declared_dtypes(family):
    """The dtypes declared for a family outside the catalog, or None."""
    return _DRIVERS[family][3]


def function_name(family):
    """The qualified name of the Python function behind a family's driver (families that
    share one, like unary and copy, share Numba's cache index: compile them in one process)."""
    module, fn, _, _ = _DRIVERS[family]
    return f"{getattr(module, '__name__', module)}.{fn}"


def signature(family, dtype):
    """The one argument signature the driver of ``(family, dtype)`` is compiled for."""
    return _resolve(family)[1](dtype)


def use_package(package):
    """Obtain drivers not yet in memory through ``package`` (None: Numba's on-disk cache).

    ``package.load_driver(family, dtype, py_func, signature, options, before)`` must call
    ``before()`` (it fills the slots of the functions the driver calls by address, if any:
    loading or compiling them like a driver) and then return a dispatcher holding the
    compiled signature, or raise. Drivers already loaded stay in use.
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
                py_func, sig, _, later = _resolve(family)
                before = _fill_links(family, dtype)
                with address_link.deferred(later), during_compile():
                    if _package is None:
                        before()
                        disp = njit(**_OPTS)(py_func)
                        disp.compile(sig(dtype))
                    else:
                        disp = _package.load_driver(family, dtype, py_func, sig(dtype), _OPTS,
                                                    before)
                _check_links(family, dtype, disp)
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
    py_func, sig, _, later = _resolve(family)
    disp = njit(**_OPTS)(py_func)
    try:
        with event.install_listener("numba:compile", _RefuseCompile()), \
                address_link.deferred(later):
            _fill_links(family, dtype)()
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


class DriverSet:
    """The drivers of this module compiled with other Numba options, in memory only: the
    kernel directory of another CPU-like target (a target adapter's ``drivers``). Numba's
    on-disk cache does not key entries by compiler options, so these are never cached.

    ``DriverSet(parallel=False)`` runs every family's driver on the calling thread (its
    ``prange`` loops become plain loops)."""

    def __init__(self, **options):
        self.options = dict(_OPTS, **options, cache=False)
        self._loaded = {}
        self._lock = threading.Lock()

    def get(self, family, dtype):
        key = (family, dtype)
        disp = self._loaded.get(key)
        if disp is None:
            with self._lock:
                disp = self._loaded.get(key)
                if disp is None:
                    py_func, sig, _, later = _resolve(family)
                    with during_compile():
                        _fill_links(family, dtype)()
                        disp = njit(**self.options)(py_func)
                        with address_link.deferred(later):
                            disp.compile(sig(dtype))
                    _check_links(family, dtype, disp)
                    disp.disable_compile()
                    self._loaded[key] = disp
        return disp

    def loaded(self):
        return sorted(self._loaded)

    def fill_on_demand(self, family, dtype):
        """As the module's :func:`fill_on_demand` (the links are shared)."""
        fill_on_demand(family, dtype)
