"""conv2d op spec: ONNX Conv semantics on NCHW float32 / float64 arrays.

``run("conv2d", x, w, b=None, *, strides=(1, 1), pads=(0, 0, 0, 0), auto_pad="NOTSET",
dilations=(1, 1), group=1, kernel_shape=None, activation=None, residual=None, out=None)``

* ``x`` (N, C, H, W); ``w`` (M, C/group, KH, KW); ``b`` (M,) or None. All of x's dtype
  (float32 or float64). x and residual are read in place through their strides (sliced,
  transposed, negative-step views are never copied); w and b are made C-contiguous (a copy of
  a parameter only when it is not already).
* ``pads``: ONNX order (top, left, bottom, right), or (pad_h, pad_w) for symmetric padding,
  or one int for all four; >= 0. ``auto_pad``: "NOTSET" (use pads), "SAME_UPPER" /
  "SAME_LOWER" (output size ceil(H / stride); the odd padding unit goes at the end / the
  beginning), "VALID" (no padding). Explicit non-zero pads together with another auto_pad
  are refused, as ONNX does.
* ``strides``, ``dilations``: an int or a pair, >= 1. ``group`` divides C and M;
  ``group == C`` with M == C is depthwise. ``kernel_shape``, if given, must equal w's.
* Output (N, M, OH, OW) with ``OH = (H + pad_top + pad_bottom - ((KH-1)*DH + 1)) // SH + 1``
  (likewise OW); refused when the dilated kernel is larger than the padded input.
* Epilogue, fused into the same driver call: ``y = act(conv(x, w) + b + residual)`` where
  ``residual`` is an array of the output's shape and dtype (any strides; it may be ``out``
  itself) and ``activation`` is None, the name of a unary op of the catalog (relu, abs, neg,
  exp, log, sqrt, reciprocal, sigmoid, tanh, gelu, gelu_tanh, silu, leaky_relu, clip), or
  ``(name, attrs)``: ``("leaky_relu", {"alpha": 0.1})`` (default alpha 0.01),
  ``("clip", {"min": 0, "max": 6})`` (defaults -inf, inf), ``("gelu", {"approximate":
  "tanh"})``.
* Tolerance against an exact (float64, then rounded) reference: ``|y - ref| <= rtol * S``
  elementwise with ``S = sum |x||w| + |b| + |residual|`` over the output's terms, rtol 1e-4
  for float32 and 1e-12 for float64 (before the activation; activations add their own
  documented error, see ``dynshape_kernels.cpu.mathfuncs``).
"""

import numpy as np
from dynshape_kernels.abi.storage import HALF_DTYPES
from dynshape_kernels.abi.vocabulary import IDENTITY

from dynshape.errors import ArgumentError, DeviceError, DtypeError, OpAttributeError, ShapeError
from dynshape.runtime.layout import same_view
from dynshape.ops import activation, attributes
from dynshape.ops.attributes import AUTO_PADS, is_int as _is_int  # noqa: F401
from dynshape.ops import (Launch, OpSpec, as_array, check_dtype, check_out, device_active,
                          is_planning, new_output)

FLOAT_DTYPES = ("float32", "float64") + HALF_DTYPES


def _int_tuple(name, v, n, lo, accepted):
    return attributes.int_tuple("conv2d", name, v, n, lo, accepted)


def _activation(act):
    """(op code, attribute 0, attribute 1) of the epilogue's activation (identity: none)."""
    r = activation.resolve("conv2d", act)
    return (IDENTITY, 0.0, 0.0) if r is None else r


def _same_pads(size, stride, eff, upper):
    out = -(-size // stride)
    total = max((out - 1) * stride + eff - size, 0)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def output_size(size, pad0, pad1, k, stride, dilation, axis):
    """Output length along one spatial axis; ShapeError when the kernel does not fit."""
    eff = (k - 1) * dilation + 1
    padded = size + pad0 + pad1
    if eff > padded:
        raise ShapeError(f"conv2d: the dilated kernel ({eff} along {axis}: size {k}, dilation "
                         f"{dilation}) is larger than the padded input ({size} + {pad0} + "
                         f"{pad1} = {padded})")
    return (padded - eff) // stride + 1


class ConvSpec(OpSpec):
    family = "conv"
    executor = "conv"
    attrs = {"strides": (1, 1), "pads": (0, 0, 0, 0), "auto_pad": "NOTSET",
             "dilations": (1, 1), "group": 1, "kernel_shape": None, "activation": None,
             "residual": None}

    def prepare(self, inputs, out, attrs):
        if not 2 <= len(inputs) <= 3:
            raise ArgumentError(f"conv2d takes the inputs (x, w, b=None), got {len(inputs)} "
                                f"arrays")
        attrs = self.check_attrs(attrs)
        x = as_array(inputs[0], "conv2d input x")
        w = as_array(inputs[1], "conv2d weights w")
        b = inputs[2] if len(inputs) == 3 else None
        check_dtype("conv2d", x.dtype, FLOAT_DTYPES)
        dtype = x.dtype
        if x.ndim != 4:
            raise ShapeError(f"conv2d: x must have rank 4 (N, C, H, W), got shape {x.shape}")
        if w.ndim != 4:
            raise ShapeError(f"conv2d: w must have rank 4 (M, C/group, KH, KW), got shape "
                             f"{w.shape}")
        if w.dtype != dtype:
            raise DtypeError(f"conv2d: w has dtype {w.dtype}, x has {dtype}; they must match "
                             f"(accepted: one of {', '.join(FLOAT_DTYPES)} for both)")
        N, C, H, W = x.shape
        M, Cg, KH, KW = w.shape
        group = attrs["group"]
        if not _is_int(group) or group < 1:
            raise OpAttributeError(f"conv2d: group must be an integer >= 1, got {group!r}")
        group = int(group)
        if C % group:
            raise ShapeError(f"conv2d: the {C} input channels are not divisible by "
                             f"group={group}")
        if M % group:
            raise ShapeError(f"conv2d: the {M} output channels (w.shape[0]) are not divisible "
                             f"by group={group}")
        if Cg != C // group:
            raise ShapeError(f"conv2d: w has {Cg} input channels per group (w.shape[1]), "
                             f"expected C/group = {C}/{group} = {C // group}")
        if KH < 1 or KW < 1:
            raise ShapeError(f"conv2d: kernel size must be >= 1, got {(KH, KW)}")
        ks = attrs["kernel_shape"]
        if ks is not None and _int_tuple("kernel_shape", ks, 2, 1, (2,)) != (KH, KW):
            raise OpAttributeError(f"conv2d: kernel_shape {tuple(ks)} does not match the "
                                   f"weights' spatial shape {(KH, KW)}")
        sh, sw = _int_tuple("strides", attrs["strides"], 2, 1, (2,))
        dh, dw = _int_tuple("dilations", attrs["dilations"], 2, 1, (2,))
        pads = _int_tuple("pads", attrs["pads"], 4, 0, (2, 4))
        if len(pads) == 2:
            pads = (pads[0], pads[1], pads[0], pads[1])
        auto_pad = attrs["auto_pad"]
        if auto_pad not in AUTO_PADS:
            raise OpAttributeError(f"conv2d: auto_pad must be one of {', '.join(AUTO_PADS)}, "
                                   f"got {auto_pad!r}")
        if auto_pad != "NOTSET":
            if any(pads):
                raise OpAttributeError(f"conv2d: explicit pads {pads} cannot be combined with "
                                       f"auto_pad={auto_pad!r}")
            if auto_pad == "VALID":
                pads = (0, 0, 0, 0)
            else:
                upper = auto_pad == "SAME_UPPER"
                pt, pb = _same_pads(H, sh, (KH - 1) * dh + 1, upper)
                pl, pr = _same_pads(W, sw, (KW - 1) * dw + 1, upper)
                pads = (pt, pl, pb, pr)
        pt, pl, pb, pr = pads
        OH = output_size(H, pt, pb, KH, sh, dh, "H")
        OW = output_size(W, pl, pr, KW, sw, dw, "W")
        oshape = (N, M, OH, OW)
        code, a0, a1 = _activation(attrs["activation"])
        if out is None:
            out = new_output(oshape, dtype)
        else:
            out = check_out(out, oshape, dtype, "conv2d")
        planning = is_planning()
        if not planning and np.may_share_memory(out, x):
            x = x.copy()
        w = self._param(w, dtype, out, planning)
        if b is not None:
            b = as_array(b, "conv2d bias b")
            if b.dtype != dtype:
                raise DtypeError(f"conv2d: b has dtype {b.dtype}, x has {dtype}; they must "
                                 f"match")
            if b.shape != (M,):
                raise ShapeError(f"conv2d: b must have shape ({M},) (one value per output "
                                 f"channel), got {b.shape}")
            b = self._param(b, dtype, out, planning)
        res = attrs["residual"]
        if res is not None:
            res = as_array(res, "conv2d residual")
            if res.dtype != dtype:
                raise DtypeError(f"conv2d: residual has dtype {res.dtype}, x has {dtype}; "
                                 f"they must match")
            if res.shape != oshape:
                raise ShapeError(f"conv2d: residual must have the output's shape {oshape}, "
                                 f"got {res.shape}")
            if not planning and np.may_share_memory(out, res) and not same_view(out, res):
                res = res.copy()
        geo = {"N": N, "C": C, "H": H, "W": W, "M": M, "OH": OH, "OW": OW, "KH": KH, "KW": KW,
               "G": group, "Cg": Cg, "Mg": M // group, "sh": sh, "sw": sw, "dh": dh,
               "dw": dw, "pads": (pt, pl, pb, pr), "act": code}
        return Launch(self.family, self.name, dtype.name, out, [x, w, b], out,
                      fattrs=np.array([a0, a1], dtype=np.float64), overlap_ok=False,
                      table_attrs=(M, Cg, KH, KW, group, sh, sw, dh, dw, pt, pl),
                      extra={"geo": geo, "residual": res})

    @staticmethod
    def _param(p, dtype, out, planning):
        if not p.flags.c_contiguous:
            if device_active() is not None:
                raise DeviceError("conv2d: weights and bias on the device must be "
                                  "C-contiguous (they would be copied on the host)")
            p = np.ascontiguousarray(p)
        elif not planning and np.may_share_memory(p, out):
            p = p.copy()
        return p


SPECS = [ConvSpec("conv2d")]
