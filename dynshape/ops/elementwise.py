"""Elementwise op specs: unary ops, binary ops with NumPy broadcasting, copy and transpose.

Output dtypes follow NumPy: transcendental ops on integer inputs give float64 (the input is
converted first), ``div`` on integers gives float64, mixed binary dtypes promote with
``np.result_type`` (Python scalars are weak, NEP 50).
"""
import numpy as np
from dynshape_kernels.abi.storage import HALF_DTYPES
from dynshape_kernels.abi.vocabulary import BINARY_OPS, FLOAT_ONLY_UNARY, UNARY

from dynshape.errors import (ArgumentError, DeviceError, DomainError, DtypeError, OpAttributeError,
                             ShapeError)
from dynshape.runtime.layout import same_view
from dynshape.ops import (Launch, OpSpec, as_array, check_dtype, check_out, device_active,
                          dtype_name, is_float, is_planning, new_output)
from dynshape.ops.attributes import number as _number
from dynshape.ops.lookup import uses_table, with_table

DTYPES = ("float32", "float64", "int32", "int64") + HALF_DTYPES
FLOAT_DTYPES = ("float32", "float64") + HALF_DTYPES
_F32 = np.dtype(np.float32)


def _arity(op, inputs, n):
    if len(inputs) != n:
        raise ArgumentError(f"{op} takes {n} input array{'s' if n > 1 else ''}, "
                            f"got {len(inputs)}")


def _output(op, out, shape, dtype):
    if out is None:
        return new_output(shape, dtype)
    if type(out) is np.ndarray and out.shape == shape and out.dtype == dtype \
            and out.flags.writeable:
        return out
    return check_out(out, shape, dtype, op)


def _unalias(out, inp):
    """(input to read, whether the output is the very same view).

    A partial overlap between out and an input is resolved like NumPy does: the input is
    copied first. An exact alias is computed in place (each element is read before it is
    written) but forbids OVERLAP tails.
    """
    if out is inp:
        return inp, True
    if not np.may_share_memory(out, inp) or is_planning():
        return inp, False
    if same_view(out, inp):
        return inp, True
    return inp.copy(), False


class UnarySpec(OpSpec):
    family = "unary"

    def __init__(self, name, attrs=None, accepted=DTYPES):
        super().__init__(name)
        self.attrs = attrs or {}
        self.accepted = accepted
        self._no_attrs = {}

    def no_attrs(self, dtype):
        """The (unused) attribute array of a call without attributes, as the driver reads it."""
        a = self._no_attrs.get(dtype)
        if a is None:
            a = self._no_attrs[dtype] = self._readonly(np.zeros(2, dtype=_attr_dtype(dtype)))
        return a

    @staticmethod
    def _readonly(a):
        a.flags.writeable = False
        return a

    def kernel_op(self, attrs):
        """The vocabulary's kernel op this call runs (an attribute may select a variant)."""
        for name, (_, choices) in _SELECTORS.get(self.name, {}).items():
            v = attrs[name]
            if v not in choices:
                raise OpAttributeError(f"{self.name}: {name} must be "
                                       f"{' or '.join(map(repr, choices))}, got {v!r}")
            return choices[v]
        return self.name

    def op_attrs(self, attrs, dtype):
        """The op's two attribute values in the operand dtype (float32 for a half-precision
        operand), as the driver reads them."""
        dtype = _attr_dtype(dtype)
        if self.name == "leaky_relu":
            return np.array([_number(self.name, "alpha", attrs["alpha"]), 0], dtype=dtype)
        if self.name == "clip":
            lo, hi = attrs["min"], attrs["max"]
            if dtype.kind == "f":
                lo = -np.inf if lo is None else _number("clip", "min", lo)
                hi = np.inf if hi is None else _number("clip", "max", hi)
                return np.array([lo, hi], dtype=dtype)
            info = np.iinfo(dtype)
            bounds = []
            for name, v, default in (("min", lo, info.min), ("max", hi, info.max)):
                if v is None:
                    bounds.append(int(default))
                    continue
                f = _number("clip", name, v)
                if not f.is_integer():
                    raise OpAttributeError(f"clip: {name}={v} is not an integer, which an "
                                           f"{dtype} input needs")
                bounds.append(min(max(int(v), int(info.min)), int(info.max)))
            return np.array(bounds, dtype=dtype)
        return self.no_attrs(dtype)

    def prepare(self, inputs, out, attrs):
        _arity(self.name, inputs, 1)
        x = inputs[0]
        if type(x) is not np.ndarray:
            x = as_array(x, f"{self.name} input")
        name = check_dtype(self.name, x.dtype, self.accepted)
        if attrs or self.attrs:
            attrs = self.check_attrs(attrs)
            op = self.kernel_op(attrs)
        else:
            op = self.name
        if op in FLOAT_ONLY_UNARY and not is_float(x.dtype):
            x = x.astype(np.float64)
            name = "float64"
        out = _output(self.name, out, x.shape, x.dtype)
        x, alias = _unalias(out, x)
        op_attrs = self.op_attrs(attrs, x.dtype) if self.attrs else self.no_attrs(x.dtype)
        if uses_table(op, name) and device_active() is None and not is_planning():
            op_attrs = with_table(self.name, op, name, op_attrs, attrs)
        return Launch(self.family, op, name, out, [x], out, op_attrs, not alias)


#: items of 4 and 8 bytes are copied on the CPU by the unary family's float driver of that
#: size (its copy op moves the bits: loads and stores, no arithmetic, NaN payloads kept), so
#: no separate driver is compiled for them (the copy family's uint32 driver took 5.5 s of
#: the demo's first run); 1- and 2-byte items use the copy family (the float16 unary
#: driver widens to float32, which would quiet signalling NaNs)
ITEMS_AS_FLOAT = {4: np.dtype(np.float32), 8: np.dtype(np.float64)}


def copy_driver(itemsize):
    """``(family, dtype)`` of the CPU driver that copies items of ``itemsize`` bytes."""
    if itemsize in ITEMS_AS_FLOAT:
        return "unary", ITEMS_AS_FLOAT[itemsize].name
    return "copy", f"uint{8 * itemsize}"


class CopySpec(OpSpec):
    """copy: materialise any strided view; transpose: materialise a permutation of axes."""
    family = "copy"

    def __init__(self, name):
        super().__init__(name)
        self.attrs = {"axes": None} if name == "transpose" else {}

    def prepare(self, inputs, out, attrs):
        _arity(self.name, inputs, 1)
        attrs = self.check_attrs(attrs)
        x = as_array(inputs[0], f"{self.name} input")
        if self.name == "transpose":
            axes = attrs["axes"]
            try:
                x = x.transpose(axes) if axes is not None else x.T
            except (ValueError, TypeError) as exc:
                raise OpAttributeError(f"transpose: bad axes {axes!r} for an input of rank "
                                       f"{x.ndim}: {exc}") from None
        if x.dtype.hasobject or x.itemsize not in (1, 2, 4, 8):
            raise DtypeError(f"{self.name}: dtype {x.dtype} is not supported; accepted: any "
                             f"non-object dtype of 1, 2, 4 or 8 bytes")
        out = _output(self.name, out, x.shape, x.dtype)
        read, alias = _unalias(out, x)
        family, u = "copy", np.dtype(f"uint{8 * x.itemsize}")
        if device_active() is None:
            family, name = copy_driver(x.itemsize)
            u = np.dtype(name)
        # The driver moves the items through views of the caller's memory: a replay can make
        # the same views of later arrays (not when the input had to be copied first).
        same_memory = read is x and x.ndim > 0
        return Launch(family, "copy", u.name, out.view(u) if out.ndim else out.reshape(1).view(u),
                      [read.view(u) if read.ndim else read.reshape(1).view(u)], out,
                      fattrs=np.zeros(2, dtype=u), overlap_ok=True,
                      extra={"reinterpreted": same_memory})


class BinarySpec(OpSpec):
    family = "binary"

    def prepare(self, inputs, out, attrs):
        _arity(self.name, inputs, 2)
        self.check_attrs(attrs)
        raw = [v if isinstance(v, (int, float)) and not isinstance(v, bool)
               else as_array(v, f"{self.name} input {i}") for i, v in enumerate(inputs)]
        try:
            res = result_type(raw)
        except TypeError as exc:
            raise DtypeError(f"{self.name}: cannot combine the input dtypes ({exc})") from None
        if self.name == "div" and res.kind in "iub":
            res = np.dtype(np.float64)
        name = check_dtype(self.name, res, DTYPES)
        dev = device_active()
        if dev is not None:
            if self.name == "pow" and res.kind == "i":
                raise DeviceError("pow: integer powers of device arrays are not supported (the "
                                  "exponents are checked on the host); pass float operands")
            a, b = (dev.cast(v, res, f"{self.name} input {i}") for i, v in enumerate(raw))
        else:
            a, b = (np.asarray(v, dtype=res) for v in raw)
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise ShapeError(f"{self.name}: shapes {a.shape} and {b.shape} do not broadcast "
                             f"(NumPy rules: trailing dimensions must match or be 1)") from None
        if self.name == "pow" and res.kind == "i" and b.size and b.min() < 0:
            raise DomainError("pow: integers to negative integer powers are not allowed; accepted: "
                              "exponents >= 0, or float operands")
        out = _output(self.name, out, shape, res)
        a, alias_a = _unalias(out, a)
        b, alias_b = _unalias(out, b)
        # the 0-d arrays made of operands that were not arrays (numbers): a replay of the
        # call converts each later call's numbers to their dtypes (runtime/replay.py)
        extra = {"converted": {i: v for i, v, u in ((0, a, inputs[0]), (1, b, inputs[1]))
                             if type(u) is not np.ndarray}}
        if self.name == "pow" and res.kind == "f" and type(raw[1]) in (int, float) \
                and raw[1] == 2:
            # x ** 2 with a Python number is the correctly rounded product x * x, with no
            # power computed
            return Launch(self.family, "mul", name, out, [a, a], out, None, not alias_a,
                          extra=extra)
        # integer pow validates its exponents' values: such a call is never replayed
        extra["reads_data"] = self.name == "pow" and res.kind == "i"
        return Launch(self.family, self.name, name, out, [a, b], out, None,
                      not (alias_a or alias_b), extra=extra)


def _attr_dtype(dtype):
    return _F32 if dtype_name(dtype) in HALF_DTYPES else dtype


def result_type(operands):
    """NumPy's ``result_type`` of arrays and Python scalars (weak), extended to the
    half-precision storage formats as NumPy treats float16: a format with itself (and Python
    scalars and booleans) stays; float16 with bfloat16 gives float32; with float32 or float64
    the wider float; with int32 or int64 float64."""
    # NumPy scalars (np.float64 is a float too) count by their dtype, as in NumPy
    dts = [v.dtype for v in operands if hasattr(v, "dtype")]
    halves = [d for d in dts if dtype_name(d) in HALF_DTYPES]
    if not halves:
        return np.result_type(*operands)
    # booleans, like Python scalars, leave a half format as it is
    others = [d for d in dts if dtype_name(d) not in HALF_DTYPES and d.kind != "b"]
    if not others:
        return halves[0] if len({dtype_name(d) for d in halves}) == 1 else _F32
    r = np.result_type(*others)
    return np.dtype(np.float64) if r.kind in "iub" else np.result_type(r, _F32)


def _unary_spec(u):
    """The op spec of a public unary op of the vocabulary."""
    attrs = dict(u.attrs)
    if u.name in _SELECTORS:
        attrs.update({name: default for name, (default, _) in _SELECTORS[u.name].items()})
    return UnarySpec(u.name, attrs, FLOAT_DTYPES if u.ints == "refuse" else DTYPES)


#: attributes that select another kernel op of the vocabulary: op -> {attribute: (default,
#: {value: kernel op})}
_SELECTORS = {"gelu": {"approximate": ("none", {"none": "gelu", "tanh": "gelu_tanh"})}}

SPECS = ([_unary_spec(u) for u in UNARY if u.public]
         + [CopySpec("copy"), CopySpec("transpose")]
         + [BinarySpec(name) for name in BINARY_OPS])
