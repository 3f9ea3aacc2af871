"""The fused executor: one driver call runs a fused sequence's step program tile by tile.

The iteration space is the broadcast shape of x and the side inputs, coalesced like the plane
executor's (all but the last axis for a chain that ends in a row-wise op or a row reduction,
whose rows must stay whole). The table (:class:`~dynshape.tables.fused_table.FusedTable`) is keyed by
the chain's text, so a chain never seen before builds a table and compiles nothing.
"""
import numpy as np
from dynshape_kernels.abi import fused_table as kfused
from dynshape_kernels.abi.step_program import MAX_SIDES
from dynshape_kernels.abi.vocabulary import REDUCE_OPS

from dynshape.planning.fused import tile_shape
from dynshape.planning.plane import uniform_entries
from dynshape.errors import DtypeError
from dynshape.runtime import streaming
from dynshape.runtime.executor import Executor, register_executor
from dynshape.runtime.targets import get_target
from dynshape.runtime.replay import positions
from dynshape.runtime.layout import (broadcast_strides, check_outer, coalesce,
                                     element_strides, flat_view, plane, plane_of_coalesced,
                                     flattener, kernel_view_dtype, readonly_flat)
from dynshape.tables.bucket import bucket
from dynshape.tables.key import TableKey
from dynshape.tables.param_table import bind_common


def _readonly(a):
    v = a.view()
    v.flags.writeable = False
    return v


_DUMMY = {}
_SPARE = {}


def spare(dt):
    """A one-element output buffer of ``dt`` that a driver is given but never writes (the
    outputs of the kinds a call does not produce); shared, so that the CUDA target uploads
    it once."""
    d = _SPARE.get(dt)
    if d is None:
        d = _SPARE[dt] = np.zeros(1, dt)
    return d


def dummy(dt):
    """A read-only one-element buffer as kernels see ``dt`` (an unused side input)."""
    d = _DUMMY.get(dt)
    if d is None:
        d = _readonly(np.zeros(1, kernel_view_dtype(dt)))
        _DUMMY[dt] = d
    return d


def _operand_strides(fused, prog, x, arrs, out, shape):
    nd = len(shape)
    if prog.tail in (kfused.T_NONE, kfused.T_ROWWISE):
        ostr = list(element_strides(out))
    elif prog.tail == kfused.T_REDUCE_ALL:
        ostr = [0] * nd
    else:
        ost = element_strides(out)
        ostr = list(ost[:nd - 1]) + [0]
    strides = [ostr, broadcast_strides(shape, x.shape, element_strides(x))]
    for a in arrs:
        strides.append(broadcast_strides(shape, a.shape, element_strides(a)))
    return strides


def _plane_keep_last(shape, strides):
    """Coalesce all but the last axis; the last one is the plane's columns (whole rows)."""
    lead, lstr = coalesce(shape[:-1], [st[:-1] for st in strides])
    cshape = list(lead) + [shape[-1]]
    cstr = [list(ls) + [st[-1]] for ls, st in zip(lstr, strides)]
    return plane_of_coalesced(cshape, cstr)


class FusedExecutor(Executor):
    name = family = "fused"
    calibrated = False
    model_note = "none: one tile shape per chain"

    def check_target_dtype(self, launch, target):
        accepted = kfused.fused_dtypes(target)
        if launch.dtype not in accepted:
            raise DtypeError(f"fused: dtype {launch.dtype} is not supported on the {target} "
                             f"target; accepted there: {', '.join(accepted)}")

    def signature(self, launch):
        x, *arrs = launch.inputs
        out = launch.out
        return (launch.target, "fused", launch.extra["fused"].raw_key, launch.dtype,
                launch.extra["shape"], x.shape, x.strides, out.shape, out.strides,
                tuple((a.shape, a.strides) for a in arrs))

    def geometry(self, launch):
        ex = launch.extra
        prog, shape = ex["prog"], ex["shape"]
        x, *arrs = launch.inputs
        strides = _operand_strides(ex["fused"], prog, x, arrs, launch.out, shape)
        if prog.tail in (kfused.T_ROWWISE, kfused.T_REDUCE_ROWS):
            p = _plane_keep_last(shape, strides)
        else:
            p = plane(shape, strides)
        check_outer(p)
        return p

    def key(self, launch, p, target):
        return TableKey("fused", "fused", launch.dtype, target, (bucket(p.m, 1), bucket(p.n, 32)),
                        p.layout_class(), (launch.extra["fused"].raw_key,))

    def build(self, launch, p, key, variant):
        from dynshape.tables.fused_table import FusedTable
        prog = launch.extra["prog"]
        b0, b1 = key.bucket
        t0, t1 = tile_shape(prog, p, b0, b1, key.target)
        entries = uniform_entries(b0[0], b0[1], t0, b1[0], b1[1], t1, int(prog.steps[0, 0]))
        return FusedTable.of(launch.extra["fused"], key.dtype, key.target, key.bucket,
                             entries, (t0, t1), prog.steps, prog.pattrs, prog.tail, (p.m, p.n))

    def bind(self, launch, p, table):
        prog = launch.extra["prog"]
        offsets = [flat_view(launch.out)[1]] + [flat_view(a)[1] for a in launch.inputs]
        common = bind_common(p, offsets, len(offsets))
        common.flags.writeable = False
        fctl = np.zeros(kfused.F_SIZE, np.int64)
        fctl[kfused.F_T0], fctl[kfused.F_T1] = table.tile
        fctl[kfused.F_TAIL] = prog.tail
        fctl[kfused.F_TCODE] = prog.tcode
        fctl[kfused.F_SPLIT] = prog.split
        fctl[kfused.F_EPS] = prog.eps_at
        fctl[kfused.F_NSIDES] = len(launch.inputs) - 1
        fctl[kfused.F_STREAM] = streaming.launch_streams(launch)
        fctl.flags.writeable = False
        return common, fctl

    def call(self, driver, launch, table, bound):
        common, fctl = bound
        prog = launch.extra["prog"]
        x, *arrs = launch.inputs
        dt = x.dtype
        sides = [readonly_flat(a) for a in arrs]
        sides += [dummy(dt)] * (MAX_SIDES - len(sides))
        oflat = flat_view(launch.out)[0]
        # the driver writes integer sums to ``oi`` and integer means to ``of`` (even when the
        # chain dtype is int64 itself), everything else to ``o``
        if dt.kind == "i" and prog.tail in (kfused.T_REDUCE_ROWS, kfused.T_REDUCE_ALL) \
                and REDUCE_OPS[prog.tcode] in ("sum", "mean"):
            o = spare(dt)
            oi = oflat if REDUCE_OPS[prog.tcode] == "sum" else spare(np.dtype(np.int64))
            of = oflat if REDUCE_OPS[prog.tcode] == "mean" else spare(np.dtype(np.float64))
        else:
            o, oi, of = oflat, spare(np.dtype(np.int64)), spare(np.dtype(np.float64))
        driver(readonly_flat(x), o, oi, of, common, table.entries, prog.prog,
               prog.pattrs, fctl, tuple(sides))

    def replay(self, launch, arrays, table, bound):
        # each operand of the launch must be one of the caller's arrays (none converted)
        idx = positions(arrays, launch.inputs)
        if idx is None:
            return None
        common, fctl = bound
        prog = launch.extra["prog"]
        dt = launch.inputs[0].dtype
        if dt.kind == "i" and prog.tail in (kfused.T_REDUCE_ROWS, kfused.T_REDUCE_ALL):
            return None
        call = get_target(launch.target).replay_driver("fused", launch.dtype)
        entries = table.entries
        pad = (dummy(dt),) * (MAX_SIDES - len(idx) + 1)
        spare_i, spare_f = spare(np.dtype(np.int64)), spare(np.dtype(np.float64))

        # each operand's flat buffer by a function chosen for its layout (the driver's
        # entry point takes a writable view where it reads: a read-only copy of the flags
        # cost ~1 us per operand and call)
        flats = [(flattener(arrays[j]), j) for j in idx]
        fx, ix = flats[0]
        fsides = flats[1:]
        fo = flattener(launch.out)

        def go(arrays, out):
            call(fx(arrays[ix]), fo(out), spare_i, spare_f, common, entries, prog.prog,
                 prog.pattrs, fctl, tuple([f(arrays[j]) for f, j in fsides]) + pad)
        return go


FUSED = register_executor(FusedExecutor())
