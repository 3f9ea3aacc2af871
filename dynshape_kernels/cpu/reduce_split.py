"""Whole reductions split into parts: one output element whose reduced elements are shared
out between the threads, each part reduced into a partial result, the partials combined.

The reduce driver's work items are output elements (tiles of them): a reduction of the whole
array (``x.sum()``, ``x.max()``, ``x.argmax()``) has one, which one thread ran alone. When the
output is one element and the call is not serial (``reduce_runs.serial_work``), the driver
splits the reduced elements into :func:`parts` parts instead, reduces each on its own
(``reduce.SPLITS``, one ``prange`` iteration per part) into a partial kept in two small
arrays (``pf``: float64, ``pi``: int64 pairs), then combines the partials in part order
(:func:`combine`).

A part is a *span* of the reduced elements (``reduce_runs.span_bounds``):
whole runs ``[k0, k1)`` when there are at least as many runs as parts, otherwise the
elements ``[i0, i1)`` of every run. With ``parts <= count // PART_READS`` no span is empty.

Partials: sums of floats in float64 (the accumulator the unsplit path uses), of integers in
int64 (wrapping: the combined sum is the same as the unsplit one), integer means in float64;
max/min values exactly (floats widened to float64, integers in int64); arg ops a value and
its flat index. The combine takes arg partials by value, then by the smaller index on ties
(parts that split within runs do not hold increasing indices), the first NaN winning.
Results: max, min, argmax, argmin and integer sums are those of the unsplit path exactly;
float sums and means are within the documented bounds (``reduce``'s docstring), the partial
sums adding once more per part.
"""
import numpy as np
from numba import njit, types
from numba.extending import overload

from ..abi.common_area import R_COUNT
from ..abi.vocabulary import ARGMAX, MAX, MEAN, MIN, SUM
from .callee import callee
from .half import load, store
from .reduce_runs import (N_CHUNKS, _store_sum, _strictly_better, _sum_zero, nan_max,
                          nan_min, span_arg, span_ext, span_sum)

#: elements a part reduces at least (each part finds its entry and span again); 2**12 and
#: 2**16 measured no different from 2**14 at 32k-4e6 float32 elements, within noise
PART_READS = 1 << 14


@callee(cache=True)
def parts(common, rb):
    """How many parts the reduced elements of the one output are split into: one per
    PART_READS elements, at most N_CHUNKS (enough for 64 threads)."""
    return max(np.int64(2), min(np.int64(N_CHUNKS), common[rb + R_COUNT] // PART_READS))


# ---- partial results: floats in pf[part], integers in pi[part, 1], indices in pi[part, 0] --
def _save(pf, pi, part, v):
    """Keep the partial value ``v`` of ``part``."""


@overload(_save)
def _save_impl(pf, pi, part, v):
    if isinstance(v, types.Float):
        def save_f(pf, pi, part, v):
            pf[part] = v
        return save_f

    def save_i(pf, pi, part, v):
        pi[part, 1] = v
    return save_i


def _saved(pf, pi, part, like):
    """The partial value of ``part``, of the kind of ``like``."""


@overload(_saved)
def _saved_impl(pf, pi, part, like):
    if isinstance(like, types.Float):
        return lambda pf, pi, part, like: pf[part]
    return lambda pf, pi, part, like: pi[part, 1]


# ---- one part ----------------------------------------------------------------------------
@callee(cache=True)
def reduce_part(x, pf, pi, common, rb, code, xb, part, nparts):
    """Reduce part ``part`` of ``nparts`` of the one output's elements (input offset ``xb``)
    by op ``code`` into its partial."""
    if code == SUM:         # float64 for floats, int64 for integers (the unsplit path's)
        _save(pf, pi, part, span_sum(x, xb, common, rb, part, nparts, _sum_zero(x)))
    elif code == MEAN:      # float64, integers too (reduce's integer means)
        pf[part] = span_sum(x, xb, common, rb, part, nparts, 0.0)
    elif code == MAX or code == MIN:
        _save(pf, pi, part, _widen(span_ext(x, xb, common, rb, part, nparts, code == MAX)))
    else:
        bv, bi = span_arg(x, xb, common, rb, part, nparts, code == ARGMAX)
        _save(pf, pi, part, _widen(bv))
        pi[part, 0] = bi


def _widen(v):
    """A partial value as kept: floats as float64, integers as int64 (both exact)."""


@overload(_widen)
def _widen_impl(v):
    if isinstance(v, types.Float):
        return lambda v: np.float64(v)
    return lambda v: np.int64(v)


# ---- the combine -------------------------------------------------------------------------
@callee(cache=True)
def combine(x, o, oi, of, pf, pi, code, ob, count, nparts):
    """Combine the ``nparts`` partials in part order into the output element at ``ob`` of
    the op's output buffer (``o``, ``oi`` or ``of``, as ``reduce.reduce_driver``)."""
    if code == SUM:
        _store_sum(o, oi, of, ob, _total(pf, pi, nparts, _sum_zero(x)), False, count)
    elif code == MEAN:
        _store_sum(o, oi, of, ob, _total(pf, pi, nparts, 0.0), True, count)
    elif code == MAX or code == MIN:
        r = _saved(pf, pi, 0, _widen(load(x[0])))
        for p in range(1, nparts):
            v = _saved(pf, pi, p, r)
            r = nan_max(r, v) if code == MAX else nan_min(r, v)
        o[ob] = store(o, r)
    else:
        ismax = code == ARGMAX
        bv = _saved(pf, pi, 0, _widen(load(x[0])))
        bi = pi[0, 0]
        for p in range(1, nparts):
            v = _saved(pf, pi, p, bv)
            i = pi[p, 0]
            tie = (v == bv) or (v != v and bv != bv)
            if _strictly_better(ismax, v, bv) or (tie and i < bi):
                bv = v
                bi = i
        oi[ob] = bi


@njit(inline="always")
def _total(pf, pi, nparts, zero):
    """The partial sums of the kind of ``zero`` added in part order."""
    acc = zero
    for p in range(nparts):
        acc += _saved(pf, pi, p, zero)
    return acc
