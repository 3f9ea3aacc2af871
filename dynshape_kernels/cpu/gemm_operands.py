"""How the GEMM tiles reach their operands: the micro-kernel instances of the slots (shared
with conv2d), each dtype's slot table, and the choice between reading an operand in place (a
row-contiguous B panel, the dot and A-rows slots' k-contiguous A rows, both operands of the
in-place slot's tiles) and packing it. Half-precision operands are always packed: packing widens
them to float32 for the float32 micro-kernels, which never see a carrier."""
import numpy as np
from numba import types
from numba.extending import overload

from ..abi.tiles import (MATMUL_A_ROWS_SLOT as A_ROWS_SLOT, MATMUL_DOT_TAIL,
                         MATMUL_DOT_TAIL_MIN_K, MATMUL_INPLACE_SLOT as INPLACE_SLOT,
                         MATMUL_SLOTS_F32 as SLOTS_F32, MATMUL_SLOTS_F64 as SLOTS_F64)
from .callee import callee
from .gemm_inplace import make_inplace_ukernel
from .gemm_pack import _pack_rows
from .gemm_ukernel import load_at, make_dot_ukernel, make_ukernel, store_at
from .half import is_half

_uk0 = make_ukernel((6, 4), (6, 4))
_uk1 = make_ukernel((6, 3), (6, 3))
_uk2 = make_ukernel((24, 1), (24, 1))
_uk3 = make_ukernel((8, 3), (8, 3), pf_dist=24)  # B read in place: prefetch
_ukd4 = make_dot_ukernel(3, 8)
# the in-place slot's kernels: its MR rows, 1, 2 or 3 vectors (a narrow tile computes only
# the vectors its columns reach); both dtypes have MR = 6 and NR = 3 vectors there
_IN_MR = SLOTS_F32[INPLACE_SLOT][0]
assert (SLOTS_F64[INPLACE_SLOT][0] == _IN_MR and SLOTS_F32[INPLACE_SLOT][1] == 3 * 16
        and SLOTS_F64[INPLACE_SLOT][1] == 3 * 8)
# B's rows are read where they lie, and a batch of small products streams them from L3 or
# memory (256 x (17x64 @ 64x33) float32 reads 3.7 MB per call): each step prefetches the row
# IN_PF_DIST steps on. Measured, float32, 2 threads, the same op called back to back, six
# alternating rounds, median us, without / with: 256 x (17x64 @ 64x33) 133.7-149.1 /
# 128.2-134.3, 256 x (18x64 @ 64x48) 189.6-199.3 / 173.1-183.1; 48x256 @ 256x192 and
# batches in cache (16 x (17x64 @ 64x33), 64 x (24x56 @ 56x40)) within the noise; in
# bench_matmul (the peers' blocks in between) the batched row within the noise too
IN_PF_DIST = 16
_uki1 = make_inplace_ukernel(_IN_MR, 1, pf_dist=IN_PF_DIST)
_uki2 = make_inplace_ukernel(_IN_MR, 2, pf_dist=IN_PF_DIST)
_uki3 = make_inplace_ukernel(_IN_MR, 3, pf_dist=IN_PF_DIST)
# ... and for panels of whole vectors: no lane masks (17 x 64 @ 64 x 32 float32 in cache,
# one thread: 0.47 -> 0.44 us)
_ukf1 = make_inplace_ukernel(_IN_MR, 1, full=True, pf_dist=IN_PF_DIST)
_ukf2 = make_inplace_ukernel(_IN_MR, 2, full=True, pf_dist=IN_PF_DIST)
_ukf3 = make_inplace_ukernel(_IN_MR, 3, full=True, pf_dist=IN_PF_DIST)
# the A-rows slot's kernel: its MR x NR micro-tile with A read from its rows, B packed
assert SLOTS_F32[A_ROWS_SLOT][:2] == (6, 4 * 16) and SLOTS_F64[A_ROWS_SLOT][:2] == (6, 4 * 8)
_uka0 = make_inplace_ukernel(6, 4, full=True)


def _slot_cfg_stub(arr):
    raise NotImplementedError


@overload(_slot_cfg_stub)
def _slot_cfg_ovl(arr):
    cfg = SLOTS_F64 if arr.dtype == types.float64 else SLOTS_F32

    def impl(arr):
        return cfg
    return impl


@callee(cache=True)
def _call_uk(slot, kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc):
    if slot == 0:
        _uk0(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)
    elif slot == 1:
        _uk1(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)
    elif slot == 2:
        _uk2(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)
    else:
        _uk3(kc, pa, pa_off, pb, pb_off, ldb, cb, cb_off, ldc, acc)


def holds_half(arr):
    """Whether ``arr`` holds a half-precision format (its carrier): a compile-time constant."""


@overload(holds_half)
def _holds_half(arr):
    h = is_half(arr.dtype)
    return lambda arr: h


def _direct_b_panels(slot, kc, ws_a, b_buf, db0, nfull, NR, b_rs, ws_c, ldc, acc):
    """The nfull whole NR-panels of a row-contiguous B read in place by the micro-kernel
    (never for a half-precision B, which is widened by packing: ``nfull`` is 0 then)."""


@overload(_direct_b_panels)
def _direct_b_panels_impl(slot, kc, ws_a, b_buf, db0, nfull, NR, b_rs, ws_c, ldc, acc):
    if is_half(b_buf.dtype):
        return lambda slot, kc, ws_a, b_buf, db0, nfull, NR, b_rs, ws_c, ldc, acc: None

    def impl(slot, kc, ws_a, b_buf, db0, nfull, NR, b_rs, ws_c, ldc, acc):
        for jr in range(nfull):
            _call_uk(slot, kc, ws_a, np.int64(0), b_buf, db0 + jr * NR, b_rs, ws_c, jr * NR,
                     ldc, acc)
    return impl


def _dot_a_rows(a_buf, off, a_rs, a_cs, pc, rows, kc, MR, ws_a):
    """(buffer, offset, row stride) of the dot slot's A rows: read in place when they are
    k-contiguous and whole (and not half precision), else packed row-major into ws_a."""


@overload(_dot_a_rows)
def _dot_a_rows_impl(a_buf, off, a_rs, a_cs, pc, rows, kc, MR, ws_a):
    if is_half(a_buf.dtype):
        def packed(a_buf, off, a_rs, a_cs, pc, rows, kc, MR, ws_a):
            _pack_rows(a_buf, off + pc * a_cs, a_rs, a_cs, rows, kc, MR, ws_a)
            return ws_a, 0, kc
        return packed

    def impl(a_buf, off, a_rs, a_cs, pc, rows, kc, MR, ws_a):
        if a_cs == 1 and rows == MR:
            return a_buf, off + pc, a_rs
        _pack_rows(a_buf, off + pc * a_cs, a_rs, a_cs, rows, kc, MR, ws_a)
        return ws_a, 0, kc
    return impl


#: an in-place tile's last columns past its whole vectors, when there are at most DOT_TAIL,
#: are dot products of A's rows with B's columns (:func:`_dot_cols`) instead of one more masked
#: vector, when the K block is at least DOT_MIN_VECTORS vectors long (a dot of a short row is
#: mostly its horizontal sum). A 17 x 33 float32 tile took 3 panels x 3 vectors of FMAs per k,
#: 65% of them useful; as 2 vectors and one column of dots it issues about a quarter fewer:
#: 256 x (17 x 64 @ 64 x 33), 2 threads, 143-145 -> 123-128 us (float64 247-260 -> 214-216).
DOT_TAIL, DOT_MIN_VECTORS = MATMUL_DOT_TAIL, MATMUL_DOT_TAIL_MIN_K


def _inplace_tile(kc, a_buf, a0, a_rs, a_cs, mv, b_buf, b0, b_rs, nv, cb, c0, ldc, acc, ws):
    """The in-place slot's mv x nv tile over one K block: ``A[i, k] = a_buf[a0 + i*a_rs +
    k*a_cs]`` and ``B[k, j] = b_buf[b0 + k*b_rs + j]`` (B row-contiguous) read where they lie
    by the in-place micro-kernels, the result in ``cb[c0 + i*ldc + j]`` (added when ``acc``):
    an accumulator tile or the output itself, of which nothing else is touched. With a
    k-contiguous A, a panel's last 1 .. DOT_TAIL columns past its whole vectors are dot
    products (:func:`_dot_cols`, B's columns gathered into ``ws``, the thread's scratch of at
    least ``DOT_TAIL * kc`` elements). Never called for half-precision operands (the caller
    packs them): a no-op for those, so that the driver types for every format."""


@overload(_inplace_tile)
def _inplace_tile_impl(kc, a_buf, a0, a_rs, a_cs, mv, b_buf, b0, b_rs, nv, cb, c0, ldc, acc,
                       ws):
    if is_half(a_buf.dtype) or is_half(b_buf.dtype):
        return (lambda kc, a_buf, a0, a_rs, a_cs, mv, b_buf, b0, b_rs, nv, cb, c0, ldc, acc, ws:
                None)
    W = 512 // cb.dtype.bitwidth  # lanes of a 512-bit vector
    MR, NR = _IN_MR, 3 * W
    min_k = DOT_MIN_VECTORS * W

    def impl(kc, a_buf, a0, a_rs, a_cs, mv, b_buf, b0, b_rs, nv, cb, c0, ldc, acc, ws):
        mpan = (mv + MR - 1) // MR
        npan = (nv + NR - 1) // NR
        for jr in range(npan):
            ncols = min(NR, nv - jr * NR)
            bo = b0 + jr * NR
            dots = ncols % W
            if dots > DOT_TAIL or a_cs != 1 or kc < min_k:
                dots = 0
            vcols = ncols - dots
            for ir in range(mpan if vcols > 0 else 0):
                rows = min(MR, mv - ir * MR)
                ao = a0 + ir * MR * a_rs
                co = c0 + ir * MR * ldc + jr * NR
                if vcols == 3 * W:
                    _ukf3(kc, a_buf, ao, a_rs, a_cs, rows, b_buf, bo, b_rs, vcols, cb, co,
                          ldc, acc)
                elif vcols > 2 * W:
                    _uki3(kc, a_buf, ao, a_rs, a_cs, rows, b_buf, bo, b_rs, vcols, cb, co,
                          ldc, acc)
                elif vcols == 2 * W:
                    _ukf2(kc, a_buf, ao, a_rs, a_cs, rows, b_buf, bo, b_rs, vcols, cb, co,
                          ldc, acc)
                elif vcols > W:
                    _uki2(kc, a_buf, ao, a_rs, a_cs, rows, b_buf, bo, b_rs, vcols, cb, co,
                          ldc, acc)
                elif vcols == W:
                    _ukf1(kc, a_buf, ao, a_rs, a_cs, rows, b_buf, bo, b_rs, vcols, cb, co,
                          ldc, acc)
                else:
                    _uki1(kc, a_buf, ao, a_rs, a_cs, rows, b_buf, bo, b_rs, vcols, cb, co,
                          ldc, acc)
            if dots > 0:
                _dot_cols(kc, a_buf, a0, a_rs, mv, b_buf, bo + vcols, b_rs, dots, cb,
                          c0 + jr * NR + vcols, ldc, acc, ws)
    return impl


def _dot(x, xo, y, yo, n):
    """``sum x[xo + k] * y[yo + k]`` over k < n in x's dtype, re-associated: LLVM keeps
    vector partial sums and adds them up at the end (error at most about ``n * eps *
    sum |x y|``, the bound the micro-kernels' sums have)."""


@overload(_dot, jit_options={"fastmath": {"reassoc", "contract"}, "_nrt": False})
def _dot_impl(x, xo, y, yo, n):
    zero = np.dtype(str(x.dtype)).type(0)

    def impl(x, xo, y, yo, n):
        s = zero
        for k in range(n):
            s += load_at(x, xo + k) * load_at(y, yo + k)
        return s
    return impl


@callee(cache=True, _nrt=False)
def _dot_cols(kc, a_buf, a0, a_rs, mv, b_buf, b0, b_rs, ncols, cb, c0, ldc, acc, ws):
    """``cb[c0 + i*ldc + j]`` receives ``sum_k A[i, k] B[k, j]`` (added when ``acc``) for
    i < mv, j < ncols, with ``A[i, k] = a_buf[a0 + i*a_rs + k]`` (k-contiguous rows) and
    ``B[k, j] = b_buf[b0 + k*b_rs + j]``: B's columns are gathered into ``ws`` (``ncols *
    kc`` elements), then every A row is dotted with each. Compiled without reference
    counting (``_nrt=False``): both threads read the same A and B."""
    # (gemm_pack._pack_bt's transposed copy, written out: called once per tile it made
    # 256 x (17x64 @ 64x33) 1% slower, 124-125 -> 125-130 us)
    for j in range(ncols):
        for k in range(kc):
            store_at(ws, j * kc + k, load_at(b_buf, b0 + k * b_rs + j))
    for i in range(mv):
        for j in range(ncols):
            s = _dot(a_buf, a0 + i * a_rs, ws, j * kc, kc)
            at = c0 + i * ldc + j
            if acc:
                s += load_at(cb, at)
            store_at(cb, at, s)


def _a_rows_panel(kc, a_buf, ao, a_rs, rows, pb, pbo, NR, cb, co, ldc, acc):
    """One micro-tile of the A-rows slot: ``A[r, k] = a_buf[ao + r*a_rs + k]`` for r < rows
    (k-contiguous rows, read where they lie), B the packed panel at ``pb[pbo:]`` (row stride
    NR, whole), the MR x NR result in ``cb[co + r*ldc + j]`` (rows < rows; added when
    ``acc``). Packing A cost 8.8% of a 1024^3 product: a transposition of 6 rows, element by
    element, repeated for every tile of a row of tiles. Never called for a half-precision A
    (packing widens it): a no-op for those."""


# inlined into the tile (a call per micro-tile cost 8% of a 1024^3 float32 product); its
# kernel has no lane masks, which inlined would have spilled accumulators
@overload(_a_rows_panel, inline="always")
def _a_rows_panel_impl(kc, a_buf, ao, a_rs, rows, pb, pbo, NR, cb, co, ldc, acc):
    if is_half(a_buf.dtype):
        return lambda kc, a_buf, ao, a_rs, rows, pb, pbo, NR, cb, co, ldc, acc: None

    def impl(kc, a_buf, ao, a_rs, rows, pb, pbo, NR, cb, co, ldc, acc):
        _uka0(kc, a_buf, ao, a_rs, 1, rows, pb, pbo, NR, NR, cb, co, ldc, acc)
    return impl
