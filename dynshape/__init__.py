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
from .ops import reduction as _reduction  # noqa: F401  (registers the ops)
from .ops import rowwise as _rowwise  # noqa: F401  (registers the ops)
from . import reduce_executor as _reduce_executor  # noqa: F401  (registers its executors)
from .ops import matmul as _matmul  # noqa: F401  (registers matmul and gemm)
from . import matmul_executor as _matmul_executor  # noqa: F401  (registers its executor)
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
    """Load (from Numba's on-disk cache) or compile the drivers of ``families`` (default: all)
    for the data ``dtypes`` (default: all they support), so that no later call compiles."""
    import numpy as np
    from dynshape_kernels import drivers
    for fam in families or list(CATALOG.families):
        if fam not in CATALOG.families:
            raise ValueError(f"unknown kernel family {fam!r}; known: "
                             f"{', '.join(CATALOG.families)}")
        spec = CATALOG.families[fam]
        for dt in (dtypes or spec.dtypes):
            if fam == "copy":      # copies move bytes: one driver per item size
                dt = f"uint{8 * np.dtype(dt).itemsize}"
            if dt in spec.dtypes:
                drivers.get(fam, dt)
