"""CPU drivers of the elementwise families: unary (incl. copy) and binary with broadcasting.

One driver per (family, dtype). It receives the operands as flat buffers, the table's common
area and entries, and loops over ``entries x outer index`` with ``prange``: no Python runs per
tile. Each entry names a static kernel by id; the id decodes into (op code, tile slot), and
the slot fixes the tile shape (T0 rows x T1 columns). Full tiles run a branch-free row loop
(the op switch sits outside the element loop); tails follow the entry's tail mode.
"""
import numpy as np
from numba import njit, prange, types

from ..abi.common_area import (C_IDBASE, C_M, C_N, C_NDOUTER, C_NOUTER, C_OPBASE, C_OPS, C_OSHAPE,
                           E_ANCH0, E_ANCH1, E_KID, E_MODE0, E_MODE1, E_OFF0, E_OFF1, OP_BLOCK,
                           OP_OFF, OP_OSTR, OP_SM, OP_SN, S_STREAM, STORE_BLOCK, W_ROWS,
                           common_size)
from ..abi.storage import carrier, compute
from ..abi.tail_mode import ANCHOR_END, DISCARD, VARIABLE_PARTIAL
from ..abi.vocabulary import (DIV, EXP, GELU, GELU_TANH, IDENTITY, LOG, MAXIMUM, MINIMUM,
                               SIGMOID, SILU, TANH)
from ..abi.tiles import ELEMENTWISE_TILES
from .address_link import Link
from ..catalog import CATALOG
from .callee import callee
from .lookup import lookup_map
from .borrowed import borrowed, hold
from .prefetch import prefetch_on, prefetch_span
from .streaming import AHEAD_BYTES, BLOCK_BYTES, line_gap, stream_block, store_fence
from .switches import (STREAM_BINARY, STREAM_PERIOD_BINARY, STREAM_UNARY, map_contig,
                       map_inplace, map_stream, zip_contig, zip_period_blocks, zip_right,
                       zip_rows, zip_scalar_a, zip_scalar_b, zip_stream)
from .readonly_view import readonly
from .tile_copy import gather_tile, scatter_tile, transpose_tile
from .tiles import make_tile_geometry

# Tile shapes (rows, columns, partial window on columns) of the elementwise static kernels,
# by slot. Row tiles of three lengths and a square tile for transposed access.
# A 32x32 tile was 3x slower than 16x64 on transposed copies (cache-set conflicts of 32
# columns with a large stride); 16x64 stays close to NumPy's blocked transpose.
N_SLOTS = len(ELEMENTWISE_TILES)
# Below this many elements the entries run on the calling thread: waking the thread pool
# costs more than it saves (about 10 us per parallel launch measured on this machine).
SERIAL_ELEMENTS = 1 << 15
# entries of one parallel work item of the unary and binary drivers (see _run_length), or
# more when the rows are short: as many as make RUN_ELEMENTS elements (see run_size)
RUN_ENTRIES = 8
RUN_ELEMENTS = 4096
# runs of rows shorter than SHORT_ROW whose one input repeats (one value per row, e.g.
# x - x.mean(axis=1, keepdims=True), or one row for every row, e.g. x + bias) expand that
# input into a scratch tile of up to SHORT_BLOCK elements, then run it in one switch call;
# longer rows with one value per row take one zip_scalar call each
SHORT_ROW = 256
SHORT_BLOCK = 4096
# rows that repeat one row for every row (a bias row) go to zip_rows from this length on,
# which reads that row in place: expanding it into the scratch tile for every work item
# cost more than the switch calls it saved (one thread, items of 4096 elements, add of a
# row to 10000 x 77: 120 us expanded, 77 us row by row, 64 us for one contiguous zip of
# rows expanded beforehand; 40000 x 32: 172 / 115 / 112; 80000 x 16: 168 / 184 / 108)
ROW_REPEAT_DIRECT = 32
# ...unless the run is long: from REPEAT_RUN_MIN elements on, rows of up to REPEAT_ROW_MAX
# elements that follow each other (and the output's) take the repeated row from a tile of
# whole rows, filled once per run, and each block of rows is one contiguous zip call (see
# _repeated_row); the binary driver's work items are REPEAT_RUN_ELEMENTS long whenever an
# input repeats (a row, or one value per row: see run_size)
REPEAT_RUN_MIN = 4 * SHORT_BLOCK
# (rows of 1000 gained nothing: 2000 x 1000 took 90-99 us row by row, 104-106 from the tile)
REPEAT_ROW_MAX = SHORT_BLOCK // 8
REPEAT_RUN_ELEMENTS = 16 * SHORT_BLOCK

tile_geometry = make_tile_geometry(ELEMENTWISE_TILES)

# ops whose rows stream their output when asked (``cpu.streaming``), by code (the fused
# driver reads STREAMS_BINARY too)
STREAMS_UNARY = np.array([c in STREAM_UNARY for c in range(64)])
# the math ops' outputs stream too, computed a few blocks at a time by their own loops
# (``map_contig``) into an L1 buffer: with their inputs prefetched they wait on memory as
# well (3e7 float32, 2 threads, ms, normal stores / streaming: gelu 12.0-12.6 / 9.3-10.1,
# exp 9.7-10.2 / 7.4-7.7, tanh 11.0-11.8 / 8.4-9.1); a streaming loop of their own in
# ``map_stream`` was no faster and made each float driver compile 2.3 s longer
STREAM_MATH = frozenset({EXP, LOG, SIGMOID, TANH, GELU, GELU_TANH, SILU})
STREAMS_MATH = np.array([c in STREAM_MATH for c in range(64)])
# bytes each ``map_contig`` call of a streaming math op computes (two streaming blocks: one
# per call made gelu's calls ~2% of its time)
MATH_BLOCK_BYTES = 2 * BLOCK_BYTES
STREAMS_BINARY = np.array([c in STREAM_BINARY for c in range(64)])
# two-array ops without a streaming loop of their own that stream through a buffer
# (``_buffered_stream``; 3e7 float32, 2 threads: div 12.0 -> 10.1 ms, maximum 12.9 ->
# 10.5; pow, bound by its compute, took 42.4 -> 45.5-47.1 and stores normally)
STREAM_BUFFERED = frozenset({DIV, MAXIMUM, MINIMUM})
STREAMS_BUFFERED = np.array([c in STREAM_BUFFERED for c in range(64)])
# binary ops whose bias row streams as one loop (``_period_stream``)
STREAMS_PERIOD = np.array([c in STREAM_PERIOD_BINARY for c in range(64)])
# rows shorter than this many streaming blocks store normally (head and tail lines would
# be most of them)
STREAM_MIN_BLOCKS = 4
# rows of a binary op that do not follow each other (a bias row added to each row) stream
# one at a time from this many bytes: a row's streaming costs four switch calls, which
# cost more than streaming saves on shorter rows (30000 x L float32 + a bias row, 2
# threads: L=1000 6.6 -> 7.9 ms, 1024 6.5 -> 8.1, 4000 6.4 -> 6.0, 100000 6.2 -> 5.4)
STREAM_ROW_BYTES = 16384


# where the store block's streaming flag is in a unary (2 operands) and a binary common area
_STREAM_AT_UNARY = common_size(2) + S_STREAM
_STREAM_AT_BINARY = common_size(3) + S_STREAM
# where the run block's rows-in-order flag is (after the store block)
_ROWS_AT_UNARY = common_size(2) + STORE_BLOCK + W_ROWS
_ROWS_AT_BINARY = common_size(3) + STORE_BLOCK + W_ROWS


@njit(inline="always")
def _streaming(common, at):
    """Whether the common area's store block (flag at ``at``) asks for streaming stores."""
    return common.size > at and common[at] != 0


@njit(inline="always")
def _ahead(common, at, t1):
    """How far on a transposed tile prefetches its rows (its next tile, to the right, starts
    ``t1`` elements on): ``t1`` for an output larger than the last-level cache (the store
    block's flag at ``at``), else 0 (in cache the prefetches only cost instructions)."""
    return t1 if _streaming(common, at) else np.int64(0)


@njit(inline="always")
def stream_span(ov, w):
    """``(g, e)``: the elements of the unit-stride ``ov`` that stream in blocks of ``w``,
    from its first line start ``g`` to the end ``e`` of its last whole block (the rest
    stores normally); ``g`` is -1 when ``ov`` is too short to pay (under STREAM_MIN_BLOCKS
    blocks) or no element of it starts a line."""
    n = ov.size
    g = line_gap(ov, 0)
    if g < 0 or n < g + STREAM_MIN_BLOCKS * w:
        return -1, n
    return g, g + (n - g) // w * w


@callee(cache=True)
def _stream_map(code, xv, ov, a0, a1):
    """ov = op(xv) (disjoint, unit stride) with the whole lines of ``ov`` stored streaming;
    the lines before the first line start and after the last whole block store normally.
    The driver fences (``store_fence``) once per work item, after its runs: a fence per 4 KB
    row made a bias add over 1000-element rows 33% slower than normal stores."""
    n = ov.size
    w = BLOCK_BYTES // ov.itemsize
    g, e = stream_span(ov, w)
    if g < 0:
        map_contig(code, xv, ov, n, a0, a1)
        return
    map_contig(code, xv[:g], ov[:g], g, a0, a1)
    if STREAMS_UNARY[code]:
        map_stream(code, xv, ov, g, e, a0, a1, np.empty(w, dtype=ov.dtype))
    else:
        e = _math_stream(code, xv, ov, g, e, a0, a1)
    map_contig(code, xv[e:], ov[e:], n - e, a0, a1)


@callee(cache=True)
def _math_stream(code, xv, ov, h, e, a0, a1):
    """``ov[h:f] = op(xv[h:f])`` for a math op (``STREAM_MATH``), streaming: blocks of
    MATH_BLOCK_BYTES computed by the op's own loop into an L1 buffer, each streamed as
    whole lines, the input prefetched AHEAD_BYTES on; ``ov[h]`` starts a line. Returns ``f``,
    the end of the last whole block (at most ``e``); the caller stores the rest."""
    buf = np.empty(MATH_BLOCK_BYTES // ov.itemsize, dtype=ov.dtype)
    xv, ov, b = borrowed((xv, ov, buf))
    w = b.size
    half = BLOCK_BYTES // ov.itemsize
    ahead = AHEAD_BYTES // ov.itemsize
    f = h + (e - h) // w * w
    for s in range(h, f, w):
        prefetch_on(xv, s + ahead, w)
        map_contig(code, xv[s:s + w], b, w, a0, a1)
        stream_block(b, ov, s)
        stream_block(b[half:], ov, s + half)
    hold(buf)
    return f


@callee(cache=True)
def _stream_zip(code, av, bv, ov, buf):
    """ov = av op bv (disjoint from ov, unit stride), as :func:`_stream_map`; ``buf``: one
    block of scratch."""
    n = ov.size
    g, e = stream_span(ov, buf.size)
    if g < 0:
        zip_contig(code, av, bv, ov, n)
        return
    zip_contig(code, av[:g], bv[:g], ov[:g], g)
    zip_stream(code, av, bv, ov, g, e, buf)
    zip_contig(code, av[e:], bv[e:], ov[e:], n - e)


#: what a buffered stream (``_buffered_stream``) computes: ``av op bv``, ``av op c`` (one
#: value on the right) or ``c op av`` (on the left)
ZIP_BOTH, ONE_RIGHT, ONE_LEFT = 0, 1, 2


@njit(inline="always")
def _zip_block(code, mode, av, bv, c, ov, n):
    """``ov[:n]`` = ``av op bv``, ``av op c`` or ``c op av`` by ``mode``."""
    if mode == ZIP_BOTH:
        zip_contig(code, av, bv, ov, n)
    elif mode == ONE_RIGHT:
        zip_scalar_b(code, av, c, ov, n)
    else:
        zip_scalar_a(code, c, av, ov, n)


@callee(cache=True)
def _buffered_stream(code, mode, av, bv, c, ov):
    """``ov = av op bv`` (``mode`` ZIP_BOTH), ``av op c`` (ONE_RIGHT) or ``c op av``
    (ONE_LEFT; ``bv`` unused, pass ``av``) over unit-stride operands, ``ov`` disjoint from
    them, streaming as :func:`_math_stream` does: blocks of MATH_BLOCK_BYTES computed into an
    L1 buffer, each streamed as whole lines, the inputs prefetched AHEAD_BYTES on; the lines
    before the first line start and after the last whole block store normally.

    For the binary ops by one value (which stored normally in ``_scalar_rows``: pow(x, 2.5)
    of 3e7 float32 took 1.80 ns per element there against 1.35 from cache, torch 1.25) and
    the two-array ops without a streaming loop of their own in the switches (div, maximum,
    minimum: ``STREAM_BUFFERED``; no switch case more to compile)."""
    n = ov.size
    w = MATH_BLOCK_BYTES // ov.itemsize
    g, e = stream_span(ov, w)
    if g < 0:
        _zip_block(code, mode, av, bv, c, ov, n)
        return
    _zip_block(code, mode, av[:g], bv[:g], c, ov[:g], g)
    buf = np.empty(w, dtype=ov.dtype)
    xa, xb, ob, b = borrowed((av, bv, ov, buf))
    half = BLOCK_BYTES // ov.itemsize
    ahead = AHEAD_BYTES // ov.itemsize
    for s in range(g, e, w):
        prefetch_on(xa, s + ahead, w)
        if mode == ZIP_BOTH:
            prefetch_on(xb, s + ahead, w)
        _zip_block(code, mode, xa[s:s + w], xb[s:s + w], c, b, w)
        stream_block(b, ob, s)
        stream_block(b[half:], ob, s + half)
    hold(buf)
    _zip_block(code, mode, av[e:], bv[e:], c, ov[e:], n - e)


@callee(cache=True)
def resolve(off, anchor, size, t):
    """(offset, valid length) of an entry in one dimension; valid 0 means do nothing."""
    o = size - off if anchor == ANCHOR_END else off
    if o < 0 or o >= size:
        return 0, 0
    v = size - o
    return o, (v if v < t else t)


@njit(inline="always")
def same_element(x, xb, o, ob):
    """Whether ``x[xb]`` is ``o[ob]``: the output is the input itself (``out=x``). Operands
    are either that or disjoint (the executor copies a partially overlapping input first),
    so a run that starts at the same element is the same memory throughout. A loop reading
    one array and writing another checks at run time that they do not overlap and runs its
    scalar fallback when they do: in place, the drivers call the switches' in-place loops
    instead (exp of 10^6 float32 elements in place: 1.75 ms scalar, 0.16 ms vectorized)."""
    return x.ctypes.data + xb * x.itemsize == o.ctypes.data + ob * o.itemsize


@njit(inline="always")
def same_rows(x, xb, xsm, o, ob, osm):
    """Whether the rows of ``x`` from ``x[xb]`` (row stride ``xsm``) are the output's rows
    from ``o[ob]`` (row stride ``osm``): the same start and the same row stride."""
    return xsm == osm and same_element(x, xb, o, ob)


@callee(cache=True)
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


@callee(cache=True)
def _unary_row(code, x, xb, xs, o, ob, os, n, a0, a1, scratch, attrs):
    """One row. Strided rows are gathered into ``scratch`` in chunks, mapped by the same
    vectorized loops as contiguous rows, and scattered back. A half-precision op whose
    ``attrs`` carry a lookup table reads it instead (``lookup.py``)."""
    if xs == 1 and os == 1:
        if not lookup_map(attrs, x[xb:xb + n], o[ob:ob + n], n):
            if same_element(x, xb, o, ob):      # in place: see same_element
                map_inplace(code, o[ob:ob + n], n, a0, a1)
            else:
                map_contig(code, x[xb:xb + n], o[ob:ob + n], n, a0, a1)
        return
    k = 0
    while k < n:
        c = min(n - k, scratch.size)
        for i in range(c):
            scratch[i] = x[xb + (k + i) * xs]
        if not lookup_map(attrs, scratch, scratch, c):
            map_inplace(code, scratch, c, a0, a1)
        _store_chunk(o, ob + k * os, os, scratch, c)
        k += c


@callee(cache=True)
def _store_chunk(o, ob, os, scratch, c):
    """``o[ob + i*os] = scratch[i]`` for i < c; a unit-stride output through a view (LLVM
    vectorizes it; the index arithmetic of the strided form keeps it scalar, 3x slower)."""
    if os == 1:
        d = o[ob:ob + c]
        for i in range(c):
            d[i] = scratch[i]
    else:
        for i in range(c):
            o[ob + i * os] = scratch[i]


@callee(cache=True)
def _unary_short_rows(code, x, xb, xsm, o, ob, osm, k, v1, a0, a1, attrs):
    """``k > 1`` unit-stride rows of ``v1 < SHORT_ROW`` elements. A switch call per row
    costs more than a short row's vector work (relu of x[:, :64] for x of 4096 x 100: 18 ns
    a row on one thread), so: rows that follow each other in both x and the output are one
    row; otherwise SHORT_BLOCK elements at a time go through a scratch tile, in ONE switch
    call (the tile typed read-only when it is the source, as x): gathered from x's rows
    (or read in place when they follow each other), scattered to the output's rows (or
    written in place when they follow each other)."""
    if xsm == v1 and osm == v1:
        _unary_row(code, x, xb, np.int64(1), o, ob, np.int64(1), k * v1, a0, a1, o[:0], attrs)
        return
    rows = max(1, min(k, SHORT_BLOCK // v1))
    tile = np.empty(rows * v1, dtype=o.dtype)
    for r0 in range(0, k, rows):
        kk = min(rows, k - r0)
        n = kk * v1
        xo = xb + r0 * xsm
        oo = ob + r0 * osm
        if xsm == v1:                     # x's rows follow each other: map into the tile
            if not lookup_map(attrs, x[xo:xo + n], tile[:n], n):
                map_contig(code, x[xo:xo + n], tile[:n], n, a0, a1)
        else:       # (row loops written out: through gather_tile/scatter_tile, 5% slower)
            for r in range(kk):
                t = tile[r * v1:(r + 1) * v1]
                xv = x[xo + r * xsm:xo + r * xsm + v1]
                for j in range(v1):
                    t[j] = xv[j]
            if osm == v1:                 # the output's rows follow each other
                if not lookup_map(attrs, readonly(tile)[:n], o[oo:oo + n], n):
                    map_contig(code, readonly(tile)[:n], o[oo:oo + n], n, a0, a1)
                continue
            if not lookup_map(attrs, tile, tile, n):
                map_inplace(code, tile, n, a0, a1)
        for r in range(kk):
            ov = o[oo + r * osm:oo + r * osm + v1]
            t = tile[r * v1:(r + 1) * v1]
            for j in range(v1):
                ov[j] = t[j]


@callee(cache=True, error_model="numpy")
def _unary_rows(code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, mode1, t1, w1, a0, a1, attrs):
    """Valid rows of a tile; a VARIABLE_PARTIAL column tail runs T1-w fixed + a short rest;
    many short unit-stride rows through :func:`_unary_short_rows`."""
    split = t1 - w1 if (mode1 == VARIABLE_PARTIAL and v1 >= t1 - w1) else 0
    if xsn == 1 and osn == 1 and split == 0 and v0 > 1 and v1 < SHORT_ROW:
        _unary_short_rows(code, x, xb, xsm, o, ob, osm, v0, v1, a0, a1, attrs)
        return
    scratch = o[:0] if (xsn == 1 and osn == 1) else np.empty(min(t1, 1024), dtype=o.dtype)
    for r in range(v0):
        xr = xb + r * xsm
        orow = ob + r * osm
        if split > 0:
            _unary_row(code, x, xr, xsn, o, orow, osn, split, a0, a1, scratch, attrs)
            _unary_row(code, x, xr + split * xsn, xsn, o, orow + split * osn, osn,
                       v1 - split, a0, a1, scratch, attrs)
        else:
            _unary_row(code, x, xr, xsn, o, orow, osn, v1, a0, a1, scratch, attrs)


@callee(cache=True, error_model="numpy")
def _unary_scratch(code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, t0, t1, pf, a0, a1, full,
                   attrs):
    """A tile through a scratch copy: DISCARD tails (``full``: the whole zero-padded tile is
    computed, the invalid part dropped) and 2-D tiles with strided columns (valid part only).
    ``pf`` > 0: the output rows prefetch the next tile's (``scatter_tile``).

    A transposed source into unit-stride output rows (relu(a.T)) takes no scratch tile: it is
    transposed straight into the output (as a copy), then the op runs on the output's rows
    in place while they are in cache (the tile's gather and scatter were two more passes
    over it). 3187 x 9431 float32, 2 threads, medians of blocks, old and new builds
    alternating: relu 12.0-12.6 -> 9.3-11.0 ms, exp 14.4-14.9 -> 10.5-12.3 ms; 581 x 1723
    (in cache) unchanged within noise; unary float32 first compile unchanged (10.3-10.9 s).
    That path lives here, not beside the copies' in _unary_entry, because this function is
    reached by address and already holds the op switch and the lookup read: in the run,
    map_inplace would be compiled and optimized once more."""
    if not full and xsm == 1 and osn == 1:
        transpose_tile(x, xb, xsn, o, ob, osm, v0, v1, t1, pf)
        for r in range(v0):
            row = o[ob + r * osm:ob + r * osm + v1]
            if not lookup_map(attrs, row, row, v1):
                map_inplace(code, row, v1, a0, a1)
        return
    buf = np.zeros(t0 * t1, dtype=o.dtype) if full else np.empty(t0 * t1, dtype=o.dtype)
    gather_tile(x, xb, xsm, xsn, v0, v1, buf, t1, t1)
    n = t0 * t1 if full else (v0 - 1) * t1 + v1
    if not lookup_map(attrs, buf, buf, n):
        map_inplace(code, buf, n, a0, a1)
    scatter_tile(o, ob, osm, osn, v0, v1, buf, t1, pf)


# inlined into its one caller (_unary_run), as _binary_entry: compiled on its own, its
# code and all it calls were optimized and generated once more in _unary_run. Fresh caches,
# alternating builds: the unary float32 driver 10.1-10.7 -> 9.3-9.7 s, the binary one
# 13.9-15.2 -> 12.4-12.8 s; the run path's times unchanged
@njit(inline="always")
def _unary_entry(x, o, common, entries, e, oi, attrs):
    """One kernel call: entry ``e`` at outer index ``oi``."""
    a0 = attrs[0]
    a1 = attrs[1]
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
    # int64 operand numbers and np.bool_ flags below: literal ones compile the callee (and
    # its call tree) once per value
    xb = outer_offset(common, np.int64(1), oi) + r0 * xsm + r1 * xsn
    ob = outer_offset(common, np.int64(0), oi) + r0 * osm + r1 * osn
    discard = entries[e, E_MODE0] == DISCARD or entries[e, E_MODE1] == DISCARD
    if discard and (v0 < t0 or v1 < t1):
        unary_scratch((code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, t0, t1, np.int64(0),
                        a0, a1, np.bool_(True), attrs))
    elif t0 > 1 and code == IDENTITY and xsm == 1 and osn == 1:   # transposed copies go
        transpose_tile(x, xb, xsn, o, ob, osm, v0, v1, t1,       # straight, no tile buffer
                       _ahead(common, _STREAM_AT_UNARY, t1))
    elif t0 > 1 and code == IDENTITY and xsn == 1 and osm == 1:
        transpose_tile(x, xb, xsm, o, ob, osn, v1, v0, np.int64(0), np.int64(0))
    elif t0 > 1 and (xsn != 1 or osn != 1):
        unary_scratch((code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, t0, t1,
                        _ahead(common, _STREAM_AT_UNARY, t1), a0, a1, np.bool_(False), attrs))
    else:
        unary_rows((code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, entries[e, E_MODE1],
                     t1, w1, a0, a1, attrs))


@callee(cache=True, error_model="numpy")
def _unary_run(x, o, common, entries, idx, end, attrs):
    """Entry ``idx`` and, when it is one row with unit column strides, the entries after it
    (up to ``end``) that continue it row by row (:func:`_run_length`), decoded once.
    Returns how many entries ran (rows of a strided view, e.g. x[:, :1000], come one entry
    per row)."""
    e, oi, local, r0, r1, v1, t1, w1 = _run_start(common, entries, idx, np.int64(2))
    if v1 == 0:
        _unary_entry(x, o, common, entries, e, oi, attrs)
        return 1
    k = _run_length(common, entries, idx, end, r0, _ROWS_AT_UNARY)
    xsm = common[C_OPS + OP_BLOCK + OP_SM]
    osm = common[C_OPS + OP_SM]
    code = common[C_OPBASE] + local // N_SLOTS
    if (_streaming(common, _STREAM_AT_UNARY) and (STREAMS_UNARY[code] or STREAMS_MATH[code])
            and attrs.size == 2 and (k == 1 or (xsm == v1 and osm == v1))):
        xb = outer_offset(common, np.int64(1), oi) + r0 * xsm + r1
        ob = outer_offset(common, np.int64(0), oi) + r0 * osm + r1
        if not same_element(x, xb, o, ob):      # rows that follow each other: one row
            _stream_map(code, x[xb:xb + k * v1], o[ob:ob + k * v1], attrs[0], attrs[1])
            return k
    unary_rows((code, x,
                 outer_offset(common, np.int64(1), oi) + r0 * xsm + r1, xsm, np.int64(1), o,
                 outer_offset(common, np.int64(0), oi) + r0 * osm + r1, osm, np.int64(1), k,
                 v1, entries[e, E_MODE1], t1, w1, attrs[0], attrs[1], attrs))
    return k


def unary_driver(x, o, common, entries, attrs):
    """out = op(x) over every entry x outer index; ``attrs`` holds the op's two attributes
    in the operand dtype (leaky_relu alpha; clip bounds), then, for a half-precision op that
    reads a lookup table, the table (``lookup.py``)."""
    x, o, common, entries, attrs = borrowed((x, o, common, entries, attrs))
    n_entries = entries.shape[0]
    total = n_entries * common[C_NOUTER]
    if common[C_M] * common[C_N] * common[C_NOUTER] < SERIAL_ELEMENTS:
        idx = 0
        while idx < total:
            idx += unary_run((x, o, common, entries, idx, total, attrs))
        store_fence()
    else:
        # runs of up to run_size entries per parallel item, as in binary_driver
        total = live_total(common, entries)
        run = run_size(common, total, RUN_ELEMENTS)
        for blk in prange((total + run - 1) // run):
            idx = blk * run
            end = min(total, idx + run)
            while idx < end:
                idx += unary_run((x, o, common, entries, idx, end, attrs))
            store_fence()


@callee(cache=True)
def _binary_strided_row(code, a, ab, asn, b, bb, bsn, o, ob, osn, n, sa, sb):
    """One row with a strided column walk (unit-stride rows go to :func:`_binary_rows`):
    chunks gathered into sa/sb, run by the vectorized loop in place, stored."""
    k = 0
    while k < n:
        c = min(n - k, sa.size)
        for i in range(c):
            sa[i] = a[ab + (k + i) * asn]
            sb[i] = b[bb + (k + i) * bsn]
        zip_right(code, sa, sb, c)   # in place: zip_contig(sa, sb, sa) would alias
        _store_chunk(o, ob + k * osn, osn, sa, c)
        k += c


@callee(cache=True)
def _binary_scratch(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, osn, v0, v1, t0, t1,
                    full):
    """DISCARD tails (whole zero/one-padded tile computed) and tiles with a strided output
    row, through scratch copies of both operands."""
    sa = np.zeros(t0 * t1, dtype=o.dtype) if full else np.empty(t0 * t1, dtype=o.dtype)
    sb = np.ones(t0 * t1, dtype=o.dtype) if full else np.empty(t0 * t1, dtype=o.dtype)
    gather_tile(a, ab, asm, asn, v0, v1, sa, t1, t1)
    gather_tile(b, bb, bsm, bsn, v0, v1, sb, t1, t1)
    zip_right(code, sa, sb, t0 * t1 if full else (v0 - 1) * t1 + v1)
    scatter_tile(o, ob, osm, osn, v0, v1, sa, t1, np.int64(0))


@callee(cache=True)
def _binary_gathered(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, v0, v1, t0, t1, pf):
    """A 2-D tile whose output rows are unit-stride and one operand's (or both) are not (a
    transposed operand, or a column broadcast): that operand is gathered into a scratch
    tile (a transposed one 8x8 block at a time through registers), the other is read in
    place, and ONE row switch call writes the output rows. Measured on a.T + b of
    581x1723 float32, one thread: 346 us through scratch copies of both operands and of
    the result, against 135 us for the transposed copy alone. ``pf`` > 0: the rows prefetch
    the next tile's (see _zip_tiles)."""
    # an input that is the output itself (in place, see same_element) is gathered too
    ga = asn != 1 or same_rows(a, ab, asm, o, ob, osm)
    gb = bsn != 1 or same_rows(b, bb, bsm, o, ob, osm)
    sa = np.empty(t0 * t1 if ga else 0, dtype=o.dtype)
    sb = np.empty(t0 * t1 if gb else 0, dtype=o.dtype)
    if ga:
        gather_tile(a, ab, asm, asn, v0, v1, sa, t1, t1)
    if gb:
        gather_tile(b, bb, bsm, bsn, v0, v1, sb, t1, t1)
    _zip_tiles(code, a, ab, asm, sa, ga, b, bb, bsm, sb, gb, o, ob, osm, v0, v1, t1, pf)


@callee(cache=True)
def _zip_tiles(code, a, ab, asm, sa, ga, b, bb, bsm, sb, gb, o, ob, osm, k, v1, pitch, pf):
    """One zip_rows call over ``k`` rows of ``v1`` elements, each input read from its
    scratch tile (row pitch ``pitch``) when flagged (``ga``, ``gb``), else in place. The
    tiles are typed read-only, as a and b, so the row switch is compiled once.

    ``pf`` > 0 (a next tile to the right, ``pf`` elements on, and operands larger than the
    last-level cache): one call per row instead, each after prefetching the same row's
    ``v1`` elements ``pf`` further on, of the output and of the inputs read in place. The
    hardware prefetcher does not follow a tile's 64-128 short row segments, and a tile's
    prefetches issued at once, before its rows or its gather, gained 3-8% where one row's
    before each row gained 15-20% (a.T + b over 3187 x 9431 float32, 2 threads). A row of
    prefetches inside the row switch's loop made in-cache tiles 20% slower."""
    step = 1 if pf > 0 else max(k, 1)      # pf == 0: the whole tile in one call
    for r in range(0, k, step):
        if pf > 0:
            prefetch_span(o, ob + r * osm + pf, v1)
            if not ga:
                prefetch_span(a, ab + r * asm + pf, v1)
            if not gb:
                prefetch_span(b, bb + r * bsm + pf, v1)
        m = min(step, k - r)
        t = r * pitch
        if ga and gb:
            zip_rows(code, readonly(sa), t, pitch, readonly(sb), t, pitch, o, ob + r * osm, osm,
                     m, v1)
        elif ga:
            zip_rows(code, readonly(sa), t, pitch, b, bb + r * bsm, bsm, o, ob + r * osm, osm,
                     m, v1)
        else:
            zip_rows(code, a, ab + r * asm, asm, readonly(sb), t, pitch, o, ob + r * osm, osm,
                     m, v1)


@njit(inline="always")       # see _unary_entry
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
    ab = outer_offset(common, np.int64(1), oi) + r0 * asm + r1 * asn    # int64 / np.bool_:
    bb = outer_offset(common, np.int64(2), oi) + r0 * bsm + r1 * bsn    # see _unary_entry
    ob = outer_offset(common, np.int64(0), oi) + r0 * osm + r1 * osn
    discard = entries[e, E_MODE0] == DISCARD or entries[e, E_MODE1] == DISCARD
    if discard and (v0 < t0 or v1 < t1):
        _binary_scratch(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, osn, v0, v1, t0, t1,
                        np.bool_(True))
        return
    if t0 > 1 and osn != 1:
        _binary_scratch(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, osn, v0, v1, t0, t1,
                        np.bool_(False))
        return
    if t0 > 1 and (asn > 1 or asn < 0 or bsn > 1 or bsn < 0):
        _binary_gathered(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, v0, v1, t0, t1,
                         _ahead(common, _STREAM_AT_BINARY, t1))
        return
    mode1 = entries[e, E_MODE1]
    split = t1 - w1 if (mode1 == VARIABLE_PARTIAL and v1 >= t1 - w1) else 0
    unit = osn == 1 and (asn == 1 or asn == 0) and (bsn == 1 or bsn == 0) and asn + bsn > 0
    if unit:        # the tile's rows in one switch call (two with a split column tail)
        if split > 0:
            _binary_rows(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, v0, split)
            _binary_rows(code, a, ab + split * asn, asm, asn, b, bb + split * bsn, bsm, bsn,
                         o, ob + split, osm, v0, v1 - split)
        else:
            _binary_rows(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, v0, v1)
        return
    chunk = min(t1, 1024)
    sa = np.empty(chunk, dtype=o.dtype)
    sb = np.empty(chunk, dtype=o.dtype)
    for r in range(v0):
        ar = ab + r * asm
        br = bb + r * bsm
        orow = ob + r * osm
        if split > 0:
            _binary_strided_row(code, a, ar, asn, b, br, bsn, o, orow, osn, split, sa, sb)
            _binary_strided_row(code, a, ar + split * asn, asn, b, br + split * bsn, bsn,
                        o, orow + split * osn, osn, v1 - split, sa, sb)
        else:
            _binary_strided_row(code, a, ar, asn, b, br, bsn, o, orow, osn, v1, sa, sb)


@callee(cache=True)
def _run_length(common, entries, idx, end, r0, rows_at):
    """How many entries from ``idx`` (a one-row entry at row ``r0``) up to ``end`` continue
    it row by row: the same kernel, tail modes and columns, the next row each, and the same
    outer index (a run never reads past the table). When the run block (flag at
    ``rows_at``) says the entries are rows in order, every entry up to the plane's last row
    does, and none is read: comparing entry after entry cost ~2 ns each, 40% of a bias add
    over 80000 x 16 float32 (driver alone, 2 threads: 178 -> 98 us without it). The run
    stays inside the plane (rows r0 .. M-1, entry idx's columns) whatever the flag says."""
    n_entries = entries.shape[0]
    e = idx % n_entries
    k = 1
    last = min(end, (idx // n_entries + 1) * n_entries)
    if common.size > rows_at and common[rows_at] != 0:
        return max(1, min(last - idx, common[C_M] - r0))
    while idx + k < last:
        f = e + k
        if (entries[f, E_KID] != entries[e, E_KID] or entries[f, E_MODE0] != entries[e, E_MODE0]
                or entries[f, E_MODE1] != entries[e, E_MODE1]
                or entries[f, E_OFF1] != entries[e, E_OFF1]
                or entries[f, E_ANCH1] != entries[e, E_ANCH1]):
            break
        rf, vf = resolve(entries[f, E_OFF0], entries[f, E_ANCH0], common[C_M], np.int64(1))
        if vf != 1 or rf != r0 + k:
            break
        k += 1
    return k


@callee(cache=True)
def _whole_rows(common, entries, idx, end, r0):
    """``(rows, taken)``: the whole rows from row ``r0`` that the entries from ``idx`` (up
    to ``end``, in one outer index) cover one after the other, each row in one-row tiles
    side by side from its first column to its last (a row wider than the widest tile:
    9431 columns in tiles of 4096), and how many entries those rows take; (0, 0) when the
    first row is not covered so. Reading a few entries per row costs nothing next to a
    long row's work, and run as rows, a bias row streams over them in one loop instead of
    one streaming call per tile (3187 x 9431 float32 + a bias row in 1x4096 tiles, 2
    threads, its time over relu's in the same process: 1.37-1.77 -> 1.19-1.28)."""
    n_entries = entries.shape[0]
    last = min(end, (idx // n_entries + 1) * n_entries)
    m = common[C_M]
    n = common[C_N]
    e0 = idx % n_entries
    op = (entries[e0, E_KID] - common[C_IDBASE]) // N_SLOTS
    row = r0
    col = 0
    rows = 0
    taken = 0
    for j in range(last - idx):
        e = e0 + j
        local = entries[e, E_KID] - common[C_IDBASE]
        t0, t1, w1 = tile_geometry(local % N_SLOTS)
        mode1 = entries[e, E_MODE1]
        if (t0 != 1 or local // N_SLOTS != op or entries[e, E_MODE0] == DISCARD
                or mode1 == DISCARD):
            break
        rr, vr = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], m, t0)
        cc, vc = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], n, t1)
        if (vr != 1 or rr != row or cc != col or vc == 0
                or (mode1 == VARIABLE_PARTIAL and vc >= t1 - w1)):
            break
        col += vc
        if col == n:
            rows += 1
            row += 1
            col = 0
            taken = j + 1
    return rows, taken


@njit(inline="always")
def tiles_per_row(common, entries):
    """How many entries from the first, a one-row tile, have its row offset and anchor,
    when an entry after them (within the first 64) has another: the tiles side by side in
    a row when the table runs its rows in order; else 1 (taller tiles; one long row in
    many tiles, a 581 x 1723 add merged into one row: items of 64 of its tiles made it 2x
    slower)."""
    if entries.shape[0] == 0 or tile_geometry((entries[0, E_KID] - common[C_IDBASE])
                                              % N_SLOTS)[0] != 1:
        return 1
    c = 1
    while (c < min(64, entries.shape[0]) and entries[c, E_OFF0] == entries[0, E_OFF0]
           and entries[c, E_ANCH0] == entries[0, E_ANCH0]):
        c += 1
    return c if c < min(64, entries.shape[0]) else 1


@callee(cache=True)
def _run_start(common, entries, idx, nops):
    """(entry, outer index, local kernel id, row, column, valid columns, T1, w) of work
    item ``idx``; valid columns 0 unless it can start a run of rows: a one-row tile whose
    ``nops`` operands all have unit column stride (of a binary op's two inputs, one may
    have column stride 0: one value per row), no DISCARD tail, no split column tail."""
    n_entries = entries.shape[0]
    e = idx % n_entries
    oi = idx // n_entries
    local = entries[e, E_KID] - common[C_IDBASE]
    t0, t1, w1 = tile_geometry(local % N_SLOTS)
    unit = t0 == 1 and common[C_OPS + OP_SN] == 1
    zeros = 0
    for op in range(1, nops):
        sn = common[C_OPS + op * OP_BLOCK + OP_SN]
        if sn == 0:
            zeros += 1
        elif sn != 1:
            unit = False
    if zeros > 0 and (nops < 3 or zeros == nops - 1):
        unit = False
    mode1 = entries[e, E_MODE1]
    if not unit or entries[e, E_MODE0] == DISCARD or mode1 == DISCARD:
        return e, oi, local, 0, 0, 0, t1, w1
    r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)
    r1, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)
    if v0 == 0 or (mode1 == VARIABLE_PARTIAL and v1 >= t1 - w1):
        return e, oi, local, 0, 0, 0, t1, w1
    return e, oi, local, r0, r1, v1, t1, w1


@callee(cache=True)
def live_total(common, entries):
    """The work items (entry x outer index) a parallel driver shares among its threads: all
    but the table's trailing entries that lie wholly past the call's shape, in the last
    outer index. A bucketed table keeps its empty entries at its end; run by the threads
    with the others, prange's contiguous split gave them all to the last thread (up to 1/16
    of a table), whose share of the real work shrank by as much."""
    n = entries.shape[0]
    live = n
    while live > 0:
        e = live - 1
        t0, t1, _ = tile_geometry((entries[e, E_KID] - common[C_IDBASE]) % N_SLOTS)
        if (resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)[1] > 0 and
                resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)[1] > 0):
            break
        live -= 1
    return n * common[C_NOUTER] - (n - live)


@callee(cache=True)
def _scalar_rows(code, a, ab, asm, asn, b, bb, bsm, o, ob, osm, k, v1):
    """``k`` rows where b has one value per row (column stride 0) and a unit column stride
    (or, when ``asn`` is 0, the other way round): one zip_scalar call per row."""
    # in place (the output is the unit-stride input itself, see same_element): each row is
    # copied into a scratch row first, so that no call reads the memory it writes
    inplace = (same_rows(a, ab, asm, o, ob, osm) if asn != 0
               else same_rows(b, bb, bsm, o, ob, osm))
    row = np.empty(v1 if inplace else 0, dtype=o.dtype)
    for r in range(k):
        ar = ab + r * asm
        br = bb + r * bsm
        orow = ob + r * osm
        if asn == 0:
            bv = b[br:br + v1]
            if inplace:
                for j in range(v1):
                    row[j] = bv[j]
                bv = readonly(row)
            zip_scalar_a(code, a[ar], bv, o[orow:orow + v1], v1)
        else:
            av = a[ar:ar + v1]
            if inplace:
                for j in range(v1):
                    row[j] = av[j]
                av = readonly(row)
            zip_scalar_b(code, av, b[br], o[orow:orow + v1], v1)


@callee(cache=True)
def _fill_repeated(row, tile, n):
    """``tile[:n]`` = ``row`` repeated (``n`` a multiple of its length): the row copied once,
    then the tile's filled part copied after itself (a few long copies, not one per row)."""
    v1 = row.size
    for j in range(v1):
        tile[j] = row[j]
    filled = v1
    while filled < n:
        c = min(filled, n - filled)
        src = tile[:c]
        dst = tile[filled:filled + c]
        for j in range(c):
            dst[j] = src[j]
        filled += c


@callee(cache=True)
def _expand(side, sb, ssm, ssn, tile, r0, kk, v1):
    """Rows r0 .. r0+kk of a repeating input into a scratch tile (pitch v1): one value per row
    filled along the row, a repeated row copied. Written out here rather than through
    ``gather_tile``: the call made the short-row tables 7-10% slower (one value per row:
    a transposed gather, 1.3x slower)."""
    if ssm == 0 and ssn != 0:      # one row for every row: copied once, then doubled
        _fill_repeated(side[sb:sb + v1], tile, kk * v1)
        return
    for r in range(kk):
        t = tile[r * v1:(r + 1) * v1]
        p = sb + (r0 + r) * ssm
        if ssn == 0:
            v = side[p]
            for j in range(v1):
                t[j] = v
        else:
            sv = side[p:p + v1]
            for j in range(v1):
                t[j] = sv[j]


@callee(cache=True)
def _short_rows(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, k, v1):
    """``k`` rows of ``v1 < SHORT_ROW`` elements where an input repeats: one value per row
    (column stride 0) or the same row for every row (row stride 0); both inputs may (e.g.
    ``q[:, None] - k[None, :]``). Per row, a switch call and its row views cost more than
    64 elements of vector work (sub of 4096x64 and 64: 102 us on one thread against 11 us
    for PyTorch on two), so each repeating input is expanded SHORT_BLOCK elements at a time
    into a scratch tile (a repeated row once) that is typed read-only, as the operands:
    when the other input's rows and the output's follow each other, ONE zip_contig call
    runs the whole block, else one zip_rows call."""
    # in place (the output is a itself, see same_element): a's rows are copied into the
    # scratch tile like a repeating input's, so that no call reads the memory it writes
    ea = asn == 0 or asm == 0 or same_rows(a, ab, asm, o, ob, osm)
    eb = bsn == 0 or bsm == 0
    rows = max(1, min(k, SHORT_BLOCK // v1))
    tiles = (np.empty(rows * v1 if ea else 0, dtype=o.dtype),
             np.empty(rows * v1 if eb else 0, dtype=o.dtype))
    # borrowed (held below): _expand's row views and the blocks' slices count nothing
    ta, tb = borrowed(tiles)
    for r0 in range(0, k, rows):
        kk = min(rows, k - r0)
        n = kk * v1
        if ea and (r0 == 0 or asm != 0):
            _expand(a, ab, asm, asn, ta, r0, kk, v1)
        if eb and (r0 == 0 or bsm != 0):
            _expand(b, bb, bsm, bsn, tb, r0, kk, v1)
        ao = ab + r0 * asm
        bo = bb + r0 * bsm
        oo = ob + r0 * osm
        if osm != v1 or (not ea and asm != v1) or (not eb and bsm != v1):
            _zip_tiles(code, a, ao, asm, ta, ea, b, bo, bsm, tb, eb, o, oo, osm, kk, v1, v1,
                       np.int64(0))
        elif ea and eb:     # rows follow each other everywhere: one call for the block
            zip_contig(code, readonly(ta)[:n], readonly(tb)[:n], o[oo:oo + n], n)
        elif ea:
            zip_contig(code, readonly(ta)[:n], b[bo:bo + n], o[oo:oo + n], n)
        else:
            zip_contig(code, a[ao:ao + n], readonly(tb)[:n], o[oo:oo + n], n)
    hold(tiles)


@callee(cache=True)
def _repeated_row(code, left, x, xb, r, rb, o, ob, k, v1):
    """``k`` rows of ``v1`` elements that follow each other in ``x`` (from ``x[xb]``) and in
    the output (from ``o[ob]``, not x's own memory), each combined with the same row
    ``r[rb:rb + v1]``: ``x op row`` when ``left``, else ``row op x`` (x + bias, bias - x).
    The row is repeated into a scratch tile of whole rows (at most SHORT_BLOCK elements)
    once, then each block of rows is ONE contiguous zip over x, the tile and the output:
    no switch call, row views or scalar loop tail per row. Normal stores: streaming these
    16 KB blocks made an add of a bias row over 30000 x 1000 float32 slower (3.8 -> 6.2
    ms, 2 threads)."""
    rows = min(k, SHORT_BLOCK // v1)
    tile = np.empty(rows * v1, dtype=o.dtype)
    t = borrowed(tile)
    _fill_repeated(r[rb:rb + v1], t, rows * v1)
    tr = readonly(t)
    for r0 in range(0, k, rows):
        n = min(rows, k - r0) * v1
        xs = x[xb + r0 * v1:xb + r0 * v1 + n]
        ts = tr[:n]
        # one call site of the op switch (two made the binary driver compile ~0.5 s longer)
        first, second = (xs, ts) if left else (ts, xs)
        zip_contig(code, first, second, o[ob + r0 * v1:ob + r0 * v1 + n], n)
    hold(tile)


@njit(inline="always")
def _period_stream(code, x, xb, r, rb, o, ob, k, v1):
    """``k`` rows of ``v1`` elements that follow each other in ``x`` (from ``x[xb]``) and in
    the output (from ``o[ob]``, not x's own memory), each ``x op row`` with the same row
    ``r[rb:rb + v1]``, as ONE loop storing the output's whole lines streaming
    (``zip_period_blocks``; the driver fences). Rows of up to REPEAT_ROW_MAX elements are
    repeated into a scratch tile of whole rows first, which is then the period, so that few
    streaming blocks straddle a row end. False (nothing done) when the output is too short
    to stream or no element of it starts a line. Row by row, rows under 16 KB could not
    stream (a row's four switch calls cost more than streaming saved) and their normal
    stores read every output line before writing it."""
    n = k * v1
    ov = o[ob:ob + n]
    w = BLOCK_BYTES // o.itemsize
    g, e = stream_span(ov, w)
    rows = min(k, SHORT_BLOCK // v1) if v1 <= REPEAT_ROW_MAX else 0
    p = rows * v1 if rows > 0 else v1
    if g < 0 or p < w:
        return False
    tile = np.empty(rows * v1, dtype=o.dtype)
    t = borrowed(tile)
    src, so = r, rb
    if rows > 0:
        _fill_repeated(r[rb:rb + v1], t, rows * v1)
        src, so = readonly(t), np.int64(0)
    buf = np.empty(w, dtype=o.dtype)
    bb = borrowed(buf)          # both borrowed: the switch slices them per piece
    xs = x[xb:xb + n]
    # the head [0, g), the streamed blocks [g, e), the tail [e, n) from one call site of the
    # switch (each one more costs compile time); the head and tail, shorter than a block,
    # come back in buf and are stored normally
    for q in range(3):
        lo, hi = (0, g) if q == 0 else ((g, e) if q == 1 else (e, n))
        if hi > lo:
            zip_period_blocks(code, xs, src, so, p, ov, lo, hi, bb, q == 1)
            if q != 1:
                for i in range(hi - lo):
                    ov[lo + i] = buf[i]
    hold(buf)
    hold(tile)
    return True


@callee(cache=True, error_model="numpy")
def _binary_run(a, b, o, common, entries, idx, end):
    """Entry ``idx`` and, when it is one row whose three operands have unit column stride
    (a row-broadcast side included) or one input has one value per row, the entries after
    it (up to ``end``) that continue it row by row with the same kernel and columns, in ONE
    op-switch call over those rows (a few, for short rows with one value per row).
    Rows wider than their tiles, in tiles side by side row after row, run as whole rows
    (:func:`_whole_rows`). Returns how many entries ran. A row of 1000 elements costs ~80
    ns of vector work and, one entry at a time, ~50 ns more of entry decoding and switch
    dispatch. A long run whose other input repeats one row goes to :func:`_period_stream`
    when the output streams (one loop of streaming stores), else to :func:`_repeated_row`
    (one contiguous call per block of rows)."""
    e, oi, local, r0, r1, v1, t1, w1 = _run_start(common, entries, idx, np.int64(3))
    if v1 == 0:
        _binary_entry(a, b, o, common, entries, e, oi)
        return 1
    k = _run_length(common, entries, idx, end, r0, _ROWS_AT_BINARY)
    used = k
    if k == 1 and r1 == 0 and v1 < common[C_N]:
        # a row in several tiles side by side: the whole rows those entries cover, as rows
        rows, taken = _whole_rows(common, entries, idx, end, r0)
        if rows > 0:
            k, v1, used = rows, common[C_N], taken
    asm = common[C_OPS + OP_BLOCK + OP_SM]
    asn = common[C_OPS + OP_BLOCK + OP_SN]
    bsm = common[C_OPS + 2 * OP_BLOCK + OP_SM]
    bsn = common[C_OPS + 2 * OP_BLOCK + OP_SN]
    osm = common[C_OPS + OP_SM]
    code = common[C_OPBASE] + local // N_SLOTS
    ab = outer_offset(common, np.int64(1), oi) + r0 * asm + r1 * asn
    bb = outer_offset(common, np.int64(2), oi) + r0 * bsm + r1 * bsn
    ob = outer_offset(common, np.int64(0), oi) + r0 * osm + r1
    streams = _streaming(common, _STREAM_AT_BINARY)
    streaming = streams and STREAMS_BINARY[code]
    # a row repeated for every row (a bias row) on the right or the left, the other input's
    # rows and the output's following each other, the output not that input (in place)
    right = (osm == v1 and bsm == 0 and bsn == 1 and asn == 1 and asm == v1
             and not same_element(a, ab, o, ob))
    left = (osm == v1 and asm == 0 and asn == 1 and bsn == 1 and bsm == v1
            and not same_element(b, bb, o, ob))
    # x: the input whose rows follow each other, r: the repeated row
    xv, xo, rv, ro = (a, ab, b, bb) if right else (b, bb, a, ab)
    if streaming and k > 1 and STREAMS_PERIOD[code] and (right or left):
        # in an output larger than the cache, added (row + x as x + row)
        if _period_stream(code, xv, xo, rv, ro, o, ob, k, v1):
            return used
    if k * v1 >= REPEAT_RUN_MIN and v1 <= REPEAT_ROW_MAX and (right or left):
        _repeated_row(code, right, xv, xo, rv, ro, o, ob, k, v1)     # x op row, or row op x
        return used
    if streams and (k == 1 or osm == v1) and ((asm == 0 and asn == 0 and bsn == 1
                                               and (k == 1 or bsm == v1)) or
                                              (bsm == 0 and bsn == 0 and asn == 1
                                               and (k == 1 or asm == v1))):
        # one value for every element (x * 0.5, x ** 2.5), rows that follow each other
        on_left = asn == 0
        sv, so = (b, bb) if on_left else (a, ab)
        if not same_element(sv, so, o, ob):
            n = k * v1
            xv = sv[so:so + n]
            _buffered_stream(code, ONE_LEFT if on_left else ONE_RIGHT, xv, xv,
                             a[ab] if on_left else b[bb], o[ob:ob + n])
            return used
    if (streams and v1 * o.itemsize >= STREAM_ROW_BYTES
            and ((asn == 0 and bsn == 1) or (bsn == 0 and asn == 1))):
        # one value per row (x - mean[:, None]) or rows with gaps: long rows one by one
        on_left = asn == 0
        sv, so, ssm = (b, bb, bsm) if on_left else (a, ab, asm)
        cv, co, csm = (a, ab, asm) if on_left else (b, bb, bsm)
        if not same_rows(sv, so, ssm, o, ob, osm):
            for r in range(k):
                xv = sv[so + r * ssm:so + r * ssm + v1]
                _buffered_stream(code, ONE_LEFT if on_left else ONE_RIGHT, xv, xv,
                                 cv[co + r * csm], o[ob + r * osm:ob + r * osm + v1])
            return used
    if (streams and STREAMS_BUFFERED[code] and asn == 1 and bsn == 1
            and (k == 1 or (asm == v1 and bsm == v1 and osm == v1))
            and not same_element(a, ab, o, ob) and not same_element(b, bb, o, ob)):
        n = k * v1                   # rows that follow each other, by an op without a loop
        _buffered_stream(code, ZIP_BOTH, a[ab:ab + n], b[bb:bb + n], a[ab], o[ob:ob + n])
        return used
    if (streaming and asn == 1 and bsn == 1
            and not same_rows(a, ab, asm, o, ob, osm) and not same_rows(b, bb, bsm, o, ob, osm)):
        buf = np.empty(BLOCK_BYTES // o.itemsize, dtype=o.dtype)
        if k == 1 or (asm == v1 and bsm == v1 and osm == v1):   # rows that follow each other
            n = k * v1
            _stream_zip(code, a[ab:ab + n], b[bb:bb + n], o[ob:ob + n], buf)
            return used
        if v1 * o.itemsize >= STREAM_ROW_BYTES:
            for r in range(k):
                _stream_zip(code, a[ab + r * asm:ab + r * asm + v1],
                            b[bb + r * bsm:bb + r * bsm + v1], o[ob + r * osm:ob + r * osm + v1],
                            buf)
            return used
    _binary_rows(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, k, v1)
    return used


@callee(cache=True)
def _binary_rows(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, k, v1):
    """``k`` rows of ``v1`` elements, the output's and each input's unit-stride or (one
    input at most) one value per row: short rows with a repeating input through
    :func:`_short_rows`, the others in one zip_rows call (one zip_scalar call per row
    when an input has one value per row)."""
    repeats = asn == 0 or bsn == 0 or asm == 0 or bsm == 0
    # a row repeated for every row (a bias row) and rows of at least ROW_REPEAT_DIRECT:
    # zip_rows reads it in place, row after row
    row_only = asn == 1 and bsn == 1 and (asm == 0) != (bsm == 0)
    if v1 < SHORT_ROW and repeats and k > 1 and not (row_only and v1 >= ROW_REPEAT_DIRECT):
        _short_rows(code, a, ab, asm, asn, b, bb, bsm, bsn, o, ob, osm, k, v1)
    elif asn == 1 and bsn == 1:
        if same_rows(a, ab, asm, o, ob, osm):       # in place: see same_element
            _rows_in_place(code, True, a, ab, asm, b, bb, bsm, o, ob, osm, k, v1)
        elif same_rows(b, bb, bsm, o, ob, osm):
            _rows_in_place(code, False, a, ab, asm, b, bb, bsm, o, ob, osm, k, v1)
        else:
            zip_rows(code, a, ab, asm, b, bb, bsm, o, ob, osm, k, v1)
    else:
        _scalar_rows(code, a, ab, asm, asn, b, bb, bsm, o, ob, osm, k, v1)


@njit(inline="always")
def _rows_in_place(code, left, a, ab, asm, b, bb, bsm, o, ob, osm, k, v1):
    """o = a op b over ``k`` unit-stride rows when the output is one input itself (the left
    one if ``left``, else the right one): blocks of at most SHORT_BLOCK elements of o's rows
    are copied into a scratch tile that the zip_rows call reads in that input's place
    (inlined into _binary_rows, whose zip_rows it calls with types it has already: calling
    the switches' in-place zip_right from here made the binary driver take 2.7 s longer to
    compile)."""
    w = min(v1, SHORT_BLOCK)
    rows = max(1, min(k, SHORT_BLOCK // w))
    tile = np.empty(rows * w, dtype=o.dtype)
    for r0 in range(0, k, rows):
        kk = min(rows, k - r0)
        for c0 in range(0, v1, w):
            cw = min(w, v1 - c0)
            for r in range(kk):
                src = o[ob + (r0 + r) * osm + c0:ob + (r0 + r) * osm + c0 + cw]
                t = tile[r * cw:(r + 1) * cw]
                for j in range(cw):
                    t[j] = src[j]
            if left:
                zip_rows(code, readonly(tile), np.int64(0), cw, b, bb + r0 * bsm + c0, bsm, o,
                         ob + r0 * osm + c0, osm, kk, cw)
            else:
                zip_rows(code, a, ab + r0 * asm + c0, asm, readonly(tile), np.int64(0), cw, o,
                         ob + r0 * osm + c0, osm, kk, cw)


@callee(cache=True)
def run_size(common, total, elements):
    """Entries per parallel work item of the unary and binary drivers: RUN_ENTRIES, or, for
    rows shorter than ``elements`` / RUN_ENTRIES, as many as make about ``elements``
    elements (one-row entries of 64 elements, 8 at a time, spent more on the item's
    decoding than on its vector work); and at least 64 items for the threads to share.
    ``elements``: RUN_ELEMENTS, or REPEAT_RUN_ELEMENTS for a binary op with a repeating
    input (longer runs allocate, and for a repeated row fill, their scratch tile once for
    more rows)."""
    per = max(RUN_ENTRIES, elements // max(1, common[C_N]))
    return max(1, min(per, total // 64))


@njit(inline="always")
def _repeats(common):
    """Whether a binary op's common area has an input that repeats: one row for every row,
    or one value per row."""
    a, b = C_OPS + OP_BLOCK, C_OPS + 2 * OP_BLOCK
    return (common[a + OP_SM] == 0 or common[a + OP_SN] == 0 or common[b + OP_SM] == 0
            or common[b + OP_SN] == 0)


def binary_driver(a, b, o, common, entries):
    """out = op(a, b) with broadcasting expressed as zero strides in the common area."""
    a, b, o, common, entries = borrowed((a, b, o, common, entries))
    n_entries = entries.shape[0]
    total = n_entries * common[C_NOUTER]
    if common[C_M] * common[C_N] * common[C_NOUTER] < SERIAL_ELEMENTS:
        idx = 0
        while idx < total:
            idx += binary_run((a, b, o, common, entries, idx, total))
        store_fence()
    else:
        # runs of up to run_size entries per parallel item (one switch call when they
        # continue each other row by row), at least 64 items for the threads to share
        total = live_total(common, entries)
        run = run_size(common, total,
                       REPEAT_RUN_ELEMENTS if _repeats(common) else RUN_ELEMENTS)
        c = tiles_per_row(common, entries)  # items of whole rows (see _whole_rows)
        run = (run + c - 1) // c * c
        for blk in prange((total + run - 1) // run):
            idx = blk * run
            end = min(total, idx + run)
            while idx < end:
                idx += binary_run((a, b, o, common, entries, idx, end))
            store_fence()


def _ro(dtype):
    return types.Array(getattr(types, carrier(dtype)), 1, "C", readonly=True)


def _rw(dtype):
    return types.Array(getattr(types, carrier(dtype)), 1, "C")


_I64_1D = types.Array(types.int64, 1, "C", readonly=True)
_I64_2D = types.Array(types.int64, 2, "C", readonly=True)


def unary_signature(dtype):
    """(x, out, common, entries, attrs) of the unary (and copy) driver; the data arrays of a
    half-precision dtype are its carrier, its attributes float32 (``abi.storage``)."""
    return (_ro(dtype), _rw(dtype), _I64_1D, _I64_2D, _ro(compute(dtype)))


def binary_signature(dtype):
    """(a, b, out, common, entries) of the binary driver."""
    return (_ro(dtype), _ro(dtype), _rw(dtype), _I64_1D, _I64_2D)


#: the unary driver's dtypes: the unary family's and the copy family's item sizes
_UNARY_DTYPES = CATALOG.families["unary"].dtypes + CATALOG.families["copy"].dtypes
#: the runs reached by address (``address_link``): each driver's prange body holds a call, so
#: its four levels (parfor body, two wrappers, driver) do not optimize and generate the
#: op switches' code again; unary serves the copy family's item sizes too
UNARY_RUNS = Link("elementwise.unary_run", lambda: _unary_run,
                  lambda dt: unary_signature(dt)[:4] + (types.int64, types.int64,
                                                        unary_signature(dt)[4]),
                  _UNARY_DTYPES, types.int64)
BINARY_RUNS = Link("elementwise.binary_run", lambda: _binary_run,
                   lambda dt: binary_signature(dt) + (types.int64, types.int64),
                   CATALOG.families["binary"].dtypes, types.int64)
unary_run = UNARY_RUNS.call
binary_run = BINARY_RUNS.call


def _unary_tile_signature(dt, scratch):
    """(code, x, xb, xsm, xsn, o, ob, osm, osn, v0, v1, *middle, a0, a1, [full,] attrs) of
    ``_unary_rows`` (middle: mode1, t1, w1) or, when ``scratch``, of ``_unary_scratch``
    (middle: t0, t1, pf; then the flag full)."""
    i64 = types.int64
    x, o, _, _, attrs = unary_signature(dt)
    c = getattr(types, compute(dt))
    head = (i64, x, i64, i64, i64, o, i64, i64, i64, i64, i64) + (i64,) * 3 + (c, c)
    return head + ((types.boolean, attrs) if scratch else (attrs,))


#: a run's rows and scratch tiles reached by address: compiled once, not optimized and
#: generated again inside the run (unary float32 first compile, fresh caches, alternating:
#: 10.3-11.6 -> 9.4-10.5 s)
UNARY_ROWS = Link("elementwise.unary_rows", lambda: _unary_rows,
                  lambda dt: _unary_tile_signature(dt, False), _UNARY_DTYPES)
UNARY_SCRATCH = Link("elementwise.unary_scratch", lambda: _unary_scratch,
                     lambda dt: _unary_tile_signature(dt, True), _UNARY_DTYPES)
unary_rows = UNARY_ROWS.call
unary_scratch = UNARY_SCRATCH.call
#: functions each driver of this module reaches by address: drivers.get fills their slots first
LINKS = {"unary_driver": (UNARY_ROWS, UNARY_SCRATCH, UNARY_RUNS),
         "binary_driver": (BINARY_RUNS,)}
