"""Matmul output tilings: tile tables of an M x N (x batch) output, the slot heuristic of the
simplified combination, and tile sizes balanced over the macro tile and the threads."""
import numpy as np
from dynshape_kernels.abi.matmul_table import TABLE_COLS
from dynshape_kernels.abi.tiles import (MATMUL_DOT_SLOT as DOT_SLOT, MATMUL_NSLOTS as NSLOTS,
                                        matmul_slots as _slots_for)


def make_gemm_table(M, N, tile_m, tile_n, slot=0, batch=1, dtype=None):
    """Tile table covering an M x N output (per batch) with tile_m x tile_n
    tiles (tails get smaller valid sizes).  Rows ``(slot, m0, n0, mv, nv, b)``
    as int64, ordered batch-major, then n, then m (so consecutive tiles
    share their B panel).  tile_m/tile_n must not exceed the slot's MC/NC
    (checked when ``dtype`` is given)."""
    if tile_m < 1 or tile_n < 1 or not 0 <= slot < NSLOTS:
        raise ValueError("make_gemm_table: bad tile size or slot")
    if dtype is not None:
        _, _, MC, NC, _ = _slots_for(dtype)[slot]
        if tile_m > MC or tile_n > NC:
            raise ValueError(f"make_gemm_table: tile {tile_m}x{tile_n} exceeds slot {slot} "
                             f"macro tile {MC}x{NC}")
    if M <= 0 or N <= 0 or batch <= 0:
        return np.zeros((0, TABLE_COLS), np.int64)
    m0 = np.arange(0, M, tile_m, dtype=np.int64)
    n0 = np.arange(0, N, tile_n, dtype=np.int64)
    bb, nn, mm = np.meshgrid(np.arange(batch, dtype=np.int64), n0, m0, indexing="ij")
    t = np.empty((mm.size, TABLE_COLS), np.int64)
    t[:, 0] = slot
    t[:, 1] = mm.ravel()
    t[:, 2] = nn.ravel()
    t[:, 3] = np.minimum(tile_m, M - t[:, 1])
    t[:, 4] = np.minimum(tile_n, N - t[:, 2])
    t[:, 5] = bb.ravel()
    return t


def choose_slot(M, N, K, dtype=np.float32, a_k_contiguous=True, nthreads=1, batch=1):
    """Heuristic choice of (slot, tile_m, tile_n) for an M x N x K problem.
    ``a_k_contiguous``: A's column stride is 1 (lets the narrow-N dot slot
    read A in place).  With ``nthreads > 1`` and a single batch, the split
    is refined so that the tiles spread evenly over the threads."""
    cfg = _slots_for(dtype)
    if M <= cfg[3][2] and N >= 4 * cfg[3][1]:
        s = 3
    elif N <= 16 and M >= 64 and K >= 64 and a_k_contiguous:
        s = DOT_SLOT
    elif N <= cfg[2][3] and M >= 4 * cfg[2][0]:
        s = 2
    elif M * N <= 64 * 64 or M < 64 or N < 64:
        s = 1
    else:
        s = 0
    MR, NR, MC, NC, KC = cfg[s]
    tm, tn = _balanced(M, MC, MR), _balanced(N, NC, NR)
    if batch == 1 and nthreads > 1:
        tm, tn = _thread_balanced(M, N, MR, NR, MC, NC, tm, tn, nthreads)
    return s, tm, tn


def _thread_balanced(M, N, MR, NR, MC, NC, tm, tn, nthreads):
    """Refine (tm, tn) so that few tiles spread evenly over the threads:
    minimise ceil(ntiles / nthreads) * padded tile area (+ a per-tile
    overhead) over slightly finer splits."""
    def cost(a, b):
        nt = -(-M // a) * -(-N // b)
        pa, pb = -(-a // MR) * MR, -(-b // NR) * NR
        return -(-nt // nthreads) * (pa * pb + 4 * (pa + pb) * 8) + nt
    best = (cost(tm, tn), tm, tn)
    nm0, nn0 = -(-M // tm), -(-N // tn)
    for nm in range(nm0, nm0 + nthreads + 1):
        for nn in range(nn0, nn0 + nthreads + 1):
            a = min(MC, -(-(-(-M // nm)) // MR) * MR) if nm > 1 else min(M, MC)
            b = min(NC, -(-(-(-N // nn)) // NR) * NR) if nn > 1 else min(N, NC)
            c = cost(a, b)
            if c < best[0]:
                best = (c, a, b)
    return best[1], best[2]


def _balanced(X, XC, XR):
    """Tile size <= XC splitting X into equal-ish tiles, rounded up to a
    multiple of the micro-tile XR when that does not exceed XC."""
    if X <= XC:
        return X
    nt = -(-X // XC)
    t = -(-X // nt)
    t = -(-t // XR) * XR
    return min(t, XC)
