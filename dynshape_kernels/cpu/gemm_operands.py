"""How the GEMM tiles reach their operands: the micro-kernel instances of the slots (shared
with conv2d), each dtype's slot table, and the choice between reading an operand in place (a
row-contiguous B panel, the dot and A-rows slots' k-contiguous A rows, both operands of the
in-place slot's tiles) and packing it. Half-precision operands are always packed: packing widens them
to float32 for the float32 micro-kernels, which never see a carrier."""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ..abi.tiles import (MATMUL_A_ROWS_SLOT as A_ROWS_SLOT, MATMUL_INPLACE_SLOT as INPLACE_SLOT,
                         MATMUL_SLOTS_F32 as SLOTS_F32, MATMUL_SLOTS_F64 as SLOTS_F64)
from .gemm_inplace import make_inplace_ukernel
from .gemm_pack import _pack_rows
from .gemm_ukernel import make_dot_ukernel, make_ukernel
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
_uki1 = make_inplace_ukernel(_IN_MR, 1)
_uki2 = make_inplace_ukernel(_IN_MR, 2)
_uki3 = make_inplace_ukernel(_IN_MR, 3)
# the A-rows slot's kernel: its MR x NR micro-tile with A read from its rows, B packed
assert SLOTS_F32[A_ROWS_SLOT][:2] == (6, 4 * 16) and SLOTS_F64[A_ROWS_SLOT][:2] == (6, 4 * 8)
_uka0 = make_inplace_ukernel(6, 4)


def _slot_cfg_stub(arr):
    raise NotImplementedError


@overload(_slot_cfg_stub)
def _slot_cfg_ovl(arr):
    cfg = SLOTS_F64 if arr.dtype == types.float64 else SLOTS_F32

    def impl(arr):
        return cfg
    return impl


@njit(cache=True)
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


def _inplace_tile(kc, a_buf, a0, a_rs, a_cs, mv, b_buf, b0, b_rs, nv, cb, c0, ldc, acc):
    """The in-place slot's mv x nv tile over one K block: ``A[i, k] = a_buf[a0 + i*a_rs +
    k*a_cs]`` and ``B[k, j] = b_buf[b0 + k*b_rs + j]`` (B row-contiguous) read where they lie
    by the in-place micro-kernels, the result in ``cb[c0 + i*ldc + j]`` (added when ``acc``):
    an accumulator tile or the output itself, of which nothing else is touched. Never called
    for half-precision operands (the caller packs them): a no-op for those, so that the
    driver types for every format."""


@overload(_inplace_tile)
def _inplace_tile_impl(kc, a_buf, a0, a_rs, a_cs, mv, b_buf, b0, b_rs, nv, cb, c0, ldc, acc):
    if is_half(a_buf.dtype) or is_half(b_buf.dtype):
        return lambda kc, a_buf, a0, a_rs, a_cs, mv, b_buf, b0, b_rs, nv, cb, c0, ldc, acc: None
    W = 512 // cb.dtype.bitwidth  # lanes of a 512-bit vector
    MR, NR = _IN_MR, 3 * W

    def impl(kc, a_buf, a0, a_rs, a_cs, mv, b_buf, b0, b_rs, nv, cb, c0, ldc, acc):
        mpan = (mv + MR - 1) // MR
        npan = (nv + NR - 1) // NR
        for jr in range(npan):
            ncols = min(NR, nv - jr * NR)
            bo = b0 + jr * NR
            for ir in range(mpan):
                rows = min(MR, mv - ir * MR)
                ao = a0 + ir * MR * a_rs
                co = c0 + ir * MR * ldc + jr * NR
                if ncols > 2 * W:
                    _uki3(kc, a_buf, ao, a_rs, a_cs, rows, b_buf, bo, b_rs, ncols, cb, co,
                          ldc, acc)
                elif ncols > W:
                    _uki2(kc, a_buf, ao, a_rs, a_cs, rows, b_buf, bo, b_rs, ncols, cb, co,
                          ldc, acc)
                else:
                    _uki1(kc, a_buf, ao, a_rs, a_cs, rows, b_buf, bo, b_rs, ncols, cb, co,
                          ldc, acc)
    return impl



def _a_rows_panel(kc, a_buf, ao, a_rs, rows, pb, pbo, NR, cb, co, ldc, acc):
    """One micro-tile of the A-rows slot: ``A[r, k] = a_buf[ao + r*a_rs + k]`` for r < rows
    (k-contiguous rows, read where they lie), B the packed panel at ``pb[pbo:]`` (row stride
    NR, whole), the MR x NR result in ``cb[co + r*ldc + j]`` (rows < rows; added when
    ``acc``). Packing A cost 8.8% of a 1024^3 product: a transposition of 6 rows, element by
    element, repeated for every tile of a row of tiles. Never called for a half-precision A
    (packing widens it): a no-op for those."""


@overload(_a_rows_panel)
def _a_rows_panel_impl(kc, a_buf, ao, a_rs, rows, pb, pbo, NR, cb, co, ldc, acc):
    if is_half(a_buf.dtype):
        return lambda kc, a_buf, ao, a_rs, rows, pb, pbo, NR, cb, co, ldc, acc: None

    def impl(kc, a_buf, ao, a_rs, rows, pb, pbo, NR, cb, co, ldc, acc):
        _uka0(kc, a_buf, ao, a_rs, 1, rows, pb, pbo, NR, NR, cb, co, ldc, acc)
    return impl
