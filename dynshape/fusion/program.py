"""A fused sequence compiled to data for one dtype: the step table a FusedTable lists (kernel
ids per step), the driver's step program (``abi.step_program``), the attribute values and the
tail (a row-wise op or a reduction) that ends the elementwise part."""
import numpy as np
from dynshape_kernels.abi import fused_table as kfused
from dynshape_kernels.abi.step_program import K_CONST_L, K_CONST_R, K_SIDE_L, K_SIDE_R, K_UNARY
from dynshape_kernels.abi.vocabulary import (BINARY_OPS, FLOAT_ONLY_UNARY, REDUCE_OPS,
                                             ROWWISE_OPS, UNARY_OPS)
from dynshape_kernels.abi.storage import HALF_DTYPES
from dynshape_kernels.catalog import CATALOG

from dynshape import ops
from dynshape.errors import DomainError, DtypeError
from dynshape.fusion.parse import RUNNING
from dynshape.ops.elementwise import result_type

# kinds only the table lists (the driver gets these through its control block)
K_ROWWISE = 5
K_REDUCE = 6
_KIND_NAMES = {K_UNARY: "unary", K_SIDE_R: "binary(v, side)", K_SIDE_L: "binary(side, v)",
               K_CONST_R: "binary(v, const)", K_CONST_L: "binary(const, v)",
               K_ROWWISE: "rowwise", K_REDUCE: "reduce"}
# catalog slots whose kernel ids the table lists for each step kind
_ELEMENTWISE_SLOT = 1
_ROWWISE_SLOT = 0
_REDUCE_SLOT = 2


class _Program:
    """The chain compiled to data for one dtype: steps table, driver program, attributes."""
    __slots__ = ("steps", "prog", "pattrs", "tail", "tcode", "split", "eps_at", "out_dtype")

    def __init__(self, steps, prog, pattrs, tail, tcode, split, eps_at, out_dtype):
        self.steps = steps
        self.prog = prog
        self.pattrs = pattrs
        self.tail = tail
        self.tcode = tcode
        self.split = split
        self.eps_at = eps_at
        self.out_dtype = out_dtype


def _constant(step, v, dt):
    try:
        ok = result_type([np.empty(0, dt), v]) == dt
    except TypeError:
        ok = False
    if not ok or (dt.kind == "i" and not float(v).is_integer()):
        raise DtypeError(f"{step.where}: the constant {v!r} would promote the {dt} chain "
                         f"(the dtype of x); use a constant representable in {dt}")
    return v


def build_program(self, dtype):
    """The chain ``self`` (a Fused) as data for ``dtype``; raises DtypeError when a step
    does not support it."""
    dt = ops.as_dtype(dtype)
    is_int = dt.kind == "i"
    steps, prog, attrs = [], [], []
    tail, tcode, split, eps_at = kfused.T_NONE, 0, 0, 0
    out_dtype = dt

    def attr_slot(values):
        attrs.extend(values)
        return len(attrs) - len(values)

    def side_index(name):
        return self.prog_sides.index(name)

    def emit(kid, kind, code, side, attr, driver=True):
        steps.append((kid, kind, code, side, attr))
        if driver:
            prog.append((kind, code, side, attr))

    for s in self.steps:
        if s.kind == "unary":
            kop = s.attrs["kernel_op"]
            if is_int and (kop in FLOAT_ONLY_UNARY or s.op == "reciprocal"):
                raise DtypeError(f"{s.where}: {s.op} needs a float input; the chain runs "
                                 f"in {dtype} (the dtype of x), convert x to float32 or "
                                 f"float64")
            spec = ops.get(s.op)
            vals = spec.op_attrs({k: v for k, v in s.attrs.items() if k != "kernel_op"},
                                 dt) if spec.attrs else np.zeros(2, dt)
            emit(CATALOG.kernel_id("unary", kop, dtype, _ELEMENTWISE_SLOT), K_UNARY,
                 UNARY_OPS.index(kop), 0, attr_slot(list(vals)))
        elif s.kind == "binary":
            if is_int and s.op == "div":
                raise DtypeError(f"{s.where}: div gives float64 on integers; the chain runs "
                                 f"in {dtype} (the dtype of x), convert x to a float dtype")
            code = BINARY_OPS.index(s.op)
            kid = CATALOG.kernel_id("binary", s.op, dtype, _ELEMENTWISE_SLOT)
            side_left = s.right == RUNNING
            other = s.left if side_left else s.right
            if is_int and s.op == "pow" and side_left:
                raise DtypeError(f"{s.where}: integer pow with the running value as the "
                                 f"exponent is not supported (it may be negative); use a "
                                 f"float chain")
            if isinstance(other, str):
                emit(kid, K_SIDE_L if side_left else K_SIDE_R, code, side_index(other), 0)
            else:
                c = _constant(s, other, dt)
                if is_int and s.op == "pow" and c < 0:
                    raise DomainError(f"{s.where}: integers to negative integer powers "
                                     f"are not allowed")
                emit(kid, K_CONST_L if side_left else K_CONST_R, code, 0,
                     attr_slot([c, 0]))
        elif s.kind == "rowwise":
            if is_int:
                raise DtypeError(f"{s.where}: {s.op} needs a float input; the chain runs "
                                 f"in {dtype}; accepted: float32, float64, float16, bfloat16")
            tail, tcode = kfused.T_ROWWISE, ROWWISE_OPS.index(s.op)
            eps_at = attr_slot([s.attrs.get("epsilon", 0.0), 0])
            split = len(prog)
            emit(CATALOG.kernel_id("rowwise", s.op, dtype, _ROWWISE_SLOT), K_ROWWISE, tcode,
                 0, eps_at, driver=False)
            for k, op in (("weight", "mul"), ("bias", "add")):
                if s.attrs.get(k) is not None:
                    emit(CATALOG.kernel_id("binary", op, dtype, _ELEMENTWISE_SLOT),
                         K_SIDE_R, BINARY_OPS.index(op), side_index(s.attrs[k]), 0)
        else:
            tail = kfused.T_REDUCE_ALL if s.attrs["axis"] is None else kfused.T_REDUCE_ROWS
            tcode = REDUCE_OPS.index(s.op)
            split = len(prog)
            emit(CATALOG.kernel_id("reduce", s.op, dtype, _REDUCE_SLOT), K_REDUCE, tcode, 0,
                 0, driver=False)
            if is_int and s.op == "sum":
                out_dtype = np.dtype(np.int64)
            elif is_int and s.op == "mean":
                out_dtype = np.dtype(np.float64)
    if tail == kfused.T_NONE:
        split = len(prog)
    attrs.extend([0, 0])
    st = np.array(steps, dtype=np.int64).reshape(-1, 5)
    pr = np.array(prog, dtype=np.int64).reshape(-1, 4)
    pa = np.array(attrs, dtype=np.float32 if dtype in HALF_DTYPES else dt)
    for a in (st, pr, pa):
        a.flags.writeable = False
    return _Program(st, pr, pa, tail, tcode, split, eps_at, out_dtype)
