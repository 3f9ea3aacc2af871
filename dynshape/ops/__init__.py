"""Op specs: validate inputs, infer output shape and dtype, and describe the launch.

Each op registers an :class:`OpSpec`; ``prepare`` turns user arguments into a
:class:`Launch` that an executor runs through a family driver.
"""
import contextlib
import contextvars

import numpy as np

from dynshape.errors import DtypeError, OpAttributeError, OutputError, ShapeError, UnknownOpError

_REGISTRY = {}
_planning = contextvars.ContextVar("dynshape_planning", default=False)
#: the device call in progress (``dynshape.cuda.call.DeviceCall``), or None
_device = contextvars.ContextVar("dynshape_device_call", default=None)


def device_call(call):
    """Within a device call, operands become device stand-ins and outputs are allocated on
    the call's device (returns the token for :func:`end_device_call`)."""
    return _device.set(call)


def end_device_call(token):
    _device.reset(token)


def device_active():
    """The device call in progress (its operands are layout stand-ins: never read them on
    the host), or None."""
    return _device.get()


@contextlib.contextmanager
def planning():
    """Within this block ``new_output`` allocates nothing (explain: tables, no results)."""
    token = _planning.set(True)
    try:
        yield
    finally:
        _planning.reset(token)


def is_planning():
    return _planning.get()


def placeholder(shape, dtype, writeable=False):
    """A C-strided array of ``shape`` over a single element: layout without memory."""
    dt = np.dtype(dtype)
    strides = []
    acc = dt.itemsize
    for s in reversed(shape):
        strides.insert(0, acc)
        acc *= max(s, 1)
    return np.lib.stride_tricks.as_strided(np.zeros(1, dt), tuple(shape), tuple(strides),
                                           writeable=writeable)


def new_output(shape, dtype):
    """Allocate an op's output (a memory-less placeholder while planning)."""
    if _planning.get():
        return placeholder(shape, dtype, writeable=True)
    dev = _device.get()
    if dev is not None:
        return dev.empty(shape, dtype)
    return np.empty(shape, dtype=dtype)


class Launch:
    """One driver call: output view, input views (already broadcast-compatible), the op's
    attribute array as its driver reads it (``fattrs``), whether OVERLAP tails are allowed,
    the attributes that change the table (part of the cache key)."""
    __slots__ = ("family", "op", "dtype", "out", "inputs", "result", "fattrs", "overlap_ok",
                 "table_attrs", "finalize", "extra", "target", "ran")

    def __init__(self, family, op, dtype, out, inputs, result, fattrs=None, overlap_ok=True,
                 table_attrs=(), finalize=None, extra=None):
        self.family = family
        self.op = op
        self.dtype = dtype
        self.out = out
        self.inputs = inputs
        self.result = result
        self.fattrs = fattrs
        self.overlap_ok = overlap_ok
        self.table_attrs = table_attrs
        self.finalize = finalize
        self.extra = extra if extra is not None else {}
        self.target = "cpu"
        self.ran = None         # (key, table, bound) once an executor has run it


class OpSpec:
    """Base of op specs: name, family, accepted dtypes, attribute schema (name -> default)."""
    name = None
    family = None
    executor = "plane"
    attrs = {}

    def __init__(self, name):
        self.name = name

    def check_attrs(self, attrs):
        unknown = set(attrs) - set(self.attrs)
        if unknown:
            accepted = ", ".join(sorted(self.attrs)) or "none"
            raise OpAttributeError(f"{self.name}: unknown attribute(s) "
                                   f"{', '.join(sorted(unknown))}; accepted: {accepted}")
        merged = dict(self.attrs)
        merged.update(attrs)
        return merged

    def prepare(self, inputs, out, attrs):
        raise NotImplementedError


#: the modules of the built-in op specs, each with a ``SPECS`` list (imported on first use)
SPEC_MODULES = ("elementwise", "reduction", "rowwise", "matmul", "pool", "conv")
_loaded = []


def _registry():
    if not _loaded:
        import importlib
        for name in SPEC_MODULES:
            for spec in importlib.import_module(f"dynshape.ops.{name}").SPECS:
                _REGISTRY.setdefault(spec.name, spec)
        _loaded.append(True)
    return _REGISTRY


def register(spec):
    """Add (or replace) an op: ``spec`` is an :class:`OpSpec` whose ``executor`` names a
    registered executor (the extension point for new ops)."""
    _registry()[spec.name] = spec
    return spec


def get(name):
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        pass
    try:
        return _registry()[name]
    except (KeyError, TypeError):
        raise UnknownOpError(f"unknown op {name!r}; known ops: {', '.join(known())}") from None


def known():
    return sorted(_registry())


def describe():
    """One dict per registered op (sorted by family, then name): ``name``, ``family``,
    ``dtypes`` (the input dtypes it accepts) and ``attributes`` (name -> default)."""
    from dynshape_kernels.catalog import CATALOG
    rows = []
    for name, spec in _registry().items():
        dtypes = getattr(spec, "accepted", None)
        if dtypes is None:
            fam = CATALOG.families.get(spec.family)
            dtypes = fam.dtypes if fam is not None else ()
        if spec.family == "copy":
            dtypes = ("any dtype of 1, 2, 4 or 8 bytes",)
        rows.append({"name": name, "family": spec.family, "dtypes": tuple(dtypes),
                     "attributes": dict(spec.attrs)})
    return sorted(rows, key=lambda r: (r["family"], r["name"]))


def as_array(x, what):
    dev = _device.get()
    if dev is not None:
        return dev.operand(x, what)
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__cuda_array_interface__") or type(x).__name__ == "FakeCUDAArray":
        raise DtypeError(f"{what}: a CUDA array among host operands; pass device arrays "
                         f"only (they run on the cuda target) or NumPy arrays only")
    try:
        return np.asarray(x)
    except Exception as exc:
        raise DtypeError(f"{what}: cannot be read as an array ({exc})") from None


_NAMES = {np.dtype(d): d for d in ("float32", "float64", "int32", "int64", "float16")}


def dtype_name(dtype):
    """The name of a dtype the kernels may know (a dict lookup: ``dtype.name`` is slow),
    bfloat16 (``ml_dtypes``) included, or None."""
    name = _NAMES.get(dtype)
    if name is None and isinstance(dtype, np.dtype) and dtype.name == "bfloat16":
        _NAMES[dtype] = name = "bfloat16"
    return name


def is_float(dtype):
    """Floating point, the half-precision storage formats included (bfloat16's NumPy kind
    is "V")."""
    return dtype.kind == "f" or dtype_name(dtype) == "bfloat16"


def as_dtype(dtype):
    """``np.dtype(dtype)``, where the name "bfloat16" imports ml_dtypes (on demand only)."""
    if isinstance(dtype, str) and dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise DtypeError("bfloat16 needs the ml_dtypes package (pip install ml_dtypes)") \
                from None
        return np.dtype(ml_dtypes.bfloat16)
    try:
        return np.dtype(dtype)
    except TypeError:
        raise DtypeError(f"unknown dtype {dtype!r}; accepted: a NumPy dtype name such as "
                         f"float32, float64, int32, int64, float16, bfloat16 (see: dynshape "
                         f"ops)") from None


def check_dtype(op, dtype, accepted):
    """The dtype's name if it is in ``accepted``; otherwise a DtypeError listing what is
    accepted."""
    name = _NAMES.get(dtype) or dtype_name(dtype)
    if name not in accepted:
        raise DtypeError(f"{op}: dtype {dtype} is not supported; accepted: {', '.join(accepted)}")
    return name


def check_out(out, shape, dtype, op):
    if not isinstance(out, np.ndarray):
        raise DtypeError(f"{op}: out must be a NumPy array, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ShapeError(f"{op}: out has shape {out.shape}, the result has shape {tuple(shape)}")
    if out.dtype != dtype:
        raise DtypeError(f"{op}: out has dtype {out.dtype}, the result has dtype {dtype}")
    if not out.flags.writeable:
        raise OutputError(f"{op}: out is read-only; pass a writeable array (or none)")
    return out


def normalize_axis(axis, ndim, op):
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise OpAttributeError(f"{op}: axis must be an integer, got {axis!r}")
    if not -ndim <= axis < max(ndim, 1):
        raise OpAttributeError(f"{op}: axis {axis} is out of range for an input of rank {ndim} "
                               f"(accepted: {-ndim}..{ndim - 1})")
    return int(axis) % max(ndim, 1)
