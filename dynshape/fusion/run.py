"""Running fused sequences: binding side inputs, output shape and dtype, aliasing, and the
call through the fused executor (or, for a chain led by matmul, gemm or conv2d, through that
op's executor with the chain as its epilogue program). The step syntax: see
:mod:`dynshape.fusion`."""
import math

import numpy as np
from dynshape_kernels.abi.step_program import MAX_SIDES

from dynshape import api as dispatcher
from dynshape.api import _on_device
from dynshape import ops
from dynshape.errors import ArgumentError, DeviceError, DomainError, DtypeError, ShapeError
from dynshape.fusion.parse import _LEAD_INPUT, _LEADS, _parse_step
from dynshape.ops.attributes import is_number as _is_number
from dynshape.fusion.program import build_program
from dynshape.ops import Launch, as_array, check_out, is_planning, new_output
from dynshape.runtime import replay
from dynshape.runtime.executor import executor_of
from dynshape.runtime.fused import FUSED, _readonly, dummy
from dynshape.runtime.replay import REPLAY
from dynshape.runtime.layout import (broadcast_strides, coalesce, element_strides, flat_view,
                                     same_view)
from dynshape.ops.elementwise import result_type
from dynshape_kernels.abi.storage import HALF_DTYPES
from dynshape.tables.fused_table import FusedTable  # noqa: F401  (the table class of the family)

DTYPES = ("float32", "float64", "int32", "int64") + HALF_DTYPES


class Fused:
    """A validated fused sequence; call it like an op: ``f(x, *sides, out=None, **sides)``.

    ``side_names``: the side inputs in order of first appearance (the positional order).
    """

    def __init__(self, steps):
        if isinstance(steps, (str, bytes)) or not isinstance(steps, (list, tuple)):
            raise ArgumentError(f"fuse takes a list of steps, got {steps!r}")
        if not steps:
            raise ArgumentError("fuse needs at least one step")
        parsed = [_parse_step(s, i) for i, s in enumerate(steps)]
        self.lead = parsed[0] if parsed[0].kind in _LEADS else None
        if self.lead is not None:
            parsed = parsed[1:]
            late = [s for s in parsed if s.kind in ("rowwise", "reduce")]
            if late:
                raise ArgumentError(f"{late[0].where}: after a leading {self.lead.op} only "
                                    f"elementwise steps can be fused (they run on each "
                                    f"output tile); run the {late[0].op} apart")
        ends = [s for s in parsed if s.kind in ("rowwise", "reduce")]
        if len(ends) > 1:
            raise ArgumentError(f"a fused sequence holds at most one row-wise op or reduction; "
                                f"got {', '.join(s.where for s in ends)}")
        for s in ends:
            if s.kind == "reduce" and s.index != len(parsed) - 1:
                raise ArgumentError(f"{s.where}: a reduction must be the last step")
        names = []
        for s in parsed:
            for nm in s.sides():
                if nm not in names:
                    names.append(nm)
        if len(names) > MAX_SIDES:
            raise ArgumentError(f"a fused sequence reads at most {MAX_SIDES} distinct side "
                                f"inputs, got {len(names)}: {', '.join(names)}")
        self.steps = tuple(parsed)
        # the side inputs the step program reads (its side indices), and every input given
        # at call time besides the leading op's operands: a leading conv2d's bias / gemm's C
        # first, then the program's sides
        self.prog_sides = tuple(names)
        lead_in = None
        if self.lead is not None and self.lead.op in _LEAD_INPUT:
            lead_in = self.lead.attrs[_LEAD_INPUT[self.lead.op]]
        self.lead_input = lead_in
        if lead_in is not None and lead_in not in names:
            names.insert(0, lead_in)
        self.side_names = tuple(names)
        self.raw = tuple(steps)
        self.raw_key = repr(self.raw)
        self.end = ends[0] if ends else None
        self._programs = {}

    def __repr__(self):
        return f"fuse({list(self.raw)!r})"

    # ---- program per dtype ---------------------------------------------------------------
    def program(self, dtype):
        """The chain as data for ``dtype`` (a name from DTYPES); raises DtypeError when a
        step does not support it."""
        p = self._programs.get(dtype)
        if p is None:
            p = build_program(self, dtype)
            self._programs[dtype] = p
        return p

    # ---- calls ---------------------------------------------------------------------------
    def __call__(self, x, *sides, out=None, **named):
        if self.lead is not None and not sides:
            ab = "x, w" if self.lead.op == "conv2d" else "a, b"
            raise ArgumentError(f"{self!r} starts with {self.lead.op}: call it as "
                                f"f({ab}, *sides, **sides)")
        arrays = (x, *sides, *named.values())
        sig = replay.signature((self, tuple(named)), arrays, out, None)
        if sig is None and _on_device(arrays, out):
            from dynshape.cuda.call import run_fused_device
            return run_fused_device(self, x, sides, named, out)
        if sig is not None:
            result = REPLAY.run(sig, arrays, out)
            if result is not None:
                return result
        ran = []
        if self.lead is None:
            result = _execute(self, x, sides, named, out, explain=False, ran=ran)
            executor = FUSED
        else:
            result = _execute_lead(self, x, sides[0], sides[1:], named, out, ran)
            executor = executor_of(ops.get(self.lead.op).executor)
        if sig is not None and ran:
            REPLAY.record(sig, executor, ran[0], arrays, out)
        return result

    run = __call__

    def explain(self, x, *sides, dtype="float32", **named):
        """The FusedTable the call would use (None for an empty result); shapes (tuples)
        stand for C-contiguous arrays of ``dtype``. Nothing is computed. A chain led by a
        matmul, gemm or conv2d gives that op's table (its epilogue runs the other steps)."""
        conv = _placeholders(dtype)
        if self.lead is not None:
            attrs = {k: v for k, v in self.lead.attrs.items()
                     if k != _LEAD_INPUT.get(self.lead.op)}
            with ops.planning():
                return dispatcher.explain(self.lead.op, conv(x),
                                          *[conv(s) for s in sides[:1]], **attrs)
        with ops.planning():
            return _execute(self, conv(x), tuple(conv(s) for s in sides),
                            {k: conv(v) for k, v in named.items()}, None, explain=True)

    # the protocol dynshape.run / dynshape.explain dispatch on
    def __dynshape_run__(self, *arrays, out=None, **named):
        if not arrays:
            raise ArgumentError(f"{self!r} needs the input array x")
        return self(arrays[0], *arrays[1:], out=out, **named)

    def __dynshape_explain__(self, *arrays, dtype="float32", **named):
        if not arrays:
            raise ArgumentError(f"{self!r} needs the input array x (or its shape)")
        return self.explain(arrays[0], *arrays[1:], dtype=dtype, **named)


def fuse(steps):
    """A fused sequence of ``steps`` (see the module docstring); validated now, so an unknown
    op, a wrong number of operands or a bad attribute raises here, not at the first call."""
    return Fused(steps)


def _placeholders(dtype):
    def conv(a):
        if isinstance(a, (tuple, list)):
            try:
                shape = tuple(int(s) for s in a)
            except (TypeError, ValueError):
                raise ArgumentError(f"a shape must be a tuple of integers, got {a!r}") from None
            if any(s < 0 for s in shape):
                raise ArgumentError(f"negative dimension in shape {shape}")
            return ops.placeholder(shape, dtype)
        return a
    return conv


# ---- execution ---------------------------------------------------------------------------------
def _bind_sides(fused, sides, named):
    if len(sides) > len(fused.side_names):
        raise ArgumentError(f"{fused!r} takes {len(fused.side_names)} side input(s) "
                            f"({', '.join(fused.side_names) or 'none'}), got {len(sides)} "
                            f"positional")
    bound = dict(zip(fused.side_names, sides))
    for k, v in named.items():
        if k not in fused.side_names:
            raise ArgumentError(f"{fused!r}: unknown side input {k!r}; its side inputs: "
                                f"{', '.join(fused.side_names) or 'none'}")
        if k in bound:
            raise ArgumentError(f"{fused!r}: side input {k!r} given twice")
        bound[k] = v
    missing = [k for k in fused.side_names if k not in bound]
    if missing:
        raise ArgumentError(f"{fused!r}: missing side input(s) {', '.join(missing)}")
    return [bound[k] for k in fused.side_names]


def _side_array(fused, name, v, dt):
    if _is_number(v):
        try:
            ok = result_type([np.empty(0, dt), v]) == dt
        except TypeError:
            ok = False
        if not ok:
            raise DtypeError(f"{fused!r}: side input {name!r}={v!r} would promote the {dt} "
                             f"chain (the dtype of x)")
        return np.asarray(v, dtype=dt)
    a = v if isinstance(v, np.ndarray) else as_array(v, f"side input {name!r}")
    if a.dtype != dt:
        if a.dtype.hasobject or result_type([np.empty(0, dt), a]) != dt:
            raise DtypeError(f"{fused!r}: side input {name!r} has dtype {a.dtype}, which would "
                             f"promote the {dt} chain (the dtype of x); accepted: dtypes that "
                             f"cast safely to {dt}")
        a = a.astype(dt)
    return a


def _out_shape(fused, shape):
    end = fused.end
    if end is None or end.kind == "rowwise":
        return shape
    keep = end.attrs["keepdims"]
    if end.attrs["axis"] is None:
        return (1,) * len(shape) if keep else ()
    return shape[:-1] + (1,) if keep else shape[:-1]


def _execute(fused, x, sides, named, out, explain, ran=None):
    x = x if isinstance(x, np.ndarray) else as_array(x, "fused input x")
    dtype = ops.dtype_name(x.dtype)
    if dtype not in DTYPES:
        raise DtypeError(f"{fused!r}: dtype {x.dtype} of x is not supported; accepted: "
                         f"{', '.join(DTYPES)}")
    prog = fused.program(dtype)
    dt = x.dtype
    arrs = [_side_array(fused, k, v, dt)
            for k, v in zip(fused.side_names, _bind_sides(fused, sides, named))]
    if dt.kind == "i":
        _check_int_pow(fused, arrs)
    try:
        shape = np.broadcast_shapes(x.shape, *[a.shape for a in arrs])
    except ValueError:
        desc = ", ".join(f"{k} {a.shape}" for k, a in zip(fused.side_names, arrs))
        raise ShapeError(f"{fused!r}: the side inputs do not broadcast with x {x.shape} "
                         f"(NumPy rules: trailing dimensions must match or be 1): "
                         f"{desc}") from None
    end = fused.end
    if end is not None and end.kind == "rowwise" and len(shape) == 0:
        raise ShapeError(f"{end.where}: a row-wise op needs an input of rank >= 1")
    if end is not None and end.kind == "reduce" and end.attrs["axis"] == -1 and not shape:
        raise ShapeError(f"{end.where}: axis -1 is out of range for a 0-D input")
    out_shape = _out_shape(fused, shape)
    out_dtype = prog.out_dtype
    if out is None:
        out = new_output(out_shape, out_dtype)
        result = out
    else:
        out = check_out(out, out_shape, out_dtype, "fused")
        result = out
    if math.prod(shape) == 0:
        if explain:
            return None
        return _empty_result(fused, prog, out, shape)
    if not is_planning():
        x = _unalias_input(out, x)
        arrs = [a.copy() if np.may_share_memory(out, a) else a for a in arrs]
    if element_strides(out) is None:
        tmp = np.empty(out.shape, out.dtype)
        _launch(fused, prog, dtype, x, arrs, tmp, shape, explain)
        np.copyto(out, tmp)
        return result
    x = x if element_strides(x) is not None else np.ascontiguousarray(x)
    arrs = [a if element_strides(a) is not None else np.ascontiguousarray(a) for a in arrs]
    table = _launch(fused, prog, dtype, x, arrs, out, shape, explain, ran)
    return table if explain else result


def _execute_lead(fused, a, b, sides, named, out, ran=None):
    """The leading matmul / gemm / conv2d of ``a``, ``b`` with the chain as the epilogue
    program of its driver: the steps run on every output tile before it is stored
    (dynshape_kernels/cpu/gemm.py and dynshape_kernels/cpu/conv_epilogue.py call
    steps.apply_steps_as, in the output's format). ``ran`` (a list) receives the launch
    run, for a replay (``launch.extra["side_sources"]``: the arrays whose memory the
    program's sides read)."""
    lead = fused.lead
    bound = dict(zip(fused.side_names, _bind_sides(fused, sides, named)))
    spec = ops.get(lead.op)
    inputs, attrs = [a, b], {}
    if lead.op == "matmul" and (np.ndim(a) < 2 or np.ndim(b) < 2):
        raise ShapeError(f"{fused!r}: a fused matmul needs operands of rank >= 2, got "
                         f"{np.shape(a)} and {np.shape(b)}")
    if lead.op != "matmul":
        attrs = {k: v for k, v in lead.attrs.items() if k != _LEAD_INPUT[lead.op]}
        if fused.lead_input is not None:
            inputs.append(bound[fused.lead_input])
    launch = spec.prepare(inputs, out, attrs)
    if ops.device_active() is not None:
        launch.target = "cuda"
    if launch.dtype not in DTYPES:
        raise DtypeError(f"{fused!r}: dtype {launch.dtype} of the {lead.op} is not supported "
                         f"in a fused sequence led by {lead.op}; accepted: {', '.join(DTYPES)}")
    result = launch.result
    dt = np.dtype(launch.dtype)
    prog = fused.program(launch.dtype)
    shape = result.shape
    arrs = [_side_array(fused, k, bound[k], dt) for k in fused.prog_sides]
    for k, s in zip(fused.prog_sides, arrs):
        try:
            ok = np.broadcast_shapes(shape, s.shape) == shape
        except ValueError:
            ok = False
        if not ok:
            raise ShapeError(f"{fused!r}: side input {k!r} of shape {s.shape} does not "
                             f"broadcast to the {lead.op} result's shape {shape}")
    if result.size and prog.prog.shape[0]:
        geo = _conv_side_geometry if lead.op == "conv2d" else _matmul_side_geometry
        sgeo, flat, used = geo(shape, arrs, result)
        flat += [dummy(dt)] * (MAX_SIDES - len(flat))
        sgeo.flags.writeable = False
        launch.extra["steps"] = (prog.prog, prog.pattrs, tuple(flat), sgeo)
        launch.extra["side_sources"] = used
    result = dispatcher.run_launch(spec, launch)
    if ran is not None:
        ran.append(launch)
    return result


def _unaliased_side(result, s):
    if not is_planning() and np.may_share_memory(result, s):
        return s.copy()         # the driver stores tiles while later tiles still read sides
    return s


def _matmul_side_geometry(shape, arrs, result):
    """sgeo (MAX_SIDES, 4) = (offset, flattened-batch stride, row, column stride) per side
    and the sides' flat buffers, for the GEMM driver's epilogue program, and the arrays
    those buffers view (a side itself, or its copy)."""
    sgeo = np.zeros((MAX_SIDES, 4), np.int64)
    flat, used = [], []
    for i, s in enumerate(arrs):
        s = _unaliased_side(result, s)
        st = broadcast_strides(shape, s.shape, element_strides(s)) \
            if element_strides(s) is not None else None
        bstr = None
        if st is not None:
            bshape, bst = coalesce(shape[:-2], [st[:-2]])
            bstr = 0 if not bshape else bst[0][0] if len(bshape) == 1 else None
        if bstr is None:
            # batch strides no single stride over the flattened batch index can express
            if ops.device_active() is not None:
                raise DeviceError(f"side input {i} of shape {s.shape} would be broadcast to "
                                  f"the matmul result {shape} by a copy on the host: its "
                                  f"batch dimensions must broadcast as one (give it all "
                                  f"of the result's batch dimensions, or none)")
            s = np.ascontiguousarray(np.broadcast_to(s, shape))
            st = element_strides(s)
            bstr = st[-3] if len(shape) > 2 else 0
        buf, off = flat_view(s)
        sgeo[i] = (off, bstr, st[-2], st[-1])
        flat.append(_readonly(buf))
        used.append(s)
    return sgeo, flat, used


def _conv_side_geometry(shape, arrs, result):
    """cgeo (MAX_SIDES, 5) = (offset, n, channel, row, column stride) per side and the
    sides' flat buffers, for the conv driver's epilogue program: any strided view broadcast
    to (N, M, OH, OW) is read in place (per-channel sides: zero row and column strides); and
    the arrays those buffers view (a side itself, or its copy)."""
    cgeo = np.zeros((MAX_SIDES, 5), np.int64)
    flat, used = [], []
    for i, s in enumerate(arrs):
        s = _unaliased_side(result, s)
        if element_strides(s) is None:
            s = np.ascontiguousarray(s)
        buf, off = flat_view(s)
        cgeo[i, 0] = off
        cgeo[i, 1:] = broadcast_strides(shape, s.shape, element_strides(s))
        flat.append(_readonly(buf))
        used.append(s)
    return cgeo, flat, used


def _check_int_pow(fused, arrs):
    """NumPy refuses integers to negative integer powers: so does an integer chain."""
    for s in fused.steps:
        if s.kind == "binary" and s.op == "pow" and isinstance(s.right, str):
            a = arrs[fused.side_names.index(s.right)]
            if a.size and a.min() < 0:
                raise DomainError(f"{s.where}: integers to negative integer powers are not "
                                 f"allowed (side input {s.right!r} has negative values)")


def _unalias_input(out, x):
    if out is x or not np.may_share_memory(out, x) or same_view(out, x):
        return x
    return x.copy()


def _empty_result(fused, prog, out, shape):
    end = fused.end
    if end is None or end.kind == "rowwise" or out.size == 0:
        return out
    # a reduction over an empty set of elements with a non-empty result
    if end.op == "sum":
        out[...] = 0
    elif end.op == "mean":
        out[...] = np.nan
    else:
        raise ShapeError(f"{end.where}: {end.op} of an empty set of elements has no identity "
                         f"(shape {shape})")
    return out


def _launch(fused, prog, dtype, x, arrs, out, shape, explain, ran=None):
    """Run (or explain) one fused call through the fused executor (the launch run is
    appended to ``ran`` when given)."""
    launch = Launch("fused", "fused", dtype, out, [x] + list(arrs), out,
                    extra={"fused": fused, "prog": prog, "shape": shape,
                           # integer pow validates its exponents' values: never replayed
                           "reads_data": dtype.startswith("int")
                           and any(st.op == "pow" for st in fused.steps)})
    if ops.device_active() is not None:
        launch.target = "cuda"
    if explain:
        table = FUSED.explain(launch)
        from dynshape.pictures.calls import fused_call
        table.call = fused_call(fused, x, arrs, out, shape, FUSED.geometry(launch))
        return table
    FUSED.run(launch)
    if ran is not None:
        ran.append(launch)
    return None
