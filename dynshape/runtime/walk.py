"""The walk executors (reduce, row-wise): the kept dimensions (the output of a reduction,
the rows of a row-wise op) are coalesced into outer dims and an inner plane like the plane
executor's, tiled by the walk planner and cached per bucket. The reduced (normalized)
dimensions are coalesced separately and bound into the reduction block that follows the
operand blocks of the common area (``common_area.R_*``); they never enter the entries, so a
table serves every reduced size. Tail modes never include OVERLAP.
"""
import math
from dataclasses import dataclass

import numpy as np
from dynshape_kernels.abi.common_area import (MAX_RED, R_COUNT, R_ND, R_OUTKIND, R_SHAPE, R_STR,
                                              R_STRATEGY, STRAT_COLUMNS, STRAT_LANES,
                                              reduce_block_size)
from dynshape_kernels.abi.tail_mode import TailMode
from dynshape_kernels.catalog import catalog_for

from dynshape.errors import ShapeError
from dynshape.planning import cost_model
from dynshape.planning.walk import WalkTiling
from dynshape.runtime import streaming
from dynshape.runtime.executor import Executor, register_executor
from dynshape.runtime.replay import same_operands
from dynshape.runtime.targets import get_target
from dynshape.runtime.layout import (check_outer, coalesce, element_strides, flat_view,
                                     flattener, plane)
from dynshape.tables.bucket import bucket
from dynshape.tables.key import TableKey
from dynshape.tables.param_table import ParamTable

_NO_OVERLAP = frozenset(TailMode) - {TailMode.OVERLAP}


@dataclass
class Walk:
    """A walk call's geometry: the kept plane, the reduction block, the reduced count, the
    strategy, the passes over each row and the input offset correction of reversed axes."""
    p: object
    red: np.ndarray
    count: int
    strategy: int
    passes: int = 1
    delta: int = 0


def _count_class(count):
    return min(int(count).bit_length(), 48)


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
        from dynshape.ops import device_active
        if device_active() is not None:
            from dynshape.errors import DeviceError
            raise DeviceError("a device array broadcast (stride 0) along a reduced or "
                              "normalized axis would be copied on the host; pass it "
                              "materialized")
        return np.ascontiguousarray(x)
    return x


def _operand(a):
    """(flat buffer, element offset) of an operand; empty ones get a 1-element dummy."""
    if a.size == 0:
        return flat_view(np.zeros(1, a.dtype))
    return flat_view(a)


class WalkExecutor(Executor):
    """Shared by reduce and row-wise: key, planner and table of a kept plane."""
    n_operands = 2

    def key(self, launch, g, target):
        fam = catalog_for(target).families[self.family]
        q0, q1 = fam.quanta
        return TableKey(self.family, launch.op, launch.dtype, target,
                        (bucket(g.p.m, q0), bucket(g.p.n, q1)), g.p.layout_class(),
                        (g.strategy, _count_class(g.count)))

    def build(self, launch, g, key, variant):
        cat = catalog_for(key.target)
        fam = cat.families[self.family]
        p = g.p
        tiling = WalkTiling(cat, self.family, key.op, key.dtype, key.bucket, (p.m, p.n),
                            math.prod(p.outer), any(abs(st[-1]) > 1 for st in p.strides),
                            fam.tail_modes & _NO_OVERLAP, cost_model.for_target(key.target),
                            count=g.count, strategy=g.strategy, passes=g.passes)
        comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
        t = ParamTable(self.family, key.op, key.dtype, key.target, cat.hash, key.bucket,
                       comb.entries, np.zeros(0, np.int64), self.n_operands,
                       cat.family_base(self.family, key.dtype), fam.op_base, comb.variant,
                       lambda: comb.cost, comb.description, (p.m, p.n))
        t.common = np.concatenate([t.bind(p, [0] * self.n_operands), g.red])
        t.common.flags.writeable = False
        return t


# ---- reduce ------------------------------------------------------------------------------
def reduce_geometry(launch):
    """Walk of a reduction: kept plane over (out, x), reduced dims of x."""
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


class ReduceExecutor(WalkExecutor):
    name = family = "reduce"

    def operands(self, launch, explain=False):
        launch.inputs = [_materialized(launch.inputs[0], launch.extra["axes"])]

    def signature(self, launch):
        out, x = launch.out, launch.inputs[0]
        return (launch.target, "reduce", launch.op, launch.dtype, launch.extra["axes"],
                launch.extra["outkind"], out.shape, out.strides, x.shape, x.strides)

    def geometry(self, launch):
        p, red, count, strategy, delta = reduce_geometry(launch)
        return Walk(p, red, count, strategy, 1, delta)

    def bind(self, launch, g, table):
        ooff = flat_view(launch.out)[1]
        xoff = _operand(launch.inputs[0])[1]
        common = np.concatenate([table.bind(g.p, [ooff, xoff + g.delta]), g.red])
        common.flags.writeable = False
        return common

    def call(self, driver, launch, table, common):
        obuf = flat_view(launch.out)[0]
        xbuf = _operand(launch.inputs[0])[0]
        bufs = launch.extra["placeholders"]
        slot = launch.extra["outkind"]
        bufs = [obuf if k == slot else bufs[k] for k in range(3)]
        driver(xbuf, bufs[0], bufs[1], bufs[2], common, table.entries)

    def replay(self, launch, arrays, table, common):
        if not same_operands(launch, arrays) or arrays[0].size == 0:
            return None
        call = get_target(launch.target).replay_driver("reduce", launch.dtype)
        entries, slot = table.entries, launch.extra["outkind"]
        b0, b1, b2 = launch.extra["placeholders"]
        fx, fo = flattener(arrays[0]), flattener(launch.out)
        if slot == 0:
            def go(arrays, out):
                call(fx(arrays[0]), fo(out), b1, b2, common, entries)
        elif slot == 1:
            def go(arrays, out):
                call(fx(arrays[0]), b0, fo(out), b2, common, entries)
        else:
            def go(arrays, out):
                call(fx(arrays[0]), b0, b1, fo(out), common, entries)
        return go


# ---- rowwise -----------------------------------------------------------------------------
_PASSES = {"softmax": 3, "log_softmax": 3, "layer_norm": 3, "rms_norm": 2}


def rowwise_geometry(launch):
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


class RowwiseExecutor(WalkExecutor):
    name = family = "rowwise"
    n_operands = 4

    def operands(self, launch, explain=False):
        x, w, b = launch.inputs
        launch.inputs = [_materialized(x, launch.extra["axes"]), w, b]

    def signature(self, launch):
        out = launch.out
        return (launch.target, "rowwise", launch.op, launch.dtype, launch.extra["axes"],
                launch.extra["has_w"], launch.extra["has_b"], out.shape, out.strides,
                *[(a.shape, a.strides) for a in launch.inputs])

    def geometry(self, launch):
        p, red, count, strategy = rowwise_geometry(launch)
        return Walk(p, red, count, strategy, _PASSES[launch.op])

    def bind(self, launch, g, table):
        offs = [flat_view(a)[1] for a in [launch.out] + launch.inputs]
        common = np.concatenate([table.bind(g.p, offs), g.red, streaming.store_block(launch)])
        common.flags.writeable = False
        return common

    def call(self, driver, launch, table, common):
        x, w, b = (flat_view(a)[0] for a in launch.inputs)
        driver(x, w, b, flat_view(launch.out)[0], common, table.entries, launch.fattrs)

    def replay(self, launch, arrays, table, common):
        ex = launch.extra
        if not arrays or launch.inputs[0] is not arrays[0] or arrays[0].size == 0:
            return None
        # weight and bias: placeholders (absent), or the caller's arrays read in place (the
        # spec used them as they are: same layout, same memory), taken from each call
        params = []
        for k, present in ((1, ex["has_w"]), (2, ex["has_b"])):
            p = launch.inputs[k]
            if not present:
                params.append(flat_view(p)[0])
                continue
            u = arrays[k] if len(arrays) > k else None
            if u is None or u.shape != p.shape or u.strides != p.strides or \
                    u.dtype != p.dtype or not np.may_share_memory(u, p):
                return None
            params.append(flattener(u))
        call = get_target(launch.target).replay_driver("rowwise", launch.dtype)
        entries, fattrs = table.entries, launch.fattrs
        fx, fo = flattener(arrays[0]), flattener(launch.out)
        w, b = params
        if not callable(w) and not callable(b):       # softmax, unweighted norms
            def go(arrays, out):
                call(fx(arrays[0]), w, b, fo(out), common, entries, fattrs)
        elif not callable(b):                         # a weight, no bias
            def go(arrays, out):
                call(fx(arrays[0]), w(arrays[1]), b, fo(out), common, entries, fattrs)
        elif callable(w):
            def go(arrays, out):
                call(fx(arrays[0]), w(arrays[1]), b(arrays[2]), fo(out), common, entries,
                     fattrs)
        else:
            return None                               # a bias without a weight
        return go


REDUCE = register_executor(ReduceExecutor())
ROWWISE = register_executor(RowwiseExecutor())
