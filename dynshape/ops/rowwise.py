"""Row-wise op specs: softmax, log_softmax, layer_norm, rms_norm (float32, float64, float16,
bfloat16).

* ``softmax(x, axis=-1)``, ``log_softmax(x, axis=-1)``: over one axis (any axis).
* ``layer_norm(x, weight=None, bias=None, axis=-1, epsilon=1e-5)``: like ONNX
  LayerNormalization, normalizes over the trailing axes ``axis .. ndim-1``:
  ``(x - mean) / sqrt(var + epsilon) * weight + bias`` (biased variance).
* ``rms_norm(x, weight=None, axis=-1, epsilon=1e-5)``: ``x / sqrt(mean(x**2) + epsilon) *
  weight`` over the same trailing axes.

weight and bias must broadcast to the normalized shape ``x.shape[axis:]`` without changing
it; they are converted to x's dtype and materialized with exactly that shape (a copy of a
parameter, never of x). The output has x's shape and dtype; ``out`` may be the very same view
as x (computed in place). Accuracy is documented in :mod:`dynshape_kernels.cpu.rowwise`.
"""
import numpy as np
from dynshape_kernels.abi.storage import HALF_DTYPES

from dynshape.errors import ArgumentError, DeviceError, DtypeError, OpAttributeError, ShapeError
from dynshape.ops import (Launch, OpSpec, as_array, check_dtype, check_out, device_active,
                          dtype_name, new_output)
from dynshape.ops.attributes import number as _number
from dynshape.ops.elementwise import _unalias
from dynshape.ops.reduction import normalize_axes

FLOAT_DTYPES = ("float32", "float64") + HALF_DTYPES


class RowwiseSpec(OpSpec):
    family = "rowwise"
    executor = "rowwise"

    def __init__(self, name, params=(), attrs=None):
        super().__init__(name)
        self.params = params          # names of the optional parameter inputs after x
        self.attrs = attrs or {"axis": -1}

    def prepare(self, inputs, out, attrs):
        n_max = 1 + len(self.params)
        if not 1 <= len(inputs) <= n_max:
            names = ", ".join(("x",) + tuple(f"{p}=None" for p in self.params))
            raise ArgumentError(f"{self.name} takes the inputs ({names}), got {len(inputs)} "
                                f"arrays")
        attrs = self.check_attrs(attrs)
        x = as_array(inputs[0], f"{self.name} input")
        check_dtype(self.name, x.dtype, FLOAT_DTYPES)
        axis = attrs["axis"]
        if isinstance(axis, (list, tuple)):
            raise OpAttributeError(f"{self.name}: axis must be a single integer, got {axis!r}")
        if x.ndim == 0:
            raise OpAttributeError(f"{self.name}: axis {axis} is out of range for an input of "
                                   f"rank 0 (a row-wise op needs at least one axis)")
        (a,) = normalize_axes(axis, x.ndim, self.name, single=True) if axis is not None \
            else (None,)
        if a is None:
            raise OpAttributeError(f"{self.name}: axis must be an integer, got None")
        axes = (a,) if self.name in ("softmax", "log_softmax") else tuple(range(a, x.ndim))
        eps = _number(self.name, "epsilon", attrs["epsilon"]) if "epsilon" in attrs else 0.0
        if eps < 0:
            raise OpAttributeError(f"{self.name}: epsilon must be >= 0, got {eps}")
        user_out = out is not None
        if out is None:
            out = new_output(x.shape, x.dtype)
        else:
            out = check_out(out, x.shape, x.dtype, self.name)
            x, _ = _unalias(out, x)       # the very same view is computed in place
        norm_shape = tuple(x.shape[d] for d in axes)
        params = []
        present = []
        for i, pname in enumerate(self.params):
            p = inputs[1 + i] if 1 + i < len(inputs) else None
            if p is None:
                params.append(np.zeros(1, dtype=x.dtype))
                present.append(False)
                continue
            params.append(self._param(pname, p, x.dtype, norm_shape, a, out, user_out))
            present.append(True)
        while len(params) < 2:
            params.append(np.zeros(1, dtype=x.dtype))
            present.append(False)
        return Launch(self.family, self.name, x.dtype.name, out, [x] + params, out,
                      fattrs=np.array([eps, float(present[0]), float(present[1])]),
                      overlap_ok=False,
                      extra={"axes": axes, "has_w": present[0], "has_b": present[1]})

    def _param(self, pname, p, dtype, norm_shape, a, out, user_out):
        p = as_array(p, f"{self.name} {pname}")
        if p.dtype.kind not in "fiu" and dtype_name(p.dtype) not in HALF_DTYPES:
            raise DtypeError(f"{self.name}: {pname} has dtype {p.dtype}; accepted: a real "
                             f"numeric dtype (converted to {dtype})")
        try:
            ok = p.ndim <= len(norm_shape) and np.broadcast_shapes(p.shape, norm_shape) == \
                norm_shape
        except ValueError:
            ok = False
        if not ok:
            raise ShapeError(f"{self.name}: {pname} has shape {p.shape}, expected the "
                             f"normalized shape {norm_shape} (x.shape[{a}:]) or a shape that "
                             f"broadcasts to it")
        if p.shape != norm_shape or p.dtype != dtype or not p.flags.c_contiguous:
            if device_active() is not None:
                raise DeviceError(f"{self.name}: {pname} on the device must have the "
                                  f"normalized shape {norm_shape}, dtype {dtype} and be "
                                  f"contiguous (got {p.shape}, {p.dtype}); it would be "
                                  f"converted on the host")
            p = np.ascontiguousarray(np.broadcast_to(p, norm_shape), dtype=dtype)
        if user_out and np.may_share_memory(p, out):
            p = p.copy()
        return p


SPECS = [RowwiseSpec("softmax"), RowwiseSpec("log_softmax"),
         RowwiseSpec("layer_norm", ("weight", "bias"), {"axis": -1, "epsilon": 1e-5}),
         RowwiseSpec("rms_norm", ("weight",), {"axis": -1, "epsilon": 1e-5})]
