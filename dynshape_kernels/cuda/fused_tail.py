"""The pieces of the fused kernel's tails on the device: a row-wise op over the last axis,
a reduction per row or over every element (the CPU's are ``cpu.fused_tail`` and
``cpu.fused``; the kernel, ``cuda.fused``, runs them around its one call of the step
interpreter).

* Row-wise (softmax, log_softmax, layer_norm, rms_norm; float kinds only): as the CUDA
  row-wise kernel, a group of threads per row (a power of two), statistics in float64
  combined in shared memory; the result is rounded to the dtype, then the steps after the
  op (``prog[split:]``: layer_norm's weight and bias among them) run on it and it is stored.
* Row reductions (sum, mean, max, min over the last axis): a group of threads per row,
  float sums in float64 (integer sums in int64, wrapping), max/min propagating NaN; float
  results rounded once to the dtype (a half format through float32 rounded to odd), integer
  sums to the int64 output and integer means to the float64 output, as on the CPU.
* Reductions over every element: ONE block walks every entry and outer index (its threads
  fold their elements, then the block combines them), so the result is deterministic
  without a second launch.
"""
import math

from numba import cuda, float64

from ..abi.common_area import C_OPS, OP_BLOCK, OP_SM, OP_SN
from ..abi.step_program import G_COL, G_OFF, G_OUTER, G_ROW
from ..abi.vocabulary import LAYER_NORM, LOG_SOFTMAX, MAX, MEAN, RMS_NORM, SOFTMAX, SUM
from .tiles import outer_offset

#: operand index of the first side input in a fused common area (0 out, 1 x)
SIDE_OP0 = 2
#: how ``fold`` combines: a sum, a NaN-propagating max or min
F_SUM, F_MAX, F_MIN = range(3)


@cuda.jit(device=True, inline=True)
def side_geometry(common, nsides, j, geo):
    """``geo[k]`` = (offset at outer index j, 0, row stride, column stride) of each side:
    the step interpreter's geometry of a fused common area's side operands."""
    for k in range(nsides):
        blk = C_OPS + (SIDE_OP0 + k) * OP_BLOCK
        geo[k, G_OFF] = outer_offset(common, SIDE_OP0 + k, j)
        geo[k, G_OUTER] = 0
        geo[k, G_ROW] = common[blk + OP_SM]
        geo[k, G_COL] = common[blk + OP_SN]


@cuda.jit(device=True, inline=True)
def fold(a, b, how):
    if how == F_SUM:
        return a + b
    if how == F_MAX:
        return a if (a >= b or a != a) else b
    return a if (a <= b or a != a) else b


@cuda.jit(device=True, inline=True)
def group_fold(sv, tid, lane, g, how):
    """Combine the partials of each group of ``g`` threads (a power of two) in ``sv``; the
    result ends in the group's first slot. Every thread of the block calls it (it
    synchronizes)."""
    cuda.syncthreads()
    h = g // 2
    while h > 0:
        if lane < h:
            sv[tid] = fold(sv[tid], sv[tid + h], how)
        cuda.syncthreads()
        h //= 2


@cuda.jit(device=True, inline=True)
def group_size(nt, rows):
    """Threads per row: the largest power of two that gives every row of a round a group
    (at least 1)."""
    g = 1
    while g * 2 <= nt and g * 2 * rows <= nt:
        g *= 2
    return g


@cuda.jit(device=True, inline=True)
def how_of(code):
    """How a reduction's partials combine."""
    if code == SUM or code == MEAN:
        return F_SUM
    return F_MAX if code == MAX else F_MIN


@cuda.jit(device=True, inline=True)
def row_stat(code, sweep, st, v, m1, mean):
    """Fold element ``v`` (float64) into a row-wise op's statistic of sweep 0 (max, sum, sum
    of squares) or sweep 1 (sum of exp(v - max), of squared deviations)."""
    if code == SOFTMAX or code == LOG_SOFTMAX:
        if sweep == 0:
            return fold(st, v, F_MAX)
        return st + math.exp(v - m1)
    if code == RMS_NORM:
        return st + v * v
    if sweep == 0:
        return st + v
    return st + (v - mean) * (v - mean)


@cuda.jit(device=True, inline=True)
def row_scale(code, m2, mean, eps, n):
    """The factor of sweep 2 from the row's statistics (``m2``: sweep 1's sum)."""
    if code == LAYER_NORM:
        return 1.0 / math.sqrt(m2 / n + eps)
    if code == RMS_NORM:
        return 1.0 / math.sqrt(mean + eps)
    return math.log(m2) if code == LOG_SOFTMAX else 1.0 / m2


@cuda.jit(device=True, inline=True)
def row_value(code, v, m1, mean, scale):
    """The row-wise op's result for element ``v`` (float64) from its row's statistics."""
    if code == SOFTMAX:
        return math.exp(v - m1) * scale
    if code == LOG_SOFTMAX:
        return v - m1 - scale
    if code == LAYER_NORM:
        return (v - mean) * scale
    return v * scale


def make_finish(kind, store_wide):
    """``finish(o, oi, of, k, acc, code, count)``: a finished reduction to the output of its
    kind (float results rounded once; integer sums to int64, integer means to float64)."""
    if kind == "integer":
        @cuda.jit(device=True, inline=True)
        def finish(o, oi, of, k, acc, code, count):
            if code == SUM:
                oi[k] = acc
            elif code == MEAN:
                of[k] = float64(acc) / count
            else:
                o[k] = acc
        return finish

    @cuda.jit(device=True, inline=True)
    def finish(o, oi, of, k, acc, code, count):
        o[k] = store_wide(acc / count if code == MEAN else acc)
    return finish


__all__ = ["F_MAX", "F_MIN", "F_SUM", "fold", "group_fold", "group_size", "how_of",
           "make_finish", "row_scale", "row_stat", "row_value", "side_geometry"]
