"""CPU driver of the rowwise family: softmax, log_softmax, layer_norm, rms_norm.

A *row* is the set of normalized elements of one position of the kept dimensions (softmax:
one axis; the norms: the trailing axes). The entries tile the kept dimensions (coalesced into
an outer shape and a plane of rows x columns, like every other family); each kernel call
handles whole rows, with a multi-pass algorithm inside the one driver call (max, then
exp-and-sum, then scale; mean, then variance, then normalize). Operands in the common area:
0 output, 1 input x, 2 weight, 3 bias; the reduction block (``common_area.R_*``) holds the
normalized sizes and every operand's strides over them. Strategies as in :mod:`reduce`:

* ``STRAT_LANES``: row by row, each pass a vectorized loop along the row's innermost
  normalized dimension (contiguous views when every operand has unit stride there).
* ``STRAT_COLUMNS``: a tile row handles up to T1 rows at once whose kept axis is the
  contiguous one (softmax over a leading or middle axis): every pass adds vectors of
  neighbouring rows, reading the input in memory order.

A row that is one contiguous run of every operand (the normalized axes innermost and
contiguous, the usual case) takes a short path (``_contig_row``) that runs the same passes on
the row's views; the general path's per-run offsets and views cost about 0.3 us a row, which
dominated short rows (softmax over 1024 x 8: 328 us before, 85-97 us with the short path). Calls
reading fewer than ``reduce_runs.SERIAL_ROW_READS`` elements run on the calling thread. The
short path and its loops without fast-math flags (scale, shift, normalize) are inlined into
the entry's row loop, and short rows take their max from ``reduce_runs.ext_inline``: a call per
helper and row cost ~20 ns (layer_norm over 1024 x 8: 73 -> 33 us, softmax 85 -> 44 us).
Softmax and log_softmax rows of at most ``JOIN_ROW`` elements that follow each other in x
and in the output run in groups (:func:`_softmax_joined`): each row's max is spread over a
scratch, one exp loop runs over the whole group, then each row takes its sum and its scale
or shift; a vectorized loop's scalar remainder (~1 ns an element for exp) is then paid once
per group, not once per row (float32, 2 threads, against torch out=: softmax over 924 x 77
rows 35-39 -> 21 us (torch 22), 6144 x 64 132-142 -> 68-72 (104), 1000 x 143 46 -> 30
(37); log_softmax 924 x 77 37 -> 24 (15)).
A softmax row of at least ``AHEAD_ROW`` elements prefetches, during its exp pass (computed
from cache), the next row its thread reads (the entry's next row, or the next work item's
first): memory would otherwise idle there, the hardware prefetcher following only the loads
being made (983 x 30522 float32, 2 threads: 7.5-8.3 -> 6.5-7.7 ms, torch 6.7-8.3 ms).

Streaming stores (``cpu.streaming``): when the common area's store block asks for them (an
output larger than the last-level cache), the last pass of log_softmax, layer_norm and
rms_norm over rows of at least ``STREAM_ROW_BYTES`` computes a block of results at a time
into L1 and streams it as whole lines (:func:`_final_stream`), so that the output's lines
are not read before they are written (layer_norm over 983 x 30522 float32, 2 threads:
6.0-6.2 -> 4.8-5.1 ms when memory is the limit, 5.2 -> 5.0 ms when it is not). Not
softmax's: see :func:`_contig_row`. Shorter rows keep normal stores (their last pass reads
the row from L1 and the hardware prefetcher hides the output's reads: 768-element rows
were slower streamed, 5.3 -> 5.7 ms, on an earlier build of the same loop).

Accuracy: the norms' row sums (mean, variance, mean square) accumulate in float64
(re-associated, vectorized); softmax's and log_softmax's sum of exponentials, whose terms
are all positive (no cancellation), accumulates in the input's precision over blocks of
``SUM_BLOCK`` elements and in float64 across blocks: a float32 block sum is off by at most
~40 roundings (2e-6 relative, the vector lanes' 32 additions and their combination), and
converting every exponential to float64 cost a third of softmax's time (77 x 30522
float32, 2 threads: 0.51 -> 0.35 ms; torch 0.48). exp/log come from ``mathfuncs`` in the
input's precision. The variance is the two-pass sum of squared deviations for float64 rows;
float32 rows (LANES) take ``E[x^2] - mean^2`` from one float64 pass, whose relative error
(about ``1e-16 * mean^2 / var``) stays below float32's resolution unless ``|mean| / std``
exceeds ~3e4. Against a float64 NumPy reference the float32 results are within a few float32
ulps (tests: rtol = atol = 2e-5 for unit-scale rows); float64 within ~1e-12.

float16 / bfloat16 rows (through their carriers, ``half.py``) are widened to float32 as they
are loaded and computed as float32 rows (the norms' sums in float64, the two-pass variance),
each result rounded once to the format as it is stored; softmax stores the exponentials and
scales them in place, so its results are rounded twice (within 2 ulps of the format).

Aliasing: the output may be the very same view as the input (each element is read before it
is written, and a row is only ever touched by the entry that owns it).
"""
import numpy as np
from numba import njit, prange, types

from ..abi.common_area import (C_IDBASE, C_M, C_N, C_NOUTER, C_OPBASE, C_OPS, E_ANCH0, E_ANCH1,
                           E_KID, E_OFF0, E_OFF1, MAX_RED, OP_BLOCK, OP_SM, OP_SN, R_COUNT,
                           R_ND, R_STR, R_STRATEGY, S_STREAM, STRAT_COLUMNS,
                           reduce_block_size)
from ..abi.storage import carrier, compute
from ..catalog import CATALOG
from .address_link import Link
from ..abi.tiles import ROWWISE_TILES
from ..abi.vocabulary import (LAYER_NORM, LOG_SOFTMAX, RMS_NORM, ROWWISE_OPS,  # noqa: F401
                              SOFTMAX)
from . import mathfuncs
from .callee import callee
from .elementwise import STREAM_ROW_BYTES, outer_offset, resolve, same_element
from .reduce_runs import (N_CHUNKS, _ext_run, _ext_strided, _sum_run, chunk_start,
                          ext_inline, nan_max, red_offset, red_runs, serial_work, strided,
                          SERIAL_ROW_READS)
from .half import compute_empty, load, store
from .scalar_ops import cast_like
from .tiles import make_tile_geometry
from .borrowed import borrowed, hold
from .prefetch import LINE_BYTES, prefetch
from .streaming import BLOCK_BYTES, line_gap, stream_block, store_fence
from .vector_width import wide_vectors


# Tile shapes (rows, columns, partial window) over the kept plane, by slot: one row per call
# for long rows, bundles of rows for short ones, and a wide tile for COLUMNS vectors.
N_SLOTS = len(ROWWISE_TILES)

OUT, X, W, B = range(4)
_OPERANDS = 4
_RB = C_OPS + _OPERANDS * OP_BLOCK
# the store block's streaming flag (abi.common_area), after the reduction block
_STREAM_AT = _RB + reduce_block_size(_OPERANDS) + S_STREAM
# softmax rows at least this long prefetch the next row during their exp pass, in blocks of
# AHEAD_BLOCK elements (_exp_store_sum_ahead)
AHEAD_ROW = 4096
AHEAD_BLOCK = 512
# softmax and log_softmax rows of at most JOIN_ROW elements that follow each other run in
# groups of up to JOIN_ELEMENTS elements: one exp loop over the group (_softmax_joined)
JOIN_ROW = 512
JOIN_ELEMENTS = 4096
# softmax's and log_softmax's sums of exponentials: in the input's precision over blocks of
# SUM_BLOCK elements, in float64 across them (see Accuracy in the module's docstring)
SUM_BLOCK = 512


tile_geometry = make_tile_geometry(ROWWISE_TILES)


# ---- LANES: per-run loops over contiguous (C) or strided (A) views --------------------------
@callee(cache=True, fastmath={"reassoc"})
def _exp_store_sum(xv, ov, m):
    wide_vectors()
    s = 0.0
    n = xv.shape[0]
    for k in range(0, n, SUM_BLOCK):
        xs = xv[k:min(k + SUM_BLOCK, n)]
        os = ov[k:min(k + SUM_BLOCK, n)]
        sb = cast_like(xv, 0.0)
        for i in range(xs.shape[0]):
            e = mathfuncs.exp(load(xs[i]) - m)
            os[i] = store(os, e)
            sb += e
        s += sb
    return s


@callee(cache=True, fastmath={"reassoc"})
def _exp_store_sum_ahead(xv, ov, m, nx):
    """_exp_store_sum(xv, ov, m) that also prefetches the row ``nx`` (the next row this
    thread reads), a block's worth of lines per AHEAD_BLOCK elements: the exp pass computes
    from cache, so memory would otherwise idle until the next row's max pass asks for it."""
    wide_vectors()
    s = 0.0
    n = xv.shape[0]
    step = max(1, LINE_BYTES // xv.itemsize)
    for k in range(0, n, AHEAD_BLOCK):
        c = min(AHEAD_BLOCK, n - k)
        for j in range(k, min(k + c, nx.shape[0]), step):
            prefetch(nx, j)
        # the loop of _exp_store_sum written out: calling it per block measured 1-3% slower
        xs = xv[k:k + c]
        os = ov[k:k + c]
        sb = cast_like(xv, 0.0)
        for i in range(c):
            e = mathfuncs.exp(load(xs[i]) - m)
            os[i] = store(os, e)
            sb += e
        s += sb
    return s


@callee(cache=True, fastmath={"reassoc"})
def _exp_shifted(xv, mv, ov):
    """ov = exp(xv - mv), element by element (disjoint from xv)."""
    wide_vectors()
    for i in range(xv.shape[0]):
        ov[i] = store(ov, mathfuncs.exp(load(xv[i]) - mv[i]))


@callee(cache=True)
def _softmax_joined(code, x, o, px, po, nrows, L, mv):
    """Softmax or log_softmax (``code``) of ``nrows`` rows of ``L`` elements that follow
    each other in x (from ``px``) and in the output (from ``po``), disjoint, float32 or
    float64: the rows' maxima spread over ``mv`` (scratch of at least nrows * L elements),
    ONE exp loop over all the rows into the output, then per row its sum and the scale
    (softmax) or the shift of x by the max and the sum's log (log_softmax, overwriting the
    exponentials). The exp loop's remainder (scalar iterations, ~1 ns an element) is paid
    once per group instead of once per row: softmax over 924 x 77 float32 rows, one thread,
    45 -> 30 ns a row, 7-element rows 27 -> 12; 2 threads 35.7 -> 20.6 us (torch 22.4).
    The same arithmetic as :func:`_contig_row` (a short row is one block of its sum)."""
    wide_vectors()
    n = nrows * L
    for k in range(nrows):
        xv = x[px + k * L:px + (k + 1) * L]
        # a slice fill (an element loop here stays scalar: 4x slower)
        mv[k * L:(k + 1) * L] = cast_like(xv, ext_inline(xv, True))
    _exp_shifted(x[px:px + n], mv[:n], o[po:po + n])
    for k in range(nrows):
        ov = o[po + k * L:po + (k + 1) * L]
        s = _sum_run(ov, cast_like(ov, 0.0))        # in the row's computed precision
        if code == SOFTMAX:
            _scale(ov, cast_like(ov, 1.0 / s))
        else:
            _shift(x[px + k * L:px + (k + 1) * L], ov, mv[k * L],
                   cast_like(ov, np.log(np.float64(s))))


@callee(cache=True, fastmath={"reassoc"})
def _exp_store_sum_inplace(ov, m):
    """_exp_store_sum(ov, ov, m) reading the one array it writes. Not that call itself: its
    two array parameters get LLVM's run-time overlap check, which sends an in-place row to
    the scalar loop (softmax over 77x30522 in place, one thread: 6.5 ms, against 1.2 ms)."""
    wide_vectors()
    s = 0.0
    for i in range(ov.shape[0]):
        e = mathfuncs.exp(load(ov[i]) - m)
        ov[i] = store(ov, e)
        s += e
    return s


@callee(cache=True, fastmath={"reassoc"})
def _exp_sum(xv, m):
    wide_vectors()
    s = 0.0
    n = xv.shape[0]
    for k in range(0, n, SUM_BLOCK):
        xs = xv[k:min(k + SUM_BLOCK, n)]
        sb = cast_like(xv, 0.0)
        for i in range(xs.shape[0]):
            sb += mathfuncs.exp(load(xs[i]) - m)
        s += sb
    return s


@callee(cache=True, fastmath={"reassoc"})
def _sq_dev_sum(xv, mean):
    s = 0.0
    for i in range(xv.shape[0]):
        d = np.float64(load(xv[i])) - mean
        s += d * d
    return s


@callee(cache=True, fastmath={"reassoc"})
def _sq_sum(xv):
    s = 0.0
    for i in range(xv.shape[0]):
        d = np.float64(load(xv[i]))
        s += d * d
    return s


@callee(cache=True, fastmath={"reassoc"})
def _sum_and_sq(xv):
    s = 0.0
    q = 0.0
    for i in range(xv.shape[0]):
        d = np.float64(load(xv[i]))
        s += d
        q += d * d
    return s, q


@callee(cache=True)
def _row_moments(x, xo, common):
    """(sum, sum of squares) of a row in one pass, accumulated in float64."""
    runs, L, ndo = red_runs(common, _RB)
    sx = common[_RB + R_STR + X * MAX_RED + ndo]
    s = 0.0
    q = 0.0
    for k in range(runs):
        p = xo + red_offset(common, _RB, k, ndo, np.int64(X))
        if sx == 1:
            a, b = _sum_and_sq(x[p:p + L])
        else:
            a, b = _sum_and_sq(strided(x, p, sx, L))
        s += a
        q += b
    return s, q


@njit(inline="always")
def _scale(ov, a):
    for i in range(ov.shape[0]):
        ov[i] = store(ov, load(ov[i]) * a)


@njit(inline="always")
def _shift(xv, ov, m, c):
    for i in range(xv.shape[0]):
        ov[i] = store(ov, (load(xv[i]) - m) - c)


@njit(inline="always")
def _norm_write(xv, ov, wv, bv, c, lo, a, hw, hb):
    """ov = ((xv - c) - lo) * a [* wv] [+ bv]: the centre in two parts of the input's
    precision (c + lo), so that the deviations of float32 rows whose mean is large against
    their spread keep float64's centre (x - c is exact near c); c = lo = 0 for rms_norm."""
    n = xv.shape[0]
    if hw and hb:
        for i in range(n):
            ov[i] = store(ov, ((load(xv[i]) - c) - lo) * a * load(wv[i]) + load(bv[i]))
    elif hw:
        for i in range(n):
            ov[i] = store(ov, ((load(xv[i]) - c) - lo) * a * load(wv[i]))
    elif hb:
        for i in range(n):
            ov[i] = store(ov, ((load(xv[i]) - c) - lo) * a + load(bv[i]))
    else:
        for i in range(n):
            ov[i] = store(ov, ((load(xv[i]) - c) - lo) * a)


@callee(cache=True)
def _run(code, p, xv, ov, wv, bv, m, c, a, hw, hb):
    """Pass ``p`` of op ``code`` over one run; returns the pass's partial sum. ``m``, ``c``,
    ``a`` (row max, centre, scale) arrive in float64 and are used in the input's precision,
    except the variance's centre which stays float64."""
    if p == 0:
        if code == SOFTMAX or code == LOG_SOFTMAX:
            return np.float64(0.0)          # max is handled by _row_max
        elif code == LAYER_NORM:
            return _sum_run(xv, 0.0)
        return _sq_sum(xv)
    elif p == 1:
        if code == SOFTMAX:
            return _exp_store_sum(xv, ov, cast_like(xv, m))
        elif code == LOG_SOFTMAX:
            return _exp_sum(xv, cast_like(xv, m))
        return _sq_dev_sum(xv, c)
    if code == SOFTMAX:
        _scale(ov, cast_like(xv, a))
    elif code == LOG_SOFTMAX:
        _shift(xv, ov, cast_like(xv, m), cast_like(xv, c))
    else:
        chi = cast_like(xv, c)
        _norm_write(xv, ov, wv, bv, chi, cast_like(xv, c - chi), cast_like(xv, a), hw, hb)
    return np.float64(0.0)


@callee(cache=True)
def _row_pass(code, p, x, w, b, o, base, common, contig, m, c, a, hw, hb):
    """One pass over a row (all its runs); returns the sum of the runs' results."""
    runs, L, ndo = red_runs(common, _RB)
    sx = common[_RB + R_STR + X * MAX_RED + ndo]
    so = common[_RB + R_STR + OUT * MAX_RED + ndo]
    sw = common[_RB + R_STR + W * MAX_RED + ndo]
    sb = common[_RB + R_STR + B * MAX_RED + ndo]
    total = 0.0
    for k in range(runs):
        px = base[X] + red_offset(common, _RB, k, ndo, np.int64(X))
        po = base[OUT] + red_offset(common, _RB, k, ndo, np.int64(OUT))
        pw = base[W] + red_offset(common, _RB, k, ndo, np.int64(W)) if hw else 0
        pb = base[B] + red_offset(common, _RB, k, ndo, np.int64(B)) if hb else 0
        if contig:
            xv = x[px:px + L]
            total += _run(code, p, xv, o[po:po + L], w[pw:pw + L] if hw else xv,
                          b[pb:pb + L] if hb else xv, m, c, a, hw, hb)
        else:
            xs = strided(x, px, sx, L)
            total += _run(code, p, xs, strided(o, po, so, L),
                          strided(w, pw, sw, L) if hw else xs,
                          strided(b, pb, sb, L) if hb else xs, m, c, a, hw, hb)
    return total


@callee(cache=True)
def _row_max(x, xo, common):
    runs, L, ndo = red_runs(common, _RB)
    sx = common[_RB + R_STR + X * MAX_RED + ndo]
    m = load(x[xo])
    for k in range(runs):
        p = xo + red_offset(common, _RB, k, ndo, np.int64(X))
        if sx == 1:
            m = nan_max(m, _ext_run(x[p:p + L], True))
        else:
            m = nan_max(m, _ext_strided(strided(x, p, sx, L), True))
    return m


@callee(cache=True, error_model="numpy")
def _lanes_row(code, x, w, b, o, base, common, eps, hw, hb):
    # int64 pass numbers: literal ones compile the pass (and its call tree) once per value
    P0, P1, P2 = np.int64(0), np.int64(1), np.int64(2)
    count = common[_RB + R_COUNT]
    runs, L, ndo = red_runs(common, _RB)
    contig = (common[_RB + R_STR + X * MAX_RED + ndo] == 1
              and common[_RB + R_STR + OUT * MAX_RED + ndo] == 1
              and (not hw or common[_RB + R_STR + W * MAX_RED + ndo] == 1)
              and (not hb or common[_RB + R_STR + B * MAX_RED + ndo] == 1))
    if code == SOFTMAX or code == LOG_SOFTMAX:
        m = np.float64(_row_max(x, base[X], common))
        s = _row_pass(code, P1, x, w, b, o, base, common, contig, m, 0.0, 0.0, hw, hb)
        if code == SOFTMAX:
            _row_pass(code, P2, x, w, b, o, base, common, contig, m, 0.0, 1.0 / s, hw, hb)
        else:
            _row_pass(code, P2, x, w, b, o, base, common, contig, m, np.log(s), 0.0, hw, hb)
        return
    if code == LAYER_NORM and x.itemsize == 4:
        # float32 input: one pass for both moments; in float64 the cancellation of
        # E[x^2] - mean^2 costs log10(mean^2 / var) of 16 digits, far below float32's 7
        s1, s2 = _row_moments(x, base[X], common)
        c = s1 / count
        var = max(s2 / count - c * c, 0.0)
        _row_pass(code, P2, x, w, b, o, base, common, contig, 0.0, c, 1.0 / np.sqrt(var + eps),
                  hw, hb)
        return
    s1 = _row_pass(code, P0, x, w, b, o, base, common, contig, 0.0, 0.0, 0.0, hw, hb)
    if code == LAYER_NORM:
        c = s1 / count
        var = _row_pass(code, P1, x, w, b, o, base, common, contig, 0.0, c, 0.0, hw, hb) / count
    else:
        var = s1 / count
        c = 0.0
    _row_pass(code, P2, x, w, b, o, base, common, contig, 0.0, c, 1.0 / np.sqrt(var + eps),
              hw, hb)


@njit(inline="always")
def _final_piece(code, xv, dst, wv, bv, m, c, lo, a, hw, hb):
    """The last pass of op ``code`` over a piece of a row, into ``dst``: log_softmax shifts
    ``xv`` by ``m`` and ``c``; the norms normalize ``xv`` (centre ``c`` + ``lo``, scale
    ``a``, then weight and bias)."""
    if code == LOG_SOFTMAX:
        _shift(xv, dst, m, c)
    else:
        _norm_write(xv, dst, wv, bv, c, lo, a, hw, hb)


@njit(inline="always")
def _stream_flush(o, blk, st):
    """Store the streamer's partly filled block (``st``: see :func:`_final_stream`)
    normally, and end its run."""
    for i in range(st[1]):
        o[st[0] + i] = blk[i]
    st[0] = -1
    st[1] = 0


@njit(inline="always")
def _final_stream(code, xv, o, po, wv, bv, m, c, lo, a, hw, hb, blk, st):
    """:func:`_final_piece` of a row into ``o[po:po + n]`` (disjoint from the inputs), the
    output's whole lines written with streaming stores: the pass computes the results of
    one block (BLOCK_BYTES, line-aligned in the output) into ``blk`` (L1) and streams it,
    block after block. A row that starts where the previous one ended continues its block
    (no partial lines at the row ends); the elements before a run's first line start, and
    the partial block at its end (:func:`_stream_flush`), store normally.

    ``st``: the run's state, ``[start in o of the block being filled (-1: no run), elements
    of it in blk, its length]`` (a block's length is ``blk.size``; a run's head, up to its
    first line start, is a shorter block that stores normally). One call site of the
    inlined pass keeps the driver's code small."""
    n = xv.shape[0]
    w = blk.shape[0]
    if st[0] < 0 or st[0] + st[1] != po:
        if st[0] >= 0:
            _stream_flush(o, blk, st)
        g = line_gap(o, po)
        st[0] = po
        st[1] = 0
        st[2] = g if g > 0 else w
    k = 0
    while k < n:
        fill = st[1]
        lim = st[2]
        piece = min(lim - fill, n - k)
        _final_piece(code, xv[k:k + piece], blk[fill:fill + piece], wv[k:k + piece],
                     bv[k:k + piece], m, c, lo, a, hw, hb)
        k += piece
        if fill + piece < lim:
            st[1] = fill + piece
        else:
            if lim == w:                # a whole line-aligned block (a head is shorter)
                stream_block(blk, o, st[0])
            else:
                for i in range(lim):
                    o[st[0] + i] = blk[i]
            st[0] += lim
            st[1] = 0
            st[2] = w


@njit(inline="always")
def _contig_row(code, xv, o, po, wv, bv, count, eps, hw, hb, nx, blk, st):
    """_lanes_row for a row that is one contiguous run of every operand (the common case:
    normalized axes innermost and contiguous): the same passes on the row's views, without
    the per-run offsets and views of the general path (which cost ~0.3 us a row). The row
    writes ``o[po:po + count]``; ``blk`` and ``st``: see :func:`_final_stream` (``blk``
    empty: normal stores)."""
    ov = o[po:po + count]
    # in place (the output is the row itself, see elementwise.same_element): the loops read
    # ov, so that none reads one array while writing another over the same memory (LLVM's
    # run-time overlap check would send it to its scalar loop: softmax over 77 x 30522 in
    # place, one thread, 5.1 ms against 0.9 ms with out=)
    inplace = same_element(xv, 0, ov, 0)
    # streaming stores (a large output: ``blk`` one block of scratch): the last pass of
    # log_softmax and the norms writes the output lines without reading them first
    # (``cpu.streaming``). Not softmax's: its last pass scales the exponentials, computed
    # and stored by the pass before; streamed it waits on memory alone, where stored
    # normally its writes overlap the exponentials' compute (983 x 30522 float32: 6.96 ms
    # normal, 7.95 ms streaming the scale pass from a scratch row)
    streams = blk.shape[0] > 0 and not inplace
    if code == SOFTMAX or code == LOG_SOFTMAX:
        m = cast_like(xv, ext_inline(xv, True))
        if streams and code == LOG_SOFTMAX:
            c = cast_like(xv, np.log(_exp_sum(xv, m)))
            _final_stream(code, xv, o, po, wv, bv, m, c, c, c, hw, hb, blk, st)
        elif code == SOFTMAX:
            if inplace:
                s = _exp_store_sum_inplace(ov, m)
            elif nx.shape[0] > 0:
                s = _exp_store_sum_ahead(xv, ov, m, nx)
            else:
                s = _exp_store_sum(xv, ov, m)
            _scale(ov, cast_like(xv, 1.0 / s))
        elif inplace:
            _shift(ov, ov, m, cast_like(xv, np.log(_exp_sum(xv, m))))
        else:
            _shift(xv, ov, m, cast_like(xv, np.log(_exp_sum(xv, m))))
        return
    if code == LAYER_NORM and xv.itemsize == 4:
        s1, s2 = _sum_and_sq(xv)       # one float64 pass, as in _lanes_row
        c = s1 / count
        var = max(s2 / count - c * c, 0.0)
    elif code == LAYER_NORM:
        c = _sum_run(xv, 0.0) / count
        var = _sq_dev_sum(xv, c) / count
    else:
        c = 0.0
        var = _sq_sum(xv) / count
    chi = cast_like(xv, c)
    a = cast_like(xv, 1.0 / np.sqrt(var + eps))
    if streams:
        _final_stream(code, xv, o, po, wv, bv, chi, chi, cast_like(xv, c - chi), a, hw, hb,
                      blk, st)
    elif inplace:
        _norm_write(ov, ov, wv, bv, chi, cast_like(xv, c - chi), a, hw, hb)
    else:
        _norm_write(xv, ov, wv, bv, chi, cast_like(xv, c - chi), a, hw, hb)


# ---- COLUMNS: vectors of neighbouring rows ---------------------------------------------------
@callee(cache=True)
def _cstep(code, p, xv, ov, mx, sa, sb, ca, cb, wk, bk):
    n = xv.shape[0]
    if p == 0:
        if code == SOFTMAX or code == LOG_SOFTMAX:
            for j in range(n):
                mx[j] = nan_max(mx[j], load(xv[j]))
        elif code == LAYER_NORM:
            for j in range(n):
                sa[j] += load(xv[j])
        else:
            for j in range(n):
                d = np.float64(load(xv[j]))
                sa[j] += d * d
    elif p == 1:
        if code == SOFTMAX:
            for j in range(n):
                e = mathfuncs.exp(load(xv[j]) - mx[j])
                ov[j] = store(ov, e)
                sa[j] += e
        elif code == LOG_SOFTMAX:
            for j in range(n):
                sa[j] += mathfuncs.exp(load(xv[j]) - mx[j])
        else:
            for j in range(n):
                d = np.float64(load(xv[j])) - sb[j]
                sa[j] += d * d
    else:
        if code == SOFTMAX:
            for j in range(n):
                ov[j] = store(ov, load(ov[j]) * ca[j])
        elif code == LOG_SOFTMAX:
            for j in range(n):
                ov[j] = store(ov, (load(xv[j]) - mx[j]) - cb[j])
        else:
            for j in range(n):
                # mx: the centre's low part
                ov[j] = store(ov, ((load(xv[j]) - cb[j]) - mx[j]) * ca[j] * wk + bk)


@callee(cache=True)
def _cols_pass(code, p, x, w, b, o, base, xsn, osn, v1, common, mx, sa, sb, ca, cb, hw, hb):
    runs, L, ndo = red_runs(common, _RB)
    sx = common[_RB + R_STR + X * MAX_RED + ndo]
    so = common[_RB + R_STR + OUT * MAX_RED + ndo]
    sw = common[_RB + R_STR + W * MAX_RED + ndo]
    sbias = common[_RB + R_STR + B * MAX_RED + ndo]
    one = cast_like(x, 1.0)
    for k in range(runs):
        px = base[X] + red_offset(common, _RB, k, ndo, np.int64(X))
        po = base[OUT] + red_offset(common, _RB, k, ndo, np.int64(OUT))
        pw = base[W] + red_offset(common, _RB, k, ndo, np.int64(W))
        pb = base[B] + red_offset(common, _RB, k, ndo, np.int64(B))
        for i in range(L):
            wk = load(w[pw + i * sw]) if hw else one
            bk = load(b[pb + i * sbias]) if hb else one - one
            qx = px + i * sx
            qo = po + i * so
            if xsn == 1 and osn == 1:
                _cstep(code, p, x[qx:qx + v1], o[qo:qo + v1], mx, sa, sb, ca, cb, wk, bk)
            else:
                _cstep(code, p, strided(x, qx, xsn, v1), strided(o, qo, osn, v1), mx, sa, sb,
                       ca, cb, wk, bk)


@callee(cache=True, error_model="numpy")
def _cols_rows(code, x, w, b, o, base, xsn, osn, v1, common, eps, hw, hb):
    # int64 pass numbers: literal ones compile the pass (and its call tree) once per value
    P0, P1, P2 = np.int64(0), np.int64(1), np.int64(2)
    count = common[_RB + R_COUNT]
    mx = compute_empty(x, v1)
    ca = compute_empty(x, v1)
    cb = compute_empty(x, v1)
    sa = np.zeros(v1)
    sb = np.zeros(v1)
    if code == SOFTMAX or code == LOG_SOFTMAX:
        for j in range(v1):
            mx[j] = load(x[base[X] + j * xsn])
        _cols_pass(code, P0, x, w, b, o, base, xsn, osn, v1, common, mx, sa, sb, ca, cb, hw, hb)
        _cols_pass(code, P1, x, w, b, o, base, xsn, osn, v1, common, mx, sa, sb, ca, cb, hw, hb)
        for j in range(v1):
            ca[j] = 1.0 / sa[j]
            cb[j] = np.log(sa[j])
        _cols_pass(code, P2, x, w, b, o, base, xsn, osn, v1, common, mx, sa, sb, ca, cb, hw, hb)
        return
    _cols_pass(code, P0, x, w, b, o, base, xsn, osn, v1, common, mx, sa, sb, ca, cb, hw, hb)
    if code == LAYER_NORM:
        for j in range(v1):
            sb[j] = sa[j] / count
            sa[j] = 0.0
        _cols_pass(code, P1, x, w, b, o, base, xsn, osn, v1, common, mx, sa, sb, ca, cb, hw, hb)
    for j in range(v1):
        cb[j] = sb[j] if code == LAYER_NORM else 0.0
        mx[j] = sb[j] - cb[j] if code == LAYER_NORM else 0.0
        ca[j] = 1.0 / np.sqrt(sa[j] / count + eps)
    _cols_pass(code, P2, x, w, b, o, base, xsn, osn, v1, common, mx, sa, sb, ca, cb, hw, hb)


@njit(inline="always")
def _one_contiguous_run(common, hw, hb):
    """True when each row is a single run (one normalized dimension after coalescing) that
    every operand the op reads or writes holds contiguously."""
    if common[_RB + R_ND] != 1 or common[_RB + R_COUNT] == 0:
        return False
    st = _RB + R_STR
    return (common[st + X * MAX_RED] == 1 and common[st + OUT * MAX_RED] == 1
            and (not hw or common[st + W * MAX_RED] == 1)
            and (not hb or common[st + B * MAX_RED] == 1))


# ---- entries -------------------------------------------------------------------------------
@njit(inline="always")
def _entry_window(common, entries, e):
    """Entry ``e``'s kernel (its local id) and the kept rows and columns it covers:
    ``(local, r0, v0, r1, v1)``, first and valid count of each."""
    local = entries[e, E_KID] - common[C_IDBASE]
    t0, t1, _ = tile_geometry(local % N_SLOTS)
    r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], t0)
    r1, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], t1)
    return local, r0, v0, r1, v1


@callee(cache=True)
def _first_row_x(common, entries, idx):
    """Offset in x of work item ``idx``'s first row (entry x outer index), or -1 when the
    item has no row or there is no such item."""
    n_entries = entries.shape[0]
    if idx < 0 or idx >= n_entries * common[C_NOUTER]:
        return np.int64(-1)
    _, r0, v0, r1, v1 = _entry_window(common, entries, idx % n_entries)
    if v0 == 0 or v1 == 0:
        return np.int64(-1)
    xb = C_OPS + X * OP_BLOCK
    return (outer_offset(common, np.int64(X), idx // n_entries) + r0 * common[xb + OP_SM]
            + r1 * common[xb + OP_SN])


@callee(cache=True, error_model="numpy")
def _rowwise_entry(x, w, b, o, common, entries, e, outer, eps, hw, hb, nxt, blk, st, mv, geo):
    """Entry ``e`` at outer index ``outer``; ``nxt`` is the work item this thread runs next
    (-1: none), whose first row a long softmax row prefetches after the entry's last.
    ``blk`` (one streaming block), ``st`` (3 elements), ``mv`` (JOIN_ELEMENTS of the
    computed dtype) and ``geo`` (4 x _OPERANDS int64: the operands' starts, strides and
    row bases): the thread's scratch, borrowed (see :func:`_rowwise_chunk`)."""
    local, r0, v0, r1, v1 = _entry_window(common, entries, e)
    code = common[C_OPBASE] + local // N_SLOTS
    if v0 == 0 or v1 == 0:
        return
    # views of the thread's scratch: four allocations per entry cost ~10 ns a row over
    # entries of 8 short rows
    start = geo[:_OPERANDS]
    sm = geo[_OPERANDS:2 * _OPERANDS]
    sn = geo[2 * _OPERANDS:3 * _OPERANDS]
    for q in range(_OPERANDS):
        sm[q] = common[C_OPS + q * OP_BLOCK + OP_SM]
        sn[q] = common[C_OPS + q * OP_BLOCK + OP_SN]
        start[q] = outer_offset(common, q, outer) + r0 * sm[q] + r1 * sn[q]
    base = geo[3 * _OPERANDS:]
    if common[_RB + R_STRATEGY] == STRAT_COLUMNS:
        for r in range(v0):
            for q in range(_OPERANDS):
                base[q] = start[q] + r * sm[q]
            cols_rows((code, x, w, b, o, base, sn[X], sn[OUT], v1, common, eps, hw, hb))
        return
    if _one_contiguous_run(common, hw, hb):
        L = common[_RB + R_COUNT]
        if ((code == SOFTMAX or code == LOG_SOFTMAX) and L <= JOIN_ROW and x.itemsize >= 4
                and sn[X] == L and sn[OUT] == L
                and not same_element(x, start[X], o, start[OUT])):
            # short rows following each other along the entry's columns: in groups
            per = max(1, JOIN_ELEMENTS // L)
            for r in range(v0):
                for j in range(0, v1, per):
                    _softmax_joined(code, x, o, start[X] + r * sm[X] + j * L,
                                    start[OUT] + r * sm[OUT] + j * L, min(per, v1 - j), L, mv)
            return
        ahead = code == SOFTMAX and L >= AHEAD_ROW
        # streaming stores (softmax aside, see _contig_row) for rows of at least
        # STREAM_ROW_BYTES: layer_norm over 3e7 float32, 2 threads, normal -> streaming:
        # rows of 4096 elements 6.1 -> 6.0 ms, 8192 6.1-6.4 -> 5.3, 30522 5.9-6.2 -> 4.8-5.1;
        # and, measured on an earlier build of this loop (rows following each other, their
        # blocks continued from row to row), 768 5.3 -> 5.7 and 2048 6.1 -> 6.2 (a short
        # row's final pass reads the row from L1 and the hardware prefetcher hides the
        # output's reads; a long row's does not)
        streams = (common.size > _STREAM_AT and common[_STREAM_AT] != 0 and code != SOFTMAX
                   and L * o.itemsize >= STREAM_ROW_BYTES and line_gap(o, 0) >= 0)
        if not streams:
            blk = blk[:0]               # normal stores (_contig_row)
        st[0] = -1
        st[1] = 0
        for r in range(v0):
            for j in range(v1):
                px = start[X] + r * sm[X] + j * sn[X]
                po = start[OUT] + r * sm[OUT] + j * sn[OUT]
                pw = start[W] + r * sm[W] + j * sn[W] if hw else px
                pb = start[B] + r * sm[B] + j * sn[B] if hb else px
                xv = x[px:px + L]
                # the row this thread reads next (the entry's next, else the next work
                # item's first): prefetched by long softmax rows
                nr, nj = (r, j + 1) if j + 1 < v1 else (r + 1, 0)
                pn = start[X] + nr * sm[X] + nj * sn[X]
                if nr == v0:
                    pn = _first_row_x(common, entries, nxt) if ahead else np.int64(-1)
                nx = x[pn:pn + L] if ahead and pn >= 0 else x[:0]
                _contig_row(code, xv, o, po, w[pw:pw + L] if hw else xv,
                            b[pb:pb + L] if hb else xv, L, eps, hw, hb, nx, blk, st)
        if streams:
            _stream_flush(o, blk, st)
            store_fence()
        return
    for r in range(v0):
        for j in range(v1):
            for q in range(_OPERANDS):
                base[q] = start[q] + r * sm[q] + j * sn[q]
            lanes_row((code, x, w, b, o, base, common, eps, hw, hb))


def rowwise_driver(x, w, b, o, common, entries, fattrs):
    """Row-wise op over every entry x outer index; fattrs = (epsilon, has weight, has bias)."""
    x, w, b, o, common, entries, fattrs = borrowed((x, w, b, o, common, entries, fattrs))
    n_entries = entries.shape[0]
    total = n_entries * common[C_NOUTER]
    eps = fattrs[0]
    hw = fattrs[1] != 0
    hb = fattrs[2] != 0
    if serial_work(common, _RB, SERIAL_ROW_READS):
        rowwise_chunk((x, w, b, o, common, entries, np.int64(0), np.int64(1), total, eps, hw,
                       hb))
    else:
        for c in prange(N_CHUNKS):    # cyclic distribution, see reduce_runs.chunk_start
            rowwise_chunk((x, w, b, o, common, entries, chunk_start(np.int64(c)),
                           np.int64(N_CHUNKS), total, eps, hw, hb))


@callee(cache=True, error_model="numpy")
def _rowwise_chunk(x, w, b, o, common, entries, first, step, total, eps, hw, hb):
    """Work items ``first, first + step, ... < total`` (entry x outer index), with one
    scratch for all of them: a streaming block and the streamer's state."""
    n_entries = entries.shape[0]
    block = np.empty(BLOCK_BYTES // o.itemsize, dtype=o.dtype)
    state = np.empty(3, dtype=np.int64)
    maxima = compute_empty(x, JOIN_ELEMENTS)
    geometry = np.empty(4 * _OPERANDS, dtype=np.int64)
    # borrowed (their owners held to the end): the rows pass them on and slice them, and
    # each view or pass of a counted array costs two atomics (27% of layer_norm's time over
    # 39063 x 768 was NRT_incref on the row max's scratch lanes, gone since)
    blk = borrowed(block)
    st = borrowed(state)
    mv = borrowed(maxima)
    geo = borrowed(geometry)
    for idx in range(first, total, step):
        nxt = idx + step if idx + step < total else np.int64(-1)
        rowwise_entry((x, w, b, o, common, entries, idx % n_entries, idx // n_entries, eps,
                       hw, hb, nxt, blk, st, mv, geo))
    hold((block, state, maxima, geometry))


def _entry_signature(dt):
    """The argument types of ``_rowwise_entry`` (the chunk's scratch: a streaming block of
    the carrier, the streamer's state, the row maxima of the computed dtype, the geometry)."""
    i64 = types.int64
    return (signature(dt)[:6] + (i64, i64, types.float64, types.boolean, types.boolean, i64,
            types.Array(getattr(types, carrier(dt)), 1, "C"), types.Array(i64, 1, "C"),
            types.Array(getattr(types, compute(dt)), 1, "C"), types.Array(i64, 1, "C")))


def _rows_signature(dt, middle):
    """(code, x, w, b, o, base, *middle, common, eps, hw, hb) of ``_lanes_row`` (no middle)
    and ``_cols_rows`` (xsn, osn, v1)."""
    i64, bl = types.int64, types.boolean
    x, w, b, o, common = signature(dt)[:5]
    base = types.Array(i64, 1, "C")
    return (i64, x, w, b, o, base) + middle + (common, types.float64, bl, bl)


#: the rows of the strided and column strategies reached by address from the entry
LANES = Link("rowwise.lanes_row", lambda: _lanes_row, lambda dt: _rows_signature(dt, ()),
             CATALOG.families["rowwise"].dtypes)
COLS = Link("rowwise.cols_rows", lambda: _cols_rows,
            lambda dt: _rows_signature(dt, (types.int64,) * 3), CATALOG.families["rowwise"].dtypes)
lanes_row = LANES.call
cols_rows = COLS.call


#: ``_rowwise_entry`` reached by address from the chunk: the chunk's code holds a call, not
#: the row ops' code optimized and generated once more
ENTRY = Link("rowwise.entry", lambda: _rowwise_entry, _entry_signature,
             CATALOG.families["rowwise"].dtypes)
rowwise_entry = ENTRY.call


#: ``_rowwise_chunk`` reached by address (``address_link``): the driver's prange body holds
#: a call, so its four levels (parfor body, two wrappers, driver) do not optimize and
#: generate the row ops' code again
CHUNKS = Link("rowwise.chunk", lambda: _rowwise_chunk,
              lambda dt: signature(dt)[:6] + (types.int64,) * 3
              + (types.float64, types.boolean, types.boolean),
              CATALOG.families["rowwise"].dtypes)
#: functions the driver reaches by address: drivers.get fills their slots first
LINKS = (LANES, COLS, ENTRY, CHUNKS)
rowwise_chunk = CHUNKS.call


def signature(dtype):
    ro = types.Array(getattr(types, carrier(dtype)), 1, "C", readonly=True)
    rw = types.Array(getattr(types, carrier(dtype)), 1, "C")
    return (ro, ro, ro, rw, types.Array(types.int64, 1, "C", readonly=True),
            types.Array(types.int64, 2, "C", readonly=True),
            types.Array(types.float64, 1, "C", readonly=True))
