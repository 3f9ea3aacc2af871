"""The CUDA fused-sequence kernel: a chain of elementwise steps interpreted per element.

Block ``(e, j)`` runs entry ``e`` of the fused table (a T0 x T1 tile of the coalesced
plane, clipped by bounds) for outer index ``j``; every thread takes elements of the tile in
turn, loads x, runs the step program (``abi.step_program``: unary ops, binary ops with a
constant or a side input on either side) in registers through the switches generated from
the vocabulary, and stores the result: one launch, no intermediate array. Side inputs are
the common area's operands 2.. (broadcast by stride 0). Chains ending in a row-wise op or a
reduction are not run here (the fused call refuses them on the device). Half precision
carries the format's bits from step to step: every step widens, computes in float32 and
rounds, as the ops one by one do (bit for bit); the attributes ``pattrs`` are float32 and a
constant operand is rounded to the format where a step uses it, as on the CPU.
"""
from numba import cuda

from ..abi.common_area import (C_M, C_N, C_NOUTER, C_OPS, E_ANCH0, E_ANCH1, E_OFF0, E_OFF1,
                               OP_BLOCK, OP_SM, OP_SN)
from ..abi.fused_table import F_T0, F_T1
from ..abi.step_program import (K_CONST_L, K_CONST_R, K_SIDE_L, K_SIDE_R, K_UNARY, P_ATTR,
                                P_CODE, P_KIND, P_SIDE)
from .half import access
from .scalars import switches
from .tiles import operand_strides, outer_offset, resolve


def make_fused(nbtype, dtype_kind):
    """The fused kernel of one dtype:
    ``(x, out, common, entries, prog, pattrs, fctl, side0, side1, side2, side3)``."""
    unary_op, binary_op = switches(dtype_kind)
    constant = access(dtype_kind, nbtype).store      # a half tile's constant: rounded, its bits

    def fused(x, o, common, entries, prog, pattrs, fctl, s0, s1, s2, s3):
        e = cuda.blockIdx.x
        r0, v0 = resolve(entries[e, E_OFF0], entries[e, E_ANCH0], common[C_M], fctl[F_T0])
        c0, v1 = resolve(entries[e, E_OFF1], entries[e, E_ANCH1], common[C_N], fctl[F_T1])
        osm, osn = operand_strides(common, 0)
        xsm, xsn = operand_strides(common, 1)
        nsteps = prog.shape[0]
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        j = cuda.blockIdx.y
        if v0 > 0 and v1 > 0:
            while j < common[C_NOUTER]:
                ob = outer_offset(common, 0, j)
                xb = outer_offset(common, 1, j)
                for i in range(tid, v0 * v1, nt):
                    r = r0 + i // v1
                    c = c0 + i % v1
                    v = x[xb + r * xsm + c * xsn]
                    for s in range(nsteps):
                        kind = prog[s, P_KIND]
                        code = prog[s, P_CODE]
                        if kind == K_UNARY:
                            a = prog[s, P_ATTR]
                            v = unary_op(code, v, pattrs[a], pattrs[a + 1])
                        elif kind == K_CONST_R:
                            v = binary_op(code, v, constant(pattrs[prog[s, P_ATTR]]))
                        elif kind == K_CONST_L:
                            v = binary_op(code, constant(pattrs[prog[s, P_ATTR]]), v)
                        else:
                            k = prog[s, P_SIDE]
                            blk = C_OPS + (2 + k) * OP_BLOCK
                            so = outer_offset(common, 2 + k, j) + r * common[blk + OP_SM] \
                                + c * common[blk + OP_SN]
                            if k == 0:
                                w = s0[so]
                            elif k == 1:
                                w = s1[so]
                            elif k == 2:
                                w = s2[so]
                            else:
                                w = s3[so]
                            if kind == K_SIDE_R:
                                v = binary_op(code, v, w)
                            elif kind == K_SIDE_L:
                                v = binary_op(code, w, v)
                    o[ob + r * osm + c * osn] = v
                j += cuda.gridDim.y
    return fused
