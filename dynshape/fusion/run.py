"""Fused sequences (seed 004, Fig. 13): a cascade of ops run tile by tile in ONE driver call.

    f = dynshape.fuse([("add", "bias"), "gelu", ("mul", 0.5)])
    y = f(x, bias=b)                 # or f(x, b), dynshape.run(f, x, bias=b)
    print(dynshape.explain(f, (4096, 1024), bias=(1024,)))

A step is an op name or a tuple ``(op, *operands, {attributes})``:

* unary ops (``relu``, ``abs``, ``neg``, ``exp``, ``log``, ``sqrt``, ``reciprocal``,
  ``sigmoid``, ``tanh``, ``silu``, ``gelu`` {approximate}, ``leaky_relu`` {alpha}, ``clip``
  {min, max}): ``"relu"``, ``("clip", {"min": 0, "max": 6})``;
* binary ops (``add``, ``sub``, ``mul``, ``div``, ``pow``, ``maximum``, ``minimum``) with one
  operand besides the running value, which ``"_"`` names: ``("add", "bias")`` is
  ``v + bias``, ``("sub", "bias", "_")`` is ``bias - v``; an operand is a side input (a
  name, given at call time by keyword, or positionally in order of first appearance,
  :attr:`Fused.side_names`) or a Python number (a constant);
* one row-wise op over the last axis (``softmax``, ``log_softmax``, ``layer_norm``
  {epsilon, weight, bias}, ``rms_norm`` {epsilon, weight}; weight and bias name side
  inputs), which elementwise steps may follow;
* or, as the last step, one reduction (``sum``, ``mean``, ``max``, ``min``) over the last
  axis or all elements: ``("sum", {"axis": -1, "keepdims": False})`` (axis None: all);
* ``"matmul"`` as the first step: ``f = fuse(["matmul", ("add", "bias"), "gelu"]);
  f(a, b, bias=bias)``: the matmul driver runs the elementwise steps that follow on each
  output tile before storing it (its epilogue program), float32/float64, operands of rank
  >= 2; side inputs broadcast to the matmul result;
* ``"gemm"`` as the first step, with ONNX Gemm's attributes {alpha, beta, transA, transB, C}
  where ``C`` names an input given at call time: ``f = fuse([("gemm", {"transB": 1, "C":
  "c"}), "relu"]); f(a, b, c=c)``; 2-D operands, side inputs broadcast to (M, N);
* ``"conv2d"`` as the first step, with the attributes of ``run("conv2d")`` {strides, pads,
  auto_pad, dilations, group, kernel_shape, bias} where ``bias`` names an input given at call
  time (the (M,) bias, added to the accumulators): ``f = fuse([("conv2d", {"pads": 1,
  "bias": "b"}), ("add", "res"), "relu"]); f(x, w, b=b, res=r)``. The conv driver runs the
  elementwise steps on every output tile (all its channels) before storing it (no
  intermediate array); side inputs broadcast to the output (N, M, OH, OW) and are read in
  place whatever their strides: full-shape residuals, per-channel (1, M, 1, 1) / (M, 1, 1)
  scales and shifts, per-position (OH, OW) maps. float32 / float64 (the conv's dtype).
  Its ``activation`` / ``residual`` are not attributes here: write them as steps.

After a leading matmul, gemm or conv2d only elementwise steps may follow (no row-wise op, no
reduction). Its operands are the call's first two arguments; side inputs follow, positionally
(in :attr:`Fused.side_names` order, the leading op's named input first) or by keyword.

The chain runs in the dtype of ``x`` (float32, float64, int32, int64): side inputs and
constants must not promote it (NumPy's rules with Python numbers weak); integer chains accept
the steps NumPy keeps integer (no transcendental unary ops, no ``div``, no row-wise ops, ``pow``
with a non-negative exponent side or constant only). Side inputs broadcast with ``x`` by NumPy
rules; at most four distinct side inputs per chain. Results equal running the steps one by one
with ``dynshape.run`` up to floating-point rounding.

Execution: the chain is a step program (dynshape_kernels/cpu/steps.py) interpreted by one compiled
driver per dtype (dynshape_kernels/cpu/fused.py), so a chain never seen before compiles nothing. The
parameter table (:class:`FusedTable`) lists the tiles and the per-tile sequence of kernel ids
with their parameters; it is cached per shape bucket like every other table.
"""
import math
import numbers
import weakref

import numpy as np
from dynshape_kernels import drivers
from dynshape_kernels.catalog import CATALOG
from dynshape_kernels.abi.common_area import E_ANCH0, E_ANCH1, E_OFF0, E_OFF1
from dynshape_kernels.abi import fused_table as kfused
from dynshape_kernels.abi.vocabulary import (BINARY_OPS, FLOAT_ONLY_UNARY, REDUCE_OPS,
                                             ROWWISE_OPS, UNARY_OPS)
from dynshape_kernels.abi.step_program import (K_CONST_L, K_CONST_R, K_SIDE_L, K_SIDE_R, K_UNARY,
                                        MAX_SIDES)
from dynshape_kernels.abi.tail_mode import ANCHOR_END

from dynshape import ops

from dynshape.runtime import config

from dynshape import api as dispatcher
from dynshape.tables.bucket import bucket
from dynshape.planning.plane import _uniform_entries
from dynshape.errors import (ArgumentError, DomainError, DtypeError, OpAttributeError, ShapeError,
                     UnknownOpError)
from dynshape.runtime.layout import (broadcast_strides, check_outer, coalesce, element_strides, flat_view,
                     plane, plane_of_coalesced, same_view)
from dynshape.ops import as_array, check_out, is_planning, new_output

RUNNING = "_"
# ops that may lead a chain: the elementwise steps become their driver's epilogue program
_LEADS = ("matmul", "gemm", "conv2d")
DTYPES = ("float32", "float64", "int32", "int64")
_DTYPE_NAMES = {np.dtype(d): d for d in DTYPES}

UNARY = ("relu", "abs", "neg", "exp", "log", "sqrt", "reciprocal", "sigmoid", "tanh", "silu",
         "gelu", "leaky_relu", "clip")
REDUCE = ("sum", "mean", "max", "min")
# kinds only the table lists (the driver gets these through its control block)
K_ROWWISE = 5
K_REDUCE = 6
_KIND_NAMES = {K_UNARY: "unary", K_SIDE_R: "binary(v, side)", K_SIDE_L: "binary(side, v)",
               K_CONST_R: "binary(v, const)", K_CONST_L: "binary(const, v)",
               K_ROWWISE: "rowwise", K_REDUCE: "reduce"}
_ROWWISE_ATTRS = {"softmax": {"axis": -1}, "log_softmax": {"axis": -1},
                  "layer_norm": {"axis": -1, "epsilon": 1e-5, "weight": None, "bias": None},
                  "rms_norm": {"axis": -1, "epsilon": 1e-5, "weight": None}}
# catalog slots whose kernel ids the table lists for each step kind
_ELEMENTWISE_SLOT = 1
_ROWWISE_SLOT = 0
_REDUCE_SLOT = 2
CHUNK = kfused.CHUNK
# elements of an elementwise tile: 8192 float32 = 32 KB stays in L1/L2 while every step runs
# over it; measured against 2048/4096/16384 on one thread (3e7 elements: 4096 lost ~20% to
# per-tile overhead on short chains, 16384 gained nothing more)
TILE_ELEMENTS = 8192


def _known_steps():
    return sorted(UNARY + BINARY_OPS + tuple(_ROWWISE_ATTRS) + REDUCE
                  + ("matmul", "gemm", "conv2d"))


class Step:
    """One parsed step: ``kind`` in unary/binary/rowwise/reduce, the op, its attributes, and
    for binary steps the operands (``left``, ``right``: RUNNING, a side name or a number)."""
    __slots__ = ("index", "kind", "op", "attrs", "left", "right", "text")

    def __init__(self, index, kind, op, attrs, left=None, right=None, text=""):
        self.index = index
        self.kind = kind
        self.op = op
        self.attrs = attrs
        self.left = left
        self.right = right
        self.text = text

    @property
    def where(self):
        return f"step {self.index} ({self.text})"

    def sides(self):
        """Side-input names this step reads, in operand order."""
        if self.kind == "binary":
            return [v for v in (self.left, self.right) if isinstance(v, str) and v != RUNNING]
        if self.kind == "rowwise":
            return [self.attrs[k] for k in ("weight", "bias")
                    if self.attrs.get(k) is not None]
        return []


def _is_number(v):
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _parse_step(raw, index):
    if isinstance(raw, str):
        name, rest = raw, ()
    elif isinstance(raw, (tuple, list)) and raw and isinstance(raw[0], str):
        name, rest = raw[0], tuple(raw[1:])
    else:
        raise ArgumentError(f"step {index}: a step is an op name or a tuple (op, *operands, "
                            f"{{attributes}}), got {raw!r}")
    attrs = {}
    if rest and isinstance(rest[-1], dict):
        attrs, rest = dict(rest[-1]), rest[:-1]
    text = repr(raw) if not isinstance(raw, str) else raw
    where = f"step {index} ({text})"
    for v in rest:
        if isinstance(v, dict):
            raise ArgumentError(f"{where}: attributes go in one dict at the end of the step")
        if not (isinstance(v, str) or _is_number(v)):
            raise ArgumentError(f"{where}: an operand is a side-input name, {RUNNING!r} (the "
                                f"running value) or a Python number, got {v!r}")
    if name in UNARY:
        if rest:
            raise ArgumentError(f"{where}: {name} is unary and takes no operand besides the "
                                f"running value, got {len(rest)}")
        spec = ops.get(name)
        merged = spec.check_attrs(attrs)
        kop = spec.kernel_op(merged) if spec.attrs else name
        spec.op_attrs(merged, np.dtype(np.float64))          # validates numbers now
        return Step(index, "unary", name, dict(merged, kernel_op=kop), text=text)
    if name in BINARY_OPS:
        if attrs:
            raise OpAttributeError(f"{where}: {name} has no attributes, got "
                                   f"{', '.join(sorted(attrs))}")
        if len(rest) == 1:
            rest = (RUNNING, rest[0])
        if len(rest) != 2:
            raise ArgumentError(f"{where}: {name} takes one operand besides the running value "
                                f"(or two, one of them {RUNNING!r}), got {len(rest)}")
        if [v == RUNNING for v in rest].count(True) != 1:
            raise ArgumentError(f"{where}: exactly one operand of {name} must be {RUNNING!r}, "
                                f"the running value; got {rest!r}")
        return Step(index, "binary", name, {}, rest[0], rest[1], text=text)
    if name in _ROWWISE_ATTRS:
        if rest:
            raise ArgumentError(f"{where}: {name} takes no operands; weight and bias are "
                                f"attributes naming side inputs")
        merged = _merge_attrs(name, _ROWWISE_ATTRS[name], attrs)
        if merged["axis"] != -1:
            raise OpAttributeError(f"{where}: a fused {name} runs over the last axis only "
                                   f"(axis=-1), got axis={merged['axis']!r}")
        if "epsilon" in merged:
            eps = merged["epsilon"]
            if not _is_number(eps) or eps < 0:
                raise OpAttributeError(f"{where}: epsilon must be a number >= 0, got {eps!r}")
        for k in ("weight", "bias"):
            v = merged.get(k)
            if v is not None and (not isinstance(v, str) or v == RUNNING):
                raise OpAttributeError(f"{where}: {k} must name a side input (a string), "
                                       f"got {v!r}")
        return Step(index, "rowwise", name, merged, text=text)
    if name in REDUCE:
        if rest:
            raise ArgumentError(f"{where}: {name} takes no operands")
        merged = _merge_attrs(name, {"axis": None, "keepdims": False}, attrs)
        if merged["axis"] not in (None, -1) or isinstance(merged["axis"], bool):
            raise OpAttributeError(f"{where}: a fused {name} reduces over the last axis "
                                   f"(axis=-1) or all elements (axis=None), got "
                                   f"axis={merged['axis']!r}")
        if not isinstance(merged["keepdims"], (bool, np.bool_)):
            raise OpAttributeError(f"{where}: keepdims must be True or False, got "
                                   f"{merged['keepdims']!r}")
        return Step(index, "reduce", name, merged, text=text)
    if name == "matmul":
        if index != 0 or rest or attrs:
            raise ArgumentError(f"{where}: matmul may only be the first step, written "
                                f"\"matmul\" (its operands a, b are the call's first two "
                                f"arguments)")
        return Step(index, "matmul", name, {}, text=text)
    if name in _LEAD_ATTRS:
        if index != 0 or rest:
            raise ArgumentError(f"{where}: {name} may only be the first step, written "
                                f"\"{name}\" or (\"{name}\", {{attributes}}) (its operands "
                                f"are the call's first two arguments)")
        return Step(index, name, name, _lead_attrs(name, attrs, where), text=text)
    raise UnknownOpError(f"{where}: unknown op {name!r}; fusable ops: "
                         f"{', '.join(_known_steps())}")


# attributes of a leading conv2d / gemm step (the input-naming ones, "bias" and "C", name an
# input given at call time like a side input)
_LEAD_ATTRS = {
    "conv2d": {"strides": (1, 1), "pads": (0, 0, 0, 0), "auto_pad": "NOTSET",
               "dilations": (1, 1), "group": 1, "kernel_shape": None, "bias": None},
    "gemm": {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0, "C": None},
}
_LEAD_INPUT = {"conv2d": "bias", "gemm": "C"}
_LEAD_EPILOGUE = {"conv2d": ("activation", "residual"), "gemm": ("activation",)}


def _lead_attrs(name, attrs, where):
    """Validated attributes of a leading conv2d / gemm (op attributes are checked again, with
    the arrays, by the op itself at call time)."""
    from dynshape.ops.conv import AUTO_PADS, _int_tuple
    given = [k for k in _LEAD_EPILOGUE[name] if k in attrs]
    if given:
        raise OpAttributeError(f"{where}: a fused {name} takes no {given[0]!r} attribute: "
                               f"write it as the steps that follow (e.g. \"relu\", "
                               f"(\"add\", \"res\"))")
    merged = _merge_attrs(name, _LEAD_ATTRS[name], attrs)
    key = _LEAD_INPUT[name]
    v = merged[key]
    if v is not None and (not isinstance(v, str) or v == RUNNING):
        raise OpAttributeError(f"{where}: {key} must name an input given at call time (a "
                               f"string other than {RUNNING!r}), got {v!r}")
    if name == "conv2d":
        _int_tuple("strides", merged["strides"], 2, 1, (2,))
        _int_tuple("dilations", merged["dilations"], 2, 1, (2,))
        _int_tuple("pads", merged["pads"], 4, 0, (2, 4))
        if merged["kernel_shape"] is not None:
            _int_tuple("kernel_shape", merged["kernel_shape"], 2, 1, (2,))
        g = merged["group"]
        if not isinstance(g, (int, np.integer)) or isinstance(g, (bool, np.bool_)) or g < 1:
            raise OpAttributeError(f"{where}: group must be an integer >= 1, got {g!r}")
        if merged["auto_pad"] not in AUTO_PADS:
            raise OpAttributeError(f"{where}: auto_pad must be one of {', '.join(AUTO_PADS)}, "
                                   f"got {merged['auto_pad']!r}")
    else:
        for k in ("alpha", "beta"):
            if not _is_number(merged[k]):
                raise OpAttributeError(f"{where}: {k} must be a real number, got "
                                       f"{merged[k]!r}")
        for k in ("transA", "transB"):
            if merged[k] not in (0, 1, True, False):
                raise OpAttributeError(f"{where}: {k} must be 0 or 1, got {merged[k]!r}")
    return merged


def _merge_attrs(name, defaults, attrs):
    unknown = set(attrs) - set(defaults)
    if unknown:
        raise OpAttributeError(f"{name}: unknown attribute(s) {', '.join(sorted(unknown))}; "
                               f"accepted: {', '.join(sorted(defaults))}")
    merged = dict(defaults)
    merged.update(attrs)
    return merged


class FusedTable:
    """The parameter table of a fused call: tiles of the inner plane plus the step sequence.

    ``entries``: int64 (E, 7) as every table (common_area.E_*), each entry one tile of
    ``tile`` = (rows, columns) that runs the whole sequence; ``steps``: int64 (S, 5), per step
    (catalog kernel id, kind, op code, side index, attribute index), the same for every tile:
    the kinds are steps.K_* (K_ROWWISE / K_REDUCE: the row-wise or reduction kernel that ends
    the elementwise part); ``pattrs``: the attribute values in the chain dtype.
    """

    def __init__(self, fused, dtype, bucket_, entries, tile, steps, pattrs, tail, shape):
        self.fused = fused
        self.dtype = dtype
        self.bucket = bucket_
        self.entries = entries
        self.tile = tile
        self.steps = steps
        self.pattrs = pattrs
        self.tail = tail
        self.shape = shape
        self.catalog_hash = CATALOG.hash
        self.variant = "simplified"

    def __len__(self):
        return len(self.entries)

    def kernel_ids(self):
        """The per-tile sequence of catalog kernel ids (every tile runs all of them)."""
        return [int(k) for k in self.steps[:, 0]]

    def resolved(self, m, n):
        """Per entry: (row offset, valid rows, column offset, valid columns) at (m, n)."""
        e = self.entries
        out = []
        for size, t, co, ca in ((m, self.tile[0], E_OFF0, E_ANCH0),
                                (n, self.tile[1], E_OFF1, E_ANCH1)):
            o = np.where(e[:, ca] == ANCHOR_END, size - e[:, co], e[:, co])
            bad = (o < 0) | (o >= size)
            out.append((np.where(bad, 0, o), np.where(bad, 0, np.minimum(t, size - o))))
        (o0, v0), (o1, v1) = out
        return np.stack([o0, v0, o1, v1], axis=1)

    def describe(self, limit=8):
        (lo0, hi0), (lo1, hi1) = self.bucket
        lines = [f"FusedTable {self.fused!r} {self.dtype} cpu (catalog {self.catalog_hash})",
                 f"  bucket: rows {lo0 + 1}..{hi0}, columns {lo1 + 1}..{hi1}"
                 + (f"; built for {self.shape}" if self.shape else ""),
                 f"  {len(self)} entries of {self.tile[0]}x{self.tile[1]} tiles, each running "
                 f"{len(self.steps)} kernels in order:",
                 "  step: kernel id, family/op, kind, side, attributes"]
        from dynshape.tables.geometry import call_lines
        lines[2:2] = call_lines(self)
        for k, (kid, kind, code, side, attr) in enumerate(self.steps):
            sk = CATALOG[int(kid)]
            extra = ""
            if kind == K_UNARY and sk.op in ("leaky_relu", "clip"):
                extra = f"attrs {self.pattrs[attr]:g}, {self.pattrs[attr + 1]:g}"
            elif kind in (K_CONST_R, K_CONST_L):
                extra = f"constant {self.pattrs[attr]:g}"
            elif kind in (K_SIDE_R, K_SIDE_L):
                extra = f"side {int(side)} ({self.fused.prog_sides[int(side)]})"
            elif kind == K_ROWWISE and sk.op in ("layer_norm", "rms_norm"):
                extra = f"epsilon {self.pattrs[attr]:g}"
            lines.append(f"    {k}: {int(kid):5d} {sk.family}/{sk.op:12s} "
                         f"{_KIND_NAMES[int(kind)]:18s} {extra}")
        lines.append("  entry: row offset, column offset (variable tails)")
        for row in self.entries[:limit]:
            lines.append(f"    {int(row[E_OFF0]):8d} {int(row[E_OFF1]):8d}")
        if len(self) > limit:
            lines.append(f"    ... {len(self) - limit} more")
        return "\n".join(lines)

    __str__ = describe


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


def _readonly(a):
    v = a.view()
    v.flags.writeable = False
    return v


#: every Fused sequence alive: ``clear_cache()`` clears their exact-layout memos
_LIVE = weakref.WeakSet()


def _clear_memos():
    for f in list(_LIVE):
        f._memo.clear()


config.cache.on_clear(_clear_memos)


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
        self._memo = {}
        _LIVE.add(self)

    def __repr__(self):
        return f"fuse({list(self.raw)!r})"

    # ---- program per dtype ---------------------------------------------------------------
    def program(self, dtype):
        """The chain as data for ``dtype`` (a name from DTYPES); raises DtypeError when a
        step does not support it."""
        p = self._programs.get(dtype)
        if p is None:
            p = self._build_program(dtype)
            self._programs[dtype] = p
        return p

    def _build_program(self, dtype):
        dt = np.dtype(dtype)
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
                                     f"in {dtype}; accepted: float32, float64")
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
        pa = np.array(attrs, dtype=dt)
        for a in (st, pr, pa):
            a.flags.writeable = False
        return _Program(st, pr, pa, tail, tcode, split, eps_at, out_dtype)

    # ---- calls ---------------------------------------------------------------------------
    def __call__(self, x, *sides, out=None, **named):
        if self.lead is not None:
            if not sides:
                ab = "x, w" if self.lead.op == "conv2d" else "a, b"
                raise ArgumentError(f"{self!r} starts with {self.lead.op}: call it as "
                                    f"f({ab}, *sides, **sides)")
            return _execute_lead(self, x, sides[0], sides[1:], named, out)
        return _execute(self, x, sides, named, out, explain=False)

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


def _constant(step, v, dt):
    try:
        ok = np.result_type(dt, v) == dt
    except TypeError:
        ok = False
    if not ok or (dt.kind == "i" and not float(v).is_integer()):
        raise DtypeError(f"{step.where}: the constant {v!r} would promote the {dt} chain "
                         f"(the dtype of x); use a constant representable in {dt}")
    return v


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
            ok = np.result_type(dt, v) == dt
        except TypeError:
            ok = False
        if not ok:
            raise DtypeError(f"{fused!r}: side input {name!r}={v!r} would promote the {dt} "
                             f"chain (the dtype of x)")
        return np.asarray(v, dtype=dt)
    a = v if isinstance(v, np.ndarray) else as_array(v, f"side input {name!r}")
    if a.dtype != dt:
        if a.dtype.hasobject or np.result_type(dt, a.dtype) != dt:
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


def _execute(fused, x, sides, named, out, explain):
    x = x if isinstance(x, np.ndarray) else as_array(x, "fused input x")
    dtype = _DTYPE_NAMES.get(x.dtype)
    if dtype is None:
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
    table = _launch(fused, prog, dtype, x, arrs, out, shape, explain)
    return table if explain else result


def _execute_lead(fused, a, b, sides, named, out):
    """The leading matmul / gemm / conv2d of ``a``, ``b`` with the chain as the epilogue
    program of its driver: the steps run on every output tile before it is stored
    (dynshape_kernels/cpu/gemm.py and dynshape_kernels/cpu/conv_epilogue.py call steps.apply_steps)."""
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
    if result.size == 0 or not prog.prog.shape[0]:
        return dispatcher.run_launch(spec, launch)
    geo = _conv_side_geometry if lead.op == "conv2d" else _matmul_side_geometry
    sgeo, flat = geo(shape, arrs, result)
    flat += [_dummy(dt)] * (MAX_SIDES - len(flat))
    sgeo.flags.writeable = False
    launch.extra["steps"] = (prog.prog, prog.pattrs, tuple(flat), sgeo)
    return dispatcher.run_launch(spec, launch)


def _unaliased_side(result, s):
    if not is_planning() and np.may_share_memory(result, s):
        return s.copy()         # the driver stores tiles while later tiles still read sides
    return s


def _matmul_side_geometry(shape, arrs, result):
    """sgeo (MAX_SIDES, 4) = (offset, flattened-batch stride, row, column stride) per side
    and the sides' flat buffers, for the GEMM driver's epilogue program."""
    sgeo = np.zeros((MAX_SIDES, 4), np.int64)
    flat = []
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
            s = np.ascontiguousarray(np.broadcast_to(s, shape))
            st = element_strides(s)
            bstr = st[-3] if len(shape) > 2 else 0
        buf, off = flat_view(s)
        sgeo[i] = (off, bstr, st[-2], st[-1])
        flat.append(_readonly(buf))
    return sgeo, flat


def _conv_side_geometry(shape, arrs, result):
    """cgeo (MAX_SIDES, 5) = (offset, n, channel, row, column stride) per side and the
    sides' flat buffers, for the conv driver's epilogue program: any strided view broadcast
    to (N, M, OH, OW) is read in place (per-channel sides: zero row and column strides)."""
    cgeo = np.zeros((MAX_SIDES, 5), np.int64)
    flat = []
    for i, s in enumerate(arrs):
        s = _unaliased_side(result, s)
        if element_strides(s) is None:
            s = np.ascontiguousarray(s)
        buf, off = flat_view(s)
        cgeo[i, 0] = off
        cgeo[i, 1:] = broadcast_strides(shape, s.shape, element_strides(s))
        flat.append(_readonly(buf))
    return cgeo, flat


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


def _tile(prog, p, b0, b1):
    """Tile shape (rows, columns) of a table for buckets b0 (rows), b1 (columns)."""
    hi1 = max(b1[1], 1)
    if prog.tail in (kfused.T_ROWWISE, kfused.T_REDUCE_ROWS):
        return max(1, CHUNK // hi1), hi1
    strided = any(abs(st[-1]) > 1 for st in p.strides[:2])
    if strided and p.m > 1:
        return 64, 64
    t1 = min(TILE_ELEMENTS, hi1)
    return max(1, TILE_ELEMENTS // t1), t1


def _table(fused, prog, dtype, p):
    b0, b1 = bucket(p.m, 1), bucket(p.n, 32)
    key = ("fused", fused.raw_key, dtype, p.layout_class(), b0, b1)
    table = config.cache.get(key)
    if table is None:
        t0, t1 = _tile(prog, p, b0, b1)
        first = int(prog.steps[0, 0])
        entries = _uniform_entries(b0[0], b0[1], t0, b1[0], b1[1], t1, first)
        entries.flags.writeable = False
        table = FusedTable(fused, dtype, (b0, b1), entries, (t0, t1), prog.steps, prog.pattrs,
                           prog.tail, (p.m, p.n))
        config.cache.put(key, table)
    return table


_DUMMY = {}


def _dummy(dt):
    d = _DUMMY.get(dt)
    if d is None:
        d = _readonly(np.zeros(1, dt))
        _DUMMY[dt] = d
    return d


def _launch(fused, prog, dtype, x, arrs, out, shape, explain):
    sig = (dtype, shape, x.shape, x.strides, out.shape, out.strides,
           tuple((a.shape, a.strides) for a in arrs))
    hit = fused._memo.get(sig)
    if hit is not None and not explain and config.cache.get(hit[0], count_miss=False) is not None:
        key, table, common, fctl = hit
    else:
        strides = _operand_strides(fused, prog, x, arrs, out, shape)
        if prog.tail in (kfused.T_ROWWISE, kfused.T_REDUCE_ROWS):
            p = _plane_keep_last(shape, strides)
        else:
            p = plane(shape, strides)
        check_outer(p)
        table = _table(fused, prog, dtype, p)
        if explain:
            from dynshape.tables.geometry import fused_call
            table.call = fused_call(fused, x, arrs, out, shape, p)
            return table
        offsets = [flat_view(out)[1], flat_view(x)[1]] + [flat_view(a)[1] for a in arrs]
        binder = _Binder(len(offsets))
        common = binder.bind(p, offsets)
        fctl = np.zeros(kfused.F_SIZE, np.int64)
        fctl[kfused.F_T0], fctl[kfused.F_T1] = table.tile
        fctl[kfused.F_TAIL] = prog.tail
        fctl[kfused.F_TCODE] = prog.tcode
        fctl[kfused.F_SPLIT] = prog.split
        fctl[kfused.F_EPS] = prog.eps_at
        fctl[kfused.F_NSIDES] = len(arrs)
        fctl.flags.writeable = False
        key = ("fused", fused.raw_key, dtype, p.layout_class(), table.bucket[0],
               table.bucket[1])
        if len(fused._memo) >= 256:
            fused._memo.clear()
        fused._memo[sig] = (key, table, common, fctl)
    if explain:
        return table
    dt = x.dtype
    sides = [_readonly(flat_view(a)[0]) for a in arrs]
    sides += [_dummy(dt)] * (MAX_SIDES - len(sides))
    oflat = flat_view(out)[0]
    # the driver writes integer sums to ``oi`` and integer means to ``of`` (even when the
    # chain dtype is int64 itself), everything else to ``o``
    if dt.kind == "i" and prog.tail in (kfused.T_REDUCE_ROWS, kfused.T_REDUCE_ALL) \
            and REDUCE_OPS[prog.tcode] in ("sum", "mean"):
        o = np.zeros(1, dt)
        oi = oflat if REDUCE_OPS[prog.tcode] == "sum" else np.zeros(1, np.int64)
        of = oflat if REDUCE_OPS[prog.tcode] == "mean" else np.zeros(1, np.float64)
    else:
        o, oi, of = oflat, np.zeros(1, np.int64), np.zeros(1, np.float64)
    drivers.get("fused", dtype)(_readonly(flat_view(x)[0]), o, oi, of, common, table.entries,
                                prog.prog, prog.pattrs, fctl, tuple(sides))
    config.counters["driver_calls"] += 1
    return table


class _Binder:
    """The common area of a call (the standard layout, operands: out, x, sides)."""

    def __init__(self, n_operands):
        from dynshape.tables.param_table import ParamTable
        self._t = ParamTable("unary", "fused", "float32", "cpu", CATALOG.hash, ((0, 0), (0, 0)),
                             np.zeros((0, 7), np.int64), np.zeros(0, np.int64), n_operands, 0, 0,
                             "simplified", 0.0)

    def bind(self, p, offsets):
        c = self._t.bind(p, offsets)
        c.flags.writeable = False
        return c
