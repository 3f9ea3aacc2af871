"""Block functions and metadata: what each dask task runs and what the graph says it returns.

Every task calls ``dynshape.run`` (or a fused sequence) on NumPy blocks; the functions here
are module-level so a worker unpickles them by reference. The graph's dtype and ``meta``
come from dynshape itself, run on zero-size stand-ins of the inputs (an empty result
computes nothing and loads no driver), so they are exactly what the blocks return.
"""
import functools

import numpy as np
import dask.array as da

import dynshape
from dynshape.errors import ArgumentError, ShapeError


def as_dask(a, what):
    """A dask array for an array-like input (NumPy arrays become one chunk); numbers and
    None pass through unchanged."""
    if a is None or isinstance(a, da.Array) or _is_number(a):
        return a
    try:
        arr = np.asarray(a)
    except Exception:                      # noqa: BLE001 - named in the message below
        arr = None
    if arr is None or arr.dtype.hasobject:
        raise ArgumentError(f"{what} must be a dask array, a NumPy array or a number, "
                            f"got {type(a).__name__}")
    return da.from_array(arr, chunks=arr.shape or ())


def _is_number(v):
    return isinstance(v, (int, float, np.number)) and not isinstance(v, (bool, np.bool_))


def stand_in(a):
    """A zero-size NumPy array standing in for ``a`` (its rank and dtype) in metadata runs."""
    if isinstance(a, da.Array):
        return np.empty((0,) * a.ndim, dtype=a.dtype)
    return a


def meta_of(op, args, attrs):
    """dynshape's result on zero-size stand-ins of ``args``: the graph's ``meta``."""
    r = dynshape.run(op, *[stand_in(a) for a in args], **attrs)
    return np.asarray(r)


def run_block(op, attrs, *blocks):
    """One task: ``dynshape.run(op, *blocks, **attrs)`` as an ndarray."""
    return np.asarray(dynshape.run(op, *blocks, **dict(attrs)))


def frozen(attrs):
    """Attributes as a tuple of pairs (hashable, part of the task's name)."""
    return tuple(sorted(attrs.items()))


def elementwise(op, args, attrs):
    """Unary, binary and copy ops: one dynshape call per output block. Operands broadcast
    with NumPy's rules; differently chunked operands are aligned to common chunks by dask
    (``unify_chunks``); Python numbers are passed to every task as they are."""
    args = [as_dask(a, f"{op} operand {i}") for i, a in enumerate(args)]
    if not any(isinstance(a, da.Array) for a in args):
        raise ArgumentError(f"dynshape.dask.run({op!r}, ...) needs at least one dask or NumPy "
                            f"array operand")
    meta = meta_of(op, args, attrs)
    ndim = max(a.ndim for a in args if isinstance(a, da.Array))
    if meta.ndim != ndim:
        raise ArgumentError(f"{op}: dynshape.dask maps ops whose result has the operands' "
                            f"broadcast rank, got rank {meta.ndim}")
    return aligned_map(functools.partial(run_block, op, frozen(attrs)), args, meta,
                       f"dynshape-{op}")


def conform(side, x):
    """``side`` rechunked to ``x``'s chunks along the dimensions they share (trailing
    dimensions aligned, length-1 dimensions left alone): the output keeps ``x``'s layout, so
    an axis made whole in ``x`` stays whole."""
    if not isinstance(side, da.Array):
        return side
    off = x.ndim - side.ndim
    chunks = tuple(x.chunks[d + off] if 0 <= d + off < x.ndim and n == x.shape[d + off] and n != 1
                   else side.chunks[d] for d, n in enumerate(side.shape))
    return side if chunks == side.chunks else side.rechunk(chunks)


def aligned_map(func, args, meta, token, adjust=None):
    """``func`` over the blocks of ``args`` broadcast NumPy-style (trailing dimensions
    aligned, as ``da.elemwise`` does): ``da.blockwise`` with right-aligned indices, so dask
    unifies the chunks of equal dimensions and broadcasts length-1 ones. Non-array
    arguments go to every task as they are. ``adjust``: output dimension -> the length of
    each of its blocks (an int) when the blocks change shape."""
    arrays = [a for a in args if isinstance(a, da.Array)]
    try:
        np.broadcast_shapes(*[a.shape for a in arrays])
    except ValueError:
        raise ShapeError(f"shapes {', '.join(str(a.shape) for a in arrays)} do not broadcast "
                         f"(NumPy's rules: trailing dimensions equal or 1)") from None
    ndim = max(a.ndim for a in arrays)
    pairs = []
    for a in args:
        pairs += [a, tuple(range(a.ndim))[::-1]] if isinstance(a, da.Array) else [a, None]
    index = tuple(range(ndim))[::-1]
    adjust = None if adjust is None else {index[d]: n for d, n in adjust.items()}
    return da.blockwise(func, index, *pairs, dtype=meta.dtype,
                        meta=np.empty((0,) * ndim, meta.dtype), token=token,
                        adjust_chunks=adjust)
