"""Executor of the pool family: output plane -> cached table -> ONE driver call.

The iteration space is the output (N, C, OH, OW): N and C are the outer dimensions (merged
when both operands allow), OH x OW the inner plane tiled by :class:`PoolTiling` (the plane
combination algorithm with VARIABLE_FULL tails only). Each entry also holds its tile's input
offsets ``(ih0, iw0) = (row offset * sh - pad_top, column offset * sw - pad_left)``, so the
table depends on the window geometry (kernel, strides, dilations, begin pads: part of the
cache key) and the output bucket, never on the input's size: every shape whose output falls
in the bucket reuses the table. The input size, end pads and count_include_pad are bound per
call into the pool block of the common area (``dynshape_kernels.cpu.pool.P_*``).
"""
import math

import numpy as np
from dynshape_kernels import drivers
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import E_ANCH0, E_ANCH1, E_NCOL, E_OFF0, E_OFF1
from dynshape_kernels.abi.pool_table import (E_IH0, E_IW0, P_CIP, P_DH, P_DW, P_H, P_KH, P_KW, P_PB,
                                       P_PR, P_SH, P_SW, P_W, POOL_BLOCK, POOL_NCOL)
from dynshape_kernels.abi.tail_mode import ANCHOR_START, TailMode

from dynshape.runtime import config

from dynshape.planning import cost_model
from dynshape.tables.bucket import bucket
from dynshape.planning.plane import Tiling
from dynshape.api import register_executor
from dynshape.errors import TableFormatError
from dynshape.runtime.plane import memo_get, memo_put, via_temporary_out
from dynshape.runtime.layout import Plane, check_outer, coalesce, element_strides, flat_view
from dynshape.tables.param_table import TABLE_CLASSES, ParamTable
from dynshape.runtime.walk import cyclic_makespan

TARGET = "cpu"
FAMILY = "pool"

# cost constants (ns), measured roughly on the project's machine (3x3 stride-2 windows:
# about 150 ns per entry and 40 ns per output row of fixed cost, one tile of 4 x 57 outputs
# in 0.7 us)
ENTRY_NS = 150.0     # per work item: decode, offsets, padding columns of the row buffer
ROW_NS = 40.0        # per tile row: window rows clipped, views, pass set-up
TAP_NS = 0.1         # per output and window tap on the vector path


class PoolTable(ParamTable):
    """A ParamTable whose entries carry two more columns: the input offsets of each tile
    (``E_IH0``, ``E_IW0``; negative where the first window starts in the padding)."""

    def describe(self, catalog=None, limit=12):
        text = super().describe(catalog, limit)
        e = self.entries
        rows = ["  input offsets (ih0, iw0) of the tiles: "
                + ", ".join(f"({int(a)}, {int(b)})" for a, b in e[:limit, E_IH0:E_IW0 + 1])
                + (f", ... {len(e) - limit} more" if len(e) > limit else "")]
        return text + "\n" + "\n".join(rows)

    __str__ = describe

    def validate(self, catalog):
        e = self.entries
        if e.ndim != 2 or e.shape[1] != POOL_NCOL:
            raise TableFormatError(f"pool entries must have shape (E, {POOL_NCOL}), got "
                                   f"{e.shape}")
        plain = ParamTable.__new__(ParamTable)
        plain.__dict__.update(self.__dict__)
        plain.entries = e[:, :E_NCOL]
        ParamTable.validate(plain, catalog)
        if len(e) and (e[:, [E_ANCH0, E_ANCH1]] != ANCHOR_START).any():
            raise TableFormatError("pool entries are anchored at the start of the plane")


TABLE_CLASSES["pool"] = PoolTable


class PoolTiling(Tiling):
    """Tiling of the output plane; a tile's cost counts its window taps."""

    def __init__(self, *args, taps=9, **kw):
        super().__init__(*args, **kw)
        self.taps = taps

    def default_tile(self):
        """The narrowest tile whose width covers the bucket's widest output row."""
        hi1 = self.bucket[1][1]
        fitting = [t for t in self.slots if t[1] >= hi1]
        return min(fitting, key=lambda t: t[1]) if fitting else max(self.slots,
                                                                    key=lambda t: t[1])

    def cost(self, t0, rows, cols, model=None):
        model = model or cost_model.MODEL
        m, n = self.shape
        vr = rows.valid(m).astype(np.float64)[:, None]
        vc = cols.valid(n).astype(np.float64)[None, :]
        cost = ENTRY_NS + vr * (ROW_NS + vc * self.taps * TAP_NS)
        cost = np.where((vr == 0) | (vc == 0), ENTRY_NS, cost)
        return cyclic_makespan(cost.reshape(-1), self.n_outer, model)


# ---- geometry ----------------------------------------------------------------------------
def _plane(launch):
    """Output plane: outer (N, C) merged where both operands allow, inner (OH, OW)."""
    out, x = launch.out, launch.inputs[0]
    ost, xst = element_strides(out), element_strides(x)
    cshape, (co, cx) = coalesce(list(out.shape[:2]), [list(ost[:2]), list(xst[:2])])
    p = Plane(tuple(cshape), out.shape[2], out.shape[3],
              (tuple(co) + ost[2:], tuple(cx) + xst[2:]), len(cshape) + 2)
    check_outer(p)
    return p


def _pool_block(g, H, W):
    blk = np.zeros(POOL_BLOCK, dtype=np.int64)
    blk[P_KH], blk[P_KW] = g.kernel
    blk[P_SH], blk[P_SW] = g.strides
    blk[P_DH], blk[P_DW] = g.dilations
    blk[P_PB], blk[P_PR] = g.pads[2], g.pads[3]
    blk[P_H], blk[P_W] = H, W
    blk[P_CIP] = int(g.count_include_pad)
    return blk


def table_key(launch):
    g = launch.extra["geometry"]
    q0, q1 = CATALOG.families[FAMILY].quanta
    return (launch.op, (FAMILY,) + launch.table_attrs, launch.dtype, TARGET, (),
            bucket(g.out_hw[0], q0), bucket(g.out_hw[1], q1), False)


def build_table(launch, p, key, variant):
    g = launch.extra["geometry"]
    bk = (key[5], key[6])
    tiling = PoolTiling(CATALOG, FAMILY, launch.op, launch.dtype, bk, (p.m, p.n),
                        math.prod(p.outer), False, frozenset({TailMode.VARIABLE_FULL}),
                        taps=g.kernel[0] * g.kernel[1])
    comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
    e = np.empty((len(comb.entries), POOL_NCOL), dtype=np.int64)
    e[:, :E_NCOL] = comb.entries
    e[:, E_IH0] = comb.entries[:, E_OFF0] * g.strides[0] - g.pads[0]
    e[:, E_IW0] = comb.entries[:, E_OFF1] * g.strides[1] - g.pads[1]
    t = PoolTable(FAMILY, launch.op, launch.dtype, TARGET, CATALOG.hash, bk, e,
                  np.zeros(0, np.int64), 2, CATALOG.family_base(FAMILY, launch.dtype),
                  CATALOG.families[FAMILY].op_base, comb.variant, lambda: comb.cost,
                  comb.description + f"; input offsets for window {g.describe()}", (p.m, p.n))
    t.validate(CATALOG)
    t.common = np.concatenate([t.bind(p, [0, 0]), _pool_block(g, *g.in_hw)])
    t.common.flags.writeable = False
    return t


def lookup(launch, p, key=None):
    key = key or table_key(launch)
    expect = {"family": FAMILY, "op": launch.op, "dtype": launch.dtype, "target": TARGET,
              "bucket": (key[5], key[6]), "n_operands": 2}
    return config.cache.get_or_build(key, lambda variant: build_table(launch, p, key, variant),
                                     expect=expect)


def _signature(launch):
    out, x = launch.out, launch.inputs[0]
    return (FAMILY, launch.op, launch.dtype, launch.extra["geometry"].key(), out.shape,
            out.strides, x.shape, x.strides)


def run_pool(launch):
    out = launch.out
    if out.size == 0:
        return launch.result
    if element_strides(out) is None:
        return via_temporary_out(launch, run_pool)
    x = launch.inputs[0]
    if element_strides(x) is None:
        launch.inputs = [x := np.ascontiguousarray(x)]
    sig = _signature(launch)
    table, common = memo_get(sig)
    obuf, ooff = flat_view(out)
    xbuf, xoff = flat_view(x)
    if table is None:
        p = _plane(launch)
        key = table_key(launch)
        table = lookup(launch, p, key)
        g = launch.extra["geometry"]
        common = np.concatenate([table.bind(p, [ooff, xoff]), _pool_block(g, *g.in_hw)])
        memo_put(sig, key, common)
    drivers.get(FAMILY, launch.dtype)(xbuf, obuf, common, table.entries)
    config.counters["driver_calls"] += 1
    return launch.result


def explain_pool(launch):
    if launch.out.size == 0:
        return None
    return lookup(launch, _plane(launch))


register_executor(FAMILY, run_pool, explain_pool)
