"""Pooling op specs: max_pool2d and avg_pool2d with ONNX MaxPool / AveragePool semantics.

``run("max_pool2d", x, kernel_shape=(kh, kw), strides=None, pads=None, auto_pad="NOTSET",
dilations=None, ceil_mode=False, out=None)`` and ``run("avg_pool2d", x, kernel_shape,
strides=None, pads=None, auto_pad="NOTSET", ceil_mode=False, count_include_pad=False,
out=None)`` on an NCHW float32 or float64 array of any strides. The output has x's dtype.

* ``strides`` and ``dilations`` default to 1; ``pads`` are in ONNX order
  ``(top, left, bottom, right)``, default 0, each ``0 <= pad < kernel`` (as ONNX requires).
* Output size per spatial dimension (``dk = (k - 1) * d + 1``, ``pb``/``pe`` begin/end pad):
  NOTSET: ``floor((n + pb + pe - dk) / s) + 1``, or with ``ceil_mode`` the ceiling, minus one
  when the last window would start in the end padding (``(out - 1) * s >= n + pb``), as ONNX
  and PyTorch do. SAME_UPPER / SAME_LOWER: ``ceil(n / s)``, with the total padding
  ``max(0, (out - 1) * s + dk - n)`` split evenly, the odd element at the end (UPPER) or at
  the beginning (LOWER). VALID: no padding, ``floor((n - dk) / s) + 1``. With an auto_pad
  other than NOTSET ``ceil_mode`` does not change the size (the ONNX formulas; ONNX Runtime
  differs for VALID with ceil_mode, and ignores dilations when sizing SAME padding).
* max: the largest tap of the window that lies in x (padding is never a candidate; NaN
  propagates). avg: the mean of the taps in x, or with ``count_include_pad`` the sum divided
  by the window clipped to the padded input (taps beyond the end padding, possible with
  ceil_mode, are not counted).

``out`` must have exactly the output's shape and dtype (any strides); an ``out`` that shares
memory with x makes x be copied first.
"""
from dataclasses import dataclass

import numpy as np
from dynshape_kernels.abi.storage import HALF_DTYPES

from dynshape.errors import ArgumentError, OpAttributeError, ShapeError
from dynshape.ops.attributes import AUTO_PADS, flag as _flag, int_tuple
from dynshape.ops import Launch, OpSpec, as_array, check_dtype, check_out, is_planning, new_output

FLOAT_DTYPES = ("float32", "float64") + HALF_DTYPES


@dataclass(frozen=True)
class PoolGeometry:
    """Resolved window geometry of one call (pads resolved from auto_pad)."""
    kernel: tuple          # (kh, kw)
    strides: tuple         # (sh, sw)
    dilations: tuple       # (dh, dw)
    pads: tuple            # (top, left, bottom, right)
    count_include_pad: bool
    in_hw: tuple           # (H, W)
    out_hw: tuple          # (OH, OW)

    def table_attrs(self):
        """What the table's entries depend on: the window and the begin pads."""
        return self.kernel + self.strides + self.dilations + self.pads[:2]

    def key(self):
        return (self.kernel, self.strides, self.dilations, self.pads, self.count_include_pad,
                self.in_hw)

    def describe(self):
        return (f"{self.kernel[0]}x{self.kernel[1]} stride {self.strides[0]}x{self.strides[1]} "
                f"dilation {self.dilations[0]}x{self.dilations[1]} pads {self.pads}")


def _ints(op, name, v, n, lo):
    return int_tuple(op, name, v, n, lo)


def output_size(n, k, s, d, pb, pe, auto_pad, ceil_mode):
    """(output size, begin pad, end pad) of one spatial dimension (module docstring)."""
    dk = (k - 1) * d + 1
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = -(-n // s)
        total = max(0, (out - 1) * s + dk - n)
        pb = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        return out, pb, total - pb
    if auto_pad == "VALID":
        pb = pe = 0
        ceil_mode = False
    span = n + pb + pe - dk
    if span < 0:
        return None, pb, pe
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + pb:
        out -= 1
    return out, pb, pe


class PoolSpec(OpSpec):
    family = "pool"
    executor = "pool"

    def __init__(self, name, attrs):
        super().__init__(name)
        self.attrs = attrs

    def check_attrs(self, attrs):
        if self.name == "avg_pool2d" and "dilations" in attrs:
            raise OpAttributeError("avg_pool2d: dilations are not supported (ONNX AveragePool "
                                   "without dilations); accepted: " + ", ".join(sorted(
                                       self.attrs)))
        return super().check_attrs(attrs)

    def geometry(self, shape, attrs):
        op = self.name
        if attrs["kernel_shape"] is None:
            raise OpAttributeError(f"{op}: kernel_shape is required (2 positive integers)")
        k = _ints(op, "kernel_shape", attrs["kernel_shape"], 2, 1)
        s = (1, 1) if attrs["strides"] is None else _ints(op, "strides", attrs["strides"], 2, 1)
        d = (1, 1) if attrs.get("dilations") is None else \
            _ints(op, "dilations", attrs["dilations"], 2, 1)
        pads = (0, 0, 0, 0) if attrs["pads"] is None else _ints(op, "pads", attrs["pads"], 4, 0)
        auto_pad = attrs["auto_pad"]
        if auto_pad not in AUTO_PADS:
            raise OpAttributeError(f"{op}: auto_pad must be one of {', '.join(AUTO_PADS)}, "
                                   f"got {auto_pad!r}")
        if auto_pad != "NOTSET" and any(pads):
            raise OpAttributeError(f"{op}: pads {pads} cannot be combined with auto_pad="
                                   f"{auto_pad!r}; give one of them")
        for i, (p, kk) in enumerate(zip(pads, k + k)):
            if p >= kk:
                raise OpAttributeError(f"{op}: pads {pads}: pad {p} of "
                                       f"{('top', 'left', 'bottom', 'right')[i]} must be smaller "
                                       f"than the kernel ({kk})")
        ceil_mode = _flag(op, "ceil_mode", attrs["ceil_mode"])
        cip = _flag(op, "count_include_pad", attrs.get("count_include_pad", False))
        H, W = shape[2], shape[3]
        if H == 0 or W == 0:
            raise ShapeError(f"{op}: x has shape {shape}; the spatial dimensions must be >= 1")
        oh, pt, pb = output_size(H, k[0], s[0], d[0], pads[0], pads[2], auto_pad, ceil_mode)
        ow, pl, pr = output_size(W, k[1], s[1], d[1], pads[1], pads[3], auto_pad, ceil_mode)
        if oh is None or ow is None:
            dk = ((k[0] - 1) * d[0] + 1, (k[1] - 1) * d[1] + 1)
            raise ShapeError(f"{op}: the window {dk[0]}x{dk[1]} (kernel {k}, dilations {d}) is "
                             f"larger than the padded input {H + pt + pb}x{W + pl + pr} "
                             f"(x {H}x{W}, pads {(pt, pl, pb, pr)})")
        return PoolGeometry(k, s, d, (pt, pl, pb, pr), cip, (H, W), (oh, ow))

    def prepare(self, inputs, out, attrs):
        if len(inputs) != 1:
            raise ArgumentError(f"{self.name} takes 1 input array (x, NCHW), got {len(inputs)}")
        attrs = self.check_attrs(attrs)
        x = as_array(inputs[0], f"{self.name} input")
        dtype = check_dtype(self.name, x.dtype, FLOAT_DTYPES)
        if x.ndim != 4:
            raise ShapeError(f"{self.name}: x must have rank 4 (N, C, H, W), got shape "
                             f"{x.shape}")
        g = self.geometry(x.shape, attrs)
        shape = x.shape[:2] + g.out_hw
        if out is None:
            out = new_output(shape, x.dtype)
        else:
            out = check_out(out, shape, x.dtype, self.name)
            if not is_planning() and np.may_share_memory(out, x):
                x = x.copy()
        return Launch(self.family, self.name, dtype, out, [x], out, overlap_ok=False,
                      table_attrs=g.table_attrs(), extra={"geometry": g})


_COMMON = {"kernel_shape": None, "strides": None, "pads": None, "auto_pad": "NOTSET",
           "ceil_mode": False}
SPECS = [PoolSpec("max_pool2d", dict(_COMMON, dilations=None)),
         PoolSpec("avg_pool2d", dict(_COMMON, count_include_pad=False))]
