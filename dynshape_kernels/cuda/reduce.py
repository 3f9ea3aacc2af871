"""The CUDA reduce kernel: sum, mean, max, min, argmax, argmin over any set of axes.

Block ``(e, j)`` computes the outputs of entry ``e``'s tile (T0 x T1 outputs of the kept
plane, clipped by bounds) for outer index ``j``. ``G = blockDim / (T0 * T1)`` threads (at
least 1, a power of two) reduce each output: thread lane ``l`` of a group walks reduced
elements ``l, l + G, ...`` in the logical (C) order of the reduced dimensions of the
reduction block, then the group combines its lanes in shared memory by halving. The
semantics are the CPU driver's: float32 sums and means accumulate in float64, integer sums
in int64 (wrapping), integer means in float64; max/min propagate NaN; argmax/argmin give the
first extreme index, or the first NaN's. The output buffer written is the one the reduction
block's kind names (same dtype, int64 or float64). Half precision loads widen to float32,
sums and means accumulate in float64 like float32's, and a result is rounded once to the
format (through float32 rounded to odd, as on the CPU).
"""
import math

from numba import cuda, float64, int64

from ..abi.common_area import (C_NOUTER, C_OPS, OP_BLOCK, R_COUNT, R_ND, R_OUTKIND, R_SHAPE,
                               R_STR, OUT_F64, OUT_I64)
from ..abi.cuda_tiles import CUDA_REDUCE_TILES, CUDA_THREADS
from ..abi.vocabulary import ARGMAX, ARGMIN, MAX, MEAN, SUM
from .half import access
from .tiles import decode_entry, operand_strides, outer_offset

N_SLOTS = len(CUDA_REDUCE_TILES)
T0S = tuple(t[0] for t in CUDA_REDUCE_TILES)
T1S = tuple(t[1] for t in CUDA_REDUCE_TILES)
_RB = C_OPS + 2 * OP_BLOCK        # the reduction block after the (out, x) operand blocks


@cuda.jit(device=True, inline=True)
def red_offset(common, t):
    """Element offset (input strides) of logical reduced index ``t`` (C order)."""
    off = 0
    for k in range(common[_RB + R_ND] - 1, -1, -1):
        n = common[_RB + R_SHAPE + k]
        off += (t % n) * common[_RB + R_STR + k]
        t //= n
    return off


@cuda.jit(device=True, inline=True)
def better(code, v, i, w, j):
    """Whether candidate (w, j) beats (v, i) for max/min/argmax/argmin (NaN first, then the
    extreme value, ties to the lower index)."""
    if w != w:
        return v == v or j < i
    if v != v:
        return False
    if code == MAX or code == ARGMAX:
        return w > v or (w == v and j < i)
    return w < v or (w == v and j < i)


def make_reduce(nbtype, kind):
    """The reduce kernel of one dtype: ``(x, out, out_i64, out_f64, common, entries)``."""
    acc_t = int64 if kind == "integer" else float64
    fmt = access(kind, nbtype)
    load, store = fmt.load, fmt.store_wide
    t0s, t1s = T0S, T1S

    def reduce_(x, o, oi, of, common, entries):
        e = cuda.blockIdx.x
        code, slot, r0, v0, c0, v1, t0, t1 = decode_entry(entries, e, common, t0s, t1s)
        count = common[_RB + R_COUNT]
        okind = common[_RB + R_OUTKIND]
        osm, osn = operand_strides(common, 0)
        xsm, xsn = operand_strides(common, 1)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        g = nt // (t0 * t1)
        if g < 1:
            g = 1
        per_round = nt // g
        lane = tid % g
        sv = cuda.shared.array(CUDA_THREADS, acc_t)
        si = cuda.shared.array(CUDA_THREADS, int64)
        j = cuda.blockIdx.y
        while j < common[C_NOUTER]:
            ob = outer_offset(common, 0, j)
            xb = outer_offset(common, 1, j)
            for base in range(0, v0 * v1, per_round):
                q = base + tid // g
                active = q < v0 * v1 and tid // g < per_round
                r = q // v1 if v1 > 0 else 0
                c = q - r * v1
                xo = xb + (r0 + r) * xsm + (c0 + c) * xsn
                acc = acc_t(0)
                best = -1
                if active:
                    if code == SUM or code == MEAN:
                        for t in range(lane, count, g):
                            acc += acc_t(load(x[xo + red_offset(common, t)]))
                    else:
                        for t in range(lane, count, g):
                            w = acc_t(load(x[xo + red_offset(common, t)]))
                            if best < 0 or better(code, acc, best, w, t):
                                acc = w
                                best = t
                sv[tid] = acc
                si[tid] = best
                cuda.syncthreads()
                h = g // 2
                while h > 0:
                    if lane < h and active:
                        w = sv[tid + h]
                        k = si[tid + h]
                        if code == SUM or code == MEAN:
                            sv[tid] = sv[tid] + w
                        elif k >= 0 and (si[tid] < 0 or better(code, sv[tid], si[tid], w, k)):
                            sv[tid] = w
                            si[tid] = k
                    cuda.syncthreads()
                    h //= 2
                if lane == 0 and active:
                    res = sv[tid]
                    oo = ob + (r0 + r) * osm + (c0 + c) * osn
                    if code == ARGMAX or code == ARGMIN:
                        oi[oo] = si[tid]
                    elif code == MEAN:
                        m = float64(res) / count if count > 0 else math.nan
                        if okind == OUT_F64:
                            of[oo] = m
                        else:
                            o[oo] = store(m)
                    elif okind == OUT_I64:
                        oi[oo] = int64(res)
                    else:
                        o[oo] = store(res)
                cuda.syncthreads()
            j += cuda.gridDim.y
    return reduce_
