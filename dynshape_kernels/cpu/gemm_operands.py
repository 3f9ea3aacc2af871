"""How the GEMM tiles reach their operands: the micro-kernel instances of the slots (shared
with conv2d), each dtype's slot table, and the choice between reading an operand in place (a
row-contiguous B panel, the dot slot's k-contiguous A rows) and packing it. Half-precision
operands are always packed: packing widens them to float32 for the float32 micro-kernels,
which never see a carrier."""
from numba import njit, types
from numba.extending import overload

from ..abi.tiles import MATMUL_SLOTS_F32 as SLOTS_F32, MATMUL_SLOTS_F64 as SLOTS_F64
from .gemm_pack import _pack_rows
from .gemm_ukernel import make_dot_ukernel, make_ukernel
from .half import is_half

_uk0 = make_ukernel((6, 4), (6, 4))
_uk1 = make_ukernel((6, 3), (6, 3))
_uk2 = make_ukernel((24, 1), (24, 1))
_uk3 = make_ukernel((8, 3), (8, 3), pf_dist=24)  # B read in place: prefetch
_ukd4 = make_dot_ukernel(3, 8)


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
            _call_uk(slot, kc, ws_a, 0, b_buf, db0 + jr * NR, b_rs, ws_c, jr * NR, ldc, acc)
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
