"""Calling the matmul driver directly with a chosen micro-kernel slot and tile size (kernel
tests and kernel-level benchmarks: every slot on any shape). Not the run path: use
``dynshape.run("matmul")``."""
import functools

import numba
import numpy as np
from dynshape_kernels.abi.step_program import MAX_SIDES, empty_program
from dynshape_kernels.abi.tiles import matmul_slots as _slots_for

from dynshape.planning.matmul_tiles import _balanced, choose_slot, make_gemm_table


def _elem_strides(x):
    it = x.itemsize
    return [s // it for s in x.strides]


class _BufView:
    """Minimal ``__array_interface__`` holder (keeps ``owner`` alive)."""
    __slots__ = ("__array_interface__", "owner")


def _base_and_offset(x):
    """Flat 1-D C-contiguous view of the memory spanned by ``x`` plus the
    element offset of ``x[0, ..., 0]`` in it (works for transposed, sliced
    and negative-stride views; nothing is copied)."""
    if x.size == 0:
        return np.zeros(1, x.dtype), 0
    if x.flags.c_contiguous and x.flags.writeable:
        return x.reshape(-1), 0
    # (read-only inputs, e.g. np.broadcast_to views, are also exposed through
    # a writeable-typed view so that the driver has one Numba signature per
    # dtype; the kernels never write to A, B, C_in or bias)
    st = _elem_strides(x)
    lo = sum(min(0, (d - 1) * s) for d, s in zip(x.shape, st))
    hi = sum(max(0, (d - 1) * s) for d, s in zip(x.shape, st))
    h = _BufView()
    h.__array_interface__ = {
        "data": (x.__array_interface__["data"][0] + lo * x.itemsize, False),
        "shape": (hi - lo + 1,), "typestr": x.dtype.str, "version": 3}
    h.owner = x
    return np.asarray(h), -lo


@functools.lru_cache(maxsize=256)
def _plan(M, N, K, dtchar, a_k_contiguous, nthreads, nb, slot, tile):
    """Cached (slot choice + tile table) for gemm(); the table is never
    modified by the driver."""
    dt = np.dtype(dtchar)
    if slot is None:
        slot, tm, tn = choose_slot(M, N, K, dt, a_k_contiguous, nthreads, nb)
    else:
        cfgs = _slots_for(dt)[slot]
        tm, tn = _balanced(M, cfgs[2], cfgs[0]), _balanced(N, cfgs[3], cfgs[1])
    if tile is not None:
        tm, tn = tile
    return make_gemm_table(M, N, tm, tn, slot, nb, dt)


def gemm(a, b, out=None, alpha=1.0, beta=0.0, c=None, bias=None, act=None,
         slot=None, tile=None):
    """``out = act(alpha * a @ b + beta * c + bias)`` with our kernels.

    a: (M, K) or (batch, M, K); b: (K, N) or (batch, K, N); any strides
    (views are read in place).  c: broadcastable to the output (only read
    if beta != 0); bias: (N,); act: None or 'relu'.  dtype float32/float64
    (a's dtype; b, c, bias must match).  ``slot``/``tile`` override the
    heuristic (``tile=(tile_m, tile_n)``).  Batched inputs use the batch
    column of the tile table (one driver call for all batches).
    """
    a = np.asarray(a)
    b = np.asarray(b)
    dt = a.dtype
    if dt not in (np.float32, np.float64) or b.dtype != dt:
        raise TypeError("gemm: a and b must both be float32 or float64")
    batched = a.ndim == 3 or b.ndim == 3
    a3 = a if a.ndim == 3 else a[None]
    b3 = b if b.ndim == 3 else b[None]
    nb = max(a3.shape[0], b3.shape[0])
    if a3.shape[0] not in (1, nb) or b3.shape[0] not in (1, nb):
        raise ValueError("gemm: batch mismatch")
    M, K = a3.shape[1:]
    K2, N = b3.shape[1:]
    if K != K2:
        raise ValueError("gemm: inner dimensions differ")
    oshape = (nb, M, N) if batched else (M, N)
    if out is None:
        out = np.empty(oshape, dt)
    if out.shape != oshape or out.dtype != dt:
        raise ValueError("gemm: bad out")
    if M == 0 or N == 0 or nb == 0:
        return out
    if np.may_share_memory(out, a) or np.may_share_memory(out, b) or (
            bias is not None and np.may_share_memory(out, bias)):
        # the driver requires C not to overlap its inputs (C_in may be out)
        res = gemm(a, b, None, alpha, beta, c, bias, act, slot, tile)
        out[...] = res
        return out
    o3 = out if batched else out[None]
    nthreads = numba.get_num_threads()
    table = _plan(M, N, K, dt.char, a3.strides[2] == a3.itemsize, nthreads, nb,
                  slot, None if tile is None else tuple(tile))

    def ops(x3):
        buf, off = _base_and_offset(x3)
        bs, rs, cs = _elem_strides(x3)
        if x3.shape[0] == 1:
            bs = 0
        return buf, off, rs, cs, bs

    ab, ao, ars, acs, abs_ = ops(a3)
    bb, bo, brs, bcs, bbs = ops(b3)
    cb, co, crs, ccs, cbs = ops(o3)
    if beta != 0.0:
        cin = np.broadcast_to(np.asarray(c, dtype=dt), oshape)
        cin3 = cin if batched else cin[None]
        ib, io, irs, ics, ibs = ops(cin3)
    else:
        ib, io, irs, ics, ibs = np.zeros(1, dt), 0, 0, 0, 0
    if bias is not None:
        bias = np.broadcast_to(np.asarray(bias, dtype=dt), (N,))
        sb, so = _base_and_offset(bias)
        sst = _elem_strides(bias)[0]
        hb = 1
    else:
        sb, so, sst, hb = np.zeros(1, dt), 0, 0, 0
    actc = {None: 0, 'none': 0, 'relu': 1}[act]
    bi = np.arange(nb, dtype=np.int64)
    boffs = np.stack([ao + bi * abs_, bo + bi * bbs, co + bi * cbs, io + bi * ibs], axis=1)
    i = np.int64
    from dynshape_kernels import drivers
    drivers.get("matmul", dt.name)(
        table, i(M), i(N), i(K), boffs, ab, i(ars), i(acs), bb, i(brs), i(bcs),
        cb, i(crs), i(ccs), float(alpha), float(beta), ib, i(irs), i(ics),
        sb, i(so), i(sst), i(hb), i(actc), empty_program(), np.zeros(2, dt),
        (np.zeros(1, dt),) * MAX_SIDES, np.zeros((MAX_SIDES, 4), np.int64), i(nthreads))
    return out
