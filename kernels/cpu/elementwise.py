"""CPU drivers of the elementwise families: unary (incl. copy) and binary with broadcasting.

One driver per (family, dtype). It receives the operands as flat buffers, the table's common
area and entries, and loops over ``entries x outer index`` with ``prange``: no Python runs per
tile. Each entry names a static kernel by id; the id decodes into (op code, tile slot), and
the slot fixes the tile shape (T0 rows x T1 columns). Full tiles run a branch-free row loop
(the op switch sits outside the element loop); tails follow the entry's tail mode.
"""
import numpy as np
from numba import njit, prange

from ..common_area import (C_IDBASE, C_OPBASE, C_M, C_N, C_NDOUTER, C_NOUTER, C_OPS, C_OSHAPE, E_ANCH0,
                           E_ANCH1, E_KID, E_MODE0, E_MODE1, E_OFF0, E_OFF1, OP_BLOCK, OP_OFF,
                           OP_OSTR, OP_SM, OP_SN)
from ..tail_mode import ANCHOR_END, DISCARD, VARIABLE_PARTIAL
from .scalar_ops import (ABS, ADD, CLIP, DIV, EXP, GELU, GELU_TANH, IDENTITY, LEAKY_RELU, LOG,
                         MAXIMUM, MINIMUM, MUL, NEG, RECIPROCAL, RELU, SIGMOID, SILU, SQRT, SUB, TANH,
                         binary_scalar, cast_like, float_unary, int_pow, relu, unary_scalar,
                         vmax, vmin)

# Tile shapes (rows, columns, partial window on columns) of the elementwise static kernels,
# by slot. Row tiles of three lengths and a square tile for transposed access.
ELEMENTWISE_TILES = ((1, 512, 32), (1, 4096, 64), (1, 16384, 64), (32, 32, 8))
N_SLOTS = len(ELEMENTWISE_TILES)
# Below this many elements the entries run on the calling thread: waking the thread pool
# costs more than it saves (about 10 us per parallel launch measured on this machine).
SERIAL_ELEMENTS = 1 << 15
(_T0_0, _T1_0, _W_0), (_T0_1, _T1_1, _W_1), (_T0_2, _T1_2, _W_2), (_T0_3, _T1_3, _W_3) = \
    ELEMENTWISE_TILES

@njit(cache=True)
def tile_geometry(slot):
    if slot == 0:
        return _T0_0, _T1_0, _W_0
    elif slot == 1:
        return _T0_1, _T1_1, _W_1
    elif slot == 2:
        return _T0_2, _T1_2, _W_2
    return _T0_3, _T1_3, _W_3


@njit(cache=True)
def resolve(off, anchor, size, t):
    """(offset, valid length) of an entry in one dimension; valid 0 means do nothing."""
    o = size - off if anchor == ANCHOR_END else off
    if o < 0 or o >= size:
        return 0, 0
    v = size - o
    return o, (v if v < t else t)


@njit(cache=True)
def outer_offset(common, op, oi):
    """Element offset of outer (batch) index ``oi`` for operand ``op``."""
    base = C_OPS + op * OP_BLOCK
    off = common[base + OP_OFF]
    nd = common[C_NDOUTER]
    for k in range(nd - 1, -1, -1):
        s = common[C_OSHAPE + k]
        off += (oi % s) * common[base + OP_OSTR + k]
        oi //= s
    return off


@njit(cache=True)
def _map_contig(code, xv, ov, n, a0, a1):
    # the switch is outside the element loops, so each loop vectorizes
    if code == RELU:
        for i in range(n):
            ov[i] = relu(xv[i])
    elif code == ABS:
        for i in range(n):
            ov[i] = abs(xv[i])
    elif code == NEG:
        for i in range(n):
            ov[i] = -xv[i]
    elif code == IDENTITY:
        for i in range(n):
            ov[i] = xv[i]
    elif code == LEAKY_RELU:
        for i in range(n):
            v = xv[i]
            ov[i] = v if v >= 0 else v * a0
    elif code == CLIP:
        for i in range(n):
            ov[i] = vmin(vmax(xv[i], a0), a1)
    elif code == EXP:
        for i in range(n):
            ov[i] = float_unary(EXP, xv[i])
    elif code == LOG:
        for i in range(n):
            ov[i] = float_unary(LOG, xv[i])
    elif code == SQRT:
        for i in range(n):
            ov[i] = float_unary(SQRT, xv[i])
    elif code == RECIPROCAL:
        for i in range(n):
            ov[i] = float_unary(RECIPROCAL, xv[i])
    elif code == SIGMOID:
        for i in range(n):
            ov[i] = float_unary(SIGMOID, xv[i])
    elif code == TANH:
        for i in range(n):
            ov[i] = float_unary(TANH, xv[i])
    elif code == GELU:
        for i in range(n):
            ov[i] = float_unary(GELU, xv[i])
    elif code == GELU_TANH:
        for i in range(n):
            ov[i] = float_unary(GELU_TANH, xv[i])
    else:
        for i in range(n):
            ov[i] = float_unary(SILU, xv[i])


@njit(cache=True)
def _unary_row(code, x, xb, xs, o, ob, os, n, a0, a1):
    if xs == 1 and os == 1:
        _map_contig(code, x[xb:xb + n], o[ob:ob + n], n, a0, a1)
    else:
        for i in range(n):
            o[ob + i * os] = unary_scalar(code, x[xb + i * xs], a0, a1)


@njit(cache=True)
def _unary_rows(code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, mode1, t1, w1, a0, a1):
    """Valid rows of a tile; a VARIABLE_PARTIAL column tail runs T1-w fixed + a short rest."""
    split = t1 - w1 if (mode1 == VARIABLE_PARTIAL and v1 >= t1 - w1) else 0
    for r in range(v0):
        xr = xb + r * xsm
        orow = ob + r * osm
        if split > 0:
            _unary_row(code, x, xr, xsn, o, orow, osn, split, a0, a1)
            _unary_row(code, x, xr + split * xsn, xsn, o, orow + split * osn, osn,
                       v1 - split, a0, a1)
        else:
            _unary_row(code, x, xr, xsn, o, orow, osn, v1, a0, a1)


@njit(cache=True)
def _unary_discard(code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, t0, t1, a0, a1):
    """DISCARD tail: the full tile is computed on a zero-padded scratch copy."""
    scratch = np.zeros(t0 * t1, dtype=o.dtype)
    for r in range(v0):
        for c in range(v1):
            scratch[r * t1 + c] = cast_like(o, x[xb + r * xsm + c * xsn])
    _map_contig(code, scratch, scratch, t0 * t1, a0, a1)
    for r in range(v0):
        for c in range(v1):
            o[ob + r * osm + c * osn] = scratch[r * t1 + c]


@njit(cache=True)
def _unary_entry(x, o, common, entries, e, oi, a0, a1):
    """One kernel call: entry ``e`` at outer index ``oi``."""
    local = entries[e, E_KID] - common[C_IDBASE]
    code = common[C_OPBASE] + local // N_SLOTS
    t0, t1, w1 = tile_geometry(local % N_SLOTS)
    r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)
    r1, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)
    if v0 == 0 or v1 == 0:
        return
    xblk = C_OPS + OP_BLOCK
    xsm = common[xblk + OP_SM]
    xsn = common[xblk + OP_SN]
    osm = common[C_OPS + OP_SM]
    osn = common[C_OPS + OP_SN]
    xb = outer_offset(common, 1, oi) + r0 * xsm + r1 * xsn
    ob = outer_offset(common, 0, oi) + r0 * osm + r1 * osn
    discard = entries[e, E_MODE0] == DISCARD or entries[e, E_MODE1] == DISCARD
    if discard and (v0 < t0 or v1 < t1):
        _unary_discard(code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, t0, t1, a0, a1)
    else:
        _unary_rows(code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, entries[e, E_MODE1],
                    t1, w1, a0, a1)


def unary_driver(x, o, common, entries, attrs):
    """out = op(x) over every entry x outer index; ``attrs`` holds the op's two attributes
    in the operand dtype (leaky_relu alpha; clip bounds)."""
    n_entries = entries.shape[0]
    total = n_entries * common[C_NOUTER]
    a0 = attrs[0]
    a1 = attrs[1]
    if common[C_M] * common[C_N] * common[C_NOUTER] < SERIAL_ELEMENTS:
        for idx in range(total):
            _unary_entry(x, o, common, entries, idx % n_entries, idx // n_entries, a0, a1)
    else:
        for idx in prange(total):
            _unary_entry(x, o, common, entries, idx % n_entries, idx // n_entries, a0, a1)


@njit(cache=True)
def _zip_contig(code, av, bv, ov, n):
    if code == ADD:
        for i in range(n):
            ov[i] = av[i] + bv[i]
    elif code == SUB:
        for i in range(n):
            ov[i] = av[i] - bv[i]
    elif code == MUL:
        for i in range(n):
            ov[i] = av[i] * bv[i]
    elif code == DIV:
        for i in range(n):
            ov[i] = av[i] / bv[i]
    elif code == MAXIMUM:
        for i in range(n):
            ov[i] = vmax(av[i], bv[i])
    elif code == MINIMUM:
        for i in range(n):
            ov[i] = vmin(av[i], bv[i])
    else:
        for i in range(n):
            ov[i] = int_pow(av[i], bv[i])


@njit(cache=True)
def _zip_scalar_b(code, av, b, ov, n):
    if code == ADD:
        for i in range(n):
            ov[i] = av[i] + b
    elif code == SUB:
        for i in range(n):
            ov[i] = av[i] - b
    elif code == MUL:
        for i in range(n):
            ov[i] = av[i] * b
    elif code == DIV:
        for i in range(n):
            ov[i] = av[i] / b
    else:
        for i in range(n):
            ov[i] = binary_scalar(code, av[i], b)


@njit(cache=True)
def _zip_scalar_a(code, a, bv, ov, n):
    if code == ADD:
        for i in range(n):
            ov[i] = a + bv[i]
    elif code == SUB:
        for i in range(n):
            ov[i] = a - bv[i]
    elif code == MUL:
        for i in range(n):
            ov[i] = a * bv[i]
    elif code == DIV:
        for i in range(n):
            ov[i] = a / bv[i]
    else:
        for i in range(n):
            ov[i] = binary_scalar(code, a, bv[i])


@njit(cache=True)
def _binary_row(code, a, ab, asn, b, bb, bsn, o, ob, osn, n):
    if osn == 1 and asn == 1 and bsn == 1:
        _zip_contig(code, a[ab:ab + n], b[bb:bb + n], o[ob:ob + n], n)
    elif osn == 1 and asn == 1 and bsn == 0:
        _zip_scalar_b(code, a[ab:ab + n], b[bb], o[ob:ob + n], n)
    elif osn == 1 and asn == 0 and bsn == 1:
        _zip_scalar_a(code, a[ab], b[bb:bb + n], o[ob:ob + n], n)
    else:
        for i in range(n):
            o[ob + i * osn] = binary_scalar(code, a[ab + i * asn], b[bb + i * bsn])


@njit(cache=True)
def _binary_discard(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, osn, v0, v1, t0, t1):
    sa = np.zeros(t0 * t1, dtype=o.dtype)
    sb = np.ones(t0 * t1, dtype=o.dtype)
    for r in range(v0):
        for c in range(v1):
            sa[r * t1 + c] = a[ab + r * asm + c * asn]
            sb[r * t1 + c] = b[bb + r * bsm + c * bsn]
    _zip_contig(code, sa, sb, sa, t0 * t1)
    for r in range(v0):
        for c in range(v1):
            o[ob + r * osm + c * osn] = sa[r * t1 + c]


@njit(cache=True)
def _binary_entry(a, b, o, common, entries, e, oi):
    local = entries[e, E_KID] - common[C_IDBASE]
    code = common[C_OPBASE] + local // N_SLOTS
    t0, t1, w1 = tile_geometry(local % N_SLOTS)
    r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)
    r1, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)
    if v0 == 0 or v1 == 0:
        return
    ablk = C_OPS + OP_BLOCK
    bblk = C_OPS + 2 * OP_BLOCK
    asm = common[ablk + OP_SM]
    asn = common[ablk + OP_SN]
    bsm = common[bblk + OP_SM]
    bsn = common[bblk + OP_SN]
    osm = common[C_OPS + OP_SM]
    osn = common[C_OPS + OP_SN]
    ab = outer_offset(common, 1, oi) + r0 * asm + r1 * asn
    bb = outer_offset(common, 2, oi) + r0 * bsm + r1 * bsn
    ob = outer_offset(common, 0, oi) + r0 * osm + r1 * osn
    discard = entries[e, E_MODE0] == DISCARD or entries[e, E_MODE1] == DISCARD
    if discard and (v0 < t0 or v1 < t1):
        _binary_discard(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, osn, v0, v1, t0, t1)
        return
    mode1 = entries[e, E_MODE1]
    split = t1 - w1 if (mode1 == VARIABLE_PARTIAL and v1 >= t1 - w1) else 0
    for r in range(v0):
        ar = ab + r * asm
        br = bb + r * bsm
        orow = ob + r * osm
        if split > 0:
            _binary_row(code, a, ar, asn, b, br, bsn, o, orow, osn, split)
            _binary_row(code, a, ar + split * asn, asn, b, br + split * bsn, bsn,
                        o, orow + split * osn, osn, v1 - split)
        else:
            _binary_row(code, a, ar, asn, b, br, bsn, o, orow, osn, v1)


def binary_driver(a, b, o, common, entries):
    """out = op(a, b) with broadcasting expressed as zero strides in the common area."""
    n_entries = entries.shape[0]
    total = n_entries * common[C_NOUTER]
    if common[C_M] * common[C_N] * common[C_NOUTER] < SERIAL_ELEMENTS:
        for idx in range(total):
            _binary_entry(a, b, o, common, entries, idx % n_entries, idx // n_entries)
    else:
        for idx in prange(total):
            _binary_entry(a, b, o, common, entries, idx % n_entries, idx // n_entries)
