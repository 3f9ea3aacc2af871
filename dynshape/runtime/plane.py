"""The plane executor: families whose iteration space is the output's shape (unary, binary,
copy). Operands are coalesced into outer (batch) dimensions and an inner plane of rows x
columns (``layout.plane``); the table tiles the plane and the driver replicates it over the
outer index."""
import math

import numpy as np
from dynshape_kernels.abi.tail_mode import TailMode
from dynshape_kernels.catalog import catalog_for

from dynshape.planning import cost_model
from dynshape.planning.plane import Tiling
from dynshape.runtime import streaming
from dynshape.runtime.executor import Executor, register_executor
from dynshape.runtime.replay import positions, same_operands
from dynshape.runtime.targets import get_target
from dynshape.runtime.layout import (Plane, broadcast_strides, check_outer, element_strides,
                                     flat_view, flattener, is_flat_buffer, plane)
from dynshape.tables.bucket import bucket
from dynshape.tables.key import TableKey
from dynshape.tables.param_table import ParamTable

_ALL_MODES = frozenset(TailMode)
_NO_OVERLAP = frozenset(TailMode) - {TailMode.OVERLAP}


def plane_of(launch):
    """The coalesced plane of a launch's output and inputs (inputs broadcast to it)."""
    out = launch.out
    shape = out.shape
    if out.flags.c_contiguous and all(a.shape == shape and a.flags.c_contiguous
                                      for a in launch.inputs):
        # the common case: everything contiguous and of one shape is one long row
        k = 1 + len(launch.inputs)
        return Plane((), 1, out.size, ((0, 1),) * k, 1 if out.size > 1 else 0)
    strides = [element_strides(out)]
    for a in launch.inputs:
        strides.append(broadcast_strides(shape, a.shape, element_strides(a)))
    p = plane(shape, strides)
    check_outer(p)
    return p


def plane_key(family, op, dtype, target, p, attrs=(), overlap=False):
    """The TableKey of a plane: the family's row and column buckets and the layout class."""
    fam = catalog_for(target).families[family]
    (q0, q1), w = fam.quanta, min(t[2] for t in fam.tiles if t[1] > t[2])
    return TableKey(family, op, dtype, target, (bucket(p.m, q0), bucket(p.n, q1, w)),
                    p.layout_class(), attrs, overlap)


def _contiguous_operand(a):
    """Inputs whose byte strides are not whole elements are copied (rare: packed records)."""
    return a if element_strides(a) is not None else np.ascontiguousarray(a)


def run_block(launch, table):
    """The run block (``abi.common_area``) the executor appends after a CPU launch's store
    block: whether the table's entries are rows in order (``ParamTable.rows_in_order``);
    empty for the other targets, whose drivers have none."""
    if launch.target != "cpu":
        return np.zeros(0, dtype=np.int64)
    return np.array([table.rows_in_order], dtype=np.int64)


class PlaneExecutor(Executor):
    name = "plane"

    def signature(self, launch):
        out = launch.out
        return (launch.target, launch.family, launch.op, launch.dtype, launch.table_attrs,
                launch.overlap_ok, out.shape, out.strides,
                *[(a.shape, a.strides) for a in launch.inputs])

    def geometry(self, launch):
        launch.inputs = [_contiguous_operand(a) for a in launch.inputs]
        return plane_of(launch)

    def key(self, launch, p, target):
        return plane_key(launch.family, launch.op, launch.dtype, target, p,
                         launch.table_attrs, launch.overlap_ok)

    def build(self, launch, p, key, variant):
        modes = _ALL_MODES if key.overlap else _NO_OVERLAP
        strided = any(abs(st[-1]) > 1 for st in p.strides)
        cat = catalog_for(key.target)
        modes = modes & cat.families[key.family].tail_modes
        # an input that repeats one row or one value per row (zero row or column stride:
        # part of the key's layout class, so every call of the table has it too)
        repeats = any(st[-2] == 0 or st[-1] == 0 for st in p.strides[1:])
        tiling = Tiling(cat, key.family, key.op, key.dtype, key.bucket, (p.m, p.n),
                        math.prod(p.outer), strided, modes, cost_model.for_target(key.target),
                        repeats)
        comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
        t = ParamTable(key.family, key.op, key.dtype, key.target, cat.hash, key.bucket,
                       comb.entries, np.zeros(0, np.int64), 1 + len(launch.inputs),
                       cat.family_base(key.family, key.dtype),
                       cat.families[key.family].op_base, comb.variant,
                       lambda: comb.cost, comb.description, (p.m, p.n))
        t.common = t.bind(p, [0] * t.n_operands)
        t.common.flags.writeable = False
        return t

    def bind(self, launch, p, table):
        offsets = [flat_view(launch.out)[1]] + [flat_view(a)[1] for a in launch.inputs]
        common = np.concatenate([table.bind(p, offsets), streaming.store_block(launch),
                                 run_block(launch, table)])
        common.flags.writeable = False
        return common

    def call(self, driver, launch, table, common):
        args = [flat_view(a)[0] for a in launch.inputs]
        args.append(flat_view(launch.out)[0])
        args.append(common)
        args.append(table.entries)
        if launch.fattrs is not None:
            args.append(launch.fattrs)
        driver(*args)

    def replay(self, launch, arrays, table, common):
        fam, dt = launch.family, launch.dtype
        entries, fattrs = table.entries, launch.fattrs
        if launch.extra.get("reinterpreted") and len(arrays) == 1:
            # copy/transpose: the same memory as unsigned items; a transposed view spans the
            # same memory from the same first element, so the bound offsets hold
            u = np.dtype(dt)
            call = get_target(launch.target).replay_driver(fam, dt)
            fx, fo = flattener(arrays[0]), flattener(launch.result)

            def go(arrays, out):
                call(fx(arrays[0]).view(u), fo(out).view(u), common, entries, fattrs)
            return go
        if len(arrays) > 2 or (len(arrays) == 2 and fattrs is not None):
            return None
        # the driver's operands: the caller's arrays in order (x * x included), else each by
        # its one position among them (x ** 2 by a number runs as x * x: [0, 0])
        idx = (list(range(len(arrays))) if same_operands(launch, arrays)
               else positions(arrays, launch.inputs))
        if idx is None or len(idx) != len(arrays):
            return None
        call = get_target(launch.target).replay_driver(fam, dt)
        if all(is_flat_buffer(a) for a in (launch.out, *arrays)):
            # one-dimensional contiguous operands are the driver's buffers as they are
            if len(arrays) == 1:
                def go(arrays, out):
                    call(arrays[0], out, common, entries, fattrs)
            else:
                i, j = idx

                def go(arrays, out):
                    call(arrays[i], arrays[j], out, common, entries)
            return go
        fo, fx = flattener(launch.out), flattener(arrays[idx[0]])
        if len(arrays) == 1:
            def go(arrays, out):
                call(fx(arrays[0]), fo(out), common, entries, fattrs)
        else:
            i, j = idx
            fy = flattener(arrays[j])

            def go(arrays, out):
                call(fx(arrays[i]), fy(arrays[j]), fo(out), common, entries)
        return go


PLANE = register_executor(PlaneExecutor())
