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
from dynshape_kernels.abi.common_area import E_NCOL, E_OFF0, E_OFF1
from dynshape_kernels.abi.pool_table import (E_IH0, E_IW0, P_CIP, P_DH, P_DW, P_H, P_KH, P_KW,
                                             P_PB, P_PR, P_SH, P_SW, P_W, POOL_BLOCK, POOL_NCOL)
from dynshape_kernels.abi.tail_mode import TailMode
from dynshape_kernels.catalog import catalog_for

from dynshape.planning import cost_model
from dynshape.planning.pool import PoolTiling
from dynshape.runtime.executor import Executor, register_executor
from dynshape.runtime.replay import same_operands
from dynshape.runtime.targets import get_target
from dynshape.runtime.layout import (Plane, check_outer, coalesce, element_strides, flat_view,
                                     flattener)
from dynshape.tables.bucket import bucket
from dynshape.tables.key import TableKey
from dynshape.tables.pool_table import PoolTable

FAMILY = "pool"


def pool_plane(launch):
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


class PoolExecutor(Executor):
    name = family = FAMILY

    def operands(self, launch, explain=False):
        x = launch.inputs[0]
        if element_strides(x) is None:
            launch.inputs = [np.ascontiguousarray(x)]

    def signature(self, launch):
        out, x = launch.out, launch.inputs[0]
        return (launch.target, FAMILY, launch.op, launch.dtype,
                launch.extra["geometry"].key(), out.shape, out.strides, x.shape, x.strides)

    def geometry(self, launch):
        return pool_plane(launch)

    def key(self, launch, p, target):
        g = launch.extra["geometry"]
        q0, q1 = catalog_for(target).families[FAMILY].quanta
        return TableKey(FAMILY, launch.op, launch.dtype, target,
                        (bucket(g.out_hw[0], q0), bucket(g.out_hw[1], q1)), (),
                        launch.table_attrs)

    def build(self, launch, p, key, variant):
        g = launch.extra["geometry"]
        cat = catalog_for(key.target)
        tiling = PoolTiling(cat, FAMILY, key.op, key.dtype, key.bucket, (p.m, p.n),
                            math.prod(p.outer), False, frozenset({TailMode.VARIABLE_FULL}),
                            cost_model.for_target(key.target), taps=g.kernel[0] * g.kernel[1])
        comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
        e = np.empty((len(comb.entries), POOL_NCOL), dtype=np.int64)
        e[:, :E_NCOL] = comb.entries
        e[:, E_IH0] = comb.entries[:, E_OFF0] * g.strides[0] - g.pads[0]
        e[:, E_IW0] = comb.entries[:, E_OFF1] * g.strides[1] - g.pads[1]
        t = PoolTable(FAMILY, key.op, key.dtype, key.target, cat.hash, key.bucket, e,
                      np.zeros(0, np.int64), 2, cat.family_base(FAMILY, key.dtype),
                      cat.families[FAMILY].op_base, comb.variant, lambda: comb.cost,
                      comb.description + f"; input offsets for window {g.describe()}",
                      (p.m, p.n))
        t.validate(cat)
        t.common = np.concatenate([t.bind(p, [0, 0]), _pool_block(g, *g.in_hw)])
        t.common.flags.writeable = False
        return t

    def bind(self, launch, p, table):
        g = launch.extra["geometry"]
        offs = [flat_view(launch.out)[1], flat_view(launch.inputs[0])[1]]
        common = np.concatenate([table.bind(p, offs), _pool_block(g, *g.in_hw)])
        common.flags.writeable = False
        return common

    def call(self, driver, launch, table, common):
        driver(flat_view(launch.inputs[0])[0], flat_view(launch.out)[0], common, table.entries)

    def replay(self, launch, arrays, table, common):
        if not same_operands(launch, arrays):
            return None
        call = get_target(launch.target).replay_driver(FAMILY, launch.dtype)
        entries = table.entries
        fx, fo = flattener(arrays[0]), flattener(launch.out)

        def go(arrays, out):
            call(fx(arrays[0]), fo(out), common, entries)
        return go


POOL = register_executor(PoolExecutor())
