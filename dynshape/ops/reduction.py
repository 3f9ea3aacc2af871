"""Reduction op specs: sum, mean, max, min over any set of axes; argmax, argmin over one axis.

Semantics follow NumPy (``np.sum(x, axis, keepdims=...)`` and friends):

* ``axis``: None (all axes), an int or a tuple of ints, negative allowed; argmax/argmin take
  None (the flattened array, C order) or one int.
* output dtypes: sum of int32/int64 gives int64, mean of integers gives float64, max/min keep
  the dtype, argmax/argmin give int64; float16 and bfloat16 keep their format (accumulated
  in float64, rounded once).
* empty reductions: sum gives 0, mean gives NaN (without NumPy's warning); max, min, argmax
  and argmin over an empty axis raise ValueError (even when the result is empty, like NumPy).
* a reduction to a single element returns a NumPy scalar when ``out`` is None (like NumPy).

Accuracy is documented in :mod:`dynshape_kernels.cpu.reduce`.
"""
import math

import numpy as np
from dynshape_kernels.abi.storage import HALF_DTYPES, carrier
from dynshape_kernels.abi.vocabulary import REDUCE_OPS
from dynshape_kernels.abi.common_area import OUT_F64, OUT_I64, OUT_SAME

from dynshape.errors import ArgumentError, EmptyReductionError, OpAttributeError
from dynshape.ops import (Launch, OpSpec, as_array, check_dtype, check_out, device_active,
                          new_output)

DTYPES = ("float32", "float64", "int32", "int64") + HALF_DTYPES
_NP_NAMES = {"max": "maximum", "min": "minimum"}


def normalize_axes(axis, ndim, op, single=False):
    """Sorted tuple of non-negative axes; raises OpAttributeError naming the accepted range."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (list, tuple)):
        if single:
            raise OpAttributeError(f"{op}: axis must be None or a single integer, got {axis!r} "
                                   f"(reduce one axis at a time)")
        items = list(axis)
    else:
        items = [axis]
    res = []
    for a in items:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise OpAttributeError(f"{op}: axis must be None, an integer or a tuple of integers, "
                                   f"got {axis!r}")
        lo, hi = (-ndim, ndim - 1) if ndim else (-1, 0)
        if not lo <= a <= hi:
            raise OpAttributeError(f"{op}: axis {a} is out of range for an input of rank {ndim} "
                                   f"(accepted: {lo}..{hi})")
        res.append(int(a) % ndim if ndim else 0)
    if len(set(res)) != len(res):
        raise OpAttributeError(f"{op}: duplicate axes in {axis!r}")
    if ndim == 0:
        return ()
    return tuple(sorted(res))


class ReduceSpec(OpSpec):
    family = "reduce"
    executor = "reduce"

    def __init__(self, name):
        super().__init__(name)
        self.attrs = {"axis": None, "keepdims": False}
        self.arg = name in ("argmax", "argmin")

    def result_dtype(self, dtype):
        if self.arg:
            return np.dtype(np.int64), OUT_I64
        if dtype.kind == "i":
            if self.name == "sum":
                return np.dtype(np.int64), OUT_I64
            if self.name == "mean":
                return np.dtype(np.float64), OUT_F64
        return dtype, OUT_SAME

    def prepare(self, inputs, out, attrs):
        if len(inputs) != 1:
            raise ArgumentError(f"{self.name} takes 1 input array, got {len(inputs)}")
        attrs = self.check_attrs(attrs)
        x = as_array(inputs[0], f"{self.name} input")
        dname = check_dtype(self.name, x.dtype, DTYPES)
        keepdims = attrs["keepdims"]
        if not isinstance(keepdims, (bool, np.bool_)):
            raise OpAttributeError(f"{self.name}: keepdims must be True or False, "
                                   f"got {keepdims!r}")
        axes = normalize_axes(attrs["axis"], x.ndim, self.name, single=self.arg)
        count = math.prod(x.shape[d] for d in axes)
        kept_shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
        out_shape = (tuple(1 if d in axes else n for d, n in enumerate(x.shape)) if keepdims
                     else kept_shape)
        if count == 0 and self.arg:
            raise EmptyReductionError(f"{self.name} of an empty sequence: axis {attrs['axis']!r} has size 0; accepted: an axis of size >= 1 (sum and mean accept empty axes)")
        if count == 0 and self.name in _NP_NAMES:
            raise EmptyReductionError(f"zero-size array to reduction operation "
                                      f"{_NP_NAMES[self.name]}, which has no identity; "
                                      f"accepted: axes of size >= 1 (sum and mean accept "
                                      f"empty axes)")
        rdt, outkind = self.result_dtype(x.dtype)
        user_out = out
        if out is None:
            out = new_output(out_shape, rdt)
        else:
            out = check_out(out, out_shape, rdt, self.name)
            if np.may_share_memory(out, x):
                x = x.copy()              # the output overwrites part of the input
        # the output's kept dimensions as a view (the trailing Ellipsis keeps it a 0-d view
        # when every axis is reduced)
        kept_out = out[tuple(0 if d in axes else slice(None) for d in range(x.ndim))
                       + (Ellipsis,)] if keepdims else out
        placeholders = [np.empty(0, carrier(dname)), np.empty(0, np.int64),
                        np.empty(0, np.float64)]
        finalize = None
        if user_out is None and out.ndim == 0:
            finalize = _scalar
        return Launch(self.family, self.name, dname, kept_out, [x], out,
                      overlap_ok=False, finalize=finalize,
                      extra={"axes": axes, "ordered": self.arg, "outkind": outkind,
                             "placeholders": placeholders})


def _scalar(r):
    # a device result stays a 0-d device array (reading it would copy it to the host)
    return r if device_active() is not None else r[()]


SPECS = [ReduceSpec(name) for name in REDUCE_OPS]
