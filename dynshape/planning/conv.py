"""Planner of the conv family: tiles the output of every image and group into rectangles of
output rows x columns times blocks of output channels, picks the static kernel (slot) by a
cost model, and records per tile its input offset (ih0, iw0), so that the driver reads each
tile's input window in place. Tables are laid out for the largest shape of the (N, OH, OW)
bucket; the driver clips tiles to the real shape."""
import itertools

import numpy as np
from dynshape_kernels.abi.conv_table import (T_G, T_IH0, T_IW0, T_KID, T_M0, T_MV, T_N, T_NCOL,
                                              T_OH0, T_OW0, T_VH, T_VW)
from dynshape_kernels.abi.tiles import CONV_TILES
from dynshape_kernels.abi.tiles import CONV_DIRECT_SLOT as DIRECT_SLOT
from dynshape_kernels.abi.tiles import MATMUL_SLOTS_F32 as SLOTS_F32
from dynshape_kernels.abi.tiles import (CONV_WINDOW_TILES, MATMUL_SLOTS_F64 as SLOTS_F64,
                                        conv_window_tile)
from dynshape_kernels.catalog import CATALOG

from dynshape.planning.makespan import makespan
from dynshape.tables.bucket import bucket
from dynshape.tables.conv_table import ConvTable

FAMILY = "conv"
# cost model, in units of one vector-lane FMA of the GEMM micro-kernel
PACK_COST = 12.0          # per packed input element (window packing)
ROW_COST = 600.0          # per packed K row and tile row (one row segment of the window)
# ROW_COST from conv2d 64->64 3x3 on 57x61, tilings forced and timed in alternating blocks
# (1 thread): 12x32 tiles 1950-2074 us, 6x64 tiles (the same positions, half the row
# segments) 1716-1831 us, i.e. about 6.5 ns per K row and tile row. A thread packs a channel
# block's weights once for its consecutive tiles of that block (not priced: with one channel
# block, 15 tiles of 4x64 cost 14-21 us more than 10 of 6x64, within TILE_COST's order)
STORE_COST = 6.0          # per stored output element (epilogue)
TILE_COST = 4000.0        # per tile (workspace set-up, A packing start, loop overheads)
DIRECT_FMA_COST = 3.0     # per FMA of the direct kernel (acc load/store per tap)
DIRECT_TAP_COST = 24.0    # per tap and output row of the direct kernel (range, loop set-up)
# tiles that read their input window in place (unit horizontal stride, not half precision;
# ``conv_inplace``): no packing, per tile row and segment of up to 4 or 3 vectors (the
# register tile's, ``abi.tiles.CONV_WINDOW_TILES``) one mask per K row, per tile little
# set-up; channels are padded to the register tile's rows, positions to whole vectors per
# segment
SEGMENT_COST = 2.0        # per K row and segment (its mask and offset loads)
# per K row, segment and block of MR channels: the micro-kernel's broadcasts of the weights
# and its loop, paid again by every segment: 64->64 3x3 on 57x61, 2 threads, 6x64 tiles (one
# 4-vector segment per row) 625-658 us against 15x32 tiles (two 2-vector segments) 656-660
STEP_COST = 24.0
WINDOW_TILE_COST = 500.0  # per tile (offset table, loop set-up)
COPY_COST = 32.0          # per element of a strided conv's phase-split input copy (once per call)
# below this total model cost (about 20 us of work) a table runs on the calling thread:
# waking the thread pool costs more than it saves
SERIAL_COST = 2.0e6


def _ukernel(dtype, slot):
    """(MR, NR, KC) of a GEMM slot's micro-kernel."""
    mr, nr, _, _, kc = (SLOTS_F64 if dtype == "float64" else SLOTS_F32)[slot]
    return mr, nr, kc


def _split(size, cap, mult=1):
    """Block length splitting ``size`` into the fewest equal-ish blocks of at most ``cap``,
    rounded up to a multiple of ``mult`` when that still fits."""
    if size <= cap:
        return max(size, 1)
    nb = -(-size // cap)
    t = -(-size // nb)
    t = -(-t // mult) * mult
    return min(t, cap)


def reads_window_in_place(geo, dtype):
    """Whether the GEMM slots' tiles read their input window where it lies, in x or in its
    phase-split copy (``conv_inplace.window_mode``), rather than packing it per tile: every
    format but half precision."""
    return dtype in ("float32", "float64")


def flat_rows(geo):
    """Whether a window-reading tile as wide as the output walks its positions across rows
    (one output row further is exactly one tile row of source elements further:
    ``conv_inplace``), with an input of contiguous rows: x read in place (unit horizontal
    stride) with sh * W == OW, or its phase-split copy with ceil(W / sw) == OW."""
    if geo["sw"] == 1:
        return geo["sh"] * geo["W"] == geo["OW"]
    return -(-geo["W"] // geo["sw"]) == geo["OW"]


def deals_ranges(slot, window, sw, n_images):
    """Whether the driver deals a call's entries in ranges balanced by work, else
    cyclically (``conv_deal.deals_ranges``, the same rule): direct tiles, window tiles that
    read a phase-split copy (horizontal stride > 1), or several images."""
    return slot == DIRECT_SLOT or (window and sw > 1) or n_images > 1


def _tile_cost(slot, dtype, K, mv, vh, vw, window=False, flat=False):
    """Model cost of tiles (arrays of clipped counts); ``window``: the GEMM slots read the
    input window in place; ``flat`` (per tile): its segments run across rows."""
    pos = vh * vw
    if slot == DIRECT_SLOT:
        return (DIRECT_FMA_COST * mv * K * pos + DIRECT_TAP_COST * mv * vh * K
                + STORE_COST * mv * pos + TILE_COST / 4)
    mr, nr, _ = _ukernel(dtype, slot)
    if window:
        # the register tile the kernels pick (abi.tiles.CONV_WINDOW_TILES)
        lanes = 16 if dtype == "float32" else 8
        (m6, v6), (m8, v8) = CONV_WINDOW_TILES
        eight = conv_window_tile(mv, lanes) == 1
        mr = np.where(eight, m8, m6)
    mp = -(-mv // mr) * mr
    if window:
        seg = np.where(eight, v8, v6) * lanes
        nseg = np.where(flat, -(-pos // seg), vh * -(-vw // seg))
        padded = np.where(flat, pos // seg * seg + -(-(pos % seg) // lanes) * lanes,
                          vh * (vw // seg * seg + -(-(vw % seg) // lanes) * lanes))
        return (mp * K * padded + (SEGMENT_COST + STEP_COST * (mp // mr)) * K * nseg
                + STORE_COST * mv * pos + WINDOW_TILE_COST)
    pp = -(-pos // nr) * nr
    return (mp * K * pp + PACK_COST * K * pos + ROW_COST * K * vh + STORE_COST * mv * pos
            + TILE_COST)


def _axis_tiles(size, t):
    starts = np.arange(0, size, t, dtype=np.int64)
    return starts, np.minimum(t, size - starts)


def _spatial_candidates(OH, OW, cap_pos, cap_w, nthreads, short_rows=False):
    """Candidate (tile rows, tile columns): whole rows when they fit, balanced splits;
    ``short_rows`` adds tiles of 1 to 4 rows (cheap when tiles pack nothing)."""
    tw0 = _split(OW, min(cap_w, cap_pos))
    cands = set()
    for tw in {tw0, _split(OW, max(1, -(-OW // 2)))} if OW > 1 else {tw0}:
        if tw > min(cap_w, cap_pos):
            continue
        th_max = max(1, min(OH, cap_pos // tw))
        k0 = -(-OH // th_max)
        for k in range(k0, min(OH, k0 + 2 * nthreads + 2) + 1):
            cands.add((-(-OH // k), tw))
        if short_rows:
            cands.update((th, tw) for th in range(1, min(4, th_max) + 1))
    return sorted(cands)


def _plan_slot(slot, geo, sizes, dtype, nthreads):
    """(cost, entries) of the best tiling with one slot. ``sizes``: the (N, OH, OW) the
    table is laid out for (the bucket's largest) and the bucket's smallest; the cost is the
    mean model makespan over both, so the choice stays balanced across the bucket."""
    (N, OH, OW), small = sizes
    G, Mg, K = geo["G"], geo["Mg"], geo["Cg"] * geo["KH"] * geo["KW"]
    cap_m, cap_pos, _ = CONV_TILES[slot]
    mr = 1 if slot == DIRECT_SLOT else _ukernel(dtype, slot)[0]
    window = slot != DIRECT_SLOT and reads_window_in_place(geo, dtype)
    flat = window and flat_rows(geo)
    # channel blocks: the fewest that fit, and (window tiles: nothing repacked per block)
    # up to 2 * nthreads more, so that few output positions still spread over the threads
    nb0 = -(-Mg // cap_m)
    mts = {_split(Mg, cap_m, mr)}
    if window:
        mts.update(_split(Mg, -(-Mg // k), mr) for k in range(nb0 + 1, nb0 + 2 * nthreads + 1))
    best = None
    for (th, tw), mt in itertools.product(
            _spatial_candidates(OH, OW, cap_pos, cap_pos, nthreads, window), sorted(mts)):
        h0, vh = _axis_tiles(OH, th)
        w0, vw = _axis_tiles(OW, tw)
        m0, mv = _axis_tiles(Mg, mt)
        # order: n, g, tile row, tile column, channel block
        grid = np.stack(np.meshgrid(np.arange(N * G), np.arange(h0.size), np.arange(w0.size),
                                    np.arange(m0.size), indexing="ij"), -1).reshape(-1, 4)
        span = 0.0
        for n_, oh_, ow_ in ((N, OH, OW), small):
            cv = np.clip(oh_ - h0, 0, vh)[grid[:, 1]]
            cw = np.clip(ow_ - w0, 0, vw)[grid[:, 2]]
            live = (grid[:, 0] // G < n_) & (cv > 0) & (cw > 0)
            cost = np.where(live, _tile_cost(slot, dtype, K, mv[grid[:, 3]], cv, cw, window,
                                             flat & (cw == ow_)), 0.0)
            # as the driver deals them: ranges balanced by these weights, or cyclically
            if deals_ranges(slot, window, geo["sw"], n_):
                weight = np.where(live, mv[grid[:, 3]] * cv * cw, 0)
                span += makespan(cost, nthreads, 1, "balanced", weight) / 2
            else:
                span += makespan(cost, nthreads, 1, "cyclic") / 2
        if window and geo["sw"] > 1:    # the copy of the phases the taps read, once per call
            used = min(geo["KH"], geo["sh"]) * min(geo["KW"], geo["sw"]) / (geo["sh"] * geo["sw"])
            span += COPY_COST * N * geo["C"] * geo["H"] * geo["W"] * used / nthreads
        if best is None or span < best[0]:
            best = (span, grid, (h0, vh, w0, vw, m0, mv))
    span, grid, (h0, vh, w0, vw, m0, mv) = best
    e = np.empty((grid.shape[0], T_NCOL), dtype=np.int64)
    e[:, T_KID] = CATALOG.kernel_id(FAMILY, "conv2d", dtype, slot)
    e[:, T_N] = grid[:, 0] // G
    e[:, T_G] = grid[:, 0] % G
    e[:, T_M0] = m0[grid[:, 3]]
    e[:, T_MV] = mv[grid[:, 3]]
    e[:, T_OH0] = h0[grid[:, 1]]
    e[:, T_VH] = vh[grid[:, 1]]
    e[:, T_OW0] = w0[grid[:, 2]]
    e[:, T_VW] = vw[grid[:, 2]]
    pt, pl = geo["pads"][0], geo["pads"][1]
    e[:, T_IH0] = e[:, T_OH0] * geo["sh"] - pt
    e[:, T_IW0] = e[:, T_OW0] * geo["sw"] - pl
    return span, e


def candidate_slots(geo):
    """Slots that can run this geometry: the direct kernel always; implicit GEMM when the
    group has enough output channels and reduction length to fill a register tile."""
    K = geo["Cg"] * geo["KH"] * geo["KW"]
    slots = [DIRECT_SLOT]
    if geo["Mg"] >= 3 and K >= 4:
        slots += [0, 1]
    return slots


def heuristic_slot(geo):
    """The slot of the simplified combination: implicit GEMM with the large register tile
    for many output channels, the small one for few, the direct kernel where GEMM cannot
    fill a register tile (depthwise)."""
    slots = candidate_slots(geo)
    if 0 not in slots:
        return DIRECT_SLOT
    return 0 if geo["Mg"] >= 48 else 1


def build_table(geo, dtype, target, nthreads, slot=None, variant="optimized"):
    """The combination of the conv family: entries laid out for the largest shape of the
    bucket of ``geo``'s (N, OH, OW). "optimized": the slot and tiling of least model cost
    over every slot that can run the geometry; "simplified": the heuristic slot's best
    tiling (``slot`` forces one slot in both)."""
    bk = (bucket(geo["N"], 1), bucket(geo["OH"], 1), bucket(geo["OW"], 1))
    sizes = (tuple(hi for _, hi in bk), tuple(lo + 1 for lo, _ in bk))
    if slot is not None:
        slots = [slot]
    elif variant == "simplified":
        slots = [heuristic_slot(geo)]
    else:
        slots = candidate_slots(geo)
    for threads in ((1, nthreads) if nthreads > 1 else (1,)):
        best = None
        for s in slots:
            cost, e = _plan_slot(s, geo, sizes, dtype, threads)
            if best is None or cost < best[0]:
                best = (cost, s, e)
        if best[0] < SERIAL_COST:      # small: one thread (the driver skips the pool)
            break
    cost, s, e = best
    return ConvTable.of(dtype, target, bk, e, geo, s, threads, cost, variant)
