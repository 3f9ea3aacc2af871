"""dynshape: neural-network operators on tensors of any shape, with no compilation at run time.

Precompiled fixed-tile static kernels are tiled across the real shape by a combination
algorithm that emits a parameter table; one compiled driver call runs it.

    >>> import numpy as np, dynshape
    >>> y = dynshape.run("relu", np.arange(-3.0, 3.0))
"""
__version__ = "0.1.0"

# a kernel package named by DYNSHAPE_PACKAGE is loaded before anything compiles at import
from dynshape.packages.load import (PackageError, PackageWarning, load_package,  # noqa: E402
                      unload_package)
from dynshape.packages.load import from_environment as _package_from_environment  # noqa: E402

_package_from_environment()

from dynshape_kernels.catalog import CATALOG  # noqa: E402
from dynshape_kernels.abi.tail_mode import TailMode

from dynshape import ops

from dynshape.runtime import config
from dynshape.api import explain, run
from dynshape.errors import (ArgumentError, DomainError, DtypeError, DynshapeError, EmptyReductionError,
                     MissingExtraError, OpAttributeError, OutputError, SettingError, ShapeError,
                     TableFormatError, UnknownOpError)
from dynshape.ops import elementwise as _elementwise  # noqa: F401  (registers the ops)
from dynshape.ops import reduction as _reduction  # noqa: F401  (registers the ops)
from dynshape.ops import rowwise as _rowwise  # noqa: F401  (registers the ops)
from dynshape.runtime import walk as _reduce_executor
from dynshape.ops import matmul as _matmul  # noqa: F401  (registers matmul and gemm)
from dynshape.runtime import matmul as _matmul_executor
from dynshape.ops import pool as _pool  # noqa: F401  (registers max_pool2d, avg_pool2d, executor)
from dynshape.ops import conv as _conv  # noqa: F401  (registers conv2d)
from dynshape.runtime import conv as _conv_executor
from dynshape.tables.param_table import ParamTable
from dynshape.fusion.run import Fused, FusedTable, fuse
from dynshape.tables.picture import plot_table, tile_rectangles
from dynshape.tables.store import TableStoreWarning
from dynshape.warming import warm

__all__ = ["load_package", "unload_package", "PackageError", "PackageWarning"]
__all__ += ["run", "explain", "known_ops", "cache_stats", "clear_cache", "set_policy",
            "wait_optimized", "warm", "ParamTable", "TailMode", "CATALOG", "DynshapeError",
            "UnknownOpError", "DtypeError", "ShapeError", "OpAttributeError",
            "TableFormatError", "ArgumentError", "OutputError", "EmptyReductionError",
            "DomainError", "SettingError", "MissingExtraError", "describe_ops",
            "set_cache_limit"]
__all__ += ["fuse", "Fused", "FusedTable"]
__all__ += ["warmup", "set_table_dir", "table_dir", "last_table", "plot_table",
            "tile_rectangles", "TableStoreWarning"]


def known_ops():
    """The names of all ops ``run`` accepts, sorted."""
    return ops.known()


def describe_ops():
    """One dict per op: ``name``, ``family``, ``dtypes`` (accepted input dtypes) and
    ``attributes`` (name -> default), sorted by family and name."""
    return ops.describe()


def cache_stats():
    """Table-cache counters: tables, max_tables, hits, misses, evictions, optimized_swaps,
    tables_built, tables_loaded, tables_saved, tables_rejected, save_errors, pending."""
    return config.cache.stats()


def clear_cache():
    config.cache.clear()


def set_policy(policy):
    """How tables are built on a cache miss: "background", "simplified" or "optimized"."""
    config.set_policy(policy)


def set_cache_limit(max_tables):
    """Keep at most ``max_tables`` parameter tables in memory (least recently used go first)."""
    if isinstance(max_tables, bool) or not isinstance(max_tables, int) or max_tables < 1:
        raise SettingError(f"cache limit must be a whole number >= 1, got {max_tables!r}")
    config.cache.max_tables = max_tables


def wait_optimized():
    """Block until background optimizations are swapped into the cache."""
    config.cache.wait()


# ---- persisted tables, warm-up, the table a call used ------------------------------------
def set_table_dir(path):
    """Persist parameter tables under ``path`` (str or PathLike; created on the first save),
    or stop persisting with None. Default: the ``DYNSHAPE_TABLE_DIR`` environment variable.

    Files: ``<path>/<catalog hash>/<key hash>.npz`` (format: param_tables/README.md). Policies
    "background" and "optimized" load a saved table on a cache miss instead of building it
    and save every optimized table they build; "simplified" ignores the directory. A file
    that is corrupt or from another catalog is ignored with a TableStoreWarning and rebuilt."""
    config.set_table_dir(path)


def table_dir():
    """The table directory in use (absolute path), or None."""
    return config.table_dir()


def warmup(op, *shapes_or_arrays, dtype="float32", **attrs):
    """Build the optimized table of a call now and save it in the table directory (the
    fixed-shape scenario: call at initialisation; a later process loads the table instead of
    building it). Arguments as for :func:`explain`; nothing is computed. A table already
    saved is loaded, a cached simplified one is replaced. Returns the ParamTable (None for
    an empty result). Kernels are not loaded here: see :func:`warm`."""
    with config.policy_scope("warmup"):
        return explain(op, *shapes_or_arrays, dtype=dtype, **attrs)


def last_table():
    """The ParamTable used by the latest ``run`` (or ``explain``/``warmup``) of the calling
    thread, or None. With the background policy it shows whether a call ran the simplified
    table or the optimized one swapped in later (``last_table().variant``). A call with an
    empty result runs no table and leaves it unchanged."""
    return config.cache.last_table()
