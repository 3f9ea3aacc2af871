"""Runs of reduced elements, shared by the reduce, row-wise, pool and fused drivers: sums
(reassociated into vector lanes), NaN-propagating extremes and arg-extremes, the offsets of
reduced runs, and the chunked distribution of work items over threads."""
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from ..abi.common_area import (C_M, C_N, C_NOUTER, MAX_RED, R_COUNT, R_ND, R_SHAPE, R_STR)
from ..abi.vocabulary import (ARGMAX, ARGMIN, MAX, MEAN, MIN, REDUCE_OPS,  # noqa: F401
                              SUM)
from .callee import callee
from .half import is_half, load, store
from .prefetch import prefetch_on


# arg-extremes of runs shorter than this compare element after element; longer runs find
# the extreme by a vector pass, then its first occurrence (_arg_run)
SHORT_ARG = 32


# ---- work distribution ---------------------------------------------------------------------
# A bucketed table's empty tail entries sit at its end, so prange's contiguous split of the
# work items would hand all real work of a small table to the first thread. The drivers loop
# over N_CHUNKS chunks instead; chunk c takes the items idx = r, r + N_CHUNKS, ... with r the
# bit reversal of c, so that the contiguous block of chunks a thread gets (for any power-of-2
# thread count T up to N_CHUNKS) deals it the items cyclically: thread t runs the items of
# one residue class mod T (that of t with its log2(T) bits reversed).
N_CHUNKS = 64
_CHUNK_BITS = 6


# Below this many elements read (kept elements x elements reduced into each) a reduce or
# row-wise driver runs its work items on the calling thread: waking the thread pool and
# joining it costs more than the work saved (measured crossovers on 2 cores: sum about 32k
# elements; softmax, whose exp makes each element dearer, about 12k; layer_norm about 16k).
SERIAL_READS = 1 << 15
SERIAL_ROW_READS = 3 << 12


@njit(inline="always")
def serial_work(common, rb, limit):
    """True when the call reads fewer than ``limit`` elements (``rb``: where the reduction
    block starts in the common area)."""
    kept = common[C_M] * common[C_N] * common[C_NOUTER]
    return kept * max(common[rb + R_COUNT], 1) < limit


@callee(cache=True)
def chunk_start(c):
    r = 0
    for _ in range(_CHUNK_BITS):
        r = (r << 1) | (c & 1)
        c >>= 1
    return r


# ---- scalar primitives ---------------------------------------------------------------------
def _fp_intrinsic(name, flags=()):
    @intrinsic
    def fn(typingctx, a, b):
        if not isinstance(a, types.Float) or a != b:
            return None

        def codegen(context, builder, signature, args):
            fty = context.get_value_type(signature.return_type)
            f = builder.module.declare_intrinsic(name, [fty], ir.FunctionType(fty, [fty, fty]))
            return builder.call(f, args, fastmath=flags)
        return a(a, b), codegen
    return fn


_llvm_maximum = _fp_intrinsic("llvm.maximum")   # NaN-propagating, vectorizes as a reduction
_llvm_minimum = _fp_intrinsic("llvm.minimum")
# maxnum/minnum promised no NaN and no signed-zero order: LLVM vectorizes a loop of them as a
# max/min reduction held in registers (vmaxps over several accumulators). The result is
# meaningless (poison) when an operand is a NaN: only for runs checked for NaN apart
_fast_maxnum = _fp_intrinsic("llvm.maxnum", ("nnan", "nsz"))
_fast_minnum = _fp_intrinsic("llvm.minnum", ("nnan", "nsz"))


def _extreme(name, float_op, int_op, doc):
    """A function of two scalars that runs ``float_op`` (an intrinsic) on floats and
    ``int_op`` on integers, for use in compiled code."""
    def fn(a, b):
        pass
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc

    @overload(fn)
    def _impl(a, b):
        if isinstance(a, types.Float):
            return lambda a, b: float_op(a, b)
        return int_op
    return fn


def _int_max(a, b):
    return a if a >= b else b


def _int_min(a, b):
    return a if a <= b else b


nan_max = _extreme("nan_max", _llvm_maximum, _int_max,
                   "max(a, b), NaN if either is NaN (np.maximum); integers: plain max.")
nan_min = _extreme("nan_min", _llvm_minimum, _int_min,
                   "min(a, b), NaN if either is NaN (np.minimum); integers: plain min.")
_fast_max = _extreme("_fast_max", _fast_maxnum, _int_max,
                     "max(a, b) of two non-NaN values (either one when they are zeros of "
                     "both signs).")
_fast_min = _extreme("_fast_min", _fast_minnum, _int_min,
                     "min(a, b) of two non-NaN values (either one when they are zeros of "
                     "both signs).")


def finish(acc, mean, count):
    """The stored value of a sum accumulator: divided by count for a mean (float only)."""


@overload(finish)
def _finish(acc, mean, count):
    if isinstance(acc, types.Integer):
        return lambda acc, mean, count: acc
    return lambda acc, mean, count: acc / count if mean else acc


def _sum_zero(x):
    """The sum accumulator of x's dtype: float64 for floats, int64 for integers."""


@overload(_sum_zero)
def _sum_zero_impl(x):
    if isinstance(x.dtype, types.Float) or is_half(x.dtype):
        return lambda x: np.float64(0.0)
    return lambda x: np.int64(0)


def _store_sum(o, oi, of, k, acc, mean, count):
    """Write a finished sum/mean to the output of its kind: ``o`` (x's dtype) for floats,
    ``oi`` (int64) for integer sums, ``of`` (float64) for integer means."""


@overload(_store_sum)
def _store_sum_impl(o, oi, of, k, acc, mean, count):
    if isinstance(o.dtype, types.Float) or is_half(o.dtype):
        def impl_f(o, oi, of, k, acc, mean, count):
            o[k] = store(o, acc / count if mean else acc)
        return impl_f

    def impl_i(o, oi, of, k, acc, mean, count):
        if mean:
            of[k] = np.float64(acc) / count
        else:
            oi[k] = acc
    return impl_i


@callee(cache=True)
def strided(x, b, s, n):
    """n elements of x from b with stride s (any sign, nonzero), as a view."""
    return x[b::s][:n]


@callee(cache=True)
def red_offset(common, rb, k, nd_outer, op):
    """Offset of the k-th outer reduced index (all reduced dims but the last) of operand op."""
    off = 0
    sb = rb + R_STR + op * MAX_RED
    for d in range(nd_outer - 1, -1, -1):
        sz = common[rb + R_SHAPE + d]
        off += (k % sz) * common[sb + d]
        k //= sz
    return off


@callee(cache=True)
def red_runs(common, rb):
    """(number of runs, run length, run stride of operand 0, outer dims) of the reduction."""
    nd = common[rb + R_ND]
    L = common[rb + R_SHAPE + nd - 1]
    runs = common[rb + R_COUNT] // L if L > 0 else 0
    return runs, L, nd - 1


# ---- LANES: one output element reduces its runs ----------------------------------------------
@callee(cache=True, fastmath={"reassoc"})
def _sum_run(xv, acc):
    for i in range(xv.shape[0]):
        acc += load(xv[i])
    return acc


# Long runs of a large input are summed a block of RUN_BLOCK_BYTES at a time, each block
# prefetching the input RUN_AHEAD_BYTES ahead: the float64 accumulation of a float32 run left
# the hardware prefetcher behind (sum over the last axis of 3187 x 9431 float32, 2 threads:
# 4.2-4.7 ms against torch's 2.6; a plain Numba loop prefetching 8 KB ahead: 2.5).
RUN_BLOCK_BYTES = 2048
RUN_AHEAD_BYTES = 8192
#: inputs of at least this many bytes prefetch, in runs and in column walks (reduce); smaller
#: ones are read from cache (over 15 x 255 x 257 float32, 3.9 MB, prefetching made the column
#: walks 10% slower)
RUN_AHEAD_MIN_BYTES = 16 << 20


@njit(inline="always")
def runs_ahead(x):
    """Whether the walks over ``x`` prefetch ahead (:func:`sum_run`, :func:`ext_run_ahead`,
    the column walks of ``reduce``): x is large."""
    return x.size * x.itemsize >= RUN_AHEAD_MIN_BYTES


@callee(cache=True)
def sum_run(x, p, n, acc, ahead):
    """``acc`` plus the sum of ``x[p:p + n]``; with ``ahead``, block by block, each block
    prefetching the input RUN_AHEAD_BYTES ahead (:data:`RUN_BLOCK_BYTES`). The blocks
    reassociate the sum like :func:`_sum_run`'s lanes (one more rounding per block)."""
    if not ahead:
        return _sum_run(x[p:p + n], acc)
    blk = RUN_BLOCK_BYTES // x.itemsize
    dist = RUN_AHEAD_BYTES // x.itemsize
    end = p + n
    q = p
    while q + blk <= end:
        prefetch_on(x, q + dist, blk)
        acc = _sum_run(x[q:q + blk], acc)
        q += blk
    return _sum_run(x[q:end], acc)


# strided runs (a reduced axis walked with a step other than 1): their loads do not
# vectorize, and one chain of adds (or maxnum) waited on each step's latency (~1.7 cycles per
# element); they keep 8 partial results in 8 scalars (registers: a scratch array would be an
# allocation per run). One thread, 5e5 float32 at stride 2: sum 277 -> ~125 us.
@callee(cache=True, fastmath={"reassoc"})
def _sum_strided(xv, acc):
    """:func:`_sum_run` of a strided view, in 8 interleaved partial sums."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = _zero_of(acc)
    n = xv.shape[0]
    i = 0
    while i + 8 <= n:
        a0 += load(xv[i])
        a1 += load(xv[i + 1])
        a2 += load(xv[i + 2])
        a3 += load(xv[i + 3])
        a4 += load(xv[i + 4])
        a5 += load(xv[i + 5])
        a6 += load(xv[i + 6])
        a7 += load(xv[i + 7])
        i += 8
    for k in range(i, n):
        acc += load(xv[k])
    return acc + (((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)))


@callee(cache=True)
def _ext_run(xv, ismax):
    """max or min of a run (NaN-propagating, IEEE maximum/minimum's order of signed zeros)."""
    # one pass of maxnum/minnum promised no NaN (a vector reduction held in registers, see
    # _fast_maxnum) with a NaN flag beside it; the exact loop runs only when the run holds
    # a NaN (to return it) or the result is a zero (whose sign maxnum may not order). It
    # replaced 256 lanes of compare-and-select kept in memory (rows of 512 elements and
    # more) and four compare-and-select chains (shorter rows). float32 max, 2 threads:
    # 4096 x 1000 0.20-0.28 -> 0.10-0.12 ms, 65536 x 100 0.74-0.76 -> 0.35-0.41; rows under
    # ~32 elements lost ~1 ns a row to the vector loop's set-up (8192 x 9 0.021-0.025 ->
    # 0.030; four chains of maxnum measured no better, 0.033)
    return ext_inline(xv, ismax)


def _zero_of(acc):
    """Zero of acc's type (float64 or int64)."""


@overload(_zero_of)
def _zero_of_impl(acc):
    if isinstance(acc, types.Float):
        return lambda acc: 0.0
    return lambda acc: np.int64(0)


@callee(cache=True)
def _ext_strided(xv, ismax):
    """:func:`_ext_run` of a strided view: the pass in 8 interleaved lanes, then the same
    exact fallback on a NaN or a zero result. Runs under 32 elements take _ext_run."""
    n = xv.shape[0]
    if n < 32:
        return ext_inline(xv, ismax)
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = load(xv[0])
    nan = False
    i = 0
    while i + 8 <= n:
        v0, v1, v2, v3 = load(xv[i]), load(xv[i + 1]), load(xv[i + 2]), load(xv[i + 3])
        v4, v5, v6, v7 = load(xv[i + 4]), load(xv[i + 5]), load(xv[i + 6]), load(xv[i + 7])
        nan |= ((v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3)
                | (v4 != v4) | (v5 != v5) | (v6 != v6) | (v7 != v7))
        if ismax:
            a0, a1, a2, a3 = _fast_max(a0, v0), _fast_max(a1, v1), _fast_max(a2, v2), \
                _fast_max(a3, v3)
            a4, a5, a6, a7 = _fast_max(a4, v4), _fast_max(a5, v5), _fast_max(a6, v6), \
                _fast_max(a7, v7)
        else:
            a0, a1, a2, a3 = _fast_min(a0, v0), _fast_min(a1, v1), _fast_min(a2, v2), \
                _fast_min(a3, v3)
            a4, a5, a6, a7 = _fast_min(a4, v4), _fast_min(a5, v5), _fast_min(a6, v6), \
                _fast_min(a7, v7)
        i += 8
    if ismax:
        r = _fast_max(_fast_max(_fast_max(a0, a1), _fast_max(a2, a3)),
                      _fast_max(_fast_max(a4, a5), _fast_max(a6, a7)))
    else:
        r = _fast_min(_fast_min(_fast_min(a0, a1), _fast_min(a2, a3)),
                      _fast_min(_fast_min(a4, a5), _fast_min(a6, a7)))
    for k in range(i, n):
        v = load(xv[k])
        nan |= v != v
        r = _fast_max(r, v) if ismax else _fast_min(r, v)
    return _ext_exact(xv, ismax) if nan or r == 0 else r


@njit(inline="always")
def ext_inline(xv, ismax):
    """:func:`_ext_run` inlined into its caller: the short rows' paths (a call per row costs
    ~20 ns, see rowwise)."""
    r, nan = _ext_pass(xv, ismax)
    return _ext_exact(xv, ismax) if nan or r == 0 else r


@callee(cache=True)
def ext_run_ahead(x, p, n, ismax):
    """:func:`_ext_run` of ``x[p:p + n]`` (n > 0) block by block, each block prefetching the
    input RUN_AHEAD_BYTES ahead (as :func:`sum_run` with ``ahead``); the same exact fallback
    on a NaN or a zero result."""
    blk = RUN_BLOCK_BYTES // x.itemsize
    dist = RUN_AHEAD_BYTES // x.itemsize
    end = p + n
    r = load(x[p])
    nan = False
    q = p
    while q < end:
        e = min(q + blk, end)
        prefetch_on(x, q + dist, blk)
        v, bad = _ext_pass(x[q:e], ismax)
        nan |= bad
        r = _fast_max(r, v) if ismax else _fast_min(r, v)
        q = e
    return _ext_exact(x[p:end], ismax) if nan or r == 0 else r


@njit(inline="always")
def _ext_pass(xv, ismax):
    """(max or min of the non-empty run xv by maxnum/minnum, whether it holds a NaN); the
    value is meaningless when the flag is set."""
    r = load(xv[0])
    nan = False
    if ismax:
        for i in range(xv.shape[0]):
            v = load(xv[i])
            nan |= v != v
            r = _fast_max(r, v)
    else:
        for i in range(xv.shape[0]):
            v = load(xv[i])
            nan |= v != v
            r = _fast_min(r, v)
    return r, nan


@njit(inline="always")
def _ext_exact(xv, ismax):
    """max or min of a run by llvm.maximum/minimum, element after element: NaN-propagating,
    signed zeros ordered (the slow path of :func:`_ext_run`). Inlined: called, it holds a
    reference to the run, and the increment and decrement of the run's count (calls, with
    registers spilled around them) cost every short row on the fast path too."""
    r = load(xv[0])
    if ismax:
        for i in range(xv.shape[0]):
            r = nan_max(r, load(xv[i]))
    else:
        for i in range(xv.shape[0]):
            r = nan_min(r, load(xv[i]))
    return r


@callee(cache=True)
def _strictly_better(ismax, v, a):
    """v beats the current best a when it comes later in the order (first occurrence wins)."""
    if v != v:
        return a == a
    return v > a if ismax else v < a


@callee(cache=True)
def _arg_run(xv, base, ismax, bv, bi):
    """Update the best (value, flat index) with the non-empty run xv of flat indices base,
    base+1, ...: the run's extreme by one vector pass (:func:`_ext_pass`), then a search for
    its first occurrence (the first NaN when the run holds one; a zero extreme matches
    zeros of either sign, which compare equal, so the first of them wins as in NumPy).
    Before, one compare and branch per element: argmax over 4096 x 1000 float32 rows 7.5
    ms, torch 1.3 ms. Runs under SHORT_ARG elements keep that loop: the pass and the search
    cost them more (8192 x 9: 0.084 ms in it, 0.102 by pass and search)."""
    n = xv.shape[0]
    if n < SHORT_ARG:
        for i in range(n):
            v = load(xv[i])
            if _strictly_better(ismax, v, bv):
                bv = v
                bi = base + i
        return bv, bi
    r, nan = _ext_pass(xv, ismax)
    i = 0
    if nan:
        while i < n - 1 and load(xv[i]) == load(xv[i]):
            i += 1
    else:
        while i < n - 1 and load(xv[i]) != r:
            i += 1
    v = load(xv[i])
    if _strictly_better(ismax, v, bv):
        return v, base + i
    return bv, bi


# ---- spans: the runs of one output element, or a part of them (reduce_split) -------------
@njit(inline="always")
def span_bounds(common, rb, part, nparts):
    """(ndo, L, s, k0, k1, i0, n) of part ``part`` of ``nparts`` of the reduced elements
    (the reduction block at ``rb``): runs of ``L`` elements with step ``s`` (the last run
    dimension ``ndo``), of which runs ``[k0, k1)`` and ``n`` elements of each from ``i0``:
    whole runs when there are at least as many runs as parts, else a slice of every run
    (part 0 of 1: everything)."""
    runs, L, ndo = red_runs(common, rb)
    s = common[rb + R_STR + ndo]
    if runs >= nparts:
        return ndo, L, s, runs * part // nparts, runs * (part + 1) // nparts, 0, L
    i0 = L * part // nparts
    return ndo, L, s, 0, runs, i0, L * (part + 1) // nparts - i0


@callee(cache=True)
def span_sum(x, xb, common, rb, part, nparts, zero):
    """Sum from ``zero`` of part ``part`` of ``nparts`` of the reduced elements from ``xb``
    (the reduction block at ``rb``)."""
    ndo, L, s, k0, k1, i0, n = span_bounds(common, rb, part, nparts)
    acc = zero
    ahead = runs_ahead(x)
    for k in range(k0, k1):
        p = xb + red_offset(common, rb, k, ndo, 0) + i0 * s
        if s == 1:
            acc = sum_run(x, p, n, acc, ahead)
        else:
            acc = _sum_strided(strided(x, p, s, n), acc)
    return acc


@callee(cache=True)
def span_ext(x, xb, common, rb, part, nparts, ismax):
    """max or min of a part (as :func:`span_sum`), NaN-propagating."""
    ndo, L, s, k0, k1, i0, n = span_bounds(common, rb, part, nparts)
    r = load(x[xb + red_offset(common, rb, k0, ndo, 0) + i0 * s])
    ahead = runs_ahead(x)
    for k in range(k0, k1):
        p = xb + red_offset(common, rb, k, ndo, 0) + i0 * s
        if s == 1:
            v = ext_run_ahead(x, p, n, ismax) if ahead else _ext_run(x[p:p + n], ismax)
        else:
            v = _ext_strided(strided(x, p, s, n), ismax)
        r = nan_max(r, v) if ismax else nan_min(r, v)
    return r


@callee(cache=True)
def span_arg(x, xb, common, rb, part, nparts, ismax):
    """(value, flat index) of the first extreme of a part (as :func:`span_sum`)."""
    ndo, L, s, k0, k1, i0, n = span_bounds(common, rb, part, nparts)
    bv = load(x[xb + red_offset(common, rb, k0, ndo, 0) + i0 * s])
    bi = k0 * L + i0
    for k in range(k0, k1):
        p = xb + red_offset(common, rb, k, ndo, 0) + i0 * s
        if s == 1:
            bv, bi = _arg_run(x[p:p + n], k * L + i0, ismax, bv, bi)
        else:
            bv, bi = _arg_run(strided(x, p, s, n), k * L + i0, ismax, bv, bi)
    return bv, bi
