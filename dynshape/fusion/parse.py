"""Parsing fused sequences: each step validated against the op vocabulary and the ops' own
attribute schemas (see :mod:`dynshape.fusion.run` for the step syntax)."""
import numpy as np
from dynshape_kernels.abi.vocabulary import BINARY_OPS
from dynshape_kernels.abi.vocabulary import UNARY as VOCABULARY_UNARY

from dynshape import ops
from dynshape.errors import ArgumentError, OpAttributeError, UnknownOpError
from dynshape.ops.attributes import AUTO_PADS, int_tuple, is_number as _is_number

RUNNING = "_"
# ops that may lead a chain: the elementwise steps become their driver's epilogue program
_LEADS = ("matmul", "gemm", "conv2d")

#: unary steps: every public unary op of the vocabulary
UNARY = tuple(u.name for u in VOCABULARY_UNARY if u.public)
REDUCE = ("sum", "mean", "max", "min")
_ROWWISE_ATTRS = {"softmax": {"axis": -1}, "log_softmax": {"axis": -1},
                  "layer_norm": {"axis": -1, "epsilon": 1e-5, "weight": None, "bias": None},
                  "rms_norm": {"axis": -1, "epsilon": 1e-5, "weight": None}}


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
        int_tuple("conv2d", "strides", merged["strides"], 2, 1, (2,))
        int_tuple("conv2d", "dilations", merged["dilations"], 2, 1, (2,))
        int_tuple("conv2d", "pads", merged["pads"], 4, 0, (2, 4))
        if merged["kernel_shape"] is not None:
            int_tuple("conv2d", "kernel_shape", merged["kernel_shape"], 2, 1, (2,))
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
