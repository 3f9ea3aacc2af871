"""The CUDA pooling kernel: max_pool2d and avg_pool2d over the output plane (OH x OW).

Block ``(e, j)`` computes entry ``e``'s tile of outputs for outer index ``j`` (N and C
merged); each thread takes outputs in turn and walks its window (kernel, strides, dilations
from the pool block of the common area; the tile's first input row and column from the
entry, ``abi.pool_table``). Taps in the padding are skipped. Max propagates NaN and gives
-inf for a window that sees only padding; avg divides by the taps inside the input, or with
count_include_pad by those inside the padded input (the CPU driver's rules). Half
precision widens every tap to float32 and rounds each output once to the format.
"""
import math

from numba import cuda

from ..abi.common_area import C_NOUTER
from ..abi.cuda_tiles import CUDA_POOL_TILES
from ..abi.pool_table import (E_IH0, E_IW0, P_CIP, P_DH, P_DW, P_H, P_KH, P_KW, P_PB, P_PR,
                              P_SH, P_SW, P_W, POOL_BLOCK_START)
from ..abi.vocabulary import MAX_POOL
from .half import access
from .tiles import decode_entry, operand_strides, outer_offset

N_SLOTS = len(CUDA_POOL_TILES)
T0S = tuple(t[0] for t in CUDA_POOL_TILES)
T1S = tuple(t[1] for t in CUDA_POOL_TILES)
_P = POOL_BLOCK_START


def make_pool(nbtype, kind):
    """The pool kernel of one float dtype: ``(x, out, common, entries)``."""
    t0s, t1s = T0S, T1S
    fmt = access(kind, nbtype)
    load, store = fmt.load, fmt.store_wide

    def pool(x, o, common, entries):
        e = cuda.blockIdx.x
        code, slot, r0, v0, c0, v1, t0, t1 = decode_entry(entries, e, common, t0s, t1s)
        ih0 = entries[e, E_IH0]
        iw0 = entries[e, E_IW0]
        kh = common[_P + P_KH]
        kw = common[_P + P_KW]
        sh = common[_P + P_SH]
        sw = common[_P + P_SW]
        dh = common[_P + P_DH]
        dw = common[_P + P_DW]
        H = common[_P + P_H]
        W = common[_P + P_W]
        pb = common[_P + P_PB]
        pr = common[_P + P_PR]
        cip = common[_P + P_CIP] != 0
        osm, osn = operand_strides(common, 0)
        xsh, xsw = operand_strides(common, 1)
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        j = cuda.blockIdx.y
        if v0 > 0 and v1 > 0:
            while j < common[C_NOUTER]:
                ob = outer_offset(common, 0, j)
                xb = outer_offset(common, 1, j)
                for i in range(tid, v0 * v1, nt):
                    r = i // v1
                    c = i - r * v1
                    h0 = ih0 + r * sh
                    w0 = iw0 + c * sw
                    acc = -math.inf if code == MAX_POOL else 0.0
                    taps = 0
                    for a in range(kh):
                        ih = h0 + a * dh
                        for b in range(kw):
                            iw = w0 + b * dw
                            if 0 <= ih < H and 0 <= iw < W:
                                v = load(x[xb + ih * xsh + iw * xsw])
                                if code == MAX_POOL:
                                    if not (acc >= v or acc != acc):
                                        acc = v
                                else:
                                    acc += v
                                    taps += 1
                            elif cip and ih < H + pb and iw < W + pr:
                                taps += 1
                    if code != MAX_POOL:
                        acc = acc / taps if taps > 0 else math.nan
                    o[ob + (r0 + r) * osm + (c0 + c) * osn] = store(acc)
                j += cuda.gridDim.y
    return pool
