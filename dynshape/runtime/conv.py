"""conv2d executor: geometry -> bucketed tile table -> ONE call of the conv driver.

The planner (combination algorithm of the conv family) tiles the output of every image and
group into rectangles of output rows x columns times blocks of output channels, picks the
static kernel (slot) by a cost model, and records per tile its input offset (ih0, iw0) so
that the driver reads each tile's input window in place (layout: ``conv_layout``). Tables
are built with NumPy in microseconds-to-milliseconds, cached in ``config.cache`` under
(op, table attributes, dtype, target, bucket of N, OH, OW, threads); every shape of a bucket
reuses the table (the driver clips tiles to the real shape). Nothing is compiled per shape.

Epilogue program: ``launch.extra["steps"] = (prog, pattrs, sides, cgeo)`` (see
``dynshape_kernels.cpu.steps`` and ``conv_epilogue``) runs elementwise steps on every output
channel of every tile before it is stored; ``cgeo[s]`` = (offset, n stride, channel stride,
row stride, column stride) of side s in elements. Fused sequences that start with a conv2d
set it; ``run("conv2d")`` leaves it empty.
"""
import numba
import numpy as np
from dynshape_kernels import drivers
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.tiles import CONV_DIRECT_SLOT as DIRECT_SLOT, CONV_TILES
N_SLOTS = len(CONV_TILES)
from dynshape_kernels.abi.conv_table import (CV_ACT, CV_BOFF, CV_BS, CV_C, CV_CG, CV_DH,
                                              CV_DW, CV_G, CV_H, CV_HASB, CV_HASR, CV_IDBASE,
                                              CV_KH, CV_KW, CV_M, CV_MG, CV_N, CV_NTH, CV_OH,
                                              CV_OW, CV_ROFF, CV_SH, CV_SIZE, CV_SW, CV_W,
                                              CV_XOFF, CV_YOFF, ENTRY_COLUMNS, T_G, T_IH0,
                                              T_IW0, T_KID, T_M0, T_MV, T_N, T_NCOL, T_OH0,
                                              T_OW0, T_VH, T_VW)
from dynshape_kernels.abi.step_program import MAX_SIDES, empty_program
from dynshape_kernels.abi.tiles import MATMUL_SLOTS_F32 as SLOTS_F32, MATMUL_SLOTS_F64 as SLOTS_F64

from dynshape.runtime import config
from dynshape.tables.bucket import bucket
from dynshape.api import register_executor
from dynshape.errors import TableFormatError
from dynshape.runtime.plane import memo_get, memo_put, via_temporary_out
from dynshape.runtime.layout import element_strides, flat_view

TARGET = "cpu"
FAMILY = "conv"
# cost model, in units of one vector-lane FMA of the GEMM micro-kernel
PACK_COST = 12.0          # per packed input element (window packing)
STORE_COST = 6.0          # per stored output element (epilogue)
TILE_COST = 4000.0        # per tile (workspace set-up, A packing start, loop overheads)
DIRECT_FMA_COST = 3.0     # per FMA of the direct kernel (acc load/store per tap)
DIRECT_TAP_COST = 24.0    # per tap and output row of the direct kernel (range, loop set-up)
# below this total model cost (about 20 us of work) a table runs on the calling thread:
# waking the thread pool costs more than it saves
SERIAL_COST = 2.0e6


class ConvTable:
    """A conv2d parameter table: entries (E, 11) int64 (layout ``conv_layout``) valid for
    every shape of its bucket, the geometry it was built for and the kernel slot."""

    def __init__(self, dtype, key, bucket_, entries, geo, slot, nthreads, cost):
        self.family = FAMILY
        self.op = "conv2d"
        self.dtype = dtype
        self.target = TARGET
        self.catalog_hash = CATALOG.hash
        self.key = key
        self.bucket = bucket_
        self.entries = np.ascontiguousarray(entries, dtype=np.int64)
        self.entries.flags.writeable = False
        self.geo = dict(geo)
        self.slot = slot
        self.nthreads = nthreads
        self.cost = cost
        self.id_base = CATALOG.family_base(FAMILY, dtype)
        self.validate()

    def __len__(self):
        return len(self.entries)

    def validate(self):
        """Refuse entries the driver could not run safely (ids, tile caps, negative counts)."""
        e = self.entries
        if e.ndim != 2 or e.shape[1] != T_NCOL:
            raise TableFormatError(f"conv entries must have shape (E, {T_NCOL}), got {e.shape}")
        if not len(e):
            return
        slots = e[:, T_KID] - self.id_base
        if slots.min() < 0 or slots.max() >= N_SLOTS:
            raise TableFormatError(f"conv kernel ids outside {self.id_base}.."
                                   f"{self.id_base + N_SLOTS - 1}")
        caps = np.array(CONV_TILES, dtype=np.int64)[slots]
        if (e[:, [T_MV, T_VH, T_VW]] < 0).any() or (e[:, T_MV] > caps[:, 0]).any() or \
                (e[:, T_VH] * e[:, T_VW] > caps[:, 1]).any():
            raise TableFormatError("conv entries exceed their kernel's tile (channels, "
                                   "positions)")

    def resolved(self, N, OH, OW):
        """Entries with counts clipped to a real shape, as the driver runs them (rows that do
        nothing have zero counts)."""
        e = self.entries.copy()
        mg = self.geo["Mg"]
        for start, count, size in ((T_M0, T_MV, mg), (T_OH0, T_VH, OH), (T_OW0, T_VW, OW)):
            ok = (e[:, start] >= 0) & (e[:, start] < size)
            e[:, count] = np.where(ok, np.minimum(e[:, count], size - e[:, start]), 0)
        dead = (e[:, T_N] >= N) | (e[:, T_N] < 0)
        e[dead, T_MV] = 0
        return e

    def describe(self, limit=12):
        g = self.geo
        (n0, n1), (h0, h1), (w0, w1) = self.bucket
        kinds = {0: "implicit GEMM 6x4 vectors", 1: "implicit GEMM 6x3 vectors",
                 DIRECT_SLOT: "direct, vectorized along the output width"}
        lines = [f"conv2d table {self.dtype} {self.target} (catalog {self.catalog_hash}), "
                 f"{len(self)} entries, {self.nthreads} threads, model cost {self.cost:.3g}",
                 f"  bucket: N {n0 + 1}..{n1}, OH {h0 + 1}..{h1}, OW {w0 + 1}..{w1}; built for "
                 f"x (N={g['N']}, C={g['C']}, H={g['H']}, W={g['W']}) -> (M={g['M']}, "
                 f"OH={g['OH']}, OW={g['OW']})",
                 f"  kernel {g['KH']}x{g['KW']} group {g['G']} strides {(g['sh'], g['sw'])} "
                 f"dilations {(g['dh'], g['dw'])} pads {g['pads']}; K = {g['Cg']}x"
                 f"{g['KH']}x{g['KW']} = {g['Cg'] * g['KH'] * g['KW']} walked inside each tile",
                 f"  slot {self.slot}: {kinds[self.slot]}, tile <= {CONV_TILES[self.slot][0]} "
                 f"channels x {CONV_TILES[self.slot][1]} positions",
                 "  entry: " + " ".join(f"{c:>5s}" for c in ENTRY_COLUMNS)]
        from dynshape.tables.geometry import call_lines
        lines[4:4] = call_lines(self)
        for row in self.entries[:limit]:
            lines.append("         " + " ".join(f"{int(v):5d}" for v in row))
        if len(self) > limit:
            lines.append(f"         ... {len(self) - limit} more")
        return "\n".join(lines)

    __str__ = describe


# ---- planner ---------------------------------------------------------------------------------
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


def _makespan(costs, nthreads):
    """Slowest thread when the entries are dealt out cyclically (entry t to thread
    t % threads, as the driver does)."""
    nth = max(1, min(nthreads, costs.size))
    pad = -costs.size % nth
    return float(np.concatenate([costs, np.zeros(pad)]).reshape(-1, nth).sum(axis=0).max())


def _tile_cost(slot, dtype, K, mv, vh, vw):
    """Model cost of tiles (arrays of clipped counts)."""
    pos = vh * vw
    if slot == DIRECT_SLOT:
        return (DIRECT_FMA_COST * mv * K * pos + DIRECT_TAP_COST * mv * vh * K
                + STORE_COST * mv * pos + TILE_COST / 4)
    mr, nr, _ = _ukernel(dtype, slot)
    mp = -(-mv // mr) * mr
    pp = -(-pos // nr) * nr
    return mp * K * pp + PACK_COST * K * pos + STORE_COST * mv * pos + TILE_COST


def _axis_tiles(size, t):
    starts = np.arange(0, size, t, dtype=np.int64)
    return starts, np.minimum(t, size - starts)


def _spatial_candidates(OH, OW, cap_pos, cap_w, nthreads):
    """Candidate (tile rows, tile columns): whole rows when they fit, balanced splits."""
    tw0 = _split(OW, min(cap_w, cap_pos))
    cands = set()
    for tw in {tw0, _split(OW, max(1, -(-OW // 2)))} if OW > 1 else {tw0}:
        if tw > min(cap_w, cap_pos):
            continue
        th_max = max(1, min(OH, cap_pos // tw))
        k0 = -(-OH // th_max)
        for k in range(k0, min(OH, k0 + 2 * nthreads + 2) + 1):
            cands.add((-(-OH // k), tw))
    return sorted(cands)


def _plan_slot(slot, geo, sizes, dtype, nthreads):
    """(cost, entries) of the best tiling with one slot. ``sizes``: the (N, OH, OW) the
    table is laid out for (the bucket's largest) and the bucket's smallest; the cost is the
    mean model makespan over both, so the choice stays balanced across the bucket."""
    (N, OH, OW), small = sizes
    G, Mg, K = geo["G"], geo["Mg"], geo["Cg"] * geo["KH"] * geo["KW"]
    cap_m, cap_pos, _ = CONV_TILES[slot]
    mr = 1 if slot == DIRECT_SLOT else _ukernel(dtype, slot)[0]
    m0, mv = _axis_tiles(Mg, _split(Mg, cap_m, mr))
    best = None
    for th, tw in _spatial_candidates(OH, OW, cap_pos, cap_pos, nthreads):
        h0, vh = _axis_tiles(OH, th)
        w0, vw = _axis_tiles(OW, tw)
        # order: n, g, tile row, tile column, channel block
        grid = np.stack(np.meshgrid(np.arange(N * G), np.arange(h0.size), np.arange(w0.size),
                                    np.arange(m0.size), indexing="ij"), -1).reshape(-1, 4)
        span = 0.0
        for n_, oh_, ow_ in ((N, OH, OW), small):
            cv = np.clip(oh_ - h0, 0, vh)[grid[:, 1]]
            cw = np.clip(ow_ - w0, 0, vw)[grid[:, 2]]
            live = (grid[:, 0] // G < n_) & (cv > 0) & (cw > 0)
            cost = np.where(live, _tile_cost(slot, dtype, K, mv[grid[:, 3]], cv, cw), 0.0)
            span += _makespan(cost.astype(np.float64), nthreads) / 2
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


def build_table(geo, dtype, key, nthreads, slot=None):
    """The combination of the conv family: entries laid out for the largest shape of the
    bucket of ``geo``'s (N, OH, OW), the slot and tiling of least model cost."""
    bk = (bucket(geo["N"], 1), bucket(geo["OH"], 1), bucket(geo["OW"], 1))
    sizes = (tuple(hi for _, hi in bk), tuple(lo + 1 for lo, _ in bk))
    for threads in ((1, nthreads) if nthreads > 1 else (1,)):
        best = None
        for s in ([slot] if slot is not None else candidate_slots(geo)):
            cost, e = _plan_slot(s, geo, sizes, dtype, threads)
            if best is None or cost < best[0]:
                best = (cost, s, e)
        if best[0] < SERIAL_COST:      # small: one thread (the driver skips the pool)
            break
    cost, s, e = best
    return ConvTable(dtype, key, bk, e, geo, s, threads, cost)


def table_key(launch, nthreads):
    g = launch.extra["geo"]
    return (launch.op, launch.table_attrs, launch.dtype, TARGET, bucket(g["N"], 1),
            bucket(g["OH"], 1), bucket(g["OW"], 1), nthreads, forced_slot)


def lookup(launch):
    """The cached table for this call's bucket (built and cached on a miss)."""
    nthreads = numba.get_num_threads()
    key = table_key(launch, nthreads)
    table = config.cache.get(key)
    if table is None:
        table = build_table(launch.extra["geo"], launch.dtype, key, nthreads, forced_slot)
        config.cache.put(key, table)
    return table, key


#: None (the cost model picks the slot), or a slot every new table must use: every slot
#: runs every geometry, so tests use this to exercise each static kernel on any shape
forced_slot = None


def _operand(a, dtype):
    """(flat buffer, element offset, element strides) of an input; a dummy when absent or
    empty (never read then)."""
    if a is None or a.size == 0:
        return np.zeros(1, dtype), 0, (0,) * (4 if a is None else a.ndim)
    st = element_strides(a)
    if st is None:
        a = np.ascontiguousarray(a)
        st = element_strides(a)
    buf, off = flat_view(a)
    return buf, off, st


def _common(launch, table, ops):
    g = launch.extra["geo"]
    c = np.zeros(CV_SIZE, dtype=np.int64)
    for idx, name in ((CV_N, "N"), (CV_C, "C"), (CV_H, "H"), (CV_W, "W"), (CV_M, "M"),
                      (CV_OH, "OH"), (CV_OW, "OW"), (CV_KH, "KH"), (CV_KW, "KW"), (CV_G, "G"),
                      (CV_CG, "Cg"), (CV_MG, "Mg"), (CV_SH, "sh"), (CV_SW, "sw"),
                      (CV_DH, "dh"), (CV_DW, "dw"), (CV_ACT, "act")):
        c[idx] = g[name]
    c[CV_NTH] = table.nthreads
    c[CV_IDBASE] = table.id_base
    (_, xo, xs), (_, yo, ys), (_, ro, rs), (_, bo, bs) = ops
    c[CV_XOFF], c[CV_XOFF + 1:CV_XOFF + 5] = xo, xs
    c[CV_YOFF], c[CV_YOFF + 1:CV_YOFF + 5] = yo, ys
    c[CV_ROFF], c[CV_ROFF + 1:CV_ROFF + 5] = ro, rs
    c[CV_BOFF], c[CV_BS] = bo, bs[0]
    c[CV_HASB] = launch.inputs[2] is not None
    c[CV_HASR] = launch.extra["residual"] is not None
    c.flags.writeable = False
    return c


_NO_STEPS = {}


def _no_steps(dt):
    """The empty epilogue program (prog, pattrs, sides, cgeo) of dtype ``dt``."""
    st = _NO_STEPS.get(dt)
    if st is None:
        dummy = np.zeros(1, dt)
        dummy.flags.writeable = False
        prog, pattrs, cgeo = empty_program(), np.zeros(2, dt), np.zeros((MAX_SIDES, 5), np.int64)
        for a in (prog, pattrs, cgeo):
            a.flags.writeable = False
        st = _NO_STEPS[dt] = (prog, pattrs, (dummy,) * MAX_SIDES, cgeo)
    return st


def run_conv(launch):
    out = launch.out
    if out.size == 0:
        return launch.result
    if element_strides(out) is None:
        return via_temporary_out(launch, run_conv)
    x, w, b = launch.inputs
    res = launch.extra["residual"]
    dt = out.dtype
    ops = [_operand(x, dt), _operand(out, dt), _operand(res, dt),
           _operand(b, dt) if b is not None else (np.zeros(1, dt), 0, (0,))]
    sig = ("conv2d", launch.dtype, launch.table_attrs, launch.extra["geo"]["act"],
           x.shape, x.strides, out.strides, None if res is None else res.strides,
           launch.extra["geo"]["pads"], b is not None, numba.get_num_threads(), forced_slot)
    table, common = memo_get(sig)
    if table is None:
        table, key = lookup(launch)
        common = _common(launch, table, ops)
        memo_put(sig, key, common)
    wbuf = w.reshape(-1) if w.size else np.zeros(1, dt)
    prog, pattrs, sides, cgeo = launch.extra.get("steps") or _no_steps(dt)
    drivers.get(FAMILY, launch.dtype)(ops[0][0], wbuf, ops[3][0], ops[2][0], ops[1][0],
                                      common, table.entries, launch.fattrs, prog, pattrs,
                                      sides, cgeo)
    config.counters["driver_calls"] += 1
    return launch.result


def explain_conv(launch):
    if launch.out.size == 0:
        return None
    return lookup(launch)[0]


register_executor("conv", run_conv, explain_conv)
