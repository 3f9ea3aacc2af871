"""Combination for the matmul family: micro-kernel slot and output tiling of M x N (x batch).

A matmul table lists output tiles ``(slot, m0, n0, tm, tn, batch)``; the driver walks all of
K inside each tile in fixed KC blocks of its slot (K is never tiled nor overlapped). A table
is built for the upper end of its bucket (M, N, K and batch bucketed) and the driver clips
every tile to the real sizes (VARIABLE tails), so one table serves the whole bucket.

* simplified: the slot heuristic of the kernels (``choose_slot``) and its balanced tiles;
* optimized: every slot that can serve the shape, each with its balanced and its
  thread-balanced tiling, priced by :func:`cost` at the shape; the simplified candidate is
  among them, so optimized <= simplified in the model.

The cost model prices a tile by its padded micro-tile FLOPs at the slot's measured rate,
its packing traffic (A per tile, B once per run of tiles sharing a B panel) and a per-tile
overhead, and takes the makespan over the driver's contiguous per-thread chunks.
"""
import numpy as np
from dynshape_kernels.abi.tiles import (MATMUL_A_ROWS_SLOT as A_ROWS_SLOT,
                                        MATMUL_DOT_SLOT as DOT_SLOT, MATMUL_DOT_TAIL,
                                        MATMUL_DOT_TAIL_MIN_K,
                                        MATMUL_INPLACE_SLOT as INPLACE_SLOT,
                                        MATMUL_NSLOTS as NSLOTS, matmul_slots as _slots_for)

from dynshape.planning.matmul_tiles import (_balanced, _thread_balanced, choose_slot,
                                            make_gemm_table)

# measured on the project's machine (1 thread, `python -m bench.bench_gemm --slots`):
# GFLOP/s of each slot's micro-kernel on whole padded micro-tiles
SLOT_GFLOPS = {"float32": (190.0, 165.0, 60.0, 175.0, 110.0),
               "float64": (98.0, 85.0, 30.0, 80.0, 60.0)}
# half precision runs the float32 micro-kernels on operands widened while packing
SLOT_GFLOPS["float16"] = SLOT_GFLOPS["bfloat16"] = SLOT_GFLOPS["float32"]
PACK_NS = {"float32": 0.35, "float64": 0.45, "float16": 0.4, "bfloat16": 0.4}  # per element
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}
READ_NS_PER_BYTE = 0.05                          # operand read in place (no packing)
TILE_NS = 400.0       # per tile: decode, workspace, epilogue set-up
STORE_NS = 0.25       # per output element (epilogue)
#: padded columns one dot-product column of an in-place tile costs (``MATMUL_DOT_TAIL``: its
#: gather and horizontal sums; 256 x (17 x 64 @ 64 x 33) float32 ran 13% faster with one)
DOT_COLUMN_COST = 2


def feasible_slots(M, N, K, dtype, a_k_contiguous):
    """Slots worth pricing for the shape (every slot accepts every shape; these exclude the
    ones that would waste most of their micro-tile)."""
    cfg = _slots_for(dtype)
    slots = [0, 1]
    if M <= 4 * cfg[3][2]:
        slots.append(3)
    if N <= 64:
        slots.append(2)
        if a_k_contiguous and K >= 64:
            slots.append(DOT_SLOT)
    return slots


def tilings(M, N, K, dtype, a_k_contiguous, nthreads, batch):
    """Candidate (slot, tm, tn) for the shape; the simplified choice first."""
    first = choose_slot(M, N, K, dtype, a_k_contiguous, nthreads, batch)
    cands = [first]
    cfg = _slots_for(dtype)
    for s in feasible_slots(M, N, K, dtype, a_k_contiguous):
        MR, NR, MC, NC, _ = cfg[s]
        tm, tn = _balanced(M, MC, MR), _balanced(N, NC, NR)
        for c in ((s, tm, tn), (s,) + _thread_balanced(M, N, MR, NR, MC, NC, tm, tn, nthreads)):
            if c not in cands:
                cands.append(c)
    return cands


def cost(M, N, K, batch, dtype, slot, tm, tn, nthreads, a_k_contiguous=True,
         b_n_contiguous=True):
    """Model time (ns) of a tiling: makespan of the driver's per-thread chunks.

    Per tile: padded micro-tile FLOPs at the slot's rate, A packed (or read in place by the
    dot, A-rows and in-place slots), B packed once per column of tiles (or read in place by
    tiles of a single micro-panel row, and by the in-place slot's tiles, when B is
    row-contiguous, as the kernels do), the epilogue's stores and a fixed overhead. The
    in-place slot's micro-tiles are padded to whole vectors, not to NR: its kernels compute
    only the vectors a tile's columns reach, and with a k-contiguous A the last
    1 .. MATMUL_DOT_TAIL columns past them as dot products (DOT_COLUMN_COST each)."""
    cfg = _slots_for(dtype)[slot]
    MR, NR = cfg[0], cfg[1]
    rate = SLOT_GFLOPS[dtype][slot]
    pack = PACK_NS[dtype]
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    read = READ_NS_PER_BYTE * ITEMSIZE[name]
    full = name in ("float32", "float64")     # not half precision (always packed)
    inplace = slot == INPLACE_SLOT and b_n_contiguous and full
    nm, nn = -(-M // tm), -(-N // tn)
    mv = np.minimum(tm, M - np.arange(nm) * tm)
    nv = np.minimum(tn, N - np.arange(nn) * tn)
    pm = -(-mv // MR) * MR
    step = 64 // ITEMSIZE[name] if inplace else NR
    pn = -(-nv // step) * step
    if inplace and a_k_contiguous and K >= MATMUL_DOT_TAIL_MIN_K * step:
        r = nv % step
        pn = np.where((r >= 1) & (r <= MATMUL_DOT_TAIL), nv - r + DOT_COLUMN_COST * r, pn)
    # tiles in the table's order: batch, then n, then m (B panel shared down a column)
    t = 2.0 * K * pn[:, None] * pm[None, :] / rate
    t = t + STORE_NS * nv[:, None] * mv[None, :] + TILE_NS
    a_rows = a_k_contiguous and (slot == DOT_SLOT or (slot == A_ROWS_SLOT and full))
    a_cost = (read if a_rows or inplace else pack) * K * mv
    t = t + a_cost[None, :]
    direct = b_n_contiguous and slot != DOT_SLOT and (tm <= MR or inplace)
    if direct:
        t = t + read * K * nv[:, None]
    else:
        t[:, 0] += pack * K * nv
    tiles = np.tile(t.reshape(-1), batch)
    nth = max(1, min(nthreads, tiles.size))
    bounds = [i * tiles.size // nth for i in range(nth + 1)]
    csum = np.concatenate([[0.0], np.cumsum(tiles)])
    return float(max(csum[bounds[i + 1]] - csum[bounds[i]] for i in range(nth)))


class MatmulCombination:
    __slots__ = ("entries", "slot", "tile", "variant", "cost", "description")

    def __init__(self, entries, slot, tile, variant, cost, description):
        self.entries = entries
        self.slot = slot
        self.tile = tile
        self.variant = variant
        self.cost = cost
        self.description = description


def combine(M, N, K, batch, dtype, a_k_contiguous, b_n_contiguous, nthreads, variant):
    """The combination for an M x N x K problem with ``batch`` batches (bucket upper ends)."""
    cands = tilings(M, N, K, dtype, a_k_contiguous, nthreads, batch)
    if variant == "simplified":
        cands = cands[:1]
    priced = sorted(((cost(M, N, K, batch, dtype, *c, nthreads, a_k_contiguous,
                           b_n_contiguous), c) for c in cands), key=lambda x: x[0])
    c, (slot, tm, tn) = priced[0]
    entries = make_gemm_table(M, N, tm, tn, slot, batch, dtype)
    cfg = _slots_for(dtype)[slot]
    desc = (f"slot {slot} (micro-tile {cfg[0]}x{cfg[1]}, K block {cfg[4]}), tiles {tm}x{tn}, "
            f"{len(entries)} tiles over {batch} batch(es), {len(cands)} candidates")
    return MatmulCombination(entries, slot, (tm, tn), variant, c, desc)


assert NSLOTS == len(SLOT_GFLOPS["float32"]) == len(SLOT_GFLOPS["float64"])
