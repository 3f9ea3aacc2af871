"""dynshape on Dask arrays: every block of a dask array runs through dynshape's static
kernels, so the ragged, rechunked and filtered block shapes of a Dask graph never compile.

    >>> import dask.array as da, dynshape.dask as dd
    >>> y = dd.run("gelu", x)                                  # a dask array
    >>> z = dd.fuse([("add", "bias"), "gelu", "softmax"])(x, bias=b)
    >>> s = dd.run("sum", x, axis=0)                           # dask's tree reduction
    >>> dd.install(client, package="pkg")                     # workers load, never compile

Importing this module imports ``dask.array`` (the ``dask`` extra); ``import dynshape`` never
does. Modules: :mod:`~dynshape.dask.blocks` (block functions, metadata, elementwise ops and
broadcasting), :mod:`~dynshape.dask.chunking` (axes an op needs whole),
:mod:`~dynshape.dask.tree` (reductions), :mod:`~dynshape.dask.contraction` (matmul),
:mod:`~dynshape.dask.halo` (conv2d and pooling through overlapping blocks),
:mod:`~dynshape.dask.fused` (fused sequences), :mod:`~dynshape.dask.workers` (the worker
plugin), :mod:`~dynshape.dask.api` (``run``, dispatching on the op's family).
"""
from dynshape.extras import require as _require

_require("dask.array", "dynshape.dask")

from dynshape.dask.api import SUPPORTED_FAMILIES, run  # noqa: E402
from dynshape.dask.chunking import ChunkingError, RechunkWarning  # noqa: E402
from dynshape.dask.fused import DaskFused, fuse  # noqa: E402


def install(client, package=None, **options):
    """Make every worker of ``client`` load a kernel package (see
    :func:`dynshape.dask.workers.install`; needs ``distributed``)."""
    from dynshape.dask.workers import install as _install
    return _install(client, package, **options)


def worker_status(client):
    """Per worker: its kernel package and the plugin's note (:mod:`dynshape.dask.workers`)."""
    from dynshape.dask.workers import worker_status as _status
    return _status(client)


__all__ = ["run", "fuse", "install", "worker_status", "DaskFused", "ChunkingError",
           "RechunkWarning", "SUPPORTED_FAMILIES"]
