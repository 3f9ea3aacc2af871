"""Combination for the matmul family: micro-kernel slot and output tiling of M x N (x batch).

A matmul table lists output tiles ``(slot, m0, n0, tm, tn, batch)``; the driver walks all of
K inside each tile in fixed KC blocks of its slot (K is never tiled nor overlapped). A table
is built for the upper end of its bucket (M, N, K and batch bucketed) and the driver clips
every tile to the real sizes (VARIABLE tails), so one table serves the whole bucket.

* simplified: the slot heuristic of the kernels (``choose_slot``) and its balanced tiles;
* optimized: every slot that can serve the shape, each with its balanced and its
  thread-balanced tiling, priced by :func:`cost` at the smallest and the largest M and N of
  the bucket; the table is the candidate whose worst ratio to the cheapest candidate at
  those points is smallest (:func:`choose`). The first buckets are wide in relative terms
  (M in 1..8 share a table): priced at the upper end only, a 1-row product ran on the
  8-row skinny slot, computing 8 rows (1 x 64 @ 64 x 128 float32: 3.9 us in the driver
  against the in-place slot's 2.3).

The cost model prices a tile by its padded micro-tile FLOPs at the slot's measured rate, a
cost per micro-kernel call (its accumulators loaded and stored per K block), its packing
traffic (A per tile, B once per run of tiles sharing a B panel), the epilogue's stores and
a per-tile overhead, and takes the makespan over the driver's contiguous per-thread chunks,
plus the thread pool's start when the call uses more than one thread (calls under
``MATMUL_SERIAL_MACS`` multiply-adds run on one thread, as the driver does).
"""
import numpy as np
from dynshape_kernels.abi.tiles import (MATMUL_A_ROWS_SLOT as A_ROWS_SLOT,
                                        MATMUL_DOT_SLOT as DOT_SLOT, MATMUL_DOT_TAIL,
                                        MATMUL_DOT_TAIL_MIN_K,
                                        MATMUL_INPLACE_SLOT as INPLACE_SLOT,
                                        MATMUL_NSLOTS as NSLOTS, MATMUL_SERIAL_MACS,
                                        matmul_slots as _slots_for)

from dynshape_kernels.cpu.vector_width import target_has_avx512f

from dynshape.planning.matmul_tiles import (_balanced, _thread_balanced, choose_slot,
                                            make_gemm_table)

# The constants were fitted (least squares on log time) to the driver times of every
# candidate tiling at 238 float32 shapes (M 1..1024, N 10..3072, K 64..1024; 2 threads;
# an Intel AVX-512 host), each candidate timed in three alternating rounds; the memory
# term (MEM_NS_PER_BYTE) was set from two products after. Over those shapes the table
# chosen ran 1.14x the fastest candidate's time on geometric mean (worst 3.4x, 60 shapes
# over 1.15x) with the former model; 1.03x (worst 1.46x, 11 shapes) with this one and the
# bucket-wide choice; on an earlier, independent set of timings of the same shapes
# 1.17x -> 1.05x. float64's and the half formats' constants are the former ones scaled by
# float32's changes (not fitted; over 72 float64 shapes, M 1..256, N 10..768, K 64..768:
# 1.25x -> 1.04x, worst 2.3x -> 1.34x).
# GFLOP/s of each slot's micro-kernel on whole padded micro-tiles
SLOT_GFLOPS = {"float32": (187.0, 167.0, 72.0, 143.0, 91.0),
               "float64": (97.0, 86.0, 36.0, 65.0, 50.0)}
#: Without AVX-512 the micro-kernels run in register blocks (``cpu.gemm_ukernel``), all but
#: the skinny-M slot's (3), which reads B in place as one block and spills its accumulators:
#: one thread, panels in L1, AMD Zen 3 (AVX2): 30 GFLOP/s against 88 for slot 0's kernel,
#: where the rates above have 143 against 187. Its rate is scaled by that ratio while B fits
#: in the last-level cache (SKINNY_STREAM_BYTES); past it the pass is bound by memory and
#: the spills are hidden. Measured, float32, 2 threads, of NumPy's time: 1 x 768 @ 768 x 3072
#: (9.4 MB of B) on slot 3 0.20-0.21, on slot 1 0.65-0.66; 8 x 4096 @ 4096 x 4096 (64 MB)
#: on slot 3 0.70-0.77, on slot 1 0.59-0.62.
SKINNY_UNBLOCKED_SCALE = 1.0 if target_has_avx512f() else (30.0 / 88.0) / (143.0 / 187.0)
SKINNY_STREAM_BYTES = 16 << 20
# half precision runs the float32 micro-kernels on operands widened while packing
SLOT_GFLOPS["float16"] = SLOT_GFLOPS["bfloat16"] = SLOT_GFLOPS["float32"]
PACK_NS = {"float32": 0.10, "float64": 0.13, "float16": 0.12, "bfloat16": 0.12}  # per element
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}
READ_NS_PER_BYTE = 0.012                         # operand read in place (no packing)
TILE_NS = 400.0       # per tile: decode, workspaces, epilogue set-up
INPLACE_TILE_NS = 3.0  # per tile of the in-place slot (straight into C: no set-up)
UK_NS = 49.0          # per micro-kernel call (per micro-tile and K block)
STORE_NS = 0.083      # per output element (epilogue)
LAUNCH_NS = 3500.0    # the thread pool's start and join, when a call uses more than 1 thread
#: B from memory: a thread's share of B larger than its L2 (B_CACHE_BYTES) is not in cache
#: when the call starts; B's first pass is then bound by memory (about 19 GB/s per thread
#: with both threads streaming: a 1 x 768 @ 768 x 3072 float32 product ran 262 us on either
#: slot that reads B in place). Read in place, it overlaps the arithmetic of a tile's first
#: micro-panel row (further rows of the in-place slot's tiles, MR rows each, compute on B
#: from cache after it); packed, it adds to the packing. Without this term the in-place
#: slot was chosen for 8 x 768 @ 768 x 3072 (441 us against the skinny-M slot's 284) and the
#: large slot, packing B, for 8 x 4096 @ 4096 x 4096 (4.4 ms against 2.1).
MEM_NS_PER_BYTE = 0.05
B_CACHE_BYTES = 2 << 20
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

    Per tile: padded micro-tile FLOPs at the slot's rate, a cost per micro-kernel call, A
    packed (or read in place by the dot, A-rows and in-place slots), B packed once per
    column of tiles (or read in place by tiles of a single micro-panel row, and by the
    in-place slot's tiles, when B is row-contiguous, as the kernels do), the epilogue's
    stores and a fixed overhead (smaller for the in-place slot's tiles). The in-place
    slot's micro-tiles are padded to whole vectors, not to NR: its kernels compute only the
    vectors a tile's columns reach, and with a k-contiguous A the last 1 .. MATMUL_DOT_TAIL
    columns past them as dot products (DOT_COLUMN_COST each). A call of fewer than
    MATMUL_SERIAL_MACS multiply-adds runs on one thread; one on more threads pays
    LAUNCH_NS."""
    cfg = _slots_for(dtype)[slot]
    MR, NR, KC = cfg[0], cfg[1], cfg[4]
    rate = SLOT_GFLOPS[dtype][slot]
    pack = PACK_NS[dtype]
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if slot == 3 and K * N * ITEMSIZE[name] <= SKINNY_STREAM_BYTES:
        rate *= SKINNY_UNBLOCKED_SCALE
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
    calls = (pm[None, :] // MR) * -(-pn[:, None] // NR) * -(-K // KC)
    t = (t + UK_NS * calls + STORE_NS * nv[:, None] * mv[None, :]
         + (INPLACE_TILE_NS if inplace else TILE_NS))
    a_rows = a_k_contiguous and (slot == DOT_SLOT or (slot == A_ROWS_SLOT and full))
    a_cost = (read if a_rows or inplace else pack) * K * mv
    t = t + a_cost[None, :]
    direct = b_n_contiguous and slot != DOT_SLOT and (tm <= MR or inplace)
    nth = max(1, min(nthreads, nm * nn * batch))
    if M * N * K * batch < MATMUL_SERIAL_MACS:
        nth = 1
    from_memory = K * N * ITEMSIZE[name] > B_CACHE_BYTES * nth
    mem = MEM_NS_PER_BYTE * ITEMSIZE[name] * K * nv if from_memory else 0.0 * nv
    if direct and from_memory:
        # B from memory: its first pass overlaps the first micro-panel row's arithmetic
        first = 2.0 * K * pn[:, None] * np.minimum(pm, MR)[None, :] / rate
        t = t - first + np.maximum(first, mem[:, None])
    elif direct:
        t = t + read * K * nv[:, None]
    else:
        t[:, 0] += pack * K * nv + mem
    tiles = np.tile(t.reshape(-1), batch)
    bounds = [i * tiles.size // nth for i in range(nth + 1)]
    csum = np.concatenate([[0.0], np.cumsum(tiles)])
    span = max(csum[bounds[i + 1]] - csum[bounds[i]] for i in range(nth))
    return float(span + (LAUNCH_NS if nth > 1 else 0.0))


def choose(cands, points, batch, dtype, nthreads, a_k_contiguous, b_n_contiguous):
    """``(worst ratio, candidate, its cost at the last point)``: the candidate whose largest
    ratio of its cost to the cheapest candidate's, over the problem sizes ``points`` ((M, N,
    K) the table serves, the upper end last), is smallest; ties go to the cheaper at the
    last point. One point: the cheapest candidate there."""
    priced = [[cost(M, N, K, batch, dtype, *c, nthreads, a_k_contiguous, b_n_contiguous)
               for M, N, K in points] for c in cands]
    best = [min(p[i] for p in priced) for i in range(len(points))]
    worst = [max(x / b if b > 0 else 1.0 for x, b in zip(p, best)) for p in priced]
    k = min(range(len(cands)), key=lambda i: (worst[i], priced[i][-1]))
    return worst[k], cands[k], priced[k][-1]


def bucket_points(M, N, K, low=None):
    """The problem sizes a table built for (M, N, K) is priced at: the smallest and the
    largest M and N of its bucket (``low``: the bucket's exclusive lower ends of M and N;
    None: the upper ends only)."""
    if low is None:
        return [(M, N, K)]
    ms = sorted({min(low[0] + 1, M), M})
    ns = sorted({min(low[1] + 1, N), N})
    return [(m, n, K) for m in ms for n in ns]


def combine(M, N, K, batch, dtype, a_k_contiguous, b_n_contiguous, nthreads, variant,
            low=None):
    """The combination for an M x N x K problem with ``batch`` batches (bucket upper ends;
    ``low``: the bucket's exclusive lower ends of M and N, for the optimized choice)."""
    cands = tilings(M, N, K, dtype, a_k_contiguous, nthreads, batch)
    if variant == "simplified":
        cands = cands[:1]
    points = bucket_points(M, N, K, low)
    worst, (slot, tm, tn), c = choose(cands, points, batch, dtype, nthreads, a_k_contiguous,
                                      b_n_contiguous)
    entries = make_gemm_table(M, N, tm, tn, slot, batch, dtype)
    cfg = _slots_for(dtype)[slot]
    over = (f", priced at {len(points)} sizes of the bucket (worst {worst:.2f}x the cheapest)"
            if len(points) > 1 else "")
    desc = (f"slot {slot} (micro-tile {cfg[0]}x{cfg[1]}, K block {cfg[4]}), tiles {tm}x{tn}, "
            f"{len(entries)} tiles over {batch} batch(es), {len(cands)} candidates{over}")
    return MatmulCombination(entries, slot, (tm, tn), variant, c, desc)


class MatmulCombination:
    __slots__ = ("entries", "slot", "tile", "variant", "cost", "description")

    def __init__(self, entries, slot, tile, variant, cost, description):
        self.entries = entries
        self.slot = slot
        self.tile = tile
        self.variant = variant
        self.cost = cost
        self.description = description


assert NSLOTS == len(SLOT_GFLOPS["float32"]) == len(SLOT_GFLOPS["float64"])
