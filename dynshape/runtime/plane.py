"""Plane executor: layout -> cached table -> ONE compiled driver call per operator.

Used by every family whose iteration space is the output's shape (elementwise, copy).
"""
import math

import numpy as np
from dynshape_kernels import drivers
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.tail_mode import TailMode

from dynshape.runtime import config
from dynshape.tables.bucket import bucket
from dynshape.planning.plane import Tiling
from dynshape.runtime.layout import (Plane, broadcast_strides, check_outer, element_strides, flat_view,
                     plane)
from dynshape.tables.param_table import ParamTable

TARGET = "cpu"
_ALL_MODES = frozenset(TailMode)
_NO_OVERLAP = frozenset(TailMode) - {TailMode.OVERLAP}


def _plane_of(launch):
    out = launch.out
    shape = out.shape
    if out.flags.c_contiguous and all(a.shape == shape and a.flags.c_contiguous
                                      for a in launch.inputs):
        # the common case: everything contiguous and of one shape is one long row
        k = 1 + len(launch.inputs)
        return Plane((), 1, out.size, ((0, 1),) * k, 1 if out.size > 1 else 0)
    ostr = element_strides(out)
    strides = [ostr]
    for a in launch.inputs:
        strides.append(broadcast_strides(shape, a.shape, element_strides(a)))
    p = plane(shape, strides)
    check_outer(p)
    return p


def table_key(launch, p):
    fam = CATALOG.families[launch.family]
    (q0, q1), w = fam.quanta, min(t[2] for t in fam.tiles if t[1] > t[2])
    return (launch.op, launch.table_attrs, launch.dtype, TARGET, p.layout_class(),
            bucket(p.m, q0), bucket(p.n, q1, w), launch.overlap_ok)


def _tiling(launch, p, key):
    modes = _ALL_MODES if launch.overlap_ok else _NO_OVERLAP
    strided = any(abs(st[-1]) > 1 for st in p.strides)
    n_outer = math.prod(p.outer)
    return Tiling(CATALOG, launch.family, launch.op, launch.dtype, (key[5], key[6]),
                  (p.m, p.n), n_outer, strided, modes)


def build_table(launch, p, key, variant):
    tiling = _tiling(launch, p, key)
    comb = tiling.simplified() if variant == "simplified" else tiling.optimized()
    t = ParamTable(launch.family, launch.op, launch.dtype, TARGET, CATALOG.hash,
                   (key[5], key[6]), comb.entries, np.zeros(0, np.int64),
                   1 + len(launch.inputs), CATALOG.family_base(launch.family, launch.dtype),
                   CATALOG.families[launch.family].op_base, comb.variant,
                   lambda: comb.cost, comb.description, (p.m, p.n))
    t.common = t.bind(p, [0] * t.n_operands)
    t.common.flags.writeable = False
    return t


def lookup(launch, p, key=None):
    """The table of this plane: cached, saved on disk or built, per the policy in force."""
    key = key or table_key(launch, p)
    n_operands = 1 + len(launch.inputs)
    family, op, dtype = launch.family, launch.op, launch.dtype
    expect = {"family": family, "op": op, "dtype": dtype, "target": TARGET,
              "bucket": (key[5], key[6]), "n_operands": n_operands}
    return config.cache.get_or_build(key, lambda variant: build_table(launch, p, key, variant),
                                     expect=expect)


def via_temporary_out(launch, run):
    """Run into a contiguous temporary and copy it to ``out`` (for an ``out`` whose byte
    strides are not whole elements, which no driver can address)."""
    out = launch.out
    launch.out = np.empty(out.shape, out.dtype)
    run(launch)
    np.copyto(out, launch.out)
    return launch.result


def _contiguous_operand(a):
    """Inputs whose byte strides are not whole elements are copied (rare: packed records)."""
    return a if element_strides(a) is not None else np.ascontiguousarray(a)


# Exact-layout memo in front of the bucketed cache: (op, dtype, shapes, strides) -> the table
# key and the bound common area, so that a repeated call skips coalescing, bucketing and
# binding. Bounded; cleared when full and by ``clear_cache()``.
_MEMO_MAX = 4096
_memo = {}
config.cache.on_clear(_memo.clear)


def memo_get(sig):
    """(table, bound common area) memoized for this exact layout, or (None, None)."""
    hit = _memo.get(sig)
    if hit is None:
        return None, None
    table = config.cache.get(hit[0], count_miss=False)   # the lookup after counts a miss
    return (table, hit[1]) if table is not None else (None, None)


def memo_put(sig, key, common):
    common.flags.writeable = False
    if len(_memo) >= _MEMO_MAX:
        _memo.clear()
    _memo[sig] = (key, common)


def _signature(launch):
    out = launch.out
    return (launch.family, launch.op, launch.dtype, launch.table_attrs, launch.overlap_ok,
            out.shape, out.strides, *[(a.shape, a.strides) for a in launch.inputs])


def run_plane(launch):
    out = launch.out
    if out.size == 0:
        return launch.result
    table, common = memo_get(_signature(launch))
    if table is None:
        if element_strides(out) is None:
            return via_temporary_out(launch, run_plane)
        launch.inputs = [_contiguous_operand(a) for a in launch.inputs]
        p = _plane_of(launch)
        key = table_key(launch, p)
        table = lookup(launch, p, key)
        offsets = [flat_view(launch.out)[1]] + [flat_view(a)[1] for a in launch.inputs]
        common = table.bind(p, offsets)
        memo_put(_signature(launch), key, common)
    args = [flat_view(a)[0] for a in launch.inputs]
    args.append(flat_view(launch.out)[0])
    args.append(common)
    args.append(table.entries)
    if launch.fattrs is not None:
        args.append(launch.fattrs)
    drivers.get(launch.family, launch.dtype)(*args)
    config.counters["driver_calls"] += 1
    return launch.result


def explain_plane(launch):
    if launch.out.size == 0:
        return None
    p = _plane_of(launch)
    return lookup(launch, p)
