"""dynshape: neural-network operators on tensors of any shape, with no compilation at run time.

Precompiled fixed-tile static kernels are tiled across the real shape by a combination
algorithm that emits a parameter table; one compiled driver call runs it.

    >>> import numpy as np, dynshape
    >>> y = dynshape.run("relu", np.arange(-3.0, 3.0))
"""
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.tail_mode import TailMode

from . import config, ops
from .dispatcher import explain, run
from .errors import (ArgumentError, DtypeError, DynshapeError, OpAttributeError, ShapeError,
                     TableFormatError, UnknownOpError)
from .ops import elementwise as _elementwise  # noqa: F401  (registers the ops)
from .param_table import ParamTable

__version__ = "0.1.0"

__all__ = ["run", "explain", "known_ops", "cache_stats", "clear_cache", "set_policy",
           "wait_optimized", "warm", "ParamTable", "TailMode", "CATALOG", "DynshapeError",
           "UnknownOpError", "DtypeError", "ShapeError", "OpAttributeError",
           "TableFormatError", "ArgumentError"]


def known_ops():
    return ops.known()


def cache_stats():
    """Table-cache counters: tables, max_tables, hits, misses, evictions, optimized_swaps."""
    return config.cache.stats()


def clear_cache():
    config.cache.clear()


def set_policy(policy):
    """How tables are built on a cache miss: "background", "simplified" or "optimized"."""
    config.set_policy(policy)


def set_cache_limit(max_tables):
    config.cache.max_tables = int(max_tables)


def wait_optimized():
    """Block until background optimizations are swapped into the cache."""
    config.cache.wait()


def warm(families=None, dtypes=None):
    """Load (from Numba's cache) or compile the drivers, so that no call compiles later."""
    from dynshape_kernels import drivers
    fams = families or [f for f in CATALOG.families]
    for fam in fams:
        spec = CATALOG.families[fam]
        for dt in (dtypes or spec.dtypes):
            if dt in spec.dtypes:
                drivers.get(fam, dt)
