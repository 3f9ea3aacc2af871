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
import contextlib
import contextvars

import numpy as np
from dynshape_kernels.abi.conv_table import (CV_ACT, CV_BOFF, CV_BS, CV_C, CV_CG, CV_DH, CV_DW,
                                              CV_G, CV_H, CV_HASB, CV_HASR, CV_IDBASE, CV_KH,
                                              CV_KW, CV_M, CV_MG, CV_N, CV_NTH, CV_OH, CV_OW,
                                              CV_ROFF, CV_SH, CV_SIZE, CV_SW, CV_W, CV_XOFF,
                                              CV_YOFF)
from dynshape_kernels.abi.step_program import MAX_SIDES, empty_program
from dynshape_kernels.abi.storage import carried_compute
from dynshape_kernels.abi.tiles import CONV_TILES

from dynshape.errors import SettingError
from dynshape.planning.conv import build_table
from dynshape.runtime import config
from dynshape.runtime.executor import Executor, register_executor
from dynshape.runtime.targets import get_target
from dynshape.runtime.layout import element_strides, flat_view, flattener, kernel_view_dtype
from dynshape.runtime.replay import epilogue_fill, positions
from dynshape.tables.bucket import bucket
from dynshape.tables.key import TableKey

FAMILY = "conv"
_forced_slot = contextvars.ContextVar("dynshape_conv_slot", default=None)


@contextlib.contextmanager
def forcing_slot(slot):
    """Within the block, every new conv2d table uses kernel slot ``slot`` (every slot runs
    every geometry; tests use this to exercise each static kernel on any shape). Tables built
    this way have their own cache keys."""
    if slot is not None and slot not in range(len(CONV_TILES)):
        raise SettingError(f"conv slot {slot!r}; accepted: 0..{len(CONV_TILES) - 1} or None")
    token = _forced_slot.set(slot)
    try:
        yield
    finally:
        _forced_slot.reset(token)


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
    """The empty epilogue program (prog, pattrs, sides, cgeo) of kernel dtype ``dt`` (a
    carrier for half precision; ``pattrs`` is of the computed dtype)."""
    st = _NO_STEPS.get(dt)
    if st is None:
        dummy = np.zeros(1, dt)
        dummy.flags.writeable = False
        prog, cgeo = empty_program(), np.zeros((MAX_SIDES, 5), np.int64)
        pattrs = np.zeros(2, carried_compute(dt.name))
        for a in (prog, pattrs, cgeo):
            a.flags.writeable = False
        st = _NO_STEPS[dt] = (prog, pattrs, (dummy,) * MAX_SIDES, cgeo)
    return st


class ConvExecutor(Executor):
    name = family = FAMILY
    calibrated = False
    model_note = "built-in constants of the conv planner (not measured by dynshape calibrate yet)"

    def signature(self, launch):
        x, w, b = launch.inputs
        res, out = launch.extra["residual"], launch.out
        g = launch.extra["geo"]
        return (launch.target, FAMILY, launch.dtype, launch.table_attrs, g["act"], x.shape,
                x.strides, out.strides, None if res is None else res.strides, g["pads"],
                b is not None, config.num_threads(), _forced_slot.get())

    def geometry(self, launch):
        return launch.extra["geo"]

    def key(self, launch, g, target):
        slot = _forced_slot.get()
        attrs = launch.table_attrs + ((("slot", slot),) if slot is not None else ())
        return TableKey(FAMILY, launch.op, launch.dtype, target,
                        (bucket(g["N"], 1), bucket(g["OH"], 1), bucket(g["OW"], 1)), (),
                        attrs, False, config.num_threads())

    def build(self, launch, g, key, variant):
        slot = dict(a for a in key.attrs if isinstance(a, tuple) and len(a) == 2
                    and a[0] == "slot").get("slot")
        if key.target != "cpu":
            from dynshape.planning.gpu_conv import build_device_table
            return build_device_table(g, key.dtype, key.target, variant)
        return build_table(g, key.dtype, key.target, key.threads, slot, variant)

    def bind(self, launch, g, table):
        dt = kernel_view_dtype(launch.out.dtype)
        ops = _operands(launch, dt)
        return _common(launch, table, ops)

    def call(self, driver, launch, table, common):
        x, w, b = launch.inputs
        dt = kernel_view_dtype(launch.out.dtype)
        ops = _operands(launch, dt)
        wbuf = flat_view(w)[0] if w.size else np.zeros(1, dt)
        prog, pattrs, sides, cgeo = launch.extra.get("steps") or _no_steps(dt)
        driver(ops[0][0], wbuf, ops[3][0], ops[2][0], ops[1][0], common, table.entries,
               launch.fattrs, prog, pattrs, sides, cgeo)

    def replay(self, launch, arrays, table, common):
        """The caller's arrays in any order (``run``'s x, w, bias; a fused sequence's x, w,
        then its side inputs), each operand one of them; an epilogue program's sides too."""
        x, w, b = launch.inputs
        steps = launch.extra.get("steps")
        srcs = list(launch.extra.get("side_sources", ())) if steps else []
        lead = [x, w] if b is None else [x, w, b]
        idx = positions(arrays, lead + srcs)
        if idx is None or launch.extra["residual"] is not None:
            return None
        call = get_target(launch.target).replay_driver(FAMILY, launch.dtype)
        entries, fattrs, nth = table.entries, launch.fattrs, config.num_threads()
        dt = kernel_view_dtype(launch.out.dtype)
        prog, pattrs, sides, cgeo = steps or _no_steps(dt)
        dummy = np.zeros(1, dt)
        ix, iw, ib = idx[0], idx[1], (idx[2] if b is not None else None)
        isides = idx[len(lead):]
        pad = _no_steps(dt)[2][:MAX_SIDES - len(isides)]
        fill = epilogue_fill(launch, self.family) if steps else None
        fsides = [(flattener(arrays[j]), j) for j in isides]
        fx, fw, fo = flattener(x), flattener(w), flattener(launch.out)
        fb = flattener(b) if b is not None else None

        def go(arrays, out):
            if _forced_slot.get() is not None or config.num_threads() != nth:
                return False
            if fill is not None:
                fill()
            bbuf = fb(arrays[ib]) if ib is not None else dummy
            sd = tuple([f(arrays[j]) for f, j in fsides]) + pad if fsides else sides
            call(fx(arrays[ix]), fw(arrays[iw]), bbuf, dummy, fo(out), common, entries, fattrs,
                 prog, pattrs, sd, cgeo)
        return go


def _operands(launch, dt):
    x, _, b = launch.inputs
    return [_operand(x, dt), _operand(launch.out, dt), _operand(launch.extra["residual"], dt),
            _operand(b, dt) if b is not None else (np.zeros(1, dt), 0, (0,))]


CONV = register_executor(ConvExecutor())
