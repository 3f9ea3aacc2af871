"""CPU driver of fused sequences (seed 004, Fig. 13): a cascade of kernels run tile by tile.

One compiled driver per dtype runs ANY chain: the chain is data (a step program, see
:mod:`steps`), interpreted per tile by :func:`steps.apply_steps_range`, so a chain never seen
before compiles nothing. Intermediates live in a per-thread tile buffer (or, for elementwise
chains writing a unit-stride output, in the output tile itself): no full-size intermediate
array is ever allocated.

Arguments of the driver::

    x        the chain's input (flat buffer, read through the common area, operand 1)
    o        output of the tile dtype (operand 0); for a reduction over all elements unused
    oi, of   int64 / float64 outputs of reductions whose result is not of the tile dtype
             (integer sums, integer means); 1-element dummies otherwise
    common   the common area (common_area.C_*), operands: 0 output, 1 x, 2..5 side inputs
    entries  the table's entries (tiles of the inner plane, VARIABLE_FULL tails)
    prog     the step program (nsteps, 4) of the whole chain
    pattrs   step attributes in the tile's computed dtype (float32 for half precision)
    fctl     int64 control block (F_* below): tile shape, tail op, where it sits in prog
    sides    UniTuple of 4 side inputs (flat buffers; geometry from the common area)

Tail ops (``fctl[F_TAIL]``): T_NONE (elementwise chain), T_ROWWISE (softmax, log_softmax,
layer_norm, rms_norm over the last axis: steps ``prog[:split]`` before it, ``prog[split:]``
after it, per row), T_REDUCE_ROWS (sum, mean, max, min over the last axis: one output per
row) and T_REDUCE_ALL (over every element: one partial per work item, combined in the
driver into element 0 of the output buffer of its kind). For T_ROWWISE and T_REDUCE_ROWS a
tile spans whole rows (the entries' column tile covers the row).

Half precision (carriers, ``half.py``): the tile buffer holds the format, every step widens,
computes in float32 and rounds (the generated switches of its kind), exactly as the ops run
one by one; the tails load and store through ``half.load``/``half.store``, so a fused chain
gives bit for bit what its ops give unfused.

Streaming (``cpu.streaming``): when the control block's F_STREAM is set (an output larger
than the last-level cache), the chain ``x op side, then relu`` (add, sub, mul) over rows that
follow each other runs as one loop that stores whole output lines streaming
(:func:`_bias_relu_stream`); every other elementwise chain with unit-stride rows runs through
the interpreter a block of STREAM_CHAIN_BYTES at a time in the tile buffer, each block
streamed to the output (:func:`_chain_stream`). A last step that is unary or has a constant
operand runs as the block streams out, a piece of LAST_BLOCK_BYTES at a time, beside the
prefetches of the next block's input (:func:`_last_stream`), so that memory and compute
overlap.

Compile time: Numba optimizes and generates the code of a separately compiled function
again in every caller up to the driver (each caller links its callees' code), so the
helpers called from one place (the tile functions, ``_work_item``) are inlined at Numba's
IR level (``inline="always"``), and helpers are called with int64, never literal, integers
(a literal argument compiles a helper once more for the literal's type).
"""
import numpy as np
from numba import njit, prange, types

from ..abi.common_area import (C_M, C_N, C_NOUTER, C_OPS, E_ANCH0, E_ANCH1, E_OFF0, E_OFF1,
                           OP_BLOCK, OP_SM, OP_SN)
from .callee import callee
from .elementwise import (SERIAL_ELEMENTS, STREAMS_BINARY, outer_offset, resolve, same_rows,
                          stream_span)
from .prefetch import prefetch_on
from .streaming import AHEAD_BYTES, BLOCK_BYTES, stream_block, store_fence
from .switches import (map_contig, zip_contig, zip_relu_period_stream, zip_rows, zip_scalar_a,
                       zip_scalar_b)
from .tile_copy import gather_tile, scatter_tile
from ..abi.vocabulary import MAX, MEAN, RELU, SUM
from .fused_tail import (JOIN_SCRATCH, _partials, _reduce_block, _row_op, _store_sum, _sum_zero,
                         joined_rows)
from .half import compute_empty, load, store
from .reduce_runs import N_CHUNKS, SERIAL_ROW_READS, chunk_start, nan_max, nan_min
from ..abi.storage import carrier, compute
from .step_link import STEPS
from .address_link import Link
from .borrowed import borrowed, hold
from .readonly_view import readonly
from .serial_zeros import zeros
from .steps import (G_COL, G_OFF, G_ROW, K_CONST_L, K_CONST_R, K_SIDE_R, K_UNARY, MAX_SIDES,
                    P_ATTR, P_CODE, P_KIND, P_SIDE, apply_steps_range)

from ..abi.fused_table import (CHUNK, F_EPS, F_NSIDES, F_SIZE, F_SPLIT, F_STREAM, F_T0,  # noqa: F401
                               F_T1, F_TAIL, F_TCODE, FUSED_DTYPES, T_NONE, T_REDUCE_ALL,
                               T_REDUCE_ROWS, T_ROWWISE)
# work items per block of the parallel distribution (see _chunk)
MAX_BLOCK = 16
# bytes of an elementwise chain's output computed per block when the output streams
# (_chain_stream); 30000 x 1000 float32, 2 threads, add(bias), relu, mul(2), exp, ms: in the
# output tile 16.1, blocks of 8 KB 14.2, 16 KB 13.9, 32 KB 12.4-13.4, 64 KB 13.8, 128 KB
# 13.8 (the interpreter's per-block calls cost more with smaller blocks)
STREAM_CHAIN_BYTES = 32768
# a chain whose last step treats every element alike (unary, constant) runs that step while
# it streams, LAST_BLOCK_BYTES at a time into a small buffer, each piece stored streaming and
# the next block's input prefetched beside it (_last_stream): memory works while the core
# computes. The whole block computed first, then streamed out, left memory idle during the
# compute and the core idle during the stores (a Numba model of add(bias), relu, mul(2),
# exp over 3e7 float32, 2 threads: 10.7 ms; the last step streamed: 6.8; one loop: 4.8)
LAST_BLOCK_BYTES = 1024
X_OP = 1
SIDE_OP0 = 2


# ---- tiles ---------------------------------------------------------------------------------
@callee(cache=True, error_model="numpy")
def _side_geometry(common, oi, nsides, sgeo):
    """sgeo rows (offset at outer index oi, 0, row stride, column stride) of each side."""
    for s in range(nsides):
        blk = C_OPS + (SIDE_OP0 + s) * OP_BLOCK
        sgeo[s, G_OFF] = outer_offset(common, SIDE_OP0 + s, oi)
        sgeo[s, G_ROW] = common[blk + OP_SM]
        sgeo[s, G_COL] = common[blk + OP_SN]


@callee(cache=True, error_model="numpy")
def _first_step_from(x, o, prog, pattrs, sides, sgeo, xb, xsm, ob, osm, v0, v1, r0, r1):
    """Run the chain's first step reading the unit-stride rows of x and writing the output
    rows (no copy of x first); False if the first step cannot (strided side, no steps)."""
    if prog.shape[0] == 0:
        return False
    kind = prog[0, P_KIND]
    code = prog[0, P_CODE]
    # rows of x and of the output that follow each other (a tile of whole rows): one run,
    # one switch call (see steps._apply_steps_range)
    joined = xsm == v1 and osm == v1
    runs = np.int64(1) if joined else v0
    n = v0 * v1 if joined else v1
    if kind == K_UNARY or kind == K_CONST_R or kind == K_CONST_L:
        a0 = pattrs[prog[0, P_ATTR]]
        a1 = pattrs[prog[0, P_ATTR] + 1] if kind == K_UNARY else a0
        for i in range(runs):
            xv = x[xb + i * xsm:xb + i * xsm + n]
            ov = o[ob + i * osm:ob + i * osm + n]
            if kind == K_UNARY:
                map_contig(code, xv, ov, n, a0, a1)
            elif kind == K_CONST_R:
                zip_scalar_b(code, xv, store(o, a0), ov, n)
            else:
                zip_scalar_a(code, store(o, a0), xv, ov, n)
        return True
    si = prog[0, P_SIDE]
    rs = sgeo[si, G_ROW]
    cs = sgeo[si, G_COL]
    if cs != 0 and cs != 1:
        return False
    side = sides[si]
    sb0 = sgeo[si, G_OFF] + r0 * rs + r1 * cs
    if joined and cs == 1 and rs == v1:
        xv = x[xb:xb + n]
        ov = o[ob:ob + n]
        if kind == K_SIDE_R:
            zip_contig(code, xv, side[sb0:sb0 + n], ov, n)
        else:
            zip_contig(code, side[sb0:sb0 + n], xv, ov, n)
    elif cs == 1:                       # one call for the tile's rows
        if kind == K_SIDE_R:
            zip_rows(code, x, xb, xsm, side, sb0, rs, o, ob, osm, v0, v1)
        else:
            zip_rows(code, side, sb0, rs, x, xb, xsm, o, ob, osm, v0, v1)
    else:
        for i in range(v0):
            xv = x[xb + i * xsm:xb + i * xsm + v1]
            ov = o[ob + i * osm:ob + i * osm + v1]
            if kind == K_SIDE_R:
                zip_scalar_b(code, xv, side[sb0 + i * rs], ov, v1)
            else:
                zip_scalar_a(code, side[sb0 + i * rs], xv, ov, v1)
    return True


@njit(inline="always")
def _bias_relu_stream(x, o, prog, sides, sgeo, xb, xsm, ob, osm, v0, v1, r0, r1):
    """A two-step chain ``x op side`` (add, sub or mul; the side a bias row, or laid out as
    the tile) then relu over a tile of rows that follow each other in x and the output,
    writing the output with streaming stores in ONE loop (``zip_relu_period_stream``):
    the interpreter's two passes (the first one memory-bound, the second computing from
    cache) do not overlap memory with compute, and the first pass reads every output line
    before writing it. False (nothing done) for any other chain or layout."""
    if (prog.shape[0] != 2 or prog[0, P_KIND] != K_SIDE_R or prog[1, P_KIND] != K_UNARY
            or prog[1, P_CODE] != RELU or not STREAMS_BINARY[prog[0, P_CODE]]
            or xsm != v1 or osm != v1):
        return False
    si = prog[0, P_SIDE]
    rs = sgeo[si, G_ROW]
    if sgeo[si, G_COL] != 1 or (rs != 0 and rs != v1):
        return False
    n = v0 * v1
    ov = o[ob:ob + n]
    w = BLOCK_BYTES // o.itemsize
    p = v1 if rs == 0 else n
    g, e = stream_span(ov, w)
    if g < 0 or p < w:
        return False
    buf = np.empty(w, dtype=o.dtype)
    # buf borrowed: the switch slices it per block, and a view of a counted array costs two
    # atomics (52% of the time in NRT_incref/decref with the count); held past the call
    # (Numba frees a variable after its last use, the borrowed() call: without hold the
    # switch wrote into freed memory)
    zip_relu_period_stream(prog[0, P_CODE], x[xb:xb + n], sides[si],
                           sgeo[si, G_OFF] + r0 * rs + r1, p, ov, g, e, n,
                           borrowed(buf))
    hold(buf)
    store_fence()
    return True


@njit(inline="always")
def _stream_out(buf, o, d, n):
    """``o[d:d + n] = buf[:n]``, the whole lines of the output in blocks of BLOCK_BYTES with
    streaming stores (``stream_span``), the partial lines at both ends (and an output too
    short to stream) with normal ones."""
    ov = o[d:d + n]
    w = BLOCK_BYTES // o.itemsize
    g, e = stream_span(ov, w)
    if g < 0:
        g = e = n
    for i in range(g):
        ov[i] = buf[i]
    for s in range(g, e, w):
        stream_block(buf[s:], ov, s)
    for i in range(e, n):
        ov[i] = buf[i]


@njit(inline="always")
def _step_into(kind, code, a0, a1, c, src, dst, n):
    """``dst[:n] = step(src[:n])`` for a unary (``a0``, ``a1``) or constant (``c``) step."""
    if kind == K_UNARY:
        map_contig(code, src, dst, n, a0, a1)
    elif kind == K_CONST_R:
        zip_scalar_b(code, src, c, dst, n)
    else:
        zip_scalar_a(code, c, src, dst, n)


@callee(cache=True, error_model="numpy")
def _last_stream(prog, pattrs, o, d, src, soff, n, x, pf, part):
    """``o[d:d + n] = last step(src[soff:soff + n])`` for a program whose last step is unary
    or constant: the whole lines in pieces of ``part.size`` elements computed into ``part``
    and stored streaming, each piece prefetching the lines of ``x`` at ``pf`` + its position
    (the next block's input); the partial lines at both ends (and an output too short to
    stream) stored normally. Reached by address (``LAST``): the chunk's code holds a call,
    not the switches' loops generated once more. All arrays borrowed by the caller."""
    s = prog.shape[0] - 1
    kind = prog[s, P_KIND]
    code = prog[s, P_CODE]
    a0 = pattrs[prog[s, P_ATTR]]
    a1 = pattrs[prog[s, P_ATTR] + 1] if kind == K_UNARY else a0
    c = store(o, a0)
    w = BLOCK_BYTES // o.itemsize
    m = part.size
    ov = o[d:d + n]
    g, e = stream_span(ov, w)
    if g < 0:
        g = e = n
    if g > 0:
        _step_into(kind, code, a0, a1, c, src[soff:soff + g], ov[:g], g)
    q = g
    while q < e:
        k = min(m, e - q)
        prefetch_on(x, pf + q, k)
        _step_into(kind, code, a0, a1, c, src[soff + q:soff + q + k], part, k)
        for t in range(0, k, w):
            stream_block(part[t:], ov, q + t)
        q += k
    if e < n:
        _step_into(kind, code, a0, a1, c, src[soff + e:soff + n], ov[e:], n - e)


@njit(inline="always")
def _last_is_elementwise(prog):
    """Whether the program's last step treats every element alike (unary or constant)."""
    k = prog[prog.shape[0] - 1, P_KIND]
    return k == K_UNARY or k == K_CONST_R or k == K_CONST_L


@njit(inline="always")
def _chain_stream(x, o, prog, pattrs, sides, sgeo, buf, xb, xsm, ob, osm, v0, v1, r0, r1):
    """An elementwise chain over a tile whose output streams (``cpu.streaming``, unit-stride
    rows in x and the output), in blocks of ``buf.size`` elements: whole rows (a block of
    rows that follow each other in the output), or a long row's columns. Each block is
    computed in ``buf`` (in L1 while every step runs over it; the first step reads x, its
    rows prefetched AHEAD_BYTES on) and stored by :func:`_stream_out`. In the output tile
    itself, the first step read every output line from memory before writing it, and the
    steps after it, computing from cache, did not overlap memory. The caller fences."""
    cap = buf.size
    rows = max(np.int64(1), cap // v1) if osm == v1 else np.int64(1)
    cols = min(v1, cap)
    ahead = AHEAD_BYTES // x.itemsize
    z = np.int64(0)
    nsteps = prog.shape[0]
    last = _last_is_elementwise(prog)
    part = np.empty(LAST_BLOCK_BYTES // o.itemsize if last else 0, dtype=o.dtype)
    # borrowed: every piece slices part and the buffer, and a view of a counted array costs
    # two atomics (see _bias_relu_stream); held past the loop
    pb, src = borrowed((part, readonly(buf)))
    for i in range(0, v0, rows):
        nr = min(rows, v0 - i)
        for j in range(0, v1, cols):
            nc = min(cols, v1 - j)
            xr = xb + i * xsm + j
            d = ob + i * osm + j
            if last and nsteps == 1 and (nr == 1 or xsm == nc):
                # the one step reads x itself, the lines ahead prefetched as it goes
                last_stream((prog, pattrs, o, d, x, xr, nr * nc, x, xr + ahead, pb))
                continue
            for t in range(nr):
                prefetch_on(x, xr + t * xsm + ahead, nc)
            first = 0
            if first_step_from((x, buf, prog, pattrs, sides, sgeo, xr, xsm, z, nc, nr, nc,
                                r0 + i, r1 + j)):
                first = 1
            else:
                gather_tile(x, xr, xsm, np.int64(1), nr, nc, buf, nc, z)
            if last and first < nsteps:
                apply_steps_range(prog, first, nsteps - 1, pattrs, buf, z, nc, nr, nc, r0 + i,
                                  r1 + j, 0, sides, sgeo)
                # the next block's input follows this one's when the tile's rows follow each
                # other in x (else the prefetches only miss)
                last_stream((prog, pattrs, o, d, src, z, nr * nc, x, xr + nr * nc, pb))
                continue
            apply_steps_range(prog, first, nsteps, pattrs, buf, z, nc, nr, nc, r0 + i, r1 + j,
                              0, sides, sgeo)
            _stream_out(buf, o, d, nr * nc)
    hold((part, buf))


@njit(inline="always")
def _runs_in_output(common):
    """Whether an elementwise chain runs in the output tile itself (x and the output walk
    their rows with unit stride): then it never touches the tile buffer."""
    return common[C_OPS + X_OP * OP_BLOCK + OP_SN] == 1 and common[C_OPS + OP_SN] == 1


@njit(inline="always")
def _elementwise_tile(x, o, common, prog, pattrs, sides, sgeo, buf, oi, r0, v0, r1, v1, t1,
                      stream):
    """An elementwise chain on a v0 x v1 tile at (r0, r1): in the output tile itself when
    both x and the output walk their rows with unit stride (the first unary or constant step
    reads x directly), else gathered into ``buf`` and scattered back."""
    xblk = C_OPS + X_OP * OP_BLOCK
    xsm = common[xblk + OP_SM]
    xsn = common[xblk + OP_SN]
    osm = common[C_OPS + OP_SM]
    osn = common[C_OPS + OP_SN]
    xb = outer_offset(common, np.int64(X_OP), oi) + r0 * xsm + r1 * xsn
    ob = outer_offset(common, np.int64(0), oi) + r0 * osm + r1 * osn
    nsteps = prog.shape[0]
    if _runs_in_output(common):
        # in place (the output is x itself, see elementwise.same_element): the interpreter
        # runs every step on the output, which holds x already (a first step reading x and
        # writing the output would run its scalar fallback loop)
        first = 0
        if not same_rows(x, xb, xsm, o, ob, osm):
            if stream and _bias_relu_stream(x, o, prog, sides, sgeo, xb, xsm, ob, osm, v0, v1,
                                            r0, r1):
                return
            if stream and buf.size > 0:
                _chain_stream(x, o, prog, pattrs, sides, sgeo, buf, xb, xsm, ob, osm, v0, v1,
                              r0, r1)
                store_fence()
                return
            if first_step_from((x, o, prog, pattrs, sides, sgeo, xb, xsm, ob, osm, v0, v1,
                                r0, r1)):
                first = 1
            else:
                for i in range(v0):
                    xr = xb + i * xsm
                    orow = ob + i * osm
                    dst = o[orow:orow + v1]
                    src = x[xr:xr + v1]
                    for j in range(v1):
                        dst[j] = src[j]
        apply_steps_range(prog, first, nsteps, pattrs, o, ob, osm, v0, v1, r0, r1, 0, sides,
                          sgeo)
        return
    gather_tile(x, xb, xsm, xsn, v0, v1, buf, t1, t1)
    apply_steps_range(prog, 0, nsteps, pattrs, buf, 0, t1, v0, v1, r0, r1, 0, sides, sgeo)
    scatter_tile(o, ob, osm, osn, v0, v1, buf, t1, np.int64(0))


@njit(inline="always")
def _row_tile(x, o, oi_out, of_out, common, prog, pattrs, fctl, sides, sgeo, buf, oi,
              r0, v0):
    """Rows r0..r0+v0 of a T_ROWWISE / T_REDUCE_ROWS tile (whole rows).

    Rows of at most CHUNK elements are processed as blocks of rows in ``buf``; longer rows
    one at a time in column chunks of CHUNK (a row-wise op keeps the whole row in ``buf``).
    """
    n = common[C_N]
    tail = fctl[F_TAIL]
    code = fctl[F_TCODE]
    split = fctl[F_SPLIT]
    nsteps = prog.shape[0]
    xblk = C_OPS + X_OP * OP_BLOCK
    xsm = common[xblk + OP_SM]
    xsn = common[xblk + OP_SN]
    osm = common[C_OPS + OP_SM]
    osn = common[C_OPS + OP_SN]
    xb0 = outer_offset(common, np.int64(X_OP), oi)
    ob0 = outer_offset(common, np.int64(0), oi)
    eps = np.float64(pattrs[fctl[F_EPS]])
    is_sum = code == SUM or code == MEAN
    rows_per_block = max(1, CHUNK // n) if n <= CHUNK else 1
    part = max(CHUNK, n)
    ob = buf[part:2 * part] if tail == T_ROWWISE else buf     # the row op's output part
    mv = buf[2 * part:] if tail == T_ROWWISE else buf         # joined rows' scratch
    i = 0
    while i < v0:
        nr = min(rows_per_block, v0 - i)
        r = r0 + i
        if n <= CHUNK and xsn == 1 and split == 0:
            # no steps before the tail: the tail reads the rows of x in place
            xr = xb0 + r * xsm
            if tail == T_ROWWISE:
                if xsm != n or not joined_rows(code, x, xr, ob, np.int64(0), nr, n, mv):
                    for k in range(nr):
                        _row_op(code, x[xr + k * xsm:xr + k * xsm + n], ob[k * n:(k + 1) * n],
                                eps)
                apply_steps_range(prog, split, nsteps, pattrs, ob, 0, n, nr, n, r, 0, 0, sides,
                                  sgeo)
                scatter_tile(o, ob0 + r * osm, osm, osn, nr, n, ob, n, np.int64(0))
            else:
                for k in range(nr):
                    a, e = _reduce_block(code, x, xr + k * xsm, n, _sum_zero(x), load(x[0]),
                                         np.bool_(True))
                    if is_sum:
                        _store_sum(o, oi_out, of_out, ob0 + (r + k) * osm, a, code == MEAN, n)
                    else:
                        o[ob0 + (r + k) * osm] = store(o, e)
        elif n <= CHUNK:
            # a block of nr whole rows at pitch n; the first step reads unit-stride rows of x
            # directly (no copy of x first) when it can
            first = 0
            z = np.int64(0)     # not a literal 0: one compiled _first_step_from for both sites
            if xsn == 1 and first_step_from((x, buf, prog[:split], pattrs, sides, sgeo,
                                             xb0 + r * xsm, xsm, z, n, nr, n, r, z)):
                first = 1
            else:
                gather_tile(x, xb0 + r * xsm, xsm, xsn, nr, n, buf, n, np.int64(0))
            apply_steps_range(prog, first, split, pattrs, buf, 0, n, nr, n, r, 0, 0, sides,
                              sgeo)
            # the tile read-only, like x in the branch above: the row op and the reduction
            # compile once for both (a writable source compiles their call trees again)
            src = readonly(buf)
            if tail == T_ROWWISE and split == nsteps and osn == 1:
                # no step after the row op: its rows go straight into the output (the tile
                # buffer is never the output: no overlap), not through ob and a copy (fused
                # layer_norm over 4096 x 768 float32 spent 28% of its time in that copy)
                po = ob0 + r * osm
                if osm != n or not joined_rows(code, src, z, o, po, nr, n, mv):
                    for k in range(nr):
                        _row_op(code, src[k * n:(k + 1) * n],
                                o[po + k * osm:po + k * osm + n], eps)
            elif tail == T_ROWWISE:
                if not joined_rows(code, src, z, ob, z, nr, n, mv):
                    for k in range(nr):
                        _row_op(code, src[k * n:(k + 1) * n], ob[k * n:(k + 1) * n], eps)
                apply_steps_range(prog, split, nsteps, pattrs, ob, 0, n, nr, n, r, 0, 0, sides,
                                  sgeo)
                scatter_tile(o, ob0 + r * osm, osm, osn, nr, n, ob, n, np.int64(0))
            else:
                for k in range(nr):
                    a, e = _reduce_block(code, src, k * n, n, _sum_zero(x), load(x[0]),
                                         np.bool_(True))
                    if is_sum:
                        _store_sum(o, oi_out, of_out, ob0 + (r + k) * osm, a, code == MEAN, n)
                    else:
                        o[ob0 + (r + k) * osm] = store(o, e)
        else:
            # one long row in column chunks
            xr = xb0 + r * xsm
            racc = _sum_zero(x)
            rext = load(x[0])
            for c0 in range(0, n, CHUNK):
                w = min(CHUNK, n - c0)
                boff = c0 if tail == T_ROWWISE else 0
                gather_tile(x, xr + c0 * xsn, xsm, xsn, np.int64(1), w, buf[boff:], w,
                            np.int64(0))
                apply_steps_range(prog, 0, split, pattrs, buf, boff, w, 1, w, r, c0, 0, sides,
                                  sgeo)
                if tail != T_ROWWISE:
                    racc, rext = _reduce_block(code, readonly(buf), np.int64(0), w, racc, rext,
                                               c0 == 0)
            if tail == T_ROWWISE:
                _row_op(code, readonly(buf)[:n], ob[:n], eps)
                for c0 in range(0, n, CHUNK):
                    w = min(CHUNK, n - c0)
                    apply_steps_range(prog, split, nsteps, pattrs, ob, c0, w, 1, w, r, c0, 0,
                                      sides, sgeo)
                scatter_tile(o, ob0 + r * osm, osm, osn, np.int64(1), n, ob, n,
                             np.int64(0))
            elif is_sum:
                _store_sum(o, oi_out, of_out, ob0 + r * osm, racc, code == MEAN, n)
            else:
                o[ob0 + r * osm] = store(o, rext)
        i += nr


@njit(inline="always")
def _reduce_all_tile(x, common, prog, pattrs, fctl, sides, sgeo, buf, oi, r0, v0, r1,
                     v1, t1):
    """Partial (sum, extreme) of a v0 x v1 tile of a reduction over all elements."""
    xblk = C_OPS + X_OP * OP_BLOCK
    xsm = common[xblk + OP_SM]
    xsn = common[xblk + OP_SN]
    xb = outer_offset(common, np.int64(X_OP), oi) + r0 * xsm + r1 * xsn
    code = fctl[F_TCODE]
    gather_tile(x, xb, xsm, xsn, v0, v1, buf, t1, t1)
    apply_steps_range(prog, 0, prog.shape[0], pattrs, buf, 0, t1, v0, v1, r0, r1, 0, sides,
                      sgeo)
    acc = _sum_zero(x)
    ext = load(x[0])
    for i in range(v0):
        acc, ext = _reduce_block(code, readonly(buf), i * t1, v1, acc, ext, i == 0)
    return acc, ext


@njit(inline="always")
def _work_item(x, o, oi_out, of_out, common, entries, prog, pattrs, fctl, sides, sgeo, buf,
               idx, psum, pext, pvalid):
    n_entries = entries.shape[0]
    e = idx % n_entries
    oi = idx // n_entries
    t0 = fctl[F_T0]
    t1 = fctl[F_T1]
    r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)
    r1, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)
    if v0 == 0 or v1 == 0:
        return
    _side_geometry(common, oi, fctl[F_NSIDES], sgeo)
    tail = fctl[F_TAIL]
    if tail == T_NONE:
        _elementwise_tile(x, o, common, prog, pattrs, sides, sgeo, buf, oi, r0, v0, r1, v1, t1,
                          fctl[F_STREAM] != 0)
    elif tail == T_REDUCE_ALL:
        a, ex = _reduce_all_tile(x, common, prog, pattrs, fctl, sides, sgeo, buf, oi,
                                 r0, v0, r1, v1, t1)
        psum[idx] = a
        pext[idx] = ex
        pvalid[idx] = 1
    else:
        _row_tile(x, o, oi_out, of_out, common, prog, pattrs, fctl, sides, sgeo, buf, oi,
                  r0, v0)


@callee(cache=True, error_model="numpy")
def _chunk(x, o, oi_out, of_out, common, entries, prog, pattrs, fctl, sides, c, stride, block,
           total, psum, pext, pvalid):
    """Blocks c, c + stride, ... of ``block`` consecutive work items, with one tile buffer
    for all of them. Consecutive items are neighbouring tiles in memory: a thread walks runs
    of ``block`` tiles (prefetch- and TLB-friendly), and the cyclic blocks balance threads
    even when the bucketed table's empty tail entries sit at its end."""
    tail = fctl[F_TAIL]
    if tail == T_NONE and _runs_in_output(common):
        # the chain runs in the output tile and never touches the buffer, or its output
        # streams, a block at a time through the buffer (_elementwise_tile)
        size = STREAM_CHAIN_BYTES // o.itemsize if fctl[F_STREAM] != 0 else 0
    elif tail == T_NONE or tail == T_REDUCE_ALL:
        size = fctl[F_T0] * fctl[F_T1]
    elif tail == T_ROWWISE:
        # the rows, the row op's output, the joined rows' scratch (fused_tail.joined_rows)
        size = 2 * max(CHUNK, common[C_N]) + JOIN_SCRATCH
    else:
        size = CHUNK
    raw = np.empty(size, dtype=o.dtype)
    sgeo = np.zeros((MAX_SIDES, 4), dtype=np.int64)
    # the buffer borrowed (no reference count): the tails slice it per row, and every view
    # of a counted array costs two atomics; fused add + layer_norm over 1000 x 32 float32,
    # one thread, spent 72% of its time in NRT_incref/decref. Held past the loop (Numba
    # frees a variable after its last use, the borrowed() call)
    buf = borrowed(raw)
    for b0 in range(c * block, total, stride * block):
        for idx in range(b0, min(b0 + block, total)):
            _work_item(x, o, oi_out, of_out, common, entries, prog, pattrs, fctl, sides, sgeo,
                       buf, idx, psum, pext, pvalid)
    hold(raw)


@callee(cache=True, error_model="numpy")
def _finish_all(o, oi_out, of_out, fctl, count, psum, pext, pvalid):
    """Combine the partials of T_REDUCE_ALL into element 0 of the output of its kind."""
    code = fctl[F_TCODE]
    acc = psum[:0].sum()           # a zero of the partials' type (psum[0] - psum[0]
                                   # would be NaN for an infinite partial)
    ext = pext[0]
    has = False
    for k in range(psum.shape[0]):
        if pvalid[k]:
            acc += psum[k]
            if has:
                ext = nan_max(ext, pext[k]) if code == MAX else nan_min(ext, pext[k])
            else:
                ext = pext[k]
            has = True
    if code == SUM or code == MEAN:
        _store_sum(o, oi_out, of_out, 0, acc, code == MEAN, count)
    else:
        o[0] = store(o, ext)


def fused_driver(x, o, oi, of, common, entries, prog, pattrs, fctl, sides):
    """Run the chain ``prog`` (+ the tail op of ``fctl``) over every entry x outer index."""
    x, o, oi, of, common, entries, prog, pattrs, fctl, sides = borrowed(
        (x, o, oi, of, common, entries, prog, pattrs, fctl, sides))
    total = entries.shape[0] * common[C_NOUTER]
    reduce_all = fctl[F_TAIL] == T_REDUCE_ALL
    np_ = total if reduce_all else 1
    psum = _partials(x, np_)
    pext = compute_empty(o, np_)
    pvalid = zeros(np_, np.uint8)     # (np.zeros here would be a parallel loop: serial_zeros)
    # a row-wise tail's elements cost as the row-wise driver's do: its crossover to 2 threads
    # (fused div + softmax over 1000 x 16 float32, 16000 elements, stayed on one thread
    # with two available: 35 us; on both 25)
    serial = SERIAL_ROW_READS if fctl[F_TAIL] == T_ROWWISE else SERIAL_ELEMENTS
    if common[C_M] * common[C_N] * common[C_NOUTER] < serial:
        # int64 chunk numbers throughout: literal ones would compile _chunk a second time
        chunk((x, o, oi, of, common, entries, prog, pattrs, fctl, sides, np.int64(0),
               np.int64(1), total, total, psum, pext, pvalid))
    else:
        block = max(1, min(MAX_BLOCK, total // (4 * N_CHUNKS)))
        for c in prange(N_CHUNKS):
            first = chunk_start(np.int64(c))
            if first * block >= total:
                continue        # no work item: no call, no scratch allocated
            chunk((x, o, oi, of, common, entries, prog, pattrs, fctl, sides, first,
                   np.int64(N_CHUNKS), block, total, psum, pext, pvalid))
    if reduce_all:
        _finish_all(o, oi, of, fctl, common[C_M] * common[C_N] * common[C_NOUTER], psum, pext,
                    pvalid)


def _chunk_signature(dtype):
    """The argument types of ``_chunk`` for the driver of ``dtype``."""
    i64 = types.int64
    acc = types.int64 if dtype in ("int32", "int64") else types.float64
    return signature(dtype) + (i64, i64, i64, i64, types.Array(acc, 1, "C"),
                               types.Array(getattr(types, compute(dtype)), 1, "C"),
                               types.Array(types.uint8, 1, "C"))


def _first_signature(dtype):
    """The argument types of ``_first_step_from`` for the driver of ``dtype``."""
    x, o, _, _, _, _, prog, pattrs, _, sides = signature(dtype)
    return (x, o, prog, pattrs, sides, types.Array(types.int64, 2, "C")) + (types.int64,) * 8


#: ``_first_step_from`` reached by address from the chunk: the chunk's code holds a call,
#: not the first step's loops (every op's) optimized and generated once more
FIRST = Link("fused.first_step", lambda: _first_step_from, _first_signature, FUSED_DTYPES,
             types.boolean)
first_step_from = FIRST.call


def _last_signature(dtype):
    """The argument types of ``_last_stream`` for the driver of ``dtype``."""
    x, o, _, _, _, _, prog, pattrs, _, _ = signature(dtype)
    i64 = types.int64
    return (prog, pattrs, o, i64, x, i64, i64, x, i64, o)


#: ``_last_stream`` reached by address, as FIRST
LAST = Link("fused.last_stream", lambda: _last_stream, _last_signature, FUSED_DTYPES)
last_stream = LAST.call
#: ``_chunk`` reached by address (``address_link``): the driver's prange body holds a call,
#: so its four levels (parfor body, two wrappers, driver) do not optimize and generate the
#: tiles' code again
CHUNKS = Link("fused.chunk", lambda: _chunk, _chunk_signature, FUSED_DTYPES)
#: functions the driver reaches by address: drivers.get fills their slots first
LINKS = (STEPS, FIRST, LAST, CHUNKS)
chunk = CHUNKS.call


def signature(dtype):
    def arr(dt, ro=False):
        return types.Array(getattr(types, carrier(dt)), 1, "C", readonly=ro)
    i64_1d = types.Array(types.int64, 1, "C", readonly=True)
    i64_2d = types.Array(types.int64, 2, "C", readonly=True)
    return (arr(dtype, True), arr(dtype), arr("int64"), arr("float64"), i64_1d, i64_2d, i64_2d,
            arr(compute(dtype), True), i64_1d, types.UniTuple(arr(dtype, True), MAX_SIDES))


#: dtypes of the fused driver (the family has no catalog entry: its steps are catalog kernels)
