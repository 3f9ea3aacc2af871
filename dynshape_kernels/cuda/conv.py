"""The CUDA conv2d kernel (direct): ``y = act(conv(x, w) + bias + residual)`` per tile.

One block per table entry (image n, group g, a tile of output channels x output rows x
output columns, clipped to the real sizes); each thread takes outputs of the tile in turn
and walks K = Cg * KH * KW (taps in the padding skipped), accumulating in the dtype; the
epilogue adds the bias and the residual and applies the activation (a unary op code of the
vocabulary, identity for none), then runs the step program of a fused sequence led by the
conv (``prog``; none when empty) through the one device step interpreter (``cuda.steps``),
before the store. Side ``s`` of the program is read at ``cgeo[s, 0] + n*cgeo[s, 1] +
m*cgeo[s, 2] + oh*cgeo[s, 3] + ow*cgeo[s, 4]`` for output (n, m, oh, ow) (the CPU epilogue's
``cgeo``): the interpreter sees the output channel as its outer index and the image folded
into the offset. Sizes, strides and offsets come from the
conv common area (``abi.conv_table``); weights are C-contiguous (M, Cg, KH, KW). Half
precision widens x, the weights, bias and residual to float32, accumulates and runs the
epilogue in float32 (the activation's attributes float32) and rounds each output once (fused
steps after it run on the stored value, each rounding to the format).
"""
from numba import cuda, int64

from ..abi.conv_table import (CV_ACT, CV_BOFF, CV_BS, CV_CG, CV_DH, CV_DW, CV_H, CV_HASB,
                              CV_HASR, CV_KH, CV_KW, CV_MG, CV_OH, CV_OW, CV_ROFF, CV_RSC,
                              CV_RSH, CV_RSN, CV_RSW, CV_SH, CV_SW, CV_W, CV_XOFF, CV_XSC,
                              CV_XSH, CV_XSN, CV_XSW, CV_YOFF, CV_YSC, CV_YSH, CV_YSN, CV_YSW,
                              T_G, T_IH0, T_IW0, T_M0, T_MV, T_N, T_OH0, T_OW0, T_VH, T_VW)
from ..abi.step_program import G_COL, G_OFF, G_OUTER, G_ROW, MAX_SIDES, SGEO_COLS
from .half import access
from .scalars import switches
from .steps import make_steps


def make_conv(nbtype, kind):
    """The conv kernel of one float dtype: ``(x, w, bias, residual, y, common, entries, a0,
    a1, prog, pattrs, side0, ..., side3, cgeo)``."""
    unary_op, _ = switches("float")
    fmt = access(kind, nbtype)
    load, store, ctype = fmt.load, fmt.store, fmt.compute
    run_steps = make_steps(nbtype, kind)    # on the stored value: a half one rounds per step

    def conv(x, w, bias, res, y, common, entries, a0, a1, prog, pattrs, s0, s1, s2, s3,
             cgeo):
        e = cuda.blockIdx.x
        n = entries[e, T_N]
        g = entries[e, T_G]
        m0 = entries[e, T_M0]
        oh0 = entries[e, T_OH0]
        ow0 = entries[e, T_OW0]
        mv = min(entries[e, T_MV], common[CV_MG] - m0)
        vh = min(entries[e, T_VH], common[CV_OH] - oh0)
        vw = min(entries[e, T_VW], common[CV_OW] - ow0)
        if mv <= 0 or vh <= 0 or vw <= 0:
            return
        ih0 = entries[e, T_IH0]
        iw0 = entries[e, T_IW0]
        cg = common[CV_CG]
        kh = common[CV_KH]
        kw = common[CV_KW]
        H = common[CV_H]
        W = common[CV_W]
        sh = common[CV_SH]
        sw = common[CV_SW]
        dh = common[CV_DH]
        dw = common[CV_DW]
        code = common[CV_ACT]
        tid = cuda.threadIdx.x
        nt = cuda.blockDim.x
        xb = common[CV_XOFF] + n * common[CV_XSN] + g * cg * common[CV_XSC]
        nsteps = prog.shape[0]
        geo = cuda.local.array((MAX_SIDES, SGEO_COLS), int64)
        for s in range(MAX_SIDES):              # the image in the offset, channels outer
            geo[s, G_OFF] = cgeo[s, 0] + n * cgeo[s, 1]
            geo[s, G_OUTER] = cgeo[s, 2]
            geo[s, G_ROW] = cgeo[s, 3]
            geo[s, G_COL] = cgeo[s, 4]
        for i in range(tid, mv * vh * vw, nt):
            a = i // (vh * vw)
            rem = i - a * (vh * vw)
            r = rem // vw
            c = rem - r * vw
            m = g * common[CV_MG] + m0 + a
            acc = ctype(0)
            for ci in range(cg):
                for p in range(kh):
                    ih = ih0 + r * sh + p * dh
                    if ih < 0 or ih >= H:
                        continue
                    for q in range(kw):
                        iw = iw0 + c * sw + q * dw
                        if 0 <= iw < W:
                            acc += load(x[xb + ci * common[CV_XSC] + ih * common[CV_XSH]
                                          + iw * common[CV_XSW]]) \
                                * load(w[((m * cg + ci) * kh + p) * kw + q])
            if common[CV_HASB] != 0:
                acc += load(bias[common[CV_BOFF] + m * common[CV_BS]])
            oh = oh0 + r
            ow = ow0 + c
            if common[CV_HASR] != 0:
                acc += load(res[common[CV_ROFF] + n * common[CV_RSN] + m * common[CV_RSC]
                                + oh * common[CV_RSH] + ow * common[CV_RSW]])
            v = nbtype(store(unary_op(code, acc, a0, a1)))
            if nsteps > 0:
                v = nbtype(run_steps(prog, 0, nsteps, pattrs, v, geo, m, oh, ow, s0, s1, s2,
                                     s3))
            y[common[CV_YOFF] + n * common[CV_YSN] + m * common[CV_YSC] + oh * common[CV_YSH]
              + ow * common[CV_YSW]] = v
    return conv
