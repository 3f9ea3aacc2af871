"""The CUDA row-wise kernel: softmax, log_softmax, layer_norm and rms_norm over the
normalized dimensions of every row.

Block ``(e, j)`` normalizes the rows of entry ``e``'s tile (1 x T1 rows of the kept plane,
clipped by bounds) for outer index ``j``; ``G = blockDim / T1`` threads (a power of two, at
least 1) share a row: each pass walks the row's elements ``l, l + G, ...`` (logical order of
the reduction block), the group combines its partial max or sum in shared memory by halving,
and every lane reads the result back. Statistics accumulate in float64; the output is
rounded once (half precision: x, weight and bias are read in x's format and widened, the
result rounded once to the format through float32 rounded to odd). Operand blocks of the common area: out, x, weight, bias (a missing weight or
bias has stride 0 and is not read).
"""
import math

from numba import cuda, float64

from ..abi.common_area import C_NOUTER, C_OPS, MAX_RED, OP_BLOCK, R_COUNT, R_ND, R_SHAPE, R_STR
from ..abi.cuda_tiles import CUDA_ROWWISE_TILES, CUDA_THREADS
from ..abi.vocabulary import LAYER_NORM, LOG_SOFTMAX, RMS_NORM, SOFTMAX
from .half import access
from .tiles import decode_entry, operand_strides, outer_offset

N_SLOTS = len(CUDA_ROWWISE_TILES)
T0S = tuple(t[0] for t in CUDA_ROWWISE_TILES)
T1S = tuple(t[1] for t in CUDA_ROWWISE_TILES)
_RB = C_OPS + 4 * OP_BLOCK        # the reduction block after (out, x, w, b)


@cuda.jit(device=True, inline=True)
def norm_offset(common, k, t):
    """Offset of normalized index ``t`` in operand ``k`` (0 out, 1 x, 2 weight, 3 bias)."""
    off = 0
    for d in range(common[_RB + R_ND] - 1, -1, -1):
        n = common[_RB + R_SHAPE + d]
        off += (t % n) * common[_RB + R_STR + k * MAX_RED + d]
        t //= n
    return off


@cuda.jit(device=True, inline=True)
def group_combine(sv, tid, lane, g, is_max):
    """Combine the group's partials in ``sv`` (max or sum); the result ends in the group's
    first slot. Every thread of the block calls it (it synchronizes)."""
    cuda.syncthreads()
    h = g // 2
    while h > 0:
        if lane < h:
            a = sv[tid]
            b = sv[tid + h]
            if is_max:
                sv[tid] = a if (a >= b or a != a) else b
            else:
                sv[tid] = a + b
        cuda.syncthreads()
        h //= 2


def make_rowwise(nbtype, kind):
    """The row-wise kernel of one float dtype:
    ``(x, weight, bias, out, common, entries, eps, has_weight, has_bias)``."""
    t0s, t1s = T0S, T1S
    fmt = access(kind, nbtype)
    load, store = fmt.load, fmt.store_wide

    def rowwise(x, w, b, o, common, entries, eps, has_w, has_b):
        e = cuda.blockIdx.x
        code, slot, r0, v0, c0, v1, t0, t1 = decode_entry(entries, e, common, t0s, t1s)
        count = common[_RB + R_COUNT]
        osm, osn = operand_strides(common, 0)
        xsm, xsn = operand_strides(common, 1)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        g = nt // (t0 * t1)
        if g < 1:
            g = 1
        per_round = nt // g
        lane = tid % g
        first = tid - lane
        sv = cuda.shared.array(CUDA_THREADS, float64)
        j = cuda.blockIdx.y
        while j < common[C_NOUTER]:
            ob = outer_offset(common, 0, j)
            xb = outer_offset(common, 1, j)
            wb = outer_offset(common, 2, j)
            bb = outer_offset(common, 3, j)
            for base in range(0, v0 * v1, per_round):
                q = base + tid // g
                active = q < v0 * v1 and tid // g < per_round
                r = q // v1 if v1 > 0 else 0
                c = q - r * v1
                xo = xb + (r0 + r) * xsm + (c0 + c) * xsn
                oo = ob + (r0 + r) * osm + (c0 + c) * osn
                # pass 1: max (softmax) or mean (layer_norm) or mean of squares (rms_norm)
                acc = -math.inf if (code == SOFTMAX or code == LOG_SOFTMAX) else 0.0
                if active:
                    for t in range(lane, count, g):
                        v = float64(load(x[xo + norm_offset(common, 1, t)]))
                        if code == SOFTMAX or code == LOG_SOFTMAX:
                            acc = acc if (acc >= v or acc != acc) else v
                        elif code == RMS_NORM:
                            acc += v * v
                        else:
                            acc += v
                sv[tid] = acc
                group_combine(sv, tid, lane, g, code == SOFTMAX or code == LOG_SOFTMAX)
                s1 = sv[first]
                cuda.syncthreads()
                # pass 2: sum of exp (softmax) or of squared deviations (layer_norm)
                acc = 0.0
                mean = s1 / count if count > 0 else 0.0
                if active and code != RMS_NORM:
                    for t in range(lane, count, g):
                        v = float64(load(x[xo + norm_offset(common, 1, t)]))
                        if code == LAYER_NORM:
                            acc += (v - mean) * (v - mean)
                        else:
                            acc += math.exp(v - s1)
                sv[tid] = acc
                group_combine(sv, tid, lane, g, False)
                s2 = sv[first]
                cuda.syncthreads()
                # pass 3: write
                if active:
                    if code == LAYER_NORM:
                        scale = 1.0 / math.sqrt(s2 / count + eps)
                    elif code == RMS_NORM:
                        scale = 1.0 / math.sqrt(mean + eps)
                    else:
                        scale = math.log(s2) if code == LOG_SOFTMAX else 1.0 / s2
                    for t in range(lane, count, g):
                        v = float64(load(x[xo + norm_offset(common, 1, t)]))
                        if code == SOFTMAX:
                            y = math.exp(v - s1) * scale
                        elif code == LOG_SOFTMAX:
                            y = v - s1 - scale
                        else:
                            y = (v - mean) * scale if code == LAYER_NORM else v * scale
                            if has_w != 0:
                                y *= float64(load(w[wb + norm_offset(common, 2, t)]))
                            if has_b != 0:
                                y += float64(load(b[bb + norm_offset(common, 3, t)]))
                        o[oo + norm_offset(common, 0, t)] = store(y)
                cuda.syncthreads()
            j += cuda.gridDim.y
    return rowwise
