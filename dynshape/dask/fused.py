"""Fused sequences on dask arrays: ``dynshape.dask.fuse(steps)(x, *sides, **sides)``.

The steps are those of :func:`dynshape.fuse` (validated when the sequence is made). Each
block of ``x`` (and the matching blocks of array side inputs, broadcast and aligned by
dask; numbers pass as they are) runs the whole chain in one dynshape call, so no
intermediate is materialised per block either. A chain ending in

* a row-wise op (softmax, log_softmax, layer_norm, rms_norm over the last axis) needs the
  last axis in one chunk: rechunked with a RechunkWarning, or refused with ``rechunk=False``;
* a reduction (sum, mean, max, min over the last axis or all axes) runs the chain with the
  reduction as ``keepdims`` partial per block, then dask's tree reduction combines the
  partials with dynshape (see :mod:`dynshape.dask.tree`; a mean carries ``(total, n)``).

Chains led by matmul, gemm or conv2d are not split across blocks: run the leading op with
:func:`dynshape.dask.run`, then fuse the elementwise tail.
"""
import functools

import numpy as np
import dask.array as da

import dynshape
from dynshape import ops
from dynshape.dask import tree
from dynshape.dask.blocks import aligned_map, as_dask, conform, stand_in
from dynshape.dask.chunking import whole_along
from dynshape.errors import ArgumentError
from dynshape.fusion.run import _bind_sides


class DaskFused:
    """A fused sequence mapped over dask blocks (module docstring). ``rechunk``: the default
    for calls whose chain ends in a row-wise op over a chunked last axis."""

    def __init__(self, steps, rechunk=True):
        self.fused = dynshape.fuse(steps)
        if self.fused.lead is not None:
            raise ArgumentError(
                f"{self.fused!r}: a chain led by {self.fused.lead.op} is not split over dask "
                f"blocks; run dynshape.dask.run({self.fused.lead.op!r}, ...) and then "
                f"dynshape.dask.fuse(<the elementwise steps>) on its result")
        self.steps = list(steps)
        self.rechunk = rechunk

    def __repr__(self):
        return f"dynshape.dask.fuse({self.steps!r})"

    def __call__(self, x, *sides, rechunk=None, split_every=None, **named):
        rechunk = self.rechunk if rechunk is None else rechunk
        bound = _bind_sides(self.fused, sides, named)
        x = as_dask(x, "fused input x")
        if not isinstance(x, da.Array):
            raise ArgumentError(f"{self!r} needs an array x, got {x!r}")
        sides = [as_dask(v, f"side input {n!r}") for n, v in zip(self.fused.side_names, bound)]
        end = self.fused.end
        if end is not None and end.kind == "rowwise" and x.ndim:
            x = whole_along(x, (x.ndim - 1,), f"{self!r} (ends in {end.op} over the last "
                            f"axis)", rechunk)
        sides = [conform(s, x) for s in sides]
        if end is not None and end.kind == "reduce":
            return self._reduce(x, sides, end, split_every)
        meta = np.asarray(self.fused(stand_in(x), *[stand_in(s) for s in sides]))
        return aligned_map(functools.partial(_fused_block, tuple(self.steps)), [x, *sides],
                           meta, "dynshape-fused")

    def _reduce(self, x, sides, end, split_every):
        op, axis, keepdims = end.op, end.attrs["axis"], end.attrs["keepdims"]
        # dynshape's own checks (dtypes, side shapes) on zero-size stand-ins
        ops.check_dtype(f"{self!r}", x.dtype, ("float32", "float64", "int32", "int64"))
        if len(self.steps) > 1:
            _chain(tuple(self.steps[:-1]))(stand_in(x), *[stand_in(s) for s in sides])
        ndim = max([x.ndim] + [s.ndim for s in sides if isinstance(s, da.Array)])
        axes = tuple(range(ndim)) if axis is None else (ndim - 1,)
        rdt = ops.get(op).result_dtype(x.dtype)[0]
        pdt = tree.MEAN if op == "mean" else rdt
        steps = tuple(self.steps[:-1]) + (("sum" if op == "mean" else op,
                                          {"axis": axis, "keepdims": True}),)
        partials = aligned_map(functools.partial(_fused_partial, steps, op == "mean", axes),
                               [x, *sides], np.empty(0, pdt), "dynshape-fused-partial",
                               adjust={d: 1 for d in axes})
        if op == "mean":
            combine, aggregate = tree._mean_combine, functools.partial(tree._mean_aggregate, rdt)
        else:
            combine = aggregate = functools.partial(tree._plain, tree._COMBINE[op])
        out_ndim = ndim if keepdims else ndim - len(axes)
        return da.reduction(partials, tree._identity, aggregate, combine=combine, axis=axes,
                            keepdims=bool(keepdims), dtype=rdt, split_every=split_every,
                            meta=np.empty((0,) * out_ndim, rdt), name="dynshape-fused-reduce")


def fuse(steps, rechunk=True):
    """A fused sequence over dask arrays (see :class:`DaskFused`)."""
    return DaskFused(steps, rechunk=rechunk)


_CHAINS = {}


def _chain(steps):
    """The process's Fused for ``steps`` (made once per worker process)."""
    key = repr(steps)
    f = _CHAINS.get(key)
    if f is None:
        f = _CHAINS[key] = dynshape.fuse(list(steps))
    return f


def _fused_block(steps, x, *sides):
    return np.asarray(_chain(steps)(x, *sides))


def _fused_partial(steps, mean, axes, x, *sides):
    shape = np.broadcast_shapes(x.shape, *[np.shape(s) for s in sides])
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
    r = np.asarray(_chain(steps)(x, *sides)).reshape(kept)
    if not mean:
        return r
    out = np.empty(kept, tree.MEAN)
    out["total"] = r
    out["n"] = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    return out
