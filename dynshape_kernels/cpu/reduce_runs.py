"""Runs of reduced elements, shared by the reduce, row-wise, pool and fused drivers: sums
(reassociated into vector lanes), NaN-propagating extremes and arg-extremes, the offsets of
reduced runs, and the chunked distribution of work items over threads."""
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from ..abi.common_area import (C_M, C_N, C_NOUTER, MAX_RED, R_COUNT, R_ND, R_SHAPE, R_STR)
from ..abi.vocabulary import (ARGMAX, ARGMIN, MAX, MEAN, MIN, REDUCE_OPS,  # noqa: F401
                              SUM)
from .borrowed import borrowed
from .half import load



LW = 256          # lanes of the max/min/arg LANES strategy
FOLD_END = 16     # _ext_run folds its lanes in halves down to this many, then a scalar pass


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


@njit(cache=True)
def chunk_start(c):
    r = 0
    for _ in range(_CHUNK_BITS):
        r = (r << 1) | (c & 1)
        c >>= 1
    return r


# ---- scalar primitives ---------------------------------------------------------------------
def _fp_intrinsic(name):
    @intrinsic
    def fn(typingctx, a, b):
        if not isinstance(a, types.Float) or a != b:
            return None

        def codegen(context, builder, signature, args):
            fty = context.get_value_type(signature.return_type)
            f = builder.module.declare_intrinsic(name, [fty], ir.FunctionType(fty, [fty, fty]))
            return builder.call(f, args)
        return a(a, b), codegen
    return fn


_llvm_maximum = _fp_intrinsic("llvm.maximum")   # NaN-propagating, vectorizes as a reduction
_llvm_minimum = _fp_intrinsic("llvm.minimum")


def nan_max(a, b):
    """max(a, b), NaN if either is NaN (np.maximum); integers: plain max."""


def nan_min(a, b):
    """min(a, b), NaN if either is NaN (np.minimum); integers: plain min."""


@overload(nan_max)
def _nan_max(a, b):
    if isinstance(a, types.Float):
        return lambda a, b: _llvm_maximum(a, b)
    return lambda a, b: a if a >= b else b


@overload(nan_min)
def _nan_min(a, b):
    if isinstance(a, types.Float):
        return lambda a, b: _llvm_minimum(a, b)
    return lambda a, b: a if a <= b else b


def finish(acc, mean, count):
    """The stored value of a sum accumulator: divided by count for a mean (float only)."""


@overload(finish)
def _finish(acc, mean, count):
    if isinstance(acc, types.Integer):
        return lambda acc, mean, count: acc
    return lambda acc, mean, count: acc / count if mean else acc


@njit(cache=True)
def strided(x, b, s, n):
    """n elements of x from b with stride s (any sign, nonzero), as a view."""
    return x[b::s][:n]


@njit(cache=True)
def red_offset(common, rb, k, nd_outer, op):
    """Offset of the k-th outer reduced index (all reduced dims but the last) of operand op."""
    off = 0
    sb = rb + R_STR + op * MAX_RED
    for d in range(nd_outer - 1, -1, -1):
        sz = common[rb + R_SHAPE + d]
        off += (k % sz) * common[sb + d]
        k //= sz
    return off


@njit(cache=True)
def red_runs(common, rb):
    """(number of runs, run length, run stride of operand 0, outer dims) of the reduction."""
    nd = common[rb + R_ND]
    L = common[rb + R_SHAPE + nd - 1]
    runs = common[rb + R_COUNT] // L if L > 0 else 0
    return runs, L, nd - 1


# ---- LANES: one output element reduces its runs ----------------------------------------------
@njit(cache=True, fastmath={"reassoc"})
def _sum_run(xv, acc):
    for i in range(xv.shape[0]):
        acc += load(xv[i])
    return acc


@njit(inline="always")
def _better(ismax, v, a):
    return v > a if ismax else v < a


@njit(inline="always")
def ext_short(xv, ismax):
    """(max or min of the non-empty run xv, whether it holds a NaN): compare-and-select in
    four independent chains plus a NaN flag. llvm.maximum's scalar lowering is one long
    dependency chain (max over (256, 256, 8) on axis 2: 1625 us before, see reduce.py); the
    value returned is meaningless when the flag is set (the caller then propagates NaN)."""
    n = xv.shape[0]
    a0 = load(xv[0])
    a1 = a0
    a2 = a0
    a3 = a0
    nan = a0 != a0
    n4 = n - n % 4
    for i in range(0, n4, 4):
        v0 = load(xv[i])
        v1 = load(xv[i + 1])
        v2 = load(xv[i + 2])
        v3 = load(xv[i + 3])
        nan |= (v0 != v0) | (v1 != v1) | (v2 != v2) | (v3 != v3)
        a0 = v0 if _better(ismax, v0, a0) else a0
        a1 = v1 if _better(ismax, v1, a1) else a1
        a2 = v2 if _better(ismax, v2, a2) else a2
        a3 = v3 if _better(ismax, v3, a3) else a3
    for i in range(n4, n):
        v0 = load(xv[i])
        nan |= v0 != v0
        a0 = v0 if _better(ismax, v0, a0) else a0
    a0 = a1 if _better(ismax, a1, a0) else a0
    a2 = a3 if _better(ismax, a3, a2) else a2
    return (a2 if _better(ismax, a2, a0) else a0), nan


@njit(cache=True)
def _ext_run(xv, ismax, lanes):
    """max or min of a run (NaN-propagating); lanes is scratch of length LW."""
    n = xv.shape[0]
    if n < 2 * LW:
        r, nan = ext_short(xv, ismax)
        return _ext_exact(xv, ismax) if nan else r
    # LW lanes of compare-and-select with a NaN flag, folded in halves at the end: vector
    # loops throughout, each step one compare and one blend (llvm.maximum/minimum, nan_max,
    # vectorize on x86 too, but as vmaxps with NaN and signed-zero fix-ups, and the tail and
    # the lanes were combined in two scalar dependency chains). The exact loop below runs
    # only when the row holds a NaN (to return it) or the result is a zero (whose sign
    # compare-and-select may miss)
    # borrowed: the caller holds both for the call, and the slices below would otherwise
    # each cost two atomics on a counted array (65% of max over 4096 x 1000 in NRT calls)
    xv, lanes = borrowed((xv, lanes))
    nr = n // LW
    nan = False
    for k in range(LW):
        v = load(xv[k])
        lanes[k] = v
        nan |= v != v
    for q in range(1, nr):
        nan |= _lanes_pick(xv[q * LW:(q + 1) * LW], ismax, lanes)
    nan |= _lanes_pick(xv[nr * LW:], ismax, lanes)
    w = LW
    while w > FOLD_END:
        w >>= 1
        _lanes_pick(lanes[w:2 * w], ismax, lanes)
    r = lanes[0]
    for k in range(1, w):
        r = lanes[k] if _better(ismax, lanes[k], r) else r
    return _ext_exact(xv, ismax) if nan or r == 0 else r


@njit(cache=True)
def _ext_exact(xv, ismax):
    """max or min of a run by llvm.maximum/minimum, element after element: NaN-propagating,
    signed zeros ordered (the slow path of :func:`_ext_run`)."""
    r = load(xv[0])
    if ismax:
        for i in range(xv.shape[0]):
            r = nan_max(r, load(xv[i]))
    else:
        for i in range(xv.shape[0]):
            r = nan_min(r, load(xv[i]))
    return r


@njit(inline="always")
def _lanes_pick(row, ismax, lanes):
    """lanes[k] = the better of lanes[k] and row[k] for k < len(row) (compare-and-select);
    whether row holds a NaN."""
    nan = False
    if ismax:
        for k in range(row.shape[0]):
            v = load(row[k])
            a = lanes[k]
            nan |= v != v
            lanes[k] = v if v > a else a
    else:
        for k in range(row.shape[0]):
            v = load(row[k])
            a = lanes[k]
            nan |= v != v
            lanes[k] = v if v < a else a
    return nan


@njit(cache=True)
def _strictly_better(ismax, v, a):
    """v beats the current best a when it comes later in the order (first occurrence wins)."""
    if v != v:
        return a == a
    return v > a if ismax else v < a


@njit(cache=True)
def _arg_run(xv, base, ismax, bv, bi):
    """Update the best (value, flat index) with run xv of flat indices base, base+1, ..."""
    for i in range(xv.shape[0]):
        v = load(xv[i])
        if _strictly_better(ismax, v, bv):
            bv = v
            bi = base + i
    return bv, bi
