"""dynshape: neural-network operators on tensors of any shape, with no compilation at run time.

Precompiled fixed-tile static kernels are tiled across the real shape by a combination
algorithm that emits a parameter table; one compiled driver call runs it.

    >>> import numpy as np, dynshape
    >>> y = dynshape.run("relu", np.arange(-3.0, 3.0))

Layers (see README, "How it is built"): ``ops`` (op specs), ``runtime`` (the executor of
every family, targets, the memo), ``planning`` (combination algorithms and cost models),
``tables`` (ParamTable, keys, buckets, cache, store, pictures), ``fusion`` (fused
sequences), ``packages`` (kernel packages); ``dynshape_kernels`` holds the static kernels.
"""
__version__ = "0.1.0"

# a kernel package named by DYNSHAPE_PACKAGE is loaded before anything compiles at import
from dynshape.packages.load import (PackageError, PackageWarning,  # noqa: E402
                                    load_package, unload_package)
from dynshape.packages.load import from_environment as _package_from_environment  # noqa: E402

_package_from_environment()

from dynshape_kernels.abi.tail_mode import TailMode  # noqa: E402
from dynshape_kernels.catalog import CATALOG  # noqa: E402

from dynshape import ops  # noqa: E402
from dynshape.api import (cache_stats, clear_cache, describe_ops, explain,  # noqa: E402
                          known_ops, last_table, run, set_cache_limit, set_policy,
                          set_table_dir, table_dir, wait_optimized, warmup)
from dynshape.errors import (ArgumentError, DeviceError, DomainError, DtypeError,  # noqa: E402
                             DynshapeError, EmptyReductionError, MissingExtraError,
                             OpAttributeError, OutputError, SettingError, ShapeError,
                             TableFormatError, UnknownOpError)
from dynshape.fusion.run import Fused, FusedTable, fuse  # noqa: E402
from dynshape.packages.load import UnsignedPackageWarning  # noqa: E402
from dynshape.runtime.targets import Target, known_targets, register_target  # noqa: E402
from dynshape.tables.param_table import ParamTable  # noqa: E402
from dynshape.pictures.picture import plot_table, tile_rectangles  # noqa: E402
from dynshape.tables.store import TableStoreWarning  # noqa: E402
from dynshape.warming import warm  # noqa: E402

__all__ = ["run", "explain", "fuse", "Fused", "FusedTable", "warm", "warmup", "known_ops",
           "describe_ops", "cache_stats", "clear_cache", "set_policy", "set_cache_limit",
           "wait_optimized", "set_table_dir", "table_dir", "last_table", "plot_table",
           "tile_rectangles", "ParamTable", "TailMode", "CATALOG", "Target",
           "register_target", "known_targets", "load_package", "unload_package",
           "DynshapeError", "UnknownOpError", "DtypeError", "ShapeError", "OpAttributeError",
           "TableFormatError", "ArgumentError", "OutputError", "EmptyReductionError",
           "DomainError", "DeviceError", "SettingError", "MissingExtraError", "PackageError",
           "PackageWarning", "UnsignedPackageWarning", "TableStoreWarning"]


def load_onnx(source, optimize=True, partition=None):
    """An ONNX model (path, bytes or onnx.ModelProto) run by dynshape: a ``Model`` with
    onnxruntime's ``run(output_names, input_feed)`` (the ``onnx`` extra); ``partition``
    runs it as sub-models on their devices (see ``partition``)."""
    from dynshape.graph import load_onnx as _load
    return _load(source, optimize=optimize, partition=partition)


def partition(model, method="depth", **options):
    """Sub-models of ``model`` (a load_onnx model or a networkx graph), each run by one
    device: method "depth" (seed 000), "typed" (seed 001) or "serial" (seed 002)."""
    from dynshape.partitioning import partition as _partition
    return _partition(model, method, **options)


def onnx_supported_ops():
    """{ONNX op type: "cpu" or "host"}: the op types ``load_onnx`` accepts."""
    from dynshape.graph import onnx_supported_ops as _ops
    return _ops()


__all__ += ["load_onnx", "onnx_supported_ops", "partition"]
