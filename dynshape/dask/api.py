"""``dynshape.dask.run(op, *arrays, **attrs)``: the op's family decides how its blocks map.

| family | on dask arrays |
|---|---|
| unary, binary, copy | one dynshape call per output block (:mod:`~dynshape.dask.blocks`) |
| reduce | dask's tree reduction, partials by dynshape (:mod:`~dynshape.dask.tree`) |
| rowwise | per block along whole rows (:mod:`~dynshape.dask.chunking`) |
| matmul | blockwise contraction (:mod:`~dynshape.dask.contraction`) |
| conv, pool | overlapping blocks (:mod:`~dynshape.dask.halo`) |

Results are dask arrays whose dtype, chunks and ``meta`` are those the blocks return.
"""
import functools

import numpy as np
import dask.array as da

import dynshape
from dynshape import ops
from dynshape.dask import blocks, contraction, halo, tree
from dynshape.dask.blocks import as_dask, frozen
from dynshape.dask.chunking import whole_along
from dynshape.errors import ArgumentError, OpAttributeError
from dynshape.ops.reduction import normalize_axes

SUPPORTED_FAMILIES = ("unary", "binary", "copy", "reduce", "rowwise", "matmul", "conv", "pool")


def run(op, *arrays, out=None, rechunk=True, split_every=None, **attrs):
    """``op`` (a name, or a fused sequence) over dask arrays; returns a dask array.

    ``rechunk``: an op that needs an axis whole in every block (row-wise ops, conv2d's
    channels, a fused chain ending in a row-wise op) rechunks an input split along it with a
    RechunkWarning (True) or raises ChunkingError (False). ``split_every``: the fan-in of
    the tree reductions (dask's default when None). NumPy arrays among the inputs become
    one-chunk dask arrays. ``out=`` is not accepted (dask arrays are immutable)."""
    if out is not None:
        raise ArgumentError("dynshape.dask.run does not take out= (dask arrays are lazy and "
                            "immutable); store the result with da.store or .compute()")
    if not isinstance(op, str) and hasattr(op, "__dynshape_run__"):
        from dynshape.dask.fused import DaskFused
        f = op if isinstance(op, DaskFused) else DaskFused(list(op.raw), rechunk=rechunk)
        return f(*arrays, rechunk=rechunk, split_every=split_every, **attrs)
    spec = ops.get(op)
    fam = spec.family
    if fam in ("unary", "binary", "copy"):
        if op == "transpose":
            raise ArgumentError("transpose on dask arrays: use x.transpose(axes) (dask moves "
                                "blocks, no data); dynshape.dask.run maps ops that keep the "
                                "block layout")
        return blocks.elementwise(op, arrays, attrs)
    if fam == "reduce":
        if len(arrays) != 1:
            raise ArgumentError(f"{op} takes 1 input array, got {len(arrays)}")
        return tree.reduce(op, arrays[0], split_every=split_every, **attrs)
    if fam == "rowwise":
        return rowwise(op, arrays, rechunk, attrs)
    if op == "matmul":
        if len(arrays) != 2:
            raise ArgumentError(f"matmul takes 2 input arrays, got {len(arrays)}")
        return contraction.matmul(*arrays, **attrs)
    if fam in ("conv", "pool"):
        if not arrays:
            raise ArgumentError(f"{op} needs the input array x")
        return halo.windowed(op, *arrays, rechunk=rechunk, **attrs)
    raise ArgumentError(f"{op} (family {fam}) is not mapped over dask arrays; supported "
                        f"families: {', '.join(SUPPORTED_FAMILIES)} (gemm: use matmul)")


def rowwise(op, arrays, rechunk, attrs):
    """softmax, log_softmax (over ``axis``), layer_norm, rms_norm (over ``axis..end``): the
    normalized axes whole in every block, then one dynshape call per block."""
    if not arrays:
        raise ArgumentError(f"{op} needs the input array x")
    x = as_dask(arrays[0], f"{op} input")
    if not isinstance(x, da.Array) or x.ndim == 0:
        raise ArgumentError(f"{op} needs an array of rank >= 1, got {arrays[0]!r}")
    params = [None if p is None else np.asarray(p.compute() if isinstance(p, da.Array) else p)
              for p in arrays[1:]]
    axis = attrs.get("axis", -1)
    if isinstance(axis, (list, tuple)) or axis is None:
        raise OpAttributeError(f"{op}: axis must be a single integer, got {axis!r}")
    (a,) = normalize_axes(axis, x.ndim, op, single=True)
    axes = (a,) if op in ("softmax", "log_softmax") else tuple(range(a, x.ndim))
    # dynshape's own checks on a stand-in: the normalized axes real, the others empty
    probe = np.empty(tuple(n if d in axes else 0 for d, n in enumerate(x.shape)), x.dtype)
    meta = np.asarray(dynshape.run(op, probe, *params, **attrs))
    x = whole_along(x, axes, f"{op} over axis {', '.join(map(str, axes))}", rechunk)
    func = functools.partial(_rowwise_block, op, frozen(attrs), tuple(params))
    return x.map_blocks(func, dtype=meta.dtype, meta=stand_in_like(meta, x.ndim),
                        token=f"dynshape-{op}")


def stand_in_like(meta, ndim):
    return np.empty((0,) * ndim, meta.dtype)


def _rowwise_block(op, attrs, params, block):
    return np.asarray(dynshape.run(op, block, *params, **dict(attrs)))


__all__ = ["run", "rowwise", "SUPPORTED_FAMILIES"]
