"""Reductions over dask arrays on dask's own tree reduction (``da.reduction``).

Each block is reduced by dynshape to a partial (the reduced axes kept with length 1); dask
concatenates neighbouring partials and ``combine`` reduces them again, level by level
(``split_every`` partials at a time), until ``aggregate`` gives the result. Every reduction
of data in these steps is a dynshape call; only the bookkeeping of partials uses NumPy.

* sum, max, min: partials are the op itself (sums of integers are int64 from the first
  block on, as dynshape's and NumPy's are).
* mean: partials are ``(total, n)`` records (float64 sum, int64 count); the aggregate is
  ``total / n`` in the result dtype, so uneven blocks weigh by their element counts.
* argmax, argmin: partials are ``(vals, arg)`` records whose ``arg`` is already the GLOBAL
  index (each block adds its offset, or for ``axis=None`` its flat C-order index in the whole
  array). Combining keeps the best value and, among equal values (NaN first, as NumPy),
  the smallest global index: NumPy's first occurrence, whatever the block order.
"""
import functools

import numpy as np
import dask.array as da

import dynshape
from dynshape import ops
from dynshape.dask.blocks import as_dask
from dynshape.errors import ArgumentError, OpAttributeError
from dynshape.ops.reduction import normalize_axes

REDUCTIONS = ("sum", "mean", "max", "min", "argmax", "argmin")
MEAN = np.dtype([("total", np.float64), ("n", np.int64)])
_COMBINE = {"sum": "sum", "max": "max", "min": "min", "argmax": "max", "argmin": "min"}


def reduce(op, x, axis=None, keepdims=False, split_every=None, **attrs):
    """``op`` of dask array ``x`` over ``axis`` (NumPy semantics, as ``dynshape.run``)."""
    if attrs:
        raise OpAttributeError(f"{op}: unknown attribute(s) {', '.join(sorted(attrs))}; "
                               f"accepted: axis, keepdims, split_every")
    x = as_dask(x, f"{op} input")
    if not isinstance(x, da.Array):
        raise ArgumentError(f"{op} takes an array, got {x!r}")
    spec = ops.get(op)
    ops.check_dtype(op, x.dtype, ("float32", "float64", "int32", "int64"))
    if not isinstance(keepdims, (bool, np.bool_)):
        raise OpAttributeError(f"{op}: keepdims must be True or False, got {keepdims!r}")
    arg = op in ("argmax", "argmin")
    axes = normalize_axes(axis, x.ndim, op, single=arg)
    out_dtype = spec.result_dtype(x.dtype)[0]
    if op not in ("sum", "mean") and any(x.shape[d] == 0 for d in axes):
        # dynshape's own refusal (EmptyReductionError, NumPy's wording), before any task runs
        dynshape.run(op, np.empty(tuple(0 if d in axes else 1 for d in range(x.ndim)), x.dtype),
                     axis=axis, keepdims=keepdims)
    out_ndim = x.ndim if keepdims else x.ndim - len(axes)
    meta = np.empty((0,) * out_ndim, out_dtype)
    common = dict(axis=axes, keepdims=bool(keepdims), split_every=split_every, meta=meta,
                  dtype=out_dtype, name=f"dynshape-{op}")
    if arg:
        flat = axis is None
        partials = x.map_blocks(functools.partial(_arg_chunk, op, axes, flat, x.shape),
                                dtype=_arg_record(x.dtype),
                                chunks=_one_per_block(x.chunks, axes),
                                meta=np.empty((0,) * x.ndim, _arg_record(x.dtype)),
                                token=f"dynshape-{op}-partial")
        return da.reduction(partials, _identity, functools.partial(_arg_aggregate, op),
                            combine=functools.partial(_arg_combine, op), **common)
    if op == "mean":
        return da.reduction(x, _mean_chunk, functools.partial(_mean_aggregate, out_dtype),
                            combine=_mean_combine, **common)
    return da.reduction(x, functools.partial(_plain, op), functools.partial(_plain, _COMBINE[op]),
                        combine=functools.partial(_plain, _COMBINE[op]), **common)


def _one_per_block(chunks, axes):
    return tuple(tuple(1 for _ in c) if i in axes else c for i, c in enumerate(chunks))


def _kept(shape, axis, keepdims):
    return tuple(1 if d in axis else n for d, n in enumerate(shape)) if keepdims else \
        tuple(n for d, n in enumerate(shape) if d not in axis)


def _reduced(op, a, axis, keepdims=True):
    """dynshape's ``op`` of block ``a`` over ``axis`` as an ndarray of the exact shape."""
    r = dynshape.run(op, a, axis=tuple(axis), keepdims=True)
    return np.asarray(r).reshape(_kept(a.shape, axis, keepdims))


# ---- sum, max, min -------------------------------------------------------------------------
def _plain(op, a, axis=None, keepdims=False, computing_meta=False, **_):
    if computing_meta:
        return a
    return _reduced(op, a, axis, keepdims)


# ---- mean ----------------------------------------------------------------------------------
def _mean_chunk(a, axis=None, keepdims=True, computing_meta=False, **_):
    if computing_meta:
        return _meta_stand_in(a, axis, True)
    out = np.empty(_kept(a.shape, axis, True), MEAN)
    out["total"] = _reduced("sum", a, axis)
    out["n"] = int(np.prod([a.shape[d] for d in axis], dtype=np.int64))
    return out


def _mean_combine(p, axis=None, keepdims=True, computing_meta=False, **_):
    if computing_meta:
        return _meta_stand_in(p, axis, True)
    out = np.empty(_kept(p.shape, axis, True), MEAN)
    out["total"] = _reduced("sum", np.ascontiguousarray(p["total"]), axis)
    out["n"] = _reduced("sum", np.ascontiguousarray(p["n"]), axis)
    return out


def _mean_aggregate(result_dtype, p, axis=None, keepdims=False, computing_meta=False, **_):
    if computing_meta:
        return np.empty(_kept(p.shape, axis, keepdims), result_dtype)
    s = _mean_combine(p, axis)
    r = np.asarray(dynshape.run("div", s["total"], s["n"]))
    return r.astype(result_dtype, copy=False).reshape(_kept(p.shape, axis, keepdims))


# ---- argmax, argmin ------------------------------------------------------------------------
def _arg_record(dtype):
    return np.dtype([("vals", dtype), ("arg", np.int64)])


def _identity(p, axis=None, keepdims=True, computing_meta=False, **_):
    return _meta_stand_in(p, axis, True) if computing_meta else p


def _meta_stand_in(p, axis, keepdims):
    """What a step returns to dask's metadata pass (``computing_meta``): a plain float array
    (dask casts it to the result dtype; record partials would not cast)."""
    return np.empty(_kept(p.shape, axis, keepdims), np.float64)


def _arg_chunk(op, axes, flat, shape, block, block_info=None):
    """Partial of one block: its best value(s) and their global index(es)."""
    starts = [lo for lo, _ in block_info[0]["array-location"]]
    out = np.empty(_kept(block.shape, axes, True), _arg_record(block.dtype))
    if flat:
        i = int(dynshape.run(op, block))
        local = np.unravel_index(i, block.shape)
        out["vals"] = block[local]
        out["arg"] = np.ravel_multi_index(tuple(s + j for s, j in zip(starts, local)), shape) \
            if shape else 0
        return out
    (a,) = axes
    local = np.asarray(dynshape.run(op, block, axis=a, keepdims=True)).reshape(out.shape)
    out["vals"] = np.take_along_axis(block, local, axis=a)
    out["arg"] = local + starts[a]
    return out


def _arg_combine(op, p, axis=None, keepdims=True, computing_meta=False, **_):
    if computing_meta:
        return _meta_stand_in(p, axis, True)
    out = np.empty(_kept(p.shape, axis, True), p.dtype)
    vals = np.ascontiguousarray(p["vals"])
    best = _reduced(_COMBINE[op], vals, axis)
    tie = vals == best
    if vals.dtype.kind == "f":
        tie |= np.isnan(vals) & np.isnan(best)
    args = np.where(tie, p["arg"], np.iinfo(np.int64).max)
    out["vals"] = best
    out["arg"] = _reduced("min", args, axis)
    return out


def _arg_aggregate(op, p, axis=None, keepdims=False, computing_meta=False, **_):
    if computing_meta:
        return np.empty(_kept(p.shape, axis, keepdims), np.int64)
    return np.ascontiguousarray(_arg_combine(op, p, axis)["arg"]).reshape(
        _kept(p.shape, axis, keepdims))
