"""matmul of dask arrays as a blockwise contraction.

One task per output block ``(..., i, j)`` receives the blocks ``a[..., i, k]`` and
``b[..., k, j]`` for every chunk ``k`` of the contracted axis (``da.blockwise`` with
``concatenate=False``: no concatenation of the K blocks) and accumulates
``dynshape.run("matmul", a_k, b_k, residual=acc)`` over them, so each block pair runs one
dynshape matmul and the sum over K never leaves the task. ``bias=`` and ``activation=`` are
applied in the last call's epilogue (``activation(a @ b + bias + residual)``), i.e. once,
after the whole sum. NumPy semantics: 1-D operands, broadcasting batch dimensions; the
operands' K chunks are aligned by dask (``unify_chunks``).
"""
import functools
import string

import numpy as np
import dask.array as da

import dynshape
from dynshape.dask.blocks import as_dask, frozen
from dynshape.errors import ArgumentError, OpAttributeError, ShapeError


def matmul(a, b, bias=None, activation=None, **attrs):
    if attrs:
        raise OpAttributeError(f"matmul: unknown attribute(s) {', '.join(sorted(attrs))}; "
                               f"accepted on dask arrays: bias, activation")
    a, b = as_dask(a, "matmul operand a"), as_dask(b, "matmul operand b")
    if not (isinstance(a, da.Array) and isinstance(b, da.Array)) or a.ndim == 0 or b.ndim == 0:
        raise ArgumentError("matmul takes two arrays of rank >= 1 (NumPy's matmul rules)")
    # dtype, shape and attribute checks, by dynshape on zero-size stand-ins of each rank
    sa = tuple(a.shape[-1] if d == a.ndim - 1 else 0 for d in range(a.ndim))
    sb = tuple(b.shape[d] if d >= b.ndim - 2 else 0 for d in range(b.ndim))
    bias_np = None if bias is None else np.asarray(bias)
    extra = {} if activation is None else {"activation": activation}
    meta = np.asarray(dynshape.run("matmul", np.empty(sa, a.dtype), np.empty(sb, b.dtype),
                                   **extra))
    if bias_np is not None:
        if bias_np.ndim > 1:
            raise ShapeError(f"matmul on dask arrays: bias must be a vector of the output's "
                             f"last dimension (or a scalar), got shape {bias_np.shape}")
        # the bias's own checks (dtype, broadcast to the columns)
        dynshape.run("matmul", np.empty(sa, a.dtype), np.empty(sb, b.dtype), bias=bias_np)
    vec_a, vec_b = a.ndim == 1, b.ndim == 1
    if vec_a:
        a = a[None, :]
    if vec_b:
        b = b[:, None]
    nd = max(a.ndim, b.ndim)
    batch = string.ascii_lowercase[:nd - 2]
    out_ind = batch + "yz"
    a_ind = batch[len(batch) - (a.ndim - 2):] + "yx"
    b_ind = batch[len(batch) - (b.ndim - 2):] + "xz"
    dtype = np.result_type(a.dtype, b.dtype) if meta.dtype == object else meta.dtype
    bias_cols = None
    if bias_np is not None:
        bias_cols = da.from_array(np.broadcast_to(bias_np, (b.shape[-1],)).astype(dtype),
                                  chunks=(b.chunks[-1],))
    args = [a, a_ind, b, b_ind] + ([bias_cols, "z"] if bias_cols is not None else [])
    out = da.blockwise(functools.partial(_contract, frozen(extra), bias_cols is not None),
                       out_ind, *args, concatenate=False, dtype=dtype,
                       meta=np.empty((0,) * nd, dtype), name=None,
                       token="dynshape-matmul")
    if vec_a:
        out = out[..., 0, :]
    if vec_b:
        out = out[..., 0]
    return out


def _contract(attrs, with_bias, a_blocks, b_blocks, bias=None):
    """One output block: the dynshape matmuls of the paired K blocks, accumulated."""
    if not isinstance(a_blocks, list):
        a_blocks, b_blocks = [a_blocks], [b_blocks]
    last = len(a_blocks) - 1
    acc = None
    for i, (ab, bb) in enumerate(zip(a_blocks, b_blocks)):
        kw = dict(attrs) if i == last else {}
        if i == last and with_bias:
            kw["bias"] = bias
        if acc is not None:
            kw["residual"] = acc
        acc = dynshape.run("matmul", ab, bb, **kw)
    return np.asarray(acc)
