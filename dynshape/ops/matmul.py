"""matmul (NumPy semantics) and gemm (ONNX semantics) with a bias / residual / activation
epilogue, on the matmul family's static micro-kernels.

Accuracy: every output element is one float32 (float64) dot product over K accumulated by
FMAs in the micro-kernel's order; the error is within ``K * eps * sum_k |a_ik * b_kj|``
(eps of the dtype), like any blocked GEMM. Tests check ``rtol = 4 * sqrt(K) * eps`` relative
to ``|a| @ |b|``. float16 / bfloat16 operands are widened to float32 as they are packed and
accumulated in float32 (the same bound with float32's eps), and each output is rounded once to
the format (plus half an ulp of the format).
"""
import numpy as np
from dynshape_kernels.abi.storage import HALF_DTYPES

from dynshape.errors import ArgumentError, DtypeError, OpAttributeError, ShapeError
from dynshape.ops import activation
from dynshape.ops import Launch, OpSpec, as_array, check_out, dtype_name, new_output
from dynshape.ops.elementwise import result_type

DTYPES = ("float32", "float64") + HALF_DTYPES
def activation_code(op, act):
    """The epilogue code of ``activation=`` (0: none; else the unary kernel op code + 1)."""
    r = activation.resolve(op, act, with_attributes=False)
    return 0 if r is None else r[0] + 1


def _float_dtype(op, *arrays):
    dt = result_type(arrays)
    if dtype_name(dt) not in DTYPES:
        got = ", ".join(str(a.dtype) for a in arrays)
        raise DtypeError(f"{op}: dtype {got} is not supported; accepted: "
                         f"{', '.join(DTYPES)} (mixed dtypes compute in the promoted one: "
                         f"float32 with float64 in float64, a half format with float32 in "
                         f"float32)")
    return dt


def _number(op, name, v):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                              np.floating)):
        raise OpAttributeError(f"{op}: {name} must be a real number, got {v!r}")
    v = float(v)
    if not np.isfinite(v):
        raise OpAttributeError(f"{op}: {name} must be finite, got {v}")
    return v


class MatmulLaunch(Launch):
    """Matmul launch: ``out3`` / ``a3`` / ``b3`` are (batch..., rows, cols) views of the
    output and operands (1-D operands promoted as NumPy does, without copying); ``cin``
    is read with ``beta`` (None: never), ``bias`` is (N,) or None, ``act`` the epilogue code."""


def _as_3(x, andim, bndim):
    """A view of a result-shaped array with the rows / columns NumPy drops for 1-D operands."""
    if andim == 1:
        x = x[..., None, :] if bndim > 1 else x[..., None]
    if bndim == 1:
        x = x[..., :, None]
    return x


def _launch(op, a, b, out, *, alpha=1.0, beta=0.0, cin=None, bias=None, act=0):
    if a.ndim == 0 or b.ndim == 0:
        raise ShapeError(f"{op}: operands must have at least 1 dimension, got shapes "
                         f"{a.shape} and {b.shape} (scalars: use mul)")
    dt = _float_dtype(op, a, b, *(x for x in (cin, bias) if x is not None))
    a, b = (x if x.dtype == dt else x.astype(dt) for x in (a, b))
    a3 = a[None, :] if a.ndim == 1 else a
    b3 = b[:, None] if b.ndim == 1 else b
    M, K = a3.shape[-2:]
    K2, N = b3.shape[-2:]
    if K != K2:
        raise ShapeError(f"{op}: inner dimensions differ: {a.shape} @ {b.shape} "
                         f"(a's last dimension {K} != b's {'only' if b.ndim == 1 else 'second-to-last'} "
                         f"dimension {K2})")
    try:
        batch = np.broadcast_shapes(a3.shape[:-2], b3.shape[:-2])
    except ValueError:
        raise ShapeError(f"{op}: batch dimensions {a.shape[:-2]} and {b.shape[:-2]} do not "
                         f"broadcast") from None
    shape = batch + ((M,) if a.ndim > 1 else ()) + ((N,) if b.ndim > 1 else ())
    if out is None:
        out = new_output(shape, dt)
        result = out
    else:
        check_out(out, shape, dt, op)
        result = out
    o3 = _as_3(out, a.ndim, b.ndim)
    if cin is not None:
        if cin.dtype != dt:
            cin = cin.astype(dt)
        try:
            cin = np.broadcast_to(cin, shape)
        except ValueError:
            raise ShapeError(f"{op}: C/residual of shape {cin.shape} does not broadcast to "
                             f"the result's shape {shape}") from None
        cin = _as_3(cin, a.ndim, b.ndim)
    if bias is not None:
        if bias.dtype != dt:
            bias = bias.astype(dt)
        if bias.ndim > 1 or (bias.ndim == 1 and bias.shape[0] not in (1, N)):
            raise ShapeError(f"{op}: bias must have shape ({N},) (or be a scalar), got "
                             f"{bias.shape}")
        bias = np.broadcast_to(bias, (N,))
    launch = MatmulLaunch("matmul", "matmul", dt.name, o3, [a3, b3], result)
    launch.extra = {"alpha": alpha, "beta": beta if cin is not None else 0.0, "cin": cin,
                    "bias": bias, "act": act, "batch": batch, "mnk": (M, N, K)}
    return launch


class MatmulSpec(OpSpec):
    """``run("matmul", a, b, bias=None, residual=None, activation=None, out=None)``:
    ``activation(a @ b + bias + residual)`` with NumPy's matmul rules (1-D operands, batch
    broadcasting); operands of any strides are read in place."""
    family = "matmul"
    executor = "matmul"
    attrs = {"bias": None, "residual": None, "activation": None}

    def prepare(self, inputs, out, attrs):
        if len(inputs) != 2:
            raise ArgumentError(f"matmul takes 2 arrays (a, b), got {len(inputs)}")
        attrs = self.check_attrs(attrs)
        a, b = (as_array(x, f"matmul input {i}") for i, x in enumerate(inputs))
        bias = None if attrs["bias"] is None else as_array(attrs["bias"], "matmul bias")
        res = None if attrs["residual"] is None else as_array(attrs["residual"],
                                                              "matmul residual")
        return _launch("matmul", a, b, out, beta=1.0, cin=res, bias=bias,
                       act=activation_code("matmul", attrs["activation"]))


class GemmSpec(OpSpec):
    """``run("gemm", A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0, activation=None)``
    with ONNX Gemm semantics: ``activation(alpha * A' @ B' + beta * C)``, A' = A.T when
    transA (read in place), C broadcast to (M, N)."""
    family = "matmul"
    executor = "matmul"
    attrs = {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0, "activation": None}

    def prepare(self, inputs, out, attrs):
        if len(inputs) not in (2, 3):
            raise ArgumentError(f"gemm takes 2 or 3 arrays (A, B[, C]), got {len(inputs)}")
        attrs = self.check_attrs(attrs)
        arrs = [as_array(x, f"gemm input {i}") for i, x in enumerate(inputs)]
        a, b = arrs[0], arrs[1]
        c = arrs[2] if len(arrs) == 3 and arrs[2] is not None else None
        for name in ("transA", "transB"):
            if attrs[name] not in (0, 1, True, False):
                raise OpAttributeError(f"gemm: {name} must be 0 or 1, got {attrs[name]!r}")
        for name, x in (("A", a), ("B", b)):
            if x.ndim != 2:
                raise ShapeError(f"gemm: {name} must be 2-D, got shape {x.shape}")
        if c is not None and c.ndim > 2:
            raise ShapeError(f"gemm: C must broadcast to (M, N), got shape {c.shape}")
        a = a.T if attrs["transA"] else a
        b = b.T if attrs["transB"] else b
        return _launch("gemm", a, b, out, alpha=_number("gemm", "alpha", attrs["alpha"]),
                       beta=_number("gemm", "beta", attrs["beta"]), cin=c,
                       act=activation_code("gemm", attrs["activation"]))


SPECS = [MatmulSpec("matmul"), GemmSpec("gemm")]
