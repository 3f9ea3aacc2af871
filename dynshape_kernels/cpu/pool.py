"""CPU driver of the pool family: max_pool2d and avg_pool2d (ONNX MaxPool / AveragePool, NCHW).

The entries tile the OUTPUT plane (OH x OW) of one (n, c) image; the outer dimensions (N, C,
coalesced when both operands allow) replicate them. Besides the usual columns, every entry
holds the input offsets of its tile, ``(ih0, iw0) = (r0 * sh - pad_top, c0 * sw - pad_left)``:
the top-left corner of the first window of the tile, negative when it starts in the padding.
Neighbouring tiles read overlapping input windows (halos); nothing is gathered into a padded
copy of the input, and the padding is never read from memory. Every output row of a tile runs
the same branch-free, vectorized path:

* the window rows that exist in the input (clipped once per row: the taps of a dilated
  window that fall in the padding are skipped) are reduced vertically into a per-tile buffer
  over the row's whole column span, contiguous loads along the width; buffer positions that
  stand for padding columns get the neutral element (``-inf`` for max, 0 for avg) instead of
  a read;
* ``kw`` shifted views of the buffer with the column stride are reduced horizontally (stride
  1 and 2 compiled with constant strides), one output per lane;
* avg divides by the taps counted: the taps inside the input, or with ``count_include_pad``
  the window clipped to the padded input ``[-pad_begin, n + pad_end)`` (ONNX and PyTorch:
  windows that run past the end padding under ceil_mode count less). Interior columns share
  one divisor; only the few edge columns compute their own.

A max window that sees only padding (possible with dilations) gives ``-inf``, as PyTorch.
Max propagates NaN (as PyTorch does); avg accumulates in the input's precision (as ONNX
Runtime does) and divides once per output. float16 / bfloat16 inputs (through their carriers,
``half.py``) are widened to float32 as they are loaded, pooled in float32 scratch rows and
rounded once to the format as each output row is stored (max is exact; avg is the float32
average correctly rounded, within 1 ulp of the format).

Tails: every kernel accepts any valid length 0..T in both dimensions (VARIABLE_FULL); the
table never uses OVERLAP or DISCARD tails.
"""
import numpy as np
from numba import prange, types
from numba.extending import overload

from ..abi.pool_table import (E_IH0, E_IW0, P_CIP, P_DH, P_DW, P_H, P_KH,  # noqa: F401
                              P_KW, P_PB, P_PR, P_SH, P_SW, P_W, POOL_BLOCK, POOL_BLOCK_START,
                              POOL_NCOL)
from ..abi.storage import carrier, compute
from ..catalog import CATALOG
from .address_link import Link
from ..abi.tiles import POOL_TILES
from ..abi.vocabulary import AVG_POOL, MAX_POOL, POOL_OPS  # noqa: F401
from .callee import callee

from ..abi.common_area import (C_IDBASE, C_M, C_N, C_NOUTER, C_OPBASE, C_OPS, E_ANCH0, E_ANCH1,
                           E_KID, E_OFF0, E_OFF1, OP_BLOCK, OP_SM, OP_SN)
from .elementwise import outer_offset, resolve
from .reduce_runs import N_CHUNKS, chunk_start, nan_max
from .half import compute_empty, is_half, load, store
from .scalar_ops import cast_like
from .tiles import make_tile_geometry
from .borrowed import borrowed, hold
from .workspace import LINE, round_up


# Tile shapes (output rows, output columns, partial window) by slot: about 512 outputs per
# kernel call, from narrow-and-tall (small images) to one wide row pair (wide images).
N_SLOTS = len(POOL_TILES)
MAX_T1 = max(t[1] for t in POOL_TILES)
_P = POOL_BLOCK_START

# Below this many window taps (outputs x kh x kw) a call runs on the calling thread: waking
# the thread pool costs more than it saves.
SERIAL_TAPS = 1 << 16

tile_geometry = make_tile_geometry(POOL_TILES)


# ---- window taps -----------------------------------------------------------------------------
@callee(cache=True)
def first_tap(start, d):
    """Smallest i >= 0 with start + i*d >= 0."""
    if start >= 0:
        return 0
    return -start if d == 1 else (d - 1 - start) // d


@callee(cache=True)
def tap_end(start, d, k, n):
    """One past the largest i < k with start + i*d < n (0 if none)."""
    if start >= n:
        return 0
    e = n - start if d == 1 else (n - 1 - start) // d + 1
    return e if e < k else k


@callee(cache=True)
def _count(start, k, n, pad_end, cip):
    """Taps of a dense window [start, start + k) counted by the divisor: those inside the
    input, or with count_include_pad those inside the padded input (start >= -pad_begin)."""
    if cip:
        return min(start + k, n + pad_end) - start
    return min(start + k, n) - max(start, 0)


# The passes over a row are written out in this one function on purpose: a helper called per
# row with array arguments pays NRT reference counting on every call (measured: 55 ns against
# 20 ns for a 3-row max over 115 columns). Up to three sources are reduced per pass, so the
# accumulator is stored once, not once per source.
@callee(cache=True)
def _pool_entry(x, o, common, entries, e, outer, buf, ev, od, obuf):
    """One kernel call: entry ``e`` (an output tile) at outer index ``outer``."""
    local = entries[e, E_KID] - common[C_IDBASE]
    code = common[C_OPBASE] + local // N_SLOTS
    t0, t1, _ = tile_geometry(local % N_SLOTS)
    r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)
    r1, n = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)
    if v0 == 0 or n == 0:
        return
    ismax = code == MAX_POOL
    kh = common[_P + P_KH]
    kw = common[_P + P_KW]
    sh = common[_P + P_SH]
    sw = common[_P + P_SW]
    dh = common[_P + P_DH]
    dw = common[_P + P_DW]
    H = common[_P + P_H]
    W = common[_P + P_W]
    pb = common[_P + P_PB]
    pr = common[_P + P_PR]
    cip = common[_P + P_CIP] != 0
    osm = common[C_OPS + OP_SM]
    osn = common[C_OPS + OP_SN]
    xsh = common[C_OPS + OP_BLOCK + OP_SM]
    xsw = common[C_OPS + OP_BLOCK + OP_SN]
    ob = outer_offset(common, np.int64(0), outer) + r0 * osm + r1 * osn
    xb = outer_offset(common, np.int64(1), outer)
    ih0 = entries[e, E_IH0]
    iw0 = entries[e, E_IW0]
    dkw = (kw - 1) * dw + 1
    # buf[t] is the vertical reduction of input column iw0 + t (t < span) over the window
    # rows of the current output row; columns outside [0, W) hold the neutral element
    span = (n - 1) * sw + dkw
    neutral = cast_like(x, -np.inf) if ismax else cast_like(x, 0.0)
    a0 = min(max(0, -iw0), span)
    a1 = max(min(span, W - iw0), a0)
    L = a1 - a0
    for t in range(a0):
        buf[t] = neutral
    for t in range(a1, span + 1):
        buf[t] = neutral
    b = buf[a0:a1]
    half = (span + 1) >> 1
    # tile columns whose windows lie inside the input horizontally: [jlo, jhi)
    jlo = min(first_tap(iw0, sw), n)
    jhi = max(tap_end(iw0 + dkw - 1, sw, n, W), jlo)
    kf = min(kw, 3)
    c1 = dw if kf > 1 else 0
    c2 = 2 * dw if kf > 2 else 0
    rs = dh * xsh
    for r in range(v0):
        h0 = ih0 + r * sh
        ia = first_tap(h0, dh)
        nr = max(tap_end(h0, dh, kh, H) - ia, 0)
        orow = ob + r * osm
        ov = row_view(o, orow, n, osn, obuf)     # contiguous rows in place
        p = xb + (h0 + ia * dh) * xsh + (iw0 + a0) * xsw
        # ---- vertical pass: b[i] = op over the nr window rows of column a0 + i
        if nr == 0:
            for i in range(L):
                b[i] = neutral
        elif xsw == 1:
            x0 = x[p:p + L]
            x1 = x[p + rs:p + rs + L] if nr > 1 else x0
            x2 = x[p + 2 * rs:p + 2 * rs + L] if nr > 2 else x0
            if ismax:
                if nr >= 3:
                    for i in range(L):
                        b[i] = nan_max(nan_max(load(x0[i]), load(x1[i])), load(x2[i]))
                elif nr == 2:
                    for i in range(L):
                        b[i] = nan_max(load(x0[i]), load(x1[i]))
                else:
                    for i in range(L):
                        b[i] = load(x0[i])
                for k in range(3, nr):
                    xk = x[p + k * rs:p + k * rs + L]
                    for i in range(L):
                        b[i] = nan_max(b[i], load(xk[i]))
            else:
                if nr >= 3:
                    for i in range(L):
                        b[i] = load(x0[i]) + load(x1[i]) + load(x2[i])
                elif nr == 2:
                    for i in range(L):
                        b[i] = load(x0[i]) + load(x1[i])
                else:
                    for i in range(L):
                        b[i] = load(x0[i])
                for k in range(3, nr):
                    xk = x[p + k * rs:p + k * rs + L]
                    for i in range(L):
                        b[i] = b[i] + load(xk[i])
        else:
            for i in range(L):
                b[i] = load(x[p + i * xsw])
            for k in range(1, nr):
                q = p + k * rs
                if ismax:
                    for i in range(L):
                        b[i] = nan_max(b[i], load(x[q + i * xsw]))
                else:
                    for i in range(L):
                        b[i] = b[i] + load(x[q + i * xsw])
        # ---- horizontal pass: ov[j] = op over c < kw of buf[j*sw + c*dw]
        if sw <= 2:
            if sw == 1:
                y0 = buf[:n]
                y1 = buf[c1:c1 + n]
                y2 = buf[c2:c2 + n]
            else:           # deinterleaved, every tap is a contiguous view
                for t in range(half):
                    ev[t] = buf[2 * t]
                    od[t] = buf[2 * t + 1]
                y0 = ev[:n]
                y1 = ev[c1 >> 1:(c1 >> 1) + n] if c1 & 1 == 0 else od[c1 >> 1:(c1 >> 1) + n]
                y2 = ev[c2 >> 1:(c2 >> 1) + n] if c2 & 1 == 0 else od[c2 >> 1:(c2 >> 1) + n]
            if ismax:
                if kf == 3:
                    for j in range(n):
                        ov[j] = nan_max(nan_max(y0[j], y1[j]), y2[j])
                elif kf == 2:
                    for j in range(n):
                        ov[j] = nan_max(y0[j], y1[j])
                else:
                    for j in range(n):
                        ov[j] = y0[j]
            else:
                if kf == 3:
                    for j in range(n):
                        ov[j] = y0[j] + y1[j] + y2[j]
                elif kf == 2:
                    for j in range(n):
                        ov[j] = y0[j] + y1[j]
                else:
                    for j in range(n):
                        ov[j] = y0[j]
            for c in range(3, kw):
                off = c * dw
                if sw == 1:
                    yc = buf[off:off + n]
                else:
                    yc = ev[off >> 1:(off >> 1) + n] if off & 1 == 0 else \
                        od[off >> 1:(off >> 1) + n]
                if ismax:
                    for j in range(n):
                        ov[j] = nan_max(ov[j], yc[j])
                else:
                    for j in range(n):
                        ov[j] = ov[j] + yc[j]
        else:
            for j in range(n):
                ov[j] = buf[j * sw]
            for c in range(1, kw):
                off = c * dw
                if ismax:
                    for j in range(n):
                        ov[j] = nan_max(ov[j], buf[off + j * sw])
                else:
                    for j in range(n):
                        ov[j] = ov[j] + buf[off + j * sw]
        # ---- averages: divide by the taps counted (rows x columns)
        if not ismax:
            dr = _count(h0, kh, H, pb, cip)
            for j in range(jlo):
                ov[j] = ov[j] / cast_like(x, dr * _count(iw0 + j * sw, kw, W, pr, cip))
            inner = cast_like(x, dr * kw)
            # a view from 0: indices from a variable start keep their negative-index fix-up
            # per element, which kept this loop scalar (a quarter of avg_pool2d's time)
            oi = ov[jlo:jhi]
            for j in range(oi.shape[0]):
                oi[j] = oi[j] / inner
            for j in range(jhi, n):
                ov[j] = ov[j] / cast_like(x, dr * _count(iw0 + j * sw, kw, W, pr, cip))
        flush_row(o, orow, osn, ov)


@callee(cache=True)
def scratch_span(o, blen):
    """Elements of one chunk's part of the scratch (see :func:`_scratch`), each of its four
    buffers whole 64-byte lines."""
    line = LINE // compute_empty(o, 0).itemsize
    return (round_up(blen + 2, line) + 2 * round_up((blen >> 1) + 2, line)
            + round_up(MAX_T1, line))


@callee(cache=True)
def _scratch(ws, c, blen):
    """Part ``c`` of the scratch ``ws`` (``scratch_span`` elements each): the vertical
    reductions of a row span (one slack element), its even and odd columns, and an output
    row."""
    line = LINE // ws.itemsize
    half = (blen >> 1) + 2
    a = c * scratch_span(ws, blen)
    b = a + round_up(blen + 2, line)
    d = b + round_up(half, line)
    e = d + round_up(half, line)
    return ws[a:a + blen + 2], ws[b:b + half], ws[d:d + half], ws[e:e + MAX_T1]


def row_view(o, orow, n, osn, obuf):
    """Where an output row of n values is computed: in place in o when its row is
    contiguous, else in the scratch row obuf (always for a half-precision carrier, whose
    values are computed in float32)."""


@overload(row_view)
def _row_view(o, orow, n, osn, obuf):
    if is_half(o.dtype):
        return lambda o, orow, n, osn, obuf: obuf[:n]
    return lambda o, orow, n, osn, obuf: o[orow:orow + n] if osn == 1 else obuf[:n]


def flush_row(o, orow, osn, ov):
    """Store a row computed by row_view's scratch into o (rounded for a carrier)."""


@overload(flush_row)
def _flush_row(o, orow, osn, ov):
    if is_half(o.dtype):
        def flush_half(o, orow, osn, ov):
            for j in range(ov.shape[0]):
                o[orow + j * osn] = store(o, ov[j])
        return flush_half

    def flush(o, orow, osn, ov):
        if osn != 1:
            for j in range(ov.shape[0]):
                o[orow + j * osn] = ov[j]
    return flush


#: the chunks' scratch is one allocation made by the driver (``workspace``), not one per chunk
#: made on its worker thread: over 1x64x112x112 float32, 2 threads, into out=, eight processes
#: each, max_pool2d 3x3/2 156-216 -> 154-168 us (means 178 -> 162), avg_pool2d 3x3 400-510 ->
#: 362-482 us (means 472 -> 428)
def pool_driver(x, o, common, entries):
    """Pool x (flat buffer; offsets and strides in the common area) into o, one table."""
    x, o, common, entries = borrowed((x, o, common, entries))
    n_entries = entries.shape[0]
    n_outer = common[C_NOUTER]
    total = n_entries * n_outer
    kw = common[_P + P_KW]
    blen = (MAX_T1 - 1) * common[_P + P_SW] + (kw - 1) * common[_P + P_DW] + 1
    taps = common[C_M] * common[C_N] * n_outer * common[_P + P_KH] * kw
    # every chunk's scratch in one allocation made here, on the calling thread
    chunks = 1 if taps < SERIAL_TAPS else min(N_CHUNKS, total)
    ws = compute_empty(o, chunks * scratch_span(o, blen))
    if taps < SERIAL_TAPS:
        pool_chunk((x, o, common, entries, np.int64(0), np.int64(1), total, blen, ws,
                    np.int64(0)))
    else:
        for c in prange(N_CHUNKS):
            first = chunk_start(np.int64(c))
            if first >= total:
                continue        # no work item: no call, no scratch
            # (the chunks run are those whose first item is below total: first indexes ws)
            pool_chunk((x, o, common, entries, first, np.int64(N_CHUNKS), total, blen, ws,
                        first))


@callee(cache=True, error_model="numpy")
def _pool_chunk(x, o, common, entries, first, step, total, blen, ws, c):
    """Work items ``first, first + step, ... < total`` (entry x outer index), with part
    ``c`` of the scratch ``ws`` for window rows of ``blen`` elements."""
    n_entries = entries.shape[0]
    scratch = _scratch(ws, c, blen)
    # borrowed (their owners held to the end): every output row takes views of them, and
    # a view of a counted array costs two atomics (35% of max_pool2d's time over
    # 8 x 64 x 112 x 112 in NRT_incref/decref)
    buf, ev, od, obuf = borrowed(scratch)
    for idx in range(first, total, step):
        _pool_entry(x, o, common, entries, idx % n_entries, idx // n_entries, buf, ev, od,
                    obuf)
    hold(scratch)


#: ``_pool_chunk`` reached by address (``address_link``): the driver's prange body holds a
#: call, so its four levels (parfor body, two wrappers, driver) do not optimize and generate
#: the pooling code again
CHUNKS = Link("pool.chunk", lambda: _pool_chunk, lambda dt: _chunk_signature(dt),
              CATALOG.families["pool"].dtypes)
#: functions the driver reaches by address: drivers.get fills their slots first
LINKS = (CHUNKS,)
pool_chunk = CHUNKS.call


def _chunk_signature(dtype):
    """The argument types of ``_pool_chunk``: the driver's, four counts, the scratch (of the
    computed dtype) and the chunk."""
    return (signature(dtype) + (types.int64,) * 4
            + (types.Array(getattr(types, compute(dtype)), 1, "C"), types.int64))


def signature(dtype):
    dt = getattr(types, carrier(dtype))
    return (types.Array(dt, 1, "C", readonly=True), types.Array(dt, 1, "C"),
            types.Array(types.int64, 1, "C", readonly=True),
            types.Array(types.int64, 2, "C", readonly=True))
