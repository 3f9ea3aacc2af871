"""Executors of the reduce and rowwise families: kept plane -> cached table -> ONE driver call.

The iteration space is the kept dimensions (the output of a reduction, the rows of a
row-wise op), coalesced into outer dims and an inner plane exactly like the plane executor
does (``layout.plane``), tiled by :class:`combination.Tiling` and cached per bucket. The
reduced (normalized) dimensions are coalesced separately and bound into the reduction block
that follows the operand blocks of the common area (``common_area.R_*``); they never enter the
entries, so a table serves every reduced size. Tail modes never include OVERLAP.
"""
import math

import numpy as np
from dynshape_kernels import drivers
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import (MAX_RED, R_COUNT, R_ND, R_OUTKIND, R_SHAPE, R_STR,
                                          R_STRATEGY, STRAT_COLUMNS, STRAT_LANES,
                                          reduce_block_size)
from dynshape_kernels.abi.tail_mode import TailMode

from dynshape.runtime import config

from dynshape.planning import cost_model
from dynshape.tables.bucket import bucket
from dynshape.planning.plane import Tiling
from dynshape.api import register_executor
from dynshape.errors import ShapeError
from dynshape.runtime.plane import memo_get, memo_put, via_temporary_out
from dynshape.runtime.layout import check_outer, coalesce, element_strides, flat_view, plane
from dynshape.tables.param_table import ParamTable

TARGET = "cpu"
_NO_OVERLAP = frozenset(TailMode) - {TailMode.OVERLAP}

# cost constants (ns) of the walk drivers, measured roughly on the project's machine
ENTRY_NS = 80.0      # per work item: decode, scratch allocation
ROW_NS = 5.0         # per tile row
OUT_NS = 12.0        # LANES: per output element (run setup, final lane combine)
STEP_NS = 6.0        # COLUMNS: per reduced index (offsets, views)
ELEM_NS = 0.1        # per element and pass on the vector path


class WalkTiling(Tiling):
    """Tiling of a kept plane whose every element walks ``count`` reduced elements.

    Same candidates as :class:`Tiling`; the cost prices a tile by the reduced elements it
    walks with the strategy's per-output (LANES) or per-step (COLUMNS) overhead.
    """

    def __init__(self, *args, count=1, strategy=STRAT_LANES, passes=1, **kw):
        super().__init__(*args, **kw)
        self.count = max(int(count), 1)
        self.strategy = strategy
        self.passes = passes

    def cost(self, t0, rows, cols, model=None):
        model = model or cost_model.MODEL
        m, n = self.shape
        vr = rows.valid(m).astype(np.float64)[:, None]
        vc = cols.valid(n).astype(np.float64)[None, :]
        el = ELEM_NS * self.passes
        if self.strategy == STRAT_COLUMNS:
            per_row = self.count * self.passes * (STEP_NS + vc * el)
        else:
            per_row = vc * (OUT_NS + self.count * el)
        cost = ENTRY_NS + vr * (ROW_NS + per_row)
        cost = np.where((vr == 0) | (vc == 0), ENTRY_NS, cost)
        return cyclic_makespan(cost.reshape(-1), self.n_outer, model)

    def default_tile(self):
        tiles = sorted(self.slots, key=lambda t: t[0] * t[1])
        if self.strategy == STRAT_COLUMNS:
            return max(self.slots, key=lambda t: (t[1], -t[0]))
        work = self.count * self.passes
        if work >= 4096:
            return tiles[0]
        if work >= 64:
            return tiles[len(tiles) // 2 - 1] if len(tiles) > 2 else tiles[0]
        return tiles[-1]


def cyclic_makespan(costs, n_outer, model):
    """Time of the slowest thread when the drivers deal the work items (entries x outer
    index, outer-major) out cyclically (see ``reduce.chunk_start``): thread t runs items
    t, t + threads, ..."""
    threads = max(int(model.threads), 1)
    total = costs.size * n_outer
    if total == 0:
        return 0.0
    if total > 1 << 16:
        return max(float(costs.sum()) * n_outer / threads, float(costs.max()))
    items = np.tile(costs, n_outer)
    pad = -total % threads
    items = np.concatenate([items, np.zeros(pad)]).reshape(-1, threads)
    return float(items.sum(axis=0).max())


def _count_class(count):
    return min(int(count).bit_length(), 48)


def _build(family, op, dtype, p, key, variant, n_operands, count, strategy, passes, red):
    fam = CATALOG.families[family]
    modes = fam.tail_modes & _NO_OVERLAP
    strided = any(abs(st[-1]) > 1 for st in p.strides)
    n_outer = math.prod(p.outer)
    tiling = WalkTiling(CATALOG, family, op, dtype, key[-3:-1], (p.m, p.n), n_outer, strided,
                        modes, count=count, strategy=strategy, passes=passes)
    comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
    t = ParamTable(family, op, dtype, TARGET, CATALOG.hash, key[-3:-1], comb.entries,
                   np.zeros(0, np.int64), n_operands, CATALOG.family_base(family, dtype),
                   fam.op_base, comb.variant, lambda: comb.cost, comb.description, (p.m, p.n))
    t.common = np.concatenate([t.bind(p, [0] * n_operands), red])
    t.common.flags.writeable = False
    return t


def _lookup(family, op, dtype, p, n_operands, count, strategy, passes, red):
    """The cached table (and its key) for this kept plane and reduction."""
    fam = CATALOG.families[family]
    q0, q1 = fam.quanta
    key = (op, (family, strategy, _count_class(count)), dtype, TARGET, p.layout_class(),
           bucket(p.m, q0), bucket(p.n, q1), False)

    def build(variant):
        return _build(family, op, dtype, p, key, variant, n_operands, count, strategy, passes,
                      red)
    expect = {"family": family, "op": op, "dtype": dtype, "target": TARGET,
              "bucket": key[-3:-1], "n_operands": n_operands}
    return config.cache.get_or_build(key, build, expect=expect), key


def _red_block(n_red_operands, shape, strides_per_op, strategy, outkind=0):
    """The reduction block: count, nd, strategy, output kind, sizes, strides per operand."""
    count = math.prod(shape)
    if count == 0:
        shape, strides_per_op = [0], [[1] for _ in strides_per_op]
    elif not shape:
        shape, strides_per_op = [1], [[1] for _ in strides_per_op]
    if len(shape) > MAX_RED:
        raise ShapeError(f"after merging contiguous dimensions {len(shape)} reduced dimensions "
                         f"remain; at most {MAX_RED} are supported")
    blk = np.zeros(reduce_block_size(n_red_operands), dtype=np.int64)
    blk[R_COUNT] = count
    blk[R_ND] = len(shape)
    blk[R_STRATEGY] = strategy
    blk[R_OUTKIND] = outkind
    blk[R_SHAPE:R_SHAPE + MAX_RED] = 1
    blk[R_SHAPE:R_SHAPE + len(shape)] = shape
    for k, st in enumerate(strides_per_op):
        blk[R_STR + k * MAX_RED:R_STR + k * MAX_RED + len(st)] = st
    return blk, count


def _strategy(p, x_index, last_red_stride):
    """COLUMNS when the input's kept column axis is contiguous-ish and the reduced axis is not."""
    xsn = p.strides[x_index][-1]
    if p.n > 1 and 0 < abs(xsn) < abs(last_red_stride):
        return STRAT_COLUMNS
    return STRAT_LANES


def _materialized(x, axes):
    """x itself, or a contiguous copy when a reduced axis has stride 0 (a broadcast view) or
    the strides are not whole elements: the drivers walk reduced runs with nonzero strides."""
    st = element_strides(x)
    if st is None or any(st[d] == 0 and x.shape[d] > 1 for d in axes):
        return np.ascontiguousarray(x)
    return x


def _operand(a):
    """(flat buffer, element offset) of an operand; empty ones get a 1-element dummy."""
    if a.size == 0:
        return np.zeros(1, a.dtype), 0
    return flat_view(a)


# ---- reduce ------------------------------------------------------------------------------
def _reduce_geometry(launch):
    x = launch.inputs[0]
    out = launch.out
    axes = launch.extra["axes"]
    ordered = launch.extra["ordered"]
    xst = element_strides(x)
    kept = [d for d in range(x.ndim) if d not in axes]
    p = plane(tuple(x.shape[d] for d in kept),
              [element_strides(out), [xst[d] for d in kept]])
    check_outer(p)
    sizes = [x.shape[d] for d in axes]
    strides = [xst[d] for d in axes]
    delta = 0
    if not ordered:
        # sum/max/min do not depend on the order: walk every reduced axis forwards, largest
        # stride outermost, so runs are as long and as contiguous as possible
        for i, (n, s) in enumerate(zip(sizes, strides)):
            if s < 0 and n > 0:
                delta += (n - 1) * s
                strides[i] = -s
        order = sorted(range(len(sizes)), key=lambda i: -strides[i])
        sizes = [sizes[i] for i in order]
        strides = [strides[i] for i in order]
    cshape, (cstr,) = coalesce(sizes, [strides]) if 0 not in sizes else ([0], [[1]])
    last = cstr[-1] if cstr else 1
    strategy = _strategy(p, 1, last)
    red, count = _red_block(1, cshape, [cstr], strategy, launch.extra["outkind"])
    return p, red, count, strategy, delta


def run_reduce(launch):
    out = launch.out
    if out.size == 0:
        return launch.result
    if element_strides(out) is None:
        return via_temporary_out(launch, run_reduce)
    x = _materialized(launch.inputs[0], launch.extra["axes"])
    launch.inputs = [x]
    sig = ("reduce", launch.op, launch.dtype, launch.extra["axes"], launch.extra["outkind"],
           out.shape, out.strides, x.shape, x.strides)
    table, common = memo_get(sig)
    obuf, ooff = flat_view(out)
    xbuf, xoff = _operand(x)
    if table is None:
        p, red, count, strategy, delta = _reduce_geometry(launch)
        table, key = _lookup("reduce", launch.op, launch.dtype, p, 2, count, strategy, 1, red)
        common = np.concatenate([table.bind(p, [ooff, xoff + delta]), red])
        memo_put(sig, key, common)
    bufs = launch.extra["placeholders"]
    slot = launch.extra["outkind"]
    bufs = [obuf if k == slot else bufs[k] for k in range(3)]
    driver = drivers.get("reduce", launch.dtype)
    driver(xbuf, bufs[0], bufs[1], bufs[2], common, table.entries)
    config.counters["driver_calls"] += 1
    return launch.result


def explain_reduce(launch):
    if launch.out.size == 0:
        return None
    launch.inputs = [_materialized(launch.inputs[0], launch.extra["axes"])]
    p, red, count, strategy, _ = _reduce_geometry(launch)
    return _lookup("reduce", launch.op, launch.dtype, p, 2, count, strategy, 1, red)[0]


# ---- rowwise -----------------------------------------------------------------------------
_PASSES = {"softmax": 3, "log_softmax": 3, "layer_norm": 3, "rms_norm": 2}


def _rowwise_geometry(launch):
    """Kept plane over (out, x, weight, bias) and the normalized dims' reduction block.

    weight and bias arrive with exactly the normalized shape (the spec materializes them), or
    as 1-element placeholders when absent: their strides are 0 over the kept dims, and over
    the normalized dims their own strides (0 for a placeholder)."""
    out = launch.out
    x, w, b = launch.inputs
    axes = launch.extra["axes"]
    shape = out.shape
    kept = [d for d in range(out.ndim) if d not in axes]
    ost, xst = element_strides(out), element_strides(x)
    zeros = [0] * len(kept)
    p = plane(tuple(shape[d] for d in kept),
              [[ost[d] for d in kept], [xst[d] for d in kept], zeros, zeros])
    check_outer(p)
    nst = [[ost[d] for d in axes], [xst[d] for d in axes]]
    for a, present in ((w, launch.extra["has_w"]), (b, launch.extra["has_b"])):
        nst.append(list(element_strides(a)) if present else [0] * len(axes))
    cshape, cstr = coalesce([shape[d] for d in axes], nst)
    strategy = _strategy(p, 1, cstr[1][-1] if cshape else 1)
    red, count = _red_block(4, cshape, cstr, strategy)
    return p, red, count, strategy


def run_rowwise(launch):
    out = launch.out
    if out.size == 0:
        return launch.result
    if element_strides(out) is None:
        return via_temporary_out(launch, run_rowwise)
    x, w, b = launch.inputs
    launch.inputs = [_materialized(x, launch.extra["axes"]), w, b]
    sig = ("rowwise", launch.op, launch.dtype, launch.extra["axes"], launch.extra["has_w"],
           launch.extra["has_b"], out.shape, out.strides,
           *[(a.shape, a.strides) for a in launch.inputs])
    table, common = memo_get(sig)
    bufs = [flat_view(a) for a in [out] + launch.inputs]
    if table is None:
        p, red, count, strategy = _rowwise_geometry(launch)
        table, key = _lookup("rowwise", launch.op, launch.dtype, p, 4, count, strategy,
                             _PASSES[launch.op], red)
        common = np.concatenate([table.bind(p, [off for _, off in bufs]), red])
        memo_put(sig, key, common)
    driver = drivers.get("rowwise", launch.dtype)
    driver(bufs[1][0], bufs[2][0], bufs[3][0], bufs[0][0], common, table.entries,
           launch.fattrs)
    config.counters["driver_calls"] += 1
    return launch.result


def explain_rowwise(launch):
    if launch.out.size == 0:
        return None
    x, w, b = launch.inputs
    launch.inputs = [_materialized(x, launch.extra["axes"]), w, b]
    p, red, count, strategy = _rowwise_geometry(launch)
    return _lookup("rowwise", launch.op, launch.dtype, p, 4, count, strategy,
                   _PASSES[launch.op], red)[0]


register_executor("reduce", run_reduce, explain_reduce)
register_executor("rowwise", run_rowwise, explain_rowwise)
