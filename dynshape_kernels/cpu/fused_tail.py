"""The tails of fused sequences: a row-wise op on a contiguous row of the tile buffer, and the
accumulators of a reduction over rows or over every element (float64 / int64 sums, extremes,
sums and means written to the output of their kind)."""
import numpy as np
from numba import types
from numba.extending import overload

from ..abi.vocabulary import LAYER_NORM, LOG_SOFTMAX, MAX, MEAN, SOFTMAX, SUM
from . import rowwise
from .callee import callee
from .half import is_half
from .reduce_runs import _ext_run, _store_sum, _sum_run, _sum_zero, nan_max, nan_min  # noqa: F401


# ---- row-wise tail on a contiguous row -------------------------------------------------------
#: scratch elements of :func:`joined_rows` (the rows' maxima of one group)
JOIN_SCRATCH = rowwise.JOIN_ELEMENTS


def joined_rows(code, src, ps, ob, po, nr, n, mv):
    """Softmax or log_softmax (``code``) of ``nr`` rows of ``n`` elements that follow each
    other in ``src`` (from ``ps``) into ``ob`` (from ``po``; disjoint from them), in the
    row-wise driver's groups
    (``rowwise._softmax_joined``: one exp loop over a group of rows, ``mv`` its scratch of
    JOIN_SCRATCH elements); returns False, computing nothing, for another op, rows longer
    than ``rowwise.JOIN_ROW`` or rows not of float32 / float64. Row by row (``_row_op``) a
    fused div + softmax over 1000 x 16 float32 took 182-188 us, in groups 33 (2 threads;
    softmax alone 19-21)."""


@overload(joined_rows)
def _joined_rows_impl(code, src, ps, ob, po, nr, n, mv):
    if not isinstance(src.dtype, types.Float):
        return lambda code, src, ps, ob, po, nr, n, mv: False

    def impl(code, src, ps, ob, po, nr, n, mv):
        if (code != SOFTMAX and code != LOG_SOFTMAX) or n > rowwise.JOIN_ROW:
            return False
        per = max(1, rowwise.JOIN_ELEMENTS // n)
        for j in range(0, nr, per):
            rowwise._softmax_joined(code, src, ob, ps + j * n, po + j * n, min(per, nr - j), n,
                                    mv)
        return True
    return impl


def _row_op(code, row, out, eps):
    """softmax / log_softmax / layer_norm / rms_norm of a contiguous row into ``out`` (float
    rows; integer chains never get here, their overload is empty). ``out`` is another buffer:
    with the result written over its input, the vectorizer's run-time overlap check fails and
    the loops run scalar (5x slower)."""


@overload(_row_op)
def _row_op_impl(code, row, out, eps):
    if not isinstance(row.dtype, types.Float) and not is_half(row.dtype):
        return lambda code, row, out, eps: None

    def impl(code, row, out, eps):
        n = row.shape[0]
        # int64 pass numbers and a run-time False: literal ones compile rowwise._run (and
        # its call tree) once per value, apart from the row-wise driver's own signature
        P0, P1, P2 = np.int64(0), np.int64(1), np.int64(2)
        no = n < 0
        if code == SOFTMAX or code == LOG_SOFTMAX:
            m = np.float64(_ext_run(row, np.bool_(True)))
            s = rowwise._run(code, P1, row, out, row, row, m, 0.0, 0.0, no, no)
            if code == SOFTMAX:
                rowwise._run(code, P2, row, out, row, row, m, 0.0, 1.0 / s, no, no)
            else:
                rowwise._run(code, P2, row, out, row, row, m, np.log(s), 0.0, no, no)
            return
        if code == LAYER_NORM and row.itemsize == 4:
            s1, s2 = rowwise._sum_and_sq(row)
            c = s1 / n
            var = max(s2 / n - c * c, 0.0)
        else:
            s1 = rowwise._run(code, P0, row, out, row, row, 0.0, 0.0, 0.0, no, no)
            if code == LAYER_NORM:
                c = s1 / n
                var = rowwise._run(code, P1, row, out, row, row, 0.0, c, 0.0, no, no) / n
            else:
                c = 0.0
                var = s1 / n
        rowwise._run(code, P2, row, out, row, row, 0.0, c, 1.0 / np.sqrt(var + eps), no, no)
    return impl


# ---- reduction accumulators --------------------------------------------------------------------
@callee(cache=True, error_model="numpy")
def _reduce_block(code, buf, off, n, acc, ext, first):
    """Fold buf[off:off+n] into the running sum ``acc`` or extreme ``ext`` (``first``: the
    extreme has no value yet)."""
    v = buf[off:off + n]
    if code == SUM or code == MEAN:
        acc = _sum_run(v, acc)
    else:
        r = _ext_run(v, code == MAX)
        if first:
            ext = r
        else:
            ext = nan_max(ext, r) if code == MAX else nan_min(ext, r)
    return acc, ext


def _partials(x, n):
    """Zeroed sum partials of x's accumulator type (float64 / int64)."""


@overload(_partials)
def _partials_impl(x, n):
    if isinstance(x.dtype, types.Float) or is_half(x.dtype):
        return lambda x, n: np.zeros(n, dtype=np.float64)
    return lambda x, n: np.zeros(n, dtype=np.int64)
