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
from dynshape.fusion.run import Fused, fuse  # noqa: E402

__all__ = ["Fused", "fuse"]
