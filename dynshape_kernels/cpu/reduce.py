"""CPU driver of the reduce family: sum, mean, max, min, argmax, argmin over any set of axes.

The entries tile the OUTPUT (the kept dimensions, coalesced into an outer shape and an inner
plane of rows x columns, exactly like the elementwise families); every kernel call reduces,
for each output element of its tile, all the reduced elements described by the reduction
block of the common area (``common_area.R_*``: reduced sizes and input strides). Each output
element is written once, by the one entry whose tile holds it. Two strategies, chosen per call
by the executor and stored in the reduction block:

* ``STRAT_LANES`` (reductions over the innermost memory axis): each output element reduces its
  own elements, the innermost reduced dimension walked as one contiguous run per outer reduced
  index (sums: a re-associated loop LLVM vectorizes with 16-lane partial sums; max/min: one
  vectorized pass with a NaN flag, ``reduce_runs._ext_run``; argmax/argmin: that pass, then a
  search for the first occurrence, or a compare loop for runs under ``SHORT_ARG``).
* ``STRAT_COLUMNS`` (reductions over a leading or middle axis): a tile row keeps one
  accumulator per output column and adds whole vectors of the contiguous kept axis per reduced
  index, so the input is read in memory order, never with a scalar loop over a huge stride.
  Sums, max and min take four reduced rows per pass over the accumulators (one load and store
  of them per four rows), still adding each column's elements one after the other.

Accuracy (the contract the tests check against NumPy):

* float32 sums and means accumulate in float64 and round once at the end: the result is
  within 1 ulp (float32) of the exactly rounded sum plus ``count * 2**-53 * sum(|x|)``; this is
  tighter than NumPy's own float32 pairwise sum, so differences to NumPy are NumPy's error
  (bounded by about ``(log2(count) + 8) * 2**-24 * sum(|x|)``).
* float64 sums accumulate in float64: LANES in 16 x (unroll) interleaved partial sums, error
  at most ``(count / 16 + 16) * 2**-53 * sum(|x|)`` (runs walked with a step other than 1: 8
  partial sums, ``(count / 8 + 8) * 2**-53 * sum(|x|)``; runs of an input of 16 MB or more,
  summed block by block (``reduce_runs.sum_run``): ``(count / 8 + 17) * 2**-53 * sum(|x|)``);
  COLUMNS sequentially along the reduced axis like NumPy's own strided reductions, error at
  most ``count * 2**-53 * sum(|x|)``.
* float16 / bfloat16 (through their carriers, ``half.py``): every element is widened to float32
  as it is loaded; sums and means accumulate in float64 as for float32 and round once to the
  format (``half.store``: correctly rounded from the float64 result, whose own error is bounded
  as above; float16 sums of up to 2**13 elements are exact in float64); max/min/arg compare the
  widened values, so they are exact.
* integer sums accumulate in int64 with wrap-around like NumPy; integer means accumulate the
  values converted to float64, then divide (NumPy's ``dtype=float64`` accumulation).
* max/min propagate NaN; argmax/argmin return the first occurrence of the extreme value and
  the index of the first NaN if there is one (NumPy's rules); the order of the reduced
  dimensions is the logical (C) order for the arg ops.
"""
import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ..abi.common_area import (C_IDBASE, C_M, C_N, C_NOUTER, C_OPBASE, C_OPS, E_ANCH0,
                               E_ANCH1, E_KID, E_OFF0, E_OFF1, OP_BLOCK, OP_SM, OP_SN,
                               R_COUNT, R_ND, R_STR, R_STRATEGY, STRAT_COLUMNS)
from ..abi.storage import carrier
from ..catalog import CATALOG
from .address_link import Link
from ..abi.tiles import REDUCE_TILES
from ..abi.vocabulary import (ARGMAX, ARGMIN, MAX, MEAN, MIN, REDUCE_OPS,  # noqa: F401
                              SUM)
from .callee import callee
from .elementwise import outer_offset, resolve
from .reduce_runs import (N_CHUNKS, _arg_run, _strictly_better, _sum_run,  # noqa: F401
                          chunk_start, ext_inline, ext_run_ahead, finish, nan_max, nan_min,
                          red_offset, red_runs, runs_ahead, serial_work, span_arg, span_ext,
                          span_sum, strided, sum_run, RUN_AHEAD_MIN_BYTES, SERIAL_READS)
from .half import compute_empty, is_half, load, store
from .prefetch import prefetch_span
from .tiles import make_tile_geometry
from .borrowed import borrowed
from . import reduce_split


# Tile shapes (rows, columns, partial window) over the output plane, by slot. The kernels
# accept any valid length (VARIABLE_FULL); wide rows give long accumulator vectors to the
# COLUMNS strategy, single outputs balance the threads when each output is expensive, and
# the 8-row tile serves output planes walked with a large column stride.
N_SLOTS = len(REDUCE_TILES)

_OPERANDS = 2     # output, input
_RB = C_OPS + _OPERANDS * OP_BLOCK     # start of the reduction block
# one or three work items are split in two by kept columns (column_parts), at a multiple of
# PART_ALIGN columns (whole vectors of float32 accumulators)
ODD_ITEMS = 4
PART_ALIGN = 16


tile_geometry = make_tile_geometry(REDUCE_TILES)


# ---- LANES with one contiguous run per output (last-axis reductions, the common case) ------
# The general LANES path finds each output's runs (red_runs, red_offset, a view per run) and
# cost 8 (sum) to 25 (max) ns per output on top of the reduction itself, which dominated short
# rows: sum / max over (256, 256, 8) on axis 2 took 529 / 1625 us against PyTorch's 142 / 217
# (105 / 324 us with this path).
# SHORT_SUM: runs up to this long are summed by a plain loop inside the tile loop (at most 15
# roundings, within the documented count/16 + 16); longer ones by the vectorized _sum_run.
SHORT_SUM = 16
# unit-stride column walks (COLUMNS) prefetch the rows about AHEAD_BYTES ahead of the four
# they add: the hardware prefetcher alone kept the sum over axis 1 of 457 x 255 x 257 float32
# at 6.5 ms (torch 3.7) on an Intel host, prefetching 8-32 KB ahead at 3.3 (a plain Numba
# loop; 2 threads); only inputs of at least AHEAD_MIN_BYTES do: over 15 x 255 x 257 (3.9 MB,
# in cache) prefetching made the sum 10% slower
AHEAD_BYTES = 16384
AHEAD_MIN_BYTES = RUN_AHEAD_MIN_BYTES      # the runs' threshold (reduce_runs.runs_ahead)


@njit(inline="always")
def _one_run(common):
    """Whether every output reduces one contiguous run of R_COUNT (> 0) input elements."""
    return (common[_RB + R_ND] == 1 and common[_RB + R_STR] == 1
            and common[_RB + R_COUNT] > 0)


@njit(inline="always")
def _run_sum(x, p, L, zero, ahead):
    if L <= SHORT_SUM:
        xv = x[p:p + L]
        acc = zero
        for i in range(L):
            acc += load(xv[i])
        return acc
    return sum_run(x, p, L, zero, ahead)


# ---- COLUMNS: a tile row accumulates vectors of its kept columns ----------------------------
# The vector steps are inlined into the walks over the reduced elements: a call per reduced
# row cost ~20 ns, which dominated narrow tiles (sum over axis 0 of 4096 x 64: 36-55 -> 27 us).
@njit(inline="always")
def _vadd(acc, xv):
    for j in range(acc.shape[0]):
        acc[j] += load(xv[j])


@njit(inline="always")
def _vadd4(acc, x0, x1, x2, x3):
    """Four _vadd calls in one pass: acc[j] + x0[j] + x1[j] + x2[j] + x3[j] adds left to
    right, so every sum rounds exactly as four sequential calls would (bit for bit), with one
    load and store of the accumulators per four reduced rows instead of one per row."""
    for j in range(acc.shape[0]):
        acc[j] = acc[j] + load(x0[j]) + load(x1[j]) + load(x2[j]) + load(x3[j])


@njit(inline="always")
def _vext(acc, xv, ismax):
    if ismax:
        for j in range(acc.shape[0]):
            acc[j] = nan_max(acc[j], load(xv[j]))
    else:
        for j in range(acc.shape[0]):
            acc[j] = nan_min(acc[j], load(xv[j]))


@njit(inline="always")
def _vext4(acc, x0, x1, x2, x3, ismax):
    """Four _vext calls in one pass over the accumulators (max and min are exact, and a NaN
    in any of the four propagates as it would row by row)."""
    if ismax:
        for j in range(acc.shape[0]):
            acc[j] = nan_max(nan_max(nan_max(nan_max(acc[j], load(x0[j])), load(x1[j])),
                                      load(x2[j])), load(x3[j]))
    else:
        for j in range(acc.shape[0]):
            acc[j] = nan_min(nan_min(nan_min(nan_min(acc[j], load(x0[j])), load(x1[j])),
                                      load(x2[j])), load(x3[j]))


@njit(inline="always")
def _varg(acc, idx, xv, t, ismax):
    for j in range(acc.shape[0]):
        a = acc[j]
        v = load(xv[j])
        if ismax:
            c = (v > a) | ((v != v) & (a == a))
        else:
            c = (v < a) | ((v != v) & (a == a))
        acc[j] = v if c else a
        idx[j] = t if c else idx[j]


@njit(inline="always")
def _rows_ahead(x, v1):
    """How many reduced rows of ``v1`` elements ahead a column walk prefetches (at least
    the four after the four it adds), or 0: none (an input under AHEAD_MIN_BYTES)."""
    if not runs_ahead(x):
        return np.int64(0)
    return max(np.int64(4), AHEAD_BYTES // max(np.int64(1), v1 * x.itemsize))


@njit(inline="always")
def _prefetch_rows(x, p, s, v1):
    """Prefetch the four rows of ``v1`` elements at ``p``, ``p + s``, ... (lines past the
    array are skipped: the walk's last rows prefetch nothing)."""
    for r in range(4):
        prefetch_span(x, p + r * s, v1)


@callee(cache=True)
def _columns_sum(x, xb, xsn, v1, common, acc):
    """acc[j] += every reduced element of column j (x[xb + j*xsn] at reduced index 0)."""
    runs, L, ndo = red_runs(common, _RB)
    s = common[_RB + R_STR + ndo]
    ahead = _rows_ahead(x, v1) * s
    for k in range(runs):
        p0 = xb + red_offset(common, _RB, k, ndo, 0)
        i = 0
        if xsn == 1:
            while i + 4 <= L:
                p = p0 + i * s
                if ahead != 0:
                    _prefetch_rows(x, p + ahead, s, v1)
                _vadd4(acc, x[p:p + v1], x[p + s:p + s + v1], x[p + 2 * s:p + 2 * s + v1],
                       x[p + 3 * s:p + 3 * s + v1])
                i += 4
        for i in range(i, L):
            p = p0 + i * s
            if xsn == 1:
                _vadd(acc, x[p:p + v1])
            else:
                _vadd(acc, strided(x, p, xsn, v1))


@callee(cache=True)
def _columns_ext(x, xb, xsn, v1, common, ismax, acc):
    runs, L, ndo = red_runs(common, _RB)
    s = common[_RB + R_STR + ndo]
    ahead = _rows_ahead(x, v1) * s
    for k in range(runs):
        p0 = xb + red_offset(common, _RB, k, ndo, 0)
        i = 0
        if xsn == 1:
            while i + 4 <= L:
                p = p0 + i * s
                if ahead != 0:
                    _prefetch_rows(x, p + ahead, s, v1)
                _vext4(acc, x[p:p + v1], x[p + s:p + s + v1], x[p + 2 * s:p + 2 * s + v1],
                       x[p + 3 * s:p + 3 * s + v1], ismax)
                i += 4
        for i in range(i, L):
            p = p0 + i * s
            if xsn == 1:
                _vext(acc, x[p:p + v1], ismax)
            else:
                _vext(acc, strided(x, p, xsn, v1), ismax)


@callee(cache=True)
def _columns_arg(x, xb, xsn, v1, common, ismax, acc, idx):
    runs, L, ndo = red_runs(common, _RB)
    s = common[_RB + R_STR + ndo]
    for k in range(runs):
        p0 = xb + red_offset(common, _RB, k, ndo, 0)
        for i in range(L):
            p = p0 + i * s
            if xsn == 1:
                _varg(acc, idx, x[p:p + v1], k * L + i, ismax)
            else:
                _varg(acc, idx, strided(x, p, xsn, v1), k * L + i, ismax)


# ---- tiles -------------------------------------------------------------------------------
@callee(cache=True)
def _sum_tile(x, o, ob, osm, osn, xb, xsm, xsn, v0, v1, common, zero, mean):
    count = common[_RB + R_COUNT]
    if common[_RB + R_STRATEGY] == STRAT_COLUMNS:
        acc = np.full(v1, zero)
        for r in range(v0):
            for j in range(v1):
                acc[j] = zero
            _columns_sum(x, xb + r * xsm, xsn, v1, common, acc)
            orow = ob + r * osm
            for j in range(v1):
                o[orow + j * osn] = store(o, finish(acc[j], mean, count))
        return
    if _one_run(common):
        ahead = runs_ahead(x)
        for r in range(v0):
            for j in range(v1):
                acc1 = _run_sum(x, xb + r * xsm + j * xsn, count, zero, ahead)
                o[ob + r * osm + j * osn] = store(o, finish(acc1, mean, count))
        return
    for r in range(v0):
        for j in range(v1):
            # the whole span: part 0 of 1 (int64: literals would compile it once more)
            acc1 = span_sum(x, xb + r * xsm + j * xsn, common, _RB, np.int64(0), np.int64(1),
                            zero)
            o[ob + r * osm + j * osn] = store(o, finish(acc1, mean, count))


@callee(cache=True)
def _ext_tile(x, o, ob, osm, osn, xb, xsm, xsn, v0, v1, common, ismax):
    if common[_RB + R_STRATEGY] == STRAT_COLUMNS:
        acc = compute_empty(x, v1)
        for r in range(v0):
            xr = xb + r * xsm
            for j in range(v1):
                acc[j] = load(x[xr + j * xsn])
            _columns_ext(x, xr, xsn, v1, common, ismax, acc)
            orow = ob + r * osm
            for j in range(v1):
                o[orow + j * osn] = store(o, acc[j])
        return
    if _one_run(common):
        L = common[_RB + R_COUNT]
        ahead = runs_ahead(x)
        for r in range(v0):
            for j in range(v1):
                p = xb + r * xsm + j * xsn
                v = ext_run_ahead(x, p, L, ismax) if ahead else ext_inline(x[p:p + L], ismax)
                o[ob + r * osm + j * osn] = store(o, v)
        return
    for r in range(v0):
        for j in range(v1):
            o[ob + r * osm + j * osn] = store(o, span_ext(x, xb + r * xsm + j * xsn, common,
                                                          _RB, np.int64(0), np.int64(1), ismax))


@callee(cache=True)
def _arg_tile(x, o, ob, osm, osn, xb, xsm, xsn, v0, v1, common, ismax):
    if common[_RB + R_STRATEGY] == STRAT_COLUMNS:
        acc = compute_empty(x, v1)
        idx = np.zeros(v1, dtype=np.int64)
        for r in range(v0):
            xr = xb + r * xsm
            for j in range(v1):
                acc[j] = load(x[xr + j * xsn])
            for j in range(v1):
                idx[j] = 0
            _columns_arg(x, xr, xsn, v1, common, ismax, acc, idx)
            orow = ob + r * osm
            for j in range(v1):
                o[orow + j * osn] = idx[j]
        return
    if _one_run(common):
        L = common[_RB + R_COUNT]
        for r in range(v0):
            for j in range(v1):
                p = xb + r * xsm + j * xsn
                # int64 base: a literal 0 would compile _arg_run once more
                o[ob + r * osm + j * osn] = _arg_run(x[p:p + L], np.int64(0), ismax,
                                                     load(x[p]), np.int64(0))[1]
        return
    for r in range(v0):
        for j in range(v1):
            o[ob + r * osm + j * osn] = span_arg(x, xb + r * xsm + j * xsn, common, _RB,
                                                 np.int64(0), np.int64(1), ismax)[1]


def _sum_dispatch(x, o, oi, of, ob, osm, osn, xb, xsm, xsn, v0, v1, common, mean):
    """Sum/mean into the output of the input's kind, chosen at compile time: floats
    accumulate in float64 into ``o``; integers in int64 into ``oi`` (sum) or in float64
    into ``of`` (mean)."""


@overload(_sum_dispatch)
def _sum_dispatch_impl(x, o, oi, of, ob, osm, osn, xb, xsm, xsn, v0, v1, common, mean):
    if isinstance(x.dtype, types.Float) or is_half(x.dtype):
        def impl_f(x, o, oi, of, ob, osm, osn, xb, xsm, xsn, v0, v1, common, mean):
            _sum_tile(x, o, ob, osm, osn, xb, xsm, xsn, v0, v1, common, 0.0, mean)
        return impl_f

    def impl_i(x, o, oi, of, ob, osm, osn, xb, xsm, xsn, v0, v1, common, mean):
        if mean:
            _sum_tile(x, of, ob, osm, osn, xb, xsm, xsn, v0, v1, common, 0.0, True)
        else:
            _sum_tile(x, oi, ob, osm, osn, xb, xsm, xsn, v0, v1, common, np.int64(0), False)
    return impl_i


@callee(cache=True, error_model="numpy")
def _reduce_entry(x, o, oi, of, common, entries, e, outer, part, parts):
    """One kernel call: entry ``e`` at outer index ``outer``; with ``parts`` > 1, part
    ``part`` of its kept columns (see :func:`column_parts`)."""
    local = entries[e, E_KID] - common[C_IDBASE]
    code = common[C_OPBASE] + local // N_SLOTS
    t0, t1, _ = tile_geometry(local % N_SLOTS)
    r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)
    r1, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)
    if parts > 1:
        w = ((v1 + parts - 1) // parts + PART_ALIGN - 1) // PART_ALIGN * PART_ALIGN
        lo = part * w
        r1 += lo
        v1 = min(w, v1 - lo)
    if v0 == 0 or v1 <= 0:
        return
    osm = common[C_OPS + OP_SM]
    osn = common[C_OPS + OP_SN]
    xsm = common[C_OPS + OP_BLOCK + OP_SM]
    xsn = common[C_OPS + OP_BLOCK + OP_SN]
    # int64 operand numbers: literal ones compile outer_offset once per value
    ob = outer_offset(common, np.int64(0), outer) + r0 * osm + r1 * osn
    xb = outer_offset(common, np.int64(1), outer) + r0 * xsm + r1 * xsn
    if code == SUM or code == MEAN:
        _sum_dispatch(x, o, oi, of, ob, osm, osn, xb, xsm, xsn, v0, v1, common, code == MEAN)
    elif code == MAX or code == MIN:
        _ext_tile(x, o, ob, osm, osn, xb, xsm, xsn, v0, v1, common, code == MAX)
    else:
        _arg_tile(x, oi, ob, osm, osn, xb, xsm, xsn, v0, v1, common, code == ARGMAX)


def reduce_driver(x, o, oi, of, common, entries):
    """Reduce x over the common area's reduced dims into the output buffer of the op:
    ``o`` (x's dtype), ``oi`` (int64: integer sums, arg ops) or ``of`` (float64: integer
    means); the two others are empty placeholders."""
    x, o, oi, of, common, entries = borrowed((x, o, oi, of, common, entries))
    n_entries = entries.shape[0]
    total = n_entries * common[C_NOUTER]
    if serial_work(common, _RB, SERIAL_READS):
        reduce_chunk((x, o, oi, of, common, entries, np.int64(0), np.int64(1), total,
                      np.int64(1)))
    elif common[C_M] * common[C_N] * common[C_NOUTER] == 1:
        # one output element: its reduced elements split between the threads (reduce_split)
        nparts = reduce_split.parts(common, _RB)
        pf = np.empty(nparts, np.float64)
        pi = np.empty((nparts, 2), np.int64)
        for c in prange(nparts):
            reduce_part((x, pf, pi, common, entries, c, nparts))
        code, ob, _ = _whole_output(common, entries)
        reduce_split.combine(x, o, oi, of, pf, pi, code, ob, common[_RB + R_COUNT], nparts)
    else:
        parts = column_parts(total)
        for c in prange(N_CHUNKS):
            reduce_chunk((x, o, oi, of, common, entries, chunk_start(np.int64(c)),
                          np.int64(N_CHUNKS), total * parts, parts))


@callee(cache=True)
def column_parts(total):
    """Into how many parts (by kept columns) each of ``total`` work items is split: 2 for one
    or three items (an odd number below ODD_ITEMS), 1 otherwise. Two threads given a table
    of one entry (the 768 sums over axis 0 of 4096x768) would run it on one thread; split
    in two, each runs half. Each kept element is still reduced by one thread, in the same
    order: the results do not change. Measured, 2 threads, float32, alternating runs: sum
    over axis 0 of 4096x768 158-167 -> 98-101 us (max 193-196 -> 96-117), over axis 1 of
    1x4096x768 170-187 -> 127-130 us, max over axis 1 of 3x2000x1000 351-433 -> 286-318 us.
    A part costs more per element than a whole entry (shorter accumulator rows):
    the 15 entries of 15x255x257 (8 and 7 per thread) took 42 us split, 35 us whole. The
    thread count is not asked: numba.get_num_threads in compiled code keeps the driver out
    of the cache; and more, narrower parts were slower (16 parts of 48 columns: the
    4096x768 sums took 181 us)."""
    if total % 2 == 1 and total < ODD_ITEMS:
        return np.int64(2)
    return np.int64(1)


@callee(cache=True, error_model="numpy")
def _reduce_chunk(x, o, oi, of, common, entries, first, step, total, parts):
    """Work items ``first, first + step, ... < total`` (entry x outer index x part)."""
    n_entries = entries.shape[0]
    for idx in range(first, total, step):
        item = idx // parts
        reduce_entry((x, o, oi, of, common, entries, item % n_entries, item // n_entries,
                      idx % parts, parts))


@callee(cache=True)
def _whole_output(common, entries):
    """(op code, output offset, input offset) of the one output element of a call whose
    output is one element: the one entry whose tile holds it (a bucketed table's other
    entries are empty)."""
    for e in range(entries.shape[0]):
        local = entries[e, E_KID] - common[C_IDBASE]
        t0, t1, _ = tile_geometry(local % N_SLOTS)
        r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)
        r1, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)
        if v0 > 0 and v1 > 0:
            ob = (outer_offset(common, np.int64(0), np.int64(0)) + r0 * common[C_OPS + OP_SM]
                  + r1 * common[C_OPS + OP_SN])
            xb = (outer_offset(common, np.int64(1), np.int64(0))
                  + r0 * common[C_OPS + OP_BLOCK + OP_SM] + r1 * common[C_OPS + OP_BLOCK + OP_SN])
            return common[C_OPBASE] + local // N_SLOTS, ob, xb
    raise ValueError("reduce: a table of one output element has no entry holding it")


@callee(cache=True, error_model="numpy")
def _reduce_part(x, pf, pi, common, entries, part, nparts):
    """Part ``part`` of ``nparts`` of a one-element output's reduction (``reduce_split``)."""
    code, _, xb = _whole_output(common, entries)
    reduce_split.reduce_part(x, pf, pi, common, _RB, code, xb, part, nparts)


#: ``_reduce_entry`` reached by address from the chunk: the chunk's code holds a call, not
#: the reductions' code optimized and generated once more
ENTRY = Link("reduce.entry", lambda: _reduce_entry,
             lambda dt: signature(dt) + (types.int64,) * 4,
             CATALOG.families["reduce"].dtypes)
reduce_entry = ENTRY.call
#: ``_reduce_chunk`` reached by address (``address_link``): the driver's prange body holds a
#: call, so its four levels (parfor body, two wrappers, driver) do not optimize and generate
#: the reductions' code again
CHUNKS = Link("reduce.chunk", lambda: _reduce_chunk,
              lambda dt: signature(dt) + (types.int64,) * 4,
              CATALOG.families["reduce"].dtypes)
#: ``_reduce_part`` reached by address, for the same reason
SPLITS = Link("reduce.part", lambda: _reduce_part, lambda dt: _part_signature(dt),
              CATALOG.families["reduce"].dtypes)
#: functions the driver reaches by address: drivers.get fills their slots first
LINKS = (ENTRY, CHUNKS, SPLITS)
reduce_chunk = CHUNKS.call
reduce_part = SPLITS.call


def signature(dtype):
    def arr(dt, ro=False):
        return types.Array(getattr(types, carrier(dt)), 1, "C", readonly=ro)
    i64_1d = types.Array(types.int64, 1, "C", readonly=True)
    i64_2d = types.Array(types.int64, 2, "C", readonly=True)
    return (arr(dtype, True), arr(dtype), arr("int64"), arr("float64"), i64_1d, i64_2d)


def _part_signature(dtype):
    x, _, _, _, common, entries = signature(dtype)
    return (x, types.Array(types.float64, 1, "C"), types.Array(types.int64, 2, "C"), common,
            entries, types.int64, types.int64)
